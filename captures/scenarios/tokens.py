"""Recordings of claims-based security and management requests, as Azure Service Bus uses them.

RabbitMQ has no `$cbs` node, so Proton is on both ends, as in `10-peer-to-peer`. The listener
answers as the Service Bus AMQP guide (`../shared/seeds/002_...txt`, "Claims-based
authorization") says the service does: a put-token request to `$cbs` is answered on the reply
link with `status-code` (401 for a token whose signature does not verify, 202 when accepted),
and "when a token expires, Service Bus promptly drops all links on the connection to the
respective entity" (a detach with `amqp:unauthorized-access`). Management requests to the
entity's `$management` node are answered the same way (410 for a lock that is gone), or, for
one, not at all. What each side did is counted from Proton's own callbacks.
"""

from __future__ import annotations

import time
from typing import Any

import recorder as record  # captures/recorder/: the harness and shared helpers
from proton import Condition, Message, symbol, timestamp

AUDIENCE = f"amqp://127.0.0.1:{record.P2P_PORT}/orders"
TOKEN_TYPE = "servicebus.windows.net:sastoken"
#: how long the accepted token lives: long enough for a few deliveries
LIFETIME = 1.5


def sas_token(signature: str, expiry: float) -> str:
    """A Service Bus SAS token's shape, with a made-up signature (nothing here checks it)."""
    return (
        f"SharedAccessSignature sr={AUDIENCE}&sig={signature}&se={int(expiry)}"
        "&skn=RootManageSharedAccessKey"
    )


class TokensAndRequests(record.ProtonPeers):
    """The client puts a bad token (refused), a good one (accepted, short-lived), receives from
    the entity until the listener drops the link when the token expires, then makes two
    management requests: one answered 410, one never answered."""

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self.replies: dict[str, Any] = {}  # listener: reply-to address -> its sending link
        self.entity_links: list[Any] = []  # listener: its sending links to the entity
        self.token_expiry = 0.0
        self.cbs_sender: Any = None
        self.mgmt_sender: Any = None
        self.step = 0

    def begin(self) -> None:
        assert self.container is not None
        self.listen()
        self.conn = self.connect(allowed_mechs="ANONYMOUS")
        self.cbs_sender = self.container.create_sender(self.conn, "$cbs")
        self.container.create_receiver(self.conn, "$cbs", name="cbs-replies")

    # -- the client --------------------------------------------------------------------------
    def on_sendable(self, event: Any) -> None:
        if not self.is_client(event.connection):
            return
        if event.sender == self.cbs_sender and self.step == 0:
            self.step = 1
            self.put_token("tok-1", "not-a-valid-signature", time.time() + 3600)

    def put_token(self, mid: str, signature: str, expiry: float) -> None:
        message = Message(
            id=mid,
            reply_to="cbs-replies",
            properties={
                "operation": "put-token",
                "type": TOKEN_TYPE,
                "name": AUDIENCE,
                "expiration": timestamp(int(expiry * 1000)),
            },
            body=sas_token(signature, expiry),
        )
        self.cbs_sender.send(message)
        self.n.add("client_put_tokens", {"id": mid, "expiration_ms": int(expiry * 1000)})

    def request(self, mid: str, operation: str) -> None:
        message = Message(
            id=mid,
            reply_to="mgmt-replies",
            properties={"operation": operation},
            body={symbol("lock-tokens"): ["8a0d4a4e-0000-4000-8000-000000000001"]},
        )
        self.mgmt_sender.send(message)
        self.n.add("client_requests", {"id": mid, "operation": operation})

    def on_message(self, event: Any) -> None:
        if not self.is_client(event.connection):
            self.listener_message(event)
            return
        message = event.message
        props = message.properties or {}
        event.delivery.update(event.delivery.ACCEPTED)
        event.delivery.settle()
        self.n.tally("receiver_outcomes", "accepted")
        if "status-code" in props:
            self.n.add(
                "client_responses",
                {
                    "correlation_id": message.correlation_id,
                    "status_code": props["status-code"],
                    "status_description": props.get("status-description"),
                },
            )
            if message.correlation_id == "tok-1":
                self.token_expiry = time.time() + LIFETIME
                self.put_token("tok-2", "a-valid-signature", self.token_expiry)
            elif message.correlation_id == "tok-2":
                assert self.container is not None
                self.container.create_receiver(self.conn, "orders", name="orders-receiver")
            return
        self.n.inc("client_entity_messages")

    def on_link_error(self, event: Any) -> None:
        """The listener dropped the entity's link: go on to the management node."""
        condition = event.link.remote_condition
        self.n.add("link_errors", {"link": event.link.name, **(record.cond_dict(condition) or {})})
        event.link.close()
        assert self.container is not None
        self.mgmt_sender = self.container.create_sender(self.conn, "orders/$management")
        self.container.create_receiver(self.conn, "orders/$management", name="mgmt-replies")
        self.later(0.3, self.manage)

    def manage(self) -> None:
        self.request("req-1", "com.microsoft:renew-lock")
        self.request("req-2", "com.microsoft:peek-message")
        self.later(0.5, self.shutdown)  # req-2 is never answered

    def on_accepted(self, event: Any) -> None:
        """Count the client's sends the listener accepted (not the listener's own)."""
        if self.is_client(event.connection):
            super().on_accepted(event)

    # -- the listener -------------------------------------------------------------------------
    def on_link_opened(self, event: Any) -> None:
        link = event.link
        if self.is_client(event.connection) or not link.is_sender:
            return
        address = link.remote_source.address
        if address == "orders":
            self.entity_links.append(link)
            self.later(0.1, lambda: self.deliver(link, 0))
            self.later(max(0.2, self.token_expiry - time.time()), lambda: self.expire(link))
        else:
            self.replies[link.remote_target.address or link.name] = link

    def deliver(self, link: Any, i: int) -> None:
        if link.state & link.LOCAL_CLOSED or i >= 3:
            return
        link.send(Message(id=f"o{i}", body=f"order {i}"))
        self.n.inc("listener_entity_messages")
        self.later(0.1, lambda: self.deliver(link, i + 1))

    def expire(self, link: Any) -> None:
        link.condition = Condition(
            "amqp:unauthorized-access",
            f"amqpscope listener: the token for {AUDIENCE} expired",
        )
        link.close()
        self.n.inc("listener_links_dropped_on_expiry")

    def listener_message(self, event: Any) -> None:
        message = event.message
        props = message.properties or {}
        operation = props.get("operation")
        event.delivery.update(event.delivery.ACCEPTED)
        event.delivery.settle()
        if operation == "put-token":
            ok = "sig=a-valid-signature" in str(message.body)
            code, text = (202, "Accepted") if ok else (401, "InvalidSignature: bad signature")
        elif operation == "com.microsoft:renew-lock":
            code, text = 410, "MessageLockLost: the lock supplied is invalid"
        else:
            self.n.add("listener_unanswered", operation)
            return
        reply = Message(
            correlation_id=message.id,
            properties={"status-code": code, "status-description": text},
            body={},  # a body section there must be; Service Bus answers with a map
        )
        self.replies[message.reply_to].send(reply)
        self.n.add("listener_answers", {"operation": operation, "status_code": code})

    def on_link_opening(self, event: Any) -> None:
        """The listener's attach names the terminus the client asked for, as a service does."""
        link = event.link
        if self.is_client(event.connection):
            return
        if link.remote_source.address:
            link.source.address = link.remote_source.address
        if link.remote_target.address:
            link.target.address = link.remote_target.address


@record.scenario(
    "10-cbs-tokens",
    "1.0",
    "No broker: a Proton listener on 127.0.0.1:5673 answers as the Service Bus guide says the"
    " service does. The client (SASL ANONYMOUS) puts a token with a bad signature on $cbs"
    " (answered 401), then a good one that expires 1.5 s later (202); it receives from 'orders'"
    " until the token expires and the listener detaches that link with amqp:unauthorized-access;"
    " then it sends two requests to orders/$management: renew-lock (answered 410) and"
    " peek-message (never answered), and closes.",
    **record.PEER_TO_PEER,
)
def s10_cbs_tokens(ctx: Any) -> dict[str, Any]:
    """Claims-based security and management requests, refused, expired and unanswered."""
    record.p2p_port_free()
    return TokensAndRequests(ctx).run()
