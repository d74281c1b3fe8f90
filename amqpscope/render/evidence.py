"""Under a merged frame's line: which inputs saw it and when, and the log lines that showed it.

    43   1.530370 c3 ← ch1   basic.get-empty
       ↳   1.530370 A captures/091-vantage.pcap packet 63
       ↳   1.529630 B captures/091-vantage.log:171  2026-12-02 01:54:30,462 DEBUG pika.channel …

Several vantage points merged (`amqpscope.merge`) give each kept frame a `seen`: every input
that holds it, where (a capture's packet, a log's line) and when on that input's own clock
(before its offset is taken off: the difference to the frame's time is what the clocks
disagree by plus the path between them). The timeline shows one line per input when more than
one saw the frame, and a log's line whenever a log showed it (a frame only a log holds too):
the file and line number as the user opens them, the time counted from the timeline's first
frame like the frame's own, then the line's text as the log has it, the evidence the frame
was read from. A frame of a single input has no `seen`: its timeline is unchanged.

The text is read back from the log file when its line is shown (the merge keeps line numbers,
not lines): forward through the file, keeping the last `KEPT` lines, so a timeline in the
log's order reads it once. Standard input cannot be read again: its lines show without text.
Credentials: a line of a frame that may carry them (SASL init or response, 0-9-1 start-ok,
secure-ok, update-secret) shows its response with the password masked as the frame's own line
masks it (`mask_credentials`; a form this module does not know shows no text at all), and any
line's `scheme://user:password@` is masked too, unless `--show-secrets`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

from amqpscope.capture.files import CaptureError
from amqpscope.capture.pipe import STDIN
from amqpscope.capture.textlog import LogFile, head_of, open_stream
from amqpscope.codec.amqp091.tree import SECRET_ARGUMENTS
from amqpscope.codec.amqp10.tree import SECRET_FIELDS
from amqpscope.codec.frames import Frame
from amqpscope.codec.tree import REDACTED
from amqpscope.render.lines import safe

#: a piece of a line: its text and its style (as `render.timeline.Piece`)
Piece = tuple[str, str]
#: the frames whose log line may hold credentials
SECRET_FRAMES: Final = frozenset(
    {name for name, _ in SECRET_ARGUMENTS} | {name for name, _ in SECRET_FIELDS}
)
#: characters of a log line shown piped (a terminal cuts to its width), and with --body
LOG_PREVIEW: Final = 200
LOG_FULL: Final = 4000
#: what starts an entry's line: the arrow under the frame's number, then a time column
INDENT: Final = "      ↳ "
#: lines of a log kept behind the one last read (a timeline's order is the log's, nearly)
KEPT: Final = 4096
#: styles (`render.timeline.STYLES` names): the arrow and place, the time, the log's text
PLACE_STYLE: Final = "cyan"
TIME_STYLE: Final = "dim"

# -- credentials in a log's text: the forms the log readers read ---------------------------------
#: Proton's (and pyamqp's, uamqp's) bytes repr: initial-response=b"\x00user\x00password"
_BYTES_REPR: Final = re.compile(r"""((?:initial-response|response)\s*=\s*b(["']))(.*?)(?<!\\)\2""")
#: rhea's JSON of a Buffer: "initial_response":{"type":"Buffer","data":[0,103,...]}
_BUFFER: Final = re.compile(
    r"""("(?:initial_response|response)"\s*:\s*\{\s*"type"\s*:\s*"Buffer"\s*,\s*"data"\s*:\s*\[)"""
    r"""([0-9,\s]*)(\])"""
)
#: a URL's password: scheme://user:password@host
_URL_PASSWORD: Final = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*:)([^@\s/]+)(@)")


def mask_credentials(text: str, name: str) -> str | None:
    """`text` (a log line showing frame `name`) with its credentials masked: a PLAIN
    response's password (its user stays, as the frame's line shows it), any other response
    whole; None when `name` may carry credentials in a form not known here (show no text)."""
    text = _URL_PASSWORD.sub(lambda m: m.group(1) + REDACTED + m.group(3), text)
    if name not in SECRET_FRAMES:
        return text
    masked, found = _BYTES_REPR.subn(_mask_repr, text)
    if not found:
        masked, found = _BUFFER.subn(_mask_buffer, text)
    return masked if found else None


def _mask_repr(match: re.Match[str]) -> str:
    inside = match.group(3)
    nul = inside.rfind("\\x00")
    kept = inside[: nul + 4] if nul >= 0 and inside.count("\\x00") == 2 else ""
    return f"{match.group(1)}{kept}{REDACTED}{match.group(2)}"


def _mask_buffer(match: re.Match[str]) -> str:
    values = [v.strip() for v in match.group(2).split(",")]
    kept = ""
    if values.count("0") == 2:  # authzid \0 user \0 password: the user stays
        last = len(values) - 1 - values[::-1].index("0")
        kept = ",".join(values[: last + 1]) + ","
    return f"{match.group(1)}{kept}{REDACTED}{match.group(3)}"


# -- reading lines back --------------------------------------------------------------------------
class _Reader:
    """One log file read forward, its lines numbered as the log reader numbered them."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.kept: dict[int, str] = {}
        self.at = 0  # the number of the last line read
        self.lines: Iterator[str] | None = None
        self.log: LogFile | None = None

    def line(self, number: int) -> str | None:
        text = self.kept.get(number)
        if text is not None:
            return text
        if self.lines is None or number <= self.at:
            self._open()
        assert self.lines is not None
        for text in self.lines:
            self.at += 1
            self.kept[self.at] = text
            if len(self.kept) > KEPT:
                del self.kept[next(iter(self.kept))]
            if self.at == number:
                return text
        return None

    def _open(self) -> None:
        self.close()
        stream = open_stream(self.path)
        _, compressed = head_of(stream, self.path)
        self.log = LogFile(self.path, stream, compressed)
        self.lines = iter(self.log)
        self.at = 0
        self.kept.clear()

    def close(self) -> None:
        if self.log is not None:
            self.log.close()
            self.log = None
        self.lines = None


class LineBook:
    """A log line's text by file and number, read back lazily; None when it cannot be (standard
    input, a file gone or unreadable since: the line then shows without its text)."""

    def __init__(self) -> None:
        self._readers: dict[str, _Reader | None] = {}

    def line(self, path: str, number: int) -> str | None:
        if path == STDIN or number <= 0:
            return None
        reader = self._readers.get(path, _MISSING)
        if reader is _MISSING:
            reader = self._readers[path] = _Reader(path)
        if reader is None:
            return None
        try:
            return reader.line(number)
        except (CaptureError, OSError, EOFError, ValueError):
            reader.close()
            self._readers[path] = None
            return None

    def close(self) -> None:
        for reader in self._readers.values():
            if reader is not None:
                reader.close()


_MISSING: Final = _Reader("")


# -- the lines under a frame ---------------------------------------------------------------------
def seen_pieces(
    frame: Frame,
    t0: float,
    book: LineBook,
    show_secrets: bool = False,
    limit: int = LOG_PREVIEW,
) -> list[list[Piece]]:
    """The lines under a merged frame's line (none for a frame of one input, or of a capture
    alone in a merged timeline): one per input when several saw it, a log's whenever a log
    showed it, with its text cut to `limit` characters."""
    seen = frame.seen
    if not seen:
        return []
    several = len(seen) > 1
    out: list[list[Piece]] = []
    for input_name, path, where, number, ts in seen:
        if where != "line" and not several:
            continue
        when = "no time".rjust(10) if ts is None else _seconds(ts - t0)
        if where == "line":
            place = f" {input_name} {path}:{number}"
        else:
            place = f" {input_name} {path} {where} {number}"
        line: list[Piece] = [(INDENT, PLACE_STYLE), (when, TIME_STYLE), (safe(place), PLACE_STYLE)]
        if where == "line":
            text = book.line(path, number)
            if text is not None:
                line.append(("  " + _shown(text, frame.name, show_secrets, limit), ""))
        out.append(line)
    return out


def _shown(text: str, name: str, show_secrets: bool, limit: int) -> str:
    """A log line as the timeline shows it: one line, credentials masked, cut to `limit`."""
    text = text.rstrip()  # its newline, and spaces no one sees
    if not show_secrets:
        masked = mask_credentials(text, name)
        if masked is None:
            return "[text not shown: it holds the frame's credentials; --show-secrets shows it]"
        text = masked
    text = safe(text)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def _seconds(x: float) -> str:
    return "%10.6f" % x  # noqa: UP031 (the timeline's own time column)
