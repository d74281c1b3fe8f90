#!/usr/bin/env python3
"""Build a corpus of damaged captures from clean ones in `captures/`, each with what it must give.

Why: a capture from the field is rarely clean. Files are cut short, snap lengths cut packets,
segments are lost, duplicated, retransmitted and reordered, captures start mid-connection, many
connections interleave and ports are reused. Each case here applies one such damage to a clean
recording, deterministically, and says what the damage must produce: the finding codes and
counts (of the capture, stream and codec layers: what `Dissector` reports), where the placed ones
ride (direction and packet), and which frames must still be recovered, in terms of the undamaged
capture's frames (the same ones, those of kept packets, a prefix, ...).

The expectations come from the damage itself (which packet was dropped, where the file was cut,
what the TCP sequence numbers say), never from running amqpscope on the result.

    python3 tools/damage.py OUTDIR          # writes OUTDIR/*.pcap[ng] and OUTDIR/expected.json

Nothing is committed: the test builds the corpus in a temporary directory.
"""

from __future__ import annotations

import json
import struct
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
SERVER_PORT = 5672
PCAP_HEADER = 24
RECORD = struct.Struct("<IIII")  # the sources are little-endian microsecond pcaps
ETHER = 14


@dataclass
class Packet:
    """One pcap record, with the TCP facts damage needs (Ethernet, IPv4, TCP)."""

    sec: int
    usec: int
    data: bytes
    wirelen: int

    @property
    def ip(self) -> int:
        return ETHER

    @property
    def tcp(self) -> int:
        return ETHER + (self.data[ETHER] & 15) * 4

    @property
    def payload_at(self) -> int:
        return self.tcp + (self.data[self.tcp + 12] >> 4) * 4

    @property
    def payload(self) -> bytes:
        total = struct.unpack_from(">H", self.data, ETHER + 2)[0]
        return self.data[self.payload_at : ETHER + total]

    @property
    def ports(self) -> tuple[int, int]:
        return struct.unpack_from(">HH", self.data, self.tcp)

    @property
    def seq(self) -> int:
        return struct.unpack_from(">I", self.data, self.tcp + 4)[0]

    @property
    def c2s(self) -> bool:
        return self.ports[1] == SERVER_PORT

    @property
    def direction(self) -> str:
        return "c2s" if self.c2s else "s2c"

    def with_client_port(self, port: int) -> Packet:
        """The same packet between another client port and the server."""
        data = bytearray(self.data)
        struct.pack_into(">H", data, self.tcp + (2 if not self.c2s else 0), port)
        return Packet(self.sec, self.usec, bytes(data), self.wirelen)

    def with_payload_byte(self, at: int, value: int) -> Packet:
        data = bytearray(self.data)
        data[self.payload_at + at] = value
        return Packet(self.sec, self.usec, bytes(data), self.wirelen)

    def shifted(self, seconds: float) -> Packet:
        usec = self.sec * 1_000_000 + self.usec + round(seconds * 1_000_000)
        return Packet(usec // 1_000_000, usec % 1_000_000, self.data, self.wirelen)


def read_pcap(path: Path) -> tuple[bytes, list[Packet]]:
    raw = path.read_bytes()
    header = raw[:PCAP_HEADER]
    if header[:4] != b"\xd4\xc3\xb2\xa1" or struct.unpack_from("<I", header, 20)[0] != 1:
        raise ValueError(f"{path.name}: not a little-endian microsecond Ethernet pcap")
    out = []
    pos = PCAP_HEADER
    while pos < len(raw):
        sec, usec, caplen, wirelen = RECORD.unpack_from(raw, pos)
        out.append(Packet(sec, usec, raw[pos + 16 : pos + 16 + caplen], wirelen))
        pos += 16 + caplen
    return header, out


def write_pcap(header: bytes, packets: list[Packet]) -> bytes:
    parts = [header]
    for p in packets:
        parts.append(RECORD.pack(p.sec, p.usec, len(p.data), p.wirelen) + p.data)
    return b"".join(parts)


# -- independent framing: where frames start and end in a direction's payloads ---------------------
def frame_sizes(payload: bytes, version: str) -> list[int] | None:
    """The sizes of the whole frames `payload` consists of, or None if it does not split into
    whole frames (0-9-1: type, channel, size, payload, 0xCE; 1.0: a 4-byte size)."""
    sizes = []
    pos = 0
    while pos < len(payload):
        if payload[pos : pos + 4] == b"AMQP":
            size = 8
        elif version == "1.0":
            if len(payload) - pos < 8:
                return None
            size = struct.unpack_from(">I", payload, pos)[0]
        else:
            if len(payload) - pos < 7:
                return None
            size = 7 + struct.unpack_from(">I", payload, pos + 3)[0] + 1
            if pos + size <= len(payload) and payload[pos + size - 1] != 0xCE:
                return None
        if size < 8 or pos + size > len(payload):
            return None
        sizes.append(size)
        pos += size
    return sizes


def data_packets(packets: list[Packet], c2s: bool) -> list[int]:
    """Indexes of the packets with payload in one direction."""
    return [i for i, p in enumerate(packets) if p.c2s == c2s and p.payload]


CONTENT_METHODS = frozenset(((60, 40), (60, 50), (60, 60), (60, 71)))  # carry a message


def frames_091(payload: bytes) -> list[tuple[int, tuple[int, int] | None]]:
    """(frame type, (class, method) for a method frame) of each whole 0-9-1 frame in `payload`."""
    out = []
    pos = 0
    for size in frame_sizes(payload, "0-9-1") or []:
        if payload[pos : pos + 4] != b"AMQP":
            kind = payload[pos]
            ids = struct.unpack_from(">HH", payload, pos + 7) if kind == 1 else None
            out.append((kind, ids))
        pos += size
    return out


def plain_methods(payload: bytes) -> bool:
    """Whole 0-9-1 method frames only, none of them one that carries a message (so losing it
    leaves no content frame without its method)."""
    frames = frames_091(payload)
    return bool(frames) and all(k == 1 and ids not in CONTENT_METHODS for k, ids in frames)


def middle_packet(packets: list[Packet], c2s: bool, version: str) -> int:
    """A data packet of one direction in the middle of the conversation that holds whole frames
    (for 0-9-1: plain methods, and the next data packet starts with a method), with at least
    three data packets after it in that direction (so framing can find its feet again)."""
    candidates = data_packets(packets, c2s)
    half = len(candidates) // 2
    for i in candidates[half:] + candidates[:half]:
        after = [j for j in candidates if j > i]
        if len(after) < 3 or packets[i].payload[:4] == b"AMQP":
            continue
        if version == "1.0":
            if frame_sizes(packets[i].payload, version):
                return i
        elif plain_methods(packets[i].payload) and packets[after[0]].payload[0] == 1:
            return i
    raise ValueError("no packet of whole frames in the middle")


def ack_of(p: Packet) -> int:
    return struct.unpack_from(">I", p.data, p.tcp + 8)[0]


def after(a: int, b: int) -> bool:
    """Sequence number `a` is past `b` (modulo 2**32)."""
    return 0 < (a - b) % (1 << 32) < 1 << 31


def first_after(packets: list[Packet], hole: int, c2s: bool) -> int:
    """The 1-based number of the first packet of one direction with data after a hole at
    sequence number `hole`: the gap is reported there and the frames after it ride the packets
    that brought them (`stream/tcp.py`), as Wireshark numbers them, however much later the
    hole is declared missing (once the peer has acknowledged past it)."""
    return next(
        i + 1 for i, p in enumerate(packets) if p.c2s == c2s and p.payload and after(p.seq, hole)
    )


def quiet(packets: list[Packet], k: int) -> bool:
    """Whether every message begun before packet index `k` is complete: the last frame of each
    direction before it is a method that carries none (0-9-1)."""
    for c2s in (True, False):
        last = [j for j in data_packets(packets[:k], c2s)]
        if not last:
            return False
        frames = frames_091(packets[last[-1]].payload)
        if not frames or frames[-1][0] != 1 or frames[-1][1] in CONTENT_METHODS:
            return False
    return True


# -- cases ------------------------------------------------------------------------------------
@dataclass
class Where:
    """A finding that rides a frame: its code, the frame's direction and packet (1-based, in the
    damaged file's numbering)."""

    code: str
    direction: str
    packet: int


@dataclass
class Case:
    """One damaged capture and what it must give."""

    name: str
    source: str
    file: str = ""
    description: str = ""
    #: finding code -> count, over capture, stream and codec findings (placed or not)
    findings: dict[str, int] = field(default_factory=dict)
    #: placed findings: on which frame they must ride
    where: list[Where] = field(default_factory=list)
    #: a substring the message of a finding must hold: code -> text
    says: dict[str, str] = field(default_factory=dict)
    #: how the frames compare with the source's: "same" (every frame, per direction, in order),
    #: "kept" (the source's frames of the packets in `kept`, mapped), "none" (not checked)
    frames: str = "same"
    #: for "kept": source packet numbers (1-based) whose frames must be recovered
    kept: list[int] = field(default_factory=list)
    #: how many connections carry AMQP
    connections: int = 1
    #: for "same": source file -> how many of the connections are copies of it (default: one
    #: connection, of `source`)
    copies: dict[str, int] = field(default_factory=dict)


Builder = Callable[[Path], tuple[Case, bytes]]
CASES: list[Builder] = []


def case(fn: Builder) -> Builder:
    CASES.append(fn)
    return fn


P091 = "091-publish-consume.pcap"
P10 = "10-send-receive.pcap"
PNG = "pcapng.pcapng"


@case
def truncated_file(src: Path) -> tuple[Case, bytes]:
    header, packets = read_pcap(src / P091)
    whole = write_pcap(header, packets)
    # packets kept whole: from two thirds on, the first point where no message is half-sent
    keep = next(k for k in range(len(packets) * 2 // 3, len(packets)) if quiet(packets, k))
    offset = len(write_pcap(header, packets[:keep]))
    cut = offset + 16 + len(packets[keep].data) // 2  # the next record is cut in its middle
    return Case(
        "truncated-file",
        P091,
        description=f"the file ends in the middle of record {keep + 1}",
        findings={"capture.truncated": 1},
        says={"capture.truncated": f"at offset {offset}"},
        frames="kept",
        kept=list(range(1, keep + 1)),
    ), whole[:cut]


@case
def truncated_header(src: Path) -> tuple[Case, bytes]:
    header, packets = read_pcap(src / P091)
    return Case(
        "truncated-header",
        P091,
        description="the file ends inside the 16-byte header of record 5",
        findings={"capture.truncated": 1},
        frames="kept",
        kept=[1, 2, 3, 4],
    ), write_pcap(header, packets[:4]) + RECORD.pack(1, 2, 3, 4)[:9]


def _pcapng_blocks(raw: bytes) -> list[tuple[int, int, int]]:
    """(offset, type, length) of each block of a little-endian pcapng file."""
    out = []
    pos = 0
    while pos + 8 <= len(raw):
        btype, length = struct.unpack_from("<II", raw, pos)
        out.append((pos, btype, length))
        pos += length
    return out


@case
def pcapng_overrun(src: Path) -> tuple[Case, bytes]:
    raw = bytearray((src / PNG).read_bytes())
    epbs = [b for b in _pcapng_blocks(bytes(raw)) if b[1] == 6]
    at = epbs[10][0]
    struct.pack_into("<I", raw, at + 4, 0x7FFFFF00)  # a length far past the end of the file
    return Case(
        "pcapng-overrun",
        PNG,
        description="the 11th Enhanced Packet Block claims 2 GiB: the file ends inside it",
        findings={"capture.truncated": 1},
        says={"capture.truncated": f"at offset {at}"},
        frames="kept",
        kept=list(range(1, 11)),
    ), bytes(raw)


@case
def pcapng_mismatch(src: Path) -> tuple[Case, bytes]:
    raw = bytearray((src / PNG).read_bytes())
    epbs = [b for b in _pcapng_blocks(bytes(raw)) if b[1] == 6]
    at, _, length = epbs[20]
    struct.pack_into("<I", raw, at + 4, length + 8)  # leading and trailing lengths disagree
    return Case(
        "pcapng-mismatch",
        PNG,
        description="the 21st Enhanced Packet Block's length disagrees with its trailing copy",
        findings={"capture.damaged": 1},
        says={"capture.damaged": f"at offset {at}"},
        frames="kept",
        kept=list(range(1, 21)),
    ), bytes(raw)


@case
def snaplen_cut(src: Path) -> tuple[Case, bytes]:
    header, packets = read_pcap(src / P091)
    i = middle_packet(packets, True, "0-9-1")
    p = packets[i]
    keep = 5  # less than any frame: the packet's frames are all lost
    cut = Packet(p.sec, p.usec, p.data[: p.payload_at + keep], p.wirelen)
    damaged = [*packets[:i], cut, *packets[i + 1 :]]
    at = first_after(damaged, (p.seq + keep) % (1 << 32), True)
    # the IP length tells the cut at once: the gap rides the connection's next frame, of
    # either direction: the next packet with data (its packets hold whole frames)
    nxt = next(n for n in range(i + 1, len(damaged)) if damaged[n].payload)
    return Case(
        "snaplen-cut",
        P091,
        description=f"packet {i + 1}'s capture stops {keep} bytes into its TCP payload",
        findings={"capture.snaplen": 1, "tcp.gap": 1, "amqp.resync": 1},
        where=[
            Where("tcp.gap", "c2s" if damaged[nxt].c2s else "s2c", nxt + 1),
            Where("amqp.resync", "c2s", at),
        ],
        says={
            "tcp.gap": f"cut packet {i + 1}'s payload ({keep} of {len(p.payload)} bytes kept)",
            "capture.snaplen": "packet",
        },
        frames="kept",
        kept=[n + 1 for n in range(len(packets)) if n != i],
    ), write_pcap(header, damaged)


@case
def lost_segment(src: Path) -> tuple[Case, bytes]:
    header, packets = read_pcap(src / P10)
    i = middle_packet(packets, False, "1.0")
    kept = packets[:i] + packets[i + 1 :]
    at = first_after(kept, packets[i].seq, False)
    return Case(
        "lost-segment",
        P10,
        description=f"packet {i + 1} (s2c, whole frames) is not in the capture",
        findings={"tcp.gap": 1, "amqp.resync": 1},
        where=[Where("tcp.gap", "s2c", at), Where("amqp.resync", "s2c", at)],
        says={"tcp.gap": f"{len(packets[i].payload)} bytes of s2c not captured"},
        frames="kept",
        kept=[n + 1 for n in range(len(packets)) if n != i],
    ), write_pcap(header, kept)


@case
def duplicated(src: Path) -> tuple[Case, bytes]:
    header, packets = read_pcap(src / P091)
    out = []
    for i, p in enumerate(packets):
        out.append(p)
        if p.payload and i % 3 == 0:
            out.append(p)  # captured twice (a span port, or two interfaces)
    return Case(
        "duplicated",
        P091,
        description="every third data packet appears twice in a row",
    ), write_pcap(header, out)


@case
def retransmitted(src: Path) -> tuple[Case, bytes]:
    header, packets = read_pcap(src / P091)
    out = list(packets)
    data = data_packets(packets, True)
    for n, i in enumerate(data[2::4]):
        late = min(i + 6 + n, len(out))
        out.insert(late, packets[i].shifted(0.0005))  # the same bytes again, later
    return Case(
        "retransmitted",
        P091,
        description="some client segments are sent again a few packets later",
    ), write_pcap(header, out)


@case
def retransmitted_different(src: Path) -> tuple[Case, bytes]:
    header, packets = read_pcap(src / P091)
    i = middle_packet(packets, True, "0-9-1")
    copy = packets[i].with_payload_byte(len(packets[i].payload) - 2, 0x5A)
    out = [*packets[: i + 1], copy, *packets[i + 1 :]]  # before the peer acknowledged it
    return Case(
        "retransmitted-different",
        P091,
        description=f"packet {i + 1} is sent again at once with one byte changed: the first copy "
        "wins",
        findings={"tcp.overlap-mismatch": 1},
    ), write_pcap(header, out)


@case
def reordered(src: Path) -> tuple[Case, bytes]:
    header, packets = read_pcap(src / P10)
    out = list(packets)
    swapped = 0
    for c2s in (True, False):
        data = data_packets(packets, c2s)
        for a, b in zip(data[0::2], data[1::2], strict=False):
            between = packets[a + 1 : b]
            if any(p.c2s != c2s and after(ack_of(p), packets[a].seq) for p in between):
                continue  # the peer acknowledged a's bytes first: b cannot have overtaken them
            out.remove(packets[b])
            out.insert(out.index(packets[a]), packets[b])  # the later segment is captured first
            swapped += 1
    assert swapped >= 3, swapped
    return Case(
        "reordered",
        P10,
        description=f"{swapped} data segments are captured before the one that precedes them",
    ), write_pcap(header, out)


@case
def mid_stream(src: Path) -> tuple[Case, bytes]:
    header, packets = read_pcap(src / P091)
    # from the middle on, the first packet from which each direction's data starts with a method
    # and no message is half-sent
    start = next(
        k
        for k in range(len(packets) // 2, len(packets))
        if quiet(packets, k)
        and all(
            any(j >= k for j in data_packets(packets, c2s))
            and packets[next(j for j in data_packets(packets, c2s) if j >= k)].payload[0] == 1
            for c2s in (True, False)
        )
    )
    return Case(
        "mid-stream",
        P091,
        description=f"the capture starts at packet {start + 1}, mid-connection",
        frames="kept",
        kept=list(range(start + 1, len(packets) + 1)),
    ), write_pcap(header, packets[start:])


@case
def interleaved(src: Path) -> tuple[Case, bytes]:
    header, a = read_pcap(src / P091)
    _, b = read_pcap(src / P10)
    copies = []
    for n in range(24):
        source = a if n % 2 == 0 else b
        copies.append([p.with_client_port(40000 + n).shifted(n * 0.0001) for p in source])
    out = []
    for i in range(max(len(c) for c in copies)):  # round robin: each connection's next packet
        out.extend(c[i] for c in copies if i < len(c))
    return Case(
        "interleaved",
        f"{P091}+{P10}",
        description="24 connections (12 of each source, own client ports) interleaved packet "
        "by packet",
        connections=24,
        copies={P091: 12, P10: 12},
    ), write_pcap(header, out)


@case
def port_reused(src: Path) -> tuple[Case, bytes]:
    header, a = read_pcap(src / P091)
    _, b = read_pcap(src / P10)
    port = a[0].ports[0]
    later = (a[-1].sec + 1) - b[0].sec
    second = [p.with_client_port(port).shifted(later) for p in b]
    return Case(
        "port-reused",
        f"{P091}+{P10}",
        description="a 1.0 connection reuses the client port of a closed 0-9-1 one, a second later",
        connections=2,
        copies={P091: 1, P10: 1},
    ), write_pcap(header, a + second)


@case
def bad_frame_end(src: Path) -> tuple[Case, bytes]:
    header, packets = read_pcap(src / P091)
    i = middle_packet(packets, True, "0-9-1")
    sizes = frame_sizes(packets[i].payload, "0-9-1")
    assert sizes
    bad = packets[i].with_payload_byte(sizes[0] - 1, 0x00)
    return Case(
        "bad-frame-end",
        P091,
        description=f"the first frame of packet {i + 1} ends in 0x00, not 0xCE",
        findings={"amqp.bad-frame-end": 1},
        where=[Where("amqp.bad-frame-end", "c2s", i + 1)],
    ), write_pcap(header, [*packets[:i], bad, *packets[i + 1 :]])


def build(out: Path, src: Path = CAPTURES) -> list[Case]:
    """Write every case's file into `out` and `expected.json`; return the cases."""
    out.mkdir(parents=True, exist_ok=True)
    cases = []
    for builder in CASES:
        made, data = builder(src)
        ext = ".pcapng" if made.source == PNG else ".pcap"
        made.file = made.name + ext
        (out / made.file).write_bytes(data)
        cases.append(made)
    doc = {c.name: asdict(c) for c in cases}
    (out / "expected.json").write_text(json.dumps(doc, indent=2) + "\n")
    return cases


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: damage.py OUTDIR")
    for c in build(Path(sys.argv[1])):
        print(f"{c.file:32} {c.description}")
