"""What a capture holds when it is not (all) AMQP: its TCP connections, grouped by what their
first bytes say they are (sans-IO: the dissector's connections in, counts out).

A capture with no AMQP used to print nothing (`read`) or "no findings" (`summary`); a user could
not tell an empty capture from the wrong port, a TLS session without its keys, or another
protocol. The signatures are a table (`SIGNATURES`): the first bytes a client or server sends,
and the port a protocol is known by.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Final, NamedTuple

#: HTTP/1 request methods, as a client's first bytes
HTTP_METHODS: Final = (b"GET ", b"POST ", b"PUT ", b"HEAD ", b"DELETE ", b"OPTIONS ", b"PATCH ")
#: RabbitMQ stream protocol (rabbitmq-server deps/rabbitmq_stream, PROTOCOL.adoc): a frame is a
#: 4-byte size, a 2-byte key and a 2-byte version; a client opens with PeerProperties (key 0x11)
STREAM_PEER_PROPERTIES: Final = 0x0011
STREAM_PORTS: Final = frozenset({5552, 5551})
AMQP_TLS_PORTS: Final = frozenset({5671})


class Kind(NamedTuple):
    """What one connection was: its protocol's name and the server port."""

    protocol: str
    port: int


def _port(endpoint: str) -> int:
    try:
        return int(endpoint.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        return 0


def _stream_frame(head: bytes) -> bool:
    if len(head) < 8:
        return False
    size = int.from_bytes(head[:4], "big")
    key = int.from_bytes(head[4:6], "big") & 0x7FFF
    return 4 <= size < 1 << 20 and key == STREAM_PEER_PROPERTIES and head[6:8] in (b"\0\1", b"\0\2")


def kind_of(client_head: bytes, server_head: bytes, port: int) -> str:
    """The protocol a non-AMQP connection speaks, by its first bytes (and port)."""
    if client_head.startswith(HTTP_METHODS) or server_head.startswith(b"HTTP/1."):
        return "HTTP"
    if client_head[:2] == b"\x16\x03" or server_head[:2] == b"\x16\x03":
        return "TLS"
    if _stream_frame(client_head) or (port in STREAM_PORTS and not client_head):
        return "RabbitMQ streams"
    if client_head.startswith(b"SSH-") or server_head.startswith(b"SSH-"):
        return "SSH"
    if not client_head and not server_head:
        return "no data"
    return "unknown"


def kind(conn: Any) -> Kind | None:
    """What one of the dissector's connections was (None: AMQP)."""
    if conn.is_amqp:
        return None
    codec = conn.codec
    port = _port(conn.server)
    if codec.layers:  # TLS (or WebSocket) under which no AMQP was read
        name = "TLS" if codec.layers[0].layer.name == "tls" else codec.layers[0].layer.name
        return Kind(name, port)
    head = codec.head
    return Kind(kind_of(head.get("c2s", b""), head.get("s2c", b""), port), port)


def census(connections: Any, retired: dict[Any, int] | None = None) -> dict[str, Any]:
    """The dissector's connections counted: how many, how many AMQP, and the others by
    (protocol, server port), with whether TLS on an AMQP port went undecrypted. `retired`: the
    kinds of those it forgot (`Dissector.retired_kinds`, None for AMQP), counted."""
    kinds: Counter[Kind] = Counter()
    amqp = 0
    total = 0
    for key, count in (retired or {}).items():
        total += count
        if key is None:
            amqp += count
        else:
            kinds[key] += count
    for conn in connections:
        total += 1
        key = kind(conn)
        if key is None:
            amqp += 1
        else:
            kinds[key] += 1
    others = [
        {"protocol": k.protocol, "port": k.port, "connections": n}
        for k, n in sorted(kinds.items(), key=lambda item: (-item[1], item[0]))
    ]
    return {"tcp-connections": total, "amqp-connections": amqp, "other": others}
