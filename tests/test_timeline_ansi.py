"""The timeline on a terminal, written by its ANSI sink, is what rich prints, byte for byte.

On a terminal each line is styled (SGR codes around every run its styles split) and cut to the
terminal's width with "…"; the ANSI sink (`Timeline._ansi`) writes those bytes without rich, and
leaves rich the lines it cannot vouch for. rich itself is the oracle: the same frames through a
Timeline whose every line goes to rich. Held on every bundled and every damaged capture, with
the timeline's options, in each colour system that rich writes SGR 30-37 in, with NO_COLOR, with
no colour at all (`--color never --width N`), at widths that cut most lines and none, and on
frames holding hostile strings in every place a line shows text.
"""

from __future__ import annotations

import copy
import io
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from amqpscope.findings import Finding
from amqpscope.render.timeline import ONE_CELL, Timeline
from tests.test_timeline_plain import CAPTURES, HOSTILE, HOSTILE_CAPTURES, frames_of, with_text

ROOT = Path(__file__).resolve().parent.parent
#: consoles as `make_console` makes them on a terminal: (colour system, no_color)
CONSOLES = [("truecolor", False), ("256", False), ("standard", False), ("truecolor", True)]
OPTIONS: list[dict[str, Any]] = [{}, {"collapse": True, "body": True}, {"legend": False}]


def _console(width: int, system: str | None, no_color: bool, printed: list[int]) -> Console:
    class Counting(Console):
        def print(self, *args: Any, **kwargs: Any) -> None:
            printed[0] += 1
            super().print(*args, **kwargs)

    return Counting(
        file=io.StringIO(),
        force_terminal=True,
        color_system=system,  # type: ignore[arg-type]
        no_color=no_color,
        width=width,
        highlight=False,
        emoji=False,
        markup=False,
    )


def printed(frames: list[Any], width: int, system: str | None, no_color: bool, ansi: bool,
            **options: Any) -> tuple[str, int]:  # fmt: skip
    """What the timeline writes on this terminal, and how many lines rich printed."""
    count = [0]
    console = _console(width, system, no_color, count)
    timeline = Timeline(console, **options)
    assert timeline.fit
    if not ansi:
        timeline._ansi_ok = False  # every line through rich: the oracle
    for frame in frames:
        timeline.frame(frame)
    timeline.finish()
    return console.file.getvalue(), count[0]  # type: ignore[attr-defined]


def same(frames: list[Any], width: int, system: str | None, no_color: bool, **options: Any) -> int:
    fast, to_rich = printed(frames, width, system, no_color, True, **options)
    slow, _ = printed(frames, width, system, no_color, False, **options)
    assert fast == slow
    return to_rich


@pytest.mark.parametrize("path", CAPTURES, ids=[p.name for p in CAPTURES])
def test_every_capture_as_rich_prints_it_on_a_terminal(path: Path) -> None:
    frames = frames_of(path)
    for system, no_color in CONSOLES:
        for width in (60, 200):
            for options in OPTIONS:
                assert same(frames, width, system, no_color, **options) == 0
    for width in (40, 120):  # --color never --width N: cut, no colour
        assert same(frames, width, None, True, body=True) == 0


def test_every_damaged_capture_as_rich_prints_it_on_a_terminal(tmp_path: Path) -> None:
    from tests.test_damaged import damage  # tools/damage.py, loaded there

    cases = damage.build(tmp_path)
    assert cases
    for case in cases:
        frames = frames_of(tmp_path / case.file)
        for width in (50, 160):
            same(frames, width, "256", False, collapse=True, body=True)


#: words the sink colours inside a detail, overlapping and repeated, and an error's detail
OUTCOME_TEXT = ["accepted rejected", "acceptedaccepted", "xreceivedx declared", "modified…"]


@pytest.mark.parametrize("name", HOSTILE_CAPTURES)
def test_hostile_text_anywhere_is_written_as_rich_writes_it(name: str) -> None:
    frames = frames_of(ROOT / "captures" / name)
    if not any(f.findings for f in frames):  # a finding note on a line too
        frames[-1] = copy.copy(frames[-1])
        frames[-1].findings = [Finding("test.note", "warning", "a note")]
    for text in HOSTILE + OUTCOME_TEXT:
        for names in (False, True):
            changed = with_text(frames, text, names)
            for width in (45, 300):
                to_rich = same(changed, width, "truecolor", False, body=True)
                # rich prints only what has a character that is not one cell, or that it changes
                if ONE_CELL.fullmatch(text):
                    assert to_rich == 0, (text, names)
