"""Hostile input, one test per weakness the audit for issue 11 found and fixed: what a few bytes
could claim (millions of elements, thousands of pieces) stays cheap, and damage says where it is.
"""

from __future__ import annotations

import struct
import tracemalloc

import proton
from proton import Message

from amqpscope.capture.linklayer import SegmentDecoder
from amqpscope.capture.packet import ACK, RawPacket, Segment
from amqpscope.codec.amqp091 import fieldtable
from amqpscope.codec.amqp10 import (
    composites,  # noqa: F401 (registers the composite handlers)
    types,
)
from amqpscope.codec.amqp10.message import decode_message
from amqpscope.stream.tcp import MAX_PIECES, TcpReassembler


def peak(fn, *args):  # type: ignore[no-untyped-def]
    """`fn(*args)` and the most memory it held at once (bytes)."""
    tracemalloc.start()
    try:
        result = fn(*args)
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_zero_width_array_elements_are_capped_per_frame_not_per_array() -> None:
    """An array32 of 2**32-1 nulls costs 10 bytes. Capped per array, 6000 of them in a 60 KB
    list once made 400 million values (gigabytes, minutes); the cap is now one budget for the
    whole decoding pass."""
    array = b"\xf0" + struct.pack(">II", 5, 0xFFFFFFFF) + b"\x40"
    count = 6000
    body = array * count
    data = b"\xd0" + struct.pack(">II", 4 + len(body), count) + body
    (value, end, findings), held = peak(types.decode, data)
    assert end == len(data) and len(value) == count
    assert sum(len(v) for v in value) == types.MAX_ZERO_WIDTH_ELEMENTS
    assert all(f.code == "amqp10.bad-encoding" for f in findings)
    assert "zero-width elements cut" in findings[0].message
    assert held < 50 * 1024 * 1024


def test_zero_width_described_elements_share_the_budget() -> None:
    """Described list0 elements (a composite each, with its defaults) cost nothing on the wire
    either: an array of them claiming 2**32-1 makes at most the budget's worth."""
    array = b"\xf0" + struct.pack(">II", 8, 0xFFFFFFFF) + b"\x00\x53\x70\x45"
    value, _, findings = types.decode(array * 1 + b"")
    assert len(value) == types.MAX_ZERO_WIDTH_ELEMENTS
    assert value[0]["type"] == "header"
    assert findings


def test_redacted_bodies_keep_transaction_control() -> None:
    """--redact-bodies drops payloads, not protocol: a coordinator's declare stays readable."""
    payload = Message(body=proton.Described(proton.ulong(0x31), [])).encode()
    message, _ = decode_message(memoryview(payload), 0, len(payload), redact_bodies=True)
    assert message["body"]["value"]["type"] == "declare"
    text = Message(body="a secret payload").encode()
    message, _ = decode_message(memoryview(text), 0, len(text), redact_bodies=True)
    assert message["body"] == {
        "type": "amqp-value",
        "size": message["body"]["size"],
        "redacted": True,
    }


def test_field_table_damage_says_its_offset() -> None:
    table = struct.pack(">I", 8) + b"\x01kZ" + b"\x00" * 5  # an unknown type tag at offset 7
    try:
        fieldtable.read_table(table, 0, len(table))
    except fieldtable.Malformed as exc:
        assert "at offset 6" in str(exc)
    else:
        raise AssertionError("no Malformed")
    short = struct.pack(">I", 100) + b"\x01k"
    try:
        fieldtable.read_table(b"xx" + short, 2, len(short) + 2)
    except fieldtable.Malformed as exc:
        assert "at offset 2" in str(exc)


def ipv4_fragment(ident: int, offset: int, more: bool, payload: bytes) -> bytes:
    flags = (0x2000 if more else 0) | (offset // 8)
    header = struct.pack(
        ">BBHHHBBH4s4s",
        0x45,
        0,
        20 + len(payload),
        ident,
        flags,
        64,
        6,
        0,
        b"\x7f\0\0\1",
        b"\x7f\0\0\2",
    )
    return header + payload


def test_a_fragment_flood_is_dropped_not_sorted_forever() -> None:
    """Thousands of repeated 8-byte fragments of one datagram once meant a sort of all of them
    per arrival (quadratic); past `_MAX_FRAGMENT_PIECES` the datagram is dropped, once."""
    decoder = SegmentDecoder()
    last = ipv4_fragment(7, 800, False, b"z" * 8)  # the end: total known from the start
    packets = [RawPacket(1, 1.0, 101, last, len(last))]
    for n in range(5000):
        frag = ipv4_fragment(7, 8 * (n % 50), True, b"y" * 8)  # never the whole datagram
        packets.append(RawPacket(n + 2, 1.0, 101, frag, len(frag)))
    for packet in packets:
        assert decoder.decode(packet) is None
    dropped = [f for f in decoder.findings if f.code == "ip.fragment-incomplete"]
    assert len(dropped) >= 1
    assert "too many fragments" in dropped[0].message


def test_tiny_out_of_order_segments_are_capped_by_count() -> None:
    """One-byte segments ahead of a hole: past `MAX_PIECES` pieces the hole is given up (else each
    insert moves a list of millions)."""
    reassembler = TcpReassembler()
    client, server = ("10.0.0.1", 40000), ("10.0.0.2", 5672)
    first = Segment(1, 1.0, client, server, 1000, 0, ACK, b"a")
    events = reassembler.feed(first)
    for n in range(MAX_PIECES + 10):
        seq = 1000 + 3 + 2 * n  # every other byte: pieces that never join
        events += reassembler.feed(Segment(n + 2, 1.0, client, server, seq, 0, ACK, b"b"))
        half = next(iter(reassembler._conns.values())).c2s
        assert len(half.starts) <= MAX_PIECES
    assert any(f.code == "tcp.buffer-limit" for f in reassembler.findings)
