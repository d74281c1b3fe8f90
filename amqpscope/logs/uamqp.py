"""Azure's C uamqp library's frame trace (under uamqp-python, azure-uamqp-c), as its trace
switch (`connection_set_trace`; uamqp-python's `debug=True`) prints it.

Written from its own code (azure-uamqp-c, the same since its first release in 2015, read in
its git history): `connection.c`'s `log_incoming_frame` / `log_outgoing_frame` write `<- ` or
`-> `, the frame's name in brackets (`get_frame_type_as_string`: `[OPEN]` ... `[CLOSE]`;
`saslclientio.c`: `[SASL MECHANISMS]` ... `[SASL OUTCOME]`), then `amqpvalue_to_string` of the
performative, ending the line; and `-> Header (AMQP 0.1.0.0)` (3.1.0.0 for SASL),
`<- Empty frame` for a heartbeat. `amqpvalue_to_string` (`amqpvalue_to_string.c`):

- a described value is `* ` and its value (the descriptor is not printed), a list, an array
  and a map are `{...}` with `,` between items and no space, a map's pair `[key:value]`;
- strings and symbols bare (unquoted, unescaped), `NULL`, `true`/`false`, integers in decimal,
  a binary `<01 02 0A>`, a float or double `%.02f` (twice over: a bug), a char `U0000XXXX`
  (twice), a uuid `xxxxxxxx-xxxx-...` (since 2017; before, a list holding one was not printed:
  `(null)`), a timestamp in milliseconds;
- the list is as encoded: uamqp leaves trailing nulls out of what it sends, a received frame
  has what the peer sent.

So: no channel (records have none: the tracker puts a channel-less frame on its connection's
one session, `track/amqp10/session.py`; the reader does not invent a number the line did not
print), no payload, no field names (the spec's order names them),
no descriptor of a nested value (its field's type names it; a delivery state with no fields
is `* {}`, accepted or released: not shown), and a string that holds a `,` or a `}` reads as
more items than it was (the line then does not read, a `log.bad-line`).

uamqp-python hands each line to the Python logger `uamqp.c_uamqp` as bytes: `INFO b'-> ...'`
(`unwrap.py` peels the repr). The C library alone prints it bare to stdout.
"""

from __future__ import annotations

import re
from typing import Any, Final

from amqpscope.codec.amqp10 import spec
from amqpscope.logs.amqp10_encode import primitive
from amqpscope.logs.lines import EMPTY, FRAME, HEADER, Logged, search_at, timestamp
from amqpscope.logs.proton_values import (
    Array,
    Binary,
    Described,
    Fields,
    LogLineEnded,
    LogSyntaxError,
    Map,
    Symbol,
)
from amqpscope.logs.shapes import Shapes

NAME: Final = "uamqp"

_LINE: Final = re.compile(
    r"(?P<dir>->|<-) (?:\[(?P<name>[A-Z]+(?: [A-Z]+)?)\](?P<body>\* \{.*|\(null\))"
    r"|Header \(AMQP (?P<proto>[0-3])\.1\.0\.0\)|(?P<empty>Empty frame))\s*$",
    re.DOTALL,
)
#: get_frame_type_as_string's names -> spec composite names
_FRAMES: Final = {
    "OPEN": "open",
    "BEGIN": "begin",
    "ATTACH": "attach",
    "FLOW": "flow",
    "TRANSFER": "transfer",
    "DISPOSITION": "disposition",
    "DETACH": "detach",
    "END": "end",
    "CLOSE": "close",
    "SASL MECHANISMS": "sasl-mechanisms",
    "SASL INIT": "sasl-init",
    "SASL CHALLENGE": "sasl-challenge",
    "SASL RESPONSE": "sasl-response",
    "SASL OUTCOME": "sasl-outcome",
}
_PROTOCOLS: Final = {"0": "AMQP", "2": "TLS", "3": "SASL"}
_COMPOSITES: Final = {c.name: (code, c) for code, c in spec.COMPOSITES.items()}
#: an archetype (a `*` field's `requires`) -> the composites that provide it
_PROVIDERS: Final = {
    archetype: tuple(c.name for c in spec.COMPOSITES.values() if archetype in c.provides)
    for archetype in {p for c in spec.COMPOSITES.values() for p in c.provides}
}
_INT: Final = re.compile(r"-?\d+")
_INTEGERS: Final = frozenset(
    ("ubyte", "ushort", "uint", "ulong", "byte", "short", "int", "long", "timestamp")
)
_ABSENT: Final = object()

# what `_Text.value` reads: ("raw", text) a bare token, ("bin", bytes), ("list", items),
# ("described", items), ("map", [(key, value)])
_Item = tuple[str, Any]


def looks_like(line: str) -> bool:
    if "-> " not in line and "<- " not in line:
        return False
    return search_at(_LINE, line.rstrip("'\"\r\n"), "-> ", "<- ") is not None or (
        "]* {" in line and _started(line)
    )


def _started(line: str) -> bool:
    m = search_at(_START, line, "-> ", "<- ")
    return m is not None and m.group(1) in _FRAMES


#: a frame's start, whatever follows (a line cut or wrapped)
_START: Final = re.compile(r"(?:->|<-) \[([A-Z]+(?: [A-Z]+)?)\]\* \{")


def parse(line: str) -> Logged | None:
    if "-> " not in line and "<- " not in line:
        return None
    m = search_at(_LINE, line, "-> ", "<- ")
    if m is None:
        return None
    ts = timestamp(line[: m.start()]) if m.start() else 0.0
    direction = m.group("dir")
    if m.group("empty") is not None:
        return Logged(NAME, direction, EMPTY, ts=ts)
    if m.group("proto") is not None:
        return Logged(NAME, direction, HEADER, protocol=_PROTOCOLS[m.group("proto")], ts=ts)
    name = m.group("name")
    if name not in _FRAMES:
        return None
    body = m.group("body").rstrip()
    if body == "(null)":  # amqpvalue_to_string failed (a uuid, before 2017): nothing shown
        code, composite = _COMPOSITES[_FRAMES[name]]
        logged = Logged(NAME, direction, FRAME, value=Described(code, composite.name, Fields()))
        logged.ts = ts
        logged.lossy = [f.name for f in composite.fields]
        return logged
    if not body.endswith("}"):
        raise LogLineEnded(len(line), "the frame's text ends before its '}'")
    text = f"{name}\n{body}"
    found = _SHAPES.made(text)
    if found is not None:
        logged = Logged(NAME, direction, FRAME, ts=ts)
        logged.made, logged.lossy = found
        return logged
    value, lossy = _read(text, m.start("body"))
    _SHAPES.learn(text, value, lossy)
    logged = Logged(NAME, direction, FRAME, value=value, ts=ts)
    logged.lossy = lossy
    return logged


def _read(text: str, at: int = 0) -> tuple[Any, list[str]]:
    """A frame's name and body (`NAME\\n* {...}`, its line's column `at`): its performative,
    and the fields it cannot show."""
    name, body = text.split("\n", 1)
    reader = _Text(body, at)
    item, end = reader.value(0)
    if end != len(body):
        raise LogSyntaxError(at + end, "text after the frame's '}'")
    if item[0] != "described":
        raise LogSyntaxError(at, "a described list '* {...}' expected")
    lossy: list[str] = []
    return _described(_FRAMES[name], item[1], lossy, ""), lossy


class _Text:
    """Reads `amqpvalue_to_string`'s text into items (see `_Item`)."""

    __slots__ = ("at", "text")

    def __init__(self, text: str, at: int) -> None:
        self.text = text
        self.at = at

    def value(self, pos: int) -> tuple[_Item, int]:
        text = self.text
        if text.startswith("* ", pos):
            if not text.startswith("{", pos + 2):  # a described value that is no list
                inner, end = self.value(pos + 2)
                return ("described", [inner]), end
            items, end = self.braces(pos + 2)
            return ("described", items), end
        if text.startswith("{", pos):
            items, end = self.braces(pos)
            if items and all(kind == "pair" for kind, _ in items):
                return ("map", [pair for _, pair in items]), end
            return ("list", items), end
        if text.startswith("<", pos):
            close = text.find(">", pos)
            if close < 0:
                raise LogLineEnded(self.at + len(text), "a binary's '>' expected")
            digits = text[pos + 1 : close].replace(" ", "")
            try:
                return ("bin", bytes.fromhex(digits)), close + 1
            except ValueError:
                raise LogSyntaxError(self.at + pos, "<hex bytes> expected") from None
        end = pos
        size = len(text)
        while end < size and text[end] not in ",}]":
            end += 1
        return ("raw", text[pos:end]), end

    def braces(self, pos: int) -> tuple[list[_Item], int]:
        """The items of the `{...}` at `pos`, and where it ends."""
        text = self.text
        items: list[_Item] = []
        pos += 1
        if text.startswith("}", pos):
            return items, pos + 1
        while True:
            if pos >= len(text):
                raise LogLineEnded(self.at + pos, "'}' expected")
            if text.startswith("[", pos):  # a map's pair, `[key:value]`
                colon = text.find(":", pos)
                if colon < 0:
                    raise LogLineEnded(self.at + pos, "a map pair's ':' expected")
                key = ("raw", text[pos + 1 : colon])
                value, end = self.value(colon + 1)
                if not text.startswith("]", end):
                    raise LogSyntaxError(self.at + end, "a map pair's ']' expected")
                items.append(("pair", (key, value)))
                pos = end + 1
            else:
                item, pos = self.value(pos)
                items.append(item)
            if pos >= len(text):
                raise LogLineEnded(self.at + pos, "'}' expected")
            if text[pos] == "}":
                return items, pos + 1
            if text[pos] != ",":
                raise LogSyntaxError(self.at + pos, "',' or '}' expected")
            pos += 1


def _described(name: str, items: list[_Item], lossy: list[str], where: str) -> Described:
    code, composite = _COMPOSITES[name]
    if len(items) > len(composite.fields):
        raise LogSyntaxError(0, f"{where or name}: {len(items)} items, {name} has fewer fields")
    fields = Fields()
    for field, item in zip(composite.fields, items, strict=False):
        value = _value(item, field, lossy, f"{where}{field.name}")
        if value is not _ABSENT:
            fields.append((field.name, value))
    return Described(code, composite.name, fields)


def _value(item: _Item, field: spec.Field, lossy: list[str], where: str) -> Any:
    """An item typed by the spec field it stands for."""
    kind, content = item
    if kind == "raw" and content == "NULL":
        return _ABSENT
    base = primitive(field.type)
    if kind == "described":
        names = _PROVIDERS.get(field.requires or "", ()) if field.type == "*" else (base,)
        fits = [n for n in names if n in _COMPOSITES and _fits(n, content)]
        if len(fits) > 1 and field.requires in fits:  # a target, not a coordinator
            fits = [field.requires]
        if len(fits) != 1:
            lossy.append(where)  # `* {}`: accepted or released, the text cannot say
            return _ABSENT
        return _described(fits[0], content, lossy, f"{where}.")
    if field.multiple:
        elements = content if kind == "list" else [item]
        values = [_typed(element, base, where) for element in elements]
        if base == "symbol":
            return Array("symbol", values)
        return values
    if base == "*":  # an address: a string
        base = "string"
    return _typed(item, base, where, symbols=field.type != "map")


def _fits(name: str, items: list[_Item]) -> bool:
    """Whether `items` can be composite `name`'s fields (how many, and what kind each is)."""
    fields = _COMPOSITES[name][1].fields
    if len(items) > len(fields):
        return False
    for field, (kind, content) in zip(fields, items, strict=False):
        if kind == "raw" and content == "NULL":
            continue
        if not _fits_field(field, kind, content):
            return False
    return True


def _fits_field(field: spec.Field, kind: str, content: Any) -> bool:
    """Whether an item of `kind` (not NULL) can be `field`'s value."""
    if _nested(field):
        return kind == "described"
    base = primitive(field.type)
    if kind == "described":
        return False
    if base == "boolean":
        return content in ("true", "false")
    if base in _INTEGERS:
        return kind == "raw" and _INT.fullmatch(content) is not None
    return base != "binary" or kind == "bin"


def _nested(field: spec.Field) -> bool:
    """Whether `field` holds a described list (a composite, or an archetype composites
    provide: a delivery state, a target; not an address, which a string provides)."""
    if field.type == "*":
        return bool(_PROVIDERS.get(field.requires or ""))
    return primitive(field.type) in _COMPOSITES


def _typed(item: _Item, base: str, where: str, symbols: bool = False) -> Any:
    kind, content = item
    if kind == "bin":
        return Binary(content)
    if kind == "map":
        return Map([(_untyped(k, symbols), _untyped(v)) for k, v in content])
    if kind == "list":
        return [_untyped(element) for element in content]
    if kind == "described":
        raise LogSyntaxError(0, f"{where}: no described value here")
    text: str = content
    if base == "boolean":
        if text not in ("true", "false"):
            raise LogSyntaxError(0, f"{where}: true or false, not {text[:20]!r}")
        return text == "true"
    if base in _INTEGERS:
        if _INT.fullmatch(text) is None:
            raise LogSyntaxError(0, f"{where}: a number, not {text[:20]!r}")
        return int(text)
    if base == "symbol":
        return Symbol(text)
    if base == "binary":
        return Binary(text.encode())
    return text


def _untyped(item: _Item, symbol: bool = False) -> Any:
    """A value where the spec gives no type (a map's keys and values): `true`/`false` and
    numbers as such, other bare text a string (a symbol as a `fields` map's key)."""
    kind, content = item
    if kind == "bin":
        return Binary(content)
    if kind == "map":
        return Map([(_untyped(k), _untyped(v)) for k, v in content])
    if kind in ("list", "described"):
        return [_untyped(element) for element in content]
    if symbol:
        return Symbol(content)
    if content == "NULL":
        return None
    if content in ("true", "false"):
        return content == "true"
    if _INT.fullmatch(content) is not None:
        return int(content)
    return content


def _read_alone(text: str) -> tuple[Any, list[str]]:
    return _read(text)


#: performatives read before (`shapes.py`)
_SHAPES: Final = Shapes(_read_alone)
