"""The detail tree of one frame (`read -V`): every field with its value, type and bytes.

A slow, second decoding of the frames a user looks at, apart from the fast decoders (which keep
no offsets): `codec/amqp10/tree.py` and `codec/amqp091/tree.py` walk a frame's bytes as the spec
nests them and say, for each field, where it is in the frame. Values are JSON-ready, as the
frame record has them; a secret (a password, a token) is flagged so that renderers hide its
value and its bytes unless secrets are shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

#: what a secret's value reads as unless secrets are shown (the frame record's word)
REDACTED: Final = "<redacted>"  # what a hidden secret reads as, everywhere
#: layer names as the tree shows them
LAYER_NAMES = {"tls": "TLS", "websocket": "WebSocket"}


@dataclass(slots=True)
class Node:
    """One field: its name, value (None for a container), AMQP type or constructor, the offset
    and length of its bytes within the frame, and what it holds."""

    name: str
    value: Any = None
    type: str = ""
    offset: int = 0
    length: int = 0
    children: list[Node] = field(default_factory=list)
    secret: bool = False
    #: a message body's bytes (a 1.0 body section or continued delivery, a 0-9-1 content body):
    #: what --redact-bodies drops (`redact_bodies`)
    body: bool = False

    def add(self, child: Node) -> Node:
        self.children.append(child)
        return child

    def to_json(self, show_secrets: bool = False) -> dict[str, Any]:
        """The node as `read --json -V` writes it (the frame schema's `tree`)."""
        hidden = self.secret and not show_secrets
        out: dict[str, Any] = {
            "name": self.name,
            "value": REDACTED if hidden else self.value,
            "type": self.type,
            "offset": self.offset,
            "length": self.length,
        }
        if self.children and not hidden:
            out["children"] = [c.to_json(show_secrets) for c in self.children]
        return out

    def walk(self) -> list[Node]:
        """This node and every node under it, depth first."""
        out = [self]
        for child in self.children:
            out.extend(child.walk())
        return out

    def secrets(self) -> list[tuple[int, int]]:
        """(offset, length) of every secret under this node, for a hex dump to blank."""
        return [(n.offset, n.length) for n in self.walk() if n.secret]


def redact_bodies(nodes: list[Node]) -> list[tuple[int, int]]:
    """--redact-bodies on a tree: every body node's value becomes `<redacted, N bytes>` and
    what is under it goes; returns their (offset, length) spans, for a hex dump to blank. The
    frame record drops bodies the same way (`codec.body`)."""
    spans: list[tuple[int, int]] = []
    for root in nodes:
        for node in root.walk():
            if node.body:
                node.value, node.children = f"<redacted, {node.length} bytes>", []
                spans.append((node.offset, node.length))
    return spans


def frame_tree(
    frame: Any, layers: tuple[tuple[str, dict[str, Any]], ...] = (), continues: bool = False
) -> list[Node]:
    """The tree of a frame record: where it was (frame, packet, time; TCP endpoints; the
    layers its bytes came through: `layers`, (name, what the layer knows) outermost first, as
    the connection's codec has them), then the AMQP frame, decoded by its version's tree
    module. `continues`: a 1.0 transfer that continues a delivery (`amqp10.tree.DeliveryStarts`
    says which)."""
    where = Node(f"Frame {frame.number}", None, "record", 0, len(frame.data))
    where.add(Node("packet", frame.packet, "record"))
    where.add(Node("time", frame.ts, "record"))
    where.add(Node("connection", frame.conn, "record"))
    where.add(Node("direction", frame.direction, "record"))
    tcp = Node("TCP", f"{frame.src} → {frame.dst}", "record")
    tcp.add(Node("source", frame.src, "record"))
    tcp.add(Node("destination", frame.dst, "record"))
    out = [where, tcp]
    for name, info in layers:
        layer = Node(LAYER_NAMES.get(name, name), None, "layer")
        for key, value in info.items():
            if value is not None:
                layer.add(Node(key, value, "layer"))
        out.append(layer)
    # the frame's place in the byte stream that carried it: TCP's, or the innermost layer's
    carriers = getattr(frame, "carriers", None)
    if carriers:
        stream = out[-1]
        stream.add(Node("stream offset", carriers[0][3], "record"))
        if len(carriers) > 1:  # reassembled: which packet brought which of its bytes
            segments = stream.add(Node("segments", len(carriers), "record"))
            for packet, offset, length, _ in carriers:
                span = f"bytes {offset}-{offset + length - 1}"
                segments.add(Node(f"packet {packet}", span, "record"))
    if not frame.data or frame.kind in ("transport", "layer"):
        return out  # a record of no AMQP frame: a TCP end, a TLS or WebSocket layer's
    if frame.version == "1.0":
        from amqpscope.codec.amqp10 import tree as amqp10_tree

        out.append(amqp10_tree.amqp_tree(frame.data, frame.kind, frame.version, continues))
    elif frame.version.startswith("0-"):
        from amqpscope.codec.amqp091 import tree as amqp091_tree

        out.append(amqp091_tree.amqp_tree(frame.data, frame.kind, frame.version))
    return out
