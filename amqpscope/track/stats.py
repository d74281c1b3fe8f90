"""Bounded statistics for both trackers: latencies and stall episodes, constant memory each.

Latencies keep a fixed-size reservoir of samples and exact count/min/max/mean: a capture of any
length costs `size` floats per statistic. Percentiles are exact while the
count is within the reservoir, and a uniform sample's percentiles beyond (Vitter's algorithm R,
with a fixed seed so that the same capture always gives the same numbers).
"""

from __future__ import annotations

import random
from typing import Any

#: samples kept per statistic, unless a tracker asks for another size
RESERVOIR = 4096
PERCENTILES = (50, 90, 99)


class Latency:
    """Durations in seconds in; a JSON summary in milliseconds out."""

    __slots__ = ("count", "max", "min", "rng", "samples", "size", "total")

    def __init__(self, size: int = RESERVOIR) -> None:
        self.size = size
        self.count = 0
        self.total = 0.0
        self.min = 0.0
        self.max = 0.0
        self.samples: list[float] = []
        self.rng: random.Random | None = None

    def add(self, seconds: float) -> None:
        if seconds < 0.0:
            seconds = 0.0  # capture timestamps can step back a little; never negative
        self.count += 1
        self.total += seconds
        if self.count == 1:
            self.min = self.max = seconds
        elif seconds < self.min:
            self.min = seconds
        elif seconds > self.max:
            self.max = seconds
        if self.count <= self.size:
            self.samples.append(seconds)
            return
        if self.rng is None:
            self.rng = random.Random(self.size)  # deterministic: same capture, same summary
        slot = self.rng.randrange(self.count)
        if slot < self.size:
            self.samples[slot] = seconds

    def to_json(self) -> dict[str, Any] | None:
        """{"count", "min", "mean", "p50", "p90", "p99", "max"} in milliseconds; None if empty."""
        if not self.count:
            return None
        ordered = sorted(self.samples)
        out: dict[str, Any] = {
            "count": self.count,
            "min": _ms(self.min),
            "mean": _ms(self.total / self.count),
        }
        last = len(ordered) - 1
        for p in PERCENTILES:
            out[f"p{p}"] = _ms(ordered[min(last, (p * len(ordered) + 99) // 100 - 1)])
        out["max"] = _ms(self.max)
        if self.count > self.size:
            out["sampled"] = self.size
        return out


class Episodes:
    """Periods of a stall (no credit, no window): how many, and for how long in total."""

    __slots__ = ("count", "longest", "seconds", "since")

    def __init__(self) -> None:
        self.count = 0
        self.seconds = 0.0
        self.longest = 0.0
        self.since: float | None = None  # start of the open episode

    def start(self, ts: float) -> None:
        if self.since is None:
            self.since = ts

    def cancel(self) -> None:
        self.since = None

    def stop(self, ts: float) -> float | None:
        """Close the open episode at `ts`; its length, or None if none was open."""
        if self.since is None:
            return None
        length = max(ts - self.since, 0.0)
        self.since = None
        self.count += 1
        self.seconds += length
        self.longest = max(self.longest, length)
        return length

    def summary(self) -> dict[str, Any]:
        return {
            "episodes": self.count,
            "seconds": round(self.seconds, 6),
            "longest": round(self.longest, 6),
        }


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 3)
