"""AMQP 1.0 recordings against ActiveMQ Classic (Debian's activemq 5.17, proton-j inside): a
happy path (Proton and rhea), addresses and a selector it refuses (a temporary queue it never
made, a queue the user may not use), outcomes other than accepted (and what it redelivers), a
refused login, a receiver killed holding deliveries, a drain, a dynamic node.

Why: diagnose was tuned on RabbitMQ's amqp1_0 plugin, Proton's C++ example broker and peers; an
answer must hold on every implementation, and ActiveMQ (the ancestor of Artemis, which operators
run) answers a 1.0 client its own way.

What it needs to record (not to test): Debian's activemq package, started by
`record.ensure_activemq` (captures/recorder/brokers.py) on 127.0.0.1:5678 with the AMQP transport
Debian leaves out (the jars of activemq-amqp 5.17.2 and proton-j 0.33.10 in its lib/, or their
source trees named by AMQPSCOPE_ACTIVEMQ_SRC and AMQPSCOPE_PROTON_J_SRC); a JDK (javac) to build
them; Proton (the python-qpid-proton the recorder uses) as the client, and rhea from npm (node and
npm on PATH) for 10-amq-rhea. Ground truth is what the client observed (outcomes, conditions,
delivery-counts of the messages it got), never read from the capture.
"""

from __future__ import annotations

from typing import Any, ClassVar

import recorder as record  # captures/recorder/: the harness and shared helpers
from proton import Condition
from proton.reactor import Selector
from recorder.brokers import (
    ACTIVEMQ_PORT,
    ACTIVEMQ_USER,
    activemq_version,
    ensure_activemq,
)
from recorder.s10_links import Drain

#: the error the receiver of 10-amq-outcomes puts on the delivery it rejects
REJECTION = ("amqp:precondition-failed", "amqpscope: the receiver refuses this message")
URL = f"amqp://{record.BROKER_HOST}:{ACTIVEMQ_PORT}"


def _prepare(_ctx: record.Ctx) -> None:
    ensure_activemq()


#: what every ActiveMQ scenario shares: its port captured, nothing declared beforehand (ActiveMQ
#: makes a queue when a link names it), ActiveMQ started before the capture
ACTIVEMQ: dict[str, Any] = record.own_broker(ACTIVEMQ_PORT, _prepare)
for _name in (
    "10-amq-happy",
    "10-amq-bad-address",
    "10-amq-bad-selector",
    "10-amq-outcomes",
    "10-amq-sasl-failed",
    "10-amq-killed-receiver",
    "10-amq-drain",
    "10-amq-rhea",
    "10-amq-forbidden",
    "10-amq-dynamic",
):
    record.DECODE_AS_AMQP[_name] = ACTIVEMQ_PORT


def broker() -> str:
    """The ground truth's word for the broker the recording ran against."""
    return f"ActiveMQ Classic (Debian's activemq {activemq_version()})"


class OnActiveMQ(record.ProtonClient):
    """A Proton client of ActiveMQ logging in with SASL PLAIN (user `amqpscope`)."""

    url = URL

    def __init__(self, ctx: record.Ctx, password: str = ACTIVEMQ_USER[1], **kw: Any) -> None:
        super().__init__(ctx, **kw)
        self.password = password

    def connect_plain(self) -> Any:
        return self.connect(allowed_mechs="PLAIN", user=ACTIVEMQ_USER[0], password=self.password)

    def run(self) -> record.Counts:
        n = super().run()
        n["broker"] = broker()
        return n


class SendThenSettle(OnActiveMQ):
    """Send `count` messages to a queue (unsettled), then take them back on a receiver and
    settle each as PLAN says (by body; accepted when it says nothing): what comes back again,
    and with which delivery-count, is noted."""

    PLAN: ClassVar[dict[str, str]] = {}

    def __init__(self, ctx: record.Ctx, count: int, expect: int) -> None:
        super().__init__(ctx, timeout=20)
        self.count = count
        self.expect = expect
        self.sent = 0
        self.received = 0
        self.receiver: Any = None

    def begin(self) -> None:
        self.conn = self.connect_plain()
        self.container.create_sender(self.conn, self.ctx.q())

    def on_sendable(self, event: Any) -> None:
        while event.sender.credit and self.sent < self.count:
            event.sender.send(record.text_message(self.sent, "m"))
            self.sent += 1
            self.n.inc("transfers_sent")

    def on_accepted(self, event: Any) -> None:
        super().on_accepted(event)
        if self.n["sender_outcomes"]["accepted"] == self.count:
            self.receiver = self.container.create_receiver(self.conn, self.ctx.q())

    def on_message(self, event: Any) -> None:
        self.received += 1
        self.n.inc("transfers_received")
        body = str(event.message.body)
        seen = self.n.setdefault("received", [])
        outcome = self.PLAN.get(body) if body not in [r["body"] for r in seen] else None
        seen.append({"body": body, "delivery_count": event.message.delivery_count})
        if outcome == "rejected":
            event.delivery.local.condition = Condition(*REJECTION)
            self.n.add("rejection_conditions_sent", {"condition": REJECTION[0]})
        self.settle_with(event.delivery, outcome or "accepted")
        if self.received == self.expect:
            self.shutdown()


@record.scenario(
    "10-amq-happy",
    "1.0",
    "A python-qpid-proton client against ActiveMQ Classic (Debian's activemq 5.17, its AMQP"
    f" transport on 127.0.0.1:{ACTIVEMQ_PORT}), SASL PLAIN: a sender sends 5 unsettled messages"
    " to a queue ActiveMQ makes on attach (each accepted), then a receiver (Proton's credit"
    " window) takes the 5 back and accepts each; links detached, session ended, connection"
    " closed. A happy path.",
    **ACTIVEMQ,
)
def s10_amq_happy(ctx: record.Ctx) -> dict[str, Any]:
    """ActiveMQ's happy path: attach, flow, transfer, disposition, detach."""
    return SendThenSettle(ctx, 5, 5).run()


class Outcomes(SendThenSettle):
    PLAN: ClassVar[dict[str, str]] = {
        "m message 0": "released",
        "m message 1": "modified",
        "m message 2": "rejected",
    }


@record.scenario(
    "10-amq-outcomes",
    "1.0",
    "A python-qpid-proton client against ActiveMQ Classic (SASL PLAIN): 4 messages sent to a"
    " queue (accepted); a receiver settles the first released, the second modified"
    " (delivery-failed), the third rejected with an error (amqp:precondition-failed, a text of"
    " its own), the fourth accepted. ActiveMQ sends the released"
    " one again with delivery-count 0 and the modified one with delivery-count 1 (the receiver"
    " accepts both), and never the rejected one (its dead-letter queue). The receiver rejected"
    " and released: no fault of the broker.",
    **ACTIVEMQ,
)
def s10_amq_outcomes(ctx: record.Ctx) -> dict[str, Any]:
    """Released, modified and rejected on ActiveMQ, and what it redelivers."""
    return Outcomes(ctx, 4, 6).run()


class RefusedLink(OnActiveMQ):
    """Attach one link ActiveMQ refuses; note the condition of its detach, then close."""

    def __init__(self, ctx: record.Ctx, make: Any) -> None:
        super().__init__(ctx, timeout=15)
        self.make = make

    def begin(self) -> None:
        self.conn = self.connect_plain()
        self.make(self.container, self.conn)

    def on_link_opened(self, event: Any) -> None:
        self.n.tally("links_attached", "sender" if event.link.is_sender else "receiver")

    def run(self) -> record.Counts:
        n = super().run()
        attached = n.setdefault("links_attached", {})
        for role in ("sender", "receiver"):
            attached.setdefault(role, 0)
        return n


def refused_sender(ctx: record.Ctx, address: str) -> record.Counts:
    """A sender attached to `address`, which ActiveMQ refuses; the address noted."""
    n = RefusedLink(ctx, lambda c, conn: c.create_sender(conn, address)).run()
    n["address"] = address
    return n


@record.scenario(
    "10-amq-bad-address",
    "1.0",
    "A python-qpid-proton client against ActiveMQ Classic (SASL PLAIN) attaches a sender to"
    " 'temp-queue://amqpscope-nope', a temporary queue the broker never made: ActiveMQ answers"
    " the attach with a null target and detaches the link closed with amqp:precondition-failed"
    " ('Not a broker created temp destination'); the client closes the connection. The broker"
    " refused the address.",
    **ACTIVEMQ,
)
def s10_amq_bad_address(ctx: record.Ctx) -> dict[str, Any]:
    """An address ActiveMQ refuses."""
    return refused_sender(ctx, "temp-queue://amqpscope-nope")


@record.scenario(
    "10-amq-bad-selector",
    "1.0",
    "A python-qpid-proton client against ActiveMQ Classic (SASL PLAIN) attaches a receiver to a"
    " queue with a JMS selector filter that does not parse ('a = = b'): ActiveMQ answers the"
    " attach with a null source and detaches the link closed with amqp:invalid-field (its text"
    " the selector); the client closes the connection. The broker refused the filter.",
    **ACTIVEMQ,
)
def s10_amq_bad_selector(ctx: record.Ctx) -> dict[str, Any]:
    """A filter ActiveMQ refuses."""
    selector = "a = = b"
    n = RefusedLink(
        ctx, lambda c, conn: c.create_receiver(conn, ctx.q(), options=Selector(selector))
    ).run()
    n["selector"] = selector
    return n


class WrongPassword(OnActiveMQ):
    """Log in with a wrong password; note what Proton reports, and that nothing opened."""

    def begin(self) -> None:
        self.connect_plain()

    def run(self) -> record.Counts:
        n = super().run()
        n.setdefault("connections_opened", 0)
        return n


@record.scenario(
    "10-amq-sasl-failed",
    "1.0",
    "A python-qpid-proton client against ActiveMQ Classic logs in with SASL PLAIN as"
    " 'amqpscope' with a wrong password (simpleAuthenticationPlugin): the broker answers"
    " sasl-outcome code auth and the connection never opens (Proton: amqp:unauthorized-access,"
    " 'Authentication failed [mech=PLAIN]').",
    **ACTIVEMQ,
)
def s10_amq_sasl_failed(ctx: record.Ctx) -> dict[str, Any]:
    """A refused login on ActiveMQ."""
    return WrongPassword(ctx, password="wrong-password").run()


#: the receiver 10-amq-killed-receiver kills: a process of its own that takes `count` messages
#: (credit 10), settles none, says so on stdout and waits to be killed
HOLDER = """
import json, sys, time
from proton.handlers import MessagingHandler
from proton.reactor import Container
url, user, password, address, count = sys.argv[1:6]

class Holder(MessagingHandler):
    def __init__(self):
        super().__init__(prefetch=10, auto_accept=False, auto_settle=False)
        self.got = []
    def on_start(self, event):
        conn = event.container.connect(
            url, reconnect=False, user=user, password=password, allowed_mechs="PLAIN"
        )
        event.container.create_receiver(conn, address, name="amqpscope-held")
    def on_message(self, event):
        self.got.append(str(event.message.body))
        if len(self.got) == int(count):
            print(json.dumps({"held": self.got, "at": time.time()}), flush=True)

c = Container(Holder())
c.container_id = "amqpscope-killed-receiver"
c.run()
"""


@record.scenario(
    "10-amq-killed-receiver",
    "1.0",
    "Python-qpid-proton clients against ActiveMQ Classic (SASL PLAIN), three connections: a"
    " sender sends 5 messages to a queue (each accepted); a receiver in a process of its own"
    " (credit 10) takes the 5, settles none and is killed with SIGKILL (no detach, end or close:"
    " its kernel ends the TCP connection); 1 s later a third connection's receiver takes the 5"
    " again (ActiveMQ sends them with delivery-count 1) and accepts them.",
    **ACTIVEMQ,
)
def s10_amq_killed_receiver(ctx: record.Ctx) -> dict[str, Any]:
    """A receiver killed holding unsettled deliveries, and what ActiveMQ does with them."""
    import json
    import signal
    import subprocess
    import sys
    import time

    from proton.utils import BlockingConnection

    user, password = ACTIVEMQ_USER
    login = {"user": user, "password": password, "allowed_mechs": "PLAIN"}
    n = record.Counts()
    count = 5
    conn = BlockingConnection(URL, timeout=10, **login)
    sender = conn.create_sender(ctx.q())
    for i in range(count):
        sender.send(record.text_message(i, "k"))  # returns once the broker settled it
        n.inc("transfers_sent")
        n.tally("sender_outcomes", "accepted")  # BlockingSender raises unless accepted
    conn.close()
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, URL, user, password, ctx.q(), str(count)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        held = json.loads(child.stdout.readline())
    finally:
        n["killed"] = time.time()
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
    n["killed_with"] = "SIGKILL"
    n["held_unsettled"] = held["held"]
    n["held_at"] = held["at"]
    n["transfers_received"] = len(held["held"])
    n["unsettled_at_end"] = len(held["held"])
    time.sleep(1.0)
    conn = BlockingConnection(URL, timeout=10, **login)
    receiver = conn.create_receiver(ctx.q(), credit=10)
    again = []
    for _ in range(count):
        message = receiver.receive(timeout=10)
        again.append({"body": str(message.body), "delivery_count": message.delivery_count})
        receiver.accept()
        n.inc("transfers_received")
        n.tally("receiver_outcomes", "accepted")
    conn.close()
    n["received_again"] = again
    n["connections"] = n["connections_opened"] = 3
    n["links_attached"] = {"sender": 1, "receiver": 2}
    n["broker"] = broker()
    return n


class AmqDrain(Drain):
    """10-drain's client (3 messages, then a receiver with no prefetch drains with credit 10)
    logging in to ActiveMQ, on a queue ActiveMQ makes on attach."""

    url = URL

    def begin(self) -> None:
        user, password = ACTIVEMQ_USER
        self.conn = self.connect(allowed_mechs="PLAIN", user=user, password=password)
        self.sender = self.container.create_sender(self.conn, self.ctx.q())

    def on_accepted(self, event: Any) -> None:
        record.ProtonClient.on_accepted(self, event)
        if self.n["sender_outcomes"]["accepted"] == self.MESSAGES:
            self.receiver = self.container.create_receiver(self.conn, self.ctx.q())


@record.scenario(
    "10-amq-drain",
    "1.0",
    "A python-qpid-proton client against ActiveMQ Classic (SASL PLAIN): 3 messages sent to a"
    " queue (accepted); a receiver with no prefetch then sends flow link-credit=10 drain=true;"
    " ActiveMQ sends the 3 transfers (accepted) and a flow that completes the drain (its"
    " delivery-count advanced by the unused credit, link-credit 0); the client waits 1 s and"
    " closes.",
    **ACTIVEMQ,
)
def s10_amq_drain(ctx: record.Ctx) -> dict[str, Any]:
    """A drain on ActiveMQ."""
    n = AmqDrain(ctx).run()
    n["broker"] = broker()
    return n


#: rhea, from npm, as captures/scenarios/logs.py installs it (where the recorder keeps it)
RHEA = "rhea@3.0.5"
RHEA_DIR = "amqpscope-node"


@record.scenario(
    "10-amq-rhea",
    "1.0",
    f"The rhea client ({RHEA}, npm) against ActiveMQ Classic (SASL PLAIN): a sender sends 5"
    " messages to a queue (each accepted) and detaches; a receiver (rhea's default credit"
    " window) takes the 5 back, accepts each and detaches; the client closes the connection. A"
    " happy path of another client.",
    **ACTIVEMQ,
)
def s10_amq_rhea(ctx: record.Ctx) -> dict[str, Any]:
    """ActiveMQ's happy path with rhea (node and npm on PATH)."""
    from pathlib import Path

    script = Path(__file__).resolve().parent / "rhea_activemq.js"
    user, password = ACTIVEMQ_USER
    args = [str(ACTIVEMQ_PORT), user, password, ctx.q()]
    n = record.rhea_client(RHEA, RHEA_DIR, script, args)
    n["connections"] = 1
    n["links_attached"] = {"sender": 1, "receiver": 1}
    n["broker"] = broker()
    return n


@record.scenario(
    "10-amq-forbidden",
    "1.0",
    "A python-qpid-proton client against ActiveMQ Classic logs in (SASL PLAIN, accepted) as"
    " 'amqpscope', whom ActiveMQ's authorizationPlugin lets use only the queues named"
    " amqpscope.*, and attaches a sender to the queue 'forbidden.amqpscope': ActiveMQ answers"
    " the attach with no target and detaches the link with amqp:unauthorized-access; the client"
    " closes the connection. The broker refused the user the address.",
    **ACTIVEMQ,
)
def s10_amq_forbidden(ctx: record.Ctx) -> dict[str, Any]:
    """An address the user may not use."""
    return refused_sender(ctx, "forbidden.amqpscope")


class DynamicReply(OnActiveMQ):
    """A receiver on a dynamic node (a temporary queue the broker names in its attach), then a
    sender to that name: 3 messages sent (accepted), received and accepted (a reply queue)."""

    COUNT = 3

    def __init__(self, ctx: record.Ctx) -> None:
        super().__init__(ctx, timeout=15)
        self.sent = 0

    def begin(self) -> None:
        self.conn = self.connect_plain()
        self.container.create_receiver(self.conn, None, dynamic=True)
        self.n["links_attached"] = {"sender": 0, "receiver": 0}

    def on_link_opened(self, event: Any) -> None:
        link = event.link
        self.n["links_attached"]["sender" if link.is_sender else "receiver"] += 1
        if link.is_receiver:
            address = link.remote_source.address
            self.n["dynamic_address"] = address
            self.container.create_sender(self.conn, address)

    def on_sendable(self, event: Any) -> None:
        while event.sender.credit and self.sent < self.COUNT:
            event.sender.send(record.text_message(self.sent, "reply"))
            self.sent += 1
            self.n.inc("transfers_sent")

    def on_message(self, event: Any) -> None:
        self.n.inc("transfers_received")
        self.settle_with(event.delivery, "accepted")
        if self.n["transfers_received"] == self.COUNT:
            self.shutdown()


@record.scenario(
    "10-amq-dynamic",
    "1.0",
    "A python-qpid-proton client against ActiveMQ Classic (SASL PLAIN) attaches a receiver with"
    " a dynamic source (no address): ActiveMQ makes a temporary queue and names it in its"
    " attach ('temp-queue://ID:...'); the client attaches a sender to that name, sends 3"
    " messages (accepted), receives and accepts them, and closes: a reply queue. A happy path.",
    **ACTIVEMQ,
)
def s10_amq_dynamic(ctx: record.Ctx) -> dict[str, Any]:
    """A dynamic node on ActiveMQ."""
    return DynamicReply(ctx).run()
