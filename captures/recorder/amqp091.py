"""AMQP 0-9-1 helpers over pika: connect, a channel with a queue, publish, consume and close,
each counted as the client saw it; the broker housekeeping around a scenario."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pika
import pika.exceptions

from recorder.harness import BROKER_HOST, BROKER_PORT, GUEST, Counts, Ctx, Scenario


def pika_params(
    host: str = BROKER_HOST,
    user: str = GUEST[0],
    password: str = GUEST[1],
    name: str = "amqpscope",
    port: int = BROKER_PORT,
    **kw: Any,
) -> pika.ConnectionParameters:
    """Connection parameters with short timeouts so failures surface quickly."""
    return pika.ConnectionParameters(
        host=host,
        port=port,
        credentials=pika.PlainCredentials(user, password),
        connection_attempts=1,
        socket_timeout=5,
        stack_timeout=15,
        blocked_connection_timeout=15,
        client_properties={"connection_name": name},
        **kw,
    )


def broker_housekeeping(ctx: Ctx, sc: Scenario, declare: bool) -> None:
    """Delete this scenario's queues/exchanges (and pre-declare setup queues) outside the capture.

    Why: a failed earlier run may have left messages behind, which would
    change what this run's consumers see.
    """
    names = [ctx.q(s) for s in sc.queues] + [ctx.q(s) for s, _ in sc.setup]
    if not names and not sc.exchanges:
        return
    conn = pika.BlockingConnection(pika_params(name=f"amqpscope housekeeping {ctx.name}"))
    try:
        ch = conn.channel()
        for qname in dict.fromkeys(names):
            ch.queue_delete(qname)
        for ex in sc.exchanges:
            ch.exchange_delete(ctx.q(ex))
        if declare:
            for suffix, args in sc.setup:
                quorum = args.get("x-queue-type") == "quorum"
                ch.queue_declare(ctx.q(suffix), durable=quorum, arguments=args or None)
    finally:
        conn.close()


def connect_091(ctx: Ctx, n: Counts, **kw: Any) -> pika.BlockingConnection:
    """Open a counted pika connection named after the scenario (visible in start-ok)."""
    kw.setdefault("name", f"amqpscope {ctx.name}")
    conn = pika.BlockingConnection(pika_params(**kw))
    n.inc("connections")
    return conn


def channel_with_queue(
    ctx: Ctx, n: Counts, suffix: str = "q", **kw: Any
) -> tuple[pika.BlockingConnection, Any, str]:
    """The start most 0-9-1 scenarios share: a connection (`kw`: its parameters, e.g. a port),
    a channel, the scenario's queue (`ctx.q(suffix)`), each counted."""
    conn = connect_091(ctx, n, **kw)
    ch = conn.channel()
    n.inc("channels")
    q = ctx.q(suffix)
    ch.queue_declare(q)
    n.inc("queue_declares")
    return conn, ch, q


def pump(conn: pika.BlockingConnection, done: Callable[[], bool], timeout: float = 15.0) -> None:
    """Run pika's I/O loop until `done()`; raise instead of hanging."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError("timed out waiting for the broker")
        conn.process_data_events(time_limit=0.05)


def publish_plain(
    ch: Any, n: Counts, routing_key: str, body: bytes, exchange: str = "", **props: Any
) -> None:
    """basic.publish with text properties, counted."""
    ch.basic_publish(
        exchange, routing_key, body, pika.BasicProperties(content_type="text/plain", **props)
    )
    n.inc("publishes")


def acking(n: Counts, then: Callable[[bytes], None] = lambda _body: None) -> Callable[..., None]:
    """An on_message that acks each delivery, counted, then hands the body to `then`."""

    def on_message(chan: Any, method: Any, _props: Any, body: bytes) -> None:
        n.inc("deliveries")
        chan.basic_ack(method.delivery_tag)
        n.inc("acks")
        then(body)

    return on_message


def consume(
    conn: pika.BlockingConnection,
    ch: Any,
    n: Counts,
    queue: str,
    on_message: Callable[..., None],
    done: Callable[[], bool],
) -> None:
    """basic.consume with `on_message` until `done()`, then basic.cancel, counted: the consume,
    wait and cancel every consuming scenario repeats."""
    tag = ch.basic_consume(queue, on_message)
    n.inc("consumers")
    pump(conn, done)
    ch.basic_cancel(tag)
    n.inc("cancels")


def consume_and_ack(
    conn: pika.BlockingConnection,
    ch: Any,
    n: Counts,
    queue: str,
    count: int,
    then: Callable[[bytes], None] = lambda _body: None,
) -> None:
    """basic.consume with manual acks until `count` messages arrived (each body handed to
    `then`), then basic.cancel."""
    got: list[bytes] = []

    def seen(body: bytes) -> None:
        got.append(body)
        then(body)

    consume(conn, ch, n, queue, acking(n, seen), lambda: len(got) >= count)


def close_091(conn: pika.BlockingConnection, n: Counts) -> None:
    """Client-initiated connection.close, counted."""
    conn.close()
    n.inc("connection_closes")


def delete_and_close(
    conn: pika.BlockingConnection, ch: Any, n: Counts, q: str, count_left: bool = False
) -> None:
    """The end most 0-9-1 scenarios share: queue.delete, then the client's connection.close,
    counted; with `count_left`, the message count delete-ok reported (what was left behind)."""
    res = ch.queue_delete(q)
    n.inc("queue_deletes")
    if count_left:
        n["queue_message_count_at_delete"] = res.method.message_count
    close_091(conn, n)


def basic_round_trip(ctx: Ctx, host: str = BROKER_HOST, messages: int = 3, **kw: Any) -> Counts:
    """Small publish/consume/ack exchange reused by the capture-format scenarios (`kw`: more
    connection parameters, e.g. TLS)."""
    n = Counts()
    conn, ch, q = channel_with_queue(ctx, n, host=host, **kw)
    for i in range(messages):
        publish_plain(ch, n, q, f"{ctx.name} message {i}".encode(), message_id=f"m{i}")
    consume_and_ack(conn, ch, n, q, messages)
    delete_and_close(conn, ch, n, q)
    return n


def missing_then_delete(
    ctx: Ctx, conn: pika.BlockingConnection, ch: Any, n: Counts, q: str, name: str
) -> None:
    """The end of a hostile-names scenario: a passive declare of a missing queue named with
    `name` (channel 1 is closed with 404, whose reply text repeats it), `q` deleted on a
    second channel, the connection closed."""
    missing = ctx.q("missing" + name)
    n["missing_queue"] = missing
    try:
        ch.queue_declare(missing, passive=True)
        n.inc("queue_declares")
    except pika.exceptions.ChannelClosedByBroker as err:
        n.inc("queue_declares")
        n.add("channel_errors", {"channel": 1, "code": err.reply_code, "text": err.reply_text})
    else:
        raise RuntimeError("a passive declare of a missing queue succeeded")
    ch2 = conn.channel()
    n.inc("channels")
    delete_and_close(conn, ch2, n, q)
