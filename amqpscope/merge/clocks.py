"""How far an input's clock is from the reference input's, from what must be causal (sans-IO).

A frame is sent before it is received, so where two inputs saw the same frame the one nearer
its sender saw it first. With `d = t(input) - t(reference)` for each frame both saw, the
offset `off` (the input's clock minus the reference's: its times less `off` are the
reference's) is bounded by each frame's `d` from one side, which side by the frame's
direction and by which end each input is nearer:

- a capture beside a capture: the input nearer the server (hypothesis "server") sees what the
  server sends first, so `off >= d` for server-to-client frames and `off <= d` for
  client-to-server ones; nearer the client, the other way round. The hypothesis whose
  interval is not empty is the one taken; when neither is (both captures on one host, their
  stamps a few microseconds apart either way) the estimate is the median `d` and the bound
  half the spread of the `d`s.
- a client's log beside a capture: the client logs what it sends before the wire carries it
  and what it receives after (`off >= d` for c2s, `off <= d` for s2c), each log time late by
  up to the log's resolution (a millisecond for `%(asctime)s`).

The estimate is the middle of the interval and its bound half its width; an interval open on
one side (a log that shows only what it received) gives its closed end as the estimate and no
bound (`bound` is infinite).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

#: how the offset was found
ESTIMATED: Final = "estimated"
GIVEN: Final = "given"
REFERENCE: Final = "reference"
UNKNOWN: Final = "unknown"  # nothing seen in both: no correction
UNTIMED: Final = "untimed"  # a log without times: its frames placed by the captured ones


@dataclass(frozen=True, slots=True)
class Offset:
    """An input's clock offset: `seconds` (its times minus the reference's), `bound` (the
    estimate is within it of the truth, as far as causality shows; infinite: one-sided), how
    it was found, from how many frames seen in both, and which end the input is nearer
    ("client", "server", "same" when the captures' stamps do not tell)."""

    seconds: float
    bound: float
    how: str
    pairs: int = 0
    nearer: str = ""

    def text(self) -> str:
        """`+0.184 s ± 0.002` as the issue writes it; what is not estimated says so."""
        sign = f"{self.seconds:+.3f} s"
        if self.how == GIVEN:
            return f"{sign} (given)"
        if self.how == REFERENCE:
            return "+0.000 s (the reference clock)"
        if self.how == UNKNOWN:
            return "+0.000 s (no frame seen in both: not corrected)"
        if self.how == UNTIMED:
            return "no clock (its lines have no time: its frames are placed by the captured ones)"
        if math.isinf(self.bound):
            return f"{sign}, at most (one-sided: frames one way only; {self.pairs} frames)"
        return f"{sign} ± {self.bound:.3f} ({self.pairs} frames seen in both)"

    def to_json(self) -> dict[str, object]:
        return {
            "seconds": self.seconds,
            "bound": None if math.isinf(self.bound) else self.bound,
            "how": self.how,
            "pairs": self.pairs,
            "nearer": self.nearer or None,
        }


def _interval(lower: Sequence[float], upper: Sequence[float]) -> tuple[float, float]:
    """[max of lower bounds, min of upper bounds]; infinite where there are none."""
    low = max(lower) if lower else -math.inf
    high = min(upper) if upper else math.inf
    return low, high


def between_captures(c2s: Sequence[float], s2c: Sequence[float]) -> Offset:
    """The offset from two captures' `d`s (input minus reference) of frames each way."""
    pairs = len(c2s) + len(s2c)
    if not pairs:
        return Offset(0.0, math.inf, UNKNOWN)
    # nearer the server: off in [max d of s2c, min d of c2s]; nearer the client: reversed
    server = _interval(s2c, c2s)
    client = _interval(c2s, s2c)
    fits = [(h, w) for h, w in (("server", server), ("client", client)) if w[0] <= w[1]]
    closed = [(h, w) for h, w in fits if not math.isinf(w[0]) and not math.isinf(w[1])]
    if c2s and s2c and len(closed) == 1:
        nearer, (low, high) = closed[0]
        return Offset((low + high) / 2, (high - low) / 2, ESTIMATED, pairs, nearer)
    every = [*c2s, *s2c]
    middle = statistics.median(every)
    spread = (max(every) - min(every)) / 2
    return Offset(middle, spread, ESTIMATED, pairs, "same")


def from_client_log(c2s: Sequence[float], s2c: Sequence[float], resolution: float) -> Offset:
    """The offset of a client's log from its `d`s (log minus capture): what it sent was
    logged before the wire saw it, what it received after; each log time may be up to
    `resolution` early (cut, not rounded)."""
    pairs = len(c2s) + len(s2c)
    if not pairs:
        return Offset(0.0, math.inf, UNKNOWN)
    low, high = _interval([d - resolution for d in c2s], [d + resolution for d in s2c])
    if low > high:  # the log's clock is not steady against the wire: the middle of the two
        low, high = high, low
    if math.isinf(low) and math.isinf(high):
        return Offset(0.0, math.inf, UNKNOWN, pairs)
    if math.isinf(low):
        return Offset(high, math.inf, ESTIMATED, pairs, "client")
    if math.isinf(high):
        return Offset(low, math.inf, ESTIMATED, pairs, "client")
    return Offset((low + high) / 2, (high - low) / 2, ESTIMATED, pairs, "client")


def resolution_of(times: Sequence[float]) -> float:
    """A log's time resolution: a millisecond when every time is a whole millisecond, else a
    microsecond."""
    if times and all(abs(t * 1000 - round(t * 1000)) < 1e-3 for t in times[:200]):
        return 0.001
    return 1e-6
