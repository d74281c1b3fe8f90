"""The bounded time series behind the summary's sparklines (`amqpscope/track/stats.py`)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from amqpscope.capture.files import open_capture
from amqpscope.dissect import Dissector
from amqpscope.render import sparkline
from amqpscope.track import amqp091, amqp10
from amqpscope.track.stats import BUCKETS, FIRST_WIDTH, Durations, Level, Rate
from amqpscope.track.tracker import Tracker

W = FIRST_WIDTH


def test_a_hand_worked_rate() -> None:
    rate = Rate(size=4)
    for ts in (100.0, 100.0 + 0.5 * W, 100.0 + 1.5 * W, 100.0 + 3.2 * W):
        rate.add(ts)
    assert rate.to_json() == {"start": 100.0, "bucket-seconds": W, "counts": [2, 1, 0, 1]}
    rate.add(100.0 + 4.1 * W)  # past bucket 3: pairs merge, the width doubles
    assert rate.to_json() == {"start": 100.0, "bucket-seconds": 2 * W, "counts": [3, 1, 1]}
    rate.add(100.0 + 17 * W)  # index 8 at 2W is past 4 buckets twice more: 8W wide
    assert rate.to_json() == {"start": 100.0, "bucket-seconds": 8 * W, "counts": [5, 0, 1]}


def test_a_hand_worked_level_carries_the_level_into_empty_buckets() -> None:
    level = Level(size=4)
    level.set(10.0, 5)  # bucket 0: 5
    level.set(10.0 + 0.5 * W, 8)  # bucket 0: 5..8
    level.set(10.0 + 2.5 * W, 2)  # bucket 1 held 8; bucket 2 starts at 8, drops to 2
    got = level.to_json()
    assert got == {"start": 10.0, "bucket-seconds": W, "max": [8, 8, 8], "min": [5, 8, 2]}
    level.set(10.0 + 6 * W, 3)  # merge: [0,1] and [2,3]; then bucket 3 at 2W: held 2, then 3
    got = level.to_json()
    assert got == {"start": 10.0, "bucket-seconds": 2 * W, "max": [8, 8, 2, 3], "min": [5, 2, 2, 2]}
    level.set(10.0 + 6.5 * W, None)  # unknown: not recorded
    assert level.to_json() == got


def test_samples_out_of_order_stay_in_range() -> None:
    level, rate = Level(size=4), Rate(size=4)
    for ts in (5.0, 5.0 + 3 * W, 4.0):  # a timestamp stepping back a whole second
        level.set(ts, 1)
        rate.add(ts)
    assert rate.total() == 3 and rate.to_json()["counts"][0] == 2
    assert level.to_json()["max"] == [1, 1, 1, 1]


def test_memory_is_bounded_and_merging_keeps_sum_and_extremes() -> None:
    rng = random.Random(7)
    level, rate = Level(), Rate()
    ts, total, values = 1_700_000_000.0, 0, []
    for _ in range(20_000):
        ts += rng.expovariate(1 / 0.05)  # about 1000 s of capture at 20 events/s
        n = rng.randrange(1, 4)
        rate.add(ts, n)
        total += n
        value = rng.randrange(-3, 500)
        level.set(ts, value)
        values.append(value)
    r, lv = rate.to_json(), level.to_json()
    assert r is not None and lv is not None
    assert len(rate.counts) == len(level.max) == len(level.min) == BUCKETS  # never grew
    assert BUCKETS // 2 <= len(r["counts"]) <= BUCKETS  # at least half the buckets in use
    assert sum(r["counts"]) == total
    assert max(lv["max"]) == max(values) == level.peak()
    assert min(lv["min"]) == min(values)
    assert lv["max"][-1] >= values[-1] >= lv["min"][-1]
    # the range covers the capture: the last sample falls in the last bucket
    span = ts - (rate.origin or 0.0)
    assert (
        (len(r["counts"]) - 1) * r["bucket-seconds"]
        <= span
        < len(r["counts"]) * r["bucket-seconds"]
    )


def test_merging_agrees_with_bucketing_at_the_final_width() -> None:
    """Whatever order the widths were reached in, the buckets are those the final width gives."""
    rng = random.Random(3)
    start = 50.0
    events = sorted(start + rng.uniform(0, 40.0) for _ in range(3000))
    events[0] = start
    rate = Rate()
    for ts in events:
        rate.add(ts)
    got = rate.to_json()
    assert got is not None
    width = got["bucket-seconds"]
    expected = [0] * len(got["counts"])
    for ts in events:
        expected[int((ts - start) / width)] += 1
    assert got["counts"] == expected


def test_empty_series_are_null() -> None:
    assert Level().to_json() is None and Rate().to_json() is None and Level().peak() is None
    assert Durations().to_json() is None


def test_a_hand_worked_durations_series() -> None:
    durations = Durations(size=4)
    for ts, seconds in ((100.0, 0.002), (100.0 + 0.5 * W, 0.004), (100.0 + 3.2 * W, 0.001)):
        durations.add(ts, seconds)
    assert durations.to_json() == {
        "start": 100.0,
        "bucket-seconds": W,
        "max-ms": [4.0, None, None, 1.0],
        "mean-ms": [3.0, None, None, 1.0],
        "counts": [2, 0, 0, 1],
    }
    durations.add(100.0 + 4.1 * W, 0.010)  # past bucket 3: pairs merge, the width doubles
    assert durations.to_json() == {
        "start": 100.0,
        "bucket-seconds": 2 * W,
        "max-ms": [4.0, 1.0, 10.0],
        "mean-ms": [3.0, 1.0, 10.0],
        "counts": [2, 1, 1],
    }


def test_durations_keep_count_total_and_longest_through_merges() -> None:
    rng = random.Random(7)
    durations = Durations()
    samples = [(i * rng.random() * 0.01, rng.random()) for i in range(5000)]
    samples.sort()
    for ts, seconds in samples:
        durations.add(ts, seconds)
    got = durations.to_json()
    assert got is not None and len(got["counts"]) <= BUCKETS
    assert sum(got["counts"]) == len(samples)
    assert max(m for m in got["max-ms"] if m is not None) == round(
        max(s for _, s in samples) * 1e3, 3
    )
    total = sum(mean * n for mean, n in zip(got["mean-ms"], got["counts"], strict=True) if n)
    assert total == pytest.approx(sum(s for _, s in samples) * 1e3, rel=1e-6)


# -- on recorded captures: the series agree with the trackers' own counts ------------------------

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
RECORDED = sorted(CAPTURES.glob("*.pcap"))


def _track(path: Path) -> tuple[Tracker, dict[int, int], dict[int, int], dict[int, int]]:
    """Feed a capture, sampling after every frame each 1.0 link's credit and unsettled count and
    each 0-9-1 channel's unacked count (the state the tracker holds, not its series)."""
    tracker = Tracker()
    credit: dict[int, int] = {}
    unsettled: dict[int, int] = {}
    unacked: dict[int, int] = {}

    def high(seen: dict[int, int], key: int, value: int | None) -> None:
        if value is not None and (key not in seen or value > seen[key]):
            seen[key] = value

    with open_capture(str(path)) as capture:
        for frame in Dissector().run(capture):
            tracker.feed(frame)
            conn = tracker.connections.get(frame.conn)
            if isinstance(conn, amqp10.ConnectionTracker):
                for session in conn.sessions:
                    for link in session.links:
                        high(credit, id(link), link.credit.credit)
                        high(unsettled, id(link), len(link.unsettled))
            elif isinstance(conn, amqp091.ConnectionTracker):
                for epoch in conn.channels.values():
                    high(unacked, id(epoch), len(epoch.outstanding))
    tracker.finish()
    return tracker, credit, unsettled, unacked


def _peak(series: dict | None) -> int | None:
    return max(series["max"]) if series else None


def _agrees(series: dict | None, latency: dict | None) -> None:
    """A durations series holds what its latency statistic counted: as many, the same longest."""
    if latency is None:
        assert series is None
        return
    assert series is not None and sum(series["counts"]) == latency["count"]
    assert max(m for m in series["max-ms"] if m is not None) == latency["max"]


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.stem)
def test_series_agree_with_the_trackers_counts(path: Path) -> None:
    tracker, credit, unsettled, unacked = _track(path)
    checked = 0
    for conn in tracker.connections.values():
        if isinstance(conn, amqp10.ConnectionTracker):
            for session in conn.sessions:
                for link in session.links:
                    got = link.summary()
                    series = got["series"]
                    rate = series["deliveries"]
                    assert (sum(rate["counts"]) if rate else 0) == got["deliveries"]
                    assert _peak(series["link-credit"]) == credit.get(id(link))
                    peak = _peak(series["unsettled"])
                    assert (peak or 0) == unsettled.get(id(link), 0)
                    _agrees(series["settle-latency"], got["latency"])
                    checked += 1
        else:
            for epoch in conn.epochs:
                got = epoch.to_json()
                series = got["series"]
                for key in ("deliveries", "publishes"):
                    rate = series[key]
                    assert (sum(rate["counts"]) if rate else 0) == got[key]
                assert (_peak(series["unacked"]) or 0) == got["max-unacked"]
                assert got["max-unacked"] == unacked.get(id(epoch), 0)
                _agrees(series["ack-latency"], got["ack-latency-ms"])
                _agrees(series["confirm-latency"], got["confirms"]["latency-ms"])
                checked += 1
    expect = path.with_suffix(".json")
    encrypted = path.with_suffix(".keys").exists()  # TLS: nothing to see without its keys
    if (
        expect.exists()
        and not encrypted
        and json.loads(expect.read_text()).get("expect", {}).get("deliveries")
    ):
        assert checked, "a scenario with deliveries, and no link or channel to check"


def test_the_series_show_what_the_scenarios_did() -> None:
    """091-qos-prefetch (as pika counted it): 20 publishes, 20 deliveries to a consumer with
    prefetch 5 that acks slowly, so the unacked level sits at 5; its sparkline reaches the top."""
    expect = json.loads((CAPTURES / "091-qos-prefetch.json").read_text())["expect"]
    tracker, *_ = _track(CAPTURES / "091-qos-prefetch.pcap")
    channels = [c for conn in tracker.summary()["connections"] for c in conn["channels"]]
    series = [c["series"] for c in channels]
    assert sum(sum((s["publishes"] or {}).get("counts", [])) for s in series) == expect["publishes"]
    delivered = [s for s in series if s["deliveries"]]
    assert sum(sum(s["deliveries"]["counts"]) for s in delivered) == expect["deliveries"]
    assert max(max(s["unacked"]["max"]) for s in delivered) == expect["max_unacked"]
    unacked = delivered[0]["unacked"]
    line = sparkline.sparkline(unacked, sparkline.span([unacked]))
    assert len(line) == sparkline.WIDTH and "█" in line


def test_sparklines_share_an_axis_and_fall_back_to_ascii() -> None:
    early = {"start": 0.0, "bucket-seconds": 1.0, "counts": [4, 0, 2, 0]}  # 0..4 s
    late = {"start": 4.0, "bucket-seconds": 0.5, "max": [1, 3, 3, 2, 2, 0, 0, 1]}  # 4..8 s
    axis = sparkline.span([early, late, None])
    assert axis == (0.0, 8.0)
    assert sparkline.resample(early, axis, 8) == [4.0, None, 2.0, None, None, None, None, None]
    assert sparkline.draw(sparkline.resample(early, axis, 8), rate=True) == "█ ▄     "
    assert sparkline.resample(late, axis, 4) == [None, None, 3.0, 2.0]
    # levels scale 0..max over the eight steps: 1 of 3 is step 2 (round(7/3)), 2 of 3 step 5
    assert sparkline.sparkline(late, axis) == " " * 8 + "▃██▆▆▁▁▃"
    assert sparkline.glyphs("utf-8") == sparkline.BLOCKS
    assert sparkline.glyphs("ascii") == sparkline.ASCII == "_.:-=+*#"
    assert sparkline.draw([0.0, 1.0, 7.0, None], rate=False, steps=sparkline.ASCII) == "_.# "
    assert sparkline.sparkline(None, axis) == "" and sparkline.sparkline(early, None) == ""
