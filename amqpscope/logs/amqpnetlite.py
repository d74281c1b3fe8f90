"""amqpnetlite's frame trace (.NET: `Trace.TraceLevel = TraceLevel.Frame`).

Written from amqpnetlite's own code (read with the `search` tool): `Connection.SendCommand` and
the reader log `Trace.WriteLine(TraceLevel.Frame, "SEND (ch={0}) {1}", channel, command)` (and
`RECV`), through the application's `Trace.TraceListener`, which adds its own prefix (the
samples print `[hh:mm:ss.fff]`). The command is `DescribedList.ToString()` →
`GetDebugString(name, fieldNames, fields)` (`src/Types/DescribedList.cs`, the field names in
each `src/Framing/*.cs`, some short: `flow(next-in-id:0,in-window:2048,...)`, `host-name`):
`attach(name:x,handle:0,role:False,snd-settle-mode:Mixed,...)`, only the
fields that are set, each value by `Trace.GetTraceObject` (`src/Trace.cs`): binary as upper-case
hex, a list as `[a,b]`, anything else by its `ToString()`: numbers in decimal, booleans `True`
/ `False`, strings and symbols as they are (unquoted), a nested described list the same way
(`source(address:q,durable:0)`), a map as its .NET type name (`Amqp.Types.Map`): not shown.
Settle modes print as enum names from 2.2.0 on (`snd-settle-mode:Mixed`, `rcv-settle-mode:First`:
`_ENUMS`), as numbers before.
SASL frames have no channel (`SEND sasl-init(...)`), headers read `SEND AMQP 3 1.0.0`; a
transfer with a payload ends ` payload N` (its size: the bytes are not shown), a heartbeat is
`SEND (ch=0) empty` (`src/Connection.cs`, the same since 2015).

The text has no quoting: a string ends where `,next-field:` or the closing `)` follows, so a
value that itself contains such text is cut there (a finding if what follows does not parse).
"""

from __future__ import annotations

import re
from typing import Any, Final

from amqpscope.codec.amqp10 import spec
from amqpscope.logs.amqp10_encode import primitive
from amqpscope.logs.lines import EMPTY, FRAME, HEADER, RECEIVED, SENT, Logged, search_at, timestamp
from amqpscope.logs.proton_values import (
    Array,
    Binary,
    Described,
    Fields,
    LogLineEnded,
    LogSyntaxError,
    Symbol,
)
from amqpscope.logs.shapes import Shapes

NAME: Final = "amqpnetlite"

_LINE: Final = re.compile(
    r"\b(?P<dir>SEND|RECV) (?:\(ch=(?P<ch>\d+)\) )?(?P<rest>[a-z][a-z-]*\(.*\)|AMQP \d .*|empty)"
    r"(?: payload (?P<size>\d+))?\s*$"
)
_HEADER: Final = re.compile(r"AMQP (\d) (\d)\.(\d)\.(\d)")
#: a frame's start whose `)` the line does not reach (cut, or wrapped by a logger)
_STARTED: Final = re.compile(r"\b(?:SEND|RECV) (?:\(ch=\d+\) )?([a-z][a-z-]*)\(")
_NAME: Final = re.compile(r"([a-z][a-z-]*)\(")
_COMPOSITES: Final = {c.name: (code, c) for code, c in spec.COMPOSITES.items()}
#: amqpnetlite's field names that differ from the spec's (`src/Framing/Open.cs`, `Flow.cs` since
#: its first commit, `Error.cs`'s `fields` for `info`)
_ALIASES: Final = {
    "host-name": "hostname",
    "next-in-id": "next-incoming-id",
    "in-window": "incoming-window",
    "next-out-id": "next-outgoing-id",
    "out-window": "outgoing-window",
    "fields": "info",
}
#: settle modes as .NET prints its enums (2.2.0 on: `Attach.cs` and `Transfer.cs` keep them as
#: `SenderSettleMode` and `ReceiverSettleMode`, which `GetTraceObject` prints by `ToString()`;
#: before, as the byte on the wire)
_ENUMS: Final = {
    "sender-settle-mode": {"Unsettled": 0, "Settled": 1, "Mixed": 2},
    "receiver-settle-mode": {"First": 0, "Second": 1},
}
_PROTOCOLS: Final = {"0": "AMQP", "2": "TLS", "3": "SASL"}
#: a .NET type name printed for a map (`Dictionary.ToString()`): the value is not shown
_TYPE_NAME: Final = re.compile(r"(?:Amqp|System)(?:\.[A-Za-z`0-9\[\], ]+)+")


def looks_like(line: str) -> bool:
    if "SEND " not in line and "RECV " not in line:
        return False
    if _LINE.search(line) is not None:
        return True
    started = _STARTED.search(line)  # a frame cut short (an excerpt's last line)
    return started is not None and started.group(1) in _COMPOSITES


def parse(line: str) -> Logged | None:
    if "SEND " not in line and "RECV " not in line:
        return None
    m = search_at(_LINE, line, "SEND ", "RECV ")
    if m is None:
        started = search_at(_STARTED, line, "SEND ", "RECV ")
        if started is not None and started.group(1) in _COMPOSITES:
            raise LogLineEnded(len(line), "the frame's text ends before its ')'")
        return None
    direction = SENT if m.group("dir") == "SEND" else RECEIVED
    ts = timestamp(line[: m.start()]) if m.start() else 0.0
    rest = m.group("rest").rstrip()
    header = _HEADER.match(rest)
    if header is not None:
        protocol = _PROTOCOLS.get(header.group(1))
        if protocol is None:
            raise LogSyntaxError(m.start("rest"), f"protocol id {header.group(1)}")
        return Logged("amqpnetlite", direction, HEADER, protocol=protocol, ts=ts)
    if rest == "empty":  # `SEND (ch=0) empty`: a heartbeat (Connection.cs)
        return Logged("amqpnetlite", direction, EMPTY, channel=0, ts=ts)
    # a transfer's `payload N` (Connection.cs, since 2015): its size only, the bytes not shown
    size = int(m.group("size")) if m.group("size") is not None else 0
    name_match = _NAME.match(rest)
    if name_match is None or name_match.group(1) not in _COMPOSITES:
        raise LogSyntaxError(m.start("rest"), "a performative name( expected")
    channel = int(m.group("ch")) if m.group("ch") is not None else None
    found = _SHAPES.made(rest)
    if found is not None:
        logged = Logged("amqpnetlite", direction, FRAME, channel=channel or 0, ts=ts)
        logged.made, logged.lossy = found
        if size:
            logged.lossy = [*logged.lossy, "payload"]
        return logged
    lossy: list[str] = []
    value, end = _Reader(rest, lossy).composite(0, "")
    if rest[end:].strip():
        raise LogSyntaxError(m.start("rest") + end, "text after the frame body")
    _SHAPES.learn(rest, value, lossy)
    logged = Logged("amqpnetlite", direction, FRAME, channel=channel or 0, value=value, ts=ts)
    logged.lossy = [*lossy, "payload"] if size else lossy
    return logged


def _read(text: str) -> tuple[Any, list[str]]:
    """A performative's text alone (`shapes.Shapes` reads it again with other numbers)."""
    lossy: list[str] = []
    value, end = _Reader(text, lossy).composite(0, "")
    if text[end:].strip():
        raise LogSyntaxError(end, "text after the frame body")
    return value, lossy


class _Reader:
    def __init__(self, text: str, lossy: list[str]) -> None:
        self.text = text
        self.lossy = lossy
        self.depth = 0

    def composite(self, pos: int, where: str) -> tuple[Described, int]:
        text = self.text
        m = _NAME.match(text, pos)
        if m is None or m.group(1) not in _COMPOSITES:
            raise LogSyntaxError(pos, "a described list name( expected")
        self.depth += 1
        if self.depth > 32:
            raise LogSyntaxError(pos, "nested too deep")
        code, composite = _COMPOSITES[m.group(1)]
        by_name, value_end = _FIELDS[composite.name]
        fields = Fields()
        pos = m.end()
        while True:
            if text.startswith(")", pos):
                self.depth -= 1
                return Described(code, composite.name, fields), pos + 1
            colon = text.find(":", pos)
            if colon < 0:
                raise LogSyntaxError(pos, "field:value expected")
            raw_name = text[pos:colon]
            name = _ALIASES.get(raw_name, raw_name)
            field = by_name.get(name)
            if field is None:
                raise LogSyntaxError(pos, f"no field {raw_name!r} in {composite.name}")
            place = f"{where}.{name}" if where else name
            value, pos = self.value(colon + 1, field, value_end, place)
            if value is not _LOST:
                fields.append((name, value))
            if text.startswith(",", pos):
                pos += 1

    def value(self, pos: int, field: spec.Field, value_end: re.Pattern[str], where: str) -> Any:
        text = self.text
        nested = _NAME.match(text, pos)
        if nested is not None and nested.group(1) in _COMPOSITES:
            return self.composite(pos, where)
        stop = value_end.search(text, pos)
        end = stop.start() if stop is not None else len(text)
        token = text[pos:end]
        return self.scalar(token, field, where), end

    def scalar(self, token: str, field: spec.Field, where: str) -> Any:
        base = primitive(field.type)
        if _TYPE_NAME.fullmatch(token):  # a map: its type name, not its content
            self.lossy.append(where)
            return _LOST
        if token == "null":
            return None
        if field.multiple:
            items = token[1:-1].split(",") if token.startswith("[") else [token]
            items = [i for i in items if i]
            if base == "symbol":
                return Array("symbol", [Symbol(i) for i in items])
            return items
        if base == "boolean":
            if token in ("True", "False"):
                return token == "True"
            raise LogSyntaxError(0, f"{token!r} is no boolean")
        if base in ("ubyte", "ushort", "uint", "ulong", "byte", "short", "int", "long"):
            named = _ENUMS.get(field.type)
            if named is not None and token in named:
                return named[token]
            try:
                return int(token)
            except ValueError:
                raise LogSyntaxError(0, f"{token!r} is no {base}") from None
        if base == "binary":
            try:
                return Binary(bytes.fromhex(token))
            except ValueError:
                raise LogSyntaxError(0, f"{token!r} is no binary (hex)") from None
        if base == "symbol":
            return Symbol(token)
        if base in ("string", "*"):
            return token
        self.lossy.append(where)  # a type amqpnetlite prints by ToString() we cannot read
        return _LOST


_LOST: Final = object()


def _value_end(composite: spec.Composite) -> re.Pattern[str]:
    """Where a raw value of `composite`'s ends: before `,next-field:` or the `)` that closes
    the list."""
    names = "|".join(re.escape(n) for n in [*(f.name for f in composite.fields), *_ALIASES])
    return re.compile(rf",(?=(?:{names}):)|\)(?=[,)]|$)")


#: composite name -> its fields by name, and where one of its raw values ends
_FIELDS: Final[dict[str, tuple[dict[str, spec.Field], re.Pattern[str]]]] = {
    c.name: ({f.name: f for f in c.fields}, _value_end(c)) for c in spec.COMPOSITES.values()
}
#: performatives read before (`shapes.py`)
_SHAPES: Final = Shapes(_read)
