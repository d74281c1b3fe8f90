"""go-amqp's debug log (`-tags debug`), read back from text formatted as go-amqp formats it.

Nothing here runs Go, so the fixtures are written from go-amqp's own format strings
(internal/frames/frames.go and internal/encoding/exported_types.go `String()` methods, ported
below word for word as `go_*`), including the older forms without `Frame{...}` (`TX
(connWriter): Open{...}`, `TX: Open{...}`). The property: generated performatives, printed the
go-amqp way behind its `log.Lmicroseconds` prefix, read back to records whose fields are the
generated values in the capture's JSON shapes.
"""

from __future__ import annotations

import json
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from amqpscope.logs.detect import detect
from amqpscope.logs.reader import records_from_log
from amqpscope.render.lines import frame_ndjson

PREFIX = "10:11:12.123456 "
words = st.text(
    st.characters(whitelist_categories=("L", "N"), max_codepoint=0x7F), min_size=1, max_size=12
)
texts = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=20).filter(
    lambda s: s == s.strip() and "}" not in s and ", " not in s
)
u32 = st.integers(0, 2**32 - 1)
symbols = st.lists(words, max_size=3)


def go_symbols(items: list[str]) -> str:
    return "[" + " ".join(items) + "]"


def go_ptr(value: int | None) -> str:
    return "<nil>" if value is None else str(value)


def go_bool(value: bool) -> str:
    return "true" if value else "false"


def go_error(error: tuple[str, str] | None) -> str:
    if error is None:
        return "*Error(nil)"
    return f"*Error{{Condition: {error[0]}, Description: {error[1]}, Info: map[]}}"


def go_state(state: str | None, error: tuple[str, str] | None = None) -> str:
    if state is None:
        return "<nil>"
    if state == "rejected":
        return f"StateRejected{{Error: {go_error(error)}}}"
    if state == "modified":
        return (
            "StateModified{DeliveryFailed: true, UndeliverableHere: false, "
            "MessageAnnotations: map[]}"
        )
    return {"accepted": "StateAccepted{}", "released": "StateReleased{}"}[state]


def error_json(error: tuple[str, str] | None) -> dict[str, Any] | None:
    if error is None:
        return None
    return {"type": "error", "condition": error[0], "description": error[1]}


@st.composite
def flows(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    nin, iw, nout, ow = draw(st.one_of(st.none(), u32)), draw(u32), draw(u32), draw(u32)
    handle, count, credit = (
        draw(st.one_of(st.none(), u32)),
        draw(st.one_of(st.none(), u32)),
        draw(st.one_of(st.none(), u32)),
    )
    drain, echo = draw(st.booleans()), draw(st.booleans())
    text = (
        f"Flow{{NextIncomingID: {go_ptr(nin)}, IncomingWindow: {iw}, NextOutgoingID: {nout}, "
        f"OutgoingWindow: {ow}, Handle: {go_ptr(handle)}, DeliveryCount: {go_ptr(count)}, "
        f"LinkCredit: {go_ptr(credit)}, Available: <nil>, Drain: {go_bool(drain)}, "
        f"Echo: {go_bool(echo)}, Properties: map[]}}"
    )
    fields = {
        "next-incoming-id": nin,
        "incoming-window": iw,
        "next-outgoing-id": nout,
        "outgoing-window": ow,
        "handle": handle,
        "delivery-count": count,
        "link-credit": credit,
        "drain": drain,
        "echo": echo,
    }
    return text, {k: v for k, v in fields.items() if v is not None}


@st.composite
def transfers(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    handle, delivery = draw(u32), draw(st.one_of(st.none(), u32))
    tag = draw(st.one_of(st.none(), st.binary(max_size=8)))
    settled, more = draw(st.booleans()), draw(st.booleans())
    state = draw(st.sampled_from([None, "accepted", "released"]))
    tag_text = "<nil>" if tag is None else tag.hex().upper()
    text = (
        f"Transfer{{Handle: {handle}, DeliveryID: {go_ptr(delivery)}, DeliveryTag: {tag_text}, "
        f"MessageFormat: 0, Settled: {go_bool(settled)}, More: {go_bool(more)}, "
        f"ReceiverSettleMode: <nil>, State: {go_state(state)}, Resume: false, Aborted: false, "
        f"Batchable: false, Payload [size]: 0}}"
    )
    fields = {
        "handle": handle,
        "delivery-id": delivery,
        "delivery-tag": None if tag is None else tag.hex(),
        "message-format": 0,
        "settled": settled,
        "more": more,
        "state": None if state is None else {"type": state},
    }
    return text, {k: v for k, v in fields.items() if v is not None}


@st.composite
def dispositions(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    receiver, first, last = draw(st.booleans()), draw(u32), draw(st.one_of(st.none(), u32))
    settled = draw(st.booleans())
    state = draw(st.sampled_from([None, "accepted", "released", "rejected", "modified"]))
    error = draw(st.one_of(st.none(), st.tuples(words.map(lambda w: f"amqp:{w}"), texts)))
    text = (
        f"Disposition{{Role: {'Receiver' if receiver else 'Sender'}, First: {first}, "
        f"Last: {go_ptr(last)}, Settled: {go_bool(settled)}, State: {go_state(state, error)}, "
        f"Batchable: false}}"
    )
    state_json: dict[str, Any] | None = None
    if state == "rejected":
        state_json = {"type": "rejected"}
        if error is not None:
            state_json["error"] = error_json(error)
    elif state == "modified":
        state_json = {"type": "modified", "delivery-failed": True, "undeliverable-here": False}
    elif state is not None:
        state_json = {"type": state}
    fields = {
        "role": "receiver" if receiver else "sender",
        "first": first,
        "last": last,
        "settled": settled,
        "state": state_json,
    }
    return text, {k: v for k, v in fields.items() if v is not None}


@st.composite
def attaches(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    name, handle, receiver = draw(texts), draw(u32), draw(st.booleans())
    address = draw(st.one_of(st.just(""), texts))
    caps = draw(symbols)
    source = (
        f"source{{Address: {address}, Durable: 0, ExpiryPolicy: , Timeout: 0, Dynamic: false, "
        "DynamicNodeProperties: map[], DistributionMode: , Filter: map[], DefaultOutcome: <nil> "
        f"Outcomes: [], Capabilities: {go_symbols(caps)}}}"
    )
    target = (
        f"source{{Address: {address}, Durable: 0, ExpiryPolicy: , Timeout: 0, Dynamic: false, "
        "DynamicNodeProperties: map[], Capabilities: []}"
    )
    count = draw(u32)
    text = (
        f"Attach{{Name: {name}, Handle: {handle}, Role: {'Receiver' if receiver else 'Sender'}, "
        f"SenderSettleMode: settled, ReceiverSettleMode: <nil>, Source: {source}, "
        f"Target: {target}, Unsettled: map[], IncompleteUnsettled: false, "
        f"InitialDeliveryCount: {count}, MaxMessageSize: 0, OfferedCapabilities: [], "
        "DesiredCapabilities: [], Properties: map[]}"
    )
    source_json: dict[str, Any] = {"type": "source"}
    if address:
        source_json["address"] = address
    if caps:
        source_json["capabilities"] = caps
    fields: dict[str, Any] = {
        "name": name,
        "handle": handle,
        "role": "receiver" if receiver else "sender",
        "snd-settle-mode": "settled",
        "source": source_json,
    }
    if not receiver:
        fields["initial-delivery-count"] = count
    return text, fields


@st.composite
def opens(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    container, host = draw(texts), draw(st.one_of(st.just(""), texts))
    frame_size, channel_max = draw(u32), draw(st.integers(0, 65535))
    seconds = draw(st.integers(0, 3600))
    caps = draw(symbols)
    go_duration = (
        "0s"
        if seconds == 0
        else (
            f"{seconds // 3600}h{seconds % 3600 // 60}m{seconds % 60}s"
            if seconds >= 3600
            else f"{seconds // 60}m{seconds % 60}s"
            if seconds >= 60
            else f"{seconds}s"
        )
    )
    text = (
        f"Open{{ContainerID : {container}, Hostname: {host}, MaxFrameSize: {frame_size}, "
        f"ChannelMax: {channel_max}, IdleTimeout: {go_duration}, OutgoingLocales: [], "
        f"IncomingLocales: [], OfferedCapabilities: {go_symbols(caps)}, "
        "DesiredCapabilities: [], Properties: map[]}"
    )
    fields: dict[str, Any] = {
        "container-id": container,
        "hostname": host or None,
        "max-frame-size": frame_size,
        "channel-max": channel_max,
        "idle-time-out": seconds * 1000 or None,
        "offered-capabilities": caps or None,
    }
    return text, {k: v for k, v in fields.items() if v is not None}


@st.composite
def closings(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    kind = draw(st.sampled_from(["Detach", "End", "Close"]))
    error = draw(st.one_of(st.none(), st.tuples(words.map(lambda w: f"amqp:{w}"), texts)))
    fields: dict[str, Any] = {}
    if kind == "Detach":
        text = f"Detach{{Handle: 3, Closed: true, Error: {go_error(error)}}}"
        fields = {"handle": 3, "closed": True}
    else:
        text = f"{kind}{{Error: {go_error(error)}}}"
    if error is not None:
        fields["error"] = error_json(error)
    return text, fields


bodies = st.one_of(flows(), transfers(), dispositions(), attaches(), opens(), closings())


def holds(actual: Any, expected: Any) -> bool:
    """`actual` has every key of `expected` with its value (nested maps: the decoder adds
    the spec's defaults beside what was printed)."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and holds(actual[k], v) for k, v in expected.items()
        )
    return bool(actual == expected)


def framed(body: str, channel: int, form: str, sent: bool) -> str:
    tx = "TX" if sent else "RX"
    who = "connWriter" if sent else "connReader"
    if form == "new":
        frame = f"Frame{{Type: AMQP, Channel: {channel}, Body: {body}}}"
        return f"{PREFIX}{tx} ({who} 0xc0001a2000): {frame}"
    if form == "2022":
        return f"{PREFIX}{tx} ({who}): {body}"
    return f"{PREFIX}{tx}: {body}"


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(bodies, st.booleans()), min_size=1, max_size=5),
    st.integers(0, 65535),
    st.sampled_from(["new", "2022", "old"]),
)
def test_go_amqp_text_reads_back(frames: list[Any], channel: int, form: str) -> None:
    lines = [framed(text, channel, form, sent) + "\n" for (text, _), sent in frames]
    found: list[Any] = []
    records = list(records_from_log(lines, "go.log", fmt="go-amqp", findings=found))
    assert [f for f in found if f.code.startswith("log.")] == []
    assert len(records) == len(frames)
    for record, ((_, expected), _) in zip(records, frames, strict=True):
        assert record.channel == (channel if form == "new" else None)
        assert record.ts == pytest.approx(36672.123456)  # `PREFIX`'s time, on 1970-01-01
        fields = json.loads(frame_ndjson(record))["fields"]
        assert holds(fields, expected), (fields, expected)
        assert not [f for f in record.findings if f.code == "log.not-shown"]


def test_level_two_repeats_are_not_read_twice() -> None:
    body = "Detach{Handle: 0, Closed: true, Error: *Error(nil)}"
    lines = [
        f"{PREFIX}RX (connReader 0xc0001a2000): Frame{{Type: AMQP, Channel: 1, Body: {body}}}\n",
        f"{PREFIX}RX (connReader 0xc0001a2000): mux frame to Session (0xc00011): "
        f"Frame{{Type: AMQP, Channel: 1, Body: {body}}}\n",
        f"{PREFIX}RX (Session 0xc00011): mux frame to link (0xc0002): l1, {body}\n",
    ]
    assert detect(lines) == "go-amqp"
    assert [r.name for r in records_from_log(lines, "go.log", fmt="go-amqp")] == ["detach"]


def test_maps_and_masked_values_are_not_shown() -> None:
    line = (
        f"{PREFIX}RX (openAMQP 0xc0001a2000): Frame{{Type: AMQP, Channel: 0, "
        "Body: Open{ContainerID : rabbit, Hostname: , MaxFrameSize: 131072, ChannelMax: 2047, "
        "IdleTimeout: 30s, "
        "OutgoingLocales: [], IncomingLocales: [], OfferedCapabilities: [], DesiredCapabilities: "
        "[], Properties: map[product:RabbitMQ version:4.0]}}\n"
    )
    (record,) = records_from_log([line], "go.log", fmt="go-amqp")
    assert "properties" not in record.fields
    assert [f.code for f in record.findings] == ["log.not-shown"]


@given(st.text(max_size=80), st.integers(0, 300))
def test_mangled_lines_never_raise(junk: str, cut: int) -> None:
    line = framed(
        "Disposition{Role: Receiver, First: 0, Last: <nil>, Settled: true, State: "
        "StateRejected{Error: *Error{Condition: amqp:x, Description: y, Info: map[]}}, "
        "Batchable: false}",
        0,
        "new",
        False,
    )
    mangled = line[:cut] + junk + line[cut:]
    list(records_from_log([mangled + "\n", mangled[:cut]], "go.log", fmt="go-amqp", findings=[]))


def test_a_cached_shape_does_not_carry_a_payload_left_out_to_an_empty_one() -> None:
    """Regression (found by the property test above, run after other tests in one process):
    a transfer shape learned from `Payload [size]: 5` (its payload not shown: left out, and
    said so) was put to a `Payload [size]: 0` transfer, which shows all of its (none). A value
    that makes no field and is 0 where the learned text's was not is read, not recalled."""
    text = (
        "Transfer{{Handle: 0, DeliveryID: 0, DeliveryTag: 00, MessageFormat: 0, Settled: false,"
        " More: false, ReceiverSettleMode: <nil>, State: <nil>, Resume: false, Aborted: false,"
        " Batchable: false, Payload [size]: {}}}"
    )
    sizes = [5, 5, 0, 7, 0]
    lines = [framed(text.format(size), 0, "new", False) + "\n" for size in sizes]
    records = list(records_from_log(lines, "go.log", fmt="go-amqp", findings=[]))
    left_out = [any(f.code == "log.not-shown" for f in r.findings) for r in records]
    assert left_out == [size > 0 for size in sizes]


def test_an_empty_transfer_after_full_ones_of_its_shape_shows_all() -> None:
    """A transfer of payload size 0 shows all it holds; read after transfers of the same shape
    with payloads (which the cache of shapes learned, the payload not shown), it must read as
    it does alone: the reader's output never depends on lines an earlier reader saw."""
    from amqpscope.logs import goamqp

    def transfer(delivery: int, size: int) -> str:
        return framed(
            f"Transfer{{Handle: 0, DeliveryID: {delivery}, DeliveryTag: 00, MessageFormat: 0, "
            "Settled: false, More: false, ReceiverSettleMode: <nil>, State: <nil>, "
            f"Resume: false, Aborted: false, Batchable: false, Payload [size]: {size}}}",
            0,
            "new",
            False,
        )

    def read(sizes: list[tuple[int, int]]) -> list[tuple[Any, list[str]]]:
        lines = [transfer(d, s) + "\n" for d, s in sizes]
        records = records_from_log(lines, "go.log", fmt="go-amqp")
        return [
            (json.loads(frame_ndjson(r))["fields"], [f.code for f in r.findings]) for r in records
        ]

    goamqp._SHAPES.cache.clear()
    alone = read([(0, 0)])
    assert len(alone) == 1 and alone[0][1] == []
    goamqp._SHAPES.cache.clear()
    read([(1, 5), (2, 7), (3, 9)])  # learned (seen twice), then made from the cache
    assert read([(0, 0)]) == alone
    assert read([(4, 3), (5, 0)])[1:] == read([(5, 0)])
