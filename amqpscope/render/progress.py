"""A transient progress bar on stderr while a long capture file is read.

It shows only when the run has lasted `DELAY` seconds (a small file never flickers one), redraws
at most every `INTERVAL` seconds in place (carriage return, erase line), and erases itself before
other output and at the end, so nothing of it stays on the screen or in a scrollback that is
paged later. The caller decides whether it is wanted at all (only on a terminal: see cli/common.py).
Progress is bytes of the file read against its size (compressed bytes for a gzip file).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from typing import IO, TypeVar

T = TypeVar("T")

#: seconds before the bar first appears
DELAY = 0.5
#: seconds between redraws
INTERVAL = 0.1
#: items (packets) between looks at the clock
EVERY = 256
ERASE = "\r\x1b[K"


class ProgressBar:
    """Draws `label`, a bar and the share of `position()` = (bytes read, size) on `stream`."""

    def __init__(
        self,
        stream: IO[str],
        label: str,
        position: Callable[[], tuple[int, int]],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.label = label
        self.position = position
        self.clock = clock
        self.started = clock()
        self.quiet_since = self.started  # the last time other output was written
        self.drawn = 0.0
        self.shown = False
        self.fill, self.empty = _glyphs(stream)
        #: called before the bar draws: output held in blocks (the timeline's) goes out first
        self.before_draw: Callable[[], None] | None = None

    def wrap(self, items: Iterable[T]) -> Iterator[T]:
        """`items`, looking at the clock every `EVERY` of them."""
        n = 0
        tick = self.tick
        for item in items:
            yield item
            n += 1
            if n >= EVERY:
                n = 0
                tick()

    def tick(self) -> None:
        now = self.clock()
        if now - self.quiet_since < DELAY or now - self.drawn < INTERVAL:
            return
        done, total = self.position()
        if total <= 0:
            return
        self.drawn = now
        if self.before_draw is not None:
            self.before_draw()
        self._draw(min(done, total), total, now - self.started)

    def wrote(self) -> None:
        """Other output is about to go to the terminal: erase the bar, wait for quiet again."""
        self.quiet_since = self.clock()
        if self.shown:
            self.clear()

    def clear(self) -> None:
        if self.shown:
            self.shown = False
            self.stream.write(ERASE)
            self.stream.flush()

    def _draw(self, done: int, total: int, elapsed: float) -> None:
        columns = _columns(self.stream)
        share = done / total
        tail = f" {share * 100:3.0f}%  {_mb(done)}/{_mb(total)} MB  {elapsed:.0f} s"
        label = self.label
        room = columns - 1 - len(tail) - 2  # never the last column: no wrap
        if room < 10 + len(label) + 1:
            label = ""
        width = max(0, room - (len(label) + 1 if label else 0))
        filled = int(share * width)
        bar = self.fill * filled + self.empty * (width - filled)
        line = (f"{label} " if label else "") + f"{bar}{tail}"
        self.stream.write(ERASE + line[: max(0, columns - 1)])
        self.stream.flush()
        self.shown = True


def _columns(stream: IO[str]) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 80


def _glyphs(stream: IO[str]) -> tuple[str, str]:
    try:
        "█░".encode(getattr(stream, "encoding", None) or "ascii")
    except (UnicodeEncodeError, LookupError):
        return "#", "-"
    return "█", "░"


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f}"
