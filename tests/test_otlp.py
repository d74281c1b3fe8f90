"""`export --otlp`: the spans and metrics of recorded captures, received by an OTLP receiver
nobody on this project wrote (oteltest's gRPC and HTTP sinks, which decode the requests with
the OpenTelemetry protobufs), checked against what the recording clients observed
(captures/scenarios/otel.py's ground truth): the trace context each client set in its messages,
the confirms, deliveries, redeliveries and settlements it saw, RabbitMQ's 406 and the detach
with error."""

from __future__ import annotations

import logging
import struct
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from amqpscope.cli import main
from amqpscope.metrics.families import FAMILIES
from amqpscope.metrics.spans import parse_traceparent, trace_context
from tests.oracle import missing
from tests.test_metrics import _free_port

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
LOG = logging.getLogger("amqpscope.tests.otlp")


def _expect(name: str) -> dict[str, Any]:
    import json

    return json.loads((CAPTURES / f"{name}.json").read_text())


def _sink_module() -> Any:
    return pytest.importorskip("oteltest.sink", reason=missing("oteltest"))


class Received:
    """What a sink took: its spans (with their resource's attributes) and metrics."""

    def __init__(self, handler: Any) -> None:
        self.handler = handler

    def spans(self) -> list[dict[str, Any]]:
        out = []
        for request in self.handler.telemetry.trace_requests:
            for resource_spans in request.pbreq.resource_spans:
                for scope_spans in resource_spans.scope_spans:
                    out.extend(_span(span) for span in scope_spans.spans)
        return out

    def metrics(self) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {}
        for request in self.handler.telemetry.metric_requests:
            for resource_metrics in request.pbreq.resource_metrics:
                for scope_metrics in resource_metrics.scope_metrics:
                    for metric in scope_metrics.metrics:
                        out.setdefault(metric.name, []).append(metric)
        return out


def _value(any_value: Any) -> Any:
    return getattr(any_value, any_value.WhichOneof("value"))


def _span(span: Any) -> dict[str, Any]:
    """A received span as plain data: ids as hex, attributes as a dict, events by name."""
    return {
        "name": span.name,
        "kind": span.kind,
        "trace": span.trace_id.hex(),
        "id": span.span_id.hex(),
        "parent": span.parent_span_id.hex() or None,
        "start": span.start_time_unix_nano / 1e9,
        "end": span.end_time_unix_nano / 1e9,
        "attributes": {a.key: _value(a.value) for a in span.attributes},
        "events": [e.name for e in span.events],
        "error": span.status.code == 2,  # STATUS_CODE_ERROR
        "tracestate": span.trace_state,
    }


@pytest.fixture
def grpc_sink() -> Iterator[tuple[str, Received]]:
    sink_module = _sink_module()
    from oteltest.sink.handler import AccumulatingHandler

    handler = AccumulatingHandler()
    port = _free_port()
    sink = sink_module.GrpcSink(handler, LOG, port=port)
    sink.start()
    try:
        yield f"127.0.0.1:{port}", Received(handler)
    finally:
        sink.stop()


@pytest.fixture
def http_sink() -> Iterator[tuple[str, Received]]:
    sink_module = _sink_module()
    from oteltest.sink.handler import AccumulatingHandler

    handler = AccumulatingHandler()
    port = _free_port()
    sink = sink_module.HttpSink(handler, LOG, port=port)
    sink.start()
    try:
        yield f"http://127.0.0.1:{port}", Received(handler)
    finally:
        sink.stop()


def _export(capture: str, endpoint: str) -> None:
    result = CliRunner().invoke(main, ["export", str(CAPTURES / capture), "--otlp", endpoint])
    assert result.exit_code == 0, result.output
    assert " spans and " in result.output


def _packet_times(capture: str) -> tuple[float, float]:
    """The first and last packet's time, read of the pcap's record headers (microseconds)."""
    data = (CAPTURES / capture).read_bytes()
    assert data[:4] == bytes.fromhex("d4c3b2a1")  # little-endian, microsecond pcap
    offset, times = 24, []
    while offset + 16 <= len(data):
        seconds, micros, kept, _ = struct.unpack_from("<IIII", data, offset)
        times.append(seconds + micros / 1e6)
        offset += 16 + kept
    return min(times), max(times)


def _by_name(spans: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["attributes"].get("messaging.operation.name") == name]


def test_091_spans_are_the_clients_messages_in_their_traces(
    grpc_sink: tuple[str, Received],
) -> None:
    endpoint, received = grpc_sink
    _export("091-otel.pcap", endpoint)
    spans = received.spans()
    truth = _expect("091-otel")["expect"]
    queue = "amqpscope.091-otel.q"
    first, last = _packet_times("091-otel.pcap")
    for span in spans:  # the capture's times, not the export's
        assert first <= span["start"] <= span["end"] <= last + 1e-6, span
    messages = [s for s in spans if "messaging.message.id" in s["attributes"]]
    by_id = {s["id"]: s for s in spans}
    # every span of a message is in the trace its publisher set in the message's headers
    for message_id, context in truth["traces"].items():
        mine = [s for s in messages if s["attributes"]["messaging.message.id"] == message_id]
        assert {s["trace"] for s in mine} == {context["trace_id"]}, message_id
        assert {s["tracestate"] for s in mine} == {"amqpscope=otel"}
        (publish,) = [s for s in mine if s["attributes"]["messaging.operation.name"] == "publish"]
        assert publish["parent"] == context["span_id"]  # a child of the application's span
        assert publish["name"] == f"publish {queue}"
        assert publish["kind"] == 4  # SPAN_KIND_PRODUCER
        for span in mine:
            if span is not publish:  # everything else hangs below the publish
                parent = by_id[span["parent"]]
                assert parent["trace"] == context["trace_id"]
    # counts: what pika saw
    assert len(_by_name(spans, "publish")) == truth["publishes"]
    assert len(_by_name(spans, "confirm")) == truth["confirms_acked"]
    delivers = _by_name(spans, "deliver")
    assert len(delivers) == truth["deliveries"]
    assert (
        sum(bool(s["attributes"].get("amqpscope.redelivered")) for s in delivers)
        == (truth["redeliveries"])
    )
    settled = Counter(
        (s["attributes"]["messaging.message.id"], s["attributes"]["rabbitmq.message.delivery_tag"])
        for s in delivers
    )
    assert settled == Counter((d["message_id"], d["delivery_tag"]) for d in truth["settlements"])
    # each settlement: a child of the delivery of the same tag, as the consumer settled it
    for done in truth["settlements"]:
        operation = "ack" if done["settled"] == "ack" else "nack"
        (span,) = [
            s
            for s in _by_name(spans, operation)
            if s["attributes"].get("rabbitmq.message.delivery_tag") == done["delivery_tag"]
        ]
        parent = by_id[span["parent"]]
        assert parent["attributes"]["messaging.operation.name"] == "deliver"
        assert parent["attributes"]["rabbitmq.message.delivery_tag"] == done["delivery_tag"]
        assert span["attributes"]["messaging.operation.type"] == "settle"
        if operation == "nack":
            assert span["attributes"]["amqpscope.requeue"] is (done["settled"] == "requeue")
    for span in messages:
        attributes = span["attributes"]
        assert attributes["messaging.system"] == "rabbitmq"
        assert attributes["server.port"] == truth.get("port", 5672)
        assert attributes["server.address"] == "127.0.0.1"
        assert attributes["network.peer.port"] == attributes["server.port"]
        assert attributes["messaging.destination.name"] == ""  # the default exchange
        assert attributes["rabbitmq.destination.routing_key"] == queue
        assert attributes["messaging.message.body.size"] == len(b"otel m0")
        assert not span["error"]
    # RabbitMQ's 406: an error span with the consumer's ack of tag 999 and the close as events
    (error,) = [s for s in spans if s["error"]]
    (close,) = truth["channel_errors"]
    assert error["name"] == "channel.close"
    assert error["attributes"]["error.type"] == str(close["code"])
    assert error["events"] == ["basic.ack", "channel.close"]
    assert error["trace"] not in {c["trace_id"] for c in truth["traces"].values()}


def test_10_spans_over_http_with_the_rejected_outcome_and_the_detach(
    http_sink: tuple[str, Received],
) -> None:
    endpoint, received = http_sink
    _export("10-otel.pcap", endpoint)
    spans = received.spans()
    truth = _expect("10-otel")["expect"]
    address = truth["address"]
    by_id = {s["id"]: s for s in spans}
    for message_id, context in truth["traces"].items():
        mine = [s for s in spans if s["attributes"].get("messaging.message.id") == message_id]
        assert {s["trace"] for s in mine} == {context["trace_id"]}
        (sent,) = [s for s in mine if s["attributes"]["messaging.operation.type"] == "send"]
        assert sent["parent"] == context["span_id"]
        # where the client put it: application-properties, message-annotations, Diagnostic-Id
        assert {s["attributes"]["amqpscope.trace_context"] for s in mine} == {context["where"]}
        if context["where"] != "Diagnostic-Id":  # Azure's carries no tracestate
            assert {s["tracestate"] for s in mine} == {"amqpscope=otel"}
        (got,) = [s for s in mine if s["attributes"]["messaging.operation.type"] == "receive"]
        assert got["parent"] == sent["id"]  # the broker's transfer out, below the client's in
        assert got["name"] == f"transfer {address}"
    assert len([s for s in spans if s["kind"] == 4]) == truth["transfers_sent"]  # PRODUCER
    assert len([s for s in spans if s["kind"] == 5]) == truth["transfers_received"]  # CONSUMER
    outcomes = Counter(
        s["attributes"]["messaging.operation.name"]
        for s in spans
        if s["attributes"].get("messaging.operation.type") == "settle"
    )
    broker, receiver = truth["sender_outcomes"], truth["receiver_outcomes"]
    assert outcomes == Counter(broker) + Counter(receiver)
    (rejected,) = _by_name(spans, "rejected")
    assert rejected["error"] and rejected["attributes"]["error.type"] == "amqp:precondition-failed"
    assert by_id[rejected["parent"]]["attributes"]["messaging.operation.type"] == "receive"
    assert rejected["events"] == ["transfer", "disposition"]
    for span in spans:
        assert span["attributes"]["messaging.system"] == "rabbitmq"  # the broker's open says
    (detach,) = [s for s in spans if s["name"].startswith("detach")]
    assert detach["name"] == f"detach {address}"  # the link the sender attached to it
    assert detach["error"]
    assert detach["attributes"]["error.type"] == truth["sender_detach_condition"]["condition"]
    assert "detach" in detach["events"]
    errors = [s for s in spans if s["error"]]
    assert len(errors) == 2  # the rejected outcome and the detach, nothing else


def test_the_metrics_are_the_prometheus_families(grpc_sink: tuple[str, Received]) -> None:
    endpoint, received = grpc_sink
    _export("091-otel.pcap", endpoint)
    metrics = received.metrics()
    assert metrics and set(metrics) <= {family.exported for family in FAMILIES}
    truth = _expect("091-otel")["expect"]
    published = metrics["amqpscope_channel_messages_published"]
    points = [p for metric in published for p in metric.sum.data_points]
    assert max(p.as_double for p in points) == truth["publishes"]
    assert all(metric.sum.is_monotonic for metric in published)
    confirmed = metrics["amqpscope_channel_messages_confirmed"]
    assert max(p.as_double for m in confirmed for p in m.sum.data_points) == truth["confirms_acked"]
    first, last = _packet_times("091-otel.pcap")
    assert all(first - 1 <= p.time_unix_nano / 1e9 <= last + 1 for p in points)


@pytest.mark.parametrize(
    "command", [["export", str(CAPTURES / "091-otel.pcap")], ["live", "no-such-interface"]]
)
def test_a_bad_endpoint_is_a_usage_error(command: list[str]) -> None:
    """Said before anything is read or captured (live: before the interface is opened)."""
    result = CliRunner().invoke(main, [*command, "--otlp", "ftp://127.0.0.1:1"])
    assert result.exit_code == 2
    assert (
        result.output
        == "amqpscope: --otlp: 'ftp://127.0.0.1:1': the scheme must be http, https or grpc\n"
    )


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        (
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            (0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331, True),
        ),
        (b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", None),  # read below
        ("00-00000000000000000000000000000000-b7ad6b7169203331-01", None),  # zero trace id
        ("00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", None),  # zero span id
        ("ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", None),  # version ff
        ("00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01", None),  # upper case
        ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-x", None),  # 00 has 4 parts
        ("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-x", ()),  # a later version
        ("|abc.1.", None),  # Azure's old hierarchical Diagnostic-Id
        (7, None),
    ],
)
def test_traceparent(value: Any, parsed: Any) -> None:
    """W3C Trace Context's rules (https://www.w3.org/TR/trace-context/#traceparent-header)."""
    got = parse_traceparent(value)
    if isinstance(value, bytes):
        assert got is not None and got[2] is False  # sampled flag off
    elif parsed == ():
        assert got is not None
    else:
        assert got == parsed


def test_trace_context_places() -> None:
    """0-9-1 headers; 1.0 application-properties, then message-annotations; Azure's
    Diagnostic-Id last (its W3C form)."""
    header = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    other = "00-1af7651916cd43dd8448eb211c80319c-c7ad6b7169203331-01"
    headers = {"properties": {"headers": {"traceparent": header, "tracestate": "k=v"}}}
    context = trace_context(headers)
    assert context is not None and context.where == "headers" and context.state == "k=v"
    annotated = {"message-annotations": {"traceparent": header}}
    assert (trace_context(annotated) or pytest.fail()).where == "message-annotations"
    both = {"application-properties": {"traceparent": header}, **annotated}
    assert (trace_context(both) or pytest.fail()).where == "application-properties"
    azure = {"application-properties": {"Diagnostic-Id": other}}
    context = trace_context(azure)
    assert context is not None and context.where == "Diagnostic-Id"
    assert context.span_id == 0xC7AD6B7169203331
    assert trace_context({"application-properties": {"Diagnostic-Id": "|abc.1."}}) is None
    assert trace_context({"properties": {"headers": {"x": 1}}}) is None


def test_an_endpoint_that_does_not_answer_is_one_line_and_exit_1() -> None:
    """The exporters retry for 10 s, then amqpscope says so once (their own logs are quiet)."""
    port = _free_port()  # nothing listens there
    capture = str(CAPTURES / "091-otel.pcap")
    result = subprocess.run(  # a process of its own: the SDK's logs would reach its stderr
        [sys.executable, "-m", "amqpscope.cli", "export", capture, "--otlp", f"127.0.0.1:{port}"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=CAPTURES.parent,
    )
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == (
        f"amqpscope: --otlp: 127.0.0.1:{port}: the OTLP endpoint did not take 19 spans\n"
    )


def test_a_log_without_times_is_said_to_be(grpc_sink: tuple[str, Received]) -> None:
    """Proton's PN_TRACE_FRM lines have no time: the spans are sent, and the output says at
    what time they are."""
    endpoint, received = grpc_sink
    result = CliRunner().invoke(
        main, ["export", str(CAPTURES / "log-proton-broker.log"), "--otlp", endpoint]
    )
    assert result.exit_code == 0, result.output
    assert "the frames have no times: the spans are at time 0" in result.output
    spans = received.spans()
    assert spans and all(span["start"] == span["end"] == 0.0 for span in spans)


def test_the_journeys_followed_at_once_are_bounded() -> None:
    """A long live capture: past `kept_journeys` a new follower starts; the messages keep their
    clients' traces all the same (they carry them), and every delivery still has its span."""
    from amqpscope.cli.inputs import open_input
    from amqpscope.metrics.spans import SpanBuilder
    from amqpscope.track.tracker import Tracker

    builder = SpanBuilder(seed="bounded", kept_journeys=2)
    tracker = Tracker()
    most = 0
    with open_input(str(CAPTURES / "091-otel.pcap")) as source:
        for frame in source.frames(messages=True):
            tracker.feed(frame)
            builder.feed(frame)
            most = max(most, len(builder.follower.journeys))
    spans = builder.take()
    truth = _expect("091-otel")["expect"]
    assert most == 2 and builder.generation > 1
    traces = {f"{s.trace_id:032x}" for s in spans}
    assert traces == {context["trace_id"] for context in truth["traces"].values()}
    operations = Counter(s.attributes["messaging.operation.name"] for s in spans)
    assert operations["publish"] == truth["publishes"]
    assert operations["deliver"] == truth["deliveries"]
    assert len({s.span_id for s in spans}) == len(spans)  # no id given twice


_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 2**70), st.text(max_size=60), st.binary(max_size=40)
)
_KEYS = st.one_of(
    st.text(max_size=12), st.sampled_from(["traceparent", "tracestate", "Diagnostic-Id", "headers"])
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_KEYS, inner, max_size=6)),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["properties", "application-properties", "message-annotations"]), _VALUES
    )
)
def test_any_message_gives_a_context_or_none(message: dict[str, Any]) -> None:
    """Whatever a message's sections hold (a hostile capture's), the trace context is a valid
    one or none, never an exception."""
    context = trace_context(message)
    if context is not None:
        assert 0 < context.trace_id < 1 << 128 and 0 < context.span_id < 1 << 64
