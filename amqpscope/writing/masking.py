"""Where a frame's credentials are in the packets that carried it, so that a cut (`read -w`,
the TUI's `w`) writes them masked: a SASL or start-ok password's bytes become `MASK`, its
encoding's head kept so that the frame still decodes; inside a WebSocket connection, masked
again under the client's masking key (RFC 6455), so that the packet stays a valid WebSocket frame
of the same length.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from amqpscope.capture.writer import MASK, Span
from amqpscope.codec.amqp091.tree import SECRET_ARGUMENTS
from amqpscope.codec.amqp10.tree import SECRET_FIELDS
from amqpscope.codec.tree import frame_tree
from amqpscope.codec.websocket import WebSocketLayer, unmask

#: the frames that may carry credentials (their trees flag which bytes: `read -x` blanks them)
SECRET_FRAMES: Final = frozenset(
    {name for name, _ in SECRET_ARGUMENTS} | {name for name, _ in SECRET_FIELDS}
)


#: the bytes before a secret's value: an AMQP 1.0 variable-width constructor's (its code and
#: size), a 0-9-1 long string's (its size); these stay, so that the masked frame still decodes
VALUE_HEADS: Final = {0xA0: 2, 0xA1: 2, 0xA3: 2, 0xB0: 5, 0xB1: 5, 0xB3: 5}
LONGSTR_HEAD: Final = 4


def value_bytes(frame: Any, node: Any) -> tuple[int, int] | None:
    """Where a secret node's value is in the frame (offset, length), its encoding's head left
    out; a node of another encoding is masked whole, as `read -x` blanks it. A PLAIN response's
    password only: its user is no secret (`read`, `summary` show it). None: no secret."""
    if not node.secret:
        return None
    head = 0
    if frame.version == "1.0" and node.offset < len(frame.data):
        head = VALUE_HEADS.get(frame.data[node.offset], 0)
    elif node.type == "longstr":
        head = LONGSTR_HEAD
    if node.length < head:
        head = 0
    start, length = node.offset + head, node.length - head
    value = frame.data[start : start + length]
    if frame.fields.get("mechanism") == "PLAIN" and value.count(b"\0") == 2:
        # `authzid \0 user \0 password`: the user stays, as every output shows it
        password = value.rindex(b"\0") + 1
        return start + password, length - password
    return start, length


def secret_spans(frame: Any, layers: Sequence[Any] = ()) -> dict[int, list[Span]]:
    """Where `frame`'s credentials are, per packet that carried them (`Frame.carriers`).
    `layers`: its connection's (`ConnectionCodec.layers`), when its AMQP is wrapped."""
    found = [value_bytes(frame, node) for root in frame_tree(frame) for node in root.walk()]
    secrets = [span for span in found if span is not None]
    if layers:
        return websocket_spans(frame, secrets, layers)
    carriers = frame.carriers or ()
    last = len(carriers) - 1
    out: dict[int, list[Span]] = {}
    for i, (packet, offset, length, _) in enumerate(carriers):
        where = "any" if last == 0 else "end" if i == 0 else "start" if i == last else "whole"
        chunk = frame.data[offset : offset + length]
        for start, size in secrets:
            first, stop = max(start, offset), min(start + size, offset + length)
            if first < stop:
                out.setdefault(packet, []).append(Span(chunk, first - offset, stop - first, where))
    return out


def websocket_spans(
    frame: Any, secrets: list[tuple[int, int]], layers: Sequence[Any]
) -> dict[int, list[Span]]:
    """Where `frame`'s credentials are in the packets of a WebSocket connection: the client's
    frames are XOR-masked (RFC 6455), which hides nothing, so the password's bytes are found on
    the wire through the layer's pieces (`WebSocketLayer.wire`) and become MASK under the same
    masking key: the packet stays a valid WebSocket frame of the same length. Inside TLS the
    packets carry ciphertext (nothing to mask); a deflated message has no byte-for-byte place."""
    layer = layers[0].layer if len(layers) == 1 else None
    carriers = frame.carriers or ()
    if not isinstance(layer, WebSocketLayer) or not carriers or not secrets:
        return {}
    origin = carriers[0][3] - carriers[0][1]  # the frame's first byte in the AMQP stream
    out: dict[int, list[Span]] = {}
    for packet, _, length, at in carriers:
        for piece in layer.wire(at, at + length):
            low, high = max(at, piece.start), min(at + length, piece.start + piece.length)
            if low >= high:
                continue
            skip = low - piece.start
            plain = frame.data[low - origin : high - origin]
            chunk = _on_wire(plain, piece.key, piece.phase + skip)
            for start, size in secrets:
                first, stop = max(origin + start, low), min(origin + start + size, high)
                if first < stop:
                    fill = bytes([MASK]) * (stop - first)
                    fill = _on_wire(fill, piece.key, piece.phase + skip + first - low)
                    span = Span(chunk, first - low, stop - first, "tail", fill, piece.tail - skip)
                    out.setdefault(packet, []).append(span)
    return out


def _on_wire(data: bytes, key: bytes | None, phase: int) -> bytes:
    """Payload bytes as a WebSocket frame with masking `key` carries them from byte `phase`."""
    return unmask(data, key, phase) if key is not None else bytes(data)
