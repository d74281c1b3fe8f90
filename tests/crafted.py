"""Captures made in tests from recorded ones: a frame's bytes changed in place (same length, so
TCP still follows), written back with amqpscope's own writer (never committed)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from amqpscope.capture.files import open_capture
from amqpscope.capture.packet import RawPacket
from amqpscope.capture.writer import CaptureWriter
from amqpscope.dissect import Dissector

CAPTURES = Path(__file__).resolve().parent.parent / "captures"


def rewrite(source: Path, target: Path, change: Callable[[object], bytes | None]) -> Path:
    """`source` with each frame `change(frame)` returns new bytes for (same length) replaced in
    the packet that carried it (frames inside one packet only)."""
    with open_capture(str(source)) as capture:
        frames = list(Dissector(carriers=True).run(capture))
    edits: dict[int, list[tuple[bytes, bytes]]] = {}
    for frame in frames:
        new = change(frame)
        if new is None:
            continue
        assert len(new) == len(frame.data) and frame.carriers and len(frame.carriers) == 1
        edits.setdefault(frame.packet, []).append((frame.data, new))
    with open_capture(str(source)) as capture, target.open("wb") as out:
        writer = CaptureWriter(out, capture, "pcap")
        for raw in capture:
            data = raw.data
            for old, new in edits.get(raw.number, ()):
                assert old in data
                data = data.replace(old, new, 1)
            writer.write(RawPacket(raw.number, raw.ts, raw.linktype, data, raw.wirelen))
        writer.close()
    return target


def drop(source: Path, target: Path, keep: Callable[[RawPacket], bool]) -> Path:
    """`source` without the packets `keep` refuses."""
    with open_capture(str(source)) as capture, target.open("wb") as out:
        writer = CaptureWriter(out, capture, "pcap")
        for raw in capture:
            if keep(raw):
                writer.write(raw)
        writer.close()
    return target


def with_payload(source: Path, target: Path, number: int, payload: bytes) -> Path:
    """`source` with packet `number` (Ethernet, IPv4, TCP) carrying `payload` as its TCP
    payload instead of what it had (its IP length fixed; checksums, which amqpscope and
    tshark do not check by default, left as they were)."""
    with open_capture(str(source)) as capture, target.open("wb") as out:
        writer = CaptureWriter(out, capture, "pcap")
        for raw in capture:
            if raw.number == number:
                data = raw.data
                ip = 14
                ihl = (data[ip] & 0x0F) * 4
                tcp = ip + ihl
                offset = (data[tcp + 12] >> 4) * 4
                head = bytearray(data[: tcp + offset])
                head[ip + 2 : ip + 4] = (ihl + offset + len(payload)).to_bytes(2, "big")
                data = bytes(head) + payload
                raw = RawPacket(raw.number, raw.ts, raw.linktype, data, len(data))
            writer.write(raw)
        writer.close()
    return target


def _tcp(data: bytes) -> tuple[int, int, tuple[bytes, bytes, int, int]]:
    """(offset of the TCP header, of the payload, (src ip, dst ip, src port, dst port))."""
    ip = 14
    ihl = (data[ip] & 0x0F) * 4
    tcp = ip + ihl
    ports = (
        int.from_bytes(data[tcp : tcp + 2], "big"),
        int.from_bytes(data[tcp + 2 : tcp + 4], "big"),
    )
    flow = (data[ip + 12 : ip + 16], data[ip + 16 : ip + 20], *ports)
    return tcp, tcp + (data[tcp + 12] >> 4) * 4, flow


def without(source: Path, target: Path, number: int) -> Path:
    """`source` as if packet `number`'s TCP payload (Ethernet, IPv4) had never been sent: the
    packet is left out, and the later sequence numbers of its direction (and the other
    direction's acknowledgements) move back by its length, so TCP sees no gap."""
    with open_capture(str(source)) as capture:
        raws = list(capture)
    removed = next(r for r in raws if r.number == number)
    _, start, flow = _tcp(removed.data)
    size = len(removed.data) - start
    back = (flow[1], flow[0], flow[3], flow[2])
    with open_capture(str(source)) as capture, target.open("wb") as out:
        writer = CaptureWriter(out, capture, "pcap")
        for raw in capture:
            if raw.number == number:
                continue
            data = bytearray(raw.data)
            tcp, _, this = _tcp(raw.data)
            if raw.number > number and this in (flow, back):
                field = tcp + 4 if this == flow else tcp + 8
                value = int.from_bytes(data[field : field + 4], "big")
                data[field : field + 4] = ((value - size) % 2**32).to_bytes(4, "big")
            writer.write(RawPacket(raw.number, raw.ts, raw.linktype, bytes(data), raw.wirelen))
        writer.close()
    return target
