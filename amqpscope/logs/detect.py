"""Which log format a text holds, from its content (never its file name).

Each format's `looks_like` is asked of the first lines; the format most lines look like wins,
and a tie goes to the format listed first. Looking like is cheap and loose (a README that
quotes frames in its prose looks like several formats), so a format counts only once its
grammar reads at least `CONFIRM` of those lines as frames (a line a wrap cut, joined with the
next), or one in a short text (at most `SHORT` lines that are not blank) or among the
library's own lines (`LIBRARIES`: pika's logger names). No format confirmed: not a log
amqpscope reads (the caller says so, naming the formats it knows).

A log's first frame may come late: pika's DEBUG log of a BlockingConnection prints thousands
of lines of its I/O loop before the first frame it received that it prints. `sniff` looks on
past the first `SAMPLE` lines, up to `REACH` characters, keeping what it read for the reader,
and names a library whose own lines the text has, so that when no frame of it was found the
error can say why.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Final, NamedTuple

from amqpscope.logs.formats import FORMATS, Format
from amqpscope.logs.partial import closings
from amqpscope.logs.reader import _may_go_on
from amqpscope.logs.unwrap import number_after, respace, unwrap
from amqpscope.logs.values import LogLineEnded, LogSyntaxError

#: lines looked at
SAMPLE: Final = 2000
#: lines a frame's text may go on into (a terminal's hard wrap): a line is looked at once
#: these have come
JOINS: Final = 6
#: frames a format's grammar must read among them
CONFIRM: Final = 2
#: a text this short (lines not blank) may be a log of one frame
SHORT: Final = 10
#: characters looked through for a format's frames when the first lines confirm none; what
#: is read is kept (replayed to the reader), so this bounds the memory a late frame costs
REACH: Final = 16 << 20
#: libraries whose logs may hold no frame amqpscope reads: what their own lines have (the
#: logger's name), and why there is no frame (for the error)
LIBRARIES: Final = {
    "pika": (
        (" pika.", ":pika.", "[pika."),
        "pika prints only some of the frames it receives at DEBUG, and none it sends",
    ),
}
_ERRORS: Final = (LogSyntaxError, ValueError, KeyError, IndexError, TypeError)


def _reads(fmt: Format, lines: list[str], at: int) -> bool:
    """Whether line `at` reads as one of `fmt`'s frames: alone (without a line number after
    it, `unwrap.number_after`), or joined with the lines after it (a logger's indentation
    dropped or not, up to `JOINS` of them: a terminal's hard wrap) while it ends unfinished,
    or, the log's last line, as a frame cut short."""
    line = lines[at]
    number = number_after(line) if line.rstrip()[-1:].isdigit() else 0
    if number:
        try:
            if fmt.parse(line[:number].rstrip() + "\n") is not None:
                return True
        except _ERRORS:
            pass
    try:
        return fmt.parse(line) is not None
    except LogLineEnded:
        pass
    except _ERRORS as why:
        if not isinstance(why, LogSyntaxError) or not _may_go_on(line):
            return False
    text = line.rstrip("\r\n")
    for after in lines[at + 1 : at + 1 + JOINS]:
        going = ""
        for joined in (text + after.lstrip(), text + after):
            try:
                if fmt.parse(joined) is not None:
                    return True
            except _ERRORS as why:
                if not going and isinstance(why, LogSyntaxError) and _may_go_on(joined):
                    going = joined.rstrip("\r\n")
        if not going:
            return False
        text = going
    return at + 1 + JOINS > len(lines) and _reads_cut(fmt, text)


def _reads_cut(fmt: Format, line: str) -> bool:
    """Whether the log's last line is one of `fmt`'s frames cut short (an excerpt that ends
    mid-frame: the reader makes a truncated record of it), its text closed after a whole
    field (`partial.closings`)."""
    for closed in closings(line.rstrip("\r\n")):
        try:
            if fmt.parse(closed) is not None:
                return True
        except _ERRORS:
            continue
    return False


class Detector:
    """Votes and confirmations of each format, line by line (a line is looked at once `JOINS`
    more have come, for a frame a wrap cut in pieces)."""

    def __init__(self) -> None:
        self.lines: list[str] = []  # as they came (read again by the reader)
        #: the same lines with what wraps them peeled (`unwrap`), which the grammars read
        self.texts: list[str] = []
        self.votes = dict.fromkeys(FORMATS, 0)
        self.read = dict.fromkeys(FORMATS, 0)
        self.filled = 0  # lines not blank
        self.looked = 0  # lines looked at
        self.own: set[str] = set()  # the `LIBRARIES` whose own lines were seen

    def add(self, line: str) -> None:
        self.lines.append(line)
        self.texts.append(respace(unwrap(line)[0]))
        if line.strip():
            self.filled += 1
        if len(self.lines) > JOINS:
            self._look(len(self.lines) - 1 - JOINS)

    def _look(self, at: int) -> None:
        lines, votes, read = self.texts, self.votes, self.read
        line = lines[at]
        for name, (marks, _why) in LIBRARIES.items():  # the library's lines, not its frames
            own = name not in self.own and any(mark in line for mark in marks)
            if own and not FORMATS[name].looks_like(line):
                self.own.add(name)
        number = number_after(line) if line.rstrip()[-1:].isdigit() else 0
        bare = line[:number].rstrip() if number else line  # a line number after the frame
        for name, fmt in FORMATS.items():
            if fmt.looks_like(line) or (number and fmt.looks_like(bare)):
                votes[name] += 1
                if read[name] < CONFIRM and _reads(fmt, lines, at):
                    read[name] += 1
        self.looked = at + 1

    def result(self, final: bool = True) -> str | None:
        """The format of the lines added: `final`, all of them looked at (the last one with no
        next line), else all but the last one."""
        if final:
            for at in range(self.looked, len(self.lines)):
                self._look(at)
        enough = 1 if self.filled <= SHORT else CONFIRM
        # a library's own lines around it confirm a frame of its format as a second one would
        confirmed = [
            name for name in FORMATS if self.read[name] >= (1 if name in self.own else enough)
        ]
        return max(confirmed, key=lambda name: self.votes[name]) if confirmed else None


def detect(lines: Iterable[str]) -> str | None:
    """The format name of the log whose first lines are `lines`, or None."""
    detector = Detector()
    for seen, line in enumerate(lines):
        if seen >= SAMPLE:
            break
        detector.add(line)
    return detector.result()


class Sniffed(NamedTuple):
    fmt: str | None  # the format, None if no format was confirmed
    lines: list[str]  # the lines read to tell, to be read again
    library: tuple[str, str] | None  # a library whose own lines were seen, and why its log
    # may hold no frame (`LIBRARIES`): what to say when no format was confirmed


def sniff(lines: Iterator[str]) -> Sniffed:
    """The format of the log `lines` go on with, from the first `SAMPLE` lines and on, up to
    `REACH` characters, while no format is confirmed."""
    detector = Detector()
    kept = detector.lines
    size = 0
    fmt = None
    for line in lines:
        detector.add(line)
        size += len(line)
        if len(kept) % SAMPLE == 0:
            fmt = detector.result(final=False)
            if fmt is not None or size >= REACH:
                break
    else:
        fmt = detector.result()
    own = next(iter(detector.own), None)
    return Sniffed(fmt, kept, (own, LIBRARIES[own][1]) if own is not None else None)
