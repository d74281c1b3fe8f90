"""Peels what other software wrapped around a frame-trace line, before any grammar reads it
(sans-IO: text in, the frame's text and what was peeled out).

People paste frame traces as their tools kept them, not as the library printed them:

- a JSON record around the line: Docker's `json-file` log driver writes
  `{"log":"<line>\\n","stream":"stderr","time":"2024-01-31T12:00:00.123456789Z"}` (moby's
  `daemon/logger/jsonfilelog`, `jsonlog.JSONLogs`); structured loggers put it under `msg` or
  `message` (zap, logrus, pino, bunyan, structlog; `journalctl -o json`'s `MESSAGE`), and a
  JSON array or a copied JSON line has it as a quoted string, `"03:10:56.648251 RX ...",`;
- Python's `repr` of the bytes a C library logged (`b'<- [DETACH]* {...}'`, uamqp-python's
  logging of the C library's lines), with whatever prefix the Python logger put before it;
- tabs or non-breaking spaces where the library wrote spaces (a paste through a web page or
  an editor, `cat -n`'s tab after its line number): `respace`, and a line number after the
  frame: `number_after`, both for a line that does not read as it is (the reader asks).

Prefixes the text keeps before the frame (a timestamp, log4j/NLog layouts, pm2's `0|app  | `,
journalctl's `Nov 27 06:33:37 host app[1234]: `, `cat -n`'s numbers) are not peeled here: every
grammar reads its frame wherever it starts in the line and takes a time from what precedes it.

What is peeled out and may say when the line was written (a JSON record's `time`, the Python
logger's prefix before a repr) comes back beside the text, for a frame whose own text has no
time.

The plain forms pay one cheap test a line (in `unwrap`): the formats' own lines neither start
with `{` or a quote, nor end with a quote or a comma.
"""

from __future__ import annotations

import ast
import codecs
import json
import warnings
from typing import Any, Final

#: Unicode spaces a paste puts where the library wrote an ASCII space
_SPACES: Final = {
    ord(space): " "
    for space in ("\xa0", "\u2007", "\u202f", "\u2000", "\u2002", "\u2003", "\u2009")
}
#: keys a JSON record keeps its line under, in the order they are looked for
_TEXT_KEYS: Final = ("log", "msg", "message", "MESSAGE", "@message", "textPayload", "line", "text")
#: keys a JSON record keeps its time under
_TIME_KEYS: Final = ("time", "timestamp", "@timestamp", "ts", "date", "asctime")
#: wrappers peeled off one line at most (a Docker record around a repr of bytes is two)
_LAYERS: Final = 4
#: where a `b'...'` repr may start, tried at most this many times a line
_REPRS: Final = 4


def unwrap(line: str) -> tuple[str, str]:
    """The frame's text in `line` (its newline kept), and the time peeled out with its
    wrapper ("" when none); `line` itself when nothing wraps it."""
    # the plain forms' test, first (measured: a call and a copy of the line were a tenth of a
    # plain Proton line's reading in the pure build): neither a `{` or a quote first, nor a
    # quote or a comma last
    first = line[:1]
    if first == " ":
        first = line.lstrip()[:1]
    if first != "{" and first != '"':
        last = line[-2:-1] if line[-1:] == "\n" else line[-1:]
        if last == " " or last == "\r" or last == "\t":
            last = line.rstrip()[-1:]
        if last != "'" and last != '"' and last != ",":
            return line, ""
    newline = line[len(line.rstrip("\r\n")) :]
    text = line[: len(line) - len(newline)]
    when = ""
    for _ in range(_LAYERS):
        peeled, time = _peel(text)
        if peeled is text:
            break
        text = peeled.rstrip("\r\n")
        when = when or time
    return text + newline, when


def _peel(text: str) -> tuple[str, str]:
    """`text` with its outermost wrapper peeled, and the time the wrapper held; `text` itself
    (the same object) when it has none."""
    stripped = text.strip()
    if stripped.endswith(","):  # an item of a JSON array or object, copied with its comma
        stripped = stripped[:-1].rstrip()
    first = stripped[:1]
    if first == "{" and stripped.endswith("}"):
        record = _json(stripped)
        if isinstance(record, dict):
            found = _record_text(record)
            if found is not None:
                return found
    elif first == '"' and stripped.endswith('"') and len(stripped) > 1:
        quoted = _json(stripped)
        if isinstance(quoted, str):
            return quoted, ""
    if stripped.endswith(("'", '"')):
        return _bytes_repr(text, stripped)
    return text, ""


def respace(text: str) -> str:
    """`text` with tabs and Unicode spaces as the ASCII spaces the library wrote; `text`
    itself when it has none. Only for a line that does not read as it is: a library may print
    a tab or a no-break space inside a value it does not quote (go-amqp's strings)."""
    if not text.isascii():
        text = text.translate(_SPACES)
    if "\t" in text:
        text = text.replace("\t", " ")
    return text


#: the most digits a line number after a frame has
_NUMBER_DIGITS: Final = 7


def number_after(text: str) -> int:
    """Where a line number after the frame starts in `text` (a viewer's or an editor's,
    `... }    12`: digits after spaces or a tab, at the end), 0 when it has none. Only for a
    line that does not read as it is, and kept only if the line without it reads (go-amqp's
    `Handle: 12` ends that way when a wrap cut it)."""
    end = len(text.rstrip())
    start = end
    while start > 0 and "0" <= text[start - 1] <= "9" and end - start < _NUMBER_DIGITS:
        start -= 1
    if start == end or start == 0 or text[start - 1] not in " \t":
        return 0
    return start


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _record_text(record: dict[str, Any]) -> tuple[str, str] | None:
    """The line a JSON record holds, and its time ("" if it has none)."""
    for key in _TEXT_KEYS:
        line = record.get(key)
        if isinstance(line, str):
            for time_key in _TIME_KEYS:
                when = record.get(time_key)
                if isinstance(when, str):
                    return line, when
            return line, ""
    return None


def _bytes_repr(text: str, stripped: str) -> tuple[str, str]:
    """The text of the bytes whose `b'...'` repr ends `text`, and what is before the repr (a
    Python logger's prefix, which may hold a time); `text` itself when no repr ends it."""
    at = 0
    for _ in range(_REPRS):
        single, double = stripped.find("b'", at), stripped.find('b"', at)
        start = min(i for i in (single, double) if i >= 0) if single >= 0 or double >= 0 else -1
        if start < 0:
            break
        at = start + 2
        if start > 0 and (stripped[start - 1].isalnum() or stripped[start - 1] == "_"):
            continue  # inside a word: no repr starts here
        quote = stripped[start + 1]
        if quote != stripped[-1] or not _one_string(stripped, start + 2, quote):
            continue  # the repr would close before the line's end
        try:
            with warnings.catch_warnings():  # `\O`: no repr holds it, so this is none
                warnings.simplefilter("error", SyntaxWarning)
                warnings.simplefilter("error", DeprecationWarning)
                value = ast.literal_eval(stripped[start:])
        except (ValueError, SyntaxError, MemoryError, RecursionError, Warning):
            continue
        if isinstance(value, bytes):
            inner = value.decode("utf-8", "backslashreplace").rstrip("\r\n")
            return inner, stripped[:start]
    return text, ""


def cut_repr(text: str) -> tuple[str, str] | None:
    """The text inside a Python bytes repr that `text` (a line cut short) opens and does not
    close (`... INFO b'<- [ATTACH]* {x,0,`), its escapes read (an escape the cut split left
    out), and what is before it (the Python logger's prefix, which may hold a time); None when
    no such repr starts in it. For a cut line only: a whole repr is `unwrap`'s."""
    for opening in ("b'", 'b"'):
        at = text.find(opening)
        while at > 0 and (text[at - 1].isalnum() or text[at - 1] == "_"):
            at = text.find(opening, at + 2)  # inside a word: no repr starts here
        if at < 0:
            continue
        inner = text[at + 2 :]
        slash = inner.rfind("\\")
        if slash >= 0 and len(inner) - slash < 4 and not inner.endswith("\\\\"):
            inner = inner[:slash]  # `\x4`, `\` at the cut
        try:
            raw = codecs.escape_decode(inner.encode("utf-8"))[0]
        except ValueError:
            return None
        return bytes(raw).decode("utf-8", "backslashreplace"), text[:at]
    return None


def _one_string(text: str, at: int, quote: str) -> bool:
    """Whether the only `quote` from `at` on that no backslash escapes is the text's last
    character (cheap, before `literal_eval` reads it all)."""
    end = len(text) - 1
    found = text.find(quote, at)
    while found >= 0 and found < end:
        if text[found - 1] != "\\":
            return False
        found = text.find(quote, found + 1)
    return True
