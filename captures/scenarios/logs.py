"""Frame-trace logs recorded side by side with a capture of the same run.

Why: `amqpscope/logs/` reads the logs people attach to bug reports; its tests compare a real
log's records with the capture of the same conversation, frame for frame. Each scenario runs
the client library in a process of its own with its frame tracing switched on (Proton reads
`PN_TRACE_FRM` when it starts, so it must be in that process's environment), its stderr
written to NAME.log beside NAME.pcap; the ground truth is what the client counted.

The client side runs this file as a script: `python3 logs.py proton-broker ADDRESS` prints its
counts as one JSON line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

#: the port record.py already tells tshark is AMQP (10-peer-to-peer); the broker lock keeps
#: the two recordings apart
PROTON_P2P_PORT = 5673
#: rhea, from npm, installed where the recorder keeps it (not in the repository)
RHEA = "rhea@3.0.5"
NODE_DIR = "amqpscope-node"


def _rhea(ctx: Any, address: str, script_name: str = "rhea_client.js") -> dict[str, Any]:
    """rhea with DEBUG=rhea:frames: its stderr is the log, its stdout its counts."""
    from recorder.harness import rhea_client  # the recording side only (not the client's)

    log_path = Path(ctx.capture.path).parent / f"{ctx.name}.log"
    script = Path(__file__).resolve().parent / script_name
    # not a terminal, so debug prefixes each line with an ISO time (node's `debug` package)
    with open(log_path, "wb") as log:
        counts = rhea_client(
            RHEA, NODE_DIR, script, [address], log, DEBUG="rhea:frames", DEBUG_COLORS="no"
        )
    counts["log"] = log_path.name
    counts["log_lines"] = len(log_path.read_bytes().splitlines())
    return counts


def _client(ctx: Any, kind: str, *args: str) -> dict[str, Any]:
    """Run the traced client for `kind`; its stderr is the log, its stdout its counts."""
    log_path = Path(ctx.capture.path).parent / f"{ctx.name}.log"
    env = dict(os.environ, PN_TRACE_FRM="1") if kind.startswith("proton") else dict(os.environ)
    with open(log_path, "wb") as log:
        done = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), kind, *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=log,
            timeout=60,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"{kind} client exited with {done.returncode}")
    counts: dict[str, Any] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    counts["log"] = log_path.name
    counts["log_lines"] = len(log_path.read_bytes().splitlines())
    return counts


def _register() -> None:
    import recorder as record  # captures/recorder/: the harness and shared helpers

    @record.scenario(
        "log-proton-broker",
        "1.0",
        "python-qpid-proton with PN_TRACE_FRM=1 against RabbitMQ's AMQP 1.0 plugin, SASL PLAIN: "
        "a sender sends 6 messages (all accepted), then a receiver takes them back, accepting "
        "5 and rejecting the last; the trace is log-proton-broker.log.",
        setup=(("q", {}),),
        queues=(),
    )
    def s_log_proton_broker(ctx: Any) -> dict[str, Any]:
        return _client(ctx, "proton-broker", f"/amq/queue/{ctx.q()}")

    @record.scenario(
        "log-proton-starved",
        "1.0",
        "python-qpid-proton with PN_TRACE_FRM=1 against RabbitMQ's AMQP 1.0 plugin, SASL PLAIN: "
        "a sender sends 10 messages (all accepted); a receiver that manages its own credit "
        "(prefetch 0) grants 3, accepts the 3 it gets and grants no more, so the link starves "
        "with 7 messages waiting; 2 s later the process exits without closing anything (as a "
        "hung consumer that is killed), so the trace (log-proton-starved.log, which has no "
        "timestamps) ends with the link still starved.",
        setup=(("q", {}),),
        queues=(),
    )
    def s_log_proton_starved(ctx: Any) -> dict[str, Any]:
        return _client(ctx, "proton-starved", f"/amq/queue/{ctx.q()}")

    @record.scenario(
        "log-proton-p2p",
        "1.0",
        "No broker: one python-qpid-proton process with PN_TRACE_FRM=1 listens on "
        f"127.0.0.1:{PROTON_P2P_PORT} and connects to itself (SASL ANONYMOUS), sends 8 messages "
        "that the listener settles cycling accepted, rejected, released, modified; the trace "
        "(both ends, two transports) is log-proton-p2p.log.",
        port=PROTON_P2P_PORT,
        capture=record.CaptureSpec(bpf=f"tcp port {PROTON_P2P_PORT}"),
        queues=(),
        needs_broker=False,
    )
    def s_log_proton_p2p(ctx: Any) -> dict[str, Any]:
        return _client(ctx, "proton-p2p")

    @record.scenario(
        "log-rhea-broker",
        "1.0",
        f"rhea ({RHEA}, from npm) with DEBUG=rhea:frames against RabbitMQ's AMQP 1.0 plugin, "
        "SASL PLAIN: a sender sends 6 messages (all accepted), then a receiver takes them back, "
        "accepting 5 and rejecting the last; the trace is log-rhea-broker.log.",
        setup=(("q", {}),),
        queues=(),
    )
    def s_log_rhea_broker(ctx: Any) -> dict[str, Any]:
        return _rhea(ctx, f"/amq/queue/{ctx.q()}")

    @record.scenario(
        "log-rhea-starved",
        "1.0",
        f"rhea ({RHEA}, from npm) with DEBUG=rhea:frames against RabbitMQ's AMQP 1.0 plugin: a "
        "sender sends 20 messages (all accepted); a receiver that manages its own credit "
        "(credit_window 0) grants 5, accepts the 5 it gets and grants no more, so the link "
        "starves with 15 messages waiting until the connection closes 2 s later; the trace is "
        "log-rhea-starved.log. rhea's JSON leaves out zeros, so RabbitMQ's initial-delivery-count "
        "of 0 for the receiver's link is not in the log: the spec's rule (a sender's is never "
        "null) puts it back.",
        setup=(("q", {}),),
        queues=(),
    )
    def s_log_rhea_starved(ctx: Any) -> dict[str, Any]:
        return _rhea(ctx, f"/amq/queue/{ctx.q()}", "rhea_starved.js")

    @record.scenario(
        "log-pika-broker",
        "0-9-1",
        "pika (BlockingConnection) with Python logging at DEBUG against RabbitMQ: confirm.select, "
        "6 publishes (all confirmed), a basic.get of one (acked), a basic.get on an empty queue, "
        "a consumer with prefetch 2 that acks 4 and rejects the last, cancel, close; the log "
        "is log-pika-broker.log (pika's DEBUG lines show only some received frames).",
        queues=("q",),
    )
    def s_log_pika_broker(ctx: Any) -> dict[str, Any]:
        return _client(ctx, "pika-broker", ctx.q())

    @record.scenario(
        "log-pika-closed",
        "0-9-1",
        "pika (BlockingConnection) with Python logging at DEBUG against RabbitMQ: a message got "
        "and acked twice, so the broker closes the channel (406 PRECONDITION_FAILED - unknown "
        "delivery tag 1), which pika's log shows only as its warning `Received remote "
        "Channel.Close (406): ...`; a second channel deletes the queue; the log is "
        "log-pika-closed.log.",
        queues=("q",),
    )
    def s_log_pika_closed(ctx: Any) -> dict[str, Any]:
        return _client(ctx, "pika-closed", ctx.q())


class BrokerRoundTrip(MessagingHandler):  # type: ignore[misc]
    """Send N, then receive N back; the last one received is rejected."""

    def __init__(self, address: str, count: int = 6) -> None:
        super().__init__(auto_accept=False)
        self.address = address
        self.count = count
        self.n: dict[str, Any] = {"transfers_sent": 0, "transfers_received": 0}
        self.outcomes: dict[str, int] = {}
        self.given: dict[str, int] = {}

    def on_start(self, event: Any) -> None:
        self.conn = event.container.connect(
            "amqp://guest:guest@127.0.0.1:5672",
            allowed_mechs="PLAIN",
            allow_insecure_mechs=True,
            reconnect=False,
        )
        event.container.create_sender(self.conn, self.address)
        self.timer = event.container.schedule(20, self)

    def on_timer_task(self, event: Any) -> None:
        self.n["failure"] = "timed out"
        self.conn.close()

    def on_sendable(self, event: Any) -> None:
        while event.sender.credit and self.n["transfers_sent"] < self.count:
            i = self.n["transfers_sent"]
            event.sender.send(Message(id=f"l{i}", body=f"log message {i}", properties={"i": i}))
            self.n["transfers_sent"] += 1

    def on_settled(self, event: Any) -> None:
        state = {36: "accepted", 37: "rejected", 38: "released", 39: "modified"}.get(
            event.delivery.remote_state, str(event.delivery.remote_state)
        )
        self.outcomes[state] = self.outcomes.get(state, 0) + 1
        if sum(self.outcomes.values()) == self.count:
            event.link.close()
            event.container.create_receiver(self.conn, self.address)

    def on_message(self, event: Any) -> None:
        self.n["transfers_received"] += 1
        if self.n["transfers_received"] == self.count:
            self.reject(event.delivery)
            self.given["rejected"] = self.given.get("rejected", 0) + 1
            event.receiver.close()
            self.conn.close()
            self.timer.cancel()
        else:
            self.accept(event.delivery)
            self.given["accepted"] = self.given.get("accepted", 0) + 1

    def result(self) -> dict[str, Any]:
        return {**self.n, "sender_outcomes": self.outcomes, "receiver_outcomes": self.given}


class StarvedReceiver(MessagingHandler):  # type: ignore[misc]
    """Send N, then receive with credit for only the first few; exit while starved."""

    STALL_SECONDS = 2.0

    def __init__(self, address: str, count: int = 10, granted: int = 3) -> None:
        super().__init__(prefetch=0, auto_accept=False)
        self.address = address
        self.count = count
        self.granted = granted
        self.n: dict[str, Any] = {"transfers_sent": 0, "accepted_by_broker": 0}
        self.n.update(transfers_received=0, accepted=0, credit_granted=0)

    def on_start(self, event: Any) -> None:
        self.conn = event.container.connect(
            "amqp://guest:guest@127.0.0.1:5672",
            allowed_mechs="PLAIN",
            allow_insecure_mechs=True,
            reconnect=False,
        )
        self.sender = event.container.create_sender(self.conn, self.address)
        self.timer = event.container.schedule(20, self)

    def on_timer_task(self, event: Any) -> None:
        if self.n["transfers_received"] == self.granted:  # starved for STALL_SECONDS: "killed"
            self.n["waiting_at_exit"] = self.count - self.granted
            self.n["starved_seconds"] = round(time.time() - self.starved, 6)
            print(json.dumps(self.n), flush=True)
            os._exit(0)  # no detach, end or close: the trace ends with the link starved
        self.n["failure"] = "timed out"
        self.conn.close()

    def on_sendable(self, event: Any) -> None:
        while event.sender.credit and self.n["transfers_sent"] < self.count:
            i = self.n["transfers_sent"]
            event.sender.send(Message(id=f"s{i}", body=f"starved message {i}"))
            self.n["transfers_sent"] += 1

    def on_accepted(self, event: Any) -> None:
        self.n["accepted_by_broker"] += 1
        if self.n["accepted_by_broker"] == self.count:
            self.sender.close()
            self.receiver = event.container.create_receiver(self.conn, self.address)
            self.receiver.flow(self.granted)
            self.n["credit_granted"] = self.granted

    def on_message(self, event: Any) -> None:
        self.n["transfers_received"] += 1
        self.accept(event.delivery)
        self.n["accepted"] += 1
        if self.n["transfers_received"] == self.granted:
            self.starved = time.time()  # its last credit used, 7 messages waiting
            self.timer.cancel()
            self.timer = event.container.schedule(self.STALL_SECONDS, self)

    def result(self) -> dict[str, Any]:
        return self.n


class PeerToPeer(MessagingHandler):  # type: ignore[misc]
    """Listener and client in one process; the listener cycles the four outcomes."""

    OUTCOMES = ("accepted", "rejected", "released", "modified")

    def __init__(self, count: int = 8) -> None:
        super().__init__(auto_accept=False)
        self.count = count
        self.n: dict[str, Any] = {"transfers_sent": 0, "listener_received": 0}
        self.outcomes: dict[str, int] = {}
        self.given: dict[str, int] = {}

    def on_start(self, event: Any) -> None:
        url = f"127.0.0.1:{PROTON_P2P_PORT}"
        self.acceptor = event.container.listen(url)
        self.conn = event.container.connect(url, reconnect=False)
        event.container.create_sender(self.conn, "amqpscope/log-p2p")
        self.timer = event.container.schedule(20, self)

    def on_timer_task(self, event: Any) -> None:
        self.n["failure"] = "timed out"
        self.conn.close()
        self.acceptor.close()

    def on_sendable(self, event: Any) -> None:
        if event.connection != self.conn:
            return
        while event.sender.credit and self.n["transfers_sent"] < self.count:
            i = self.n["transfers_sent"]
            event.sender.send(Message(id=f"p{i}", body=f"p2p message {i}"))
            self.n["transfers_sent"] += 1

    def on_message(self, event: Any) -> None:
        i = self.n["listener_received"]
        self.n["listener_received"] += 1
        outcome = self.OUTCOMES[i % 4]
        self.given[outcome] = self.given.get(outcome, 0) + 1
        if outcome == "accepted":
            self.accept(event.delivery)
        elif outcome == "rejected":
            self.reject(event.delivery)
        elif outcome == "released":
            self.release(event.delivery, delivered=False)
        else:
            self.release(event.delivery, delivered=True)

    def on_settled(self, event: Any) -> None:
        if event.connection != self.conn:
            return
        state = {36: "accepted", 37: "rejected", 38: "released", 39: "modified"}.get(
            event.delivery.remote_state, str(event.delivery.remote_state)
        )
        self.outcomes[state] = self.outcomes.get(state, 0) + 1
        if sum(self.outcomes.values()) == self.count:
            self.conn.close()

    def on_connection_closed(self, event: Any) -> None:
        if event.connection != self.conn:
            self.acceptor.close()
            self.timer.cancel()

    def result(self) -> dict[str, Any]:
        return {**self.n, "sender_outcomes": self.outcomes, "listener_outcomes": self.given}


def _pika_round_trip(queue: str, count: int = 6) -> dict[str, Any]:
    """Confirmed publishes, a get, an empty get, a consumer acking all but the last."""
    import logging

    import pika

    logging.basicConfig(
        level=logging.DEBUG, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    # keys as tests/test_ground_truth.py reads them (frames the client asked for or saw)
    n: dict[str, Any] = dict.fromkeys(
        ("publishes", "gets", "get_ok", "get_empty", "deliveries", "acks", "rejects"), 0
    )
    params = pika.ConnectionParameters(
        "127.0.0.1", credentials=pika.PlainCredentials("guest", "guest"), heartbeat=0
    )
    conn = pika.BlockingConnection(params)
    ch = conn.channel()
    ch.queue_declare(queue)
    n["queue_declares"] = 1
    ch.confirm_delivery()
    n["confirm_selects"] = 1
    for i in range(count):
        props = pika.BasicProperties(
            content_type="text/plain", headers={"i": i}, message_id=f"m{i}"
        )
        # confirm_delivery: basic_publish returns once the broker confirmed it
        ch.basic_publish("", queue, f"pika message {i}".encode(), props)
        n["publishes"] += 1
    method, _props, _body = ch.basic_get(queue)
    n["gets"] += 1
    if method is not None:
        n["get_ok"] += 1
        ch.basic_ack(method.delivery_tag)
        n["acks"] += 1
    ch.basic_qos(prefetch_count=2)
    n["consumers"] = 1
    for method, _props, _body in ch.consume(queue, inactivity_timeout=5):
        if method is None:
            n["failure"] = "timed out"
            break
        n["deliveries"] += 1
        if n["deliveries"] == count - 1:
            ch.basic_reject(method.delivery_tag, requeue=False)
            n["rejects"] += 1
            break
        ch.basic_ack(method.delivery_tag)
        n["acks"] += 1
    ch.cancel()
    method, _props, _body = ch.basic_get(queue)
    n["gets"] += 1
    if method is None:
        n["get_empty"] += 1
    ch.queue_delete(queue)
    n["queue_deletes"] = 1
    conn.close()
    return n


def _pika_closed(queue: str) -> dict[str, Any]:
    """A message got and acked twice: the broker closes the channel (406, unknown delivery
    tag), which pika logs only as its warning `Received remote Channel.Close (406): ...`."""
    import logging

    import pika

    logging.basicConfig(
        level=logging.DEBUG, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    n: dict[str, Any] = {"connections": 1, "channels": 2}
    params = pika.ConnectionParameters(
        "127.0.0.1", credentials=pika.PlainCredentials("guest", "guest"), heartbeat=0
    )
    conn = pika.BlockingConnection(params)
    ch = conn.channel()
    ch.queue_declare(queue)
    n["queue_declares"] = 1
    ch.basic_publish("", queue, b"acked twice")
    n["publishes"] = 1
    method, _props, _body = ch.basic_get(queue)
    n["gets"] = n["get_ok"] = 1
    ch.basic_ack(method.delivery_tag)
    ch.basic_ack(method.delivery_tag)  # the second names a tag the channel no longer holds
    n["acks"] = 2
    try:
        n["queue_declares"] += 1  # sent before the broker's close is read: it answers none
        ch.queue_declare(queue, passive=True)
    except pika.exceptions.ChannelClosedByBroker as closed:
        n["channel_close"] = {"reply_code": closed.reply_code, "reply_text": closed.reply_text}
    ch2 = conn.channel()
    ch2.queue_delete(queue)
    n["queue_deletes"] = 1
    conn.close()
    return n


def _run_client(argv: list[str]) -> int:
    kind = argv[0]
    if kind in ("pika-broker", "pika-closed"):
        counts = (_pika_round_trip if kind == "pika-broker" else _pika_closed)(argv[1])
        print(json.dumps(counts))
        return 0 if "failure" not in counts else 1
    handler: BrokerRoundTrip | StarvedReceiver | PeerToPeer
    if kind == "proton-broker":
        handler = BrokerRoundTrip(argv[1])
    elif kind == "proton-starved":
        handler = StarvedReceiver(argv[1])
    else:
        handler = PeerToPeer()
    container = Container(handler)
    container.container_id = f"amqpscope-log-{kind}"
    container.run()
    print(json.dumps(handler.result()))
    return 0 if "failure" not in handler.n else 1


if __name__ == "__main__":
    sys.exit(_run_client(sys.argv[1:]))
else:
    _register()
