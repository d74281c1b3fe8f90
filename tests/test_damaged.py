"""The damaged-capture corpus (`tools/damage.py`) gives exactly the findings each damage implies,
where it implies them, and recovers the frames the undamaged capture has.

The corpus is built in a temporary directory from `captures/` (nothing generated is committed).
Findings are those of the layers that meet damage (capture, stream, codec: `Dissector`); frames
are compared with the source capture's, per connection and direction, by everything but their
packet numbers (a duplicated or reordered capture numbers its packets differently).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from amqpscope.capture.files import open_capture
from amqpscope.codec.frames import Frame
from amqpscope.dissect import Dissector
from amqpscope.findings import CODES, Finding
from tests.oracle import tshark_frames, tshark_or_skip, visible_to_wireshark
from tests.scripts import load_tool

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "captures"


damage = load_tool("damage")
NAMES = [builder.__name__.replace("_", "-") for builder in damage.CASES]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("damaged")
    cases = {c.name: c for c in damage.build(out)}
    return {"dir": out, "cases": cases}


def dissect(path: Path) -> tuple[list[Frame], list[Finding]]:
    """Frames, and every finding of the capture, stream and codec layers (placed or not)."""
    dissector = Dissector()
    with open_capture(path) as capture:
        frames = list(dissector.run(capture))
        findings = [f for frame in frames for f in frame.findings]
        findings += capture.findings + dissector.findings
    return frames, findings


def key(frame: Frame) -> str:
    """A frame as anything but where it was: version, kind, name, channel, fields, message."""
    return json.dumps(
        [frame.version, frame.kind, frame.name, frame.channel, frame.fields, frame.message],
        sort_keys=True,
        default=str,
    )


def signature(frames: list[Frame], packets: set[int] | None = None) -> tuple:
    """One connection's frames, per direction, in order (of the given packets only)."""
    return tuple(
        tuple(
            key(f) for f in frames if f.direction == d and (packets is None or f.packet in packets)
        )
        for d in ("c2s", "s2c")
    )


def by_connection(frames: list[Frame]) -> dict[int, list[Frame]]:
    out: dict[int, list[Frame]] = {}
    for frame in frames:
        out.setdefault(frame.conn, []).append(frame)
    return out


@pytest.fixture(scope="module")
def sources() -> dict[str, list[Frame]]:
    out = {}
    for name in (damage.P091, damage.P10, damage.PNG):
        frames, findings = dissect(CAPTURES / name)
        assert findings == [], f"{name} is not clean: {findings}"
        assert len(by_connection(frames)) == 1
        out[name] = frames
    return out


def test_the_corpus_is_deterministic(tmp_path: Path, corpus: dict[str, Any]) -> None:
    again = damage.build(tmp_path)
    for case in again:
        assert (tmp_path / case.file).read_bytes() == (corpus["dir"] / case.file).read_bytes()
    assert (tmp_path / "expected.json").read_text() == (corpus["dir"] / "expected.json").read_text()


def test_every_expected_code_is_declared(corpus: dict[str, Any]) -> None:
    for case in corpus["cases"].values():
        assert set(case.findings) <= set(CODES), case.name


@pytest.mark.parametrize("name", NAMES)
def test_damage_gives_exactly_its_findings(
    name: str, corpus: dict[str, Any], sources: dict[str, list[Frame]]
) -> None:
    case = corpus["cases"][name]
    frames, findings = dissect(corpus["dir"] / case.file)
    assert dict(Counter(f.code for f in findings)) == case.findings, [
        (f.code, f.message) for f in findings
    ]
    for code, text in case.says.items():
        messages = [f.message for f in findings if f.code == code]
        assert any(text in m for m in messages), (code, text, messages)
    for where in case.where:
        riding = [
            (fr.direction, fr.packet) for fr in frames for f in fr.findings if f.code == where.code
        ]
        assert riding == [(where.direction, where.packet)], (where, riding)
    # findings not placed on a frame still say where they are
    for f in findings:
        if f.code.startswith(("capture.", "tcp.")):
            assert f.packet is not None or "offset" in f.message, f


@pytest.mark.parametrize("name", NAMES)
def test_damage_recovers_the_right_frames(
    name: str, corpus: dict[str, Any], sources: dict[str, list[Frame]]
) -> None:
    case = corpus["cases"][name]
    frames, _ = dissect(corpus["dir"] / case.file)
    conns = by_connection(frames)
    assert len(conns) == case.connections
    if case.frames == "same":
        copies = case.copies or {case.source: 1}
        expected = Counter({signature(sources[src]): n for src, n in copies.items()})
        got = Counter(signature(conn) for conn in conns.values())
        assert got == expected
        if case.copies and len(case.copies) == 2 and case.connections == 2:  # port reuse: in order
            firsts = [signature(conns[c]) for c in sorted(conns)]
            assert firsts == [signature(sources[s]) for s in case.copies]
    elif case.frames == "kept":
        (conn,) = conns.values()
        want = signature(sources[case.source], set(case.kept))
        assert signature(conn) == want
        assert sum(map(len, want)) > 0


def test_damaged_files_read_from_the_command_line(corpus: dict[str, Any]) -> None:
    """The CLI reads each damaged file: exit 0, findings without a frame on stderr, one line
    each, no traceback."""
    for case in corpus["cases"].values():
        proc = subprocess.run(
            [sys.executable, "-m", "amqpscope.cli", "read", str(corpus["dir"] / case.file)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, (case.name, proc.stderr)
        assert "Traceback" not in proc.stderr
        unplaced = {c for c in case.findings if c.startswith(("capture.", "tcp.overlap"))}
        for code in unplaced:
            assert f": {code}: " in proc.stderr, (case.name, code, proc.stderr)


@pytest.mark.parametrize("name", ["lost-segment", "snaplen-cut"])
def test_frames_after_a_gap_name_the_packets_that_brought_them(
    name: str, corpus: dict[str, Any]
) -> None:
    """However much later a hole is declared missing (the peer's ack), each frame after it
    names the packet whose payload holds its last bytes, as Wireshark does."""
    case = corpus["cases"][name]
    frames, _ = dissect(corpus["dir"] / case.file)
    _, packets = damage.read_pcap(corpus["dir"] / case.file)
    (gap,) = [w for w in case.where if w.code == "tcp.gap"]
    after = [f for f in frames if f.direction == gap.direction and f.packet >= gap.packet]
    assert len(after) >= 3
    for frame in frames:
        assert frame.data[-16:] in packets[frame.packet - 1].payload, (frame.packet, frame.name)
    tshark_or_skip()
    mine = [(f.packet, f.name) for f in visible_to_wireshark(frames)]
    theirs = tshark_frames(str(corpus["dir"] / case.file))
    assert theirs and set(theirs) <= set(mine)
    assert set(mine) - set(theirs) <= {(p, "protocol-header") for p, _ in mine}
