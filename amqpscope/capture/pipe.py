"""Standard input as a capture file (`amqpscope read -`, as `tcpdump -r -` and `tshark -r -`).

A pipe cannot seek or tell; the readers only read forward, but pcapng's keeps each block's offset
for its findings, so the pipe counts what it has given. Not compiled with the hot path: mypyc
cannot subclass `io.RawIOBase`.
"""

from __future__ import annotations

import io
import os

#: the path that means standard input
STDIN = "-"


class CountingPipe(io.RawIOBase):
    """A readable file descriptor whose `tell()` is the number of bytes read from it."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd
        self._pos = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = os.read(self._fd, len(buffer))
        n = len(data)
        buffer[:n] = data
        self._pos += n
        return n

    def tell(self) -> int:
        return self._pos

    def fileno(self) -> int:
        return self._fd


def open_stdin(fd: int) -> io.BufferedReader:
    """Standard input (its file descriptor `fd`) as a buffered binary file that can `peek`."""
    return io.BufferedReader(CountingPipe(fd), buffer_size=1 << 16)
