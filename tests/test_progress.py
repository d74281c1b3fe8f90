"""The progress bar (`amqpscope/render/progress.py`) on a fake clock and a string stream."""

from __future__ import annotations

import io

from amqpscope.render import progress
from amqpscope.render.progress import ERASE, ProgressBar


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make(total: int = 1000) -> tuple[ProgressBar, io.StringIO, Clock, list[int]]:
    stream = io.StringIO()
    clock = Clock()
    done = [0]
    bar = ProgressBar(stream, "reading x.pcap", lambda: (done[0], total), clock)
    return bar, stream, clock, done


def test_nothing_before_the_delay_then_a_bar_redrawn_in_place() -> None:
    bar, stream, clock, done = make()
    done[0] = 250
    clock.now += progress.DELAY / 2
    bar.tick()
    assert stream.getvalue() == ""  # a short file never shows one
    clock.now += progress.DELAY
    bar.tick()
    first = stream.getvalue()
    assert first.startswith(ERASE) and "reading x.pcap" in first and " 25%" in first
    assert "\n" not in first  # one line, rewritten in place
    bar.tick()  # within the redraw interval: nothing
    assert stream.getvalue() == first
    done[0] = 1000
    clock.now += 2 * progress.INTERVAL
    bar.tick()
    last = stream.getvalue().split(ERASE)[-1]
    assert "100%" in last and "#" * 20 in last and "-" not in last  # full (ASCII: no encoding)
    assert bar.shown


def test_it_erases_itself_before_other_output_and_at_the_end() -> None:
    bar, stream, clock, _ = make()
    clock.now += progress.DELAY
    bar.tick()
    assert bar.shown
    bar.wrote()  # a timeline line is about to be printed
    assert stream.getvalue().endswith(ERASE) and not bar.shown
    bar.tick()  # output just happened: quiet for DELAY before the bar comes back
    assert stream.getvalue().endswith(ERASE)
    clock.now += progress.DELAY
    bar.tick()
    assert bar.shown
    bar.clear()
    assert stream.getvalue().endswith(ERASE) and not bar.shown
    written = stream.getvalue()
    bar.clear()  # twice is harmless, and writes nothing more
    assert stream.getvalue() == written


def test_wrap_passes_everything_through_and_ticks() -> None:
    bar, stream, clock, _ = make(total=0)  # size unknown (not a regular file): no bar
    clock.now += 10
    assert list(bar.wrap(range(3 * progress.EVERY))) == list(range(3 * progress.EVERY))
    assert stream.getvalue() == ""
    bar, stream, clock, _ = make()
    clock.now += 10
    assert list(bar.wrap(range(progress.EVERY))) == list(range(progress.EVERY))
    assert "reading x.pcap" in stream.getvalue()


def test_a_narrow_terminal_gets_a_line_that_fits() -> None:
    bar, stream, clock, _ = make()
    clock.now += progress.DELAY
    bar.tick()
    line = stream.getvalue()[len(ERASE) :]
    assert len(line) <= 79  # StringIO has no terminal: 80 columns, never the last one


def test_lines_held_in_a_block_go_out_before_the_bar_draws() -> None:
    """The timeline writes its lines in blocks: what it holds must be on the terminal before the
    bar draws under it, or the last lines would show only when the file ends."""
    from rich.console import Console

    from amqpscope.render.timeline import Timeline
    from tests.test_timeline_plain import CAPTURES, frames_of

    bar, stream, clock, _ = make()
    console = Console(file=stream, force_terminal=True, width=100, color_system="256")
    timeline = Timeline(console)
    bar.before_draw = timeline.write_pending
    frames = frames_of(CAPTURES[0])[:3]
    for frame in frames:
        bar.wrote()
        timeline.frame(frame)
    assert stream.getvalue().count("\n") == 0  # held
    clock.now += progress.DELAY
    bar.tick()
    text = stream.getvalue()
    assert text.count("\n") >= len(frames) and text.rindex("\n") < text.rindex(ERASE)
