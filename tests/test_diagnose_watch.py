"""The live watch, replayed on recorded captures at capture time: every stall `diagnose` finds
afterwards is reported once while it is on (a second or more into it, before it ends) and once
when it ends, with the same length; nothing is reported on a happy-path capture."""

from __future__ import annotations

from pathlib import Path

import pytest

from amqpscope.capture.files import open_capture
from amqpscope.diagnose import Diagnoser, Watch
from amqpscope.diagnose.watch import BEGAN, ENDED
from amqpscope.dissect import Dissector
from amqpscope.track.tracker import Tracker

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
TICK = 0.25  # how often `live --diagnose` checks between packets


def replay(name: str) -> tuple[list[tuple[float, str, dict]], list[dict]]:
    """(capture time, event, diagnosis) as live would report them, and diagnose's list."""
    tracker, diagnoser, watch = Tracker(), Diagnoser(), Watch()
    events: list[tuple[float, str, dict]] = []
    last = None
    with open_capture(str(CAPTURES / name)) as capture:
        for frame in Dissector().run(capture):
            if last is not None:  # the quiet time before this frame, tick by tick
                now = last + TICK
                while now < frame.ts:
                    events += [(now, e, d.to_json()) for e, d in watch.check(tracker, now)]
                    now += TICK
            tracker.feed(frame)
            diagnoser.feed(frame)
            events += [(frame.ts, e, d.to_json()) for e, d in watch.check(tracker, frame.ts)]
            last = frame.ts
    tracker.finish()
    return events, [d.to_json() for d in diagnoser.diagnoses(tracker)]


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("091-stalled-consumer.pcap", "consumer.stalled"),
        ("091-blocked-publisher.pcap", "publish.blocked"),
        ("10-credit-starved.pcap", "credit.starved"),
    ],
)
def test_each_stall_reported_while_on_and_when_over(name: str, code: str) -> None:
    events, found = replay(name)
    (after,) = [d for d in found if d["code"] == code]
    assert [(e, d["code"]) for _t, e, d in events] == [(BEGAN, code), (ENDED, code)]
    (began_at, _, began), (ended_at, _, ended) = events
    assert began["ongoing"] and began["duration"] >= 1.0
    assert began_at < after["start"] + after["duration"]  # said while it was still on
    assert began_at - after["start"] < 1.0 + TICK + 1e-6  # and as soon as it counted
    assert abs(ended["duration"] - after["duration"]) < 1e-6
    assert ended["start"] == after["start"] and not ended["ongoing"]
    assert ended_at >= after["start"] + after["duration"]


@pytest.mark.parametrize("name", ["091-qos-prefetch.pcap", "091-rpc.pcap", "10-drain.pcap"])
def test_short_limits_are_not_stalls(name: str) -> None:
    events, _found = replay(name)
    assert events == []
