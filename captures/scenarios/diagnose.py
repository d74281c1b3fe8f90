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

import recorder as record  # captures/recorder/: the harness and shared helpers

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
    record.delete_and_close(conn, ch, n, q)
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
        events["at"] = time.time()
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
    record.delete_and_close(conn, ch, n, q)
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
    record.delete_and_close(conn, holder, n, q)
    return n


#: publisher confirms: how many publishes a queue limited to MAX_LENGTH is sent, how long the
#: alarm that delays one confirm lasts, and how long a blocked publisher waits before it gives up
PUBLISHES = 5
MAX_LENGTH = 2
SLOW_CONFIRM_SECONDS = 1.5
GIVE_UP_SECONDS = 2.0


def _confirmed_publish(ch: Any, n: record.Counts, q: str, seq: int) -> dict[str, Any]:
    """One publish in confirm mode, pika waiting for its confirm: what the client saw of it
    (its sequence number, the outcome, when it was sent and answered by the client's clock)."""
    import pika

    sent = time.time()
    try:
        record.publish_plain(ch, n, q, f"payment {seq}".encode(), message_id=f"p{seq}")
        outcome = "acked"
    except pika.exceptions.NackError:
        n.inc("publishes")  # sent (publish_plain counts only what returned)
        outcome = "nacked"
    answered = time.time()
    n.inc(f"confirms_{outcome}")
    return {
        "seq": seq,
        "routing_key": q,
        "outcome": outcome,
        "sent": sent,
        "answered": answered,
        "seconds": round(answered - sent, 6),
    }


def _block(conn: Any, n: record.Counts, q: str, blocked: dict[str, Any]) -> None:
    """Raise a memory alarm and get this connection blocked: RabbitMQ blocks a connection (and
    sends connection.blocked) when it publishes during an alarm, so a channel without confirms
    publishes once; from then on the broker reads nothing more from the connection."""
    record.run_cmd(["rabbitmqctl", "set_vm_memory_high_watermark", "0.0001"])
    trigger = conn.channel()
    n.inc("channels")
    record.publish_plain(trigger, n, q, b"during the alarm")
    record.pump(conn, lambda: "at" in blocked)


@record.scenario(
    "091-nacked-publish",
    "0-9-1",
    f"A queue declared with x-max-length={MAX_LENGTH} and x-overflow=reject-publish; a"
    f" publisher in confirm mode publishes {PUBLISHES} messages one by one, waiting for each"
    f" confirm: the broker acks the first {MAX_LENGTH} and nacks the rest (basic.nack).",
)
def s_nacked_publish(ctx: record.Ctx) -> dict[str, Any]:
    """Publisher confirms nacked by the broker, each as pika reported it."""
    n = record.Counts()
    conn = record.connect_091(ctx, n)
    ch = conn.channel()
    n.inc("channels")
    q = ctx.q()
    arguments = {"x-max-length": MAX_LENGTH, "x-overflow": "reject-publish"}
    ch.queue_declare(q, arguments=arguments)
    n.inc("queue_declares")
    n["queue_arguments"] = arguments
    ch.confirm_delivery()
    n.inc("confirm_selects")
    n["confirms"] = [_confirmed_publish(ch, n, q, seq) for seq in range(1, PUBLISHES + 1)]
    n["nacked_seqs"] = [c["seq"] for c in n["confirms"] if c["outcome"] == "nacked"]
    record.delete_and_close(conn, ch, n, q)
    return n


@record.scenario(
    "091-slow-confirm",
    "0-9-1",
    f"A publisher in confirm mode publishes 10 messages, each confirmed at once; then a memory"
    " alarm (set_vm_memory_high_watermark 0.0001) is raised and a publish on a second channel"
    " (no confirms) gets the connection blocked; it publishes one more on the first, and the"
    f" alarm is lifted by a rabbitmqctl started {SLOW_CONFIRM_SECONDS} s later (it takes seconds"
    " more): that confirm comes late; 10 more publishes are confirmed at once.",
)
def s_slow_confirm(ctx: record.Ctx) -> dict[str, Any]:
    """A confirm-latency outlier: one confirm held back by a short resource alarm."""
    import threading

    n = record.Counts()
    conn, ch, q = record.channel_with_queue(ctx, n)
    blocked: dict[str, float] = {}
    conn.add_on_connection_blocked_callback(lambda *_: blocked.setdefault("at", time.time()))
    ch.confirm_delivery()
    n.inc("confirm_selects")
    confirms = [_confirmed_publish(ch, n, q, seq) for seq in range(1, 11)]
    original = _watermark()
    lifted: dict[str, float] = {}

    def lift() -> None:
        record.run_cmd(["rabbitmqctl", "set_vm_memory_high_watermark", original])
        lifted["at"] = time.time()

    timer = threading.Timer(SLOW_CONFIRM_SECONDS, lift)
    try:
        _block(conn, n, q, blocked)
        timer.start()
        confirms.append(_confirmed_publish(ch, n, q, 11))  # answered once the alarm is lifted
    finally:
        if timer.is_alive():
            timer.join()
        if "at" not in lifted:
            timer.cancel()
            lift()
    confirms += [_confirmed_publish(ch, n, q, seq) for seq in range(12, 22)]
    slow = confirms[10]
    n["confirms"] = confirms
    n["slow_confirm"] = slow
    n["alarm"] = {"blocked_at": blocked["at"], "lifted_at": lifted["at"]}
    n["watermark_restored"] = original
    record.delete_and_close(conn, ch, n, q)
    return n


#: the broker's relative watermark before 091-unconfirmed-publish set its alarm, for its cleanup
_LEFT_ON: dict[str, str] = {}


def _lift_left_alarm(_ctx: record.Ctx) -> None:
    if "watermark" in _LEFT_ON:
        record.run_cmd(["rabbitmqctl", "set_vm_memory_high_watermark", _LEFT_ON.pop("watermark")])


@record.scenario(
    "091-unconfirmed-publish",
    "0-9-1",
    "A publisher in confirm mode publishes 2 messages, both confirmed; a memory alarm"
    " (set_vm_memory_high_watermark 0.0001) is raised and a publish on a second channel (no"
    " confirms) gets its connection blocked; it publishes 3 more in confirm mode, which"
    " the broker does not read while blocked; pika's blocked_connection_timeout of"
    f" {GIVE_UP_SECONDS} s expires and it drops the TCP connection without connection.close."
    " The alarm is lifted only after the capture stopped, so no late confirm is recorded.",
    cleanup=_lift_left_alarm,
    timeout=90.0,
)
def s_unconfirmed_publish(ctx: record.Ctx) -> dict[str, Any]:
    """Publishes never confirmed: the publisher gave up on a blocked broker."""
    import pika

    n = record.Counts()
    params = record.pika_params(name=f"amqpscope {ctx.name}")
    params.blocked_connection_timeout = GIVE_UP_SECONDS
    conn = pika.BlockingConnection(params)
    n.inc("connections")
    ch = conn.channel()
    n.inc("channels")
    q = ctx.q()
    ch.queue_declare(q)
    n.inc("queue_declares")
    events: dict[str, Any] = {}

    def on_blocked(_conn: Any, method: Any) -> None:
        events["at"] = time.time()
        events["reason"] = method.method.reason

    conn.add_on_connection_blocked_callback(on_blocked)
    ch.confirm_delivery()
    n.inc("confirm_selects")
    confirms = [_confirmed_publish(ch, n, q, seq) for seq in (1, 2)]
    _LEFT_ON["watermark"] = _watermark()
    _block(conn, n, q, events)
    pending = []
    for seq in (3, 4):  # sent without waiting (pika's channel under the blocking one)
        pending.append({"seq": seq, "routing_key": q, "sent": time.time()})
        ch._impl.basic_publish("", q, f"payment {seq}".encode(), pika.BasicProperties())
        n.inc("publishes")
    conn.process_data_events(time_limit=0)
    pending.append({"seq": 5, "routing_key": q, "sent": time.time()})
    try:
        record.publish_plain(ch, n, q, b"payment 5")  # waits for a confirm that never comes
    except (pika.exceptions.ConnectionBlockedTimeout, pika.exceptions.StreamLostError) as exc:
        gave_up = time.time()
        n.inc("publishes")
        events["error"] = type(exc).__name__
    else:
        raise RuntimeError("the blocked publish was confirmed")
    n["confirms"] = confirms
    n["unconfirmed"] = pending
    n["gave_up"] = {
        "at": gave_up,
        "error": events["error"],
        "oldest_seconds": round(gave_up - pending[0]["sent"], 6),
    }
    n["blocked"] = {"reason": events["reason"], "at": events["at"]}
    n["connection_closes"] = 0
    return n


#: the messages the redelivery scenarios put on their queue: (message-id or None, body); one
#: without an id, so that a redelivery is also linked by its body
REDELIVERED = (("r0", "refund 0"), ("r1", "refund 1"), (None, "refund 2"))
HOLD_SECONDS = 1.0


def delivery_091(consumer: str, method: Any, props: Any, body: bytes) -> dict[str, Any]:
    """What the redelivery scenario's ground truth notes of each delivery a consumer got
    (pika's Basic.Deliver and properties), stamped with the callback's time."""
    return {
        "consumer": consumer,
        "delivery_tag": method.delivery_tag,
        "redelivered": method.redelivered,
        "message_id": props.message_id,
        "body": body.decode(),
        "at": time.time(),
    }


@record.scenario(
    "091-redelivered",
    "0-9-1",
    "3 messages published (two with a message-id, one without); consumer A (prefetch 3) gets"
    f" all three, holds them unacked for {HOLD_SECONDS} s, cancels and closes its channel; the"
    " broker requeues them and consumer B, on a second connection, gets them again"
    " (redelivered) and acks them.",
)
def s_redelivered(ctx: record.Ctx) -> dict[str, Any]:
    """0-9-1 redelivery after a consumer's channel closed with unacked messages."""
    n = record.Counts()
    conn, ch, q = record.channel_with_queue(ctx, n)
    for message_id, body in REDELIVERED:
        props = {"message_id": message_id} if message_id else {}
        record.publish_plain(ch, n, q, body.encode(), **props)
    first = conn.channel()
    n.inc("channels")
    first.basic_qos(prefetch_count=len(REDELIVERED))
    got: list[dict[str, Any]] = []

    def on_first(_chan: Any, method: Any, props: Any, body: bytes) -> None:
        got.append(delivery_091("A", method, props, body))
        n.inc("deliveries")

    tag_a = first.basic_consume(q, on_first)
    n.inc("consumers")
    record.pump(conn, lambda: len(got) == len(REDELIVERED))
    time.sleep(HOLD_SECONDS)  # nothing acked; the frames wait in the socket
    first.basic_cancel(tag_a)  # a consumer shutting down: cancel, then close the channel
    n.inc("cancels")
    closed = time.time()
    first.close()  # the broker requeues the three unacked messages
    n["channel_a"] = {"number": first.channel_number, "closed": closed}
    n["unacked_when_closed"] = len(got)
    n["oldest_unacked_seconds"] = round(closed - got[0]["at"], 6)
    second_conn = record.connect_091(ctx, n, name=f"amqpscope {ctx.name} B")
    second = second_conn.channel()
    n.inc("channels")
    again: list[dict[str, Any]] = []

    def on_second(chan: Any, method: Any, props: Any, body: bytes) -> None:
        again.append(delivery_091("B", method, props, body))
        n.inc("deliveries")
        chan.basic_ack(method.delivery_tag)
        n.inc("acks")

    tag = second.basic_consume(q, on_second)
    n.inc("consumers")
    record.pump(second_conn, lambda: len(again) == len(REDELIVERED))
    second.basic_cancel(tag)
    n.inc("cancels")
    n["deliveries_log"] = got + again
    n["redeliveries"] = sum(1 for d in again if d["redelivered"])
    second.queue_delete(q)
    n.inc("queue_deletes")
    record.close_091(second_conn, n)
    record.close_091(conn, n)
    return n


class DetachedUnsettled(record.ProtonClient):
    """3 messages sent to a queue; receiver A, on a session of its own, takes them (credit 3),
    settles none, and after HOLD_SECONDS detaches and ends its session; receiver B, on the
    first session, gets them again, noting the header RabbitMQ gives each, and accepts them.
    (RabbitMQ 3.10 requeues a detached link's unsettled messages only when its session ends: a
    second receiver on the same session got nothing for 19 s after the detach.)"""

    def __init__(self, ctx: record.Ctx) -> None:
        super().__init__(ctx, prefetch=0)
        self.sent = 0
        self.first: Any = None
        self.first_session: Any = None
        self.second: Any = None
        self.log: list[dict[str, Any]] = []

    def begin(self) -> None:
        self.conn = self.connect()
        self.sender = self.container.create_sender(self.conn, record.queue_address(self.ctx))

    def on_sendable(self, event: Any) -> None:
        from proton import Message

        while event.sender.credit and self.sent < len(REDELIVERED):
            message_id, body = REDELIVERED[self.sent]
            event.sender.send(Message(id=message_id, body=body, content_type="text/plain"))
            self.sent += 1
            self.n.inc("transfers_sent")

    def on_accepted(self, event: Any) -> None:
        super().on_accepted(event)
        if self.n["sender_outcomes"]["accepted"] == len(REDELIVERED):
            self.first_session = self.conn.session()
            self.first_session.open()
            self.first = self.container.create_receiver(
                self.first_session, record.queue_address(self.ctx), name="amqpscope-first"
            )

    def on_link_opened(self, event: Any) -> None:
        if event.link.is_receiver:
            event.receiver.flow(len(REDELIVERED))
            self.n.add("credit_granted", len(REDELIVERED))

    def on_message(self, event: Any) -> None:
        message = event.message
        which = "A" if event.receiver.name == "amqpscope-first" else "B"
        self.n.inc("transfers_received")
        self.log.append(
            {
                "receiver": which,
                "link": event.receiver.name,
                "message_id": message.id,
                "body": message.body,
                "delivery_count": message.delivery_count,
                "first_acquirer": message.first_acquirer,
                "at": time.time(),
            }
        )
        if which == "A":
            if sum(1 for d in self.log if d["receiver"] == "A") == len(REDELIVERED):
                self.later(HOLD_SECONDS, self.detach_first)
            return  # never settled
        self.settle_with(event.delivery, "accepted")
        if sum(1 for d in self.log if d["receiver"] == "B") == len(REDELIVERED):
            self.n["deliveries"] = self.log
            self.n["redeliveries"] = sum(
                1 for d in self.log if d["receiver"] == "B" and not d["first_acquirer"]
            )
            self.shutdown()

    def detach_first(self) -> None:
        self.n["first_detached"] = {"at": time.time(), "unsettled": len(REDELIVERED)}
        self.first.close()  # detach closed=true with its 3 deliveries unsettled
        self.first_session.close()  # end: RabbitMQ requeues them now
        self.second = self.container.create_receiver(
            self.conn, record.queue_address(self.ctx), name="amqpscope-second"
        )


@record.scenario(
    "10-redelivered",
    "1.0",
    "3 messages sent to a queue and accepted (two with a message-id, one without); receiver"
    " 'amqpscope-first', on a second session, takes all three with credit 3, settles none,"
    f" and after {HOLD_SECONDS} s detaches and ends its session (RabbitMQ requeues them only"
    " then); receiver 'amqpscope-second', on the first session, gets them again (RabbitMQ"
    " marks them first-acquirer false) and accepts them.",
    setup=(("q", {}),),
    queues=(),
)
def s10_redelivered(ctx: record.Ctx) -> dict[str, Any]:
    """1.0 redelivery: a receiver left its deliveries unsettled, a second one gets them."""
    return DetachedUnsettled(ctx).run()
