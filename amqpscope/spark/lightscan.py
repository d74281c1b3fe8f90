"""A lighter `plan.scan` for the files where it gives the same answer: plain pcap, IPv4 over
Ethernet or Linux cooked (SLL, SLL2) headers, and TCP so clean that reassembly has nothing to do.

The planner needs little of a file: its connections (numbered as `TcpReassembler` numbers them),
who opened them, their first packet and times, how they ended, whether either side's first bytes
were the AMQP protocol header, and their TCP sequence numbers. Reading that through
`open_capture`, `SegmentDecoder` and `TcpReassembler` cost 5.6 us a packet, a quarter of what
`read --json` spends on one, and it is paid for every file of a session's first query. Here the
record, IP and TCP headers are read straight from the file's bytes and each connection is
followed as the reassembler would follow it while every segment comes in order.

Anything else (pcapng, gzip, another link type, VLAN tags, IPv6, IP fragments or damage, data or
a FIN that is not where the stream expects it, a SYN on a live connection but the handshake's
SYN-ACK, a keep-alive anchoring a mid-stream direction, a record cut short) makes `scan` return
None, and the caller scans the file the full way: the answer is then the reassembler's, never a
guess. A test holds both ways to the same scans on every bundled capture and rotated cuts.
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from typing import Any, BinaryIO

from amqpscope.capture.files import PCAP_MAGICS, PCAP_MAX_RECORD
from amqpscope.capture.linklayer import TUNNEL_PROTOCOLS, TUNNEL_UDP_PORTS
from amqpscope.capture.packet import ACK, FIN, RST, SYN
from amqpscope.spark.plan import PROTOCOL_HEADER, Scan, file_parts, note_open, note_sequence
from amqpscope.spark.stitch import flow_pair
from amqpscope.stream.tcp import MAX_CLOSED, TIME_WAIT, guess_server

_MASK = (1 << 32) - 1  # sequence numbers are modulo 2**32
#: link type -> offsets of the EtherType and of the IP header: Ethernet, Linux cooked (SLL and
#: SLL2, what `tcpdump -i any` writes)
_LINKS = {1: (12, 14), 113: (14, 16), 276: (0, 20)}
_IPV4 = 0x0800
_IPV6 = 0x86DD
_VLAN = frozenset((0x8100, 0x88A8, 0x9100, 0x9200))
_TCP = 6
_UDP = 17
#: bytes read at a time
_BLOCK = 1 << 22


class _Unclean(Exception):
    """Something the light scan does not follow: scan the file the full way."""


class _Half:
    """One direction of a live connection: the next sequence number it must send."""

    __slots__ = ("conn", "done", "isn", "key", "nxt", "peer", "s2c")

    def __init__(self, conn: int, s2c: bool) -> None:
        self.conn = conn
        self.s2c = s2c
        self.nxt: int | None = None
        self.isn: int | None = None
        self.done = False  # its FIN came, in order
        self.peer: _Half = self
        self.key: tuple[bytes, int, bytes, int] | None = None  # its flow (client to server's)


def scan(capture: str, local: str, here: str) -> Scan | None:
    """`plan.scan`'s answer for the file at `here`, or None when the file is not one this
    scan follows (see the module docstring)."""
    try:
        with open(here, "rb") as f:
            return _scan(capture, local, f)
    except (OSError, ValueError, struct.error, IndexError, _Unclean):
        return None


def _more(f: BinaryIO, data: bytes, off: int, need: int) -> tuple[bytes, int, int, bool]:
    """`data` from `off` on, with what follows it in `f`: at least `need` bytes unless the
    file ends first (data, its size, 0, whether it ended)."""
    want = max(_BLOCK, need - (len(data) - off))
    more = f.read(want)
    data = data[off:] + more
    return data, len(data), 0, len(more) < want


def _scan(capture: str, local: str, f: BinaryIO) -> Scan:
    # read in blocks, not mapped: a file cut short while it is scanned then ends early (a
    # record cut short: the full scan takes over) where a mapping would raise SIGBUS
    data = f.read(_BLOCK)
    eof = len(data) < _BLOCK
    size = len(data)
    magic = bytes(data[:4])
    known = PCAP_MAGICS.get(magic)
    if known is None or size < 24:
        raise _Unclean
    endian, units = known
    linktype = struct.unpack_from(endian + "I", data, 20)[0] & 0x03FFFFFF
    link = _LINKS.get(linktype)
    if link is None:
        raise _Unclean
    at, ip_at = link
    record = struct.Struct(endian + "IIII").unpack_from
    ip4 = struct.Struct("!BxHxxHxBxx4s4s").unpack_from
    tcp4 = struct.Struct("!HHIIBB").unpack_from

    # conn -> [client, server, role_from, first packet, first ts, last ts, closed, amqp, Edge]
    # (as `plan._scan` keeps them)
    conns: dict[int, list[Any]] = {}
    latest: dict[tuple[str, str], int] = {}  # endpoint pair -> its newest connection
    halves: dict[tuple[bytes, int, bytes, int], _Half] = {}  # live connections' directions
    closed: OrderedDict[tuple[bytes, int, bytes, int], float] = OrderedDict()  # tombstones
    texts: dict[bytes, str] = {}
    # flow -> (src text, endpoint pair, src endpoint, dst endpoint)
    flows: dict[tuple[bytes, int, bytes, int], tuple[str, tuple[str, str], Any, Any]] = {}
    seqs: dict[int, dict[str, list[int]]] = {}
    next_id = 1
    first_ts: float | None = None
    number = 0
    off = 24

    def close(conn: int, how: str, ts: float) -> None:
        info = conns[conn]
        if not info[6]:
            info[6] = how
        flow = info[9].key
        halves.pop(flow, None)
        back = (flow[2], flow[3], flow[0], flow[1])
        halves.pop(back, None)
        closed[flow] = ts
        closed[back] = ts
        while len(closed) > MAX_CLOSED:
            closed.popitem(last=False)

    while True:
        if size - off < 16 and not eof:  # the next record's header, then its bytes, in `data`
            data, size, off, eof = _more(f, data, off, 16)
        if off >= size:
            break
        if off + 16 > size:
            raise _Unclean  # a record header cut short
        sec, frac, caplen, _ = record(data, off)
        if caplen > PCAP_MAX_RECORD:
            raise _Unclean
        if size - off < 16 + caplen and not eof:
            data, size, off, eof = _more(f, data, off, 16 + caplen)
        off += 16
        end = off + caplen
        if end > size:
            raise _Unclean
        number += 1
        ts = (sec * units + frac) / units
        if first_ts is None:
            first_ts = ts
        base = off
        off = end
        if caplen < ip_at:
            raise _Unclean
        etype = data[base + at] << 8 | data[base + at + 1]
        if etype != _IPV4:
            if etype == _IPV6 or etype in _VLAN:
                raise _Unclean
            continue  # not IP: the segment decoder skips it too
        o = base + ip_at
        if end - o < 20:
            raise _Unclean
        vihl, tlen, frag, proto, src, dst = ip4(data, o)
        hlen = (vihl & 15) << 2
        if vihl >> 4 != 4 or hlen < 20 or o + hlen > end:
            raise _Unclean
        if proto != _TCP:
            if proto in TUNNEL_PROTOCOLS and (
                proto != _UDP or (data[o + hlen + 2] << 8 | data[o + hlen + 3]) in TUNNEL_UDP_PORTS
            ):
                raise _Unclean  # a tunnel: the segment decoder opens it
            continue
        if tlen < hlen or o + tlen > end or frag & 0x3FFF:
            raise _Unclean  # offload lengths, cut by the snap length, fragments
        t = o + hlen
        stop = o + tlen
        if stop - t < 20:
            raise _Unclean
        sport, dport, seq, ack, doff, flags = tcp4(data, t)
        thlen = (doff >> 4) << 2
        if thlen < 20 or t + thlen > stop:
            raise _Unclean
        start = t + thlen
        size_ = stop - start
        key = (src, sport, dst, dport)
        flow = flows.get(key)
        if flow is None:
            for packed in (src, dst):
                if packed not in texts:
                    texts[packed] = ".".join(map(str, packed))
            a, b = (texts[src], sport), (texts[dst], dport)
            src_text = f"{a[0]}:{sport}"
            flow = flows[key] = (src_text, flow_pair(src_text, f"{b[0]}:{dport}"), a, b)
        h = halves.get(key)
        opened: _Half | None = None
        if flags & SYN:
            if flags & (FIN | RST) or size_:
                raise _Unclean
            if h is not None:
                # only the handshake's SYN-ACK, answering the client's SYN, belongs to it
                p = h.peer
                if not (
                    flags & ACK
                    and h.s2c
                    and conns[h.conn][2] == "syn"
                    and h.isn is None
                    and h.nxt is None
                    and p.isn is not None
                    and (ack - 1) & _MASK == p.isn
                ):
                    raise _Unclean
                h.isn = seq
                h.nxt = (seq + 1) & _MASK
            else:
                if flags & ACK:
                    client, server = flow[3], flow[2]
                else:
                    client, server = flow[2], flow[3]
                opened = h = _open_half(key, client == flow[2], next_id)
                next_id += 1
                h.isn = seq
                h.nxt = (seq + 1) & _MASK
                if flags & ACK:
                    h.peer.isn = (ack - 1) & _MASK
                    h.peer.nxt = ack
                _note_open(conns, latest, opened, client, server, "syn", number, ts, key)
                closed.pop(key, None)
                closed.pop((dst, dport, src, sport), None)
                halves[key] = h
                halves[(dst, dport, src, sport)] = h.peer
        else:
            skip = False
            if h is None:
                closed_at = closed.get(key)
                if closed_at is not None:
                    if ts - closed_at <= TIME_WAIT:
                        skip = True
                    else:
                        closed.pop(key, None)
                        closed.pop((dst, dport, src, sport), None)
                if not skip and flags & RST:
                    skip = True
                if not skip:
                    server = guess_server(flow[2], flow[3])
                    client = flow[2] if server == flow[3] else flow[3]
                    opened = h = _open_half(key, client == flow[2], next_id)
                    next_id += 1
                    _note_open(conns, latest, opened, client, server, "guess", number, ts, key)
                    closed.pop(key, None)
                    closed.pop((dst, dport, src, sport), None)
                    halves[key] = h
                    halves[(dst, dport, src, sport)] = h.peer
            if not skip:
                assert h is not None
                if flags & RST:
                    close(h.conn, "rst", ts)
                else:
                    if h.nxt is None:  # the first segment this way of a mid-stream connection
                        if size_ == 1 and flags == ACK:
                            raise _Unclean  # a keep-alive's byte, maybe
                        h.nxt = seq
                    if h.done:
                        if size_ or flags & FIN:
                            raise _Unclean
                    else:
                        if size_:
                            if seq != h.nxt:
                                raise _Unclean
                            info = conns[h.conn]
                            info[5] = ts
                            if not info[7] and data[start : start + 4] == PROTOCOL_HEADER:
                                info[7] = True
                            h.nxt = (seq + size_) & _MASK
                        if flags & FIN:
                            if (seq + size_) & _MASK != h.nxt:
                                raise _Unclean
                            h.done = True
                            h.nxt = (h.nxt + 1) & _MASK
                            if h.peer.done:
                                close(h.conn, "fin", ts)
        # the TCP sequence numbers of the pair's newest connection (`rows._sequence`)
        conn = latest.get(flow[1])
        if conn is None:
            continue
        after = (seq + size_ + (flags & SYN and 1) + (flags & FIN and 1)) & _MASK
        note_sequence(seqs, conns, conn, flow[0], seq, after)
    # the end of the file: a connection still open ends "fin" if either side sent one
    for h in halves.values():
        info = conns[h.conn]
        if not info[6]:
            info[6] = "fin" if h.done or h.peer.done else "eof"
    for info in conns.values():
        del info[9:]
    return Scan(capture, local, first_ts, file_parts(capture, local, conns))


def _open_half(key: tuple[bytes, int, bytes, int], from_client: bool, conn: int) -> _Half:
    """The two directions of a new connection; the one `key` goes."""
    mine, theirs = _Half(conn, not from_client), _Half(conn, from_client)
    mine.peer, theirs.peer = theirs, mine
    return mine


def _note_open(
    conns: dict[int, list[Any]],
    latest: dict[tuple[str, str], int],
    h: _Half,
    client: Any,
    server: Any,
    role_from: str,
    number: int,
    ts: float,
    key: tuple[bytes, int, bytes, int],
) -> None:
    client_text, server_text = f"{client[0]}:{client[1]}", f"{server[0]}:{server[1]}"
    c2s = h.peer if h.s2c else h
    c2s.key = key if not h.s2c else (key[2], key[3], key[0], key[1])
    info = note_open(conns, latest, h.conn, client_text, server_text, role_from, number, ts)
    info.append(c2s)  # the entry's [9]: its client's direction, while the scan follows it
