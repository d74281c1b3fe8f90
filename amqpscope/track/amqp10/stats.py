"""Bounded statistics: settlement latency and stall episodes, constant memory per link."""

from __future__ import annotations

import random
from typing import Any

from amqpscope.track.amqp10.rules import RESERVOIR


class Latency:
    """Settlement latencies (seconds in, milliseconds out): exact count, mean and max, and
    percentiles from a fixed-size reservoir (exact while fewer than `RESERVOIR` samples)."""

    __slots__ = ("_rng", "count", "max", "samples", "total")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0.0
        self.max = 0.0
        self.samples: list[float] = []
        self._rng: random.Random | None = None

    def add(self, seconds: float) -> None:
        seconds = max(seconds, 0.0)
        self.count += 1
        self.total += seconds
        if seconds > self.max:
            self.max = seconds
        if len(self.samples) < RESERVOIR:
            self.samples.append(seconds)
            return
        if self._rng is None:
            self._rng = random.Random(RESERVOIR)  # deterministic: same capture, same summary
        slot = self._rng.randrange(self.count)
        if slot < RESERVOIR:
            self.samples[slot] = seconds

    def summary(self) -> dict[str, Any] | None:
        if not self.count:
            return None
        ordered = sorted(self.samples)

        def pct(p: float) -> float:
            return _ms(ordered[min(len(ordered) - 1, int(p * len(ordered)))])

        return {
            "count": self.count,
            "mean": _ms(self.total / self.count),
            "p50": pct(0.50),
            "p90": pct(0.90),
            "p99": pct(0.99),
            "max": _ms(self.max),
        }


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
