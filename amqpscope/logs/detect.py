"""Which log format a text holds, from its content (never its file name).

Each format's `looks_like` is asked of the first lines; the format most lines look like wins,
and a tie goes to the format listed first. Looking like is cheap and loose (a README that
quotes frames in its prose looks like several formats), so a format counts only once its
grammar reads at least `CONFIRM` of those lines as frames (a line a wrap cut, joined with the
next), or one in a short text (at most `SHORT` lines that are not blank). No format
confirmed: not a log amqpscope reads (the caller says so, naming the formats it knows).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from amqpscope.logs.formats import FORMATS, Format
from amqpscope.logs.reader import _may_go_on
from amqpscope.logs.values import LogLineEnded, LogSyntaxError

#: lines looked at
SAMPLE: Final = 2000
#: frames a format's grammar must read among them
CONFIRM: Final = 2
#: a text this short (lines not blank) may be a log of one frame
SHORT: Final = 10
_ERRORS: Final = (LogSyntaxError, ValueError, KeyError, IndexError, TypeError)


def _reads(fmt: Format, lines: list[str], at: int) -> bool:
    """Whether line `at` reads as one of `fmt`'s frames, alone or joined with the next line
    (a logger's indentation dropped or not) when it ends unfinished."""
    try:
        return fmt.parse(lines[at]) is not None
    except LogLineEnded:
        pass
    except _ERRORS as why:
        if not isinstance(why, LogSyntaxError) or not _may_go_on(lines[at]):
            return False
    if at + 1 >= len(lines):
        return False
    text, after = lines[at].rstrip("\r\n"), lines[at + 1]
    for joined in (text + after.lstrip(), text + after):
        try:
            if fmt.parse(joined) is not None:
                return True
        except _ERRORS:
            continue
    return False


def detect(lines: Iterable[str]) -> str | None:
    """The format name of the log whose first lines are `lines`, or None."""
    sample = []
    for seen, line in enumerate(lines):
        if seen >= SAMPLE:
            break
        sample.append(line)
    votes = dict.fromkeys(FORMATS, 0)
    read = dict.fromkeys(FORMATS, 0)
    for at, line in enumerate(sample):
        for name, fmt in FORMATS.items():
            if fmt.looks_like(line):
                votes[name] += 1
                if read[name] < CONFIRM and _reads(fmt, sample, at):
                    read[name] += 1
    enough = 1 if sum(1 for line in sample if line.strip()) <= SHORT else CONFIRM
    confirmed = [name for name in FORMATS if read[name] >= enough]
    return max(confirmed, key=lambda name: votes[name]) if confirmed else None
