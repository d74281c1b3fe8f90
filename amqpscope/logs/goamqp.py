"""go-amqp's debug log (github.com/Azure/go-amqp built with `-tags debug`).

Written from its code (read with the `search` tool's `fetch` of Azure/go-amqp):
`internal/debug/debug_debug.go` prints through `log.New(os.Stderr, "", log.Lmicroseconds)` (a
`15:04:05.000000 ` time, no date: the reader's `lines.Clock` places it); `conn.go` prints each
frame it writes or reads:
`TX (connWriter %p): %s`, `RX (connReader %p): %s`, and the handshake's `TX (openAMQP %p)`,
`RX (openAMQP %p)`, `RX (negotiateSASL %p)`, `RX (saslOutcome %p)`, `sasl.go`'s
`TX (ConnSASLPlain %p)` (`%p` the connection: one label per connection).
`internal/frames/frames.go` formats them: `Frame{Type: AMQP, Channel: 0, Body: %s}` and each
body as `Open{ContainerID : %s, Hostname: %s, MaxFrameSize: %d, ...}` (its `String()`
methods, quoted below in `_BODIES`), `source{...}` for both source and target (Target's
String says `source{` too), `internal/encoding/exported_types.go` the errors
(`*Error{Condition: %s, Description: %s, Info: %v}`, `*Error(nil)`), delivery states
(`StateAccepted{}`, ...) and settle modes (`unsettled`, `first`).
Older versions (2022-10 to 2023-04: `TX (connWriter): %s`; before that, vcabbage/amqp and
go-amqp up to 0.17: `TX: %s`) printed the body without the `Frame{...}` around it: no channel.
Other lines print frames too, as they pass between goroutines or where a link made them (go-amqp's
history, `git log -p` of its `debug` calls, and vcabbage/amqp's before it): `TX(Session): %s`,
`TX(link): %s`, `TX(Session) - tx: %s` (vcabbage, go-amqp to 0.13), `TX (attachLink): %s`,
`RX (muxHandleFrame): %s`, `TX (sender): %s`, `TX (NewSession): %s` ... (to 2022-12), `TX
(Session): %d, %s` (the channel first), `RX (connReader): mux frame to session: %s` (2023-02),
`TX (Session %p): %d, %s`, `TX (Session %p) mux frame to Conn (%p): %s`, `TX (Sender %p): mux
frame to Session (%p): %d, %s`, `RX (Session %p): mux frame to link (%p): %s, %s` (2023-03 on,
debug level 2). Such a line is read (`_ECHO`), and marked (`Logged.again`) so that the reader
counts it once: the same frame printed by another of these lines a few lines before or after
is the same frame (a log at level 2 prints most frames twice; an excerpt may hold only one).
Before 2022-12 a transfer's tag was Go's `%q` of its bytes (`DeliveryTag: "\x00\x01"`), and
before 2024-12 the states were `Accepted`, `Released`, `Rejected{...}`, `Modified{...}`;
vcabbage's source printed `DefaultOutcome: %vOutcomes:` with no space.

What the text cannot give back is left out, with `log.not-shown`: maps printed by Go's `%v`
(`map[k:v ...]`, keys and values unquoted, so not readable when not empty), SASL responses
(printed as `********`), a transfer's payload (only its size is printed). Go prints zero values
(an empty string, `<nil>`, `[]`, `map[]`) for what go-amqp does not send; those are absent.
"""

from __future__ import annotations

import codecs
import re
from typing import Any, Final

from amqpscope.codec.amqp10 import spec
from amqpscope.logs.lines import FRAME, RECEIVED, SENT, Logged, timestamp
from amqpscope.logs.proton_values import (
    Array,
    Binary,
    Described,
    Fields,
    LogSyntaxError,
    Symbol,
)
from amqpscope.logs.shapes import Shapes

NAME: Final = "go-amqp"

#: who printed the frame in conn.go / sasl.go (the frames on the wire); None: the oldest form
_PRIMARY: Final = re.compile(
    r"(?P<dir>TX|RX)(?: \((?P<who>connWriter|connReader|openAMQP|negotiateSASL|saslOutcome"
    r"|ConnSASL[A-Za-z]+)(?: (?P<ptr>0x[0-9a-fA-F]+|%!p\([^)]*\)))?\))?: (?P<rest>.*)$"
)
#: the lines that print a frame again, or where it was made (see the docstring); `who` is what
#: the reader's `again` keys on
_ECHO: Final = re.compile(
    r"(?P<dir>TX|RX) ?\((?P<who>[A-Za-z.]+)(?: (?P<ptr>0x[0-9a-fA-F]+|%!p\([^)]*\)))?\)"
    r"(?: - (?:tx|txtransfer|default))?:? "
    r"(?:mux (?:frame|transfer) to (?P<to>Conn|Session|session|connWriter|link)"
    r"(?: \((?P<toptr>0x[0-9a-fA-F]+|%!p\([^)]*\))\))?: )?"
    r"(?:(?P<ch>\d+), )?(?P<rest>.*)$"
)
#: a link's name before the frame (`mux frame to link (%p): %s, %s`)
_NAMED: Final = re.compile(
    r", (?=(?:Frame|Open|Begin|Attach|Flow|Transfer|Disposition|Detach|End|Close|Sasl\w+)\{)"
)
_FRAME: Final = re.compile(r"Frame\{Type: (AMQP|SASL), Channel: (\d+), Body: (.*)\}")

# (Go field name, spec field name, kind); the separator before each field is ", " unless the
# format string says otherwise (Source's `DefaultOutcome: %v Outcomes:` has no comma)
_Spec = tuple[tuple[str, str, str], ...]
_BODIES: Final[dict[str, tuple[str, _Spec]]] = {
    "Open": (
        "open",
        (
            ("ContainerID ", "container-id", "str"),
            ("Hostname", "hostname", "str"),
            ("MaxFrameSize", "max-frame-size", "int"),
            ("ChannelMax", "channel-max", "int"),
            ("IdleTimeout", "idle-time-out", "duration"),
            ("OutgoingLocales", "outgoing-locales", "symbols"),
            ("IncomingLocales", "incoming-locales", "symbols"),
            ("OfferedCapabilities", "offered-capabilities", "symbols"),
            ("DesiredCapabilities", "desired-capabilities", "symbols"),
            ("Properties", "properties", "map"),
        ),
    ),
    "Begin": (
        "begin",
        (
            ("RemoteChannel", "remote-channel", "int?"),
            ("NextOutgoingID", "next-outgoing-id", "int"),
            ("IncomingWindow", "incoming-window", "int"),
            ("OutgoingWindow", "outgoing-window", "int"),
            ("HandleMax", "handle-max", "int"),
            ("OfferedCapabilities", "offered-capabilities", "symbols"),
            ("DesiredCapabilities", "desired-capabilities", "symbols"),
            ("Properties", "properties", "map"),
        ),
    ),
    "Attach": (
        "attach",
        (
            ("Name", "name", "str!"),
            ("Handle", "handle", "int"),
            ("Role", "role", "role"),
            ("SenderSettleMode", "snd-settle-mode", "sndmode"),
            ("ReceiverSettleMode", "rcv-settle-mode", "rcvmode"),
            ("Source", "source", "source"),
            ("Target", "target", "target"),
            ("Unsettled", "unsettled", "map"),
            ("IncompleteUnsettled", "incomplete-unsettled", "bool"),
            ("InitialDeliveryCount", "initial-delivery-count", "int"),
            ("MaxMessageSize", "max-message-size", "int0"),
            ("OfferedCapabilities", "offered-capabilities", "symbols"),
            ("DesiredCapabilities", "desired-capabilities", "symbols"),
            ("Properties", "properties", "map"),
        ),
    ),
    "Flow": (
        "flow",
        (
            ("NextIncomingID", "next-incoming-id", "int?"),
            ("IncomingWindow", "incoming-window", "int"),
            ("NextOutgoingID", "next-outgoing-id", "int"),
            ("OutgoingWindow", "outgoing-window", "int"),
            ("Handle", "handle", "int?"),
            ("DeliveryCount", "delivery-count", "int?"),
            ("LinkCredit", "link-credit", "int?"),
            ("Available", "available", "int?"),
            ("Drain", "drain", "bool"),
            ("Echo", "echo", "bool"),
            ("Properties", "properties", "map"),
        ),
    ),
    "Transfer": (
        "transfer",
        (
            ("Handle", "handle", "int"),
            ("DeliveryID", "delivery-id", "int?"),
            ("DeliveryTag", "delivery-tag", "hex"),
            ("MessageFormat", "message-format", "int?"),
            ("Settled", "settled", "bool"),
            ("More", "more", "bool"),
            ("ReceiverSettleMode", "rcv-settle-mode", "rcvmode"),
            ("State", "state", "state"),
            ("Resume", "resume", "bool"),
            ("Aborted", "aborted", "bool"),
            ("Batchable", "batchable", "bool"),
            ("Payload [size]", "", "size"),
        ),
    ),
    "Disposition": (
        "disposition",
        (
            ("Role", "role", "role"),
            ("First", "first", "int"),
            ("Last", "last", "int?"),
            ("Settled", "settled", "bool"),
            ("State", "state", "state"),
            ("Batchable", "batchable", "bool"),
        ),
    ),
    "Detach": (
        "detach",
        (("Handle", "handle", "int"), ("Closed", "closed", "bool"), ("Error", "error", "error")),
    ),
    "End": ("end", (("Error", "error", "error"),)),
    "Close": ("close", (("Error", "error", "error"),)),
    "SaslInit": (
        "sasl-init",
        (
            ("Mechanism ", "mechanism", "str"),
            ("InitialResponse", "initial-response", "masked"),
            ("Hostname", "hostname", "str"),
        ),
    ),
    "SaslMechanisms": ("sasl-mechanisms", (("Mechanisms ", "sasl-server-mechanisms", "symbols!"),)),
    "Challenge": ("sasl-challenge", (("Challenge", "challenge", "masked"),)),
    "Response": ("sasl-response", (("Response", "response", "masked"),)),
    "SaslOutcome": (
        "sasl-outcome",
        (("Code ", "code", "int"), ("AdditionalData", "additional-data", "bytes")),
    ),
}
_TERMINUS: Final[dict[str, _Spec]] = {
    "source": (
        ("Address", "address", "str"),
        ("Durable", "durable", "int0"),
        ("ExpiryPolicy", "expiry-policy", "symbol"),
        ("Timeout", "timeout", "int0"),
        ("Dynamic", "dynamic", "bool"),
        ("DynamicNodeProperties", "dynamic-node-properties", "map"),
        ("DistributionMode", "distribution-mode", "symbol"),
        ("Filter", "filter", "map"),
        ("DefaultOutcome", "default-outcome", "state"),
        (" Outcomes", "outcomes", "symbols"),  # no comma before it in Source.String
        ("Capabilities", "capabilities", "symbols"),
    ),
    "target": (
        ("Address", "address", "str"),
        ("Durable", "durable", "int0"),
        ("ExpiryPolicy", "expiry-policy", "symbol"),
        ("Timeout", "timeout", "int0"),
        ("Dynamic", "dynamic", "bool"),
        ("DynamicNodeProperties", "dynamic-node-properties", "map"),
        ("Capabilities", "capabilities", "symbols"),
    ),
}
_ERROR: Final = (
    ("Condition", "condition", "symbol"),
    ("Description", "description", "str"),
    ("Info", "info", "map"),
)
_STATES: Final[dict[str, tuple[str, _Spec]]] = {
    "StateAccepted": ("accepted", ()),
    "StateReleased": ("released", ()),
    "StateRejected": ("rejected", (("Error", "error", "error"),)),
    "StateModified": (
        "modified",
        (
            ("DeliveryFailed", "delivery-failed", "bool"),
            ("UndeliverableHere", "undeliverable-here", "bool"),
            ("MessageAnnotations", "message-annotations", "map"),
        ),
    ),
    "StateReceived": (
        "received",
        (("SectionNumber ", "section-number", "int"), ("SectionOffset", "section-offset", "int")),
    ),
}
_CODES: Final = {c.name: code for code, c in spec.COMPOSITES.items()}
_SND_MODES: Final = {"unsettled": 0, "settled": 1, "mixed": 2}
_RCV_MODES: Final = {"first": 0, "second": 1}
_NIL: Final = ("<nil>", "*Error(nil)")
_DURATION: Final = re.compile(r"(\d+(?:\.\d+)?)(h|m|s|ms|µs|us|ns)")
_DURATION_UNITS: Final = {
    "h": 3_600_000.0,
    "m": 60_000.0,
    "s": 1000.0,
    "ms": 1.0,
    "µs": 1e-3,
    "us": 1e-3,
    "ns": 1e-6,
}
_ABSENT: Final = object()


def _pattern(name: str, fields: _Spec) -> re.Pattern[str]:
    parts = []
    for index, (go_name, _, _) in enumerate(fields):
        if index and go_name.startswith(" "):  # vcabbage's source had no space there either
            parts.append(" ?" + re.escape(f"{go_name[1:]}: ") + f"(?P<f{index}>.*?)")
            continue
        sep = "" if index == 0 else ", "
        parts.append(re.escape(f"{sep}{go_name}: ") + f"(?P<f{index}>.*?)")
    return re.compile(re.escape(f"{name}{{") + "".join(parts) + r"\}", re.DOTALL)


def _prefix_pattern(name: str, fields: _Spec) -> re.Pattern[str]:
    """`_pattern`'s, its fields after the first each optional with all after it: the text of a
    frame cut after some of its fields and closed (`partial.closings`)."""
    tail = ""
    for index in range(len(fields) - 1, 0, -1):
        go_name = fields[index][0]
        sep = (
            " ?" + re.escape(go_name[1:]) if go_name.startswith(" ") else re.escape(f", {go_name}")
        )
        tail = f"(?:{sep}: (?P<f{index}>.*?){tail})?"
    first = re.escape(f"{fields[0][0]}: ") + "(?P<f0>.*?)"
    return re.compile(re.escape(f"{name}{{") + f"(?:{first}{tail})?" + r"\}", re.DOTALL)


_BODY_PATTERNS: Final = {name: _pattern(name, fields) for name, (_, fields) in _BODIES.items()}
_PREFIX_PATTERNS: Final = {
    name: _prefix_pattern(name, fields) for name, (_, fields) in _BODIES.items()
}
_TERMINUS_PATTERNS: Final = {name: _pattern("source", fields) for name, fields in _TERMINUS.items()}
_ERROR_PATTERN: Final = _pattern("*Error", _ERROR)
#: the states' names before 2024-12 (`Accepted` and `Released` without braces)
_OLD_STATES: Final = {
    "Accepted": "StateAccepted",
    "Released": "StateReleased",
    "Rejected": "StateRejected",
    "Modified": "StateModified",
    "Received": "StateReceived",
}
_STATE_PATTERNS: Final = {
    **{name: _pattern(name, fields) for name, (_, fields) in _STATES.items()},
    **{old: _pattern(old, _STATES[new][1]) for old, new in _OLD_STATES.items()},
}


def looks_like(line: str) -> bool:
    if "X" not in line:
        return False
    m = _PRIMARY.search(line)
    if m is not None:
        rest = m.group("rest").rstrip()
        if rest.startswith("Frame{Type: ") or rest.split("{", 1)[0] in _BODIES:
            return True
    return _echo(line) is not None


def _echo(line: str) -> tuple[re.Match[str], str] | None:
    """A line of `_ECHO`'s forms and the frame's text in it, or None."""
    m = _ECHO.search(line)
    if m is None:
        return None
    rest = m.group("rest").rstrip()
    if not rest.startswith("Frame{") and rest.split("{", 1)[0] not in _BODIES:
        named = _NAMED.search(rest)
        if named is None:
            return None
        rest = rest[named.end() :]
    return m, rest


def parse(line: str) -> Logged | None:
    if "TX" not in line and "RX" not in line:
        return None
    m = _PRIMARY.search(line)  # quicker than `lines.search_at` here: `TX` comes early
    echo = None
    if m is not None:
        rest = m.group("rest").rstrip()
        if rest.startswith("mux "):  # `RX (connReader %p): mux frame to Session (%p): %s`
            m = None
    if m is None:
        echo = _echo(line)
        if echo is None:
            return None
        m, rest = echo
    channel: int | None = None
    framed = _FRAME.fullmatch(rest)
    if framed is not None:
        channel = int(framed.group(2))
        body = framed.group(3)
    elif rest.startswith("Frame{"):
        raise LogSyntaxError(m.start("rest"), "Frame{Type: ..., Channel: N, Body: ...} expected")
    else:
        body = rest
    name = body.split("{", 1)[0]
    if name not in _BODIES:
        if framed is None:
            return None  # some other debug line
        raise LogSyntaxError(m.start("rest"), f"no frame body named {name!r}")
    direction = SENT if m.group("dir") == "TX" else RECEIVED
    ts = timestamp(line[: m.start()]) if m.start() else 0.0
    conn = m.group("ptr") or "go-amqp"
    who = ""  # the connection's own reader or writer (`_PRIMARY`): one class of printer
    if echo is not None:
        who = m.group("who") or "?"
        # the connection when the line names it, else "": the reader's last one (a session's
        # or a link's pointer is no connection's)
        conn = m.group("toptr") if m.group("to") == "Conn" and m.group("toptr") else ""
        if m.group("ptr") is None and not conn:
            conn = "go-amqp"  # the versions without pointers: one label for all
        if m.group("to"):
            who += ">" + m.group("to")
        if channel is None and m.group("ch") is not None:
            channel = int(m.group("ch"))
    found = _SHAPES.made(body)
    if found is not None:
        logged = Logged(conn, direction, FRAME, channel=channel, ts=ts)
        logged.made, logged.lossy = found
    else:
        value, lossy = _read(body, m.start("rest"))
        _SHAPES.learn(body, value, lossy)
        logged = Logged(conn, direction, FRAME, channel=channel, value=value, ts=ts)
        logged.lossy = lossy
    logged.again = (who, body)
    return logged


def _read(body: str, at: int = 0) -> tuple[Any, list[str]]:
    """A frame body's text (at column `at` of its line): its performative, and the fields it
    cannot show."""
    name = body.split("{", 1)[0]
    composite, fields = _BODIES[name]
    match = _BODY_PATTERNS[name].fullmatch(body)
    lossy: list[str] = []
    if match is None:  # a frame cut after some fields (and closed): those, the rest not shown
        match = _PREFIX_PATTERNS[name].fullmatch(body)
        if match is None:
            raise LogSyntaxError(at, f"{name}{{...}} not as go-amqp prints it")
        lossy.extend(
            spec_name
            for i, (_, spec_name, _) in enumerate(fields)
            if spec_name and match.group(f"f{i}") is None
        )
    values = _fields(match, fields, lossy, "")
    if composite == "attach" and ("role", True) in values:
        # frames.go: a receiver's attach omits initial-delivery-count (printed as 0 anyway)
        values = Fields(item for item in values if item[0] != "initial-delivery-count")
    return Described(_CODES[composite], composite, values), lossy


def _fields(match: re.Match[str], fields: _Spec, lossy: list[str], where: str) -> Fields:
    out = Fields()
    for index, (_, name, kind) in enumerate(fields):
        if match.group(f"f{index}") is None:  # not reached: a cut frame's (`_PREFIX_PATTERNS`)
            continue
        if not name:  # a transfer's payload: only its size is printed
            if match.group(f"f{index}") not in ("0", ""):
                lossy.append("payload")
            continue
        value = _value(match.group(f"f{index}"), kind, lossy, f"{where}{name}")
        if value is not _ABSENT:
            out.append((name, value))
    return out


def _value(text: str, kind: str, lossy: list[str], where: str) -> Any:
    """A field's text as go-amqp printed it, read by the field's Go kind."""
    if kind in ("str", "str!"):
        return text if text or kind == "str!" else _ABSENT
    if kind == "symbol":
        return Symbol(text) if text else _ABSENT
    if kind == "int":
        return int(text)
    if kind == "int?":
        return _ABSENT if text == "<nil>" else int(text)
    if kind == "int0":  # go-amqp does not send a zero here
        return int(text) or _ABSENT
    if kind == "bool":
        if text not in ("true", "false"):
            raise LogSyntaxError(0, f"{where}: true or false, not {text[:20]!r}")
        return text == "true"
    if kind == "role":
        if text not in ("Sender", "Receiver"):
            raise LogSyntaxError(0, f"{where}: Sender or Receiver, not {text[:20]!r}")
        return text == "Receiver"
    if kind == "sndmode":
        return _ABSENT if text == "<nil>" else _SND_MODES[text]
    if kind == "rcvmode":
        return _ABSENT if text == "<nil>" else _RCV_MODES[text]
    if kind in ("symbols", "symbols!"):
        if not (text.startswith("[") and text.endswith("]")):
            raise LogSyntaxError(0, f"{where}: [...] expected")
        items = text[1:-1].split()
        if not items and kind == "symbols":
            return _ABSENT
        return Array("symbol", [Symbol(item) for item in items])
    if kind == "duration":
        milliseconds = _milliseconds(text)
        return milliseconds or _ABSENT
    if kind == "hex" and text.startswith('"'):  # Go's %q of the bytes (before 2022-12)
        if len(text) < 2 or not text.endswith('"'):
            raise LogSyntaxError(0, f"{where}: a quoted tag expected")
        return Binary(codecs.escape_decode(text[1:-1].encode("utf-8"))[0])
    if kind == "hex":
        return _ABSENT if text == "<nil>" else Binary(bytes.fromhex(text))
    if kind == "bytes":  # %v of a []byte: decimal bytes
        if not (text.startswith("[") and text.endswith("]")):
            raise LogSyntaxError(0, f"{where}: [...] expected")
        raw = bytes(int(b) for b in text[1:-1].split())
        return Binary(raw) if raw else _ABSENT
    if kind == "map":
        if text == "map[]":
            return _ABSENT
        if not text.startswith("map["):
            raise LogSyntaxError(0, f"{where}: map[...] expected")
        lossy.append(where)  # Go's %v of a map: keys and values unquoted, not read back
        return _ABSENT
    if kind == "masked":
        lossy.append(where)
        return _ABSENT
    if kind in ("source", "target"):
        if text == "<nil>":
            return _ABSENT
        m = _TERMINUS_PATTERNS[kind].fullmatch(text)
        if m is None:
            raise LogSyntaxError(0, f"{where}: source{{...}} not as go-amqp prints it")
        fields = _fields(m, _TERMINUS[kind], lossy, f"{where}.")
        return Described(_CODES[kind], kind, fields)
    if kind == "error":
        if text in _NIL:
            return _ABSENT
        m = _ERROR_PATTERN.fullmatch(text)
        if m is None:
            raise LogSyntaxError(0, f"{where}: *Error{{...}} not as go-amqp prints it")
        return Described(_CODES["error"], "error", _fields(m, _ERROR, lossy, f"{where}."))
    if kind == "state":
        if text in _NIL:
            return _ABSENT
        state = text.split("{", 1)[0]
        if state in ("Accepted", "Released") and text == state:
            text = state = _OLD_STATES[state]
            text += "{}"
        known = _STATES.get(_OLD_STATES.get(state, state))
        if known is None:
            lossy.append(where)
            return _ABSENT
        composite, spec_fields = known
        m = _STATE_PATTERNS[state].fullmatch(text)
        if m is None:
            raise LogSyntaxError(0, f"{where}: {state}{{...}} not as go-amqp prints it")
        read = _fields(m, spec_fields, lossy, f"{where}.")
        return Described(_CODES[composite], composite, read)
    raise LogSyntaxError(0, f"{where}: no reading for {kind}")


def _milliseconds(text: str) -> int:
    """A Go `time.Duration`'s String() (`1m30s`, `500ms`, `0s`) in whole milliseconds."""
    if text == "0s":
        return 0
    pos = 0
    total = 0.0
    for m in _DURATION.finditer(text):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    if pos != len(text) or not text:
        raise LogSyntaxError(0, f"not a Go duration: {text[:20]!r}")
    return round(total)


def _read_alone(body: str) -> tuple[Any, list[str]]:
    return _read(body)


#: performatives read before (`shapes.py`)
_SHAPES: Final = Shapes(_read_alone)
