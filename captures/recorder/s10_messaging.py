"""AMQP 1.0 scenarios: send and receive, presettled, the outcomes, a large message."""

from __future__ import annotations

import hashlib
import random
from typing import Any, ClassVar

from proton import Delivery, Link, Message, Receiver
from proton.reactor import AtMostOnce

from recorder.amqp10 import ProtonClient, queue_address, text_message
from recorder.harness import Ctx, scenario


class SendThenReceive(ProtonClient):
    """Send N messages on one link, then receive them back on another (same connection)."""

    def __init__(self, ctx: Ctx, count: int, presettled: bool = False, **kw: Any) -> None:
        super().__init__(ctx, **kw)
        self.count = count
        self.presettled = presettled
        self.sent = 0
        self.received = 0
        self.receiver: Receiver | None = None

    def begin(self) -> None:
        self.conn = self.connect()
        opts = AtMostOnce() if self.presettled else None
        self.sender = self.container.create_sender(self.conn, queue_address(self.ctx), options=opts)
        if self.presettled:
            # Nothing to wait for on the sending side, so attach the receiver right away.
            self.receiver = self.container.create_receiver(
                self.conn, queue_address(self.ctx), options=opts
            )

    def on_link_opened(self, event: Any) -> None:
        role = "sender" if event.link.is_sender else "receiver"
        self.n.tally("links_attached", role)
        mode = {
            Link.SND_SETTLED: "settled",
            Link.SND_UNSETTLED: "unsettled",
            Link.SND_MIXED: "mixed",
        }
        self.n[f"{role}_remote_snd_settle_mode"] = mode.get(event.link.remote_snd_settle_mode)

    def on_sendable(self, event: Any) -> None:
        self.n.setdefault("initial_sender_credit", event.sender.credit)
        while event.sender.credit and self.sent < self.count:
            event.sender.send(text_message(self.sent, "m"))
            self.sent += 1
            self.n.inc("transfers_sent")
            if event.sender.snd_settle_mode == Link.SND_SETTLED:
                self.n.inc("sent_presettled")  # Message.send() settles at once on such links

    def on_accepted(self, event: Any) -> None:
        super().on_accepted(event)
        if self.n["sender_outcomes"]["accepted"] == self.count:
            self.receiver = self.container.create_receiver(self.conn, queue_address(self.ctx))

    def on_message(self, event: Any) -> None:
        self.received += 1
        self.n.inc("transfers_received")
        if event.delivery.settled:
            self.n.inc("received_presettled")
            event.delivery.settle()
        else:
            self.settle_with(event.delivery, "accepted")
        if self.received == self.count:
            self.shutdown()


@scenario(
    "10-send-receive",
    "1.0",
    "AMQP 1.0 via RabbitMQ's amqp1_0 plugin: one connection/session, a sender link sends 10 "
    "unsettled messages (each accepted by the broker), then a receiver link with credit 10 "
    "receives all 10 and accepts them; links detached, session ended, connection closed.",
    setup=(("q", {}),),
    queues=(),
)
def s10_send_receive(ctx: Ctx) -> dict[str, Any]:
    """Baseline 1.0 conversation: attach, flow, transfer, disposition, detach."""
    return SendThenReceive(ctx, 10).run()


@scenario(
    "10-presettled",
    "1.0",
    "Sender and receiver links both attached with snd-settle-mode=settled (Proton AtMostOnce): 10 "
    "transfers sent pre-settled, and the broker delivers them pre-settled too (no dispositions).",
    setup=(("q", {}),),
    queues=(),
)
def s10_presettled(ctx: Ctx) -> dict[str, Any]:
    """At-most-once transfers carry settled=true and never get a disposition."""
    return SendThenReceive(ctx, 10, presettled=True).run()


class Outcomes(ProtonClient):
    """Receive six messages and settle them with each outcome (one RabbitMQ 3.10 rejects)."""

    PLAN: ClassVar[dict[str, str]] = {
        "o0": "accepted",
        "o1": "rejected",
        "o2": "released",
        "o3": "accepted",
        "o4": "modified",
        "o5": "accepted",
    }

    def __init__(self, ctx: Ctx) -> None:
        super().__init__(ctx, timeout=25)
        self.sent = 0
        self.first_seen: set[str] = set()
        self.held: Delivery | None = None
        self.modified_sent = False

    def begin(self) -> None:
        self.conn = self.connect()
        self.sender = self.container.create_sender(self.conn, queue_address(self.ctx))

    def on_sendable(self, event: Any) -> None:
        while event.sender.credit and self.sent < len(self.PLAN):
            event.sender.send(text_message(self.sent, "o"))
            self.sent += 1
            self.n.inc("transfers_sent")

    def on_accepted(self, event: Any) -> None:
        super().on_accepted(event)
        if self.n["sender_outcomes"]["accepted"] == len(self.PLAN):
            self.container.create_receiver(self.conn, queue_address(self.ctx))

    def on_message(self, event: Any) -> None:
        mid = event.message.id
        self.n.inc("transfers_received")
        redelivery = mid in self.first_seen
        self.n.add(
            "deliveries",
            {
                "id": mid,
                "delivery_count": event.message.delivery_count,
                "first_acquirer": event.message.first_acquirer,
                "redelivery": redelivery,
            },
        )
        if redelivery:
            self.n.inc("redeliveries")
            self.settle_with(event.delivery, "accepted")
            if mid == "o4":
                self.shutdown()
        else:
            self.first_seen.add(mid)
            if self.PLAN[mid] == "modified":
                self.held = event.delivery  # settled last: 3.10 ends the session on modified
            else:
                self.settle_with(event.delivery, self.PLAN[mid])
            if len(self.first_seen) == len(self.PLAN):
                self.later(1.5, self.settle_held)  # give the released message time to come back
        if mid == "o2" and redelivery:
            self.settle_held()

    def settle_held(self) -> None:
        if self.held is None or self.modified_sent or len(self.first_seen) < len(self.PLAN):
            return
        self.modified_sent = True
        self.settle_with(self.held, "modified")
        self.later(3.0, self.shutdown)  # if the broker neither errors nor redelivers


@scenario(
    "10-outcomes",
    "1.0",
    "Six messages sent and accepted by the broker, then received: o0/o3/o5 accepted, o1 rejected, "
    "o2 released (redelivered and accepted), and finally o4 settled with "
    "modified(delivery-failed=true); RabbitMQ 3.10 does not support modified and ends the session "
    "with an error.",
    setup=(("q", {}),),
    queues=(),
)
def s10_outcomes(ctx: Ctx) -> dict[str, Any]:
    """Every disposition outcome type on the wire, plus the broker's reaction to each."""
    return Outcomes(ctx).run()


class LargeMessage(ProtonClient):
    """One 300 KB message through a connection whose local max-frame-size is 4096."""

    def __init__(self, ctx: Ctx) -> None:
        super().__init__(ctx)
        self.body = random.Random(10).randbytes(300_000)
        self.sent = False

    def begin(self) -> None:
        self.conn = self.connect(max_frame_size=4096)
        self.sender = self.container.create_sender(self.conn, queue_address(self.ctx))

    def opened(self, event: Any) -> None:
        self.n["local_max_frame_size"] = event.transport.max_frame_size
        self.n["remote_max_frame_size"] = event.transport.remote_max_frame_size

    def on_sendable(self, event: Any) -> None:
        if not self.sent:
            self.sent = True
            event.sender.send(
                Message(id="large-1", content_type="application/octet-stream", body=self.body)
            )
            self.n.inc("transfers_sent")
            self.n["body_size"] = len(self.body)
            self.n["body_sha256"] = hashlib.sha256(self.body).hexdigest()

    def on_accepted(self, event: Any) -> None:
        super().on_accepted(event)
        self.container.create_receiver(self.conn, queue_address(self.ctx))

    def on_message(self, event: Any) -> None:
        self.n.inc("transfers_received")
        self.n["received_body_sha256"] = hashlib.sha256(bytes(event.message.body)).hexdigest()
        self.settle_with(event.delivery, "accepted")
        self.shutdown()


@scenario(
    "10-large-message",
    "1.0",
    "Client max-frame-size 4096: a 300000-byte binary message is sent (split by the broker's "
    "larger max-frame-size) and received back split into many 4096-byte transfer frames, then "
    "accepted.",
    setup=(("q", {}),),
    queues=(),
)
def s10_large_message(ctx: Ctx) -> dict[str, Any]:
    """Multi-frame transfers (more=true) must be reassembled per delivery."""
    return LargeMessage(ctx).run()
