"""Bounded statistics: latency samples kept in a fixed-size reservoir, exact count/min/max/mean.

A capture of any length costs `RESERVOIR` floats per statistic. Percentiles are exact while the
count is within the reservoir, and a uniform sample's percentiles beyond (Vitter's algorithm R,
with a fixed seed so that the same capture always gives the same numbers).
"""

from __future__ import annotations

import random
from typing import Any

#: samples kept per statistic
RESERVOIR = 4096
PERCENTILES = (50, 90, 99)


class Latency:
    """Durations in seconds in; a JSON summary in milliseconds out."""

    __slots__ = ("count", "max", "min", "rng", "samples", "total")

    def __init__(self) -> None:
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
        if self.count <= RESERVOIR:
            self.samples.append(seconds)
            return
        if self.rng is None:
            self.rng = random.Random(RESERVOIR)
        slot = self.rng.randrange(self.count)
        if slot < RESERVOIR:
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
        if self.count > RESERVOIR:
            out["sampled"] = RESERVOIR
        return out


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 3)
