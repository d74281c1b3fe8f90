"""AMQP 1.0 helpers over Qpid Proton: `ProtonClient`, the base of every Proton scenario, the
messages and addresses they use, and the two ends of a peer-to-peer run (`ProtonPeers`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from proton import Condition, Connection, Delivery, Endpoint, Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

from recorder.harness import BROKER_HOST, BROKER_PORT, P2P_PORT, SASL_OUTCOMES, Counts, Ctx


def cond_dict(cond: Condition | None) -> dict[str, Any] | None:
    """A Proton error condition as plain JSON."""
    if cond is None:
        return None
    return {"condition": str(cond.name), "description": cond.description}


class _Call:
    """Timer handler that just calls a function (Proton dispatches on_timer_task)."""

    def __init__(self, fn: Callable[[], None]) -> None:
        self.fn = fn

    def on_timer_task(self, _event: Any) -> None:
        self.fn()


class ProtonClient(MessagingHandler):
    """Bookkeeping shared by the AMQP 1.0 scenarios.

    Why: every scenario must report what Proton observed (opens, SASL result,
    outcomes, error conditions) and must never hang, so this base class
    records those events in `self.n`, owns a deadline timer and offers an
    orderly shutdown (detach links, end sessions, close connection).
    """

    url = f"amqp://{BROKER_HOST}:{BROKER_PORT}"

    def __init__(self, ctx: Ctx, timeout: float = 20.0, **kw: Any) -> None:
        kw.setdefault("auto_accept", False)
        super().__init__(**kw)
        self.ctx = ctx
        self.n = Counts()
        self.timeout = timeout
        self.container: Container | None = None
        self.conns: list[Connection] = []
        self.timers: list[Any] = []
        self.failure: str | None = None

    def run(self) -> Counts:
        """Run the reactor to completion and return the counts (raise on timeout)."""
        container = Container(self)
        container.container_id = f"amqpscope-{self.ctx.name}"
        container.run()
        if self.failure:
            raise RuntimeError(f"{self.failure}; observed so far: {json.dumps(self.n)}")
        return self.n

    def begin(self) -> None:
        """Scenario-specific start; subclasses open connections and links here."""
        raise NotImplementedError

    def on_start(self, event: Any) -> None:
        self.container = event.container
        self.later(self.timeout, self._deadline)
        self.begin()

    def later(self, delay: float, fn: Callable[[], None]) -> None:
        """Schedule `fn` on the reactor; cancelled automatically at shutdown."""
        assert self.container is not None
        self.timers.append(self.container.schedule(delay, _Call(fn)))

    def _deadline(self) -> None:
        self.failure = f"scenario did not finish within {self.timeout}s"
        self.shutdown()

    def connect(self, url: str | None = None, **kw: Any) -> Connection:
        """Open a counted client connection (no reconnect: failures must stay failures)."""
        assert self.container is not None
        conn = self.container.connect(url or self.url, reconnect=False, **kw)
        self.conns.append(conn)
        self.n.inc("connections")
        return conn

    def is_client(self, conn: Connection) -> bool:
        """Proton rewraps objects per event, so compare with == rather than `is`."""
        return any(conn == c for c in self.conns)

    def shutdown(self) -> None:
        """Detach open links, end sessions, close connections, cancel timers."""
        for task in self.timers:
            task.cancel()
        self.timers.clear()
        for conn in self.conns:
            if conn.state & Endpoint.LOCAL_CLOSED:
                continue
            link = conn.link_head(Endpoint.LOCAL_ACTIVE)
            while link:
                nxt = link.next(Endpoint.LOCAL_ACTIVE)
                link.close()
                link = nxt
            ssn = conn.session_head(Endpoint.LOCAL_ACTIVE)
            while ssn:
                nxt = ssn.next(Endpoint.LOCAL_ACTIVE)
                ssn.close()
                ssn = nxt
            conn.close()

    def settle_with(
        self,
        dlv: Delivery,
        outcome: str,
        undeliverable: bool = False,
        key: str = "receiver_outcomes",
    ) -> None:
        """Settle an incoming delivery with the given outcome and count it under `key`."""
        if outcome == "accepted":
            dlv.update(Delivery.ACCEPTED)
        elif outcome == "rejected":
            dlv.update(Delivery.REJECTED)
        elif outcome == "released":
            dlv.update(Delivery.RELEASED)
        elif outcome == "modified":
            dlv.local.failed = True
            dlv.local.undeliverable = undeliverable
            dlv.update(Delivery.MODIFIED)
        else:
            raise ValueError(outcome)
        dlv.settle()
        self.n.tally(key, outcome)

    # --- events recorded for every scenario ---------------------------------

    def on_connection_opened(self, event: Any) -> None:
        if not self.is_client(event.connection):
            return
        self.n.inc("connections_opened")
        sasl = event.transport.sasl()
        self.n["sasl_mechanism"] = sasl.mech
        self.n["sasl_outcome"] = SASL_OUTCOMES.get(sasl.outcome, sasl.outcome)
        self.n["remote_container_id"] = event.connection.remote_container
        self.opened(event)

    def opened(self, event: Any) -> None:
        """Hook for scenarios that act once the connection is open."""

    def on_transport_error(self, event: Any) -> None:
        self.n.add("transport_errors", cond_dict(event.transport.condition))
        sasl = event.transport.sasl()
        if sasl.outcome is not None:
            self.n["sasl_outcome"] = SASL_OUTCOMES.get(sasl.outcome, sasl.outcome)
        for task in self.timers:
            task.cancel()
        super().on_transport_error(event)

    def on_connection_error(self, event: Any) -> None:
        self.n.add("connection_errors", cond_dict(event.connection.remote_condition))
        self.shutdown()

    def on_session_error(self, event: Any) -> None:
        self.n.add("session_errors", cond_dict(event.session.remote_condition))
        self.shutdown()

    def on_link_error(self, event: Any) -> None:
        self.n.add(
            "link_errors",
            {"link": event.link.name, **(cond_dict(event.link.remote_condition) or {})},
        )
        self.shutdown()

    def on_accepted(self, event: Any) -> None:
        self.n.tally("sender_outcomes", "accepted")

    def on_rejected(self, event: Any) -> None:
        self.n.tally("sender_outcomes", "rejected")
        if event.delivery.remote.condition:
            self.n.add("rejection_conditions", cond_dict(event.delivery.remote.condition))

    def on_released(self, event: Any) -> None:
        # Proton reports both released and modified here; tell them apart.
        if event.delivery.remote_state == Delivery.MODIFIED:
            self.n.tally("sender_outcomes", "modified")
        else:
            self.n.tally("sender_outcomes", "released")


def queue_address(ctx: Ctx, suffix: str = "q") -> str:
    """RabbitMQ 3.x amqp1_0 address of an existing queue."""
    return f"/amq/queue/{ctx.q(suffix)}"


def text_message(i: int, prefix: str) -> Message:
    """A message with a few properties set, so decoders see more than a bare body."""
    return Message(
        id=f"{prefix}{i}",
        subject="amqpscope",
        content_type="text/plain",
        properties={"index": i},
        body=f"{prefix} message {i}",
    )


class ProtonPeers(ProtonClient):
    """A Proton listener on P2P_PORT and a Proton client in one reactor: the listener's open
    names it, and it stops listening once its connection closed (so the reactor finishes)."""

    url = f"amqp://127.0.0.1:{P2P_PORT}"

    def __init__(self, ctx: Ctx, **kw: Any) -> None:
        super().__init__(ctx, **kw)
        self.acceptor: Any = None

    def listen(self) -> None:
        assert self.container is not None
        self.acceptor = self.container.listen(f"127.0.0.1:{P2P_PORT}")

    def on_connection_opening(self, event: Any) -> None:
        # Dispatched before Proton opens the accepted connection, so the id goes into its open.
        event.connection.container = f"amqpscope-{self.ctx.name}-listener"

    def on_connection_closed(self, event: Any) -> None:
        if not self.is_client(event.connection) and self.acceptor is not None:
            self.acceptor.close()  # last connection gone: let the reactor finish


class PeerToPeer(ProtonPeers):
    """A Proton listener and client in one reactor; the listener settles with mixed outcomes."""

    COUNT = 10
    CYCLE = ("accepted", "rejected", "released", "modified")

    def __init__(self, ctx: Ctx) -> None:
        super().__init__(ctx)
        self.sent = 0
        self.outcomes_seen = 0

    def begin(self) -> None:
        self.listen()
        self.conn = self.connect()
        self.sender = self.container.create_sender(self.conn, "amqpscope/peer-to-peer")

    def on_sendable(self, event: Any) -> None:
        while event.sender.credit and self.sent < self.COUNT:
            event.sender.send(text_message(self.sent, "p"))
            self.sent += 1
            self.n.inc("transfers_sent")

    def on_message(self, event: Any) -> None:
        # Only the listener side receives.
        self.n.inc("listener_transfers_received")
        i = int(event.message.id[1:])
        outcome = self.CYCLE[i % len(self.CYCLE)]
        dlv = event.delivery
        if outcome == "rejected":
            dlv.local.condition = Condition(
                "amqp:precondition-failed", f"amqpscope listener rejects p{i}"
            )
        if outcome == "modified" and i == 7:
            dlv.local.annotations = {"x-opt-amqpscope": "retry-elsewhere"}
        self.settle_with(dlv, outcome, undeliverable=(i == 7), key="listener_outcomes")

    def _count_outcome(self) -> None:
        self.outcomes_seen += 1
        if self.outcomes_seen == self.COUNT:
            self.shutdown()

    def on_accepted(self, event: Any) -> None:
        super().on_accepted(event)
        self._count_outcome()

    def on_rejected(self, event: Any) -> None:
        super().on_rejected(event)
        self._count_outcome()

    def on_released(self, event: Any) -> None:
        super().on_released(event)
        remote = event.delivery.remote
        if event.delivery.remote_state == Delivery.MODIFIED:
            self.n.add(
                "modified_details",
                {
                    "delivery_failed": remote.failed,
                    "undeliverable_here": remote.undeliverable,
                    "message_annotations": remote.annotations,
                },
            )
        self._count_outcome()

    def on_connection_opening(self, event: Any) -> None:
        super().on_connection_opening(event)
        self.n.inc("listener_connections_accepted")
