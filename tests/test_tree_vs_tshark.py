"""The detail tree (`read -V`) against Wireshark's: every field tshark's PDML shows has a node
at the same bytes (`pos`, `size`), and the values agree, on every bundled capture, both versions.

Wireshark marks a field's bytes in one of a few ways, and the comparison accepts each for the
node it fits: the whole encoding (constructor, size prefix and data), or only the data after a
1.0 constructor and size prefix, or a 0-9-1 string without its length prefix (Wireshark does
both, field by field), a 0-9-1 table without its 4-byte length, a table entry from its type tag
(without its name). Where Wireshark is wrong, a test below shows it.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from amqpscope.capture.files import open_capture
from amqpscope.codec.amqp10 import spec as spec10
from amqpscope.codec.amqp10.tree import DeliveryStarts
from amqpscope.codec.tree import Node, frame_tree
from amqpscope.dissect import Dissector
from tests.oracle import TSHARK, pdml
from tests.test_amqp10_vs_tshark import ARGUMENTS, ours, tshark_pdus, wire_value
from tests.test_vs_tshark import amqp_ports

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
FILES = sorted(p for p in CAPTURES.iterdir() if p.suffix in (".pcap", ".pcapng"))
pytestmark = [
    pytest.mark.tshark,
    pytest.mark.skipif(TSHARK is None, reason="tshark is not installed (make test installs it)"),
]
#: Wireshark's own numbering (the n-th publish on a channel), not bytes of the frame
GENERATED = frozenset({"amqp.method.arguments.publish_number"})
#: the errors Wireshark raises when it reads a delivery's continuation frame as a new message
MISREAD = ("amqp.unknown.amqp_type", "amqp.invalid.params_number")


def spans(frame: Any, root: Node) -> dict[tuple[int, int], list[Node]]:
    """(offset, length) -> the nodes whose bytes those are, in each way Wireshark marks them."""
    data = frame.data
    out: dict[tuple[int, int], list[Node]] = {}

    def add(offset: int, length: int, node: Node) -> None:
        out.setdefault((offset, length), []).append(node)

    def visit(node: Node, parent: Node | None) -> None:
        add(node.offset, node.length, node)
        if frame.version == "1.0":
            enc = spec10.ENCODINGS.get(data[node.offset]) if node.length else None
            if enc is not None and node.type.endswith(f"{data[node.offset]:#04x}"):
                prefix = 1 + (enc.width if enc.category == "variable" else 0)
                add(node.offset + prefix, node.length - prefix, node)
            if parent is not None and parent.type.startswith("array") and node.name[:1] == "[":
                element = spec10.ENCODINGS.get(data[parent.children[2].offset])
                if element is not None and element.category == "variable":
                    add(node.offset + element.width, node.length - element.width, node)
            described = [c for c in node.children if c.name == "descriptor"]
            if node.type.startswith("described") and described:
                # the code byte; the list after the descriptor (a map's value has its key first)
                descriptor = described[0]
                add(descriptor.offset + 1, descriptor.length - 1, descriptor)
                after = descriptor.offset + descriptor.length
                add(after, node.offset + node.length - after, node)
        else:
            if node.type == "table":
                add(node.offset + 4, node.length - 4, node)
            if node.type in ("shortstr", "longstr"):
                prefix = 1 if node.type == "shortstr" else 4
                add(node.offset + prefix, node.length - prefix, node)
            tags = [c for c in node.children if c.name == "tag"]
            if tags:
                add(tags[0].offset, node.offset + node.length - tags[0].offset, node)
        for child in node.children:
            visit(child, node)

    visit(root, None)
    return out


def paired(path: Path) -> Iterator[tuple[Any, ET.Element, Node]]:
    """Our frames and Wireshark's PDUs in order, but the 0-9-1 protocol headers that Wireshark
    does not dissect (test_vs_tshark)."""
    pdus = tshark_pdus(path, ports(path))
    headers = {n for n, p in pdus if p.find("field[@name='amqp.init.protocol']") is not None}
    frames = [
        f
        for f in ours(path)
        if not (f.version.startswith("0-") and f.kind == "protocol-header") or f.packet in headers
    ]
    assert [f.packet for f in frames] == [number for number, _ in pdus]
    starts = DeliveryStarts()
    for frame, (_, pdu) in zip(frames, pdus, strict=True):
        yield frame, pdu, frame_tree(frame, continues=starts.continues(frame))[-1]


def fields(pdu: ET.Element) -> Iterator[tuple[str, int, int, ET.Element]]:
    """(name, offset within the frame, size, element) of every field Wireshark gives bytes."""
    base = int(pdu.get("pos", "0"))
    misread = any(f.get("name") in MISREAD for f in pdu.iter("field"))
    for field in pdu.iter("field"):
        name = field.get("name", "")
        size = int(field.get("size", "0"))
        if field.get("pos") is None or size == 0 or name.startswith("_ws") or name in GENERATED:
            continue
        if misread and name == "amqp.list":
            continue  # its reading of a continuation frame: see the test below
        yield name, int(field.get("pos", "0")) - base, size, field


def argument_name(field: str, version: str) -> str | None:
    """Our node's name for a Wireshark argument or property field (None: not one)."""
    if version != "1.0":
        for prefix in ("amqp.method.arguments.", "amqp.method.properties."):
            if field.startswith(prefix):
                return field[len(prefix) :].replace("_", "-")
        return None
    suffix = field.split(".", 3)[-1] if field.count(".") >= 3 else field.split(".")[-1]
    return ARGUMENTS.get(suffix) or ARGUMENTS.get(field.rsplit(".", 1)[-1])


def same_value(node: Node, field: ET.Element, name: str, version: str) -> bool:
    value = node.value
    if any(c.name not in ("reply-name", "key", "tag") for c in node.children):
        return True  # a table or list: its entries are compared one by one
    if version == "1.0":
        theirs = wire_value(field, name)
        if isinstance(theirs, str) and isinstance(value, str):
            return " ".join(value.split()) == theirs
        return value == theirs
    show = field.get("show", "")
    if isinstance(value, bool):
        return show == ("1" if value else "0")
    if isinstance(value, int):
        return show == str(value)
    if isinstance(value, str) and value.isprintable():
        return show == value or show.replace(":", "") == value.encode().hex()
    return True  # control characters: Wireshark writes escapes of its own (test below)


def same_entry(nodes: list[Node], field: ET.Element) -> int:
    """A 0-9-1 table entry, `key (type): value` in Wireshark's words: ours has the key, and
    the value when it is one Wireshark writes as text."""
    showname = field.get("showname", "")
    head, _, value = showname.partition("): ")
    key = head.rsplit(" (", 1)[0]
    named = [n for n in nodes if n.name == key]
    assert named, (showname, [n.name for n in nodes])
    ours_value = named[0].value
    if not value or not isinstance(ours_value, (str, bool, int)) or named[0].type[:3] == "arr":
        return 0
    if isinstance(ours_value, bool):
        assert value == str(ours_value).lower(), showname
    elif isinstance(ours_value, str) and not ours_value.isprintable():
        return 0  # Wireshark's escapes (test_tree_escapes...)
    else:
        assert value == str(ours_value), showname
    return 1


def ports(path: Path) -> tuple[int, ...]:
    """The ports tshark must be told are AMQP (*Decode As*): the scenario's, but 5672."""
    return tuple(p for p in amqp_ports(path) if p != 5672)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_wireshark_field_is_a_node_at_the_same_bytes(path: Path) -> None:
    checked = 0
    valued = 0
    frames = 0
    for frame, pdu, root in paired(path):
        frames += 1
        at = spans(frame, root)
        for name, offset, size, field in fields(pdu):
            nodes = at.get((offset, size))
            assert nodes, (path.name, frame.number, frame.name, name, offset, size)
            checked += 1
            if name == "amqp.field":
                valued += same_entry(nodes, field)
                continue
            ours_name = argument_name(name, frame.version)
            if ours_name is None:
                continue
            named = [n for n in nodes if n.name == ours_name]
            assert named, (path.name, frame.number, name, [n.name for n in nodes])
            assert same_value(named[0], field, ours_name, frame.version), (
                path.name,
                frame.number,
                name,
                named[0].value,
                field.get("show"),
            )
            valued += 1
    # Wireshark follows neither AMQP inside WebSocket nor after 1.0's in-band TLS upgrade
    assert checked or not frames or "websocket" in path.name or "inband" in path.name
    if checked > 200:
        assert valued > 10


def test_the_tree_covers_every_byte_of_a_frame() -> None:
    """A node for every byte: the frame header, the performative's or method's parts and the
    payload tile the frame with no gap and no overlap (both versions)."""
    for name in ("10-send-receive.pcap", "091-publish-consume.pcap"):
        for frame in ours(CAPTURES / name):
            root = frame_tree(frame)[-1]
            pos = 0
            for child in root.children:
                if child.type.startswith("described") or child.name == "arguments":
                    assert child.offset == pos
                assert child.offset >= pos or child.length == 0, (frame.number, child.name)
                pos = max(pos, child.offset + child.length)
            assert pos == len(frame.data), (name, frame.number, frame.name)


def test_wireshark_misreads_continuation_frames_the_tree_does_not() -> None:
    """Wireshark reads each continuation frame of the 300 KB message as if a message began
    there (list items of unknown type); the tree shows those frames' payload as bytes that
    continue the delivery, and every other field at Wireshark's bytes."""
    path = CAPTURES / "10-large-message.pcap"
    misread = 0
    for frame, pdu, root in paired(path):
        if not any(f.get("name") in MISREAD for f in pdu.iter("field")):
            continue
        misread += 1
        payload = root.children[-1]
        assert payload.name == "payload"
        assert payload.offset + payload.length == len(frame.data)
        assert payload.children == []  # bytes that continue the delivery, no sections
    assert misread > 50


def test_wireshark_labels_a_bind_source_as_destination_the_tree_does_not() -> None:
    """exchange.bind's `source` is shown as "Destination: ..." by Wireshark 4.0; the tree
    names it from the spec table."""
    path = CAPTURES / "091-exchanges.pcap"
    for frame, pdu, root in paired(path):
        if frame.name != "exchange.bind":
            continue
        field = pdu.find(".//field[@name='amqp.method.arguments.source']")
        assert field is not None and field.get("showname", "").startswith("Destination:")
        at = spans(frame, root)
        offset = int(field.get("pos", "0")) - int(pdu.get("pos", "0"))
        nodes = at[(offset, int(field.get("size", "0")))]
        assert [n.name for n in nodes] == ["source"]
        return
    raise AssertionError("no exchange.bind in the capture")


def wireshark_bytes(path: Path) -> list[tuple[int, bytes, list[tuple[int, int, int]]]]:
    """(packet, the PDU's bytes, the segments it was reassembled from) for every AMQP PDU tshark
    dissects over plain TCP: from the packet's TCP payload at the PDU's position, or from the
    reassembled bytes of a PDU spread over several segments, with (packet, offset, length) of
    each segment (none for a PDU in one segment)."""
    out = []
    for packet in pdml(str(path), ports(path)).iter("packet"):
        number, payload, payload_at, reassembled = 0, b"", 0, b""
        segments: list[tuple[int, int, int]] = []
        for proto in packet.iter("proto"):
            name = proto.get("name")
            if name == "geninfo":
                number = int(proto.find("field[@name='num']").get("show", "0"))  # type: ignore[union-attr]
            for field in proto.iter("field"):
                if field.get("name") == "tcp.payload":
                    payload = bytes.fromhex(field.get("value", ""))
                    payload_at = int(field.get("pos", "0"))
                elif field.get("name") == "tcp.reassembled.data":
                    reassembled = bytes.fromhex(field.get("value", ""))
                elif field.get("name") == "tcp.segment":
                    where = (int(field.get("pos", "0")), int(field.get("size", "0")))
                    segments.append((int(field.get("show", "0")), *where))
            if name != "amqp":
                continue
            pos, size = int(proto.get("pos", "0")), int(proto.get("size", "0"))
            if pos < payload_at:  # positions in the reassembled bytes start at 0
                out.append((number, reassembled[pos : pos + size], segments))
            else:
                out.append((number, payload[pos - payload_at : pos - payload_at + size], []))
    return out


@pytest.mark.parametrize(
    "name", ["10-large-message.pcap", "091-large-body.pcap", "10-send-receive.pcap", "ipv6.pcap"]
)
def test_frame_bytes_equal_the_tcp_payload_wireshark_shows(name: str) -> None:
    """`-x` dumps `frame.data`: the TCP payload bytes tshark shows for a frame in one segment,
    and the reassembled bytes for a frame spread over several (the 300 KB message and the
    large 0-9-1 body have both), with the packets that carried which of its bytes as tshark's
    reassembly lists them (`Frame.carriers`)."""
    path = CAPTURES / name
    pairs = list(paired(path))
    with open_capture(str(path)) as capture:
        carried = {
            f.number: f.carriers for f in Dissector(carriers=True).run(capture) if f.carriers
        }
    theirs = wireshark_bytes(path)
    headers = {n for n, p in tshark_pdus(path, ports(path)) if p.get("size") == "8"}
    theirs = [t for t in theirs if t[0] in {f.packet for f, _, _ in pairs} or t[0] in headers]
    assert len(theirs) == len(pairs)
    reassembled = 0
    for (frame, _, _), (packet, data, segments) in zip(pairs, theirs, strict=True):
        assert frame.packet == packet
        assert frame.data == data, (name, frame.number)
        ours_carriers = [(p, offset, length) for p, offset, length, _ in carried[frame.number]]
        if segments:
            assert ours_carriers == segments, (name, frame.number)
            reassembled += 1
        else:
            assert ours_carriers == [(packet, 0, len(data))]
    if "large" in name:
        assert reassembled > 0
