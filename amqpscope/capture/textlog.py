"""Opening an input that may be a capture or a text log (plain, gzip'd, or standard input).

Why here: `capture/` is the one layer that touches files. What an input is, is told by its
first bytes, not its name: a pcap or pcapng magic (inside gzip too) is a capture, anything else
is read as a text log. Standard input cannot be opened twice, so the bytes looked at are peeked
from the one buffered stream that is then read, by `CaptureReader` or `LogFile`.
"""

from __future__ import annotations

import codecs
import contextlib
import gzip
import io
import os
import sys
import zlib
from collections.abc import Iterator
from typing import IO, Final

from amqpscope.capture.files import CAPTURE_MAGICS, GZIP_MAGIC, CaptureError
from amqpscope.capture.pipe import STDIN, open_path, open_stdin
from amqpscope.findings import Finding, finding

#: bytes peeked to look inside a gzip stream
_PEEK: Final = 1 << 16
#: a text line longer than this is cut into pieces (a frame line is far shorter)
MAX_LINE: Final = 1 << 20


def open_stream(path: str) -> io.BufferedReader:
    """The file (or standard input for `-`), opened for reading; CaptureError when it cannot be."""
    try:
        if path == STDIN:
            return open_stdin(sys.stdin.fileno())
        return open_path(path, _PEEK)
    except FileNotFoundError:
        raise CaptureError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise CaptureError(f"{path}: is a directory, not a capture or log file") from None
    except PermissionError:
        raise CaptureError(f"{path}: permission denied") from None
    except OSError as exc:
        raise CaptureError(f"{path}: cannot open: {exc.strerror or exc}") from None


def head_of(stream: io.BufferedReader) -> tuple[bytes, bool]:
    """The first bytes of what the stream holds (gunzipped when it is gzip), and whether it is
    gzip; nothing is consumed."""
    try:
        raw = stream.peek(_PEEK)
    except OSError as exc:
        raise CaptureError(f"cannot read: {exc.strerror or exc}") from None
    if raw[:2] != GZIP_MAGIC:
        return raw, False
    try:
        return zlib.decompressobj(wbits=31).decompress(raw, _PEEK), True
    except zlib.error:
        return b"", True


def is_capture(head: bytes) -> bool:
    return head[:4] in CAPTURE_MAGICS


def looks_like_text(head: bytes) -> bool:
    """Whether a file's first bytes read as text (UTF-8 without NULs, a character cut by the
    peek's end allowed): what is not is left to the capture readers."""
    if not head or b"\0" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start >= len(head) - 3
    return True


class LogFile:
    """A text log's lines (each with its newline; the last may lack one), from an open stream.

    Undecodable bytes are kept as `\\xNN` escapes rather than dropped; a gzip stream that is
    damaged or cut short ends the lines with a finding."""

    def __init__(self, path: str, stream: IO[bytes], compressed: bool) -> None:
        self.path = path
        self.compressed = compressed
        self.findings: list[Finding] = []
        self._raw = stream
        self._f: IO[bytes] = (
            gzip.GzipFile(fileobj=stream, mode="rb") if compressed else stream  # type: ignore[assignment]
        )

    def __iter__(self) -> Iterator[str]:
        decoder = codecs.getincrementaldecoder("utf-8")("backslashreplace")
        f = self._f
        try:
            while True:
                line = f.readline(MAX_LINE)
                if not line:
                    break
                if len(line) == MAX_LINE and not line.endswith(b"\n"):
                    # past any frame's length: its start is kept (to be read, or reported, as
                    # one line), the rest skipped up to the newline, never held
                    rest = f.readline(MAX_LINE)
                    while rest and not rest.endswith(b"\n"):
                        rest = f.readline(MAX_LINE)
                    line += b"\n"
                yield decoder.decode(line)
        except (OSError, EOFError, zlib.error, ValueError) as exc:
            what = "cut short" if isinstance(exc, EOFError) else f"damaged: {exc}"
            self.findings.append(
                finding("log.cut-line", f"{self.path}: the gzip-compressed log is {what}")
            )

    def position(self) -> tuple[int, int]:
        """(bytes read, file size) for a progress bar; (0, 0) for a pipe."""
        try:
            return self._raw.tell(), os.fstat(self._raw.fileno()).st_size
        except (OSError, ValueError):
            return 0, 0

    def close(self) -> None:
        for f in (self._f, self._raw):
            with contextlib.suppress(OSError, ValueError):
                f.close()

    def __enter__(self) -> LogFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
