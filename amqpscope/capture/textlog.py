"""Opening an input that may be a capture or a text log (plain, gzip'd, xz'd or bzip2'd, or
standard input).

Why here: `capture/` is the one layer that touches files. What an input is, is told by its
first bytes, not its name: a pcap or pcapng magic (inside gzip too) is a capture, anything else
is read as a text log. Standard input cannot be opened twice, so the bytes looked at are peeked
from the one buffered stream that is then read, by `CaptureReader` or `LogFile`.
"""

from __future__ import annotations

import bz2
import codecs
import contextlib
import gzip
import io
import lzma
import os
import re
import sys
import zlib
from collections.abc import Iterator
from typing import IO, Final

from amqpscope.capture.files import CAPTURE_MAGICS, GZIP_MAGIC, CaptureError
from amqpscope.capture.pipe import STDIN, open_path, open_stdin
from amqpscope.findings import Finding, finding

#: bytes peeked to look inside a compressed stream
_PEEK: Final = 1 << 16
#: the compressions a text log is read through, by their first bytes (a capture reads gzip
#: only: its reader names the others), and what decompressing them raises on damage
XZ_MAGIC: Final = b"\xfd7zXZ\x00"
BZ2_MAGIC: Final = b"BZh"
_DAMAGE: Final = (OSError, EOFError, zlib.error, lzma.LZMAError, ValueError)
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


def head_of(stream: io.BufferedReader, path: str = "") -> tuple[bytes, str]:
    """The first bytes of what the stream holds (decompressed when it is gzip, xz or bzip2),
    and its compression ("gzip", "xz", "bz2"; "" for none); nothing is consumed. An xz or bzip2
    stream whose first bytes do not decompress is a CaptureError naming `path` (a capture
    reader, which would be asked next, knows gzip only)."""
    try:
        raw = stream.peek(_PEEK)
    except OSError as exc:
        raise CaptureError(f"cannot read: {exc.strerror or exc}") from None
    if raw[:2] == GZIP_MAGIC:
        try:
            return zlib.decompressobj(wbits=31).decompress(raw, _PEEK), "gzip"
        except zlib.error:
            return b"", "gzip"
    if raw.startswith(XZ_MAGIC) or raw.startswith(BZ2_MAGIC):
        kind = "xz" if raw.startswith(XZ_MAGIC) else "bz2"
        inflater = lzma.LZMADecompressor() if kind == "xz" else bz2.BZ2Decompressor()
        try:
            return inflater.decompress(raw, _PEEK), kind
        except _DAMAGE as exc:
            what = f"{path}: the {_NAMES[kind]}-compressed data is damaged: {exc}"
            raise CaptureError(what.removeprefix(": ")) from None
    return raw, ""


#: the compressions' names in messages
_NAMES: Final = {"gzip": "gzip", "xz": "xz", "bz2": "bzip2"}


def is_capture(head: bytes) -> bool:
    return head[:4] in CAPTURE_MAGICS


def is_text(head: bytes, compressed: str) -> bool:
    """Whether a stream whose first bytes (decompressed) are `head` is read as a text log: text,
    or xz or bzip2 that gave nothing yet (bzip2 decompresses a block of up to 900 kB whole;
    no capture reader reads either, so a log is what such a file may be)."""
    return looks_like_text(head) or (not head and compressed in ("xz", "bz2"))


#: of a text's first bytes, at most this share may be no text (bytes that are not UTF-8, NULs,
#: control characters): a log of some other encoding's bytes, or one with a few NULs (a crash
#: mid-write), is still a log to read; a capture's bytes are far past it
_NOT_TEXT_SHARE: Final = 0.02
#: control characters no text log holds (tab, newlines, form feed and ESC are text)
_CONTROLS: Final = bytes(c for c in range(32) if c not in b"\t\n\r\f\x1b") + b"\x7f"
_UTF16_BOMS: Final = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
#: a terminal's colour and style sequences (SGR), as loggers write them to one
_COLOURS: Final = re.compile(r"\x1b\[[0-9;]*m")


def looks_like_text(head: bytes) -> bool:
    """Whether a file's first bytes read as text: UTF-8 (or UTF-16 with its byte order mark, as
    Windows PowerShell's `>` writes), where at most `_NOT_TEXT_SHARE` of the bytes after a
    leading run of NULs (the hole `logrotate copytruncate` leaves) are no text. What is not
    text is left to the capture readers."""
    if head.startswith(_UTF16_BOMS):
        head = head.decode("utf-16", "replace").encode("utf-8", "replace")
    head = head.lstrip(b"\0")
    if not head:
        return False
    text = head.decode("utf-8", "replace")
    if text.endswith("\ufffd"):  # a character cut by the peek's end
        text = text.rstrip("\ufffd")
    bad = text.count("\ufffd") + sum(text.count(chr(c)) for c in _CONTROLS)
    return bad <= _NOT_TEXT_SHARE * len(text)


class LogFile:
    """A text log's lines (each with its newline; the last may lack one), from an open stream.

    UTF-8, or UTF-16 when it starts with a byte order mark. Bytes that are not UTF-8 are kept as
    `\\xNN` escapes rather than dropped, NULs are dropped; either makes a `log.not-text` finding
    (once, counting the lines). A compressed stream (`compressed`: "gzip", "xz", "bz2", or True
    for gzip) that is damaged or cut short ends the lines with a finding."""

    def __init__(self, path: str, stream: IO[bytes], compressed: bool | str) -> None:
        self.path = path
        self.compression = "gzip" if compressed is True else compressed or ""
        self.compressed = bool(self.compression)
        self.findings: list[Finding] = []
        self._raw = stream
        self._f: IO[bytes] = stream
        if self.compression == "gzip":
            self._f = gzip.GzipFile(fileobj=stream, mode="rb")  # type: ignore[assignment]
        elif self.compression == "xz":
            self._f = lzma.LZMAFile(stream, mode="rb")  # type: ignore[assignment]  # noqa: SIM115
        elif self.compression == "bz2":
            self._f = bz2.BZ2File(stream, mode="rb")  # type: ignore[assignment]
        #: lines that held bytes no text has, and the first of them
        self.not_text = 0
        self.first_not_text = 0
        self.last_not_text = 0

    def __iter__(self) -> Iterator[str]:
        try:
            for number, line in enumerate(self._lines(), 1):
                if "\0" in line:
                    line = line.replace("\0", "")
                    self._not_text(number)
                if "\x1b" in line:  # a terminal's colours (a trace copied from one): no text
                    line = _COLOURS.sub("", line)
                yield line
        except _DAMAGE as exc:
            what = "cut short" if isinstance(exc, EOFError) else f"damaged: {exc}"
            kind = _NAMES.get(self.compression, self.compression)
            self.findings.append(
                finding("log.cut-line", f"{self.path}: the {kind}-compressed log is {what}")
            )
        if self.not_text:
            what = (
                f"{self.path}:{self.first_not_text}: {self.not_text} line(s) hold bytes that are"
                " no UTF-8 text (kept as \\xNN) or NULs (dropped)"
            )
            self.findings.append(finding("log.not-text", what))

    def _not_text(self, number: int) -> None:
        if number == self.last_not_text:
            return
        self.last_not_text = number
        self.not_text += 1
        if not self.first_not_text:
            self.first_not_text = number

    def _lines(self) -> Iterator[str]:
        """The lines, decoded."""
        f = self._f
        if f.peek(2)[:2] in _UTF16_BOMS:  # type: ignore[attr-defined]
            text = io.TextIOWrapper(f, encoding="utf-16", errors="backslashreplace", newline="")
            while True:
                chunk = text.readline(MAX_LINE)
                if not chunk:
                    return
                if len(chunk) == MAX_LINE and not chunk.endswith("\n"):
                    more = text.readline(MAX_LINE)
                    while more and not more.endswith("\n"):
                        more = text.readline(MAX_LINE)
                    chunk += "\n"
                yield chunk
        number = 0
        while True:
            line = f.readline(MAX_LINE)
            if not line:
                break
            number += 1
            if len(line) == MAX_LINE and not line.endswith(b"\n"):
                # past any frame's length: its start is kept (to be read, or reported, as
                # one line), the rest skipped up to the newline, never held
                rest = f.readline(MAX_LINE)
                while rest and not rest.endswith(b"\n"):
                    rest = f.readline(MAX_LINE)
                line += b"\n"
            try:
                decoded = line.decode("utf-8")
            except UnicodeDecodeError:
                self._not_text(number)
                decoded = line.decode("utf-8", "backslashreplace")
            yield decoded

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
