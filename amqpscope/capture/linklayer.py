"""Raw packets in, TCP segments out: link layer, IPv4/IPv6 (with fragment reassembly) and TCP.

Sans-IO and scapy-free. `SegmentDecoder.decode` takes one `RawPacket` and returns its `Segment`,
or None for anything that is not TCP (silently) or cannot be decoded (with a finding). Findings
are appended to `SegmentDecoder.findings`; `flush()` at the end of a capture adds the datagrams
whose fragments never all arrived, and also returns those.

Link types (LINKTYPE_ numbers): Ethernet (1) with any stack of 802.1Q / 802.1ad / QinQ tags,
Linux cooked SLL (113) and SLL2 (276), BSD loopback NULL (0, either byte order) and LOOP (108),
raw IP (101, 228 IPv4, 229 IPv6, and the old 12 / 14 DLT_RAW values; 12 is also OpenBSD's
DLT_LOOP, told apart by the first byte). Any other link type: one ``link.unsupported`` finding
per link type.

Mirrored traffic in a tunnel is decoded as if captured itself: VXLAN (UDP 4789), Geneve (UDP
6081) and GRE with IP, Ethernet or ERSPAN inside, as Wireshark decodes them by default.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Final

from ..findings import Finding, finding
from .packet import CUT, RawPacket, Segment

__all__ = ["LINKTYPES", "SegmentDecoder"]

#: The link types `SegmentDecoder` decodes, LINKTYPE_ number -> name.
LINKTYPES: Final[dict[int, str]] = {
    0: "BSD loopback (NULL)",
    1: "Ethernet",
    12: "raw IP (DLT_RAW; OpenBSD loopback)",
    14: "raw IP (DLT_RAW)",
    101: "raw IP",
    108: "OpenBSD loopback (LOOP)",
    113: "Linux cooked capture (SLL)",
    228: "raw IPv4",
    229: "raw IPv6",
    276: "Linux cooked capture v2 (SLL2)",
}

_IPV4: Final = 0x0800
_IPV6: Final = 0x86DD
_VLAN_TYPES: Final = frozenset((0x8100, 0x88A8, 0x9100, 0x9200))
# Address families in loopback headers: AF_INET everywhere; AF_INET6 is 24 (NetBSD/OpenBSD),
# 28 (FreeBSD), 30 (Darwin), 23 (Windows, Npcap's loopback), 10 (Linux).
_AF_INET: Final = 2
_AF_INET6: Final = frozenset((10, 23, 24, 28, 30))

_TCP: Final = 6
_UDP: Final = 17
_GRE: Final = 47
# Tunnels that carry a mirrored packet (the ports Wireshark decodes by default): VXLAN (RFC
# 7348: AWS Traffic Mirroring, Azure virtual network TAP), Geneve (RFC 8926: AWS Gateway Load
# Balancer), and GRE (RFC 2784/2890) with IP, Ethernet or ERSPAN (type I, II, III: a switch's
# remote SPAN) inside.
_VXLAN_PORT: Final = 4789
_GENEVE_PORT: Final = 6081
_TEB: Final = 0x6558  # transparent Ethernet bridging: an Ethernet frame follows
_ERSPAN_2: Final = 0x88BE  # type I without GRE's sequence number, type II with it
_ERSPAN_3: Final = 0x22EB
#: what a scan that reads TCP alone must hand to this decoder (spark/lightscan.py)
TUNNEL_UDP_PORTS: Final = frozenset((_VXLAN_PORT, _GENEVE_PORT))
TUNNEL_PROTOCOLS: Final = frozenset((_UDP, _GRE))
#: outer headers longer than this open no further tunnel: nesting is bounded, a packet of
#: tunnels in tunnels costs no more than this
_MAX_TUNNEL_OFFSET: Final = 512
# IPv6 extension headers laid out as (next header, length in 8-octet units - 1, ...).
_IP6_EXT: Final = frozenset((0, 43, 60, 135, 139, 140, 253, 254))
_IP6_FRAG: Final = 44
_IP6_AH: Final = 51

#: version/class byte, payload length, next header, source, destination
_S_IP6: Final = struct.Struct("!B3xHBx16s16s")
#: next header, flags+offset, identification (after the reserved byte)
_S_IP6_FRAG: Final = struct.Struct("!BxHI")

_MAX_IPV4_DATAGRAM: Final = 65535 - 20
#: fragments kept per datagram (real ones have a few dozen; each arrival may sort them all)
_MAX_FRAGMENT_PIECES: Final = 1024


#: addresses `_AddressText` keeps before it starts over
_ADDRESS_TEXT_LIMIT: Final = 1 << 16


class _AddressText(dict[bytes, str]):
    """Packed IPv4/IPv6 address -> text, computed once per address (bounded)."""

    def __missing__(self, packed: bytes) -> str:
        if len(self) >= _ADDRESS_TEXT_LIMIT:
            self.clear()
        if len(packed) == 4:  # dotted decimal, as ipaddress writes it, without its import
            text = ".".join(map(str, packed))
        else:
            import ipaddress  # here, for the first IPv6 address: 1.5 ms of a startup otherwise

            text = str(ipaddress.IPv6Address(packed))
        self[packed] = text
        return text


@dataclass(slots=True)
class _Datagram:
    """The fragments of one IP datagram seen so far."""

    version: int
    src: bytes
    dst: bytes
    ident: int
    next_header: int  # IPv4 protocol; IPv6: the header the fragmentable part starts with
    first_packet: int
    first_ts: float
    pieces: list[tuple[int, bytes]] = field(default_factory=list)
    total: int | None = None  # known once the last fragment (more-fragments clear) arrived
    size: int = 0


class SegmentDecoder:
    """Decode `RawPacket`s into TCP `Segment`s.

    `decode(pkt)` returns the packet's `Segment`, or None: silently for what is not TCP (ARP,
    UDP, ...) and for a fragment that does not complete its datagram; with a finding appended to
    `findings` for an unsupported link type (once per link type) or a malformed or truncated
    header. A fragment that completes a datagram returns the datagram's segment, numbered and
    timed as that last fragment.

    Fragment reassembly keeps at most `max_fragment_datagrams` datagrams and `max_fragment_bytes`
    bytes pending; past either limit, or after `fragment_timeout` seconds of capture time, the
    oldest is dropped with an ``ip.fragment-incomplete`` finding, as are those still pending when
    `flush()` is called.
    """

    def __init__(
        self,
        *,
        max_fragment_datagrams: int = 1024,
        max_fragment_bytes: int = 16 << 20,
        fragment_timeout: float = 60.0,
    ) -> None:
        self.findings: list[Finding] = []
        self.max_fragment_datagrams = max_fragment_datagrams
        self.max_fragment_bytes = max_fragment_bytes
        self.fragment_timeout = fragment_timeout
        self._addr = _AddressText()
        # the last two addresses' texts, tried before `_addr` (a connection's packets go between
        # two addresses): a native compare of a few bytes, where the lookup hashes them
        self._near = b""
        self._near_text = ""
        self._far = b""
        self._far_text = ""
        self._pending: dict[tuple[int, bytes, bytes, int, int], _Datagram] = {}
        self._pending_bytes = 0
        self._unsupported: set[int] = set()
        self._links = {
            0: self._null,
            1: self._ethernet,
            12: self._dlt12,
            14: self._raw,
            101: self._raw,
            108: self._loop,
            113: self._sll,
            228: self._raw4,
            229: self._raw6,
            276: self._sll2,
        }

    # -- entry points ------------------------------------------------------------------------

    def decode(self, pkt: RawPacket) -> Segment | None:
        """The TCP segment in `pkt`, or None (see the class docstring)."""
        link = self._links.get(pkt.linktype)
        if link is None:
            if pkt.linktype not in self._unsupported:
                self._unsupported.add(pkt.linktype)
                self.findings.append(
                    finding(
                        "link.unsupported",
                        f"link type {pkt.linktype} is not decoded; its packets are skipped",
                        pkt.number,
                    )
                )
            return None
        try:
            return link(pkt, pkt.data)
        except (struct.error, IndexError, ValueError) as exc:  # a length check missed: damage
            return self._malformed(pkt, f"undecodable packet ({exc})")

    def flush(self) -> list[Finding]:
        """End of capture: report (and forget) every datagram still missing fragments.

        The findings are appended to `findings` and also returned."""
        out = [self._incomplete(d, "never completed") for d in self._pending.values()]
        self._pending.clear()
        self._pending_bytes = 0
        self.findings.extend(out)
        return out

    # -- findings ----------------------------------------------------------------------------

    def _malformed(self, pkt: RawPacket, what: str) -> Segment | None:
        """Record the damage; nothing to hand on (`return self._malformed(...)`)."""
        self.findings.append(finding("link.malformed", what, pkt.number))
        return None

    def _incomplete(self, d: _Datagram, why: str) -> Finding:
        addr = self._addr
        proto = "TCP" if d.next_header == _TCP else f"next header {d.next_header}"
        have = sum(len(b) for _, b in d.pieces)
        of = f"of {d.total} " if d.total is not None else ""
        return finding(
            "ip.fragment-incomplete",
            f"IPv{d.version} datagram {addr[d.src]} -> {addr[d.dst]} id {d.ident:#x} ({proto}): "
            f"{have} {of}bytes in {len(d.pieces)} fragment(s), {why}",
            d.first_packet,
        )

    # -- link layers ---------------------------------------------------------------------------

    def _ethernet(self, pkt: RawPacket, data: bytes) -> Segment | None:
        if len(data) < 14:
            return self._malformed(pkt, f"Ethernet header truncated ({len(data)} bytes)")
        etype = data[12] << 8 | data[13]
        if etype == _IPV4:  # the common case, one call shorter
            return self._ipv4(pkt, data, 14)
        return self._ethertype(pkt, data, etype, 14)

    def _sll(self, pkt: RawPacket, data: bytes) -> Segment | None:
        if len(data) < 16:
            return self._malformed(pkt, f"Linux cooked (SLL) header truncated ({len(data)} bytes)")
        return self._ethertype(pkt, data, data[14] << 8 | data[15], 16)

    def _sll2(self, pkt: RawPacket, data: bytes) -> Segment | None:
        if len(data) < 20:
            return self._malformed(pkt, f"Linux cooked (SLL2) header truncated ({len(data)} bytes)")
        return self._ethertype(pkt, data, data[0] << 8 | data[1], 20)

    def _ethertype(self, pkt: RawPacket, data: bytes, etype: int, off: int) -> Segment | None:
        """Dispatch on an EtherType whose payload starts at `off`, peeling VLAN tags first."""
        while etype in _VLAN_TYPES:
            if len(data) < off + 4:
                return self._malformed(pkt, f"VLAN tag truncated at byte {off}")
            etype = data[off + 2] << 8 | data[off + 3]
            off += 4
        if etype == _IPV4:
            return self._ipv4(pkt, data, off)
        if etype == _IPV6:
            return self._ipv6(pkt, data, off)
        return None

    def _null(self, pkt: RawPacket, data: bytes) -> Segment | None:
        if len(data) < 4:
            return self._malformed(pkt, f"loopback header truncated ({len(data)} bytes)")
        family = data[0] | data[1] << 8 | data[2] << 16 | data[3] << 24  # host order: try LE
        if family & 0xFFFF0000:
            family = data[3] | data[2] << 8 | data[1] << 16 | data[0] << 24
        return self._family(pkt, data, family)

    def _loop(self, pkt: RawPacket, data: bytes) -> Segment | None:
        if len(data) < 4:
            return self._malformed(pkt, f"loopback header truncated ({len(data)} bytes)")
        return self._family(pkt, data, data[3] | data[2] << 8 | data[1] << 16 | data[0] << 24)

    def _family(self, pkt: RawPacket, data: bytes, family: int) -> Segment | None:
        if family == _AF_INET:
            return self._ipv4(pkt, data, 4)
        if family in _AF_INET6:
            return self._ipv6(pkt, data, 4)
        return None

    def _raw(self, pkt: RawPacket, data: bytes) -> Segment | None:
        if not data:
            return self._malformed(pkt, "empty raw IP packet")
        version = data[0] >> 4
        if version == 4:
            return self._ipv4(pkt, data, 0)
        if version == 6:
            return self._ipv6(pkt, data, 0)
        return self._malformed(pkt, f"raw IP packet with IP version {version}")

    def _dlt12(self, pkt: RawPacket, data: bytes) -> Segment | None:
        # DLT_RAW on most systems, DLT_LOOP on OpenBSD. An IP header starts with 0x4_ or 0x6_;
        # a LOOP header with an address family, whose first byte is 0.
        if data and data[0] == 0:
            return self._loop(pkt, data)
        return self._raw(pkt, data)

    def _raw4(self, pkt: RawPacket, data: bytes) -> Segment | None:
        return self._ipv4(pkt, data, 0)

    def _raw6(self, pkt: RawPacket, data: bytes) -> Segment | None:
        return self._ipv6(pkt, data, 0)

    # -- IP ----------------------------------------------------------------------------------

    def _short(self, pkt: RawPacket, seg: Segment | None, end: int, version: int) -> Segment | None:
        """The IP length field says `end` but the packet has fewer bytes. Cut by the snap length:
        fine, the segment carries what was captured. Otherwise the length is wrong: say so, once
        the segment decoded (a truncated header has said so already)."""
        n = len(pkt.data)
        if seg is not None and pkt.wirelen <= n:
            self._malformed(pkt, f"IPv{version} length says {end} bytes, the packet has {n}")
        elif seg is not None:  # the headers whole, the payload cut short
            seg.cut = end - n
            seg.flags |= CUT
        return seg

    def _ipv4(self, pkt: RawPacket, data: bytes, off: int) -> Segment | None:
        if len(data) - off < 20:
            return self._malformed(pkt, f"IPv4 header truncated ({len(data) - off} bytes)")
        # version and header length, total length, id, flags+offset, protocol, source and
        # destination: read byte by byte (natively, compiled), not by a struct making a tuple
        vihl = data[off]
        hlen = (vihl & 15) << 2
        if vihl >> 4 != 4 or hlen < 20:
            return self._malformed(pkt, f"bad IPv4 version/header length byte {vihl:#04x}")
        if off + hlen > len(data):
            return self._malformed(pkt, f"IPv4 options truncated (header length {hlen})")
        proto = data[off + 9]
        if proto != _TCP:
            if proto in (_UDP, _GRE):
                return self._tunnel4(pkt, data, off, hlen, proto)
            return None
        tlen = data[off + 2] << 8 | data[off + 3]
        ident = data[off + 4] << 8 | data[off + 5]
        frag = data[off + 6] << 8 | data[off + 7]
        src = data[off + 12 : off + 16]
        dst = data[off + 16 : off + 20]
        short = 0
        if tlen == 0:  # segmentation offload: the NIC fills the length in later
            end = len(data)
        elif tlen < hlen:
            return self._malformed(pkt, f"IPv4 total length {tlen} < header length {hlen}")
        else:
            end = off + tlen  # trims Ethernet padding
            if end > len(data):
                short, end = end, len(data)
        if frag & 0x3FFF:  # more fragments, or a non-zero offset
            off += hlen
            key = (4, src, dst, ident, proto)
            whole = self._fragment(pkt, key, (frag & 0x1FFF) << 3, frag & 0x2000, data[off:end])
            if whole is None:
                return None
            seg = self._tcp(pkt, whole[0], 0, len(whole[0]), src, dst)
        else:
            seg = self._tcp(pkt, data, off + hlen, end, src, dst)
        if short:
            return self._short(pkt, seg, short, 4)
        return seg

    def _ipv6(self, pkt: RawPacket, data: bytes, off: int) -> Segment | None:
        if len(data) - off < 40:
            return self._malformed(pkt, f"IPv6 header truncated ({len(data) - off} bytes)")
        vtc, plen, nh, src, dst = _S_IP6.unpack_from(data, off)
        if vtc >> 4 != 6:
            return self._malformed(pkt, f"bad IPv6 version {vtc >> 4}")
        off += 40
        if plen == 0:  # a jumbogram, or segmentation offload: take what was captured
            end = len(data)
        else:
            end = off + plen  # trims Ethernet padding
            if end > len(data):
                seg = self._ipv6_chain(pkt, data, off, len(data), nh, src, dst, False)
                return self._short(pkt, seg, end, 6)
        if nh == _TCP:
            return self._tcp(pkt, data, off, end, src, dst)
        return self._ipv6_chain(pkt, data, off, end, nh, src, dst, False)

    def _ipv6_chain(
        self,
        pkt: RawPacket,
        data: bytes,
        off: int,
        end: int,
        nh: int,
        src: bytes,
        dst: bytes,
        reassembled: bool,
    ) -> Segment | None:
        """Walk IPv6 extension headers from `off` to TCP."""
        while nh != _TCP:
            if nh in _IP6_EXT:
                if off + 8 > end:
                    return self._malformed(pkt, f"IPv6 extension header {nh} truncated")
                nh, size = data[off], (data[off + 1] + 1) << 3
            elif nh == _IP6_AH:
                if off + 8 > end:
                    return self._malformed(pkt, "IPv6 authentication header truncated")
                nh, size = data[off], (data[off + 1] + 2) << 2
            elif nh == _IP6_FRAG:
                if off + 8 > end:
                    return self._malformed(pkt, "IPv6 fragment header truncated")
                nxt, offlg, ident = _S_IP6_FRAG.unpack_from(data, off)
                off += 8
                if not offlg & 0xFFF9 or reassembled:  # an atomic fragment: nothing to join
                    nh = nxt
                    continue
                if nxt != _TCP and nxt not in _IP6_EXT and nxt != _IP6_AH:
                    return None  # fragments of UDP, ICMPv6, ...: not ours to keep
                key = (6, src, dst, ident, 0)
                whole = self._fragment(pkt, key, offlg & 0xFFF8, offlg & 1, data[off:end], nxt)
                if whole is None:
                    return None
                buf, first_nh = whole
                return self._ipv6_chain(pkt, buf, 0, len(buf), first_nh, src, dst, True)
            elif nh in (_UDP, _GRE):
                return self._inside(pkt, data, off, end, nh)
            else:
                return None  # ICMPv6, ESP, no next header, ...
            off += size
            if off > end:
                return self._malformed(pkt, f"IPv6 extension header runs past the payload ({off})")
        return self._tcp(pkt, data, off, end, src, dst)

    # -- tunnels -----------------------------------------------------------------------------

    def _tunnel4(
        self, pkt: RawPacket, data: bytes, off: int, hlen: int, proto: int
    ) -> Segment | None:
        """An IPv4 datagram of UDP or GRE: the packet inside, if it is a tunnel's."""
        if data[off + 6] & 0x3F or data[off + 7]:  # a fragment: tunnels are not reassembled
            return None
        tlen = data[off + 2] << 8 | data[off + 3]
        end = min(off + tlen, len(data)) if tlen else len(data)
        return self._inside(pkt, data, off + hlen, end, proto)

    def _inside(
        self, pkt: RawPacket, data: bytes, off: int, end: int, proto: int
    ) -> Segment | None:
        """The packet a VXLAN, Geneve or GRE header at `off` carries (None: not a tunnel, or
        one too deep); decoded as any other, so its TCP is followed as if captured itself."""
        if off > _MAX_TUNNEL_OFFSET:
            return None
        if proto == _UDP:
            if off + 16 > end:
                return None
            dport = data[off + 2] << 8 | data[off + 3]
            off += 8
            if dport == _VXLAN_PORT:
                if not data[off] & 0x08:  # the I flag: a VNI, and an Ethernet frame follows
                    return None
                return self._ethernet_at(pkt, data, off + 8)
            if dport == _GENEVE_PORT:
                options = (data[off] & 0x3F) << 2
                carried = data[off + 2] << 8 | data[off + 3]
                return self._carried(pkt, data, carried, off + 8 + options)
            return None
        if off + 4 > end:
            return None
        flags = data[off] << 8 | data[off + 1]
        if flags & 0x0007:  # GRE version 1 (PPTP's) or later
            return None
        carried = data[off + 2] << 8 | data[off + 3]
        sequenced = flags & 0x1000
        off += 4 + (4 if flags & 0x8000 else 0) + (4 if flags & 0x2000 else 0)
        off += 4 if sequenced else 0
        if carried == _ERSPAN_2:
            return self._ethernet_at(pkt, data, off + 8 if sequenced else off)
        if carried == _ERSPAN_3:
            if off + 12 > end:
                return None
            subheader = 8 if data[off + 11] & 0x01 else 0  # O: a platform-specific subheader
            return self._ethernet_at(pkt, data, off + 12 + subheader)
        return self._carried(pkt, data, carried, off)

    def _carried(self, pkt: RawPacket, data: bytes, carried: int, off: int) -> Segment | None:
        """A tunnel's payload by its EtherType: an Ethernet frame, or IP (or a VLAN tag)."""
        if carried == _TEB:
            return self._ethernet_at(pkt, data, off)
        return self._ethertype(pkt, data, carried, off)

    def _ethernet_at(self, pkt: RawPacket, data: bytes, off: int) -> Segment | None:
        if len(data) < off + 14:
            return None
        return self._ethertype(pkt, data, data[off + 12] << 8 | data[off + 13], off + 14)

    # -- fragments ---------------------------------------------------------------------------

    def _fragment(
        self,
        pkt: RawPacket,
        key: tuple[int, bytes, bytes, int, int],
        offset: int,
        more: int,
        piece: bytes,
        next_header: int = _TCP,
    ) -> tuple[bytes, int] | None:
        """Add one fragment. Once the datagram is complete: its reassembled payload and the
        header that payload starts with (the first fragment's); until then None."""
        pending = self._pending
        if pending:
            self._expire(pkt.ts)
        d = pending.get(key)
        if d is None:
            d = pending[key] = _Datagram(
                key[0], key[1], key[2], key[3], next_header, pkt.number, pkt.ts
            )
        end = offset + len(piece)
        if key[0] == 4 and end > _MAX_IPV4_DATAGRAM:
            self._drop(key)
            self._malformed(pkt, f"IPv4 fragment ends at byte {end}, past 65515")
            return None
        if offset == 0 and key[0] == 6:
            d.next_header = next_header
        if not more:
            if d.total is not None and d.total != end:
                self._drop(key)
                self._malformed(pkt, f"fragments disagree on the datagram length ({end})")
                return None
            d.total = end
        if d.total is not None and end > d.total:
            self._drop(key)
            self._malformed(pkt, f"a fragment ends at {end}, past the datagram's end")
            return None
        if len(d.pieces) >= _MAX_FRAGMENT_PIECES:  # 8-byte or repeated fragments: a flood
            self._drop(key)
            self.findings.append(self._incomplete(d, "dropped: too many fragments"))
            return None
        d.pieces.append((offset, piece))
        d.size += len(piece)
        self._pending_bytes += len(piece)
        if d.total is not None and d.size >= d.total:  # enough bytes to cover it: try
            whole = self._assemble(d)
            if whole is not None:
                self._drop(key)
                return whole, d.next_header
        self._limit()
        return None

    @staticmethod
    def _assemble(d: _Datagram) -> bytes | None:
        total = d.total
        assert total is not None
        pieces = sorted(d.pieces, key=lambda p: p[0])
        covered = 0
        for offset, piece in pieces:
            if offset > covered:
                return None
            covered = max(covered, offset + len(piece))
        if covered < total:
            return None
        if len(pieces) == 1:
            return pieces[0][1]
        buf = bytearray(total)
        for offset, piece in reversed(d.pieces):  # the first copy of overlapping bytes wins
            buf[offset : offset + len(piece)] = piece
        return bytes(buf)

    def _drop(self, key: tuple[int, bytes, bytes, int, int]) -> _Datagram | None:
        d = self._pending.pop(key, None)
        if d is not None:
            self._pending_bytes -= d.size
        return d

    def _expire(self, now: float) -> None:
        pending = self._pending
        limit = now - self.fragment_timeout
        while pending:
            key, d = next(iter(pending.items()))
            if d.first_ts >= limit:
                break
            self._drop(key)
            self.findings.append(
                self._incomplete(d, f"dropped after {self.fragment_timeout:g} s without the rest")
            )

    def _limit(self) -> None:
        pending = self._pending
        while pending and (
            len(pending) > self.max_fragment_datagrams
            or self._pending_bytes > self.max_fragment_bytes
        ):
            key = next(iter(pending))
            d = self._drop(key)
            assert d is not None
            self.findings.append(
                self._incomplete(d, "dropped: too many fragments pending reassembly")
            )

    # -- TCP -----------------------------------------------------------------------------------

    def _text(self, packed: bytes) -> str:
        """`_addr[packed]`, the last two addresses first."""
        if packed == self._near:
            return self._near_text
        text = self._far_text if packed == self._far else self._addr[packed]
        self._far, self._far_text = self._near, self._near_text
        self._near, self._near_text = packed, text
        return text

    def _tcp(
        self, pkt: RawPacket, data: bytes, off: int, end: int, src: bytes, dst: bytes
    ) -> Segment | None:
        if end - off < 20:
            return self._malformed(pkt, f"TCP header truncated ({max(end - off, 0)} bytes)")
        # source and destination port, seq, ack, data offset, flags: read byte by byte
        # (natively, compiled), not by a struct, whose call makes a tuple of six
        sport = data[off] << 8 | data[off + 1]
        dport = data[off + 2] << 8 | data[off + 3]
        seq = data[off + 4] << 24 | data[off + 5] << 16 | data[off + 6] << 8 | data[off + 7]
        ack = data[off + 8] << 24 | data[off + 9] << 16 | data[off + 10] << 8 | data[off + 11]
        hlen = (data[off + 12] >> 4) << 2
        flags = data[off + 13]
        if hlen < 20 or off + hlen > end:
            return self._malformed(pkt, f"bad TCP header length {hlen} ({end - off} bytes left)")
        return Segment(
            pkt.number,
            pkt.ts,
            (self._text(src), sport),
            (self._text(dst), dport),
            seq,
            ack,
            flags,
            data[off + hlen : end],
        )
