"""AMQP 1.0 scenarios: an address that does not exist, a transaction, drain."""

from __future__ import annotations

from typing import Any

from proton import Receiver
from proton.handlers import TransactionHandler

from recorder.amqp10 import ProtonClient, cond_dict, queue_address, text_message
from recorder.harness import Ctx, scenario


class BadAddress(ProtonClient):
    """Two sessions, each attaching a receiver to an address RabbitMQ refuses."""

    TARGETS = ("/amq/queue/amqpscope.10-bad-address.does-not-exist", "/bogus/amqpscope")

    def __init__(self, ctx: Ctx) -> None:
        super().__init__(ctx)
        self.failed = 0

    def begin(self) -> None:
        self.conn = self.connect()
        for i, address in enumerate(self.TARGETS):
            ssn = self.conn.session()
            ssn.open()
            self.n.inc("sessions_begun")
            link = ssn.receiver(f"amqpscope-bad-address-{i}")
            link.source.address = address
            link.open()
            self.n.inc("attaches")
            self.n.add("addresses", address)

    def on_link_opened(self, event: Any) -> None:
        self.n.inc("links_attached_by_broker")

    def _one_failed(self) -> None:
        self.failed += 1
        if self.failed == len(self.TARGETS):
            self.shutdown()

    def on_session_error(self, event: Any) -> None:
        self.n.add("session_errors", cond_dict(event.session.remote_condition))
        event.session.close()
        self._one_failed()

    def on_link_error(self, event: Any) -> None:
        self.n.add(
            "link_errors",
            {"link": event.link.name, **(cond_dict(event.link.remote_condition) or {})},
        )
        event.link.close()
        self._one_failed()


@scenario(
    "10-bad-address",
    "1.0",
    "Two sessions on one connection attach receivers to addresses RabbitMQ refuses: a missing "
    "queue (/amq/queue/...does-not-exist) and an unknown address scheme (/bogus/...); the broker "
    "ends each session with an error.",
    queues=(),
)
def s10_bad_address(ctx: Ctx) -> dict[str, Any]:
    """Attach failures: the error arrives as end (session) rather than detach in RabbitMQ 3.10."""
    return BadAddress(ctx).run()


class TxAttempt(ProtonClient, TransactionHandler):
    """Try to declare a transaction on the broker's coordinator and commit it."""

    def begin(self) -> None:
        self.conn = self.connect()
        self.container.declare_transaction(self.conn, handler=self)
        self.n.inc("coordinator_attaches")
        self.n["transaction_declared"] = False

    def on_transaction_declared(self, event: Any) -> None:
        self.n["transaction_declared"] = True
        event.transaction.commit()

    def on_transaction_committed(self, event: Any) -> None:
        self.n["transaction_committed"] = True
        self.shutdown()

    def on_transaction_declare_failed(self, event: Any) -> None:
        self.n["transaction_declare_failed"] = True
        self.shutdown()


@scenario(
    "10-transaction",
    "1.0",
    "Proton declares a transaction (attach to a coordinator target, then a declare message). "
    "RabbitMQ 3.10 does not support AMQP 1.0 transactions and ends the session with "
    "amqp:not-implemented.",
    queues=(),
)
def s10_transaction(ctx: Ctx) -> dict[str, Any]:
    """Coordinator links and the broker's refusal."""
    return TxAttempt(ctx).run()


class Drain(ProtonClient):
    """Put 3 messages on a queue, then a zero-prefetch receiver issues credit 10 with drain=true."""

    MESSAGES = 3
    CREDIT = 10

    def __init__(self, ctx: Ctx) -> None:
        super().__init__(ctx, prefetch=0)
        self.sent = 0
        self.receiver: Receiver | None = None

    def begin(self) -> None:
        self.conn = self.connect()
        self.sender = self.container.create_sender(self.conn, queue_address(self.ctx))

    def on_sendable(self, event: Any) -> None:
        while event.sender.credit and self.sent < self.MESSAGES:
            event.sender.send(text_message(self.sent, "d"))
            self.sent += 1
            self.n.inc("transfers_sent")

    def on_accepted(self, event: Any) -> None:
        super().on_accepted(event)
        if self.n["sender_outcomes"]["accepted"] == self.MESSAGES:
            self.receiver = self.container.create_receiver(self.conn, queue_address(self.ctx))

    def on_link_opened(self, event: Any) -> None:
        if event.link.is_receiver:
            event.receiver.drain(self.CREDIT)
            self.n["drain_credit_issued"] = self.CREDIT

    def on_link_flow(self, event: Any) -> None:
        link = event.link
        if link.is_receiver and "drain_credit_issued" in self.n:
            self.n.inc("receiver_flow_events")
            if not link.draining() and "drain_completed" not in self.n:
                self.n["drain_completed"] = True
                self.n["credit_drained"] = link.drained()

    def on_message(self, event: Any) -> None:
        self.n.inc("transfers_received")
        self.settle_with(event.delivery, "accepted")
        if self.n["transfers_received"] == self.MESSAGES:
            # RabbitMQ 3.10 sends the drain-completing flow *before* the transfers, so
            # whether Proton reports the drain as finished depends on read batching;
            # give it a moment, then record Proton's view either way.
            self.later(1.0, self.finish)

    def finish(self) -> None:
        assert self.receiver is not None
        self.n.setdefault("drain_completed", False)
        self.n["receiver_draining_at_end"] = bool(self.receiver.draining())
        self.n["receiver_credit_at_end"] = self.receiver.credit
        self.shutdown()


@scenario(
    "10-drain",
    "1.0",
    "Three messages sent to a quorum queue and accepted; a receiver with no prefetch then sends "
    "flow link-credit=10 drain=true; the broker echoes the flow, sends a drain-completing flow "
    "(link-credit 0) and delivers the 3 messages, which are accepted.",
    setup=(("q", {"x-queue-type": "quorum"}),),
    queues=(),
)
def s10_drain(ctx: Ctx) -> dict[str, Any]:
    """Drain mode: the broker must advance delivery-count and echo a flow."""
    return Drain(ctx).run()


@scenario(
    "10-drain-classic",
    "1.0",
    "Same as 10-drain but on a classic queue: RabbitMQ 3.10.8 crashes handling the drain "
    "(function_clause in rabbit_classic_queue send_drained) and ends the session with "
    "amqp:internal-error after delivering only some of the messages.",
    setup=(("q", {}),),
    queues=(),
)
def s10_drain_classic(ctx: Ctx) -> dict[str, Any]:
    """A real broker bug: an internal-error end in the middle of deliveries."""
    return Drain(ctx).run()
