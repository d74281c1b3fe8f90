"""proton-j's frame trace (`PN_TRACE_FRM=true`; qpid-jms, ActiveMQ Artemis, Azure's Java SDK).

Written from proton-j's own code (read with the `search` tool): `TransportImpl.log` prints
`[<identityHashCode>:<channel>] -> <body>` (or `<-`), then for a transfer ` (<length>) "..."`
(`StringUtils.toQuotedString`, cut at a limit); the body is the performative's `toString()`
(`codec/transport/Open.java`, `Attach.java`, ..., `messaging/Source.java`, `Accepted.java`):
`Attach{name='x', handle=0, role=SENDER, sndSettleMode=MIXED, ..., source=Source{address='q',
durable=NONE, ...}, ...}` with camelCase field names, strings in single quotes (not escaped),
symbols and numbers bare, enums by name (`SENDER`, `MIXED`, `UNSETTLED_STATE`, `SESSION_END`),
`null` for absent fields, capabilities as `[a, b]` (`Arrays.asList`) and maps as Java's
`{key=value, ...}`. SASL frames are logged the same way (`SaslInit{mechanism=PLAIN, ...}`).

The same bodies in another form: qpid-jms's FRAMES logger (`AmqpProvider`/`AmqpProtocolTracer`,
a `ProtocolTracer` on proton-j's transport: `TRACE_FRAMES.trace("RECV: {}", frame.getBody())`
and `"SENT: {}"`, inside the application's log4j/logback layout:
`... TRACE FRAMES - RECV: Begin{remoteChannel=0, ...}`), and ActiveMQ's and Artemis's
(`"{} | RECV: {}"`, the peer's address first). They show no channel, no payload and no
connection but the peer's address (else the log is one connection, `qpid-jms`).

Limits the text imposes: a map's values are Java's `toString()` (a string and a symbol look
alike; text stays text), binary is shown as `"..."` only where the field is binary, and a
delivery tag is `Binary` printed the same way.
"""

from __future__ import annotations

import re
from typing import Any, Final

from amqpscope.codec.amqp10 import spec
from amqpscope.logs.amqp10_encode import primitive
from amqpscope.logs.lines import EMPTY, FRAME, HEADER, Logged, timestamp
from amqpscope.logs.proton_values import (
    Array,
    Binary,
    Described,
    Fields,
    LogLineEnded,
    LogSyntaxError,
    Map,
    Symbol,
    unquote,
)
from amqpscope.logs.shapes import Shapes

NAME: Final = "proton-j"

_LINE: Final = re.compile(r"\[(?P<conn>\d+):(?P<ch>\d+)\] (?P<dir>->|<-) (?P<rest>.*)$", re.ASCII)
_BODY: Final = re.compile(r"([A-Z][A-Za-z]*)\{")
#: a transfer's payload before proton-j 0.10 (TransportImpl.log before de99c061, 2015-07):
#: `"` + Binary.toString() + `"`, past 80 characters cut and its length in the text said,
#: `"\\x00Sp...(243)"`
_OLD_PAYLOAD: Final = re.compile(r'\s*"(.*?)(?:\((\d+)\))?"\s*$', re.DOTALL)
_PAYLOAD: Final = re.compile(r"\s*\((\d+)\) \"(.*)\"(\(\d+\))?\s*$", re.DOTALL)
_NUMBER: Final = re.compile(r"-?\d+(?:\.\d+(?:[eE][+-]?\d+)?)?")
_WORD: Final = re.compile(r"[^,}\]=\s][^,}\]=]*")
#: where a map's bare value ends: before `, key=` or the map's `}` (Java's toString does not
#: quote a map's strings, so a comma inside one is read on until a next key follows)
#: a quote that ends a string: before the next field (`, name=`), the end of the object or list
#: (toString does not escape a quote inside a string)
_STRING_END: Final = re.compile(r"'(?=\s*(?:\}|\]|$|, [A-Za-z]+=|, '))")
#: where a bare binary ends (`deliveryTag=\\x00\\x01, messageFormat=0`): before the next field
_BINARY_END: Final = re.compile(r", (?=[A-Za-z_]+=)|\}")
_MAP_VALUE_END: Final = re.compile(r", (?=[^,={}\[\]'\s][^,={}\[\]']*=)|\}")
#: toString class names -> spec composite names
_CLASSES: Final = {
    "Open": "open",
    "Begin": "begin",
    "Attach": "attach",
    "Flow": "flow",
    "Transfer": "transfer",
    "Disposition": "disposition",
    "Detach": "detach",
    "End": "end",
    "Close": "close",
    "SaslMechanisms": "sasl-mechanisms",
    "SaslInit": "sasl-init",
    "SaslChallenge": "sasl-challenge",
    "SaslResponse": "sasl-response",
    "SaslOutcome": "sasl-outcome",
    "Source": "source",
    "Target": "target",
    "Coordinator": "coordinator",
    "Error": "error",
    "ErrorCondition": "error",
    "Accepted": "accepted",
    "Rejected": "rejected",
    "Released": "released",
    "Modified": "modified",
    "Received": "received",
    "Declared": "declared",
    "TransactionalState": "transactional-state",
}
_COMPOSITES: Final = {c.name: (code, c) for code, c in spec.COMPOSITES.items()}
_CAMEL: Final = re.compile(r"(?<!^)(?=[A-Z])")
_HEADERS: Final = {"AMQP": "AMQP", "SASL": "SASL", "TLS": "TLS"}
_HEADER_WORDS: Final = tuple(_HEADERS)


#: qpid-jms's / ActiveMQ's FRAMES tracer: `RECV: <body>`, `SENT: <body>`, the peer's address
#: and ` | ` before them in ActiveMQ's and Artemis's
_TRACER: Final = re.compile(
    r"(?:(?<![^\s])(?P<peer>[^\s|]+) \| )?(?P<verb>RECV|SENT): "
    r"(?P<rest>[A-Z][A-Za-z]*\{.*|null\s*)$"
)


def looks_like(line: str) -> bool:
    m = _LINE.search(line)
    if m is None:
        return _traced(line) is not None
    return _BODY.match(m.group("rest")) is not None


#: names seen -> hyphenated (a log names the same few fields on every line)
_HYPHENATED: Final[dict[str, str]] = {}


def _hyphenated(camel: str) -> str:
    """`idleTimeOut` -> `idle-time-out`, as the spec names the field (SaslOutcome's toString
    names its fields `_code` and `_additionalData`)."""
    found = _HYPHENATED.get(camel)
    if found is None:
        found = _CAMEL.sub("-", camel.lstrip("_")).lower()
        if len(_HYPHENATED) >= 4096:
            _HYPHENATED.clear()
        _HYPHENATED[camel] = found
    return found


#: composite name -> its fields by name, and each name's place in spec order
_FIELDS: Final[dict[str, tuple[dict[str, spec.Field], dict[str, int]]]] = {
    c.name: ({f.name: f for f in c.fields}, {f.name: i for i, f in enumerate(c.fields)})
    for c in spec.COMPOSITES.values()
}


def parse(line: str) -> Logged | None:
    split = _split(line)
    if split is None:
        return None
    at, conn, channel, direction, start = split
    ts = timestamp(line[:at])
    rest = line[start:].rstrip()
    if rest.startswith(_HEADER_WORDS):  # most lines are frames: one test for the three
        for word, protocol in _HEADERS.items():
            if rest.startswith(word) and not rest.startswith(word + "{"):
                return Logged(conn, direction, HEADER, protocol=protocol, ts=ts)
    if rest in ("Empty Frame", "null", ""):
        return Logged(conn, direction, EMPTY, channel=channel or 0, ts=ts)
    if not _body(rest):
        return None
    cut = rest.find("} (")  # a transfer's payload follows its performative
    if cut < 0:
        cut = rest.find('} "')  # before proton-j 0.10 (2015-07): no size before the quote
    head = rest if cut < 0 else rest[: cut + 1]
    found = _SHAPES.made(head)
    value: Described | None = None
    if found is not None:
        pos = len(head)
    else:
        value, pos = _Reader(rest).composite(0)
        if pos == len(head):
            _SHAPES.learn(head, value, [])
    payload: bytes | None = None
    size = 0
    lossy: list[str] = []
    tail = rest[pos:]
    if tail.strip():
        found_payload = _payload(tail)
        old = _OLD_PAYLOAD.match(tail) if found_payload is None else None
        if old is not None:  # `"text"`, or `"text...(n)"` cut at its limit (n: the text's length)
            raw = unquote(old.group(1))
            payload = raw if old.group(2) is None else None
            size = len(raw) if payload is not None else 0
            lossy = [] if payload is not None else ["payload"]
        elif found_payload is None:
            raise LogSyntaxError(start + pos, "text after the frame body")
        else:
            size, quoted, limited = found_payload
            raw = unquote(quoted)
            payload = raw if len(raw) == size and not limited else None
    logged = Logged(
        conn,
        direction,
        FRAME,
        channel=channel,
        value=value,
        payload=payload,
        payload_size=size,
        ts=ts,
    )
    if found is not None:
        logged.made = found[0]
    if lossy:
        logged.lossy = lossy
    return logged


def _traced(line: str) -> tuple[int, str, int | None, str, int] | None:
    """`_split` of a FRAMES tracer's line (`_TRACER`): no channel."""
    if "RECV: " not in line and "SENT: " not in line:
        return None
    m = _TRACER.search(line)
    if m is None:
        return None
    direction = "->" if m.group("verb") == "SENT" else "<-"
    return m.start(), m.group("peer") or "qpid-jms", None, direction, m.start("rest")


def _split(line: str) -> tuple[int, str, int | None, str, int] | None:
    """What `_LINE.search(line)` finds: where its match starts, the connection, the channel,
    the arrow, and where the rest starts; None when it finds nothing. Read by hand from the
    line's first arrow (the regex and its named groups were a good part of a line's time); a
    line this does not read plainly goes to the regex (`tests/test_logs_protonj.py` holds the
    two equal)."""
    sent = line.find("] ->")
    received = line.find("] <-")
    if sent < 0 and received < 0:
        return _traced(line)
    close = sent if received < 0 or 0 <= sent < received else received
    if close + 4 >= len(line) or line[close + 4] != " ":
        return _searched(line)
    colon = _digits_before(line, close)
    if colon == close - 1 or colon < 0 or line[colon] != ":":
        return _searched(line)
    opening = _digits_before(line, colon)
    if opening == colon - 1 or opening < 0 or line[opening] != "[":
        return _searched(line)
    newline = line.find("\n", close)
    if newline >= 0 and newline != len(line) - 1:
        return _searched(line)
    channel = int(line[colon + 1 : close])
    return opening, line[opening + 1 : colon], channel, line[close + 2 : close + 4], close + 5


def _digits_before(line: str, end: int) -> int:
    """Where the run of ASCII digits before `end` starts, less one (-1: at the line's start)."""
    pos = end - 1
    while pos >= 0:
        code = ord(line[pos])
        if code < 48 or code > 57:
            break
        pos -= 1
    return pos


def _searched(line: str) -> tuple[int, str, int | None, str, int] | None:
    """`_split` by the regex itself."""
    m = _LINE.search(line)
    if m is None:
        return _traced(line)
    return m.start(), m.group("conn"), int(m.group("ch")), m.group("dir"), m.start("rest")


def _body(rest: str) -> bool:
    """Whether `_BODY.match(rest)` finds a body: a capitalized name of ASCII letters up to the
    first `{`."""
    brace = rest.find("{")
    if brace < 1 or not 65 <= ord(rest[0]) <= 90:
        return False
    for i in range(1, brace):
        code = ord(rest[i])
        if not (65 <= code <= 90 or 97 <= code <= 122):
            return False
    return True


def _payload(tail: str) -> tuple[int, str, bool] | None:
    """What `_PAYLOAD.match(tail)` finds: the size, the quoted text, and whether a limit cut
    it (`(n)` after the quote); None if it finds nothing. A line that ends at its quote is
    read by hand; any other goes to the regex (`tests/test_logs_protonj.py` holds the two
    equal)."""
    text = tail.lstrip()
    end = text.rstrip()
    if text.startswith("(") and end.endswith('"'):
        close = text.find(') "')
        digits = text[1:close] if close > 1 else ""
        if digits.isdecimal() and len(end) - 1 > close + 2:
            return int(digits), text[close + 3 : len(end) - 1], False
    pm = _PAYLOAD.match(tail)
    if pm is None:
        return None
    return int(pm.group(1)), pm.group(2), pm.group(3) is not None


def _read(text: str) -> tuple[Any, list[str]]:
    """A performative's text alone (`shapes.Shapes` reads it again with other numbers)."""
    value, pos = _Reader(text).composite(0)
    if text[pos:].strip():
        raise LogSyntaxError(pos, "text after the frame body")
    return value, []


class _Reader:
    """`Name{field=value, ...}` as proton-j's toString writes it, typed by the spec."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.depth = 0

    def composite(self, pos: int) -> tuple[Described, int]:
        text = self.text
        m = _BODY.match(text, pos)
        if m is None or m.group(1) not in _CLASSES:
            raise LogSyntaxError(pos, "a known Name{ expected")
        self.depth += 1
        if self.depth > 32:
            raise LogSyntaxError(pos, "nested too deep")
        code, composite = _COMPOSITES[_CLASSES[m.group(1)]]
        by_name, order = _FIELDS[composite.name]
        fields = Fields()
        pos = m.end()
        while True:
            while text.startswith((" ", ","), pos):
                pos += 1
            if text.startswith("}", pos):
                self.depth -= 1
                fields.sort(key=lambda item: order[item[0]])
                return Described(code, composite.name, fields), pos + 1
            eq = text.find("=", pos)
            if eq < 0:
                raise LogSyntaxError(pos, "field=value expected")
            name = _hyphenated(text[pos:eq].strip())
            field = by_name.get(name)
            if field is None:
                raise LogSyntaxError(pos, f"no field {name!r} in {composite.name}")
            value, pos = self.value(eq + 1, field)
            if value is not None:
                fields.append((name, value))

    def value(self, pos: int, field: spec.Field | None, map_value: bool = False) -> tuple[Any, int]:
        text = self.text
        base = primitive(field.type) if field is not None else ""
        if text.startswith("null", pos) and text[pos + 4 : pos + 5] in (",", "}", "]", ""):
            return None, pos + 4
        m = _BODY.match(text, pos)
        if m is not None and m.group(1) in _CLASSES:
            return self.composite(pos)
        if text.startswith("'", pos):  # a string, not escaped: it ends where a field can
            close = _STRING_END.search(text, pos + 1)
            if close is None:
                raise LogLineEnded(pos, "quote not closed")
            end = close.start()
            raw = text[pos + 1 : end]
            return (Symbol(raw) if base == "symbol" else raw), end + 1
        if text.startswith('"', pos):  # Binary.toString / StringUtils.toQuotedString
            end = text.find('"', pos + 1)
            while end >= 0 and text[end + 1 : end + 2] not in (",", "}", "]", ""):
                end = text.find('"', end + 1)
            if end < 0:
                raise LogLineEnded(pos, "quote not closed")
            return Binary(unquote(text[pos + 1 : end])), end + 1
        if text.startswith("[", pos):
            items, pos = self.sequence(pos + 1, "]", field)
            if field is not None and field.multiple and base == "symbol":
                return Array("symbol", [Symbol(str(i)) for i in items]), pos
            return items, pos
        if text.startswith("{", pos):
            items, pos = self.sequence(pos + 1, "}", None, pairs=True)
            symbol_keys = field is not None and field.type in ("fields", "annotations")
            return Map([(Symbol(str(k)) if symbol_keys else k, v) for k, v in items]), pos
        if map_value:
            stop = _MAP_VALUE_END.search(text, pos)
            end = stop.start() if stop is not None else len(text)
            return self.scalar(text[pos:end].strip(), None, ""), end
        if base == "binary":  # Binary.toString: the bytes, `\\x00` for the unprintable, unquoted
            stop = _BINARY_END.search(text, pos)
            end = stop.start() if stop is not None else len(text)
            return Binary(unquote(text[pos:end])), end
        word = _WORD.match(text, pos)
        if word is None:
            raise LogSyntaxError(pos, "a value expected")
        token = word.group().strip()
        end = word.end()
        return self.scalar(token, field, base), end

    def sequence(
        self, pos: int, close: str, field: spec.Field | None, pairs: bool = False
    ) -> tuple[list[Any], int]:
        text = self.text
        items: list[Any] = []
        self.depth += 1
        while True:
            while text.startswith((" ", ","), pos):
                pos += 1
            if text.startswith(close, pos):
                self.depth -= 1
                return items, pos + 1
            if pos >= len(text):
                raise LogSyntaxError(pos, f"{close!r} expected")
            if pairs:
                key, pos = self.value(pos, None)
                if not text.startswith("=", pos):
                    raise LogSyntaxError(pos, "'=' expected in a map")
                value, pos = self.value(pos + 1, None, map_value=True)
                items.append((key, value))
            else:
                element = spec.Field("", field.type, None, False, False, None) if field else None
                value, pos = self.value(pos, element)
                items.append(value)

    @staticmethod
    def scalar(token: str, field: spec.Field | None, base: str) -> Any:
        """A bare token: a number, a boolean, an enum's name or a symbol, by the field."""
        if token in ("true", "false"):
            return token == "true"
        if field is not None:
            restricted = spec.RESTRICTED.get(field.type)
            if restricted is not None and restricted.choices and token.isupper():
                choice = token.lower().replace("_", "-")
                wire = dict(restricted.choices).get(choice)
                if wire is not None:
                    if base == "boolean":
                        return wire == "true"
                    if base == "symbol":
                        return Symbol(wire)
                    return int(wire)
        if _NUMBER.fullmatch(token):
            return float(token) if "." in token else int(token)
        if base == "symbol" or field is None:
            return Symbol(token) if base == "symbol" else token
        if base in ("string", "*"):
            return token
        raise LogSyntaxError(0, f"{token!r} is no {base}")


#: performatives read before (`shapes.py`)
_SHAPES: Final = Shapes(_read)
