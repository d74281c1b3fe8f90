"""`read --json`'s line writer (`render.lines.LineWriter`) against the record it stands for:
`Frame.to_json()` written by orjson (`record_ndjson`), byte for byte, on every capture and log
here and on frames made to strain its caches and fallbacks."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from amqpscope.cli.inputs import open_input
from amqpscope.codec.amqp091.content import UNEXPECTED
from amqpscope.codec.frames import Frame
from amqpscope.findings import finding
from amqpscope.render.lines import LineWriter, frame_ndjson, ndjson_all, record_ndjson
from amqpscope.track.tracker import Tracker

ROOT = Path(__file__).resolve().parent.parent
INPUTS = sorted(str(p) for p in (ROOT / "captures").glob("*.pcap*"))
INPUTS += sorted(str(p) for p in (ROOT / "captures").glob("log-*.log"))


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: Path(p).name)
def test_every_line_of_every_input_is_the_record(path: str) -> None:
    writer = LineWriter()
    tracker = Tracker()
    count = 0
    with open_input(path, None) as source:
        for frame in source.frames():
            tracker.feed(frame)  # its findings ride the frame, as in `read --json`
            assert writer.line(frame) == record_ndjson(frame), frame.number
            count += 1
    assert count or Path(path).name == "non-amqp.pcap"


def _frame(**changes: object) -> Frame:
    frame = Frame("0-9-1", "method", "basic.ack", 1, b"\x01" * 21)
    frame.number, frame.packet, frame.ts, frame.conn = 7, 5, 1795324904.891879, 2
    frame.src, frame.dst, frame.direction = "127.0.0.1:40001", "127.0.0.1:5672", "c2s"
    frame.fields = {"delivery-tag": 3, "multiple": False}
    for name, value in changes.items():
        setattr(frame, name, value)
    return frame


STRAINS = [
    {},
    {"channel": None},
    {"channel": 65535, "data": b"\x00" * 70000},  # beyond the digits kept as text
    {"packet": 5, "ts": 1795324904.5},  # the packet of the frame before, at another time
    {"ts": 0.0},
    {"ts": 1e-07},  # orjson and repr write such floats differently: orjson writes all of them
    {"ts": 1.5e17},
    {"ts": math.nan},
    {"ts": 1795324904.0},
    {"src": "[fe80::1%eth0]:5672", "dst": 'caf\u00e9 "\\" \x01'},  # escaped as orjson escapes
    {"name": "basic.ack", "kind": "content-body"},  # a name seen with another kind
    {"fields": {"x": "\u202e\x1b[31m", "n": 2**63}},
    {"fields": {1: "a key that is not a string"}},  # orjson refuses: json writes the line
    {"fields": {"big": 2**70}},  # likewise
    {"findings": [finding(UNEXPECTED, "content body on channel 1 follows no method")]},
    {"message": {"method": "basic.publish", "body": {"text": "\u00e9", "size": 2}}},
    {"message": {"arguments": {2: "refused"}}},
    {"source": {"file": "x.log", "line": 3}, "ts": 0.0},  # a log's record has no packet
    {"version": "1.0", "kind": "performative", "name": "transfer", "channel": 0},
]


def test_strained_frames_are_their_records() -> None:
    """One writer over all of them, in order and again: each cache is met with a frame it
    must not answer for (another kind for a name, other ends for a connection)."""
    writer = LineWriter()
    frames = [_frame(**changes) for changes in STRAINS]
    frames += [_frame(conn=2, direction="s2c", src="127.0.0.1:5672", dst="127.0.0.1:40001")]
    for frame in frames + frames[::-1]:
        line = writer.line(frame)
        assert line == record_ndjson(frame)
        assert line == frame_ndjson(frame)
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        if not isinstance(frame.fields.get("big"), int) and 1 not in frame.fields:
            assert json.loads(line)["name"] == frame.name


def test_a_cache_that_fills_starts_again() -> None:
    writer = LineWriter()
    for conn in range(5000):  # more connections than the writer keeps
        frame = _frame(conn=conn, name=f"name-{conn}")
        assert writer.line(frame) == record_ndjson(frame)
    assert len(writer.ends) <= 4096 and len(writer.names) <= 4096


def test_ndjson_all_writes_the_records_in_chunks() -> None:
    path = str(ROOT / "captures" / "091-publish-consume.pcap")
    with open_input(path, None) as source:
        expected = [record_ndjson(f) for f in _tracked(source.frames())]
    chunks: list[bytes] = []
    with open_input(path, None) as source:
        ndjson_all(source.frames(), Tracker(), chunks.append, 1000)
    assert len(chunks) > 1 and all(len(c) >= 1000 for c in chunks[:-1])
    assert b"".join(chunks) == b"".join(expected)


def _tracked(frames: Iterator[Frame]) -> Iterator[Frame]:
    tracker = Tracker()
    for frame in frames:
        tracker.feed(frame)
        yield frame
