"""Recordings of methods garagemq (Debian's Go 0-9-1 broker) answers unlike RabbitMQ, and of
librabbitmq's `amqp-tools` against both brokers, and a 1.0 peer with no transaction coordinator.

What each shows (issue 39, items 6, 8, 9 and 10):

- a passive queue.declare of a missing queue: the channel closed with 404 (garagemq and
  RabbitMQ): the client checked whether the queue exists;
- tx.select, which garagemq never answers: the client waits 3 s, gives up and closes the
  connection (pika's BlockingChannel.tx_select would wait for ever, so the select goes through
  pika's asynchronous channel underneath, and its connection.close straight to the wire);
- deliveries requeued by basic.nack / basic.reject, which garagemq delivers again without
  setting `redelivered`;
- amqp-declare-queue, amqp-publish, amqp-get, amqp-consume and amqp-delete-queue (a happy path);
- a Proton controller declaring a transaction on a Proton listener that has no coordinator: its
  receiver accepts the declare (`accepted`, not `declared`: no txn-id comes back).

Ground truth is the client's (pika's callbacks, the tools' output, Proton's events). garagemq runs
on record.GARAGEMQ_PORT (AMQPSCOPE_GARAGEMQ_PORT to record against a private one). Never delete a
queue on garagemq while a consumer is on it: garagemq 0.0~git20200204 then never answers the
queue.delete and its queue operations hang until it is restarted.

Needs: garagemq, pika, python-qpid-proton, and Debian's amqp-tools (librabbitmq's tools).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pika
import pika.exceptions
import recorder as record  # captures/recorder/: the harness and shared helpers
from proton import Delivery
from proton.handlers import TransactionHandler

#: how long the client waits for an answer the broker never sends, then gives up
GIVE_UP_SECONDS = 3.0
#: messages the requeue and amqp-tools scenarios publish
REQUEUED = 3
TOOL_MESSAGES = 3


def garagemq(ctx: record.Ctx) -> None:
    """Start garagemq if needed, and delete what a failed run of this scenario left behind
    (outside the capture)."""
    record.clear_garagemq(ctx.name, (ctx.q("q"), ctx.q("missing")))


#: what every garagemq scenario is: no RabbitMQ, garagemq's port captured
GARAGEMQ: dict[str, Any] = record.own_broker(record.GARAGEMQ_PORT, garagemq)


def passive_declares(ctx: record.Ctx, port: int) -> record.Counts:
    """Declare the queue, check it with a passive declare (it exists), check a missing one (the
    channel is closed with 404), delete the queue on a second channel, close."""
    n = record.Counts()
    conn, ch, q = record.channel_with_queue(ctx, n, port=port)
    ok = ch.queue_declare(q, passive=True)
    n.inc("queue_declares")
    n.inc("passive_declares")
    n["passive_found"] = {"queue": ok.method.queue, "message_count": ok.method.message_count}
    missing = ctx.q("missing")
    n["missing_queue"] = missing
    try:
        ch.queue_declare(missing, passive=True)
    except pika.exceptions.ChannelClosedByBroker as err:
        n.add("channel_errors", {"channel": 1, "code": err.reply_code, "text": err.reply_text})
    else:
        raise RuntimeError("a passive declare of a missing queue succeeded")
    finally:
        n.inc("queue_declares")
        n.inc("passive_declares")
    ch2 = conn.channel()
    n.inc("channels")
    record.delete_and_close(conn, ch2, n, q)
    return n


@record.scenario(
    "091-gmq-passive-declare",
    "0-9-1",
    "pika against garagemq: declare a queue, a passive declare of it (declare-ok), a passive"
    " declare of a missing queue (garagemq closes channel 1 with 404), the queue deleted on"
    " channel 2, close.",
    **GARAGEMQ,
)
def s_gmq_passive_declare(ctx: record.Ctx) -> dict[str, Any]:
    """A client checking whether queues exist; garagemq says no by closing the channel."""
    return passive_declares(ctx, record.GARAGEMQ_PORT)


@record.scenario(
    "091-passive-declare",
    "0-9-1",
    "pika against RabbitMQ: declare a queue, a passive declare of it (declare-ok), a passive"
    " declare of a missing queue (RabbitMQ closes channel 1 with 404), the queue deleted on"
    " channel 2, close.",
    queues=("q", "missing"),
)
def s_passive_declare(ctx: record.Ctx) -> dict[str, Any]:
    """As 091-gmq-passive-declare, on RabbitMQ."""
    return passive_declares(ctx, record.BROKER_PORT)


@record.scenario(
    "091-gmq-tx",
    "0-9-1",
    "pika against garagemq: channel.open, tx.select; garagemq never sends tx.select-ok. The"
    " client waits 3 s, gives up and closes the connection (connection.close 200; close-ok).",
    **GARAGEMQ,
)
def s_gmq_tx(ctx: record.Ctx) -> dict[str, Any]:
    """A synchronous method never answered: the client gives up waiting."""
    n = record.Counts()
    conn = record.connect_091(ctx, n, port=record.GARAGEMQ_PORT)
    ch = conn.channel()
    n.inc("channels")
    answered: list[Any] = []
    ch._impl.tx_select(callback=answered.append)  # pika's asynchronous channel: no wait
    n.inc("tx_selects")
    sent = time.time()
    deadline = time.monotonic() + GIVE_UP_SECONDS
    while not answered and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.05)
    n["tx_select_ok"] = len(answered)
    n["waited_s"] = round(time.time() - sent, 3)
    if answered:
        raise RuntimeError("garagemq answered tx.select: this scenario records it never does")
    # pika closes its channels before the connection, and its blocked channel would wait for the
    # select-ok first: the connection.close goes out directly, as a client that gave up sends it
    impl = conn._impl
    text = f"tx.select not answered in {GIVE_UP_SECONDS:g} s"
    impl._error = pika.exceptions.ConnectionClosedByClient(200, text)
    impl._set_connection_state(impl.CONNECTION_CLOSING)
    impl._send_connection_close(200, text)
    record.pump(conn, lambda: conn.is_closed, timeout=10)
    n.inc("connection_closes")
    n["close_reply_text"] = text
    return n


@record.scenario(
    "091-gmq-requeue",
    "0-9-1",
    "pika against garagemq: 3 messages published with message-ids r0-r2 and consumed with manual"
    " acks; the first delivery of r0 and r1 is basic.nack'ed and of r2 basic.reject'ed, each with"
    " requeue; garagemq delivers the three again (without setting redelivered) and they are"
    " acked; cancel, delete the queue, close.",
    **GARAGEMQ,
)
def s_gmq_requeue(ctx: record.Ctx) -> dict[str, Any]:
    """Requeued messages delivered again: what pika saw of each delivery."""
    n = record.Counts()
    conn, ch, q = record.channel_with_queue(ctx, n, port=record.GARAGEMQ_PORT)
    for i in range(REQUEUED):
        record.publish_plain(ch, n, q, f"requeue me {i}".encode(), message_id=f"r{i}")
    seen: dict[str, int] = {}

    def on_message(chan: Any, method: Any, props: Any, body: bytes) -> None:
        mid = props.message_id
        seen[mid] = seen.get(mid, 0) + 1
        n.inc("deliveries")
        n.add(
            "delivered",
            {
                "message_id": mid,
                "body": body.decode(),
                "delivery_tag": method.delivery_tag,
                "redelivered": bool(method.redelivered),
                "time": seen[mid],
            },
        )
        if seen[mid] > 1:
            chan.basic_ack(method.delivery_tag)
            n.inc("acks")
        elif mid == f"r{REQUEUED - 1}":
            chan.basic_reject(method.delivery_tag, requeue=True)
            n.inc("rejects")
            n.inc("requeued")
        else:
            chan.basic_nack(method.delivery_tag, requeue=True)
            n.inc("nacks")
            n.inc("requeued")

    tag = ch.basic_consume(q, on_message)
    n.inc("consumers")
    record.pump(conn, lambda: n.get("acks", 0) >= REQUEUED)
    ch.basic_cancel(tag)
    n.inc("cancels")
    n["redelivered_flag_seen"] = sum(1 for d in n["delivered"] if d["redelivered"])
    n["delivered_twice"] = sorted(mid for mid, times in seen.items() if times == 2)
    # after the cancel: garagemq hangs deleting a queue with a consumer
    record.delete_and_close(conn, ch, n, q)
    return n


#: a garagemq of the 091-gmq-stuck-delete scenario's own, which it leaves stuck and then stops
STUCK_PORT = 5677
STUCK_HOME = Path(tempfile.gettempdir()) / "amqpscope-garagemq-stuck"


def start_stuck_broker(ctx: record.Ctx) -> None:
    """Start a garagemq of this scenario's own (a fresh database each time): the queue.delete it
    records leaves the broker's queue operations hung until it is stopped."""
    binary = shutil.which("garagemq")
    if binary is None:
        raise RuntimeError("no garagemq (Debian's garagemq package has it)")
    shutil.rmtree(STUCK_HOME, ignore_errors=True)
    STUCK_HOME.mkdir(parents=True)
    config = STUCK_HOME / "config.yaml"
    config.write_text(
        record.GARAGEMQ_CONFIG.format(
            port=STUCK_PORT, admin_port=STUCK_PORT + 10000, db=STUCK_HOME / "db"
        )
    )
    with open(STUCK_HOME / "garagemq.log", "ab") as out:
        proc = subprocess.Popen(
            [binary, "--config", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=STUCK_HOME,  # in the scenario's process group: stopped with it on a time-out
        )
    ctx.state["stuck_broker"] = proc
    deadline = time.monotonic() + 30
    while not record.port_open(record.BROKER_HOST, STUCK_PORT):
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError(f"garagemq did not listen on {STUCK_PORT}")
        time.sleep(0.2)


def stop_stuck_broker(ctx: record.Ctx) -> None:
    """Stop the scenario's own garagemq (the one process it started)."""
    proc = ctx.state.pop("stuck_broker", None)
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def give_up(conn: pika.BlockingConnection, text: str) -> None:
    """Close the connection at once, as a client that gave up waiting does: pika would first
    close its channels, and a channel waiting for an answer waits for it before its close."""
    impl = conn._impl
    impl._error = pika.exceptions.ConnectionClosedByClient(200, text)
    impl._set_connection_state(impl.CONNECTION_CLOSING)
    impl._send_connection_close(200, text)
    deadline = time.monotonic() + 2
    while not conn.is_closed and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.05)


@record.scenario(
    "091-gmq-stuck-delete",
    "0-9-1",
    "pika against a garagemq of the scenario's own: declare a queue, consume from it, then"
    " queue.delete it on the same channel with the consumer still on; garagemq never answers"
    " (its queue operations hang from then on). The client waits 3 s, gives up and closes the"
    " connection. The broker is stopped afterwards.",
    port=STUCK_PORT,
    capture=record.CaptureSpec(bpf=f"tcp port {STUCK_PORT}"),
    queues=(),
    needs_broker=False,
    prepare=start_stuck_broker,
    cleanup=stop_stuck_broker,
)
def s_gmq_stuck_delete(ctx: record.Ctx) -> dict[str, Any]:
    """A queue.delete the broker never answers: the client gives up waiting."""
    n = record.Counts()
    conn, ch, q = record.channel_with_queue(ctx, n, port=STUCK_PORT)
    ch.basic_consume(q, lambda *_args: None)
    n.inc("consumers")
    answered: list[Any] = []
    ch._impl.queue_delete(q, callback=answered.append)  # pika's asynchronous channel: no wait
    n.inc("queue_deletes")
    sent = time.time()
    deadline = time.monotonic() + GIVE_UP_SECONDS
    while not answered and time.monotonic() < deadline:
        conn.process_data_events(time_limit=0.05)
    n["queue_delete_ok"] = len(answered)
    n["waited_s"] = round(time.time() - sent, 3)
    if answered:
        raise RuntimeError("garagemq answered queue.delete: this scenario records it never does")
    text = f"queue.delete not answered in {GIVE_UP_SECONDS:g} s"
    give_up(conn, text)
    n.inc("connection_closes")
    n["close_reply_text"] = text
    n["connection_close_ok"] = conn.is_closed
    return n


def tool(n: record.Counts, port: int, *args: str) -> str:
    """Run one of librabbitmq's amqp-tools against the broker on `port`; its output."""
    if shutil.which(args[0]) is None:
        raise RuntimeError(f"no {args[0]} (Debian's amqp-tools package has it)")
    out = subprocess.run(
        [args[0], "--server", record.BROKER_HOST, "--port", str(port), *args[1:]],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=20,
        check=True,
    ).stdout
    n.inc("connections")
    n.tally("tools", args[0])
    return out


def amqp_tools(ctx: record.Ctx, port: int) -> record.Counts:
    """Each tool a connection of its own: declare, publish, get one, consume the rest, delete."""
    n = record.Counts()
    q = ctx.q()
    n["declared"] = tool(n, port, "amqp-declare-queue", "--queue", q).strip()
    n.inc("queue_declares")
    for i in range(TOOL_MESSAGES):
        tool(n, port, "amqp-publish", "--routing-key", q, "--body", f"tool message {i}")
        n.inc("publishes")
    n["got"] = tool(n, port, "amqp-get", "--queue", q)
    n.inc("gets")
    n.inc("get_ok")
    rest = TOOL_MESSAGES - 1
    consumed = tool(n, port, "amqp-consume", "--queue", q, "--count", str(rest), "cat")
    n["consumed"] = consumed
    n["deliveries"] = rest
    n["acks"] = rest  # amqp-consume without --no-ack acks each message once its command ran
    n["deleted_message_count"] = tool(n, port, "amqp-delete-queue", "--queue", q).strip()
    n.inc("queue_deletes")
    return n


@record.scenario(
    "091-amqp-tools",
    "0-9-1",
    "librabbitmq's amqp-tools against RabbitMQ, each a connection of its own: amqp-declare-queue,"
    " amqp-publish three times, amqp-get one message, amqp-consume --count 2 the other two,"
    " amqp-delete-queue.",
)
def s_amqp_tools(ctx: record.Ctx) -> dict[str, Any]:
    """A happy path from another client library (librabbitmq, C)."""
    return amqp_tools(ctx, record.BROKER_PORT)


@record.scenario(
    "091-gmq-amqp-tools",
    "0-9-1",
    "librabbitmq's amqp-tools against garagemq, each a connection of its own: amqp-declare-queue,"
    " amqp-publish three times, amqp-get one message, amqp-consume --count 2 the other two,"
    " amqp-delete-queue.",
    **GARAGEMQ,
)
def s_gmq_amqp_tools(ctx: record.Ctx) -> dict[str, Any]:
    """A happy path from another client library against another broker."""
    return amqp_tools(ctx, record.GARAGEMQ_PORT)


class NoCoordinator(record.ProtonPeers, TransactionHandler):
    """A Proton controller declares a transaction on a Proton listener that has no coordinator:
    its receiver takes the declare as any message and accepts it."""

    def begin(self) -> None:
        assert self.container is not None
        self.listen()
        self.conn = self.connect()
        self.container.declare_transaction(self.conn, handler=self)
        self.n.inc("coordinator_attaches")
        self.n["transaction_declared"] = False

    def on_message(self, event: Any) -> None:  # the listener's receiver: no coordinator
        self.n.inc("listener_messages_received")
        self.accept(event.delivery)
        self.n.tally("listener_outcomes", "accepted")

    def on_transaction_declared(self, event: Any) -> None:
        self.n["transaction_declared"] = True
        self.shutdown()

    def on_transaction_declare_failed(self, event: Any) -> None:
        self.n["transaction_declare_failed"] = True
        outcomes = {Delivery.ACCEPTED: "accepted", Delivery.REJECTED: "rejected"}
        self.n["declare_outcome"] = outcomes.get(event.delivery.remote_state, "other")
        self.shutdown()


@record.scenario(
    "10-tx-no-coordinator",
    "1.0",
    "No broker: a Proton listener on 127.0.0.1:5673 with no transaction coordinator; a Proton"
    " controller attaches to a coordinator target and sends a declare, which the listener's"
    " receiver accepts like any message (accepted, no txn-id): Proton reports the declare failed.",
    **record.PEER_TO_PEER,
)
def s10_tx_no_coordinator(ctx: record.Ctx) -> dict[str, Any]:
    """A declare settled accepted instead of declared."""
    record.p2p_port_free()
    return NoCoordinator(ctx).run()
