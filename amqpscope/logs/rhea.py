"""rhea's frame trace (`DEBUG=rhea:frames`), Node.js's AMQP 1.0 library.

Written from rhea's own code (read with the `search` tool and in the npm package):

- `lib/transport.js` logs through `lib/log.js` (the `debug` package, logger `rhea:frames`):
  a header as `[connection-1] -> { protocol_id: 3, major: 1, minor: 0, revision: 0 }` (Node's
  `%o`), a frame as `[connection-1]:0 -> open#10 {...} <payload>` (the performative's
  constructor prints `name#code` in hex, `%j` its JSON), an empty frame as `-> empty`. The
  `debug` package puts an ISO time before each line when stderr is not a terminal; on a
  terminal it puts none, and ends each line with the time since the one before instead
  (`+3ms`, `+2s`: rounded, so not read as a time), in colours (`capture/textlog.py` drops
  them): a trace copied from a terminal.
- the JSON is `toJSON` of `lib/types.js`'s composite: **only fields that are truthy**, by rhea's
  names (`container_id`, `link_credit`); a Buffer as `{"type":"Buffer","data":[...]}`; a nested
  described value (source, target, error, a delivery state) as the bare list of its fields.
- the payload is Node's inspect of a Buffer: `<Buffer 00 53 70 ... 13 more bytes>`, cut after
  50 bytes.

What this gives, and what it cannot (the log's limits, not guesses):
- a mandatory field missing from the JSON was sent falsy (toJSON drops 0 and false): it is
  read as 0 or false; so is one the spec makes mandatory by another field of the frame (a
  sender's initial-delivery-count); an optional field missing is absent (it may have been 0).
- a nested value's type is the field's (source, target, error); a delivery state's is not in
  the log at all (`[]` is accepted and released alike), so `state` is left out, with a finding.
- a payload of at most 50 bytes is whole and decoded; a longer one is cut: no message.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from amqpscope.codec.amqp10 import spec
from amqpscope.logs.amqp10_encode import primitive
from amqpscope.logs.lines import EMPTY, FRAME, HEADER, Logged, Made, Read, timestamp
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

NAME: Final = "rhea"

_LINE: Final = re.compile(
    r"rhea:frames \[(?P<conn>[^\]]+)\](?::(?P<ch>\d+))? (?P<dir>->|<-) (?P<rest>.*)$", re.ASCII
)
_HEADER: Final = re.compile(
    r"\{ protocol_id: (\d+), major: (\d+), minor: (\d+), revision: (\d+) \}"
)
_PERFORMATIVE: Final = re.compile(r"([a-z_]+)#([0-9a-f]+) ")
#: a payload as Node's inspect prints a Buffer (`_buffer` finds what this pattern does)
_BUFFER: Final = re.compile(r"<Buffer((?: [0-9a-f]{2})*)(?: \.\.\. (\d+) more bytes?)?>")
_PROTOCOLS: Final = {0: "AMQP", 2: "TLS", 3: "SASL"}
#: the `debug` package's time since the line before, at the end of a line written to a terminal
_SINCE: Final = re.compile(r" \+\d+(?:ms|s|m|h|d)$", re.ASCII)
_UNITS: Final = frozenset("smhd")
_DECODER: Final = json.JSONDecoder()
#: composite name -> (descriptor code, composite)
_COMPOSITES: Final = {c.name: (code, c) for code, c in spec.COMPOSITES.items()}
#: a field's type -> the composite a bare list in that field is (source, target, error)
_NESTED: Final = {"source": "source", "target": "target", "error": "error"}
#: the flow fields before `handle`, in spec order
_BEFORE_HANDLE: Final = frozenset(
    ("next-incoming-id", "incoming-window", "next-outgoing-id", "outgoing-window")
)


#: `name#code` as rhea prints each performative (its name with `_`, its code in hex) -> the code
_PERFORMATIVES: Final = {
    f"{c.name.replace('-', '_')}#{code:x}": code for code, c in spec.COMPOSITES.items()
}
_TRACE: Final = "rhea:frames ["


def _split(line: str) -> tuple[int, str, int | None, str, int] | None:
    """What `_LINE.search(line)` finds: where its match starts, the connection, the channel
    (None: not shown), the arrow, and where the rest starts; None when it finds nothing. Read
    by hand (the regex and its named groups were a good part of a line's time); a line this
    does not read plainly goes to the regex (`tests/test_logs_rhea.py` holds the two equal)."""
    at = line.find(_TRACE)
    if at < 0:
        return None
    first = at + len(_TRACE)
    close = line.find("]", first)
    if close <= first:
        return _searched(line)
    pos = close + 1
    size = len(line)
    channel: int | None = None
    if pos < size and line[pos] == ":":
        end = pos + 1
        number = 0
        while end < size:
            digit = ord(line[end]) - 48
            if digit < 0 or digit > 9:
                break
            number = number * 10 + digit
            end += 1
        if end == pos + 1:
            return _searched(line)
        channel = number
        pos = end
    if pos + 3 >= size or line[pos] != " " or line[pos + 3] != " ":
        return _searched(line)
    arrow = line[pos + 1 : pos + 3]
    if arrow != "->" and arrow != "<-":
        return _searched(line)
    newline = line.find("\n", pos)
    if newline >= 0 and newline != len(line) - 1:
        return _searched(line)
    return at, line[first:close], channel, arrow, pos + 4


def _searched(line: str) -> tuple[int, str, int | None, str, int] | None:
    """`_split` by the regex itself."""
    m = _LINE.search(line)
    if m is None:
        return None
    channel = int(m.group("ch")) if m.group("ch") is not None else None
    return m.start(), m.group("conn"), channel, m.group("dir"), m.start("rest")


def looks_like(line: str) -> bool:
    if "rhea:frames [" not in line:
        return False
    return _LINE.search(line) is not None or _OLD.search(line) is not None


#: rhea before 0.2.16 (2015 to 2018, `transport.js` before ac85f0e): `[conn] RECV: %o` of
#: `JSON.stringify(frame)` (a quoted string: `'{"size":..,"channel":0,"performative":{"type":
#: "open#10",...}}'`; before 0.2.3 unquoted), `[conn] RECV: { protocol_id: 3, ... }` for a
#: header, and `[conn] PENDING: %o` of a frame it sends, whose performative is a bare list of
#: its fields without its name (`["c1",null,...]`): no frame a reader can name
_OLD: Final = re.compile(
    r"rhea:frames \[(?P<conn>[^\]]+)\] (?P<verb>RECV|PENDING|SENT): (?P<rest>.*)$", re.ASCII
)


def _old_form(line: str) -> str | None:
    """An old rhea frame line (`_OLD`) as the newer form writes the same frame, or None (no
    such line, or a sent frame that does not name its performative)."""
    m = _OLD.search(line)
    if m is None:
        return None
    rest = m.group("rest").rstrip()
    arrow = "<-" if m.group("verb") == "RECV" else "->"
    prefix = f"{line[: m.start()]}rhea:frames [{m.group('conn')}]"
    if rest.startswith("{ protocol_id"):
        return f"{prefix} {arrow} {rest}"
    if len(rest) > 1 and rest[0] == "'" and rest[-1] == "'":  # Node's inspect of a string
        rest = rest[1:-1].replace("\\\\", "\x00").replace("\\'", "'").replace("\x00", "\\")
    try:
        frame = json.loads(rest)
    except ValueError:
        return None
    body = frame.get("performative") if isinstance(frame, dict) else None
    if not isinstance(body, dict) or not isinstance(body.get("type"), str):
        return None
    named = dict(body)
    name = named.pop("type")
    channel = frame.get("channel", 0)
    text = f"{prefix}:{channel} {arrow} {name} {json.dumps(named, separators=(',', ':'))} "
    payload = frame.get("payload")
    if isinstance(payload, dict) and isinstance(payload.get("data"), list):
        text += "<Buffer " + " ".join(f"{b:02x}" for b in payload["data"]) + ">"
    return text


#: what a rhea frame line has after its prefix: an arrow and a performative with its code
#: (`-> open#10 {`), or a header (`-> { protocol_id: 0`)
_FRAME_MARK: Final = re.compile(r"(?:->|<-) (?:[a-z_]+#[0-9a-f]+ ?\{|\{ ?protocol_id)", re.ASCII)


def damaged(line: str) -> str | None:
    """Why a line `parse` reads as no frame is a rhea frame line all the same, its
    `rhea:frames [connection]` prefix damaged, or an old sent frame without its name; None
    when it is not one."""
    if "] PENDING: " in line and _OLD.search(line) is not None:
        return "rhea before 0.2.16 printed a frame it sent without its performative's name"
    if ("->" not in line and "<-" not in line) or _FRAME_MARK.search(line) is None:
        return None
    return (
        "a rhea frame line without its `rhea:frames [connection]` before the arrow (damaged prefix)"
    )


def shown(line: str) -> set[str] | None:
    """The spec names of the fields a frame line's JSON shows (`parse` adds the zeros rhea's
    toJSON dropped, which a line cut short may not have dropped); None if it has no JSON."""
    split = _split(line)
    if split is None:
        return None
    rest = line[split[4] :]
    brace = rest.find("{")
    if brace < 0:
        return None
    try:
        body = json.JSONDecoder().raw_decode(rest, brace)[0]
    except ValueError:
        return None
    return {key.replace("_", "-") for key in body} if isinstance(body, dict) else None


def parse(line: str) -> Logged | None:
    if "] RECV: " in line or "] PENDING: " in line or "] SENT: " in line:
        old = _old_form(line)
        if old is None:
            return None
        line = old
    split = _split(line)
    if split is None:
        return None
    at, conn, channel, direction, start = split
    ts = timestamp(line[:at])
    rest = line[start:].rstrip()
    if rest[-1:] in _UNITS and " +" in rest[-12:]:
        since = _SINCE.search(rest)
        if since is not None:
            rest = rest[: since.start()]
    if rest.startswith("{"):
        header = _HEADER.fullmatch(rest)
        if header is not None:
            protocol = _PROTOCOLS.get(int(header.group(1)))
            if protocol is None:
                raise LogSyntaxError(start, f"protocol id {header.group(1)}")
            return Logged(conn, direction, HEADER, protocol=protocol, ts=ts)
    if rest == "empty":
        return Logged(conn, direction, EMPTY, channel=channel or 0, ts=ts)
    space = rest.find(" ")
    known = _PERFORMATIVES.get(rest[:space]) if space > 0 else None
    if known is not None:  # `name#code` as rhea prints it: what `_PERFORMATIVE` reads
        code, body = known, space + 1
    else:
        pm = _PERFORMATIVE.match(rest)
        if pm is None:
            if rest.startswith("peek_size") or channel is None:
                return None  # rhea's own notes (peek_size ...), no frame
            raise LogSyntaxError(start, "performative#code expected")
        name = pm.group(1).replace("_", "-")
        code = int(pm.group(2), 16)
        found = spec.COMPOSITES.get(code)
        if found is None or found.name != name:
            raise LogSyntaxError(start, f"unknown performative {pm.group()!r}")
        body = pm.end()
    made: Made | None = None
    lossy: list[str] = []
    shaped = _shaped(rest, body, code) if code not in _UNCACHED else None
    if shaped is not None:  # a performative like one read before (`shapes.py`)
        text, tag, end = shaped
        recalled = _SHAPES[code].made(text)
        if recalled is not None:
            made, lossy = recalled
            if tag is not None:
                made.text = rest[body:end]  # its tree, tag and all, if the reader wants it
            fields = made.fields
            if code == _TRANSFER and "delivery-id" not in fields:
                made = None  # `Completions` may give it an id: read it
            elif tag is not None:
                if fields.get("delivery-tag") != "":
                    made = None  # the tag taken out was not the transfer's own
                else:
                    fields["delivery-tag"] = tag.hex()
    value: Described | None = None
    if made is None:
        try:
            json_body, end = _DECODER.raw_decode(rest, body)
        except json.JSONDecodeError as exc:
            ended = exc.pos >= len(rest) - 1 or exc.msg.startswith("Unterminated")
            error = LogLineEnded if ended else LogSyntaxError
            raise error(start + exc.pos, f"JSON: {exc.msg}") from None
        if not isinstance(json_body, dict):
            raise LogSyntaxError(start + body, "a JSON object expected")
        value, lossy = _composite(code, json_body)
        if shaped is not None and shaped[2] == end:
            text, tag, _ = shaped
            _SHAPES[code].learn(text, value if tag is None else _untagged(value), lossy)
    payload: bytes | None = None
    size = 0
    tail = rest[end:].strip()
    if tail:
        buffer = _buffer(tail)
        if buffer is None:
            raise LogSyntaxError(start + end, "text after the performative")
        shown, more = buffer
        size = len(shown) + more
        payload = None if more else shown
    logged = Logged(
        conn,
        direction,
        FRAME,
        channel=channel or 0,
        value=value,
        payload=payload,
        payload_size=size,
        ts=ts,
    )
    logged.made = made
    logged.lossy = lossy
    return logged


def _buffer(tail: str) -> tuple[bytes, int] | None:
    """What `_BUFFER.fullmatch(tail)` finds (the bytes shown, and how many more were not),
    without the regex: its loop over 50 bytes is much of a transfer's time."""
    if not tail.startswith("<Buffer") or not tail.endswith(">"):
        return None
    inner = tail[7:-1]
    more = 0
    cut = inner.find(" ... ")
    if cut >= 0:
        words = inner[cut + 5 :]
        if words.endswith(" more bytes"):
            digits = words[:-11]
        elif words.endswith(" more byte"):
            digits = words[:-10]
        else:
            return None
        if not digits.isdecimal():  # `\d+`
            return None
        more = int(digits)
        inner = inner[:cut]
    count = len(inner) // 3
    if len(inner) % 3 or inner[::3] != " " * count:
        return None
    # the spaces stand where the pattern has them; `fromhex` skips them and reads the rest as
    # hex digits, all of them only if it reads `count` bytes; the pattern's are lower case
    try:
        shown = bytes.fromhex(inner)
    except ValueError:
        return None
    if len(shown) != count or inner.lower() != inner:
        return None
    return shown, more


# -- lines like lines read before (`shapes.py`) -------------------------------------------------
#: performatives `Completions` completes, never taken from the cache: begin, flow
_UNCACHED: Final = frozenset((0x11, 0x13))
_TRANSFER: Final = 0x14
#: a transfer's delivery tag: its bytes are taken out of the text the cache keys, and put back
#: into the fields it makes (a tag of several bytes is several numbers: no shape would keep)
_TAG: Final = '"delivery_tag":{"type":"Buffer","data":['
#: the bytes of a Buffer as JSON writes them (rhea's `%j`): what `raw_decode` reads as such
_BYTES: Final = re.compile(r"(?:0|[1-9]\d{0,2})(?:,(?:0|[1-9]\d{0,2}))*", re.ASCII)


def _shaped(rest: str, start: int, code: int) -> tuple[str, bytes | None, int] | None:
    """A performative's JSON (at `start` in `rest`) as the cache keys it, a transfer's tag
    taken out; the tag's bytes (None: no tag taken out); where the JSON ends (if the cache
    knows the text, a JSON object does end there: it is self-delimiting). None: not for the
    cache."""
    cut = rest.find("} <Buffer", start)
    end = len(rest) if cut < 0 else cut + 1
    text = rest[start:end]
    if code != _TRANSFER:
        return text, None, end
    if '"delivery_id":' not in text:
        return None  # `Completions` may give it an id
    at = text.find(_TAG)
    if at < 0 or text.find("{", 1, at) >= 0 or text.find("[", 1, at) >= 0:
        return text, None, end  # no tag, or not at the top level: as it is
    first = at + len(_TAG)
    last = text.find("]", first)
    if last < 0:
        return None
    if last == first:
        return text, b"", end
    tag = _bytes(text[first:last])
    if tag is None:
        return None
    return text[:first] + text[last:], tag, end


def _bytes(text: str) -> bytes | None:
    """The bytes of `text` if `_BYTES.fullmatch(text)` reads it (decimal numbers without
    leading zeros, by commas) and each is at most 255, else None."""
    out: list[int] = []
    number = 0
    digits = 0
    for i in range(len(text)):
        code = ord(text[i])
        if code == 44:  # `,`
            if digits == 0:
                return None
            out.append(number)
            number = digits = 0
            continue
        digit = code - 48
        if digit < 0 or digit > 9 or digits == 3 or (digits == 1 and number == 0):
            return None  # no digit, a fourth one, or one after a leading zero
        number = number * 10 + digit
        digits += 1
        if number > 255:
            return None
    if digits == 0:
        return None
    out.append(number)
    return bytes(out)


def _untagged(value: Described) -> Described:
    """A transfer as read, its delivery tag empty (as the cache's text has it)."""
    fields = Fields(
        (name, Binary(b"") if name == "delivery-tag" else item) for name, item in value.value
    )
    return Described(value.descriptor, value.name, fields)


def _reader(code: int) -> Read:
    def read(text: str) -> tuple[Any, list[str]]:
        """A performative's JSON alone (`shapes.Shapes` reads it again with other numbers)."""
        body, end = _DECODER.raw_decode(text)
        if end != len(text) or not isinstance(body, dict):
            raise LogSyntaxError(end, "text after the JSON")
        return _composite(code, body)

    return read


#: performatives read before, by descriptor code; a 0 rhea reads as a value left out
_SHAPES: Final = {code: Shapes(_reader(code), zeros=False) for code in spec.COMPOSITES}


class _Plan:
    """What reading one composite field from rhea's JSON takes, worked out once: its JSON key,
    what a missing (falsy) value means, the types `_value` goes by."""

    __slots__ = ("base", "field", "key", "missing", "name", "wanted", "zero_when")

    def __init__(self, field: spec.Field, composite: str = "") -> None:
        self.field = field
        self.name = field.name
        self.key = field.name.replace("-", "_")
        self.base = primitive(field.type)
        self.wanted = field.requires if field.type == "*" else field.type
        #: a falsy or missing value: _FALSE or _ZERO (sent, toJSON left it out), _UNKNOWN (0
        #: or the default: the log cannot tell), else nothing
        self.missing = _NOTHING
        if field.mandatory:
            if self.base == "boolean":
                self.missing = _FALSE
            elif self.base in ("ubyte", "ushort", "uint", "ulong"):
                self.missing = _ZERO
        elif _truthy_default(field) and _falsy_choice(field):
            self.missing = _UNKNOWN
        #: (an earlier field, its value): when the frame has that, a missing value was a 0
        self.zero_when = _ZERO_WHEN.get((composite, field.name))


#: optional fields the spec makes mandatory when an earlier field of the frame has a value:
#: there, a field missing from rhea's JSON was sent as 0 (attach initial-delivery-count "MUST
#: NOT be null if role is sender", part 2 section 2.7.3; a sender's role is false)
_ZERO_WHEN: Final = {("attach", "initial-delivery-count"): ("role", False)}

_NOTHING: Final = 0
_FALSE: Final = 1
_ZERO: Final = 2
_UNKNOWN: Final = 3


def _composite(code: int, body: dict[str, Any]) -> tuple[Described, list[str]]:
    """A performative from its JSON: fields by spec name, typed by the spec; and the fields the
    log cannot show (a described value of no known type, a default the log cannot tell from 0)."""
    composite = spec.COMPOSITES[code]
    fields = Fields()
    lossy: list[str] = []
    for plan in _PLANS[code]:
        raw = body.get(plan.key)
        if raw is None or raw is False or raw == 0:
            missing = plan.missing
            if missing == _FALSE:
                fields.append((plan.name, False))
            elif missing == _ZERO:
                fields.append((plan.name, 0))
            elif missing == _UNKNOWN:
                lossy.append(plan.name)  # 0 (left out) or absent (the default): unknown
            elif plan.zero_when is not None and plan.zero_when in fields:
                fields.append((plan.name, 0))
            continue
        value = _value(raw, plan, lossy, plan.name)
        if value is not _LOST:
            fields.append((plan.name, value))
    return Described(code, composite.name, fields), lossy


def _truthy_default(field: spec.Field) -> bool:
    """Whether the field's spec default is a value toJSON would print (so a field left out
    was not the default, or was: the log cannot say)."""
    default = field.default
    if default is None:
        return False
    restricted = spec.RESTRICTED.get(field.type)
    if restricted is not None:
        default = dict(restricted.choices).get(default, default)
    return default not in ("0", "false")


def _falsy_choice(field: spec.Field) -> bool:
    """Whether the field can hold a value toJSON leaves out (0, false) other than its default."""
    return primitive(field.type) in ("boolean", "ubyte", "ushort", "uint", "ulong")


_LOST: Final = object()
#: descriptor code -> its fields' plans, in spec order
_PLANS: Final = {
    code: tuple(_Plan(field, composite.name) for field in composite.fields)
    for code, composite in spec.COMPOSITES.items()
}


def _nested(name: str, items: list[Any], lossy: list[str], where: str) -> Described:
    code, composite = _COMPOSITES[name]
    fields = Fields()
    for plan, raw in zip(_PLANS[code], items, strict=False):
        if raw is None:
            continue
        field = plan.field
        value = _value(raw, plan, lossy, f"{where}.{field.name}")
        if value is not _LOST:
            fields.append((field.name, value))
    return Described(code, composite.name, fields)


def _value(raw: Any, plan: _Plan, lossy: list[str], where: str) -> Any:
    """A JSON value typed by its field; _LOST (and `where` in `lossy`) for a described value
    whose type the log does not show."""
    field = plan.field
    wanted = plan.wanted
    if wanted in _NESTED and isinstance(raw, list):
        return _nested(_NESTED[wanted], raw, lossy, where)
    base = plan.base
    if (field.type == "*" or base in _COMPOSITES) and isinstance(raw, list):
        lossy.append(where)  # a described list, its descriptor not printed
        return _LOST
    if field.multiple:
        items = raw if isinstance(raw, list) else [raw]
        if base == "symbol":
            return Array("symbol", [Symbol(str(i)) for i in items])
        return [_untyped(i) for i in items]
    if base == "symbol":
        return Symbol(str(raw))
    if base == "binary":
        return _binary(raw)
    if base in ("map", "fields"):
        return _map(raw, symbol_keys=base == "fields" or field.type == "fields")
    return _untyped(raw)


def _binary(raw: Any) -> Any:
    if isinstance(raw, dict) and raw.get("type") == "Buffer":
        return Binary(bytes(raw.get("data", ())))
    return _untyped(raw)


def _map(raw: Any, symbol_keys: bool) -> Any:
    if not isinstance(raw, dict):
        return _untyped(raw)
    return Map([(Symbol(k) if symbol_keys else k, _untyped(v)) for k, v in raw.items()])


def _untyped(raw: Any) -> Any:
    if isinstance(raw, dict):
        if raw.get("type") == "Buffer" and "data" in raw:
            return Binary(bytes(raw["data"]))
        return Map([(k, _untyped(v)) for k, v in raw.items()])
    if isinstance(raw, list):
        return [_untyped(v) for v in raw]
    return raw


class Completions:
    """Numbers rhea left out that the protocol pins down, put back (per reader, in log order).

    toJSON drops a 0, so a field missing from a rhea frame was 0 or not sent. Where the
    protocol says it must have been sent, it was 0; nothing else is filled:
    - a `begin` answering the other side's unanswered begin on channel 0 carries
      `remote-channel` (it is how it answers), so the missing value was 0;
    - the first transfer of a delivery carries `delivery-id`, so on a transfer that starts one
      (no transfer with `more` before it on that link) the missing value was 0;
    - a `flow` with `link-credit` or `delivery-count` is about a link, so it carries `handle`.
    """

    def __init__(self) -> None:
        self.unanswered: dict[tuple[str, str], list[int]] = {}  # (conn, arrow) -> channels
        self.more: set[tuple[str, str, int, int]] = set()  # links with a delivery in progress

    def complete(self, logged: Logged) -> None:
        made = logged.made
        if made is not None:  # from the cache: a transfer with its id, or no begin or flow
            if made.name == "transfer":
                shown = made.fields
                more, aborted = shown.get("more", False), shown.get("aborted", False)
                self._more(logged, shown.get("handle", 0), more, aborted)
            return
        value = logged.value
        if not isinstance(value, Described) or not isinstance(value.value, Fields):
            return
        fields = value.value
        present = {name for name, _ in fields}
        channel = logged.channel or 0
        if value.name == "begin":
            other = (logged.conn, "<-" if logged.direction == "->" else "->")
            waiting = self.unanswered.get(other, [])
            if "remote-channel" not in present and 0 in waiting:
                fields.insert(0, ("remote-channel", 0))
                present.add("remote-channel")
            if "remote-channel" in present:
                answered = next(v for n, v in fields if n == "remote-channel")
                if answered in waiting:
                    waiting.remove(answered)
            else:
                self.unanswered.setdefault((logged.conn, logged.direction), []).append(channel)
        elif value.name == "transfer":
            handle = next((v for n, v in fields if n == "handle"), 0)
            key = (logged.conn, logged.direction, channel, handle)
            if "delivery-id" not in present and key not in self.more:
                fields.insert(1, ("delivery-id", 0))
            more = next((v for n, v in fields if n == "more"), False)
            aborted = next((v for n, v in fields if n == "aborted"), False)
            self._more(logged, handle, more, aborted)
        elif (
            value.name == "flow"
            and "handle" not in present
            and present & {"link-credit", "delivery-count"}
        ):
            at = sum(1 for n, _ in fields if n in _BEFORE_HANDLE)
            fields.insert(at, ("handle", 0))

    def _more(self, logged: Logged, handle: Any, more: Any, aborted: Any) -> None:
        """A transfer with `more` (not aborted) leaves its link's delivery in progress."""
        key = (logged.conn, logged.direction, logged.channel or 0, handle)
        if more and not aborted:
            self.more.add(key)
        else:
            self.more.discard(key)
