"""Which log format a text holds, from its content (never its file name).

Each format's `looks_like` is asked of the first lines; the format most lines look like wins,
and a tie goes to the format listed first. No line looking like any format: not a log
amqpscope reads (the caller says so, naming the formats it knows).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from amqpscope.logs.formats import FORMATS

#: lines looked at
SAMPLE: Final = 2000


def detect(lines: Iterable[str]) -> str | None:
    """The format name of the log whose first lines are `lines`, or None."""
    votes = dict.fromkeys(FORMATS, 0)
    for seen, line in enumerate(lines):
        if seen >= SAMPLE:
            break
        for name, fmt in FORMATS.items():
            if fmt.looks_like(line):
                votes[name] += 1
    best = max(votes, key=lambda name: votes[name])
    return best if votes[best] else None
