"""Recordings of how connections end against another broker than RabbitMQ (issue 39, items 1-3):
garagemq (Debian's Go 0-9-1 broker, `record.ensure_garagemq`, port 5674) hanging up on a silent
client, refusing a login with 530, closing on a publish to a missing exchange; a Proton client
killed while it holds a link on RabbitMQ's AMQP 1.0; and a happy path on garagemq with pika and
librabbitmq's amqp-tools (amqp-publish, amqp-consume), which must draw no warning.

Ground truth is the client's: the times its calls returned (time.time(), the clock tcpdump stamps
packets with) and the exceptions pika raised, never read from the capture.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from typing import Any

import pika
import pika.exceptions
import recorder as record  # captures/recorder/: the harness and shared helpers

#: garagemq's port: record.ensure_garagemq's, unless AMQPSCOPE_GARAGEMQ_PORT names another
#: garagemq already running (a shared one stuck or busy with someone else's test); the JSON's
#: `port` says which was recorded
PORT = int(os.environ.get("AMQPSCOPE_GARAGEMQ_PORT", record.GARAGEMQ_PORT))


def _others_port(line: str) -> int | None:
    """The client port of a connection `record.busy_connections` lists, if garagemq's."""
    m = re.search(r": [0-9A-F]+:([0-9A-F]+) -> [0-9A-F]+:([0-9A-F]+) ", line)
    if m is None:
        return None
    local, remote = int(m.group(1), 16), int(m.group(2), 16)
    return local if remote == PORT else None


def _start_capture(ctx: record.Ctx) -> None:
    """Capture garagemq's port, but not the connections already open on it when the scenario
    starts (other users of the shared broker: their heartbeats are no part of this recording)."""
    ctx.port = PORT
    busy = record.busy_connections({PORT})
    others = sorted({p for p in map(_others_port, busy) if p is not None})
    bpf = f"tcp port {PORT}" + "".join(f" and not tcp port {p}" for p in others)
    ctx.capture.start(bpf)


def _prepare(ctx: record.Ctx) -> None:
    if PORT == record.GARAGEMQ_PORT:
        record.ensure_garagemq()
    elif not record.port_open(record.BROKER_HOST, PORT):
        raise RuntimeError(f"no garagemq on {PORT} (AMQPSCOPE_GARAGEMQ_PORT)")


#: the capture and connection settings every garagemq scenario shares (each starts its capture
#: with `_start_capture`)
GARAGEMQ: dict[str, Any] = record.own_broker(PORT, _prepare, manual_capture=True)
#: how long the heartbeat scenario's client does no I/O (garagemq hangs up after about 3.5 s)
SILENT_SECONDS = 6.0


def _connect(ctx: record.Ctx, n: record.Counts, **kw: Any) -> pika.BlockingConnection:
    """A counted pika connection to garagemq."""
    params = record.pika_params(port=PORT, name=f"amqpscope {ctx.name}", **kw)
    conn = pika.BlockingConnection(params)
    n.inc("connections")
    return conn


def _error(err: BaseException) -> dict[str, Any]:
    """What pika raised: its type and text, and a reply code and text when it gave them."""
    text = str(err.args[0]) if err.args else str(err)
    out: dict[str, Any] = {"exception": type(err).__name__, "text": text}
    if len(err.args) >= 2 and isinstance(err.args[0], int):
        out["code"], out["reply_text"] = err.args[0], str(err.args[1])
    elif m := re.search(r"\((\d+)\), ?'(.*)'", text) or re.search(r"\((\d+)\) '(.*)'", text):
        out["code"], out["reply_text"] = int(m.group(1)), m.group(2)
    return out


@record.scenario(
    "091-gmq-heartbeat-fin",
    "0-9-1",
    "pika negotiates heartbeat=1 s with garagemq, opens a channel, then does no I/O for 6 s"
    " (time.sleep, pika's heartbeats are not sent); garagemq hangs up on the silent client (TCP"
    " FIN, no connection.close); the client wakes, publishes one message into the closed socket"
    " and the kernel answers with a reset. Ground truth: the client's times and pika's error.",
    **GARAGEMQ,
)
def s_gmq_heartbeat_fin(ctx: record.Ctx) -> dict[str, Any]:
    """The broker gives up on a silent client: its FIN comes long before the client's reset."""
    n = record.Counts()
    _start_capture(ctx)
    conn = _connect(ctx, n, heartbeat=1)
    n["negotiated_heartbeat"] = conn._impl.params.heartbeat
    ch = conn.channel()
    n.inc("channels")
    went_silent = time.time()
    time.sleep(SILENT_SECONDS)  # no I/O: pika sends no heartbeat while it sleeps
    woke = time.time()
    error = None
    try:
        ch.basic_publish("", ctx.q(), b"after the silence")
        n.inc("publishes")
        conn.process_data_events(time_limit=1.0)
    except pika.exceptions.AMQPError as err:
        error = _error(err)
    n["silence"] = {
        "went_silent": went_silent,
        "woke": woke,
        "seconds": round(woke - went_silent, 6),
    }
    if error is None:
        raise RuntimeError("garagemq kept the silent client's connection")
    n["client_error"] = error
    n["connection_closes"] = 0
    return n


@record.scenario(
    "091-gmq-refused-login",
    "0-9-1",
    "pika logs in to garagemq as guest with a wrong password; garagemq answers connection.start-ok"
    " with connection.close 530 NOT_ALLOWED.",
    **GARAGEMQ,
)
def s_gmq_refused_login(ctx: record.Ctx) -> dict[str, Any]:
    """A refused login by another code than RabbitMQ's 403."""
    n = record.Counts()
    _start_capture(ctx)
    try:
        conn = _connect(ctx, n, password="wrong-password")
    except pika.exceptions.AMQPConnectionError as err:
        n.inc("connections")
        n["connection_opened"] = False
        n["client_error"] = _error(err)
        detail = n["client_error"]["text"]
        if m := re.search(r"\((\d+)\)[, ]+'(.*)'", detail):
            n.add("connection_errors", {"channel": 0, "code": int(m.group(1)), "text": m.group(2)})
        return n
    conn.close()
    raise RuntimeError("garagemq accepted a wrong password")


@record.scenario(
    "091-gmq-missing-exchange",
    "0-9-1",
    "pika opens a channel on garagemq and publishes one message to an exchange that does not"
    " exist; garagemq closes the channel (404) on the basic.publish, then the connection (501)"
    " on that publish's content header, which was already on its way.",
    **GARAGEMQ,
)
def s_gmq_missing_exchange(ctx: record.Ctx) -> dict[str, Any]:
    """A broker's close on a frame the client had sent before the broker's channel close."""
    n = record.Counts()
    _start_capture(ctx)
    conn = _connect(ctx, n)
    ch = conn.channel()
    n.inc("channels")
    errors = []
    try:
        ch.basic_publish(ctx.q("missing"), "key", b"to nowhere")
        n.inc("publishes")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.1)
    except pika.exceptions.AMQPError as err:
        errors.append(_error(err))
    if conn.is_open:
        try:
            conn.close()
            n.inc("connection_closes")
        except pika.exceptions.AMQPError as err:
            errors.append(_error(err))
    if not errors:
        raise RuntimeError("garagemq took a publish to a missing exchange")
    n["client_errors"] = errors
    n["exchange"] = ctx.q("missing")
    return n


@record.scenario(
    "091-gmq-happy",
    "0-9-1",
    "A happy path on garagemq: pika declares a queue, publishes 5 messages, consumes and acks"
    " them, deletes the queue and closes; then librabbitmq's amqp-tools: amqp-declare-queue,"
    " amqp-publish of 3 messages and amqp-consume -c 3 (acking each), each its own connection.",
    **GARAGEMQ,
)
def s_gmq_happy(ctx: record.Ctx) -> dict[str, Any]:
    """No diagnosis may warn about a conversation that went as it should."""
    n = record.Counts()
    _start_capture(ctx)
    conn = _connect(ctx, n)
    ch = conn.channel()
    n.inc("channels")
    q = ctx.q()
    ch.queue_declare(q, auto_delete=False)
    n.inc("queue_declares")
    for i in range(5):
        record.publish_plain(ch, n, q, f"{ctx.name} message {i}".encode(), message_id=f"m{i}")
    record.consume_and_ack(conn, ch, n, q, 5)
    record.delete_and_close(conn, ch, n, q)
    server = ["--server", record.BROKER_HOST, "--port", str(PORT)]
    tools = ctx.q("tools")
    tool = {"check": True, "capture_output": True, "timeout": 20}
    # each amqp-tools command is a connection of its own with one channel (channel 1), closed
    # with connection.close when it exits 0
    subprocess.run(["amqp-declare-queue", *server, "-q", tools], **tool)
    n.inc("connections")
    n.inc("channels")
    n.inc("connection_closes")
    n.inc("queue_declares")
    for i in range(3):
        subprocess.run(
            ["amqp-publish", *server, "-r", tools, "-b", f"tools message {i}"],
            check=True,
            capture_output=True,
            timeout=20,
        )
        n.inc("connections")
        n.inc("channels")
        n.inc("connection_closes")
        n.inc("publishes")
    got = subprocess.run(
        ["amqp-consume", *server, "-q", tools, "-c", "3", "cat"],
        check=True,
        capture_output=True,
        text=True,
        timeout=20,
    )
    n.inc("connections")
    n.inc("channels")
    n.inc("connection_closes")
    n.inc("consumers")
    n["tools_deliveries"] = got.stdout.count("tools message")
    n.inc("deliveries", n["tools_deliveries"])
    n.inc("acks", n["tools_deliveries"])
    subprocess.run(["amqp-delete-queue", *server, "-q", tools], **tool)
    n.inc("connections")
    n.inc("channels")
    n.inc("connection_closes")
    n.inc("queue_deletes")
    n["amqp_tools"] = "librabbitmq amqp-tools (Debian)"
    return n


#: the AMQP 1.0 client 10-killed-client kills: a process of its own holding a receiving link
KILLED_10_CLIENT = """
import json, sys, time
from proton.handlers import MessagingHandler
from proton.reactor import Container
url, address, cid = sys.argv[1], sys.argv[2], sys.argv[3]

class Holder(MessagingHandler):
    def on_start(self, event):
        conn = event.container.connect(url, reconnect=False)
        event.container.create_receiver(conn, address, name="amqpscope-held")
    def on_link_opened(self, event):
        if event.link.is_receiver:
            print(json.dumps({"link_opened": time.time(), "link": event.link.name}), flush=True)

c = Container(Holder())
c.container_id = cid
c.run()
"""


class KilledClientListener(record.ProtonPeers):
    """A Proton listener (Proton-C's engine, as Proton's C++ broker) whose one client, a process
    of its own, attaches a receiving link and is killed with SIGKILL once the link is open: the
    client's kernel sends the FIN; the listener's engine then reports the end as a
    framing-error and sends its close after the FIN."""

    def __init__(self, ctx: record.Ctx) -> None:
        super().__init__(ctx)
        self.child: subprocess.Popen[str] | None = None

    def begin(self) -> None:
        self.listen()
        self.child = subprocess.Popen(
            [sys.executable, "-c", KILLED_10_CLIENT, self.url, "amqpscope/held", "amqpscope-held"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.n["connections"] = 1

    def on_link_opened(self, event: Any) -> None:
        if event.link.is_sender:  # the listener's end of the client's receiving link
            self.n["connections_opened"] = 1  # the client's open came before its attach
            self.n["links_attached"] = {"sender": 0, "receiver": 1}  # the client's links
            self.later(0.3, self.kill)

    def kill(self) -> None:
        assert self.child is not None and self.child.stdout is not None
        ready = json.loads(self.child.stdout.readline())
        self.n["link_opened_by_client"] = ready["link_opened"]
        self.n["killed"] = time.time()
        self.child.send_signal(signal.SIGKILL)
        self.child.wait(timeout=10)
        self.n["killed_with"] = "SIGKILL"
        self.n["closes_sent_by_client"] = 0

    def on_transport_error(self, event: Any) -> None:
        self.n["listener_transport_error"] = record.cond_dict(event.transport.condition)
        self.n["listener_saw_end"] = time.time()
        for task in self.timers:
            task.cancel()
        if self.acceptor is not None:
            self.acceptor.close()

    def on_transport_closed(self, event: Any) -> None:
        if self.acceptor is not None:
            self.acceptor.close()


@record.scenario(
    "10-killed-client",
    "1.0",
    "No broker: a Proton (python) container listens on 127.0.0.1:5673; a Proton client in a"
    " process of its own connects, attaches a receiving link and holds it; once the link is open"
    " the client process is killed with SIGKILL (no detach, end or close): its kernel sends the"
    " FIN first, then the listener's engine sends close (amqp:connection:framing-error) into the"
    " dead socket, which answers with a reset.",
    **record.PEER_TO_PEER,
)
def s10_killed_client(ctx: record.Ctx) -> dict[str, Any]:
    """A 1.0 client that vanishes: the peer's close comes after the client's FIN."""
    record.p2p_port_free()
    listener = KilledClientListener(ctx)
    try:
        n = listener.run()
    finally:
        child = listener.child
        if child is not None and child.poll() is None:
            child.kill()
            child.wait(timeout=10)
    if "killed" not in n:
        raise RuntimeError("the 1.0 client was never killed")
    return n
