"""Several files: the pieces of one rotated capture, or vantage points of the same traffic?

Told by content (sans-IO: the caller says what each file spans). A rotated capture's pieces
follow each other (tcpdump -G/-C, dumpcap's ring buffer close one file before the next
begins: connections continue from one into the next, and no packet is in two of them);
vantage points record the same traffic (captures on two hosts, a client's log beside a
capture): a packet one begins with is in another (the same TCP segment: ends, sequence number
and length), or their times overlap (on clocks that agree). A frame-trace log is never a piece
of a rotated capture.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

ROTATED: Final = "rotated"
VANTAGE: Final = "vantage"
AUTO: Final = "auto"
#: what `--inputs` takes
MODES: Final = (AUTO, ROTATED, VANTAGE)


@dataclass(frozen=True, slots=True)
class Span:
    """One file: whether it is a log, the times of its first and last packets (None when it
    has none), and whether it holds a packet another file begins with (`shares`)."""

    log: bool
    first: float | None
    last: float | None
    shares: bool = False


def tell(spans: Sequence[Span]) -> str:
    """ROTATED when every file begins after the one before it ends (in the order of their
    first times) and none holds another's packets; VANTAGE when a log is among them, a file
    holds a packet another begins with, or two overlap in time."""
    if any(span.log or span.shares for span in spans):
        return VANTAGE
    timed = sorted((s for s in spans if s.first is not None), key=lambda s: s.first or 0.0)
    for before, after in itertools.pairwise(timed):
        assert before.last is not None and after.first is not None
        if after.first < before.last:
            return VANTAGE
    return ROTATED


#: how many TCP segments with a payload of each file's beginning are looked for in the others
BEGINNING: Final = 64


def segment_key(src: object, dst: object, seq: int, length: int) -> tuple[object, ...]:
    """A TCP segment as two captures of it both show it."""
    return (src, dst, seq, length)
