"""proton-j's frame trace, written from its `toString()` code (no JVM here).

The frames are the captured ones of real runs (decoded by the codec); `java()` prints each as
proton-j's `TransportImpl.log` and the performatives' `toString()` would (camelCase names,
enum names, quoted strings, bare symbols, Java maps); amqpscope must read back the same fields.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from amqpscope.capture.files import open_capture
from amqpscope.codec.amqp10 import spec
from amqpscope.codec.frames import Frame
from amqpscope.dissect import Dissector
from amqpscope.logs.detect import detect
from amqpscope.logs.reader import LogReader

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
BY_NAME = {c.name: c for c in spec.COMPOSITES.values()}
CLASS = {"error": "Error"}
CHOICES = {name for r in spec.RESTRICTED.values() if r.choices for name, _ in r.choices}


def camel(name: str) -> str:
    head, *rest = name.split("-")
    return head + "".join(part.capitalize() for part in rest)


def java_class(name: str) -> str:
    return CLASS.get(name, "".join(part.capitalize() for part in name.split("-")))


def quote(raw: bytes) -> str:
    return "".join(chr(b) if 32 <= b < 127 and b != 0x5C else f"\\x{b:02x}" for b in raw)


def java(value: Any, field: spec.Field | None) -> str:
    """A decoded JSON value as proton-j's toString prints the Java object."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, dict) and "type" in value and value["type"] in BY_NAME:
        composite = BY_NAME[value["type"]]
        inner = ", ".join(f"{camel(f.name)}={java(value.get(f.name), f)}" for f in composite.fields)
        return f"{java_class(composite.name)}{{{inner}}}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={java(v, None)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(java(v, None) for v in value) + "]"
    if field is None:
        return str(value)
    base = field.type
    while base in spec.RESTRICTED:
        base = spec.RESTRICTED[base].source
    if field.type in spec.RESTRICTED and value in CHOICES and isinstance(value, str):
        choice = dict(spec.RESTRICTED[field.type].choices)
        if value in choice and base != "symbol":
            return value.upper().replace("-", "_")
    if base == "binary":
        return f'"{quote(bytes.fromhex(value))}"'
    if base == "string" or (base == "*" and isinstance(value, str)):  # an address is a String
        return f"'{value}'"
    return str(value)


def line(frame: Frame, arrow: str) -> str:
    if frame.kind == "protocol-header":  # TransportImpl.log(event, headerDescription)
        body = "SASL" if frame.fields["protocol-id"] == 3 else "AMQP"
    else:
        body = java(frame.fields | {"type": frame.name}, None)
    payload = ""
    if frame.name == "transfer":
        raw = frame.data[frame.data[4] * 4 :]
        # the performative's own bytes are not in the log: only the payload after it
        payload_at = len(raw) - (frame.message or {}).get("size", 0)
        rest = raw[payload_at:]
        payload = f' ({len(rest)}) "{quote(rest)}"'
    prefix = "2026-01-31 12:00:00,250 TRACE [o.a.q.p.e.i.TransportImpl]"
    return f"{prefix} [1830712962:{frame.channel or 0}] {arrow} {body}{payload}\n"


def captured(name: str) -> list[Frame]:
    """The frames to print; not SASL's init and response, whose bytes the codec's JSON shows
    decoded (user, password), not as the binary proton-j would print."""
    with open_capture(str(CAPTURES / f"{name}.pcap")) as capture:
        return [
            f
            for f in Dissector().run(capture)
            if f.kind in ("performative", "sasl", "protocol-header")
            and f.name not in ("sasl-init", "sasl-response")
        ]


@pytest.mark.parametrize(
    "name",
    ["log-proton-broker", "log-rhea-broker", "10-peer-to-peer", "10-transaction", "10-bad-address"],
)
def test_captured_frames_as_proton_j_prints_them(name: str) -> None:
    wire = captured(name)
    lines = [line(f, "->" if f.direction == "c2s" else "<-") for f in wire]
    assert detect(lines) == "proton-j"
    reader = LogReader("java.log", "proton-j", show_secrets=True)
    records = [r for n, text in enumerate(lines, 1) for r in reader.feed(text, n)]
    assert reader.findings == [], reader.findings[:3]
    assert len(records) == len(wire)
    for record, frame in zip(records, wire, strict=True):
        assert (record.name, record.channel, record.direction) == (
            frame.name,
            frame.channel,
            frame.direction,
        )
        assert record.fields == frame.fields, (record.source, record.fields, frame.fields)
        if frame.message is not None and "body" in frame.message:
            assert record.message == frame.message


def test_quotes_inside_strings_and_enum_names() -> None:
    text = (
        "[42:1] <- Detach{handle=3, closed=true, error=Error{condition=amqp:not-found, "
        "description='no queue 'q', sorry', info={queue=q}}}\n"
    )
    (record,) = LogReader("d.log", "proton-j").feed(text, 1)
    assert record.fields["error"] == {
        "type": "error",
        "condition": "amqp:not-found",
        "description": "no queue 'q', sorry",
        "info": {"queue": "q"},
    }
    assert record.channel == 1 and record.fields["handle"] == 3


_JUNK = st.sampled_from(["", "x", " ", "[", "]", ":", "\n", "\r", "\u0663", "] -> ", "[1:2]"])
#: `[conn:channel] -> `, right or a little wrong
_TRACED = st.tuples(
    st.sampled_from(["[", "", "x["]),
    st.sampled_from(["1830712962", "0", "", "\u0663", "1x"]),
    st.sampled_from([":", "", "::"]),
    st.sampled_from(["0", "12", "", "\u0663"]),
    st.sampled_from(["] -> ", "] <- ", "] ->", "]  -> ", "] => ", "]"]),
).map("".join)
_LINE_PIECES = st.one_of(_TRACED, _TRACED, _JUNK, st.sampled_from(["Open{}", "2026-01-31 "]))


@settings(max_examples=1000, deadline=None)
@given(st.lists(_LINE_PIECES, max_size=12).map("".join))
def test_a_line_is_split_as_its_pattern_splits_it(line: str) -> None:
    """`protonj._split` finds what `protonj._LINE.search` does."""
    from amqpscope.logs import protonj

    m = protonj._LINE.search(line)
    wanted = None
    if m is not None:
        wanted = (m.start(), m.group("conn"), int(m.group("ch")), m.group("dir"), m.start("rest"))
    assert protonj._split(line) == wanted


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.sampled_from(["Transfer", "transfer", "X", "{", "}", "É", "1", " ", "_", "Open{x=1}"]),
        max_size=5,
    ).map("".join)
)
def test_a_body_is_found_as_its_pattern_finds_it(rest: str) -> None:
    """`protonj._body` says what `protonj._BODY.match` does."""
    from amqpscope.logs import protonj

    assert protonj._body(rest) == (protonj._BODY.match(rest) is not None)


@settings(max_examples=1000, deadline=None)
@given(
    st.tuples(
        st.sampled_from(["", " ", "  ", "\n", "x"]),
        st.sampled_from(["(", "", "(("]),
        st.sampled_from(["49", "", "\u0663", "4x"]),
        st.sampled_from([') "', ")", ') "") "', '"']),
        st.sampled_from(["", "\\x00Sp", '"', ') "', "\n", "a(1)"]),
        st.sampled_from(['"', "", '"(12)', '"(1', '"x']),
        st.sampled_from(["", " ", "\n", " \n "]),
    ).map("".join)
)
def test_a_payload_is_read_as_its_pattern_reads_it(tail: str) -> None:
    """`protonj._payload` finds what `protonj._PAYLOAD.match` does."""
    from amqpscope.logs import protonj

    m = protonj._PAYLOAD.match(tail)
    wanted = None if m is None else (int(m.group(1)), m.group(2), m.group(3) is not None)
    assert protonj._payload(tail) == wanted


#: qpid-jms's FRAMES logger (AmqpProvider's ProtocolTracer: `TRACE_FRAMES.trace("RECV: {}",
#: transportFrame.getBody())`, `"SENT: {}"`) inside a log4j layout (`%d %-5p %c{1} - %m%n`),
#: and ActiveMQ's / Artemis's (`"{} | RECV: {}"`, the peer's address first)
TRACERS = {
    "qpid-jms": "2026-01-31 12:00:00,250 TRACE FRAMES - {verb}: {body}\n",
    "artemis": "2026-01-31 12:00:00,250 TRACE [org.apache.activemq.artemis.protocol.amqp"
    ".proton.handler.FRAMES] /127.0.0.1:43210 | {verb}: {body}\n",
}


@pytest.mark.parametrize("tracer", TRACERS)
@pytest.mark.parametrize("name", ["log-proton-broker", "10-peer-to-peer", "10-bad-address"])
def test_proton_j_bodies_in_a_frames_tracer_line_are_read(name: str, tracer: str) -> None:
    """Issue 42: `... TRACE FRAMES - RECV: Begin{remoteChannel=0, ...}` and `SENT: ...`
    (no channel, no payload shown) read as the captured frames, but their channel."""
    wire = [f for f in captured(name) if f.kind != "protocol-header"]
    lines = [
        TRACERS[tracer].format(
            verb="SENT" if f.direction == "c2s" else "RECV",
            body=java(f.fields | {"type": f.name}, None),
        )
        for f in wire
    ]
    assert any("RECV: Begin{remoteChannel=" in text for text in lines)
    assert detect(lines) == "proton-j"
    reader = LogReader("jms.log", "proton-j", show_secrets=True)
    records = [r for n, text in enumerate(lines, 1) for r in reader.feed(text, n)]
    assert [f.code for f in reader.findings] == []
    assert len(records) == len(wire)
    for record, frame in zip(records, wire, strict=True):
        assert (record.name, record.direction) == (frame.name, frame.direction)
        assert record.channel is None or record.kind == "sasl"
        if frame.name != "transfer":  # its payload is not in the line
            assert record.fields == frame.fields, record.source
