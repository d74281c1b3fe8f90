"""pika's DEBUG log (AMQP 0-9-1): the frame reprs it prints inside its own debug messages.

Written from pika's code (1.4.4, read in the installed package): `amqp_object.AMQPObject.__repr__`
prints `<NAME(sorted(['key=value', ...]))>`, each item `'{}={}'.format(key, value)` of an
attribute whose value differs from the class's attribute of that name (so a None, unset
property or argument, is not shown), or `<NAME>` with none; `frame.py` names frames `METHOD`,
`Header`, `Body`, `Heartbeat` (attributes `channel_number`, `frame_type`, and `method`,
`body_size` + `properties`, `fragment`), `spec.py` names methods `Basic.Deliver` with
attributes named as the spec's arguments with `_` for `-` (`global_qos` for `global`) and
`BasicProperties` with the 14 properties. A value is its `str()`: text unquoted, bytes as
`b'...'`, a table as a dict's repr (Decimal and datetime as their reprs), nested objects as
their reprs; the list's repr quotes each item, so the text is unambiguous.

pika does NOT log every frame: none it sends (a synchronous request shows only as `Entering
blocking state on frame <Queue.Declare([...])>`, a bare method without its channel, queued
and not yet written: not read, since a record without its channel would be tracked as the
connection's), no publish, delivery, content header or body, no heartbeat. What it prints
(pika 1.4.x), all frames it received:
- `channel.py`: `Discarding frame <METHOD(...)>` (a reply nobody waits for, e.g. the
  consume-ok of a BlockingChannel consumer), `Received Basic.GetEmpty: <METHOD(...)>`,
  `Confirm.SelectOk Received: <METHOD(...)>`, `Suppressing while in closing state: <METHOD>`,
  and at INFO `Received <Channel.CloseOk> on <Channel number=1 ...>` (a bare method, its
  channel in the channel's repr: read);
- `connection.py`: `_on_connection_close_from_broker: frame=<METHOD(...)>`,
  `_on_connection_close_ok: frame=<METHOD(...)>`, `Received <METHOD(...)> from broker`
  (connection.blocked / unblocked, at WARNING / INFO);
- `callback.py`: `Arguments do not match for {...}, [<METHOD(...)>]` (a received frame offered
  to a callback waiting for another; not seen in the recorded run).
captures/log-pika-broker.log (467 lines) shows 4 of the 37 frames the broker sent in that run.
"""

from __future__ import annotations

import ast
import datetime as dt
import decimal
import io
import itertools
import re
import struct
import tokenize
import unicodedata
from typing import Any, Final

from amqpscope.codec.amqp091 import spec
from amqpscope.logs import amqp091_encode as enc
from amqpscope.logs.lines import FRAME, RECEIVED, Logged, python_expr, timestamp
from amqpscope.logs.proton_values import LogLineEnded, LogSyntaxError

NAME: Final = "pika"
VERSION: Final = "0-9-1"

#: a frame repr's start, as frame.py names them
_FRAME: Final = re.compile(r"<(METHOD|Header|Body)\(\[")
#: channel.py `_on_close_meta`'s `Received %s on %s` (method, channel): the channel's repr
#: `<Channel number=1 CLOSING conn=...>` names its number
_ON_CHANNEL: Final = re.compile(r"Received <([A-Z][a-z]+\.[A-Za-z]+)(>|\(\[)")
_CHANNEL_NUMBER: Final = re.compile(r" on <Channel number=(\d+) ")
#: channel.py `_on_close_from_broker`'s warning, `Received remote Channel.Close (%s): %r on %s`
#: (reply code, reply text's repr, the channel's repr): the broker's channel.close, without
#: its class-id and method-id, which pika does not print there
_REMOTE_CLOSE: Final = re.compile(r"Received remote Channel\.Close \((\d+)\): ")
#: pika's class names (`Basic.Deliver`, `Connection.StartOk`) -> the spec's method names
_METHODS: Final = {
    m.name.split(".")[0].capitalize()
    + "."
    + "".join(part.capitalize() for part in m.name.split(".")[1].split("-")): m
    for m in spec.METHODS.values()
}
#: pika attribute names that are not the spec's argument name with `_` for `-`
_RENAMED: Final = {"global_qos": "global"}
#: a method's arguments' domains, by pika's name for the method
_DOMAINS: Final = {name: dict(method.arguments) for name, method in _METHODS.items()}
#: a method's arguments' domains, by the spec's name for the method
_DOMAINS_BY_SPEC: Final = {method.name: dict(method.arguments) for method in _METHODS.values()}
_PROPERTIES: Final = {
    name.replace("-", "_"): (name, domain) for name, domain in spec.PROPERTIES[60]
}


class Shown:
    """What a pika frame repr shows: its kind, channel, and the values it prints (spec names)."""

    __slots__ = ("body_size", "channel", "data", "fragment", "kind", "method", "values")

    def __init__(self, kind: str, channel: int) -> None:
        self.kind = kind  # "METHOD", "Header", "Body"
        self.channel = channel
        self.method = ""  # the spec's method name (METHOD)
        self.values: dict[str, Any] = {}  # arguments (METHOD) or properties (Header)
        self.body_size = 0
        self.fragment = b""
        #: the frame's bytes and the fields they leave out, when the cache made them
        #: (`frame_bytes` gives them then)
        self.data: tuple[bytes, list[str]] | None = None


def looks_like(line: str) -> bool:
    return (
        "<METHOD([" in line
        or "<Header([" in line
        or "<Body([" in line
        or ("Received <" in line and " on <Channel number=" in line)
        or "Received remote Channel.Close (" in line
    )


def parse(line: str) -> Logged | None:
    """The frame the line prints (pika's lines print at most one)."""
    if not looks_like(line):
        return None
    m = _FRAME.search(line)
    if m is None:
        return _on_channel(line) or _remote_close(line)
    return _logged(_cached(line, m.start()), line, m.start())


def _frame(line: str, at: int) -> Shown:
    """The frame repr at `line[at:]` (`<METHOD([...`), read item by item."""
    kind = line[at + 1 : line.index("(", at)]
    items, end = _items(line, line.index("[", at))
    if not line.startswith(")>", end):
        raise LogSyntaxError(end, "`)>` expected after a frame's items")
    return _shown(kind, items, at)


# A cache of frame reprs like ones read before. Line to line a delivery's reprs differ in a few
# values: whole items' numbers (`'delivery_tag=5'`, `'body_size=13'`) and a body's plain text
# (`"fragment=b'log message 5'"`). The key is the repr with those taken out; an entry is the
# frame read once, and where each value taken out went. It is made on a key's second sighting
# (a log whose lines never repeat pays the key and no second read), by reading the repr again
# with markers in the slots: each marker must land in exactly one place (the channel, the body
# size, the fragment or one value) or nowhere, and the entry filled with the first line's own
# values must equal that line's read; else the key is read every time.

#: the slots: a whole item's number, and a body's fragment in printable ASCII without quotes
#: or backslashes (what `_items` and `_literal` take as their text); each has its own hole
_NUMBER: Final = re.compile(r"=(\d{1,18})(?=['\"])")
_FRAGMENT: Final = re.compile(r"fragment=b'([ !#-&(-\[\]-~]*)'")
_HOLE: Final = "\x00"
_TEXT_HOLE: Final = "\x01"
_MAX: Final = 4096
_NOT_CACHED: Final = "not cached"


class _Entry:
    """A frame read once, and for each slot where its value goes (None: nowhere); and, when
    every slot that goes somewhere is a number of fixed width in the frame's bytes, those bytes
    and where each number goes in them (`_Bytes`): a line like it is then not encoded."""

    __slots__ = ("active", "data", "shown", "targets")

    def __init__(self, shown: Shown, targets: list[tuple[str, str] | None]) -> None:
        self.shown = shown
        self.targets = targets  # (place, how): place "channel", "body_size", "fragment", or
        # a value's name; how "int", "str" or "bytes"
        #: the slots that go somewhere: (slot, place, how); a key's slots are as many as its holes
        self.active = [(i, *target) for i, target in enumerate(targets) if target is not None]
        self.data: _Bytes | None = None


class _Bytes:
    """A cached frame's bytes (and the fields they leave out) as the pieces between the
    numbers its slots put in them, and for each of those, in order, its slot and its `struct`
    packer (of its width)."""

    __slots__ = ("missing", "numbers", "pieces")

    def __init__(
        self, pieces: list[bytes], missing: list[str], numbers: list[tuple[int, Any]]
    ) -> None:
        self.pieces = pieces  # one more than the numbers
        self.missing = missing
        self.numbers = numbers  # (slot, pack)


_CACHE: dict[str, _Entry | str | None] = {}


def _cached(line: str, at: int) -> Shown:
    if _HOLE in line or _TEXT_HOLE in line:
        return _frame(line, at)
    text = line[at:]
    texts, slots = _split_numbers(text)  # one pass for the key and its slots
    key = ("=" + _HOLE).join(texts) if slots else text
    if "fragment=b'" in key:
        pieces = _FRAGMENT.split(key)
        if len(pieces) > 1:
            slots.extend(pieces[1::2])
            key = ("fragment=b'" + _TEXT_HOLE + "'").join(pieces[::2])
    entry = _CACHE.get(key, _NOT_CACHED)
    if isinstance(entry, _Entry):
        return _filled(entry, slots)
    shown = _frame(line, at)
    if entry is None:  # a second sighting
        _CACHE[key] = _entry(key, slots, shown) or _NOT_CACHED
    elif entry is _NOT_CACHED and key not in _CACHE:
        if len(_CACHE) >= _MAX:
            _CACHE.clear()
        _CACHE[key] = None
    return shown


def _split_numbers(text: str) -> tuple[list[str], list[str]]:
    """What `_NUMBER.split(text)` gives (the text between whole items' numbers, and the
    numbers), by finding each `=` (a regex split was a good part of a cached line's time)."""
    parts: list[str] = []
    numbers: list[str] = []
    size = len(text)
    last = 0
    pos = text.find("=")
    while pos >= 0:
        end = pos + 1
        while end < size:
            code = ord(text[end])
            if not (48 <= code <= 57 or (code > 127 and text[end].isdecimal())):  # `\d`
                break
            end += 1
        if 1 <= end - pos - 1 <= 18 and end < size and (text[end] == "'" or text[end] == '"'):
            parts.append(text[last:pos])
            numbers.append(text[pos + 1 : end])
            last = end
            pos = text.find("=", end)
        else:
            pos = text.find("=", pos + 1)
    parts.append(text[last:])
    return parts, numbers


def _filled(entry: _Entry, slots: list[str]) -> Shown:
    template = entry.shown
    shown = Shown(template.kind, template.channel)
    shown.method = template.method
    shown.body_size = template.body_size
    shown.fragment = template.fragment
    values = shown.values = template.values.copy()
    for i, place, how in entry.active:
        text = slots[i]
        value: Any = int(text) if how == "int" else text.encode() if how == "bytes" else text
        if place == "channel":
            shown.channel = value
        elif place == "body_size":
            shown.body_size = value
        elif place == "fragment":
            shown.fragment = value
        else:
            values[place] = value
    plan = entry.data
    if plan is not None:
        pieces = plan.pieces
        out = [pieces[0]]
        try:
            for k, (i, pack) in enumerate(plan.numbers):
                out.append(pack(int(slots[i])))
                out.append(pieces[k + 1])
        except (struct.error, OverflowError):
            return shown  # not of its width: encoded, and reported, as any line
        shown.data = b"".join(out), plan.missing
    return shown


#: the width a slot's number takes in a frame's bytes, by its domain (the frame's channel:
#: short, a header's body size: longlong)
_PACKS: Final = {
    "octet": struct.Struct(">B").pack,
    "short": struct.Struct(">H").pack,
    "long": struct.Struct(">I").pack,
    "longlong": struct.Struct(">Q").pack,
    "timestamp": struct.Struct(">Q").pack,
}


def _planned(entry: _Entry, shown: Shown) -> _Bytes | None:
    """The bytes of `shown` (a line of `entry`, filled) and where each slot's number goes in
    them, found by encoding it with two other numbers in that slot's place: the bytes must
    differ only where the number's packing stands. None: a slot that is no number of fixed
    width (a string, a body's text), or bytes that do not change so."""
    if shown.kind == "Body":
        return None  # its bytes are the body's text: nothing to gain
    try:
        data, missing = _frame_bytes(shown)
    except (struct.error, OverflowError, ValueError, KeyError):
        return None
    numbers: list[tuple[int, int, Any]] = []  # (offset, slot, pack)
    for i, place, how in entry.active:
        if how != "int":
            return None
        if place == "channel":
            domain = "short"
        elif place == "body_size":
            domain = "longlong"
        elif shown.kind == "METHOD":
            domain = _DOMAINS_BY_SPEC[shown.method].get(place, "")
        else:
            domain = _PROPERTIES.get(place.replace("-", "_"), ("", ""))[1]
        pack = _PACKS.get(domain)
        if pack is None:
            return None
        encoded = []
        for number in (0x5A, 0xA5):
            other = _copy(shown)
            if place == "channel":
                other.channel = number
            elif place == "body_size":
                other.body_size = number
            else:
                other.values[place] = number
            try:
                encoded.append(_frame_bytes(other)[0])
            except (struct.error, OverflowError, ValueError, KeyError):
                return None
        one, two = encoded
        if len(one) != len(data) or len(two) != len(data):
            return None
        packed = pack(0x5A)
        offset = one.find(packed)
        while offset >= 0:  # the one place where the two encodings are the two packings
            end = offset + len(packed)
            if (
                two[offset:end] == pack(0xA5)
                and one[:offset] == two[:offset] == data[:offset]
                and one[end:] == two[end:] == data[end:]
            ):
                break
            offset = one.find(packed, offset + 1)
        if offset < 0:
            return None
        numbers.append((offset, i, pack))
    numbers.sort()
    pieces = []
    at = 0
    for offset, _, pack in numbers:
        if offset < at:
            return None  # two numbers in one place: no such frame
        pieces.append(data[at:offset])
        at = offset + len(pack(0))
    pieces.append(data[at:])
    return _Bytes(pieces, missing, [(i, pack) for _, i, pack in numbers])


def _copy(shown: Shown) -> Shown:
    other = Shown(shown.kind, shown.channel)
    other.method = shown.method
    other.values = dict(shown.values)
    other.body_size = shown.body_size
    other.fragment = shown.fragment
    return other


def _marker(i: int, number: bool) -> str:
    return str(739_104_628_551_000_000 + i) if number else f"amqpscope slot {i}"


def _entry(key: str, slots: list[str], shown: Shown) -> _Entry | None:
    """The entry of `key`, checked against the line it is made from (`slots`, `shown`)."""
    numbers = key.count(_HOLE)
    markers = [_marker(i, i < numbers) for i in range(len(slots))]
    marked = key
    for i, marker in enumerate(markers):
        marked = marked.replace(_HOLE if i < numbers else _TEXT_HOLE, marker, 1)
    if len(_NUMBER.findall(marked)) + len(_FRAGMENT.findall(marked)) != len(slots):
        return None
    try:
        template = _frame(marked, 0)
    except LogSyntaxError:
        return None
    places: list[tuple[str, Any]] = [
        ("channel", template.channel),
        ("body_size", template.body_size),
        ("fragment", template.fragment),
        *template.values.items(),
    ]
    targets: list[tuple[str, str] | None] = []
    for marker in markers:
        found = [
            (place, how)
            for place, value in places
            for how, wanted in (
                ("int", _as_int(marker)),
                ("str", marker),
                ("bytes", marker.encode()),
            )
            if wanted is not None and type(value) is type(wanted) and value == wanted
        ]
        if len(found) > 1:
            return None
        targets.append(found[0] if found else None)
    entry = _Entry(template, targets)
    filled = _filled(entry, slots)
    if not _same(filled, shown):
        return None
    entry.data = _planned(entry, filled)
    return entry


def _as_int(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def _same(one: Shown, other: Shown) -> bool:
    return (
        one.kind == other.kind
        and one.channel == other.channel
        and one.method == other.method
        and one.values == other.values
        and one.body_size == other.body_size
        and one.fragment == other.fragment
    )


def _on_channel(line: str) -> Logged | None:
    """`Received <Channel.CloseOk> on <Channel number=1 ...>`: a bare method and its channel."""
    m = _ON_CHANNEL.search(line)
    if m is None:
        return None
    end = m.end()
    if m.group(2) != ">":
        _, end = _items(line, m.end() - 1)
        if not line.startswith(")>", end):
            raise LogSyntaxError(end, "`)>` expected after a method's items")
        end += 2
    number = _CHANNEL_NUMBER.match(line, end)
    if number is None:
        return None
    text = line[m.start() + len("Received ") : end]
    items = [f"channel_number={number.group(1)}", f"method={text}"]
    return _logged(_shown("METHOD", items, m.start()), line, m.start())


def _remote_close(line: str) -> Logged | None:
    """`Received remote Channel.Close (406): 'PRECONDITION_FAILED - ...' on <Channel number=1
    ...>`: the broker's close of a channel, as pika would print its method (sorted items)."""
    m = _REMOTE_CLOSE.search(line)
    if m is None:
        return None
    try:
        text, end = _python_string(line, m.end())
    except (SyntaxError, ValueError, IndexError) as why:
        raise LogSyntaxError(m.end(), f"a reply-text's repr expected ({why})") from None
    number = _CHANNEL_NUMBER.match(line, end)
    if number is None:
        return None
    method = repr([f"reply_code={m.group(1)}", f"reply_text={text}"])
    items = [f"channel_number={number.group(1)}", f"method=<Channel.Close({method})>"]
    return _logged(_shown("METHOD", items, m.start()), line, m.start())


def _python_string(line: str, at: int) -> tuple[str, int]:
    """The str whose repr starts at `line[at]`, and where the repr ends."""
    quote = line[at : at + 1]
    if quote not in ("'", '"'):
        raise ValueError("no quote")
    end = at + 1
    while line[end] != quote:  # IndexError past the line's end: no closing quote
        end += 2 if line[end] == "\\" else 1
    return _unescaped(line[at + 1 : end]), end + 1


def _logged(shown: Shown, line: str, at: int) -> Logged:
    logged = Logged(
        "pika",
        RECEIVED,
        FRAME,
        channel=shown.channel,
        value=shown,
        ts=timestamp(line[:at]),
        version=VERSION,
    )
    if shown.kind == "Body":
        logged.payload = shown.fragment
        logged.payload_size = len(shown.fragment)
    return logged


def frame_bytes(shown: Shown) -> tuple[bytes, list[str]]:
    """The frame's bytes (arguments the repr leaves out encoded as zeros) and the names of the
    fields the record must leave out because the log does not show them."""
    if shown.data is not None:  # made by the cache (`_Bytes`)
        return shown.data
    try:
        return _frame_bytes(shown)
    except (struct.error, OverflowError) as why:  # a number too big for its domain
        raise LogSyntaxError(0, f"{shown.method or shown.kind}: {why}") from None


def _frame_bytes(shown: Shown) -> tuple[bytes, list[str]]:
    if shown.kind == "METHOD":
        payload = enc.method(shown.method, shown.values)
        missing = [
            a for a, _ in enc.METHODS_BY_NAME[shown.method].arguments if a not in shown.values
        ]
        return enc.frame(enc.FRAME_METHOD, shown.channel, payload), missing
    if shown.kind == "Header":
        # pika's Header shows no class id or weight: the class is basic (its properties are
        # BasicProperties), the weight not shown
        payload = enc.header(shown.body_size, shown.values)
        return enc.frame(enc.FRAME_HEADER, shown.channel, payload), ["weight"]
    return enc.frame(enc.FRAME_BODY, shown.channel, shown.fragment), []


def _items(text: str, at: int) -> tuple[list[str], int]:
    """The strings of the list repr starting at `text[at] == '['`, and where it ends."""
    if text[at] != "[":
        raise LogSyntaxError(at, "`[` expected")
    items: list[str] = []
    pos = at + 1
    while True:
        if pos >= len(text):
            raise LogLineEnded(pos, "the line ends inside a frame")
        char = text[pos]
        if char == "]":
            return items, pos + 1
        if char in ", ":
            pos += 1
            continue
        if char not in "'\"":
            raise LogSyntaxError(pos, "a quoted item expected")
        end = _string_end(text, pos)
        inner = text[pos + 1 : end - 1]
        if "\\" not in inner and inner.isprintable():
            items.append(inner)  # no escapes: the string is its text
            pos = end
            continue
        try:
            items.append(_unescaped(inner))
        except ValueError as why:
            raise LogSyntaxError(pos, f"not a Python string ({why})") from None
        pos = end


#: a string literal's one-character escapes (`\\` then a line's end: a line continued)
_ESCAPES: Final = {
    "\n": "",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
}
_OCTAL: Final = "01234567"
#: how many hex digits follow `\x`, `\u`, `\U`
_HEX_ESCAPES: Final = {"x": 2, "u": 4, "U": 8}
_HEX: Final = frozenset("0123456789abcdefABCDEF")


def _unescaped(inner: str) -> str:
    """The str a repr's inside (`inner`, between its quotes) stands for, read as the compiler
    reads a str literal, without it: what it would only warn of (an invalid escape like `\\d`,
    an octal past 0o377; never in a repr, so a line cut or mangled) is a ValueError here, the
    same whatever the warning filters say (`-W error` made it a SyntaxError, the default a
    DeprecationWarning on stderr and the text read as if the backslash were doubled)."""
    if "\\" not in inner:
        return inner
    out: list[str] = []
    pos = 0
    while True:
        at = inner.find("\\", pos)
        if at < 0:
            out.append(inner[pos:])
            return "".join(out)
        out.append(inner[pos:at])
        if at + 1 >= len(inner):
            raise ValueError("a backslash ends the string")
        char = inner[at + 1]
        pos = at + 2
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif char in _OCTAL:
            end = pos
            while end < at + 4 and end < len(inner) and inner[end] in _OCTAL:
                end += 1
            code = int(inner[at + 1 : end], 8)
            if code > 0o377:
                raise ValueError(f"octal escape \\{inner[at + 1 : end]} past 0o377")
            out.append(chr(code))
            pos = end
        elif char in _HEX_ESCAPES:
            digits = inner[pos : pos + _HEX_ESCAPES[char]]
            if len(digits) < _HEX_ESCAPES[char] or not _HEX.issuperset(digits):
                raise ValueError(f"truncated \\{char} escape")
            code = int(digits, 16)
            if code > 0x10FFFF:
                raise ValueError(f"\\{char}{digits} past U+10FFFF")
            out.append(chr(code))
            pos += len(digits)
        elif char == "N":
            end = inner.find("}", pos)
            if not inner.startswith("{", pos) or end < 0:
                raise ValueError("malformed \\N{...} escape")
            try:
                out.append(unicodedata.lookup(inner[pos + 1 : end]))
            except KeyError:
                raise ValueError(f"unknown character name {inner[pos + 1 : end]!r}") from None
            pos = end + 1
        else:
            raise ValueError(f"invalid escape sequence \\{char}")


#: a quoted item, its escapes skipped (a backslash escapes any character, even a line's end)
_QUOTED: Final = {
    "'": re.compile(r"'(?:[^'\\\r\n]|\\.)*'", re.DOTALL),
    '"': re.compile(r'"(?:[^"\\\r\n]|\\.)*"', re.DOTALL),
}


def _string_end(text: str, at: int) -> int:
    quoted = _QUOTED[text[at]].match(text, at)
    if quoted is not None:
        return quoted.end()
    quote = text[at]
    pos = at + 1
    while pos < len(text):
        char = text[pos]
        if char == "\\":
            pos += 2
            continue
        if char == quote:
            return pos + 1
        if char in "\r\n":
            break
        pos += 1
    raise LogLineEnded(pos, "the line ends inside a quoted item")


def _pairs(items: list[str]) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise LogSyntaxError(0, f"`key=value` expected, not {item[:40]!r}")
        pairs[key] = value
    return pairs


def _object(text: str, name: str) -> dict[str, str]:
    """The attributes of a nested repr `<name([...])>` or `<name>` (all of `text`)."""
    if text == f"<{name}>":
        return {}
    head = f"<{name}(["
    if not text.startswith(head):
        raise LogSyntaxError(0, f"<{name}(...)> expected")
    items, end = _items(text, len(head) - 1)
    if text[end:] != ")>":
        raise LogSyntaxError(end, "`)>` expected")
    return _pairs(items)


def _shown(kind: str, items: list[str], at: int) -> Shown:
    pairs = _pairs(items)
    try:
        channel = int(pairs["channel_number"])
    except (KeyError, ValueError):
        raise LogSyntaxError(at, "a frame without its channel_number") from None
    shown = Shown(kind, channel)
    if kind == "METHOD":
        text = pairs.get("method", "")
        name_end = text.find("(") if "(" in text else text.find(">")
        pika_name = text[1:name_end]
        method = _METHODS.get(pika_name)
        if method is None:
            raise LogSyntaxError(at, f"no 0-9-1 method named {pika_name!r}")
        shown.method = method.name
        domains = _DOMAINS[pika_name]
        for key, value in _object(text, pika_name).items():
            argument = _RENAMED.get(key, key.replace("_", "-"))
            if argument not in domains:
                raise LogSyntaxError(at, f"{method.name} has no argument {key}")
            shown.values[argument] = _typed(value, domains[argument])
    elif kind == "Header":
        shown.body_size = int(pairs.get("body_size", "0"))
        text = pairs.get("properties", "<BasicProperties>")
        for key, value in _object(text, "BasicProperties").items():
            if key not in _PROPERTIES:
                raise LogSyntaxError(at, f"no basic property {key}")
            name, domain = _PROPERTIES[key]
            shown.values[name] = _typed(value, domain)
    else:
        fragment = _literal(pairs.get("fragment", "b''"))
        if not isinstance(fragment, bytes):
            raise LogSyntaxError(at, "a body fragment is bytes")
        shown.fragment = fragment
    return shown


def _typed(text: str, domain: str) -> Any:
    """A value's `str()` read back by its spec domain."""
    if domain == "bit":
        if text not in ("True", "False"):
            raise LogSyntaxError(0, f"a bit is True or False, not {text[:20]!r}")
        return text == "True"
    if domain in ("octet", "short", "long", "longlong", "timestamp"):
        return int(text)
    if domain == "table":
        value = _literal(text)
        if not isinstance(value, dict):
            raise LogSyntaxError(0, "a table is a dict")
        return value
    if domain == "longstr" and text[:2] in ("b'", 'b"'):  # pika keeps some as bytes
        value = _literal(text)
        if isinstance(value, bytes):
            return value
    return text


def _literal(text: str) -> Any:
    """A Python repr: literals, plus the Decimal and datetime reprs pika's tables hold, and
    the `2147483648L` of `compat.long`, pika's type for a table's 64-bit integers."""
    if len(text) >= 3 and text[0] == "b" and text[1] in "'\"" and text[-1] == text[1]:
        inner = text[2:-1]  # a body's fragment: bytes without escapes are their text
        if "\\" not in inner and text[1] not in inner and inner.isascii() and inner.isprintable():
            return inner.encode()
    try:
        # a rare path: pika logs no table or body it sends
        if "L" in text:
            text = _without_long_suffix(text)
        tree = python_expr(text)
    except SyntaxError:
        raise LogSyntaxError(0, "not a Python value") from None
    return _evaluate(tree)


def _without_long_suffix(text: str) -> str:
    """`text` with the `L` after a number taken out (tokens, so strings are left alone)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return text
    cuts = [
        token.start[1]
        for before, token in itertools.pairwise(tokens)
        if token.type == tokenize.NAME
        and token.string == "L"
        and before.type == tokenize.NUMBER
        and before.end == token.start
        and token.start[0] == 1
    ]
    for at in reversed(cuts):
        text = text[:at] + text[at + 1 :]
    return text


def _evaluate(node: ast.AST) -> Any:
    if isinstance(node, ast.Dict):
        return {
            _evaluate(key) if key is not None else None: _evaluate(value)
            for key, value in zip(node.keys, node.values, strict=True)
        }
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_evaluate(item) for item in node.elts]
    if isinstance(node, ast.Call):
        name = ast.unparse(node.func)
        args = [_evaluate(arg) for arg in node.args]
        try:
            if name in ("Decimal", "decimal.Decimal") and len(args) == 1:
                return decimal.Decimal(str(args[0]))
            if name in ("datetime.datetime", "datetime") and 3 <= len(args) <= 7:
                return dt.datetime(*args)
        except (decimal.InvalidOperation, TypeError, ValueError, OverflowError):
            raise LogSyntaxError(0, f"not a {name}") from None
        raise LogSyntaxError(0, f"a value pika printed as {name}(...) is not read")
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        raise LogSyntaxError(0, "not a Python literal") from None
