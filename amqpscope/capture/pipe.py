"""Standard input as a capture file (`amqpscope read -`, as `tcpdump -r -` and `tshark -r -`),
and any other path that is a pipe (a FIFO, `<(zcat cap.pcap.gz)`, `/dev/stdin`).

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

    def __init__(self, fd: int, owner: io.FileIO | None = None) -> None:
        """`owner`: the file `fd` belongs to, closed with this one (standard input has none)."""
        super().__init__()
        self._fd = fd
        self._pos = 0
        self._owner = owner

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

    def close(self) -> None:
        super().close()
        if self._owner is not None:
            self._owner.close()


def open_stdin(fd: int) -> io.BufferedReader:
    """Standard input (its file descriptor `fd`) as a buffered binary file that can `peek`."""
    return io.BufferedReader(CountingPipe(fd), buffer_size=1 << 16)


def open_path(path: str, buffer_size: int) -> io.BufferedReader:
    """The file at `path`, buffered. One that cannot seek (a FIFO, a process substitution) is
    read as standard input is, through a `CountingPipe`: the readers' `tell()` then counts bytes
    instead of failing, which they would take for damage at the first block or at the end.
    Raises what `io.FileIO` raises."""
    raw = io.FileIO(path)
    if raw.seekable():
        return io.BufferedReader(raw, buffer_size=buffer_size)
    return io.BufferedReader(CountingPipe(raw.fileno(), raw), buffer_size=buffer_size)
