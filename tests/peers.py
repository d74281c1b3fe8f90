"""Independent encoders for tests: real AMQP bytes from Qpid Proton and pika, no sockets.

Proton's engine runs both ends of a 1.0 connection in memory (two transports pumped into each
other), so the bytes are what Proton really sends. pika's frame classes marshal 0-9-1 frames.
Neither shares code with amqpscope, which is the point.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import pika.frame
import pika.spec
import proton
from proton import Connection, Message, Transport


@dataclass
class Conversation:
    """Bytes each side sent, in order, as a list of (direction, chunk) writes."""

    writes: list[tuple[str, bytes]] = field(default_factory=list)

    def stream(self, direction: str) -> bytes:
        return b"".join(chunk for d, chunk in self.writes if d == direction)


class ProtonPair:
    """A Proton client and server wired back to back; `pump()` moves bytes until both are idle."""

    def __init__(self, sasl: str | None = None, max_frame: int | None = None) -> None:
        self.client = Connection()
        self.client.container = "amqpscope-test-client"
        self.client_transport = Transport()
        if max_frame:
            self.client_transport.max_frame_size = max_frame
        self.server_transport = Transport(Transport.SERVER)
        if max_frame:
            self.server_transport.max_frame_size = max_frame
        if sasl:
            client_sasl = self.client_transport.sasl()
            client_sasl.allowed_mechs(sasl)
            if sasl == "PLAIN":
                self.client.user = "guest"
                self.client.password = "secret-password"
            self.server_sasl = self.server_transport.sasl()
            self.server_sasl.allowed_mechs(sasl)
            self.server_sasl.allow_insecure_mechs = True
            client_sasl.allow_insecure_mechs = True
        self.client_transport.bind(self.client)
        self.server = Connection()
        self.server.container = "amqpscope-test-server"
        self.server_transport.bind(self.server)
        self.conversation = Conversation()
        self.sasl = sasl

    def authenticate(self) -> None:
        """Let SASL run. Proton's built-in server (no Cyrus) answers ANONYMOUS by itself; it
        offers no PLAIN, which the recorded broker captures cover instead."""
        self.pump()

    def pump(self) -> None:
        moved = True
        while moved:
            moved = False
            for src, dst, direction in (
                (self.client_transport, self.server_transport, "c2s"),
                (self.server_transport, self.client_transport, "s2c"),
            ):
                pending = src.pending()
                if pending > 0:
                    chunk = src.peek(pending)
                    src.pop(pending)
                    self.conversation.writes.append((direction, chunk))
                    dst.push(chunk)
                    moved = True


def open_link(pair: ProtonPair, name: str, credit: int) -> tuple[proton.Sender, proton.Receiver]:
    """Open the connection (SASL as `pair` says), begin a session and attach a sender `name` to
    `queue-a` on the client, and its receiver on the server, which grants `credit`; pumped.
    Returns (sender, receiver)."""
    pair.client.open()
    session = pair.client.session()
    session.open()
    sender = session.sender(name)
    sender.target.address = "queue-a"
    sender.open()
    pair.authenticate()
    pair.server.open()
    server_session = pair.server.session_head(0)
    server_session.open()
    receiver = pair.server.link_head(0)
    receiver.target.copy(receiver.remote_target)
    receiver.open()
    receiver.flow(credit)
    pair.pump()
    return sender, receiver


def proton_conversation(
    messages: int = 3, body_size: int = 10, max_frame: int | None = None, sasl: str | None = None
) -> Conversation:
    """Open, begin, attach both ends, send `messages` unsettled messages, settle them with
    accepted/rejected/released in turn, a drain flow, detach, end, close."""
    pair = ProtonPair(sasl=sasl, max_frame=max_frame)
    sender, receiver = open_link(pair, "amqpscope-sender", messages + 2)
    for i in range(messages):
        delivery = sender.delivery(f"tag-{i}".encode())
        sender.send(Message(body="x" * body_size).encode())
        sender.advance()
        del delivery
    pair.pump()
    outcomes = (proton.Delivery.ACCEPTED, proton.Delivery.REJECTED, proton.Delivery.RELEASED)
    index = 0
    while (delivery := receiver.current) is not None:
        receiver.recv(delivery.pending)
        receiver.advance()
        delivery.update(outcomes[index % len(outcomes)])
        delivery.settle()
        index += 1
    receiver.drain(0)
    pair.pump()
    sender.close()
    pair.pump()
    receiver.close()
    receiver.session.close()
    pair.pump()
    sender.session.close()
    pair.client.close()
    pair.pump()
    pair.server.close()
    pair.pump()
    return pair.conversation


def pika_name(method: pika.amqp_object.Method) -> str:
    """pika's `Basic.GetOk` as the spec spells it: `basic.get-ok`."""
    klass, name = method.NAME.split(".")
    hyphenated = re.sub(r"(?<!^)([A-Z])", r"-\1", name).lower()
    return f"{klass.lower()}.{hyphenated}"


#: the methods content follows (0-9-1 spec, section 4.2.6)
CONTENT_METHODS = ("basic.publish", "basic.deliver", "basic.get-ok", "basic.return")


def pika_methods() -> list[pika.amqp_object.Method]:
    """One default instance of every method pika's spec module knows."""
    out = []
    for klass in vars(pika.spec).values():
        if isinstance(klass, type) and issubclass(klass, pika.amqp_object.Class):
            for member in vars(klass).values():
                if isinstance(member, type) and issubclass(member, pika.amqp_object.Method):
                    try:
                        method = member()
                    except TypeError:  # required arguments without defaults
                        method = member(*[b"x"] * (member.__init__.__code__.co_argcount - 1))
                    for name, value in vars(method).items():
                        if value is None:  # pika refuses to encode an unset argument
                            setattr(method, name, _filler(method, name))
                    out.append(method)
    return out


def _filler(method: pika.amqp_object.Method, name: str) -> object:
    """A value pika will encode for an argument left unset, chosen by the argument's name."""
    if name.endswith(("properties", "arguments")):
        return {}
    if name.endswith(("_id", "_code", "_count", "_size", "_max", "ticket", "heartbeat")) or (
        name == "delivery_tag"
    ):
        return 1
    return "x"


def pika_frames(
    methods: list[pika.amqp_object.Method], channel: int = 1, body: bytes = b"hello"
) -> list[tuple[str, bytes]]:
    """Marshalled frames, (expected name, bytes): each method, with a header and a body after
    methods that carry content."""
    out: list[tuple[str, bytes]] = []
    for method in methods:
        out.append((pika_name(method), pika.frame.Method(channel, method).marshal()))
        if pika_name(method) in CONTENT_METHODS:
            props = pika.spec.BasicProperties(content_type="text/plain", delivery_mode=2)
            out.append(("content-header", pika.frame.Header(channel, len(body), props).marshal()))
            out.append(("content-body", pika.frame.Body(channel, body).marshal()))
    return out


def heartbeat_091() -> bytes:
    return pika.frame.Heartbeat().marshal()


def protocol_header_091() -> bytes:
    return pika.frame.ProtocolHeader().marshal()


def chunked(data: bytes, cut: Callable[[int], int]) -> list[bytes]:
    """`data` cut into chunks whose sizes `cut(i)` gives (at least 1 byte each)."""
    out, pos, i = [], 0, 0
    while pos < len(data):
        size = max(1, cut(i))
        out.append(data[pos : pos + size])
        pos += size
        i += 1
    return out
