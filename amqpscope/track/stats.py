"""Bounded statistics for both trackers: latencies, stall episodes and time series, constant
memory each.

Latencies keep a fixed-size reservoir of samples and exact count/min/max/mean: a capture of any
length costs `size` floats per statistic. Percentiles are exact while the
count is within the reservoir, and a uniform sample's percentiles beyond (Vitter's algorithm R,
with a fixed seed so that the same capture always gives the same numbers).

Time series (`Level`, `Rate`) keep `BUCKETS` buckets over capture time from their first sample.
Buckets start `FIRST_WIDTH` seconds wide; a sample past the last bucket doubles the width by
merging neighbour pairs (a level keeps the max and min of the pair, a rate their sum), so a
series covers between half and all of its buckets whatever the capture's length, and the sum or
the extremes over all buckets never change by merging. The widths are powers of two, so the
arithmetic is exact and two series that started at the same time stay aligned.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, Final

#: samples kept per statistic, unless a tracker asks for another size
RESERVOIR: Final = 4096
PERCENTILES: Final = (50, 90, 99)
#: buckets per time series (a sparkline's worth)
BUCKETS: Final = 32
#: the first bucket width in seconds (2**-16: 15 microseconds, finer than most captures'
#: timestamps); it doubles as time runs on, so any series longer than half a millisecond uses
#: between half and all of its buckets
FIRST_WIDTH: Final = 2.0**-16


class Latency:
    """Durations in seconds in; a JSON summary in milliseconds out."""

    __slots__ = ("count", "draw", "max", "min", "samples", "size", "total")

    def __init__(self, size: int = RESERVOIR) -> None:
        self.size = size
        self.count = 0
        self.total = 0.0
        self.min = 0.0
        self.max = 0.0
        self.samples: list[float] = []
        #: the reservoir's draws, made when it is full: a seeded `Random`'s bound `random`, so
        #: that each draw is a direct call (not a method looked up by name every time)
        self.draw: Callable[[], float] | None = None

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
        draw = self.draw
        if draw is None:
            # deterministic: same capture, same summary
            draw = self.draw = random.Random(self.size).random
        slot = int(draw() * self.count)  # randrange's exactness costs 4x more
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


#: stall episodes at least this long are listed with their start (shorter ones only counted)
LISTED_SECONDS: Final = 1.0
MAX_LISTED: Final = 16


class Episodes:
    """Periods of a stall (no credit, no window): how many, and for how long in total."""

    __slots__ = ("count", "longest", "opened", "periods", "seconds", "since", "starts")

    def __init__(self) -> None:
        self.count = 0
        self.seconds = 0.0
        self.longest = 0.0
        self.since: float | None = None  # start of the open episode
        #: episodes of LISTED_SECONDS or more: (start, length, still open when the capture or
        #: the connection ended), the first MAX_LISTED (diagnoses show when each happened)
        self.periods: list[tuple[float, float, bool]] = []
        #: beside each of `periods`: the frame that began it and a count then (a starved
        #: link's messages waiting), None where unknown; `opened` is the open episode's
        self.starts: list[tuple[int | None, int | None]] = []
        self.opened: tuple[int | None, int | None] = (None, None)

    def start(self, ts: float, frame: int | None = None, count: int | None = None) -> None:
        """An episode starts at `ts` unless one is open; `frame` began it (the transfer that
        used the last credit), `count` what was waiting then: a diagnosis cites them."""
        if self.since is None:
            self.since = ts
            self.opened = (frame, count)

    def cancel(self) -> None:
        self.since = None

    def stop(self, ts: float, at_end: bool = False) -> float | None:
        """Close the open episode at `ts` (`at_end`: because its connection or the capture
        ended, not because the stall was over); its length, or None if none was open."""
        if self.since is None:
            return None
        length = max(ts - self.since, 0.0)
        if length >= LISTED_SECONDS and len(self.periods) < MAX_LISTED:
            self.periods.append((self.since, length, at_end))
            self.starts.append(self.opened)
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


class _Series:
    """What `Level` and `Rate` share: the clock. `origin` is the first sample's time, bucket `i`
    covers [origin + i*width, origin + (i+1)*width), `top` is the last bucket written."""

    __slots__ = ("origin", "scale", "size", "top", "width")

    def __init__(self, size: int = BUCKETS) -> None:
        self.size = max(2, size - size % 2)  # pairs merge: an even number of buckets
        self.origin: float | None = None
        self.width = FIRST_WIDTH
        self.scale = 1.0 / FIRST_WIDTH  # exact: the width is a power of two
        self.top = -1

    def _index(self, ts: float) -> int:
        origin = self.origin
        if origin is None:
            self.origin = ts
            return 0
        i = int((ts - origin) * self.scale)
        if i >= self.size:
            while i >= self.size:  # merge neighbour pairs: twice the width, half the index
                self._halve()
                self.width *= 2.0
                self.scale *= 0.5
                self.top >>= 1
                i >>= 1
        elif i < 0:
            i = 0  # capture timestamps can step back a little
        return i

    def _halve(self) -> None:
        raise NotImplementedError

    def _head(self) -> dict[str, Any]:
        return {"start": round(self.origin or 0.0, 6), "bucket-seconds": self.width}


class Level(_Series):
    """A level that steps (credit, unsettled or unacked deliveries): per bucket the max and min
    it had during the bucket, a value carried on from the bucket before included."""

    __slots__ = ("last", "max", "min")

    def __init__(self, size: int = BUCKETS) -> None:
        super().__init__(size)
        self.max: list[int] = [0] * self.size
        self.min: list[int] = [0] * self.size
        self.last = 0

    def set(self, ts: float, value: int | None) -> None:
        """The level is `value` from `ts` on (None: unknown, not recorded)."""
        if value is None:
            return
        origin = self.origin
        if origin is not None and int((ts - origin) * self.scale) == self.top:
            i = self.top  # the common case, inline: the newest bucket again
            if value > self.max[i]:
                self.max[i] = value
            elif value < self.min[i]:
                self.min[i] = value
            self.last = value
            return
        i = self._index(ts)
        top = self.top
        if i > top:
            if top < 0:  # the first sample
                self.max[i] = self.min[i] = value
                self.top = i
                self.last = value
                return
            last = self.last
            highs, lows = self.max, self.min
            for j in range(top + 1, i + 1):  # the level held until now
                highs[j] = lows[j] = last
            self.top = top = i
        elif i < top:
            i = top  # late: the level is set now, in the newest bucket
        if value > self.max[i]:
            self.max[i] = value
        elif value < self.min[i]:
            self.min[i] = value
        self.last = value

    def _halve(self) -> None:
        highs, lows, top = self.max, self.min, self.top
        for j in range(0, top + 1, 2):
            k = j + 1 if j < top else j  # an odd last bucket merges with nothing
            highs[j >> 1] = max(highs[j], highs[k])
            lows[j >> 1] = min(lows[j], lows[k])

    def peak(self) -> int | None:
        return max(self.max[: self.top + 1]) if self.top >= 0 else None

    def to_json(self) -> dict[str, Any] | None:
        """{"start", "bucket-seconds", "max": [...], "min": [...]}; None before any sample."""
        if self.top < 0:
            return None
        n = self.top + 1
        return {**self._head(), "max": self.max[:n], "min": self.min[:n]}


class Rate(_Series):
    """Events over time (deliveries, publishes): per bucket how many happened in it."""

    __slots__ = ("counts",)

    def __init__(self, size: int = BUCKETS) -> None:
        super().__init__(size)
        self.counts: list[int] = [0] * self.size

    def add(self, ts: float, n: int = 1) -> None:
        origin = self.origin
        if origin is not None:
            i = int((ts - origin) * self.scale)
            if i == self.top:  # the common case, inline: the newest bucket again
                self.counts[i] += n
                return
        i = self._index(ts)
        self.counts[i] += n
        if i > self.top:
            self.top = i

    def _halve(self) -> None:
        counts, top = self.counts, self.top
        for j in range(0, top + 1, 2):
            counts[j >> 1] = counts[j] + counts[j + 1]
        for j in range((top >> 1) + 1, top + 1):
            counts[j] = 0

    def total(self) -> int:
        return sum(self.counts)

    def to_json(self) -> dict[str, Any] | None:
        """{"start", "bucket-seconds", "counts": [...]}; None before any event."""
        if self.top < 0:
            return None
        return {**self._head(), "counts": self.counts[: self.top + 1]}


class Durations(_Series):
    """Durations over time (settle, ack, confirm latency), by when each ended: per bucket the
    longest, their total and how many. Merging sums totals and counts and keeps the longest."""

    __slots__ = ("counts", "longest", "totals")

    def __init__(self, size: int = BUCKETS) -> None:
        super().__init__(size)
        self.longest: list[float] = [0.0] * self.size
        self.totals: list[float] = [0.0] * self.size
        self.counts: list[int] = [0] * self.size

    def add(self, ts: float, seconds: float) -> None:
        if seconds < 0.0:
            seconds = 0.0  # capture timestamps can step back a little
        i = self._index(ts)
        self.counts[i] += 1
        self.totals[i] += seconds
        if seconds > self.longest[i]:
            self.longest[i] = seconds
        if i > self.top:
            self.top = i

    def _halve(self) -> None:
        longest, totals, counts, top = self.longest, self.totals, self.counts, self.top
        for j in range(0, top + 1, 2):
            longest[j >> 1] = max(longest[j], longest[j + 1])
            totals[j >> 1] = totals[j] + totals[j + 1]
            counts[j >> 1] = counts[j] + counts[j + 1]
        for j in range((top >> 1) + 1, top + 1):
            longest[j] = totals[j] = 0.0
            counts[j] = 0

    def to_json(self) -> dict[str, Any] | None:
        """{"start", "bucket-seconds", "max-ms": [...], "mean-ms": [...], "counts": [...]}, a
        bucket with none ended null in both; None before the first."""
        if self.top < 0:
            return None
        n = self.top + 1
        counts = self.counts[:n]
        return {
            **self._head(),
            "max-ms": [_ms(self.longest[i]) if counts[i] else None for i in range(n)],
            "mean-ms": [_ms(self.totals[i] / counts[i]) if counts[i] else None for i in range(n)],
            "counts": counts,
        }


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 3)
