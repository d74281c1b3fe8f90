"""Recordings of what `amqpscope diagnose` answers: a consumer that stops acking at its prefetch,
a publisher blocked by a memory alarm, a client paused with SIGSTOP until the broker gives up on
its heartbeats.

Ground truth is the client's: the times its callbacks ran (time.time(), the clock tcpdump
stamps packets with), the tags it held, the reason pika was given; never read from the capture.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import deque
from typing import Any

import record  # captures/record.py, which loads this module

#: how long each scenario holds its trouble (long enough to stand far above the 1 s threshold)
STALL_SECONDS = 2.5
BLOCKED_SECONDS = 2.0


@record.scenario(
    "091-stalled-consumer",
    "0-9-1",
    "basic.qos prefetch_count=5, 10 messages published; the consumer acks tags 1-3 as they come,"
    " then holds the 5 deliveries the prefetch allows (tags 4-8) unacked for 2.5 s while pika"
    " keeps the connection serviced, then acks everything and closes.",
)
def s_stalled_consumer(ctx: record.Ctx) -> dict[str, Any]:
    """A stalled consumer: at its prefetch limit with no ack for a long time."""
    n = record.Counts()
    conn, ch, q = record.channel_with_queue(ctx, n)
    ch.basic_qos(prefetch_count=5)
    n["prefetch_count"] = 5
    for i in range(10):
        record.publish_plain(ch, n, q, f"job {i}".encode(), message_id=f"j{i}")
    unacked: deque[int] = deque()
    arrived: dict[int, float] = {}

    def on_message(_chan: Any, method: Any, _props: Any, _body: bytes) -> None:
        arrived[method.delivery_tag] = time.time()
        unacked.append(method.delivery_tag)
        n.inc("deliveries")

    tag = ch.basic_consume(q, on_message)
    n.inc("consumers")
    for _ in range(3):  # a healthy start: each delivery acked as it comes
        record.pump(conn, lambda: bool(unacked))
        ch.basic_ack(unacked.popleft())
        n.inc("acks")
        last_ack = time.time()
    record.pump(conn, lambda: len(unacked) == 5 and n["deliveries"] == 8)
    stall_started = arrived[8]  # the delivery that filled the prefetch window again
    n["unacked_in_stall"] = sorted(unacked)
    n["last_ack_before_stall_tag"] = 3
    deadline = time.time() + STALL_SECONDS
    while time.time() < deadline:  # stopped acking; the connection stays serviced
        conn.process_data_events(time_limit=0.05)
    stall_ended = time.time()
    ch.basic_ack(unacked.popleft())
    n.inc("acks")
    while n["acks"] < 10:
        record.pump(conn, lambda: bool(unacked))
        ch.basic_ack(unacked.popleft())
        n.inc("acks")
    n["stall"] = {
        "started": stall_started,
        "ended": stall_ended,
        "seconds": round(stall_ended - stall_started, 6),
        "last_ack_before": last_ack,
    }
    ch.basic_cancel(tag)
    n.inc("cancels")
    ch.queue_delete(q)
    n.inc("queue_deletes")
    record.close_091(conn, n)
    return n


def _watermark() -> str:
    out = record.run_cmd(
        ["rabbitmqctl", "eval", "vm_memory_monitor:get_vm_memory_high_watermark()."]
    ).stdout.strip()
    float(out)  # a relative watermark (an absolute one prints as a tuple: refuse to guess)
    return out


@record.scenario(
    "091-blocked-publisher",
    "0-9-1",
    "A publisher whose broker raises a memory alarm (rabbitmqctl set_vm_memory_high_watermark"
    " 0.0001) after its first publish: it publishes again, gets connection.blocked, stays"
    " blocked about 2 s until the watermark is restored, gets connection.unblocked, publishes"
    " once more and closes.",
)
def s_blocked_publisher(ctx: record.Ctx) -> dict[str, Any]:
    """connection.blocked with its reason and duration, as pika's callbacks saw them."""
    n = record.Counts()
    conn, ch, q = record.channel_with_queue(ctx, n)
    events: dict[str, Any] = {}

    def on_blocked(_conn: Any, method: Any) -> None:
        events["blocked"] = time.time()
        events["reason"] = method.method.reason

    def on_unblocked(_conn: Any, _method: Any) -> None:
        events["unblocked"] = time.time()

    conn.add_on_connection_blocked_callback(on_blocked)
    conn.add_on_connection_unblocked_callback(on_unblocked)
    record.publish_plain(ch, n, q, b"before the alarm")
    original = _watermark()
    try:
        record.run_cmd(["rabbitmqctl", "set_vm_memory_high_watermark", "0.0001"])
        record.publish_plain(ch, n, q, b"during the alarm")
        record.pump(conn, lambda: "blocked" in events)
        deadline = time.time() + BLOCKED_SECONDS
        while time.time() < deadline:
            conn.process_data_events(time_limit=0.05)
    finally:
        record.run_cmd(["rabbitmqctl", "set_vm_memory_high_watermark", original])
    record.pump(conn, lambda: "unblocked" in events)
    record.publish_plain(ch, n, q, b"after the alarm")
    n["watermark_restored"] = original
    n["blocked"] = {
        "reason": events["reason"],
        "at": events["blocked"],
        "unblocked_at": events["unblocked"],
        "seconds": round(events["unblocked"] - events["blocked"], 6),
    }
    n["blocked_times"] = 1
    ch.queue_delete(q)
    n.inc("queue_deletes")
    record.close_091(conn, n)
    return n


#: the paused client: declares its queue (its last frame), says when, then waits in pika's
#: loop (heartbeats serviced) until it is stopped
PAUSED_CLIENT = """
import sys, time, pika
params = pika.ConnectionParameters(host=sys.argv[1], port=int(sys.argv[2]), heartbeat=1,
    client_properties={"connection_name": sys.argv[3]})
conn = pika.BlockingConnection(params)
ch = conn.channel()
ch.queue_declare(sys.argv[4])
sock = conn._impl._transport._sock
print(sock.getsockname()[1], conn._impl.params.heartbeat, time.time(), flush=True)
conn.sleep(60)
"""


def _tcp_state(local_port: int, remote_port: int) -> str | None:
    """The kernel's state (hex, /proc/net/tcp) of the connection from `local_port`."""
    with open("/proc/net/tcp") as fh:
        for line in list(fh)[1:]:
            cols = line.split()
            if (
                int(cols[1].rsplit(":", 1)[1], 16) == local_port
                and int(cols[2].rsplit(":", 1)[1], 16) == remote_port
            ):
                return cols[3]
    return None


@record.scenario(
    "091-missed-heartbeats",
    "0-9-1",
    "A pika client negotiates heartbeat=1 s, declares its queue and is then paused with SIGSTOP;"
    " the broker hears nothing more from it and closes the TCP connection (no connection.close)."
    " Once the client's socket shows the broker's FIN (CLOSE_WAIT) the client is killed.",
)
def s_missed_heartbeats(ctx: record.Ctx) -> dict[str, Any]:
    """Missed heartbeats: the silence of the client against the negotiated interval."""
    n = record.Counts()
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            PAUSED_CLIENT,
            record.BROKER_HOST,
            str(record.BROKER_PORT),
            f"amqpscope {ctx.name}",
            ctx.q(),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        port, heartbeat, last_sent = child.stdout.readline().split()
        os.kill(child.pid, signal.SIGSTOP)
        stopped = time.time()
        n.inc("connections")
        n.inc("queue_declares")
        n["negotiated_heartbeat"] = int(heartbeat)
        deadline = time.monotonic() + 30
        while _tcp_state(int(port), record.BROKER_PORT) not in ("08", None):  # CLOSE_WAIT
            if time.monotonic() > deadline:
                raise TimeoutError("the broker never closed the paused client's connection")
            time.sleep(0.01)
        closed = time.time()
    finally:
        child.kill()  # SIGKILL works on a stopped process; the kernel closes its socket
        child.wait(timeout=10)
    n["killed_with"] = "SIGKILL"
    n["connection_closes"] = 0
    n["silence"] = {
        "last_sent": float(last_sent),
        "stopped": stopped,
        "broker_closed": closed,
        "seconds": round(closed - float(last_sent), 6),
    }
    return n


class StarvedReceiver(record.ProtonClient):
    """10 messages put on a queue; a zero-prefetch Proton receiver grants credit for 3, takes
    them, and grants no more for 2.5 s while 7 wait; then grants 7 and takes the rest."""

    MESSAGES = 10
    FIRST = 3

    def __init__(self, ctx: record.Ctx) -> None:
        super().__init__(ctx, prefetch=0)
        self.sent = 0
        self.receiver: Any = None
        self.times: dict[str, float] = {}

    def begin(self) -> None:
        self.conn = self.connect()
        self.sender = self.container.create_sender(self.conn, record.queue_address(self.ctx))

    def on_sendable(self, event: Any) -> None:
        while event.sender.credit and self.sent < self.MESSAGES:
            event.sender.send(record.text_message(self.sent, "s"))
            self.sent += 1
            self.n.inc("transfers_sent")

    def on_accepted(self, event: Any) -> None:
        super().on_accepted(event)
        if self.n["sender_outcomes"]["accepted"] == self.MESSAGES:
            self.receiver = self.container.create_receiver(
                self.conn, record.queue_address(self.ctx), name="amqpscope-starved"
            )

    def on_link_opened(self, event: Any) -> None:
        if event.link.is_receiver:
            event.receiver.flow(self.FIRST)
            self.n.add("credit_granted", self.FIRST)

    def on_message(self, event: Any) -> None:
        self.n.inc("transfers_received")
        self.settle_with(event.delivery, "accepted")
        received = self.n["transfers_received"]
        if received == self.FIRST:
            self.times["starved"] = time.time()  # its last credit used, 7 messages waiting
            self.n["waiting_when_starved"] = self.MESSAGES - self.FIRST
            self.later(STALL_SECONDS, self.grant)
        elif received == self.MESSAGES:
            self.n["starvation"] = {
                "started": self.times["starved"],
                "ended": self.times["granted"],
                "seconds": round(self.times["granted"] - self.times["starved"], 6),
            }
            self.shutdown()

    def grant(self) -> None:
        self.times["granted"] = time.time()
        rest = self.MESSAGES - self.FIRST
        self.receiver.flow(rest)
        self.n.add("credit_granted", rest)


@record.scenario(
    "10-credit-starved",
    "1.0",
    "10 messages sent to a queue and accepted; a zero-prefetch Proton receiver grants link-credit"
    " 3, accepts the 3 transfers, then grants nothing for 2.5 s while 7 messages wait (the broker"
    " reported them as available); then it grants 7 and accepts the rest.",
    setup=(("q", {}),),
    queues=(),
)
def s10_credit_starved(ctx: record.Ctx) -> dict[str, Any]:
    """Credit starvation: a receiving link at zero credit while the sender has messages."""
    return StarvedReceiver(ctx).run()


@record.scenario(
    "091-bad-acks",
    "0-9-1",
    "Three acks of delivery tags a channel does not hold, each answered by channel.close 406"
    " PRECONDITION_FAILED: channel 1 acks tag 1 twice (a double ack); channel 3 acks tag 1,"
    " which basic.get delivered on channel 2 (the wrong channel; channel 2 then acks it); channel"
    " 4 takes tag 1 and acks it, is closed and opened again, and acks tag 1 once more (an ack"
    " after the reopen, by a client that kept the old tag).",
)
def s_bad_acks(ctx: record.Ctx) -> dict[str, Any]:
    """Unknown delivery tags, and the three usual ways of getting one."""
    import pika

    n = record.Counts()
    conn, ch, q = record.channel_with_queue(ctx, n)
    for i in range(4):
        record.publish_plain(ch, n, q, f"item {i}".encode())

    def refused(channel: Any, trigger: str) -> None:
        """The broker's close arrives after the ack: the next synchronous call raises it."""
        n.inc("queue_declares")  # passive: its channel is closed before it is answered
        try:
            channel.queue_declare(q, passive=True)
        except pika.exceptions.ChannelClosedByBroker as exc:
            n.add(
                "channel_errors",
                {
                    "channel": channel.channel_number,
                    "code": exc.reply_code,
                    "text": exc.reply_text,
                    "trigger": trigger,
                },
            )
        else:
            raise RuntimeError(f"{trigger}: the broker did not close the channel")

    method, _props, _body = ch.basic_get(q)
    n.inc("gets")
    ch.basic_ack(method.delivery_tag)
    ch.basic_ack(method.delivery_tag)
    n.inc("acks", 2)
    refused(ch, f"double ack of delivery tag {method.delivery_tag} on channel 1")

    holder = conn.channel(channel_number=2)
    other = conn.channel(channel_number=3)
    method, _props, _body = holder.basic_get(q)
    n.inc("gets")
    other.basic_ack(method.delivery_tag)
    n.inc("acks")
    refused(other, f"ack of tag {method.delivery_tag} delivered on channel 2, on channel 3")
    holder.basic_ack(method.delivery_tag)  # where it belonged
    n.inc("acks")

    first = conn.channel(channel_number=4)
    method, _props, _body = first.basic_get(q)
    n.inc("gets")
    first.basic_ack(method.delivery_tag)
    n.inc("acks")
    first.close()
    again = conn.channel(channel_number=4)
    again.basic_ack(method.delivery_tag)
    n.inc("acks")
    refused(again, f"ack of tag {method.delivery_tag} on channel 4 after it was reopened")
    n["channels_opened"] = [1, 2, 3, 4, 4]
    n["channels"] = len(n["channels_opened"])  # uses of a channel number
    holder.queue_delete(q)
    n.inc("queue_deletes")
    record.close_091(conn, n)
    return n
