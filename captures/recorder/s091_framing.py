"""AMQP 0-9-1 scenarios about what surrounds the frames: a bad protocol header, 0-8 headers, a
capture started mid-stream, link layers (Linux cooked v1 and v2), pcapng, nanosecond
timestamps, IPv6."""

from __future__ import annotations

import socket
import struct
from typing import Any

from recorder.amqp091 import (
    basic_round_trip,
    channel_with_queue,
    delete_and_close,
    publish_plain,
    pump,
)
from recorder.harness import BROKER_HOST, BROKER_PORT, CaptureSpec, Counts, Ctx, scenario


@scenario(
    "091-bad-header",
    "0-9-1",
    "Two raw TCP connections to 5672 that are not valid AMQP 0-9-1 openings: an HTTP request and "
    "an AMQP 0-10 protocol header. RabbitMQ answers each with its own AMQP 0-9-1 protocol header "
    "and drops the connection (the client saw a TCP reset both times).",
    queues=(),
)
def s_bad_header(ctx: Ctx) -> dict[str, Any]:
    """Protocol-header negotiation failures are a real thing analyzers see."""
    n = Counts()
    for label, payload in (
        ("http-request", b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"),
        ("amqp-0-10-header", b"AMQP\x01\x01\x00\x0a"),
    ):
        sock = socket.create_connection((BROKER_HOST, BROKER_PORT), timeout=5)
        n.inc("connections")
        sock.sendall(payload)
        data, how = b"", "eof"
        try:
            while chunk := sock.recv(4096):
                data += chunk
        except ConnectionResetError:
            how = "reset"
        sock.close()
        n.add(
            "exchanges",
            {
                "sent": label,
                "sent_bytes": len(payload),
                "received_hex": data.hex(),
                "closed_by_broker_with": how,
            },
        )
        if data.startswith(b"AMQP"):
            n.inc("protocol_header_replies")
    return n


@scenario(
    "091-legacy-headers",
    "0-8/0-9",
    "Two raw TCP connections open with the AMQP 0-8 header (AMQP 1 1 8 0) and the AMQP 0-9 header "
    "(AMQP 1 1 0 9); RabbitMQ still speaks both and answers with a connection.start carrying that "
    "version, after which the client just closes the socket.",
    queues=(),
)
def s_legacy_headers(ctx: Ctx) -> dict[str, Any]:
    """Older dialects must be named as such, not decoded as 0-9-1."""
    n = Counts()
    for label, header in (("0-8", b"AMQP\x01\x01\x08\x00"), ("0-9", b"AMQP\x01\x01\x00\x09")):
        with socket.create_connection((BROKER_HOST, BROKER_PORT), timeout=5) as sock:
            n.inc("connections")
            sock.sendall(header)
            data = b""
            # One whole frame: 7-byte header, payload, frame-end octet.
            while len(data) < 7 or len(data) < 8 + struct.unpack(">I", data[3:7])[0]:
                chunk = sock.recv(4096)
                if not chunk:
                    raise RuntimeError(f"broker closed the {label} connection early")
                data += chunk
            ftype, channel, size = struct.unpack(">BHI", data[:7])
            class_id, method_id, major, minor = struct.unpack(">HHBB", data[7:13])
            n.add(
                "replies",
                {
                    "sent": label,
                    "frame_type": ftype,
                    "channel": channel,
                    "frame_size": size,
                    "class_id": class_id,
                    "method_id": method_id,
                    "version_major": major,
                    "version_minor": minor,
                },
            )
            n.inc("connection_starts_received")
    return n


@scenario(
    "mid-stream",
    "0-9-1",
    "A consumer connection is opened and 3 messages are published/consumed BEFORE tcpdump starts; "
    "then the capture starts and 3 more messages are published, delivered to the already running "
    "consumer and acked, the consumer cancelled, the queue deleted and the connection closed.",
    manual_capture=True,
)
def s_mid_stream(ctx: Ctx) -> dict[str, Any]:
    """The analyzer must resync on a connection whose handshake it never saw."""
    before, n = Counts(), Counts()
    conn, ch, q = channel_with_queue(ctx, before)
    counter = [before]

    def on_message(chan: Any, method: Any, _props: Any, _body: bytes) -> None:
        counter[0].inc("deliveries")
        chan.basic_ack(method.delivery_tag)
        counter[0].inc("acks")
        counter[0].add("delivery_tags", method.delivery_tag)

    tag = ch.basic_consume(q, on_message)
    before.inc("consumers")
    for i in range(3):
        publish_plain(ch, before, q, f"before capture {i}".encode())
    pump(conn, lambda: before.get("acks", 0) >= 3)
    ctx.capture.start()
    counter[0] = n
    n["connections_established_before_capture"] = 1
    for i in range(3):
        publish_plain(ch, n, q, f"during capture {i}".encode())
    pump(conn, lambda: n.get("acks", 0) >= 3)
    ch.basic_cancel(tag)
    n.inc("cancels")
    delete_and_close(conn, ch, n, q)
    n["before_capture"] = dict(before)
    return n


@scenario(
    "linux-cooked",
    "0-9-1",
    "3-message publish/consume/ack round trip recorded with `tcpdump -i any` (Linux cooked v2, "
    "SLL2).",
    capture=CaptureSpec(interface="any"),
)
def s_linux_cooked(ctx: Ctx) -> dict[str, Any]:
    """Reader test: LINUX_SLL2 link-layer headers."""
    return basic_round_trip(ctx)


@scenario(
    "linux-cooked-v1",
    "0-9-1",
    "3-message publish/consume/ack round trip recorded with `tcpdump -i any -y LINUX_SLL` "
    "(Linux cooked v1, SLL).",
    capture=CaptureSpec(interface="any", extra=("-y", "LINUX_SLL")),
)
def s_linux_cooked_v1(ctx: Ctx) -> dict[str, Any]:
    """Reader test: LINUX_SLL link-layer headers."""
    return basic_round_trip(ctx)


@scenario(
    "pcapng",
    "0-9-1",
    "3-message publish/consume/ack round trip recorded with dumpcap into a pcapng file.",
    capture=CaptureSpec(tool="dumpcap", ext="pcapng"),
)
def s_pcapng(ctx: Ctx) -> dict[str, Any]:
    """Reader test: pcapng blocks (SHB/IDB/EPB, plus dumpcap's statistics block)."""
    return basic_round_trip(ctx)


@scenario(
    "nanosecond",
    "0-9-1",
    "3-message publish/consume/ack round trip recorded with --time-stamp-precision=nano "
    "(pcap magic a1b23c4d).",
    capture=CaptureSpec(extra=("--time-stamp-precision=nano",)),
)
def s_nanosecond(ctx: Ctx) -> dict[str, Any]:
    """Reader test: nanosecond-resolution classic pcap."""
    return basic_round_trip(ctx)


@scenario(
    "ipv6",
    "0-9-1",
    "3-message publish/consume/ack round trip with pika connected to [::1]:5672, so every packet "
    "is IPv6.",
)
def s_ipv6(ctx: Ctx) -> dict[str, Any]:
    """Reader test: IPv6 headers and addresses in connection keys."""
    return basic_round_trip(ctx, host="::1")
