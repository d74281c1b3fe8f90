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
