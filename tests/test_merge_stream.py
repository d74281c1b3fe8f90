"""Vantage points merged as they are read (`merge.stream`, issue 44's performance bar): the
same timeline as the whole-input merge, in a window of frames, on captures/091-vantage (two
tcpdumps of one pika run, the second shifted +1.234 s by editcap: captures/scenarios/vantage.py)
and on a long capture made at run time (`bench/synth.py`, never committed) beside a copy of
it on another clock."""

from __future__ import annotations

import copy
import itertools
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from amqpscope.capture.files import CaptureReader
from amqpscope.codec.frames import Frame
from amqpscope.dissect import Dissector
from amqpscope.merge import clocks
from amqpscope.merge.stream import HEAD, Stream, Streaming
from amqpscope.merge.timeline import CAPTURE, Part, merge
from tests.bigcapture import build_091

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
A = CAPTURES / "091-vantage.pcap"
B = CAPTURES / "091-vantage-b.pcap"
SHIFT = json.loads((CAPTURES / "091-vantage.json").read_text())["expect"]["vantage"]["shift"]


def captured(path: Path) -> list[Frame]:
    with CaptureReader(str(path)) as capture:
        return list(Dissector().run(capture))


def shown(frames: list[Frame]) -> list[tuple[Any, ...]]:
    return [
        (f.number, f.conn, f.ts, f.name, f.channel, f.direction, f.data, f.seen) for f in frames
    ]


@pytest.mark.parametrize("head", [HEAD, 16])
def test_the_stream_is_the_whole_merge(head: int) -> None:
    """Frame for frame, the timeline, `seen` and offsets of the whole-input merge, with a head
    of 16 records too: the connections first seen after it (B's begin later) still matched."""
    parts = [Part("A", str(A), CAPTURE, captured(A)), Part("B", str(B), CAPTURE, captured(B))]
    whole = merge(parts)
    streaming = Streaming(
        [
            Stream("A", str(A), CAPTURE, iter(captured(A))),
            Stream("B", str(B), CAPTURE, iter(captured(B))),
        ],
        head=head,
    )
    frames = list(streaming.frames())
    assert not streaming.whole and not streaming.notices
    assert shown(frames) == shown(whole.frames)
    assert sorted((m.input, m.conn, m.into_conn, m.pairs) for m in streaming.merged.matches) == (
        sorted((m.input, m.conn, m.into_conn, m.pairs) for m in whole.matches)
    )
    offset = streaming.merged.offsets["B"]
    assert offset.how == clocks.ESTIMATED
    assert abs(offset.seconds - SHIFT) <= 0.005
    if head == HEAD:  # the head is the whole capture: the very estimate of the whole merge
        assert offset == whole.offsets["B"]


class Counted:
    """An input's records as they are taken."""

    def __init__(self, frames: list[Frame]) -> None:
        self.frames = frames
        self.taken = 0

    def __iter__(self) -> Iterator[Frame]:
        for frame in self.frames:
            self.taken += 1
            yield frame


@pytest.fixture(scope="module")
def long_capture(tmp_path_factory: pytest.TempPathFactory) -> list[Frame]:
    """One long 0-9-1 connection (publish, deliver, ack), some 21,000 frames."""
    path = tmp_path_factory.mktemp("stream") / "long.pcap"
    build_091(path, 3000)
    return captured(path)


def another_host(frames: list[Frame], shift: float, step: float = 0.0) -> list[Frame]:
    """The same frames seen on a clock `shift` s ahead (`step` more from the middle on)."""
    out = []
    for n, frame in enumerate(frames):
        seen = copy.copy(frame)
        seen.ts += shift + (step if n >= len(frames) // 2 else 0.0)
        out.append(seen)
    return out


def test_a_long_merge_holds_a_window_not_the_inputs(long_capture: list[Frame]) -> None:
    """Two captures of a long connection, the second 0.25 s ahead: the first frame is given
    before the inputs are read past their heads, at most a few hundred frames are held at
    once (the whole merge holds both inputs, 42,000 records), each frame is given once with
    both inputs' times, and the offset is estimated within 5 ms."""
    first = Counted([copy.copy(f) for f in long_capture])
    second = Counted(another_host(long_capture, 0.25))
    streaming = Streaming(
        [Stream("A", "a", CAPTURE, iter(first)), Stream("B", "b", CAPTURE, iter(second))]
    )
    frames = streaming.frames()
    one = next(frames)
    assert one.number == 1
    assert first.taken <= HEAD + 64 and second.taken <= HEAD + 64
    rest = [one, *frames]
    assert len(long_capture) > 20_000
    assert streaming.peak <= 500, streaming.peak
    assert not streaming.whole and not streaming.notices
    assert len(rest) == len(long_capture)
    assert [f.number for f in rest] == list(range(1, len(rest) + 1))
    assert all(a.ts <= b.ts for a, b in itertools.pairwise(rest))
    for frame in rest:
        assert frame.seen is not None and [s[0] for s in frame.seen] == ["A", "B"]
        a_ts, b_ts = frame.seen[0][4], frame.seen[1][4]
        assert a_ts is not None and b_ts is not None
        assert b_ts - a_ts == pytest.approx(0.25, abs=1e-6)
    offset = streaming.merged.offsets["B"]
    assert abs(offset.seconds - 0.25) <= 0.005
    assert [(m.input, m.pairs) for m in streaming.merged.matches] == [("B", len(rest))]


def fresh(frames: list[Frame]) -> list[Frame]:
    """Records of their own (a merge sets their times, numbers and `seen`)."""
    return [copy.copy(f) for f in frames]


def stretched(frames: list[Frame], factor: float) -> list[Frame]:
    """The frames over `factor` times the time (the synthesized capture is 0.15 s long)."""
    start = frames[0].ts
    out = []
    for frame in frames:
        slower = copy.copy(frame)
        slower.ts = start + (frame.ts - start) * factor
        out.append(slower)
    return out


@pytest.mark.parametrize("second", ["begins half-way", "misses every 97th frame"])
def test_a_second_capture_that_misses_frames_is_merged_as_whole(
    long_capture: list[Frame], second: str
) -> None:
    """The long connection over 15 s and a second host's capture of it 0.25 s ahead that
    began half-way (its first frames' copies were thousands of frames back) or missed some
    frames: the very timeline and `seen` of the whole merge, and what is held at once the
    frames of about the window's 2 s, not the inputs."""
    slow = stretched(long_capture, 100.0)
    copies = another_host(slow, 0.25)
    if second == "begins half-way":
        copies = copies[len(copies) // 2 :]
    else:
        copies = [f for n, f in enumerate(copies) if n % 97]
    whole = merge([Part("A", "a", CAPTURE, fresh(slow)), Part("B", "b", CAPTURE, fresh(copies))])
    streaming = Streaming(
        [
            Stream("A", "a", CAPTURE, iter(fresh(slow))),
            Stream("B", "b", CAPTURE, iter(fresh(copies))),
        ]
    )
    frames = list(streaming.frames())
    assert not streaming.whole and not streaming.notices
    assert shown(frames) == shown(whole.frames)
    rate = len(slow) / (slow[-1].ts - slow[0].ts)
    assert streaming.peak <= 2 * rate * 2.0, (streaming.peak, rate)
    assert streaming.peak < len(slow) // 3


def test_a_clock_that_steps_past_the_window_is_said(long_capture: list[Frame]) -> None:
    """The second host's clock steps 5 s ahead half-way (more than the 2 s window): its
    copies come after the frames were given; that is said, not passed over, and from there
    the rest is merged whole (held until paired)."""
    streaming = Streaming(
        [
            Stream("A", "a", CAPTURE, iter([copy.copy(f) for f in long_capture])),
            Stream("B", "b", CAPTURE, iter(another_host(long_capture, 0.25, step=5.0))),
        ]
    )
    frames = list(streaming.frames())
    assert streaming.notices, "a step past the window went unsaid"
    assert "input B:" in streaming.notices[0] and "merged whole" in streaming.notices[0]
    assert [f.number for f in frames] == list(range(1, len(frames) + 1))


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", *args], capture_output=True, text=True, timeout=120
    )


def test_an_offset_given_past_the_window_merges_whole_and_says_so() -> None:
    """`--offset B=0` where B's clock is 1.234 s ahead: the copies are farther apart than half
    the window, so the inputs are merged whole (each frame once, as the estimate gives it),
    and stderr says why."""
    alone = run("read", "--json", str(A))
    estimated = run("read", "--json", str(A), str(B))
    given = run("read", "--json", str(A), str(B), "--offset", "B=0")
    assert given.returncode == 0, given.stderr
    assert "merge.window:" in given.stderr and "merged whole" in given.stderr
    assert "merge.window" not in estimated.stderr
    records = [json.loads(line) for line in given.stdout.splitlines()]
    assert len(records) == len(alone.stdout.splitlines()) == len(estimated.stdout.splitlines())


def test_captures_with_nothing_in_common_read_whole_in_their_heads_are_streamed() -> None:
    """Two captures of different runs (091-vantage and log-pika-broker, recorded apart): no
    frame in common, the offset unknown as the whole merge says it, each read to its end in
    its head, so nothing to say of the window: the whole merge's timeline, streamed."""
    other = CAPTURES / "log-pika-broker.pcap"
    whole = merge(
        [Part("A", str(A), CAPTURE, captured(A)), Part("B", str(other), CAPTURE, captured(other))]
    )
    streaming = Streaming(
        [
            Stream("A", str(A), CAPTURE, iter(captured(A))),
            Stream("B", str(other), CAPTURE, iter(captured(other))),
        ]
    )
    frames = list(streaming.frames())
    assert not streaming.whole and not streaming.notices
    assert streaming.merged.offsets["B"].how == whole.offsets["B"].how == clocks.UNKNOWN
    assert shown(frames) == shown(whole.frames)


def test_a_connection_matched_with_none_of_the_other_input_s_is_said() -> None:
    """`--inputs vantage` on two recordings apart: the second input's connection has ends no
    connection of the first has, and its clock line says so (not only what was matched)."""
    other = CAPTURES / "log-pika-broker.pcap"
    done = run("summary", "--inputs", "vantage", str(A), str(other))
    assert done.returncode == 0, done.stderr
    [line] = [x for x in done.stderr.splitlines() if "merge.clock-offset: input B (" in x]
    assert "1 connection matched with none of another input's" in line, line
    [line] = [x for x in done.stderr.splitlines() if "merge.clock-offset: input A (" in x]
    assert "matched with none" not in line  # the reference's are the timeline's own
