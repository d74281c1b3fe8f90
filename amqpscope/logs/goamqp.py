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
Lines at debug level 2 print the same frames again as they pass between goroutines
(`mux frame to Session`, `TX (Session %p): %d, %s`, `RX (Receiver %p): %s`): not read, or
every frame would count twice.

What the text cannot give back is left out, with `log.not-shown`: maps printed by Go's `%v`
(`map[k:v ...]`, keys and values unquoted, so not readable when not empty), SASL responses
(printed as `********`), a transfer's payload (only its size is printed). Go prints zero values
(an empty string, `<nil>`, `[]`, `map[]`) for what go-amqp does not send; those are absent.
"""

from __future__ import annotations

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
        sep = "" if index == 0 else ("" if go_name.startswith(" ") else ", ")
        parts.append(re.escape(f"{sep}{go_name}: ") + f"(?P<f{index}>.*?)")
    return re.compile(re.escape(f"{name}{{") + "".join(parts) + r"\}", re.DOTALL)


_BODY_PATTERNS: Final = {name: _pattern(name, fields) for name, (_, fields) in _BODIES.items()}
_TERMINUS_PATTERNS: Final = {name: _pattern("source", fields) for name, fields in _TERMINUS.items()}
_ERROR_PATTERN: Final = _pattern("*Error", _ERROR)
_STATE_PATTERNS: Final = {name: _pattern(name, fields) for name, (_, fields) in _STATES.items()}


def looks_like(line: str) -> bool:
    if "X" not in line:
        return False
    m = _PRIMARY.search(line)
    if m is None:
        return False
    rest = m.group("rest").rstrip()
    return rest.startswith("Frame{Type: ") or rest.split("{", 1)[0] in _BODIES


def parse(line: str) -> Logged | None:
    if "TX" not in line and "RX" not in line:
        return None
    m = _PRIMARY.search(line)  # quicker than `lines.search_at` here: `TX` comes early
    if m is None:
        return None
    rest = m.group("rest").rstrip()
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
    found = _SHAPES.made(body)
    if found is not None:
        logged = Logged(m.group("ptr") or "go-amqp", direction, FRAME, channel=channel, ts=ts)
        logged.made, logged.lossy = found
        return logged
    value, lossy = _read(body, m.start("rest"))
    _SHAPES.learn(body, value, lossy)
    logged = Logged(
        m.group("ptr") or "go-amqp", direction, FRAME, channel=channel, value=value, ts=ts
    )
    logged.lossy = lossy
    return logged


def _read(body: str, at: int = 0) -> tuple[Any, list[str]]:
    """A frame body's text (at column `at` of its line): its performative, and the fields it
    cannot show."""
    name = body.split("{", 1)[0]
    composite, fields = _BODIES[name]
    match = _BODY_PATTERNS[name].fullmatch(body)
    if match is None:
        raise LogSyntaxError(at, f"{name}{{...}} not as go-amqp prints it")
    lossy: list[str] = []
    values = _fields(match, fields, lossy, "")
    if composite == "attach" and ("role", True) in values:
        # frames.go: a receiver's attach omits initial-delivery-count (printed as 0 anyway)
        values = Fields(item for item in values if item[0] != "initial-delivery-count")
    return Described(_CODES[composite], composite, values), lossy


def _fields(match: re.Match[str], fields: _Spec, lossy: list[str], where: str) -> Fields:
    out = Fields()
    for index, (_, name, kind) in enumerate(fields):
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
        if state not in _STATES:
            lossy.append(where)
            return _ABSENT
        composite, spec_fields = _STATES[state]
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
