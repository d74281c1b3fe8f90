"""AMQP 0-9-1 scenarios: publish and consume, acks, prefetch, confirms and returns, transactions,
basic.get, exchanges."""

from __future__ import annotations

import time
from collections import deque
from typing import Any

import pika
import pika.exceptions

from recorder.amqp091 import (
    basic_round_trip,
    channel_with_queue,
    close_091,
    connect_091,
    consume,
    delete_and_close,
    pika_params,
    publish_plain,
)
from recorder.harness import Counts, Ctx, log, scenario


@scenario(
    "091-publish-consume",
    "0-9-1",
    "One connection and channel: declare a queue, publish 10 messages to the default exchange, "
    "consume them with basic.consume and ack each one, cancel, delete the queue, close.",
)
def s_publish_consume(ctx: Ctx) -> dict[str, Any]:
    """The baseline conversation every decoder must get right."""
    return basic_round_trip(ctx, messages=10)


@scenario(
    "091-ack-nack-reject",
    "0-9-1",
    "Six messages m0..m5 consumed with manual acks: m0-m2 acked with one basic.ack multiple=True, "
    "m3 nacked with requeue=True then acked when redelivered, m4 rejected with requeue=False, m5 "
    "acked.",
)
def s_ack_nack_reject(ctx: Ctx) -> dict[str, Any]:
    """Exercises multiple-ack ranges, requeue/redelivery and reject bookkeeping."""
    n = Counts()
    conn, ch, q = channel_with_queue(ctx, n)
    for i in range(6):
        publish_plain(ch, n, q, f"m{i}".encode(), message_id=f"m{i}")
    done: list[str] = []

    def on_message(chan: Any, method: Any, _props: Any, body: bytes) -> None:
        tag, text = method.delivery_tag, body.decode()
        n.inc("deliveries")
        n.add(
            "delivery_log",
            {"delivery_tag": tag, "body": text, "redelivered": bool(method.redelivered)},
        )
        if method.redelivered:
            n.inc("redeliveries")
        if text == "m2":
            chan.basic_ack(tag, multiple=True)
            n.inc("acks")
            n.inc("acks_multiple")
            n.inc("acked_messages", 3)
            done.extend(["m0", "m1", "m2"])
        elif text == "m3" and not method.redelivered:
            chan.basic_nack(tag, multiple=False, requeue=True)
            n.inc("nacks")
            n.inc("nacks_requeue")
        elif text == "m4":
            chan.basic_reject(tag, requeue=False)
            n.inc("rejects")
            done.append(text)
        elif text in ("m3", "m5"):
            chan.basic_ack(tag)
            n.inc("acks")
            n.inc("acked_messages")
            done.append(text)

    consume(conn, ch, n, q, on_message, lambda: len(done) >= 6)
    delete_and_close(conn, ch, n, q, count_left=True)
    return n


@scenario(
    "091-qos-prefetch",
    "0-9-1",
    "basic.qos prefetch_count=5, 20 messages published, a slow consumer that only acks (one at a "
    "time, about 50 ms apart) once 5 deliveries are outstanding, so the broker's window stays "
    "saturated.",
)
def s_qos_prefetch(ctx: Ctx) -> dict[str, Any]:
    """Shows flow limited by prefetch: deliveries trail acks one for one."""
    n = Counts()
    conn, ch, q = channel_with_queue(ctx, n)
    ch.basic_qos(prefetch_count=5)
    n["prefetch_count"] = 5
    for i in range(20):
        publish_plain(ch, n, q, f"work item {i}".encode(), message_id=f"w{i}")
    unacked: deque[int] = deque()
    delivered = [0]
    n["max_unacked"] = 0

    def on_message(_chan: Any, method: Any, _props: Any, _body: bytes) -> None:
        delivered[0] += 1
        n.inc("deliveries")
        unacked.append(method.delivery_tag)
        n["max_unacked"] = max(n["max_unacked"], len(unacked))

    tag = ch.basic_consume(q, on_message)
    n.inc("consumers")
    deadline = time.monotonic() + 20
    acked = 0
    while acked < 20:
        if time.monotonic() > deadline:
            raise TimeoutError("qos scenario stalled")
        conn.process_data_events(time_limit=0.05)
        if unacked and (len(unacked) >= 5 or delivered[0] == 20):
            time.sleep(0.05)  # the "slow" consumer
            ch.basic_ack(unacked.popleft())
            n.inc("acks")
            acked += 1
    ch.basic_cancel(tag)
    n.inc("cancels")
    delete_and_close(conn, ch, n, q)
    return n


@scenario(
    "091-confirms-return",
    "0-9-1",
    "confirm.select, 10 publishes each confirmed by basic.ack, then one mandatory publish to an "
    "unroutable routing key that comes back as basic.return 312 NO_ROUTE (and is then confirmed).",
)
def s_confirms_return(ctx: Ctx) -> dict[str, Any]:
    """Publisher confirms and mandatory returns share delivery-tag accounting."""
    n = Counts()
    conn, ch, q = channel_with_queue(ctx, n)
    ch.confirm_delivery()
    n.inc("confirm_selects")
    for i in range(10):
        try:
            publish_plain(ch, n, q, f"confirmed {i}".encode(), message_id=f"c{i}")
            n.inc("confirms_acked")
        except pika.exceptions.NackError:
            n.inc("confirms_nacked")
    unroutable = ctx.q("nowhere")
    try:
        ch.basic_publish("", unroutable, b"nobody wants this", mandatory=True)
        n.inc("publishes")
        n.inc("confirms_acked")
    except pika.exceptions.UnroutableError as err:
        # pika raises this only after the broker's basic.ack for the returned message.
        n.inc("publishes")
        n.inc("confirms_acked")
        for returned in err.messages:
            n.inc("returns")
            n.add(
                "return_details",
                {
                    "reply_code": returned.method.reply_code,
                    "reply_text": returned.method.reply_text,
                    "exchange": returned.method.exchange,
                    "routing_key": returned.method.routing_key,
                },
            )
    except pika.exceptions.NackError:
        n.inc("publishes")
        n.inc("confirms_nacked")
    delete_and_close(conn, ch, n, q, count_left=True)
    return n


@scenario(
    "091-tx",
    "0-9-1",
    "tx.select; publish + tx.commit; publish + tx.rollback; basic.get the committed message and "
    "basic.ack it inside the transaction, tx.commit; a passive declare then shows the queue empty.",
)
def s_tx(ctx: Ctx) -> dict[str, Any]:
    """Transactional publish/ack: the rolled-back message must never be delivered."""
    n = Counts()
    conn, ch, q = channel_with_queue(ctx, n)
    ch.tx_select()
    n.inc("tx_selects")
    publish_plain(ch, n, q, b"committed", message_id="committed")
    ch.tx_commit()
    n.inc("tx_commits")
    publish_plain(ch, n, q, b"rolled back", message_id="rolled-back")
    ch.tx_rollback()
    n.inc("tx_rollbacks")
    method, _props, body = ch.basic_get(q, auto_ack=False)
    n.inc("gets")
    if method is None:
        n.inc("get_empty")
    else:
        n.inc("get_ok")
        n["got_body"] = body.decode()
        ch.basic_ack(method.delivery_tag)
        n.inc("acks")
    ch.tx_commit()
    n.inc("tx_commits")
    res = ch.queue_declare(q, passive=True)
    n.inc("queue_declares")
    n["queue_message_count_after"] = res.method.message_count
    delete_and_close(conn, ch, n, q)
    return n


@scenario(
    "091-get",
    "0-9-1",
    "Two messages published; basic.get (manual ack, then basic.ack) returns get-ok, basic.get with "
    "no-ack returns get-ok, and a third basic.get on the now empty queue returns get-empty.",
)
def s_get(ctx: Ctx) -> dict[str, Any]:
    """Polling consumption: get-ok carries message-count, get-empty has no content."""
    n = Counts()
    conn, ch, q = channel_with_queue(ctx, n)
    publish_plain(ch, n, q, b"first", message_id="g1")
    publish_plain(ch, n, q, b"second", message_id="g2")
    for auto_ack in (False, True, True):
        method, _props, body = ch.basic_get(q, auto_ack=auto_ack)
        n.inc("gets")
        if method is None:
            n.inc("get_empty")
            continue
        n.inc("get_ok")
        n.add(
            "get_ok_details",
            {
                "body": body.decode(),
                "message_count": method.message_count,
                "delivery_tag": method.delivery_tag,
                "no_ack": auto_ack,
            },
        )
        if not auto_ack:
            ch.basic_ack(method.delivery_tag)
            n.inc("acks")
    delete_and_close(conn, ch, n, q)
    return n


def prepare_exchanges(ctx: Ctx) -> None:
    """Probe (outside the capture) which plugin exchange types the broker has."""
    found = []
    conn = pika.BlockingConnection(pika_params(name=f"amqpscope probe {ctx.name}"))
    try:
        for ex_type in ("x-consistent-hash",):
            ch = conn.channel()
            try:
                ch.exchange_declare(ctx.q("probe"), ex_type)
                ch.exchange_delete(ctx.q("probe"))
                found.append(ex_type)
                ch.close()
            except pika.exceptions.ChannelClosedByBroker:
                log(f"  exchange type {ex_type} not available; skipping it")
    finally:
        conn.close()
    ctx.state["plugin_types"] = found


@scenario(
    "091-exchanges",
    "0-9-1",
    "Declares direct, fanout, topic, headers and (plugin) x-consistent-hash exchanges, binds one "
    "queue to each and publishes one routed message per exchange, binds topic->fanout "
    "exchange-to-exchange and routes one message through it, unbinds everything, purges, deletes "
    "the queue and exchanges.",
    exchanges=("direct", "fanout", "topic", "headers", "x-consistent-hash", "probe"),
    prepare=prepare_exchanges,
)
def s_exchanges(ctx: Ctx) -> dict[str, Any]:
    """Covers the declare/bind/unbind/purge/delete method family, including e2e bindings."""
    n = Counts()
    conn = connect_091(ctx, n)
    ch = conn.channel()
    n.inc("channels")
    q = ctx.q()
    types = ["direct", "fanout", "topic", "headers", *ctx.state["plugin_types"]]
    binding = {
        "direct": ("key", None, "key", None),
        "fanout": ("", None, "anything", None),
        "topic": ("a.*", None, "a.b", None),
        "headers": ("", {"x-match": "all", "kind": "amqpscope"}, "", {"kind": "amqpscope"}),
        "x-consistent-hash": ("10", None, "some-id", None),
    }
    for ex_type in types:
        ch.exchange_declare(ctx.q(ex_type), ex_type, durable=False)
        n.inc("exchange_declares")
        n.add("exchange_types", ex_type)
    ch.queue_declare(q)
    n.inc("queue_declares")
    for ex_type in types:
        key, args, _, _ = binding[ex_type]
        ch.queue_bind(q, ctx.q(ex_type), routing_key=key, arguments=args)
        n.inc("queue_binds")
    for ex_type in types:
        _, _, publish_key, headers = binding[ex_type]
        publish_plain(
            ch, n, publish_key, f"via {ex_type}".encode(), exchange=ctx.q(ex_type), headers=headers
        )
    ch.exchange_bind(destination=ctx.q("fanout"), source=ctx.q("topic"), routing_key="e2e.#")
    n.inc("exchange_binds")
    publish_plain(ch, n, "e2e.hop", b"via topic->fanout", exchange=ctx.q("topic"))
    ch.exchange_unbind(destination=ctx.q("fanout"), source=ctx.q("topic"), routing_key="e2e.#")
    n.inc("exchange_unbinds")
    for ex_type in types:
        key, args, _, _ = binding[ex_type]
        ch.queue_unbind(q, ctx.q(ex_type), routing_key=key, arguments=args)
        n.inc("queue_unbinds")
    res = ch.queue_purge(q)
    n.inc("queue_purges")
    n["purged_messages"] = res.method.message_count
    ch.queue_delete(q)
    n.inc("queue_deletes")
    for ex_type in types:
        ch.exchange_delete(ctx.q(ex_type))
        n.inc("exchange_deletes")
    close_091(conn, n)
    return n
