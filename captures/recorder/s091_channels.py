"""AMQP 0-9-1 scenarios: channel errors, a refused login, large bodies, many channels, heartbeats,
RPC."""

from __future__ import annotations

import hashlib
import random
import re
import time
from collections.abc import Callable
from typing import Any

import pika
import pika.exceptions

from recorder.amqp091 import (
    acking,
    close_091,
    connect_091,
    consume_and_ack,
    delete_and_close,
    pika_params,
    publish_plain,
    pump,
)
from recorder.harness import Counts, Ctx, scenario


@scenario(
    "091-channel-errors",
    "0-9-1",
    "One connection, channel 2 kept open throughout; channel 1 is opened four times: an "
    "inequivalent queue redeclare (406), declaring 'amq.foo' (403), acking unknown delivery tag "
    "999 (406, noticed on the next queue.declare), then normal cleanup. Channel number 1 is reused "
    "after each close.",
)
def s_channel_errors(ctx: Ctx) -> dict[str, Any]:
    """Channel-level errors must be attributed to the right channel incarnation."""
    n = Counts()
    conn = connect_091(ctx, n)
    q = ctx.q()
    ch2 = conn.channel(channel_number=2)
    n.inc("channels")

    def declare(ch: Any, name: str, **kw: Any) -> None:
        # Count every queue.declare put on the wire, and separately those answered.
        n.inc("queue_declares")
        ch.queue_declare(name, **kw)
        n.inc("queue_declare_oks")

    declare(ch2, q)

    def attempt(trigger: str, action: Callable[[Any], None]) -> None:
        ch = conn.channel(channel_number=1)
        n.inc("channels")
        n.add("channel_numbers_opened", ch.channel_number)
        try:
            action(ch)
        except pika.exceptions.ChannelClosedByBroker as err:
            n.add(
                "channel_errors",
                {"channel": 1, "code": err.reply_code, "text": err.reply_text, "trigger": trigger},
            )
        else:
            raise RuntimeError(f"broker did not close the channel for: {trigger}")

    attempt(
        "queue.declare of an existing queue with x-max-length=10",
        lambda ch: declare(ch, q, arguments={"x-max-length": 10}),
    )
    attempt("queue.declare amq.foo", lambda ch: declare(ch, "amq.foo"))

    def bad_ack(ch: Any) -> None:
        ch.basic_ack(999)
        n.inc("acks")
        # A synchronous call surfaces the channel.close; the broker discards this
        # declare because the channel is already closing.
        declare(ch, q, passive=True)

    attempt("basic.ack delivery_tag=999 (never delivered); next passive declare ignored", bad_ack)
    ch1 = conn.channel(channel_number=1)
    n.inc("channels")
    n.add("channel_numbers_opened", ch1.channel_number)
    declare(ch1, q, passive=True)
    ch1.close()
    n.inc("channel_closes")
    ch2.queue_delete(q)
    n.inc("queue_deletes")
    ch2.close()
    n.inc("channel_closes")
    close_091(conn, n)
    return n


@scenario(
    "091-refused-login",
    "0-9-1",
    "pika connects with user guest and a wrong password; RabbitMQ answers start-ok with "
    "connection.close 403 ACCESS_REFUSED and the connection never opens.",
    queues=(),
)
def s_refused_login(ctx: Ctx) -> dict[str, Any]:
    """Authentication failure happens before tune/open, on channel 0."""
    n = Counts()
    try:
        conn = pika.BlockingConnection(
            pika_params(password="wrong-password", name=f"amqpscope {ctx.name}")
        )
    except pika.exceptions.AMQPConnectionError as err:
        n.inc("connections")
        n["connection_opened"] = False
        n["exception"] = type(err).__name__
        detail = str(err.args[0]) if err.args else str(err)
        n["exception_text"] = detail
        if m := re.search(r"\((\d+)\) '(.*)'", detail):
            n.add("connection_errors", {"channel": 0, "code": int(m.group(1)), "text": m.group(2)})
        return n
    conn.close()
    raise RuntimeError("broker accepted a wrong password")


@scenario(
    "091-large-body",
    "0-9-1",
    "Connection tuned to frame_max=4096; one 102400-byte message is published and consumed "
    "(acked), so the body is split into many content-body frames in both directions.",
)
def s_large_body(ctx: Ctx) -> dict[str, Any]:
    """Content bodies spanning many frames and TCP segments must reassemble byte-exact."""
    n = Counts()
    conn = connect_091(ctx, n, frame_max=4096)
    n["negotiated_frame_max"] = conn._impl.params.frame_max  # value pika agreed in tune-ok
    ch = conn.channel()
    n.inc("channels")
    q = ctx.q()
    ch.queue_declare(q)
    n.inc("queue_declares")
    body = random.Random(91).randbytes(100 * 1024)
    ch.basic_publish(
        "",
        q,
        body,
        pika.BasicProperties(content_type="application/octet-stream", message_id="large-1"),
    )
    n.inc("publishes")
    n["body_size"] = len(body)
    n["body_sha256"] = hashlib.sha256(body).hexdigest()

    def received(data: bytes) -> None:
        n["received_body_sha256"] = hashlib.sha256(data).hexdigest()

    consume_and_ack(conn, ch, n, q, 1, received)
    delete_and_close(conn, ch, n, q)
    return n


@scenario(
    "091-channels",
    "0-9-1",
    "Eight channels (1-8) on one connection; each declares its own queue and publishes 3 messages, "
    "then each consumes its 3 messages with acks; queues deleted and every channel closed.",
    queues=tuple(f"q{i}" for i in range(1, 9)),
)
def s_channels(ctx: Ctx) -> dict[str, Any]:
    """Frames of many channels interleave on one socket and must be demultiplexed."""
    n = Counts()
    conn = connect_091(ctx, n)
    channels = []
    for i in range(1, 9):
        ch = conn.channel(channel_number=i)
        n.inc("channels")
        ch.queue_declare(ctx.q(f"q{i}"))
        n.inc("queue_declares")
        channels.append(ch)
    for i, ch in enumerate(channels, 1):
        for j in range(3):
            publish_plain(ch, n, ctx.q(f"q{i}"), f"channel {i} message {j}".encode())
    got: list[bytes] = []
    on_message = acking(n, got.append)
    tags = []
    for i, ch in enumerate(channels, 1):
        tags.append(ch.basic_consume(ctx.q(f"q{i}"), on_message))
        n.inc("consumers")
    pump(conn, lambda: len(got) >= 24)
    for i, (ch, tag) in enumerate(zip(channels, tags, strict=True), 1):
        ch.basic_cancel(tag)
        n.inc("cancels")
        ch.queue_delete(ctx.q(f"q{i}"))
        n.inc("queue_deletes")
        ch.close()
        n.inc("channel_closes")
    close_091(conn, n)
    return n


@scenario(
    "091-heartbeats",
    "0-9-1",
    "Connection negotiated with heartbeat=1 s, then left idle for 3.5 s while pika services the "
    "socket, so heartbeat frames flow in both directions; then a queue declare/delete and a clean "
    "close.",
)
def s_heartbeats(ctx: Ctx) -> dict[str, Any]:
    """Heartbeat frames (type 8, channel 0) must be recognised and not confuse frame parsing."""
    n = Counts()
    conn = connect_091(ctx, n, heartbeat=1)
    n["negotiated_heartbeat"] = conn._impl.params.heartbeat
    ch = conn.channel()
    n.inc("channels")
    conn.sleep(3.5)
    q = ctx.q()
    ch.queue_declare(q)
    n.inc("queue_declares")
    ch.queue_delete(q)
    n.inc("queue_deletes")
    checker = conn._impl._heartbeat_checker  # pika's own counters, read before close() drops them
    n["heartbeats_sent_by_client"] = checker._heartbeat_frames_sent
    n["heartbeats_received_by_client"] = checker._heartbeat_frames_received
    close_091(conn, n)
    return n


@scenario(
    "091-rpc",
    "0-9-1",
    "Two connections: an RPC server consuming a request queue (prefetch 1, manual ack) and a "
    "client with an exclusive server-named reply queue (no-ack consumer); 3 requests carry "
    "reply_to and correlation_id and each gets a matching reply.",
    queues=("requests",),
)
def s_rpc(ctx: Ctx) -> dict[str, Any]:
    """Request/reply correlation across connections via reply_to + correlation_id."""
    n = Counts()
    server = connect_091(ctx, n, name=f"amqpscope {ctx.name} server")
    client = connect_091(ctx, n, name=f"amqpscope {ctx.name} client")
    sch = server.channel()
    cch = client.channel()
    n.inc("channels", 2)
    requests = ctx.q("requests")
    sch.queue_declare(requests)
    n.inc("queue_declares")
    sch.basic_qos(prefetch_count=1)

    def on_request(chan: Any, method: Any, props: Any, body: bytes) -> None:
        n.inc("requests_served")
        value = int(body.decode())
        chan.basic_publish(
            "",
            props.reply_to,
            str(value * value).encode(),
            pika.BasicProperties(correlation_id=props.correlation_id),
        )
        n.inc("publishes")
        chan.basic_ack(method.delivery_tag)
        n.inc("acks")

    stag = sch.basic_consume(requests, on_request)
    n.inc("consumers")
    reply_queue = cch.queue_declare("", exclusive=True).method.queue
    n.inc("queue_declares")
    n["reply_queue_server_named"] = reply_queue.startswith("amq.gen-")
    replies: dict[str, str] = {}

    def on_reply(_chan: Any, _method: Any, props: Any, body: bytes) -> None:
        n.inc("replies_received")
        replies[props.correlation_id] = body.decode()

    ctag = cch.basic_consume(reply_queue, on_reply, auto_ack=True)
    n.inc("consumers")
    for i in (3, 4, 5):
        corr = f"req-{i}"
        cch.basic_publish(
            "",
            requests,
            str(i).encode(),
            pika.BasicProperties(reply_to=reply_queue, correlation_id=corr),
        )
        n.inc("publishes")
        n.inc("requests_sent")
        deadline = time.monotonic() + 10
        while corr not in replies:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no reply for {corr}")
            server.process_data_events(time_limit=0.02)
            client.process_data_events(time_limit=0.02)
        if replies[corr] == str(i * i):
            n.inc("correlations_matched")
    cch.basic_cancel(ctag)
    sch.basic_cancel(stag)
    n.inc("cancels", 2)
    sch.queue_delete(requests)
    n.inc("queue_deletes")
    close_091(client, n)
    close_091(server, n)
    return n
