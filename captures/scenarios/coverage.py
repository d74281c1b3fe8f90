"""Recordings of diagnoses no other capture shows (issue 40 item 14): a consumer the broker
cancels, a connection the broker closes (320 CONNECTION_FORCED), a client that stops the
broker's content (channel.flow active=false, which RabbitMQ 3.x refuses with 540), and the 1.0
link rules broken by a client (handle in use, a transfer from the receiving end, a handle above
handle-max) against a Proton listener, which closes the last connection with an error; and a
1.0 session window the receiving client keeps shut (incoming-window 1) for 1.5 s, which Proton,
the sender, respects (one transfer, then none until the client's flow re-opens it).

Ground truth is the client's: pika's callbacks and exceptions (the cancelled consumer's tag, the
reply code and text pika was given), the frames the 1.0 client wrote and the listener's answers as
Proton decodes them; never read from the capture.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any, ClassVar

import pika
import pika.exceptions
import recorder as record  # captures/recorder/: the harness and shared helpers
from proton import Data, Described, Message, symbol, uint, ulong
from proton.handlers import MessagingHandler
from proton.reactor import Container


def _connection_pid(name: str, timeout: float = 10.0) -> str:
    """The broker's pid of the connection whose client named itself `name`
    (rabbitmqctl list_connections, as an operator finds it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        listed = record.run_cmd(
            ["rabbitmqctl", "-q", "list_connections", "pid", "client_properties"]
        ).stdout
        for line in listed.splitlines():
            if f'"{name}"' in line or f'<<"{name}">>' in line:
                return line.split()[0]
        time.sleep(0.2)
    raise RuntimeError(f"rabbitmqctl does not list the connection {name!r}")


@record.scenario(
    "091-broker-cancel-and-close",
    "0-9-1",
    "A consumer (manual acks) on a queue that a second connection deletes: RabbitMQ cancels"
    " the consumer (basic.cancel, consumer_cancel_notify); then an operator closes the"
    " consumer's connection (rabbitmqctl close_connection): connection.close 320"
    " CONNECTION_FORCED with the operator's reason, which pika raises as"
    " ConnectionClosedByBroker. The second connection closes normally.",
)
def s_broker_cancel_and_close(ctx: record.Ctx) -> dict[str, Any]:
    """consumer.cancelled and close.connection (320), as pika's callbacks saw them."""
    n = record.Counts()
    name = f"amqpscope {ctx.name}"
    conn, ch, q = record.channel_with_queue(ctx, n)
    cancelled: list[str] = []
    got: list[int] = []

    def on_message(chan: Any, method: Any, _props: Any, _body: bytes) -> None:
        got.append(method.delivery_tag)
        n.inc("deliveries")
        chan.basic_ack(method.delivery_tag)
        n.inc("acks")

    tag = ch.basic_consume(q, on_message)
    n.inc("consumers")
    ch.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.consumer_tag))
    record.publish_plain(ch, n, q, b"before the delete")
    record.pump(conn, lambda: len(got) == 1)
    other = record.connect_091(ctx, n, name=f"{name} (deleter)")
    other_ch = other.channel()
    n.inc("channels")
    other_ch.queue_delete(q)
    n.inc("queue_deletes")
    record.pump(conn, lambda: bool(cancelled))
    n["cancelled_by_broker"] = {"consumer_tag": cancelled[0], "ours": cancelled[0] == tag}
    reason = "amqpscope: an operator closed this connection"
    pid = _connection_pid(name)
    record.run_cmd(["rabbitmqctl", "close_connection", pid, reason])
    try:
        record.pump(conn, lambda: False, timeout=10)
    except pika.exceptions.ConnectionClosedByBroker as closed:
        n["closed_by_broker"] = {"reply_code": closed.reply_code, "reply_text": closed.reply_text}
    record.close_091(other, n)
    return n


@record.scenario(
    "091-flow-refused",
    "0-9-1",
    "A consumer (prefetch 1, manual acks) gets one of 3 messages, then asks RabbitMQ to stop its"
    " content with channel.flow active=false (pika's channel.flow): RabbitMQ 3.x does not"
    " implement a client's active=false and closes the connection with 540 NOT_IMPLEMENTED,"
    " which pika raises as ConnectionClosedByBroker. (garagemq, which honours it, hung on"
    " queue.declare when this was recorded.)",
)
def s_flow_refused(ctx: record.Ctx) -> dict[str, Any]:
    """consumer.flow-stopped (the client's channel.flow active=false) and close.connection (540)."""
    n = record.Counts()
    conn, ch, q = record.channel_with_queue(ctx, n)
    ch.basic_qos(prefetch_count=1)
    n["prefetch_count"] = 1
    for i in range(3):
        record.publish_plain(ch, n, q, f"flow {i}".encode(), message_id=f"f{i}")
    got: list[int] = []

    def on_message(_chan: Any, method: Any, _props: Any, _body: bytes) -> None:
        got.append(method.delivery_tag)
        n.inc("deliveries")

    ch.basic_consume(q, on_message)
    n.inc("consumers")
    record.pump(conn, lambda: len(got) == 1)
    try:
        ch.flow(False)
        n["flow_ok"] = True
    except pika.exceptions.ConnectionClosedByBroker as closed:
        n["closed_by_broker"] = {"reply_code": closed.reply_code, "reply_text": closed.reply_text}
    n["unacked_when_closed"] = len(got)
    # the queue outlived its connection: deleted by the recorder's housekeeping, uncaptured
    return n


# --------------------------------------------------------------------------
# AMQP 1.0: a client that breaks the link rules, against a Proton listener
# --------------------------------------------------------------------------
#
# No library sends these frames (each checks its own handles and roles), so the client here is
# a socket writing frames that python-qpid-proton's Data encodes, and reading the listener's with
# the same Data; the listener is Proton's reactor, whose answers are its own.


def _performative(code: int, fields: list[Any]) -> bytes:
    data = Data()
    data.put_object(Described(ulong(code), fields))
    return bytes(data.encode())


def _frame(body: bytes, channel: int = 0, kind: int = 0) -> bytes:
    return struct.pack(">IBBH", 8 + len(body), 2, kind, channel) + body


class _RawClient:
    """One connection from a socket: SASL ANONYMOUS, open, begin, then what the scenario
    writes; every frame the listener sends is decoded by Proton and kept as (name, fields)."""

    NAMES: ClassVar[dict[int, str]] = {
        **{0x10: "open", 0x11: "begin", 0x12: "attach", 0x13: "flow", 0x14: "transfer"},
        **{0x15: "disposition", 0x16: "detach", 0x17: "end", 0x18: "close"},
    }

    def __init__(self) -> None:
        self.sock = socket.create_connection(("127.0.0.1", record.P2P_PORT), timeout=5)
        self.buffer = b""
        self.received: list[tuple[str, Any]] = []
        self.times: list[float] = []  # beside each of `received`: when it was read (monotonic)

    def _read(self, size: int) -> bytes:
        while len(self.buffer) < size:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError
            self.buffer += chunk
        out, self.buffer = self.buffer[:size], self.buffer[size:]
        return out

    def _frame_in(self) -> Any:
        size, doff, _kind, _channel = struct.unpack(">IBBH", self._read(8))
        body = self._read(size - 8)[doff * 4 - 8 :]
        if not body:
            return None  # an empty frame
        data = Data()
        data.decode(body)
        return data.get_object()

    def send(self, code: int, fields: list[Any], payload: bytes = b"", kind: int = 0) -> None:
        self.sock.sendall(_frame(_performative(code, fields) + payload, kind=kind))

    def start(self, window: int = 100) -> None:
        """Handshake to a begun session whose begin states incoming-window `window`."""
        header = b"AMQP\x03\x01\x00\x00"
        self.sock.sendall(header)
        assert self._read(8) == header
        self._frame_in()  # sasl-mechanisms
        self.send(0x41, [symbol("ANONYMOUS")], kind=1)
        outcome = self._frame_in()
        assert outcome.value[0] == 0, outcome  # sasl-outcome ok
        header = b"AMQP\x00\x01\x00\x00"
        self.sock.sendall(header)
        assert self._read(8) == header
        self.send(0x10, ["amqpscope-raw-client", "127.0.0.1"])
        self.send(0x11, [None, uint(0), uint(window), uint(100)])
        self.listen(0.5)

    def listen(self, seconds: float) -> None:
        """Keep what the listener sends for `seconds` (or until it hangs up)."""
        deadline = time.monotonic() + seconds
        self.sock.settimeout(0.1)
        try:
            while time.monotonic() < deadline:
                try:
                    got = self._frame_in()
                except TimeoutError:
                    continue
                if got is not None:
                    name = self.NAMES.get(int(got.descriptor), str(got.descriptor))
                    self.received.append((name, got.value))
                    self.times.append(time.monotonic())
        except (EOFError, ConnectionResetError):
            self.received.append(("eof", None))
            self.times.append(time.monotonic())
        finally:
            self.sock.settimeout(5)

    def closed_with(self) -> Any:
        """The listener's close: its error's condition and description, or None."""
        for name, fields in self.received:
            if name == "close":
                error = fields[0] if fields else None
                return None if error is None else [str(error.value[0]), error.value[1]]
        return "no close"

    def close(self) -> None:
        if not any(name in ("close", "eof") for name, _ in self.received):
            self.send(0x18, [])
            self.listen(0.5)
        self.sock.close()


class _Listener(MessagingHandler):
    """Proton's reactor on P2P_PORT: it answers every attach and keeps what it reports."""

    def __init__(self, n: record.Counts) -> None:
        super().__init__()
        self.n = n
        self.listening = threading.Event()
        self.outbox: list[str] = []  # bodies its senders send while they have credit

    def on_sendable(self, event: Any) -> None:
        while self.outbox and event.sender.credit > 0:
            event.sender.send(Message(body=self.outbox.pop(0)))
            self.n.inc("listener_sent")

    def on_start(self, event: Any) -> None:
        self.acceptor = event.container.listen(f"127.0.0.1:{record.P2P_PORT}")
        self.listening.set()  # (no probe connection to see it listen: it would be captured)

    def on_message(self, event: Any) -> None:
        self.n.add("listener_messages", event.message.body)

    def on_transport_error(self, event: Any) -> None:
        cond = event.transport.condition
        self.n.add("listener_transport_errors", [cond.name, cond.description])


def _source(address: str) -> Described:
    return Described(ulong(0x28), [address])


def _target(address: str) -> Described:
    return Described(ulong(0x29), [address])


@contextlib.contextmanager
def _listening(n: record.Counts, outbox: list[str] | None = None) -> Iterator[_Listener]:
    """The Proton listener on 5673 in a thread of its own (`outbox`: the bodies it sends), for
    the raw client to break rules against; stopped when the scenario is done."""
    record.p2p_port_free()
    listener = _Listener(n)
    listener.outbox = outbox or []
    container = Container(listener)
    thread = threading.Thread(target=container.run, daemon=True)
    thread.start()
    if not listener.listening.wait(10):
        raise RuntimeError("the Proton listener did not listen")
    time.sleep(0.2)
    try:
        yield listener
    finally:
        container.stop()
        thread.join(5)


@record.scenario(
    "10-link-violations",
    "1.0",
    "No broker: a Proton listener (python-qpid-proton's reactor) on 127.0.0.1:5673 and a client"
    " that is a socket writing frames Proton's Data encodes, in three connections, each after"
    " SASL ANONYMOUS, open and begin: (1) attaches link 'a' and then link 'b' on the same handle"
    " 0 with no detach between (handle-in-use); (2) attaches link 'r' as the receiver, then"
    " sends a transfer on it (a transfer from the receiving end); (3) attaches on handle"
    " 2147483648, above the listener's handle-max 2147483647, which Proton answers by closing"
    " the connection with amqp:connection:framing-error. No library sends such frames.",
    **record.PEER_TO_PEER,
)
def s10_link_violations(ctx: record.Ctx) -> dict[str, Any]:
    """amqp10.handle-in-use, wrong-role and handle-over-max, and a 1.0 close with an error."""
    n = record.Counts()
    with _listening(n):
        in_use = _RawClient()
        in_use.start()
        for name, address in (("a", "q1"), ("b", "q2")):  # a sender's attach, both on handle 0
            in_use.send(0x12, [name, uint(0), False, None, None, _source(name), _target(address)])
        in_use.listen(0.5)
        in_use.close()
        n["handle_in_use"] = {
            "attached_on_handle_0": ["a", "b"],
            "listener_attaches": [f[0] for name, f in in_use.received if name == "attach"],
            "listener_closed_with": in_use.closed_with(),
        }
        role = _RawClient()
        role.start()
        role.send(0x12, ["r", uint(0), True, None, None, _source("q"), _target("r")])
        role.listen(0.5)
        message = Message(id="wrong-role", body="from the receiving end").encode()
        role.send(0x14, [uint(0), uint(0), b"t0", uint(0), False], payload=message)
        role.listen(0.5)
        role.close()
        n["wrong_role"] = {
            "receiver_link": "r",
            "transfers_sent_from_receiver": 1,
            "listener_roles": [f[2] for name, f in role.received if name == "attach"],
            "listener_closed_with": role.closed_with(),
        }
        over = _RawClient()
        over.start()
        over.send(0x12, ["o", uint(2**31), False, None, None, _source("o"), _target("q")])
        over.listen(1.0)
        over.close()
        n["handle_over_max"] = {
            "handle": 2**31,
            "listener_handle_max": 2**31 - 1,
            "listener_closed_with": over.closed_with(),
        }
        n["connections"] = 3
        # the connections whose open the listener answered (all three: SASL ANONYMOUS, open and
        # begin went through before each broke its rule)
        opened = [any(name == "open" for name, _ in c.received) for c in (in_use, role, over)]
        n["connections_opened"] = sum(opened)
        # the wrong-role transfer was sent unsettled and the listener never settled it
        answered = [name for name, _ in role.received if name == "disposition"]
        n["unsettled_at_end"] = 0 if answered else 1
    return n


@record.scenario(
    "10-session-window",
    "1.0",
    "No broker: the Proton listener (python-qpid-proton's reactor) on 127.0.0.1:5673 with 4"
    " messages to send, and the raw socket client: its begin states incoming-window 1, it"
    " attaches a receiver link to node 'w' and grants link-credit 10. Proton, as the sender,"
    " sends 1 transfer into the window of 1 and stops; the client waits 1.5 s, then sends a"
    " session flow re-opening its window (next-incoming-id advanced by 1, incoming-window 10),"
    " Proton sends the other 3; the client settles all 4 (accepted) and closes.",
    **record.PEER_TO_PEER,
)
def s10_session_window(ctx: record.Ctx) -> dict[str, Any]:
    """session.window-closed: the receiving client's session window shut for ~1.5 s."""
    n = record.Counts()
    with _listening(n, [f"windowed {i}" for i in range(4)]):
        client = _RawClient()
        client.start(window=1)
        begins = [f for name, f in client.received if name == "begin"]
        first_id = int(begins[0][1])  # the listener's initial next-outgoing-id
        client.send(0x12, ["w", uint(0), True, None, None, _source("w"), _target("r")])
        client.send(
            0x13,
            [uint(first_id), uint(1), uint(0), uint(100), uint(0), uint(0), uint(10)],
        )
        deadline = time.monotonic() + 5
        while not any(name == "transfer" for name, _ in client.received):
            if time.monotonic() > deadline:
                raise RuntimeError("the listener sent no transfer")
            client.listen(0.02)
        # the first transfer was read: the window of 1 is used
        shut_at = client.times[[name for name, _ in client.received].index("transfer")]
        client.listen(1.5 - (time.monotonic() - shut_at))
        before_reopen = sum(1 for name, _ in client.received if name == "transfer")
        client.send(0x13, [uint(first_id + before_reopen), uint(10), uint(0), uint(100)])
        reopened_at = time.monotonic()
        client.listen(0.5)
        transfers = [f for name, f in client.received if name == "transfer"]
        ids = [int(f[1]) for f in transfers]
        if ids:  # accepted, settled: delivery-ids first..last in one disposition
            accepted = Described(ulong(0x24), [])
            client.send(0x15, [True, uint(min(ids)), uint(max(ids)), True, accepted])
        client.send(0x16, [uint(0), True])
        client.listen(0.3)
        client.close()
        n["session_window"] = {
            "client_incoming_window": 1,
            "link_credit": 10,
            "transfers_before_reopen": before_reopen,
            "transfers_after_reopen": len(transfers) - before_reopen,
            # the client's clock, from reading the first transfer to writing the flow
            "shut_seconds": round(reopened_at - shut_at, 6),
            "reopen_next_incoming_id": first_id + before_reopen,
            "reopen_incoming_window": 10,
            "delivery_ids": ids,
        }
        n["connections"] = 1
        n["connections_opened"] = int(any(name == "open" for name, _ in client.received))
        n["links_attached"] = {"sender": 0, "receiver": 1}
        n["transfers_received"] = len(transfers)
        n["receiver_outcomes"] = {"accepted": len(ids)} if ids else {}
    return n
