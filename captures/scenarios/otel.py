"""Recordings for the OpenTelemetry face (`export --otlp`, issue 43): messages that carry their
application's W3C trace context, their confirms and settlements, and the errors a trace must show.

- 091-otel: pika publishes 4 messages with publisher confirms, each with a `traceparent` (and a
  `tracestate`) header the client made up; a second connection consumes with prefetch 4, acks
  m0 and m2, nacks m1 without requeue and m3 with requeue, acks m3's redelivery, then acks a
  delivery tag it never got (999): RabbitMQ closes the channel with 406 PRECONDITION_FAILED.
- 10-otel: Proton sends 3 messages with a `traceparent`: in application-properties, in
  message-annotations, and as Azure's `Diagnostic-Id` application property; the broker accepts
  each; a receiver accepts t0 and t2 and rejects t1 (with an error condition),
  then the client detaches its sender with an error condition (amqp:internal-error).

Ground truth is the client's: the trace contexts it set, the confirms, deliveries and outcomes
pika and Proton reported, the errors they raised or were told; never read from the capture.
Needs: pika and python-qpid-proton (the dev extra), RabbitMQ with the amqp1_0 plugin.
"""

from __future__ import annotations

import secrets
from typing import Any

import pika
import pika.exceptions
from proton import Condition, Message, symbol

try:  # the harness: captures/recorder/ since issue 41 split captures/record.py
    import recorder as record
except ImportError:
    import record

#: the messages of 091-otel, in publish order, and what the consumer does with each delivery
PLAN_091 = {"m0": "ack", "m1": "nack", "m2": "ack", "m3": "requeue"}
#: the tag the consumer acks without having been given it (RabbitMQ: 406 on the channel)
UNKNOWN_TAG = 999
#: the messages of 10-otel and the receiver's outcome for each
PLAN_10 = {"t0": "accepted", "t1": "rejected", "t2": "accepted"}
#: where each 10-otel message carries its trace context: a W3C traceparent in its
#: application-properties or its message-annotations (the W3C AMQP draft's two places), or
#: Azure's Diagnostic-Id application property (which Azure SDKs write in the W3C form)
PLACES_10 = {"t0": "application-properties", "t1": "message-annotations", "t2": "Diagnostic-Id"}
DETACH_CONDITION = ("amqp:internal-error", "amqpscope closes its sender with an error")


def _traceparent() -> tuple[str, str, str]:
    """A W3C traceparent the application would send: a new trace id, a new parent span id."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


@record.scenario(
    "091-otel",
    "0-9-1",
    "pika publishes m0..m3 with publisher confirms, each with a W3C traceparent and tracestate "
    "header; a consumer (prefetch 4, second connection) acks m0 and m2, nacks m1 without requeue "
    "and m3 with requeue, acks m3's redelivery, then acks delivery tag 999 it never got: RabbitMQ "
    "closes its channel with 406 PRECONDITION_FAILED.",
)
def s_091_otel(ctx: record.Ctx) -> dict[str, Any]:
    n = record.Counts()
    q = ctx.q()
    publisher = record.connect_091(ctx, n, name=f"amqpscope {ctx.name} publisher")
    pch = publisher.channel()
    n.inc("channels")
    pch.queue_declare(q)
    n.inc("queue_declares")
    pch.confirm_delivery()
    traces: dict[str, dict[str, str]] = {}
    for message_id in PLAN_091:
        header, trace_id, span_id = _traceparent()
        headers = {"traceparent": header, "tracestate": "amqpscope=otel"}
        props = pika.BasicProperties(
            content_type="text/plain", message_id=message_id, headers=headers
        )
        pch.basic_publish("", q, f"otel {message_id}".encode(), props)  # returns when confirmed
        n.inc("publishes")
        n.inc("confirms_acked")
        traces[message_id] = {"traceparent": header, "trace_id": trace_id, "span_id": span_id}
    n["traces"] = traces

    consumer = record.connect_091(ctx, n, name=f"amqpscope {ctx.name} consumer")
    cch = consumer.channel()
    n.inc("channels")
    cch.basic_qos(prefetch_count=4)
    settled: list[dict[str, Any]] = []

    def on_message(chan: Any, method: Any, props: Any, _body: bytes) -> None:
        message_id = props.message_id
        n.inc("deliveries")
        what = PLAN_091[message_id]
        if method.redelivered:
            n.inc("redeliveries")
            what = "ack"
        tag = method.delivery_tag
        if what == "ack":
            chan.basic_ack(tag)
            n.inc("acks")
        else:
            chan.basic_nack(tag, requeue=what == "requeue")
            n.inc("nacks")
            if what == "requeue":
                n.inc("nacks_requeue")
        settled.append(
            {
                "message_id": message_id,
                "delivery_tag": tag,
                "redelivered": bool(method.redelivered),
                "settled": what,
                "traceparent": (props.headers or {}).get("traceparent"),
            }
        )

    cch.basic_consume(q, on_message)
    n.inc("consumers")
    record.pump(consumer, lambda: len(settled) >= len(PLAN_091) + 1)
    n["settlements"] = settled
    cch.basic_ack(UNKNOWN_TAG)
    n.inc("acks")  # a basic.ack all the same: `acks` counts what the client sent
    reason: Any = None
    try:
        record.pump(consumer, lambda: not cch.is_open, timeout=5.0)
    except pika.exceptions.ChannelClosedByBroker as err:
        reason = err
    except TimeoutError:
        raise RuntimeError("RabbitMQ took an ack of a delivery tag it never gave") from None
    reason = reason or getattr(cch, "_closing_reason", None)
    if isinstance(reason, pika.exceptions.ChannelClosedByBroker):
        error = {"channel": cch.channel_number, "code": reason.reply_code}
        n.add("channel_errors", {**error, "text": reason.reply_text, "trigger": "basic.ack 999"})
    else:
        raise RuntimeError(f"the consumer's channel ended otherwise: {reason!r}")
    pch.queue_delete(q)
    n.inc("queue_deletes")
    record.close_091(consumer, n)
    record.close_091(publisher, n)
    return n


class _TracedSender(record.ProtonClient):
    """Send PLAN_10's messages with a traceparent each, receive and settle them per the plan,
    then detach the sender with an error condition."""

    def __init__(self, ctx: record.Ctx) -> None:
        super().__init__(ctx)
        self.sent = 0
        self.received = 0
        self.traces: dict[str, dict[str, str]] = {}
        self.sender: Any = None

    def begin(self) -> None:
        self.conn = self.connect()
        address = record.queue_address(self.ctx)
        self.n["address"] = address
        self.sender = self.container.create_sender(self.conn, address, name="otel-sender")

    def on_sendable(self, event: Any) -> None:
        ids = list(PLAN_10)
        while event.sender.credit and self.sent < len(ids):
            message_id = ids[self.sent]
            header, trace_id, span_id = _traceparent()
            place = PLACES_10[message_id]
            self.traces[message_id] = {
                "traceparent": header,
                "trace_id": trace_id,
                "span_id": span_id,
                "where": place,
            }
            context = {"traceparent": header, "tracestate": "amqpscope=otel"}
            message = Message(id=message_id, content_type="text/plain", body=f"otel {message_id}")
            if place == "application-properties":
                message.properties = context
            elif place == "message-annotations":
                message.annotations = {symbol(key): value for key, value in context.items()}
            else:
                message.properties = {"Diagnostic-Id": header}
            event.sender.send(message)
            self.sent += 1
            self.n.inc("transfers_sent")

    def on_accepted(self, event: Any) -> None:
        super().on_accepted(event)
        if self.n["sender_outcomes"]["accepted"] == len(PLAN_10):
            self.container.create_receiver(
                self.conn, record.queue_address(self.ctx), name="otel-receiver"
            )

    def on_message(self, event: Any) -> None:
        message_id = str(event.message.id)
        self.received += 1
        self.n.inc("transfers_received")
        outcome = PLAN_10[message_id]
        if outcome == "rejected":
            event.delivery.local.condition = Condition(
                "amqp:precondition-failed", f"amqpscope rejects {message_id}"
            )
        self.settle_with(event.delivery, outcome)
        if self.received == len(PLAN_10):
            self.sender.condition = Condition(*DETACH_CONDITION)
            self.sender.close()
            self.n["sender_detach_condition"] = {
                "condition": DETACH_CONDITION[0],
                "description": DETACH_CONDITION[1],
            }

    def on_link_remote_detach(self, event: Any) -> None:
        """RabbitMQ 3.x answers a closing detach with a detach without closed=true: Proton
        reports it as a remote detach, not a close."""
        if event.link.name == "otel-sender":
            self.n["sender_detach_answer_closed"] = False
            self.on_link_closed(event)

    def on_link_closed(self, event: Any) -> None:
        if event.link.name == "otel-sender" and "traces" not in self.n:
            self.n.inc("sender_detach_answered")
            self.n["traces"] = self.traces
            self.shutdown()

    def on_link_error(self, event: Any) -> None:
        """The broker's answer to the detach carried an error of its own."""
        if event.link.name == "otel-sender":
            self.n.add("link_errors", record.cond_dict(event.link.remote_condition))
            self.on_link_closed(event)
            return
        super().on_link_error(event)


@record.scenario(
    "10-otel",
    "1.0",
    "Proton sends t0..t2 to a queue, each with a W3C traceparent: t0 in its application-properties "
    "and t1 in its message-annotations (each with a tracestate), t2 as Azure's Diagnostic-Id "
    "application property (the broker accepts each); a receiver accepts t0 and t2 and rejects "
    "t1 with amqp:precondition-failed; then the client detaches its sender with the error "
    "amqp:internal-error and the broker answers the detach.",
    setup=(("q", {}),),
    queues=(),
)
def s_10_otel(ctx: record.Ctx) -> dict[str, Any]:
    return _TracedSender(ctx).run()
