"""Fuzz targets: the capture readers, TCP reassembly and both decoders under hypothesis-made
damage, seeded from the real traffic in `captures/`.

Each target feeds one layer mutated input (bit flips, changed bytes, cuts, inflated length and
size fields, spliced garbage) and checks what every layer promises: nothing raises but the
documented one-line errors, damage is a finding, and what is kept stays bounded.

The suite runs a bounded number of examples per target. For a longer run raise it:

    AMQPSCOPE_FUZZ_EXAMPLES=20000 python3 -m pytest -q tests/test_fuzz.py

(hypothesis keeps the failing examples it finds in `.hypothesis/` and replays them first).
"""

from __future__ import annotations

import os
import random
import struct
import tempfile
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqpscope.capture.files import CaptureError, open_capture
from amqpscope.capture.linklayer import SegmentDecoder
from amqpscope.capture.packet import Segment
from amqpscope.codec.amqp091 import fieldtable
from amqpscope.codec.amqp091 import frames as frames091
from amqpscope.codec.amqp091.decoder import Decoder as Decoder091
from amqpscope.codec.amqp10 import composites  # noqa: F401 (registers the composite handlers)
from amqpscope.codec.amqp10 import frames as frames10
from amqpscope.codec.amqp10.decoder import Decoder as Decoder10
from amqpscope.codec.amqp10.types import decode as decode10
from amqpscope.codec.connection import ConnectionCodec
from amqpscope.dissect import Dissector
from amqpscope.findings import CODES, Finding
from amqpscope.stream.events import StreamClose, StreamData, StreamGap, StreamOpen
from amqpscope.stream.tcp import MAX_BUFFER, MAX_PIECES, TcpReassembler

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
EXAMPLES = int(os.environ.get("AMQPSCOPE_FUZZ_EXAMPLES", "0")) or None


def fuzz(default: int) -> settings:
    """`default` examples in the suite; AMQPSCOPE_FUZZ_EXAMPLES for a long run."""
    return settings(
        max_examples=EXAMPLES or default,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        derandomize=EXAMPLES is None,  # the suite is repeatable; long runs explore
        database=None if EXAMPLES is None else settings.default.database,
    )


# -- seeds from the recorded captures ---------------------------------------------------------
def capture_files() -> list[Path]:
    return sorted(p for p in CAPTURES.iterdir() if p.suffix in (".pcap", ".pcapng"))


@cache
def seed_frames() -> dict[str, list[bytes]]:
    """Real frames of each version, from every capture."""
    out: dict[str, list[bytes]] = {"1.0": [], "0-9-1": []}
    for path in capture_files():
        with open_capture(path) as capture:
            for frame in Dissector().run(capture):
                records = ("protocol-header", "layer", "transport")  # no frame bytes
                if frame.kind not in records and frame.version in out:
                    out[frame.version].append(frame.data)
    return out


@cache
def seed_streams() -> list[tuple[bool, list[tuple[str, bytes]]]]:
    """(handshake seen, [(direction, bytes)]) of the AMQP connections of the captures."""
    out = []
    for name in ("091-publish-consume.pcap", "10-send-receive.pcap", "10-sasl-plain.pcap"):
        writes: dict[int, list[tuple[str, bytes]]] = {}
        from_start: dict[int, bool] = {}
        decoder = SegmentDecoder()
        reassembler = TcpReassembler()
        with open_capture(CAPTURES / name) as capture:
            for packet in capture:
                segment = decoder.decode(packet)
                if segment is None:
                    continue
                for event in reassembler.feed(segment):
                    if isinstance(event, StreamOpen):
                        from_start[event.conn] = event.role_from == "syn"
                    elif isinstance(event, StreamData):
                        writes.setdefault(event.conn, []).append((event.direction, event.data))
        out.extend((from_start[conn], chunks) for conn, chunks in writes.items())
    return out


@cache
def seed_segments() -> list[list[Segment]]:
    out = []
    for name in ("091-publish-consume.pcap", "10-send-receive.pcap", "091-large-body.pcap"):
        decoder = SegmentDecoder()
        with open_capture(CAPTURES / name) as capture:
            out.append([s for p in capture if (s := decoder.decode(p)) is not None])
    return out


# -- mutations ----------------------------------------------------------------------------------
Edit = tuple[int, int, int]  # (kind, where, value)
edits = st.lists(
    st.tuples(st.integers(0, 5), st.integers(0, 2**31), st.integers(0, 255)), max_size=6
)


def mutate(data: bytes, plan: list[Edit]) -> bytes:
    """Apply `plan`: flip a bit, set a byte, cut, insert garbage, drop bytes, inflate a 32-bit
    big- or little-endian field."""
    buf = bytearray(data)
    for kind, where, value in plan:
        if not buf:
            buf += bytes([value])
            continue
        at = where % len(buf)
        if kind == 0:
            buf[at] ^= 1 << (value % 8)
        elif kind == 1:
            buf[at] = value
        elif kind == 2:
            del buf[at:]
        elif kind == 3:
            buf[at:at] = random.Random(where).randbytes(value % 64 + 1)
        elif kind == 4:
            del buf[at : at + value % 16 + 1]
        elif at + 4 <= len(buf):
            big = 0xFFFFFFF0 - value
            buf[at : at + 4] = struct.pack(">I" if value % 2 else "<I", big)
    return bytes(buf)


def check_findings(findings: list[Finding]) -> None:
    for f in findings:
        assert f.code in CODES and f.message, f
        assert f.code != "amqp.decode-error", f"an exception escaped a decoder: {f.message}"


# -- the decoders ---------------------------------------------------------------------------------
def refit_10(data: bytes) -> bytes:
    """A 1.0 frame whose size field says its (mutated) length, so the decoder sees the damage."""
    if len(data) < 8:
        data = data + bytes(8 - len(data))
    doff = max(2, min(data[4], len(data) // 4))
    return struct.pack(">IB", len(data), doff) + data[5:]


def refit_091(data: bytes) -> bytes:
    if len(data) < 8:
        data = data + bytes(8 - len(data))
    return data[:3] + struct.pack(">I", len(data) - 8) + data[7:-1] + b"\xce"


@fuzz(300)
@given(st.data())
def test_fuzz_amqp10_decoder(data: st.DataObject) -> None:
    """A 1.0 decoder fed real frames, some mutated, in order: no exception, findings only."""
    seeds = seed_frames()["1.0"]
    start = data.draw(st.integers(0, len(seeds) - 1))
    decoder = Decoder10(show_secrets=data.draw(st.booleans()))
    for raw in seeds[start : start + data.draw(st.integers(1, 12))]:
        if data.draw(st.booleans()):
            raw = refit_10(mutate(raw, data.draw(edits)))
        frame = frames10.make_frame(raw)
        decoder.decode(frame)
        check_findings(frame.findings)
    check_findings(decoder.end())


@fuzz(300)
@given(st.data())
def test_fuzz_amqp091_decoder(data: st.DataObject) -> None:
    seeds = seed_frames()["0-9-1"]
    start = data.draw(st.integers(0, len(seeds) - 1))
    decoder = Decoder091(data.draw(st.sampled_from(["0-9-1", "0-8"])), data.draw(st.booleans()))
    for raw in seeds[start : start + data.draw(st.integers(1, 12))]:
        if data.draw(st.booleans()):
            raw = refit_091(mutate(raw, data.draw(edits)))
        frame = frames091.make_frame(raw, decoder.version)
        decoder.decode(frame)
        check_findings(frame.findings)
    check_findings(decoder.end())


@fuzz(300)
@given(st.binary(max_size=512))
def test_fuzz_amqp10_values_from_random_bytes(raw: bytes) -> None:
    _value, end, findings = decode10(raw)
    assert 0 <= end <= len(raw)
    check_findings(findings)


@fuzz(300)
@given(st.binary(max_size=512), st.integers(0, 16))
def test_fuzz_field_tables_raise_only_malformed(raw: bytes, at: int) -> None:
    try:
        _table, end = fieldtable.read_table(raw, min(at, len(raw)), len(raw))
    except fieldtable.Malformed:
        return
    assert end <= len(raw)


@fuzz(150)
@given(st.data())
def test_fuzz_connection_codec(data: st.DataObject) -> None:
    """Framing and decoding of a real conversation whose bytes are damaged, cut into random
    chunks: every byte ends in a frame, a finding or the hunt; nothing escapes."""
    streams = seed_streams()
    from_start, writes = streams[data.draw(st.integers(0, len(streams) - 1))]
    codec = ConnectionCodec(from_start, redact_bodies=data.draw(st.booleans()))
    frames = []
    for n, (direction, chunk) in enumerate(writes):
        if n and data.draw(st.integers(0, 3)) == 0:
            chunk = mutate(chunk, data.draw(edits))
        if data.draw(st.integers(0, 15)) == 0:
            codec.gap(direction, data.draw(st.integers(1, 5000)))
        frames += codec.data(direction, chunk, n + 1)
    frames += codec.end(len(writes) + 1)
    for frame in frames:
        check_findings(frame.findings)
    check_findings(codec.findings)


# -- TCP reassembly -------------------------------------------------------------------------------
@fuzz(150)
@given(st.data())
def test_fuzz_tcp_reassembly(data: st.DataObject) -> None:
    """Real segments dropped, duplicated, reordered, with sequence numbers and flags damaged:
    events stay well formed (opened before used, closed once, data and gaps only on open
    connections) and out-of-order buffers within their caps."""
    seeds = seed_segments()
    segments = list(seeds[data.draw(st.integers(0, len(seeds) - 1))])
    plan = data.draw(
        st.lists(st.tuples(st.integers(0, 4), st.integers(0, 10**6), st.integers(0, 2**32 - 1)))
    )
    for kind, where, value in plan:
        if not segments:
            break
        at = where % len(segments)
        s = segments[at]
        if kind == 0:
            del segments[at]
        elif kind == 1:
            segments.insert(min(len(segments), at + value % 8), s)
        elif kind == 2:
            other = (at + 1 + value % 5) % len(segments)
            segments[at], segments[other] = segments[other], segments[at]
        elif kind == 3:
            segments[at] = Segment(s.packet, s.ts, s.src, s.dst, value, s.ack, s.flags, s.payload)
        else:
            flags = value & 0x1F
            segments[at] = Segment(s.packet, s.ts, s.src, s.dst, s.seq, s.ack, flags, s.payload)
    reassembler = TcpReassembler()
    opened: set[int] = set()
    closed: set[int] = set()

    def check(events: Iterator) -> None:
        for event in events:
            if isinstance(event, StreamOpen):
                assert event.conn not in opened
                opened.add(event.conn)
            elif isinstance(event, (StreamData, StreamGap)):
                assert event.conn in opened and event.conn not in closed
                assert not isinstance(event, StreamGap) or event.missing > 0
            elif isinstance(event, StreamClose):
                assert event.conn in opened and event.conn not in closed
                closed.add(event.conn)

    for segment in segments:
        check(iter(reassembler.feed(segment)))
        for conn in reassembler._conns.values():
            for half in (conn.c2s, conn.s2c):
                assert half.buffered <= MAX_BUFFER and len(half.starts) <= MAX_PIECES
    check(iter(reassembler.flush()))
    assert closed == opened
    check_findings(reassembler.findings)


# -- the capture readers ---------------------------------------------------------------------------
@cache
def seed_files() -> list[bytes]:
    small = [p for p in capture_files() if p.stat().st_size < 64 * 1024]
    return [p.read_bytes() for p in small]


@fuzz(120)
@given(st.data())
def test_fuzz_capture_readers(data: st.DataObject) -> None:
    """pcap and pcapng files with damaged headers, records and blocks: `CaptureError` when the
    file cannot be read at all, else every readable packet and findings for the rest."""
    seeds = seed_files()
    raw = mutate(seeds[data.draw(st.integers(0, len(seeds) - 1))], data.draw(edits))
    with tempfile.NamedTemporaryFile(suffix=".pcap") as f:
        f.write(raw)
        f.flush()
        try:
            capture = open_capture(f.name)
        except CaptureError as exc:
            assert "\n" not in str(exc)
            return
        with capture:
            packets = list(capture)
            assert all(len(p.data) <= len(raw) for p in packets)
            assert len(packets) <= len(raw) // 16
            check_findings(capture.findings)
            dissector = Dissector()
            for frame in dissector.run(packets):
                check_findings(frame.findings)
            check_findings(dissector.findings)
