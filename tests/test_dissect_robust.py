"""The whole pipeline under hostile input: it never raises, never hangs, and keeps its bounds."""

from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqpscope.capture.packet import RawPacket
from amqpscope.dissect import Dissector
from tests import peers

LINKTYPE_RAW = 101


def ipv4_tcp(sport: int, dport: int, seq: int, flags: int, payload: bytes) -> bytes:
    tcp = struct.pack(">HHIIBBHHH", sport, dport, seq, 0, 5 << 4, flags, 65535, 0, 0)
    total = 20 + len(tcp) + len(payload)
    ip = struct.pack(
        ">BBHHHBBH4s4s", 0x45, 0, total, 1, 0, 64, 6, 0, b"\x7f\x00\x00\x01", b"\x7f\x00\x00\x02"
    )
    return ip + tcp + payload


def packets_for(chunks: list[tuple[bool, bytes]], syn: bool) -> list[RawPacket]:
    """A connection 40000 <-> 5672 carrying `chunks` (True: client to server)."""
    out: list[RawPacket] = []
    seq = {True: 1000, False: 5000}

    def add(c2s: bool, flags: int, payload: bytes) -> None:
        sport, dport = (40000, 5672) if c2s else (5672, 40000)
        data = ipv4_tcp(sport, dport, seq[c2s], flags, payload)
        out.append(RawPacket(len(out) + 1, 1.0 + len(out) / 1000, LINKTYPE_RAW, data, len(data)))
        seq[c2s] = (seq[c2s] + len(payload) + (1 if flags & 0x03 else 0)) % (1 << 32)

    if syn:
        add(True, 0x02, b"")
        add(False, 0x12, b"")
    for c2s, payload in chunks:
        add(c2s, 0x18, payload)
    return out


def run(packets: list[RawPacket]) -> list:
    dissector = Dissector()
    frames = list(dissector.run(packets))
    assert all(f.name and f.kind for f in frames)
    assert all(not f.findings or all(x.code for x in f.findings) for f in frames)
    return frames


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.booleans(), st.binary(min_size=1, max_size=600)), max_size=12),
    st.booleans(),
)
def test_random_payloads_never_break_the_pipeline(chunks: list, syn: bool) -> None:
    run(packets_for(chunks, syn))


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_real_amqp_with_random_damage_never_breaks_the_pipeline(data: st.DataObject) -> None:
    conversation = peers.proton_conversation(messages=2)
    chunks = []
    for index, (direction, chunk) in enumerate(conversation.writes):
        chunk = bytearray(chunk)
        if index > 0 and chunk and data.draw(st.booleans()):  # the client's header stays whole
            at = data.draw(st.integers(0, len(chunk) - 1))
            chunk[at] = data.draw(st.integers(0, 255))
        chunks.append((direction == "c2s", bytes(chunk)))
    frames = run(packets_for(chunks, syn=True))
    assert frames, "the protocol headers at least survive damage elsewhere"


def test_a_frame_claiming_gigabytes_does_not_buffer_them() -> None:
    header = b"AMQP\x00\x00\x09\x01"
    huge = struct.pack(">BHI", 1, 1, 0x7FFFFFF0) + b"\x00\x3c\x00\x28" + b"x" * 1000
    frames = run(packets_for([(True, header), (True, huge)] + [(True, b"y" * 1400)] * 50, True))
    assert [f.kind for f in frames] == ["protocol-header"]
