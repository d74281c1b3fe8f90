"""Recordings of diagnoses no other capture shows (issue 40 item 14): a consumer the broker
cancels, a connection the broker closes (320 CONNECTION_FORCED), a channel whose client stops
the broker's content (channel.flow, against garagemq, which honours it; RabbitMQ 3.x refuses
active=false with 540).

Ground truth is the client's: pika's callbacks and exceptions (the cancelled consumer's tag, the
reply code and text pika was given, what channel.flow-ok answered), never read from the capture.
"""

from __future__ import annotations

import time
from typing import Any

import pika
import pika.exceptions
import record  # captures/record.py, which loads this module


def _connection_pid(name: str, timeout: float = 10.0) -> str:
    """The broker's pid of the connection whose client named itself `name`
    (rabbitmqctl list_connections, as an operator finds it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        listed = record.run_cmd(
            ["rabbitmqctl", "-q", "list_connections", "pid", "client_properties"]
        ).stdout
        for line in listed.splitlines():
            if f'"{name}"' in line or f'<<"{name}">>' in line:
                return line.split()[0]
        time.sleep(0.2)
    raise RuntimeError(f"rabbitmqctl does not list the connection {name!r}")


@record.scenario(
    "091-broker-cancel-and-close",
    "0-9-1",
    "A consumer (manual acks) on a queue that a second connection deletes: RabbitMQ cancels"
    " the consumer (basic.cancel, consumer_cancel_notify); then an operator closes the"
    " consumer's connection (rabbitmqctl close_connection): connection.close 320"
    " CONNECTION_FORCED with the operator's reason, which pika raises as"
    " ConnectionClosedByBroker. The second connection closes normally.",
)
def s_broker_cancel_and_close(ctx: record.Ctx) -> dict[str, Any]:
    """consumer.cancelled and close.connection (320), as pika's callbacks saw them."""
    n = record.Counts()
    name = f"amqpscope {ctx.name}"
    conn, ch, q = record.channel_with_queue(ctx, n)
    cancelled: list[str] = []
    got: list[int] = []

    def on_message(chan: Any, method: Any, _props: Any, _body: bytes) -> None:
        got.append(method.delivery_tag)
        n.inc("deliveries")
        chan.basic_ack(method.delivery_tag)
        n.inc("acks")

    tag = ch.basic_consume(q, on_message)
    n.inc("consumers")
    ch.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.consumer_tag))
    record.publish_plain(ch, n, q, b"before the delete")
    record.pump(conn, lambda: len(got) == 1)
    other = record.connect_091(ctx, n, name=f"{name} (deleter)")
    other_ch = other.channel()
    n.inc("channels")
    other_ch.queue_delete(q)
    n.inc("queue_deletes")
    record.pump(conn, lambda: bool(cancelled))
    n["cancelled_by_broker"] = {"consumer_tag": cancelled[0], "ours": cancelled[0] == tag}
    reason = "amqpscope: an operator closed this connection"
    pid = _connection_pid(name)
    record.run_cmd(["rabbitmqctl", "close_connection", pid, reason])
    try:
        record.pump(conn, lambda: False, timeout=10)
    except pika.exceptions.ConnectionClosedByBroker as closed:
        n["closed_by_broker"] = {"reply_code": closed.reply_code, "reply_text": closed.reply_text}
    record.close_091(other, n)
    return n


@record.scenario(
    "091-flow-refused",
    "0-9-1",
    "A consumer (prefetch 1, manual acks) gets one of 3 messages, then asks RabbitMQ to stop its"
    " content with channel.flow active=false (pika's channel.flow): RabbitMQ 3.x does not"
    " implement a client's active=false and closes the connection with 540 NOT_IMPLEMENTED,"
    " which pika raises as ConnectionClosedByBroker. (garagemq, which honours it, hung on"
    " queue.declare when this was recorded.)",
)
def s_flow_refused(ctx: record.Ctx) -> dict[str, Any]:
    """consumer.flow-stopped (the client's channel.flow active=false) and close.connection (540)."""
    n = record.Counts()
    conn, ch, q = record.channel_with_queue(ctx, n)
    ch.basic_qos(prefetch_count=1)
    n["prefetch_count"] = 1
    for i in range(3):
        record.publish_plain(ch, n, q, f"flow {i}".encode(), message_id=f"f{i}")
    got: list[int] = []

    def on_message(_chan: Any, method: Any, _props: Any, _body: bytes) -> None:
        got.append(method.delivery_tag)
        n.inc("deliveries")

    ch.basic_consume(q, on_message)
    n.inc("consumers")
    record.pump(conn, lambda: len(got) == 1)
    try:
        ch.flow(False)
        n["flow_ok"] = True
    except pika.exceptions.ConnectionClosedByBroker as closed:
        n["closed_by_broker"] = {"reply_code": closed.reply_code, "reply_text": closed.reply_text}
    n["unacked_when_closed"] = len(got)
    # the queue outlived its connection: deleted by the recorder's housekeeping, uncaptured
    return n
