"""OpenTelemetry spans of what the wire showed (sans-IO): frames in, `SpanData` out.

A message's hops, as `journeys.Follower` links them (publish → confirm → deliver → ack, a
nack and the redelivery it led to; a 1.0 transfer into the broker, the broker's accepted, its
transfer out and the receiver's outcome), are the spans of one trace. Each hop is a span as soon
as the follower adds it (`Follower.on_hop`), times from the frames' capture times:

- `send` (PRODUCER): a publish / a client's transfer, from its first frame to the frame that
  completes the message;
- `receive` (CONSUMER): a delivery, get-ok or redelivery / the broker's transfer, likewise;
- `settle` (CLIENT): a confirm, nack or return of a publish, a consumer's ack, nack or reject,
  a 1.0 disposition: from what it settles to the settling frame (the time the settled side
  waited for it), a child of the span it settles.

Trace context comes from the message itself where it carries one (`trace_context`): a W3C
`traceparent` (and `tracestate`) in 0-9-1 headers, in 1.0 application-properties or
message-annotations (the W3C AMQP trace-context draft), or Azure's `Diagnostic-Id`
application property: the message's first span is then a child of the application's span, in its
trace. Otherwise the trace id is derived from `seed` and the journey, so the same input gives
the same ids.

Errors are spans of their own (`error_spans`), read of `diagnose`'s close diagnoses (a channel
or connection closed with an error code, a session ended or a link detached with an error),
with their evidence frames as span events; a rejected outcome is its settle span's error.

Attribute names follow the OpenTelemetry messaging semantic conventions (and RabbitMQ's:
`rabbitmq.destination.routing_key`, `rabbitmq.message.delivery_tag`); amqpscope's own are
`amqpscope.*`. Nothing here touches the network: `metrics/otlp.py` sends what this builds.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from amqpscope.codec.frames import Frame
from amqpscope.diagnose import Diagnoser
from amqpscope.diagnose.model import Diagnosis
from amqpscope.journeys.follow import Follower, Hop, Journey

#: span kinds (OpenTelemetry's names)
PRODUCER: Final = "producer"
CONSUMER: Final = "consumer"
CLIENT: Final = "client"
INTERNAL: Final = "internal"
#: frames remembered for span events (their name, time, side); older ones are forgotten
KEPT_FRAMES: Final = 100_000
#: journeys followed at once: past this, a new follower starts (memory stays bounded on a
#: live interface; a message that was under way then starts a trace of its own, unless it
#: carries its trace context)
KEPT_JOURNEYS: Final = 50_000
#: diagnoses that are error spans, and the span's name
ERROR_SPANS: Final = {
    "close.channel": "channel.close",
    "close.connection": "connection.close",
    "close.session": "end",
    "close.link": "detach",
}
#: where a 1.0 message's trace context may be, in the order looked at
TRACE_PLACES: Final = ("application-properties", "message-annotations")
PROTOCOL_VERSIONS: Final = {"0-9-1": "0.9.1", "0-9": "0.9", "0-8": "0.8", "1.0": "1.0"}
OTHER: Final = {"c2s": "s2c", "s2c": "c2s"}

Attributes = dict[str, str | int | float | bool]


@dataclass(frozen=True, slots=True)
class TraceContext:
    """A W3C trace context a message carried: its trace, the application's span (the parent of
    the wire's spans), and where it was found."""

    trace_id: int
    span_id: int
    sampled: bool
    state: str | None
    where: str


@dataclass(frozen=True, slots=True)
class SpanEvent:
    name: str
    ts: float
    attributes: Attributes


@dataclass(slots=True)
class SpanData:
    """One span, ready to export: ids as integers (128-bit trace, 64-bit span), times in
    seconds of capture time, `error` the status description of an error span (None: unset)."""

    name: str
    kind: str
    trace_id: int
    span_id: int
    parent_id: int | None
    start: float
    end: float
    attributes: Attributes
    events: list[SpanEvent] = field(default_factory=list)
    error: str | None = None
    remote_parent: bool = False
    tracestate: str | None = None
    sampled: bool = True


def _text(value: Any) -> str | None:
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("ascii")
        except UnicodeDecodeError:
            return None
    return value if isinstance(value, str) else None


def parse_traceparent(value: Any) -> tuple[int, int, bool] | None:
    """(trace id, parent span id, sampled) of a W3C traceparent, None when it is not one
    (https://www.w3.org/TR/trace-context/#traceparent-header: version 00, or a later version
    read as 00; all-zero ids are invalid)."""
    text = _text(value)
    if text is None:
        return None
    parts = text.strip().split("-")
    if len(parts) < 4 or len(parts[0]) != 2 or parts[0] == "ff":
        return None
    version, trace, span, flags = parts[0], parts[1], parts[2], parts[3]
    if version == "00" and len(parts) != 4:
        return None
    if len(trace) != 32 or len(span) != 16 or len(flags) != 2:
        return None
    try:
        trace_id, span_id, bits = int(trace, 16), int(span, 16), int(flags, 16)
        int(version, 16)
    except ValueError:
        return None
    if trace != trace.lower() or span != span.lower() or not trace_id or not span_id:
        return None
    return trace_id, span_id, bool(bits & 1)


def _lookup(table: Any, key: str) -> Any:
    """A key of an AMQP map, whatever its case (headers are case-sensitive on the wire, but
    clients write `Diagnostic-Id` and `traceparent` in more than one way)."""
    if not isinstance(table, dict):
        return None
    if key in table:
        return table[key]
    lower = key.lower()
    for name, value in table.items():
        if isinstance(name, str) and name.lower() == lower:
            return value
    return None


def trace_context(message: dict[str, Any]) -> TraceContext | None:
    """The trace context a decoded message carries, if any: 0-9-1 headers, 1.0
    application-properties then message-annotations (`traceparent`, `tracestate`), then
    Azure's `Diagnostic-Id` application property (W3C form only)."""
    properties = message.get("properties")
    places: list[tuple[str, Any]] = []
    if isinstance(properties, dict) and isinstance(properties.get("headers"), dict):
        places.append(("headers", properties["headers"]))
    places.extend((where, message.get(where)) for where in TRACE_PLACES)
    for where, table in places:
        parsed = parse_traceparent(_lookup(table, "traceparent"))
        if parsed is not None:
            state = _text(_lookup(table, "tracestate"))
            return TraceContext(parsed[0], parsed[1], parsed[2], state, where)
    parsed = parse_traceparent(_lookup(message.get("application-properties"), "Diagnostic-Id"))
    if parsed is not None:
        return TraceContext(parsed[0], parsed[1], parsed[2], None, "Diagnostic-Id")
    return None


def _split(endpoint: str) -> tuple[str, int] | None:
    """'10.0.0.1:5672' / '[::1]:5672' -> (address, port)."""
    host, _, port = endpoint.rpartition(":")
    if not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


@dataclass(slots=True)
class _Conn:
    """What the spans of one connection share: its ends, protocol and the server's product."""

    version: str = ""
    server: tuple[str, int] | None = None
    client: tuple[str, int] | None = None
    product: str | None = None

    def attributes(self) -> Attributes:
        out: Attributes = {"network.protocol.name": "amqp"}
        if self.version in PROTOCOL_VERSIONS:
            out["network.protocol.version"] = PROTOCOL_VERSIONS[self.version]
        if self.product:
            out["messaging.system"] = self.product.lower()
        else:  # 0-9-1 is RabbitMQ's protocol; a 1.0 peer that names no product is plain AMQP
            out["messaging.system"] = "amqp" if self.version == "1.0" else "rabbitmq"
        if self.server is not None:
            out["network.transport"] = "tcp"
            out["server.address"], out["server.port"] = self.server
            out["network.peer.address"], out["network.peer.port"] = self.server
        if self.client is not None:
            out["client.address"], out["client.port"] = self.client
        return out


@dataclass(frozen=True, slots=True)
class _Fact:
    """A frame remembered for span events and error types."""

    name: str
    ts: float
    direction: str
    conn: int
    channel: int | None
    error: str | None  # reply code or condition, when the frame closes something with one
    link: tuple[str | None, str | None] | None = None  # a detach's link: (name, address)


def _error_of(frame: Frame) -> str | None:
    """The error a closing frame carries: 0-9-1's reply code (200 is none), 1.0's condition."""
    fields = frame.fields
    if frame.name in ("channel.close", "connection.close"):
        code = fields.get("reply-code")
        return str(code) if type(code) is int and code != 200 else None
    if frame.name in ("detach", "end", "close"):
        error = fields.get("error")
        condition = error.get("condition") if isinstance(error, dict) else None
        return str(condition) if condition is not None else None
    return None


def _id(seed: str, *parts: object, bits: int = 64) -> int:
    """A stable id from the input's seed and what names the span (never 0)."""
    text = "\x1f".join([seed, *map(str, parts)]).encode()
    value = int.from_bytes(hashlib.blake2b(text, digest_size=bits // 8).digest(), "big")
    return value or 1


class SpanBuilder:
    """Feed every frame, after the tracker has been fed it; `take()` the spans made so far.
    At a connection's end (`retire`) and the input's (`finish`) its error spans are made."""

    def __init__(
        self,
        seed: str = "",
        kept_frames: int = KEPT_FRAMES,
        kept_journeys: int = KEPT_JOURNEYS,
        diagnoser: Diagnoser | None = None,
    ) -> None:
        """`diagnoser`: another's (a sampler's), fed and told of ended connections by its
        owner; the builder then only reads it. Without one the builder keeps its own."""
        self.seed = seed
        self.kept_frames = kept_frames
        self.kept_journeys = kept_journeys
        self.generation = 0  # followers started: a part of every message span's ids
        self.follower = Follower(on_hop=self._hop)
        self.own_diagnoser = diagnoser is None
        self.diagnoser = Diagnoser() if diagnoser is None else diagnoser
        self.pending: list[SpanData] = []
        self.conns: dict[int, _Conn] = {}
        self.facts: OrderedDict[int, _Fact] = OrderedDict()
        #: 1.0 links attached: conn -> (direction, channel, handle) -> (name, address)
        self.links: dict[int, dict[tuple[str, int, int], tuple[str | None, str | None]]] = {}
        self.contexts: dict[int, TraceContext | None] = {}  # journey number -> its context
        self.diagnosed: set[int] = set()  # connections whose error spans were made
        self._frame: Frame | None = None
        self.made = 0

    # -- frames in ---------------------------------------------------------------------------
    def feed(self, frame: Frame) -> None:
        self._frame = frame
        self._connection(frame)
        if frame.number:
            self.facts[frame.number] = _Fact(
                frame.name,
                frame.ts,
                frame.direction,
                frame.conn,
                frame.channel,
                _error_of(frame),
                self._link(frame),
            )
            if len(self.facts) > self.kept_frames:
                self.facts.popitem(last=False)
        if self.own_diagnoser:
            self.diagnoser.feed(frame)
        if len(self.follower.journeys) >= self.kept_journeys:
            self.generation += 1
            self.follower = Follower(on_hop=self._hop)
            self.contexts.clear()
        self.follower.feed(frame)
        self._frame = None

    def _link(self, frame: Frame) -> tuple[str | None, str | None] | None:
        """1.0: an attach's link name and address, kept by its sender's handle; a detach's, read
        back (the detach of a handle names the link its sender attached with it)."""
        if frame.version != "1.0" or frame.name not in ("attach", "detach"):
            return None
        handle = frame.fields.get("handle")
        if type(handle) is not int:  # a damaged frame's: no link to name
            return None
        key = (frame.direction, frame.channel or 0, handle)
        links = self.links.setdefault(frame.conn, {})
        if frame.name == "detach":
            return links.pop(key, None) if frame.fields.get("closed") else links.get(key)
        end = frame.fields.get("target" if frame.fields.get("role") == "sender" else "source")
        address = end.get("address") if isinstance(end, dict) else None
        name = frame.fields.get("name")
        links[key] = (_text(name), _text(address))
        return None

    def _connection(self, frame: Frame) -> None:
        conn = self.conns.get(frame.conn)
        if conn is None:
            conn = self.conns[frame.conn] = _Conn()
            if frame.src and frame.dst and frame.direction in OTHER:
                client, server = (
                    (frame.src, frame.dst) if frame.direction == "c2s" else (frame.dst, frame.src)
                )
                conn.client, conn.server = _split(client), _split(server)
        if frame.version in PROTOCOL_VERSIONS and not conn.version:
            conn.version = frame.version
        if frame.direction != "s2c":
            return
        if frame.name == "connection.start":
            props = frame.fields.get("server-properties")
        elif frame.name == "open":
            props = frame.fields.get("properties")
        else:
            return
        product = _text(_lookup(props, "product")) if isinstance(props, dict) else None
        if product:
            conn.product = product

    def retire(self, conn: Any) -> None:
        """A finished connection's tracker (before it is forgotten): its error spans."""
        if conn.conn in self.diagnosed:
            return
        self.diagnosed.add(conn.conn)
        self.pending.extend(self.error_spans(self.diagnoser.connection(conn)))
        self.links.pop(conn.conn, None)  # it sends no more frames
        self.conns.pop(conn.conn, None)
        if self.own_diagnoser:
            self.diagnoser.evidence.forget(conn.conn)

    def finish(self, connections: Iterable[Any]) -> None:
        """The input's end: the error spans of the connections not retired (call after the
        tracker's `finish`)."""
        for conn in connections:
            self.retire(conn)

    def take(self) -> list[SpanData]:
        """The spans made since the last take."""
        out, self.pending = self.pending, []
        return out

    # -- message spans -----------------------------------------------------------------------
    def _context(self, journey: Journey, hop: Hop) -> TraceContext | None:
        """The journey's trace context: read of its first message frame, fixed from then on."""
        if journey.number in self.contexts:
            return self.contexts[journey.number]
        frame = self._frame
        found = None
        if frame is not None and frame.message is not None and hop.event != "returned":
            found = trace_context(frame.message)
        self.contexts[journey.number] = found
        return found

    def _span_id(self, journey: Journey, index: int) -> int:
        return _id(self.seed, "journey", self.generation, journey.number, index)

    def _hop(self, journey: Journey, hop: Hop) -> None:
        index = len(journey.hops) - 1
        context = self._context(journey, hop)
        trace_id = (
            context.trace_id
            if context
            else _id(self.seed, "trace", self.generation, journey.number, bits=128)
        )
        app_parent = context.span_id if context else None
        frame = self._frame
        end = frame.ts if frame is not None and frame.message is not None else hop.ts
        made = self._message_span(journey, hop, index, end, app_parent)
        if made is None:
            return
        span, parent_index = made
        span.trace_id = trace_id
        if parent_index is not None:
            span.parent_id = self._span_id(journey, parent_index)
        elif app_parent is not None:
            span.parent_id, span.remote_parent = app_parent, True
        if context is not None:
            span.tracestate, span.sampled = context.state, context.sampled
            span.attributes["amqpscope.trace_context"] = context.where
        self.pending.append(span)
        self.made += 1

    def _latest(self, journey: Journey, before: int, events: tuple[str, ...]) -> int | None:
        for at in range(before - 1, -1, -1):
            if journey.hops[at].event in events:
                return at
        return None

    def _settled_transfer(self, journey: Journey, index: int, hop: Hop) -> int | None:
        """The transfer a disposition settles: the latest of the same delivery-id sent by the
        side the disposition's role names, on its connection."""
        details = hop.details
        sent_by = OTHER.get(details.get("dir", ""), "")
        if details.get("role") == "sender":
            sent_by = details.get("dir", "")
        for at in range(index - 1, -1, -1):
            earlier = journey.hops[at]
            if (
                earlier.event == "transfer"
                and earlier.conn == hop.conn
                and earlier.details.get("dir") == sent_by
                and earlier.details.get("delivery-id") == details.get("delivery-id")
            ):
                return at
        return None

    def _message_span(
        self, journey: Journey, hop: Hop, index: int, end: float, app_parent: int | None
    ) -> tuple[SpanData, int | None] | None:
        """The span of one hop, and the index of the hop whose span is its parent (None: the
        application's span, or none)."""
        event, details = hop.event, hop.details
        attributes = self._message_attributes(journey, hop)
        parent: int | None = None
        start = hop.ts
        error: str | None = None
        if event == "published":
            kind, operation, name = PRODUCER, "send", "publish"
            destination = details.get("exchange") or details.get("routing-key") or ""
        elif event in ("confirmed", "publish-nacked", "returned"):
            kind, operation = CLIENT, "settle"
            name = {"confirmed": "confirm", "publish-nacked": "nack", "returned": "return"}[event]
            parent = self._latest(journey, index, ("published",))
            start = journey.hops[parent].ts if parent is not None else hop.ts
            publish = journey.hops[parent].details if parent is not None else {}
            destination = publish.get("exchange") or publish.get("routing-key") or ""
            self._routing(attributes, publish)
            if event == "publish-nacked":
                error = "the broker nacked the publish"
                attributes["error.type"] = "nack"
            elif event == "returned":
                code = details.get("reply-code")
                error = f"returned: {code} {details.get('reply-text') or ''}".strip()
                attributes["error.type"] = str(code)
        elif event in ("delivered", "redelivered"):
            kind, operation = CONSUMER, "receive"
            message = self._frame.message if self._frame is not None else None
            getting = isinstance(message, dict) and message.get("method") == "basic.get-ok"
            name = "get" if getting else "deliver"
            parent = self._latest(journey, index, ("published",))
            destination = details.get("queue") or details.get("routing-key") or ""
            if details.get("queue"):
                attributes["messaging.destination.subscription.name"] = details["queue"]
            if event == "redelivered":
                attributes["amqpscope.redelivered"] = True
        elif event in ("acked", "nacked", "rejected", "unacked-at-close"):
            kind, operation = CLIENT, "settle"
            name = {
                "acked": "ack",
                "nacked": "nack",
                "rejected": "reject",
                "unacked-at-close": "close",
            }[event]
            parent = self._latest(journey, index, ("delivered", "redelivered"))
            delivery = journey.hops[parent].details if parent is not None else {}
            start = journey.hops[parent].ts if parent is not None else hop.ts
            destination = delivery.get("queue") or delivery.get("routing-key") or ""
            self._routing(attributes, delivery)
            if "requeue" in details:
                attributes["amqpscope.requeue"] = bool(details["requeue"])
            if event == "unacked-at-close":
                attributes["amqpscope.closed_by"] = str(details.get("closed-by"))
        elif event == "transfer":
            sending = details.get("dir") == "c2s"
            kind, operation = (PRODUCER, "send") if sending else (CONSUMER, "receive")
            name = "transfer"
            if not sending:
                parent = self._latest_transfer(journey, index, "c2s")
            destination = details.get("address") or details.get("link") or ""
            if details.get("delivery-id") is not None:
                attributes["amqpscope.delivery_id"] = int(details["delivery-id"])
        elif event == "disposition":
            kind, operation = CLIENT, "settle"
            state = details.get("state")
            name = str(state) if state else "settle"
            parent = self._settled_transfer(journey, index, hop)
            transfer = journey.hops[parent].details if parent is not None else {}
            start = journey.hops[parent].ts if parent is not None else hop.ts
            destination = transfer.get("address") or transfer.get("link") or ""
            attributes["amqpscope.delivery_id"] = int(details.get("delivery-id") or 0)
            if state == "rejected":
                condition, description = self._rejected(hop.frame)
                attributes["error.type"] = condition or "rejected"
                error = f"rejected: {condition or 'no error condition'}"
                if description:
                    error += f": {description}"
        else:
            return None
        if event in ("published", "delivered", "redelivered"):
            self._routing(attributes, details)
        attributes["messaging.operation.type"] = operation
        attributes["messaging.operation.name"] = name
        if destination or "messaging.destination.name" not in attributes:
            attributes.setdefault("messaging.destination.name", destination)
        span = SpanData(
            name=f"{name} {destination}" if destination else name,
            kind=kind,
            trace_id=0,
            span_id=self._span_id(journey, index),
            parent_id=None,
            start=start,
            end=max(end, start),
            attributes=attributes,
            events=self._events(hop, journey.hops[parent] if parent is not None else None),
            error=error,
        )
        return span, parent

    def _latest_transfer(self, journey: Journey, index: int, direction: str) -> int | None:
        for at in range(index - 1, -1, -1):
            earlier = journey.hops[at]
            if earlier.event == "transfer" and earlier.details.get("dir") == direction:
                return at
        return None

    def _rejected(self, number: int) -> tuple[str | None, str | None]:
        """A rejected outcome's error condition and description, of its disposition frame."""
        frame = self._frame
        if frame is None or frame.number != number:
            return None, None
        state = frame.fields.get("state")
        error = state.get("error") if isinstance(state, dict) else None
        if not isinstance(error, dict):
            return None, None
        condition, description = error.get("condition"), error.get("description")
        return (
            str(condition) if condition is not None else None,
            str(description) if description is not None else None,
        )

    @staticmethod
    def _routing(attributes: Attributes, details: dict[str, Any]) -> None:
        """0-9-1: the exchange is the destination (RabbitMQ's convention: '' for the default
        exchange), the routing key and the delivery tag RabbitMQ's own attributes."""
        if "exchange" in details and details["exchange"] is not None:
            attributes["messaging.destination.name"] = str(details["exchange"])
        if details.get("routing-key"):
            attributes["rabbitmq.destination.routing_key"] = str(details["routing-key"])
        tag = details.get("delivery-tag")
        if type(tag) is int and "consumer-tag" in details:  # a delivery's (not a confirm's)
            attributes["rabbitmq.message.delivery_tag"] = tag

    def _message_attributes(self, journey: Journey, hop: Hop) -> Attributes:
        conn = self.conns.get(hop.conn) or _Conn()
        attributes = conn.attributes()
        attributes["amqpscope.connection"] = hop.conn
        if hop.channel is not None:
            attributes["amqpscope.channel"] = hop.channel
        attributes["amqpscope.frame"] = hop.frame
        if journey.message_id is not None:
            attributes["messaging.message.id"] = journey.message_id
        if journey.correlation_id is not None:
            attributes["messaging.message.conversation_id"] = journey.correlation_id
        if journey.body_size is not None:
            attributes["messaging.message.body.size"] = journey.body_size
        return attributes

    def _event(self, number: int) -> SpanEvent | None:
        fact = self.facts.get(number)
        if fact is None:
            return None
        attributes: Attributes = {"amqpscope.frame": number, "amqpscope.direction": fact.direction}
        if fact.channel is not None:
            attributes["amqpscope.channel"] = fact.channel
        if fact.error is not None:
            attributes["error.type"] = fact.error
        return SpanEvent(fact.name, fact.ts, attributes)

    def _events(self, hop: Hop, settled: Hop | None) -> list[SpanEvent]:
        """The frames a span shows: what it settles (for a settle span), its own first frame,
        and the frame that completed its message."""
        numbers = [settled.frame] if settled is not None and hop.event not in _SELF else []
        numbers.append(hop.frame)
        frame = self._frame
        if frame is not None and frame.message is not None and frame.number != hop.frame:
            numbers.append(frame.number)
        return [e for e in map(self._event, numbers) if e is not None]

    # -- error spans -------------------------------------------------------------------------
    def error_spans(self, diagnoses: Iterable[Diagnosis]) -> list[SpanData]:
        """A span per close diagnosis: its evidence frames as events, `error.type` the reply
        code or condition the closing frame carried."""
        out = []
        for diagnosis in diagnoses:
            operation = ERROR_SPANS.get(diagnosis.code)
            if operation is None:
                continue
            numbers = dict.fromkeys(diagnosis.evidence)  # in order, each once
            events = [e for e in map(self._event, numbers) if e is not None]
            link_name, address = next(
                (fact.link for fact in map(self.facts.get, numbers) if fact and fact.link),
                (diagnosis.link, diagnosis.queue),
            )
            conn = self.conns.get(diagnosis.conn or 0) or _Conn()
            attributes = conn.attributes()
            attributes["amqpscope.diagnosis"] = diagnosis.code
            if diagnosis.conn is not None:
                attributes["amqpscope.connection"] = diagnosis.conn
            if diagnosis.channel is not None:
                attributes["amqpscope.channel"] = diagnosis.channel
            if link_name:
                attributes["amqpscope.link"] = link_name
            if address or diagnosis.queue:
                attributes["messaging.destination.name"] = str(address or diagnosis.queue)
            errors = [
                str(e.attributes["error.type"]) for e in events if "error.type" in e.attributes
            ]
            attributes["error.type"] = errors[0] if errors else diagnosis.code
            times = [e.ts for e in events]
            start = diagnosis.start if diagnosis.start is not None else min(times, default=0.0)
            end = max([start + diagnosis.duration, *times])
            target = address or link_name
            name = f"{operation} {target}" if operation == "detach" and target else operation
            first = diagnosis.evidence[0] if diagnosis.evidence else 0
            out.append(
                SpanData(
                    name=name,
                    kind=INTERNAL,
                    trace_id=_id(
                        self.seed, "error", diagnosis.code, diagnosis.conn, first, bits=128
                    ),
                    span_id=_id(self.seed, "error-span", diagnosis.code, diagnosis.conn, first),
                    parent_id=None,
                    start=start,
                    end=end,
                    attributes=attributes,
                    events=events,
                    error=diagnosis.title,
                )
            )
        self.made += len(out)
        return out


#: hops whose span starts at their own frame (no earlier hop's frame among its events)
_SELF: Final = frozenset(("published", "delivered", "redelivered", "transfer"))
