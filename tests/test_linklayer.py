"""amqpscope.capture.linklayer: raw packets (built with scapy or by hand) in, TCP segments out."""

from __future__ import annotations

import ipaddress
import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP, TCP, UDP, IPOption_NOP, IPOption_RR
from scapy.layers.inet6 import (
    IPv6,
    IPv6ExtHdrDestOpt,
    IPv6ExtHdrFragment,
    IPv6ExtHdrHopByHop,
    IPv6ExtHdrRouting,
)
from scapy.layers.l2 import ARP, CookedLinux, CookedLinuxV2, Dot1AD, Dot1Q, Ether
from scapy.packet import Raw

from amqpscope.capture.linklayer import LINKTYPES, SegmentDecoder
from amqpscope.capture.packet import ACK, CUT, FIN, PSH, SYN, RawPacket, Segment

SRC4, DST4 = "192.0.2.1", "198.51.100.7"
SRC6, DST6 = "2001:db8::1", "2001:db8:0:0:1::2"
TS = 1_700_000_000.25


def raw(data: bytes, linktype: int, number: int = 1, *, wirelen=None, ts=TS) -> RawPacket:
    return RawPacket(number, ts, linktype, data, len(data) if wirelen is None else wirelen)


def tcp(payload: bytes = b"AMQP\x00\x00\x09\x01", **kw) -> TCP:
    fields = {"sport": 40000, "dport": 5672, "seq": 1000, "ack": 2000, "flags": "PA"} | kw
    return TCP(**fields) / Raw(payload) if payload else TCP(**fields)


def v4(payload: bytes = b"AMQP\x00\x00\x09\x01", **kw) -> bytes:
    return bytes(IP(src=SRC4, dst=DST4) / tcp(payload, **kw))


def v6(payload: bytes = b"AMQP\x00\x00\x09\x01") -> bytes:
    return bytes(IPv6(src=SRC6, dst=DST6) / tcp(payload))


def expect(payload=b"AMQP\x00\x00\x09\x01", *, v=4, packet=1, flags=PSH | ACK) -> Segment:
    src, dst = (SRC4, DST4) if v == 4 else (SRC6, "2001:db8::1:0:0:2")
    return Segment(packet, TS, (src, 40000), (dst, 5672), 1000, 2000, flags, payload)


def one(data: bytes, linktype: int, **kw) -> tuple[Segment | None, list[str]]:
    dec = SegmentDecoder()
    seg = dec.decode(raw(data, linktype, **kw))
    return seg, [f.code for f in dec.findings]


# ---------------------------------------------------------------------------------------------
# Link layers


def test_ethernet_ipv4_tcp():
    seg, found = one(bytes(Ether() / IP(src=SRC4, dst=DST4) / tcp()), 1)
    assert seg == expect()
    assert found == []


def test_ethernet_ipv6_tcp_address_text():
    seg, found = one(bytes(Ether() / IPv6(src=SRC6, dst=DST6) / tcp()), 1)
    assert seg == expect(v=6)
    assert found == []


def test_ipv4_mapped_ipv6_address_prints_like_ipaddress():
    seg, _ = one(bytes(IPv6(src="::ffff:10.0.0.1", dst="::1") / tcp()), 229)
    assert seg is not None
    assert seg.src[0] == str(ipaddress.IPv6Address("::ffff:10.0.0.1"))
    assert seg.dst[0] == "::1"


def test_flags_seq_ack_and_no_payload():
    seg, _ = one(v4(b"", flags="S", seq=0xFFFFFFFF, ack=0), 101)
    assert seg == Segment(1, TS, (SRC4, 40000), (DST4, 5672), 0xFFFFFFFF, 0, SYN, b"")
    seg, _ = one(v4(b"", flags="FA"), 101)
    assert seg is not None and seg.flags == FIN | ACK


def test_ethernet_padding_is_trimmed():
    frame = bytes(Ether() / IP(src=SRC4, dst=DST4) / tcp(b"hi"))
    assert len(frame) < 60
    padded = frame + b"\xee" * (60 - len(frame))
    seg, found = one(padded, 1)
    assert seg == expect(b"hi")
    assert found == []
    frame6 = bytes(Ether() / IPv6(src=SRC6, dst=DST6) / tcp(b"hi")) + b"\xee" * 20
    seg, _ = one(frame6, 1)
    assert seg == expect(b"hi", v=6)


@pytest.mark.parametrize(
    "tags",
    [
        [Dot1Q(vlan=10)],
        [Dot1AD(vlan=100), Dot1Q(vlan=10)],  # QinQ, 802.1ad outer tag
        [Dot1Q(vlan=1, type=0x9100), Dot1Q(vlan=2, type=0x8100), Dot1Q(vlan=3)],
    ],
    ids=["802.1Q", "802.1ad", "0x9100-stack"],
)
def test_vlan_tags(tags):
    outer_type = {Dot1Q: 0x8100, Dot1AD: 0x88A8}[type(tags[0])]
    if len(tags) == 3:
        outer_type = 0x9100
    stack = Ether(type=outer_type)
    for tag in tags:
        stack = stack / tag
    seg, found = one(bytes(stack / IP(src=SRC4, dst=DST4) / tcp()), 1)
    assert seg == expect()
    assert found == []


def test_truncated_vlan_tag():
    seg, found = one(bytes(Ether(type=0x8100)) + b"\x00\x0a", 1)
    assert seg is None
    assert found == ["link.malformed"]


def test_linux_cooked_v1_and_v2():
    assert one(bytes(CookedLinux() / IP(src=SRC4, dst=DST4) / tcp()), 113)[0] == expect()
    assert one(bytes(CookedLinuxV2() / IPv6(src=SRC6, dst=DST6) / tcp()), 276)[0] == expect(v=6)
    # a VLAN tag after the cooked header
    sll_vlan = bytes(CookedLinux(proto=0x8100) / Dot1Q(vlan=5) / IP(src=SRC4, dst=DST4) / tcp())
    assert one(sll_vlan, 113)[0] == expect()


@pytest.mark.parametrize("family", [2, 24, 28, 30, 23])
@pytest.mark.parametrize("order", ["<", ">"])
def test_bsd_null_loopback_either_byte_order(family, order):
    ip = v4() if family == 2 else v6()
    seg, found = one(struct.pack(order + "I", family) + ip, 0)
    assert seg == expect(v=4 if family == 2 else 6)
    assert found == []


def test_openbsd_loop_is_network_order():
    assert one(struct.pack("!I", 2) + v4(), 108)[0] == expect()
    assert one(struct.pack("!I", 24) + v6(), 108)[0] == expect(v=6)


def test_loopback_other_family_is_not_tcp():
    assert one(struct.pack("<I", 7) + v4(), 0) == (None, [])


@pytest.mark.parametrize("linktype", [101, 14, 12])
def test_raw_ip(linktype):
    assert one(v4(), linktype)[0] == expect()
    assert one(v6(), linktype)[0] == expect(v=6)


def test_dlt12_as_openbsd_loop():
    assert one(struct.pack("!I", 2) + v4(), 12)[0] == expect()


def test_raw_ipv4_and_ipv6_only_link_types():
    assert one(v4(), 228)[0] == expect()
    assert one(v6(), 229)[0] == expect(v=6)
    assert one(v6(), 228) == (None, ["link.malformed"])  # not IPv4


def test_raw_ip_with_bad_version():
    assert one(b"\x55" + v4()[1:], 101) == (None, ["link.malformed"])
    assert one(b"", 101) == (None, ["link.malformed"])


def test_unsupported_link_type_reported_once_per_type():
    dec = SegmentDecoder()
    for i in range(5):
        assert dec.decode(raw(v4(), 147, number=i + 1)) is None
    assert dec.decode(raw(v4(), 9)) is None
    assert [(f.code, f.packet) for f in dec.findings] == [
        ("link.unsupported", 1),
        ("link.unsupported", 1),
    ]
    assert "147" in dec.findings[0].message
    assert 147 not in LINKTYPES


def test_non_tcp_is_silently_ignored():
    for frame in (
        bytes(Ether() / ARP()),
        bytes(Ether() / IP() / UDP() / b"x"),
        bytes(Ether() / IPv6() / UDP() / b"x"),
        bytes(Ether(type=0x88CC) / b"lldp"),
        bytes(Ether() / IPv6() / IPv6ExtHdrHopByHop() / UDP()),
    ):
        assert one(frame, 1) == (None, [])


# ---------------------------------------------------------------------------------------------
# IPv4 and TCP headers


def test_ipv4_options_are_skipped():
    seg, found = one(bytes(IP(src=SRC4, dst=DST4, options=[IPOption_NOP()] * 4) / tcp()), 101)
    assert (seg, found) == (expect(), [])
    seg, _ = one(
        bytes(IP(src=SRC4, dst=DST4, options=[IPOption_RR(routers=["1.2.3.4"])]) / tcp()), 101
    )
    assert seg == expect()


def test_tcp_options_are_skipped():
    pkt = (
        IP(src=SRC4, dst=DST4)
        / TCP(
            sport=40000,
            dport=5672,
            seq=1000,
            ack=2000,
            flags="PA",
            options=[("MSS", 1460), ("NOP", None), ("WScale", 7)],
        )
        / Raw(b"data")
    )
    assert one(bytes(pkt), 101)[0] == expect(b"data")


@pytest.mark.parametrize(
    "mangle, why",
    [
        (lambda b: b[:30], "TCP header truncated"),
        (lambda b: b[:14], "IPv4 header truncated"),
        (lambda b: b[:20] + b[20:32] + bytes([0x40]) + b[33:], "bad TCP header length"),  # 16 < 20
        (lambda b: b[:20] + b[20:32] + bytes([0xF0]) + b[33:], "bad TCP header length"),  # past end
        (lambda b: bytes([0x44]) + b[1:], "bad IPv4 version/header length"),
        (lambda b: bytes([0x4F]) + b[1:], "IPv4 options truncated"),
        (lambda b: b[:2] + struct.pack("!H", 12) + b[4:], "IPv4 total length 12"),
    ],
)
def test_malformed_headers(mangle, why):
    dec = SegmentDecoder()
    assert dec.decode(raw(mangle(v4()), 101, number=7)) is None
    assert [(f.code, f.packet) for f in dec.findings] == [("link.malformed", 7)]
    assert why in dec.findings[0].message


def test_truncated_headers_at_every_layer():
    frame = bytes(Ether() / IPv6(src=SRC6, dst=DST6) / tcp(b""))
    for cut in range(len(frame)):
        seg, found = one(frame[:cut], 1)
        assert seg is None
        assert found == ["link.malformed"], cut


def test_snapped_packet_keeps_what_was_captured():
    data = v4(b"x" * 100)
    seg, found = one(data[:60], 101, wirelen=len(data))
    # what was kept, and how much the snap length cut off its end (the IP length says): the
    # CUT flag sends it down reassembly's slow path, which declares those bytes missing at once
    cut = expect(b"x" * 20, flags=PSH | ACK | CUT)
    cut.cut = 80
    assert seg == cut
    assert found == []  # the snap length did it: capture.snaplen's business


def test_ip_length_beyond_the_packet_is_reported_but_decoded():
    data = v4(b"x" * 100)[:60]
    seg, found = one(data, 101)
    assert seg == expect(b"x" * 20)
    assert found == ["link.malformed"]


def test_segmentation_offload_zero_total_length():
    data = bytearray(v4(b"y" * 3000))
    data[2:4] = b"\0\0"
    assert one(bytes(data), 101) == (expect(b"y" * 3000), [])


def test_segment_carries_packet_number_and_time():
    dec = SegmentDecoder()
    seg = dec.decode(raw(v4(), 101, number=42, ts=12.5))
    assert seg is not None and (seg.packet, seg.ts) == (42, 12.5)


# ---------------------------------------------------------------------------------------------
# IPv4 fragments


def fragments(payload: bytes, size: int = 24, ident: int = 0x1234) -> list[bytes]:
    """Hand-made IPv4 fragments of TCP(payload), `size` bytes of IP payload each."""
    whole = IP(src=SRC4, dst=DST4, id=ident) / tcp(payload)
    body = bytes(whole)[20:]
    out = []
    for off in range(0, len(body), size):
        piece = body[off : off + size]
        more = off + size < len(body)
        frag = IP(src=SRC4, dst=DST4, id=ident, proto=6, flags="MF" if more else 0, frag=off // 8)
        out.append(bytes(frag / Raw(piece)))
    return out


PAYLOAD = bytes(range(256)) * 2


def decode_all(dec: SegmentDecoder, frames: list[bytes], linktype: int = 101) -> list[Segment]:
    segs = [dec.decode(raw(f, linktype, number=i + 1)) for i, f in enumerate(frames)]
    return [s for s in segs if s is not None]


def test_ipv4_fragments_in_order():
    dec = SegmentDecoder()
    frames = fragments(PAYLOAD)
    assert len(frames) > 10
    assert decode_all(dec, frames) == [expect(PAYLOAD, packet=len(frames))]
    assert dec.findings == []
    assert dec.flush() == []


@pytest.mark.parametrize("seed", range(5))
def test_ipv4_fragments_out_of_order_and_duplicated(seed):
    frames = fragments(PAYLOAD, size=64)
    rng = random.Random(seed)
    frames = frames + rng.sample(frames, 3)
    rng.shuffle(frames)
    dec = SegmentDecoder()
    segs = decode_all(dec, frames)
    assert [s.payload for s in segs] == [PAYLOAD]
    assert dec.findings == []


def test_ipv4_fragments_reversed_with_ethernet_padding():
    frames = [bytes(Ether() / IP(f)) + b"\0" * 30 for f in reversed(fragments(b"abc", size=8))]
    dec = SegmentDecoder()
    assert [s.payload for s in decode_all(dec, frames, linktype=1)] == [b"abc"]


def test_interleaved_datagrams_are_kept_apart():
    a = fragments(b"A" * 100, ident=1)
    b = fragments(b"B" * 100, ident=2)
    frames = [f for pair in zip(a, b, strict=False) for f in pair]
    dec = SegmentDecoder()
    assert sorted(s.payload for s in decode_all(dec, frames)) == [b"A" * 100, b"B" * 100]


def test_incomplete_fragments_reported_at_flush():
    frames = fragments(PAYLOAD)
    dec = SegmentDecoder()
    assert decode_all(dec, frames[:3] + frames[4:]) == []
    assert dec.findings == []
    out = dec.flush()
    assert [(f.code, f.packet) for f in out] == [("ip.fragment-incomplete", 1)]
    assert f"{SRC4} -> {DST4} id 0x1234" in out[0].message
    assert dec.findings == out
    assert dec.flush() == []


def test_fragments_of_other_protocols_are_not_kept():
    frag = bytes(IP(src=SRC4, dst=DST4, proto=17, flags="MF") / Raw(b"x" * 16))
    dec = SegmentDecoder()
    assert dec.decode(raw(frag, 101)) is None
    assert dec.flush() == []


def test_pending_fragments_are_bounded():
    dec = SegmentDecoder(max_fragment_datagrams=2)
    firsts = [fragments(b"z" * 100, ident=i)[0] for i in range(3)]
    decode_all(dec, firsts)
    assert [(f.code, f.packet) for f in dec.findings] == [("ip.fragment-incomplete", 1)]
    assert "too many" in dec.findings[0].message
    assert len(dec.flush()) == 2

    dec = SegmentDecoder(max_fragment_bytes=50)
    decode_all(dec, [fragments(b"z" * 100, size=40, ident=i)[0] for i in range(3)])
    assert len(dec.findings) == 2
    assert len(dec.flush()) == 1


def test_stale_fragments_expire():
    dec = SegmentDecoder(fragment_timeout=30)
    old, new = fragments(b"o" * 100, ident=1), fragments(b"n" * 100, ident=2)
    dec.decode(raw(old[0], 101, number=1, ts=100.0))
    dec.decode(raw(new[0], 101, number=2, ts=131.0))
    assert [(f.code, f.packet) for f in dec.findings] == [("ip.fragment-incomplete", 1)]
    # the rest of the expired datagram no longer completes it
    segs = [dec.decode(raw(f, 101, number=3, ts=131.5)) for f in old[1:]]
    assert segs == [None] * len(segs)


def test_conflicting_fragment_lengths():
    a = fragments(b"q" * 64, size=16)
    bad = bytes(IP(src=SRC4, dst=DST4, id=0x1234, proto=6, frag=1) / Raw(b"w" * 8))  # ends early
    dec = SegmentDecoder()
    decode_all(dec, [a[-1], bad])
    assert [f.code for f in dec.findings] == ["link.malformed"]


@settings(max_examples=100)
@given(
    payload=st.binary(min_size=0, max_size=3000),
    size=st.integers(1, 200).map(lambda n: n * 8),
    order=st.randoms(use_true_random=False),
)
def test_fragment_reassembly_property(payload, size, order):
    frames = fragments(payload, size=size)
    order.shuffle(frames)
    dec = SegmentDecoder()
    segs = decode_all(dec, frames)
    assert [s.payload for s in segs] == [payload]
    assert dec.findings == []
    assert dec.flush() == []


# ---------------------------------------------------------------------------------------------
# IPv6 extension headers and fragments


def ah_then(nh: int, rest: bytes) -> bytes:
    """An IPv6 Authentication Header (24 bytes: length field 4) before `rest`."""
    return bytes([nh, 4, 0, 0]) + b"\x00\x00\x01\x00" + b"\x00\x00\x00\x01" + b"\xaa" * 12 + rest


def test_ipv6_extension_headers():
    pkt = (
        IPv6(src=SRC6, dst=DST6)
        / IPv6ExtHdrHopByHop()
        / IPv6ExtHdrRouting(addresses=["2001:db8::99"])
        / IPv6ExtHdrDestOpt()
        / tcp()
    )
    assert one(bytes(pkt), 229) == (expect(v=6), [])
    with_ah = bytes(
        IPv6(src=SRC6, dst=DST6, nh=51) / Raw(ah_then(60, bytes(IPv6ExtHdrDestOpt(nh=6) / tcp())))
    )
    assert one(with_ah, 229) == (expect(v=6), [])


def test_ipv6_atomic_fragment():
    pkt = IPv6(src=SRC6, dst=DST6) / IPv6ExtHdrFragment(offset=0, m=0, id=7) / tcp()
    assert one(bytes(pkt), 229) == (expect(v=6), [])


def fragments6(payload: bytes, size: int = 32, ident: int = 99, nh: int = 6) -> list[bytes]:
    body = bytes(tcp(payload))
    if nh == 60:
        body = bytes(IPv6ExtHdrDestOpt(nh=6)) + body
    out = []
    for off in range(0, len(body), size):
        more = int(off + size < len(body))
        frag = IPv6ExtHdrFragment(nh=nh, offset=off // 8, m=more, id=ident)
        out.append(
            bytes(
                IPv6(src=SRC6, dst=DST6) / IPv6ExtHdrHopByHop() / frag / Raw(body[off : off + size])
            )
        )
    return out


@pytest.mark.parametrize("nh", [6, 60])
def test_ipv6_fragments_reassembled(nh):
    frames = fragments6(PAYLOAD, nh=nh)
    frames = frames[1:] + frames[:1]
    dec = SegmentDecoder()
    assert decode_all(dec, frames, linktype=229) == [expect(PAYLOAD, v=6, packet=len(frames))]
    assert dec.findings == []


def test_ipv6_incomplete_fragments():
    dec = SegmentDecoder()
    decode_all(dec, fragments6(PAYLOAD)[:-1], linktype=229)
    out = dec.flush()
    assert [f.code for f in out] == ["ip.fragment-incomplete"]
    assert "IPv6" in out[0].message


def test_ipv6_fragments_of_udp_are_not_kept():
    dec = SegmentDecoder()
    frames = fragments6(PAYLOAD, nh=17)
    assert decode_all(dec, frames, linktype=229) == []
    assert dec.flush() == []


def test_ipv6_truncated_extension_header():
    data = bytes(IPv6(src=SRC6, dst=DST6) / IPv6ExtHdrRouting(addresses=["::1", "::2"]) / tcp())
    assert one(data[:50], 229, wirelen=len(data)) == (None, ["link.malformed"])


# ---------------------------------------------------------------------------------------------
# Nothing raises.

LINKS = [*sorted(LINKTYPES), 147]


@settings(max_examples=1000)
@given(data=st.binary(max_size=120), linktype=st.sampled_from(LINKS))
def test_random_bytes_never_raise(data, linktype):
    dec = SegmentDecoder()
    seg = dec.decode(raw(data, linktype))
    assert seg is None or isinstance(seg, Segment)
    dec.flush()


FRAMES = [
    (bytes(Ether() / Dot1Q() / IP(src=SRC4, dst=DST4) / tcp()), 1),
    (bytes(CookedLinuxV2() / IPv6() / IPv6ExtHdrHopByHop() / IPv6ExtHdrFragment(m=1) / tcp()), 276),
    (bytes(IP(options=[IPOption_NOP()] * 4, flags="MF") / tcp()), 101),
]


@settings(max_examples=1000)
@given(
    which=st.integers(0, len(FRAMES) - 1),
    flips=st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), max_size=6),
    cut=st.integers(0, 200),
)
def test_damaged_real_frames_never_raise(which, flips, cut):
    frame, linktype = FRAMES[which]
    data = bytearray(frame)
    for pos, value in flips:
        if pos < len(data):
            data[pos] = value
    dec = SegmentDecoder()
    for number in (1, 2):
        seg = dec.decode(raw(bytes(data[: len(data) - cut % (len(data) + 1)]), linktype, number))
        assert seg is None or isinstance(seg, Segment)
    dec.flush()
