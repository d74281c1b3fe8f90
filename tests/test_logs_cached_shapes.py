"""The grammars' caches of lines like lines read before (`logs/shapes.py`, Proton's, pika's)
never change what a line reads as: a line read after lines of its shape with other numbers
(0s, leading zeros, widths past a type's range) gives the records and findings it gives with
every cache cleared before each line. The caches are module-level and shared by every reader
in a process, so a difference here is a reader's output that depends on what an earlier,
unrelated reader saw.

The lines are each format's frame lines: the recorded logs in captures/ and the logs
tests/made_logs.py makes for the formats with none recorded (from the printers their tests
hold the grammars to; bench/logs.py times the same logs); their runs of digits are what the
property varies.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from amqpscope.logs import amqpnetlite as netlite
from amqpscope.logs import goamqp, pika, proton, pyamqp, rhea
from amqpscope.logs import protonj as pj
from amqpscope.logs.reader import records_from_log
from amqpscope.render.lines import frame_ndjson
from tests import made_logs

ROOT = Path(__file__).resolve().parent.parent
_RUN = re.compile(r"\d+", re.ASCII)
#: numbers where a reading may turn: zeros, leading zeros, a type's edges and past them
_EDGES = ["0", "00", "05", "1", "9", "10", "255", "256", "65535", "65536", "4294967295"]
_EDGES += ["4294967296", "18446744073709551615", "18446744073709551616"]


def clear_caches() -> None:
    for shapes in (goamqp._SHAPES, netlite._SHAPES, pj._SHAPES, pyamqp._SHAPES):
        shapes.cache.clear()
    for shapes in rhea._SHAPES.values():
        shapes.cache.clear()
    proton._CACHE.clear()
    proton._OLD_CACHE.clear()
    pika._CACHE.clear()


@cache
def frame_lines(fmt: str) -> tuple[str, ...]:
    """The lines of `fmt`'s logs that hold a frame (no chatter: nothing to vary there)."""
    with tempfile.TemporaryDirectory() as folder:
        return _frame_lines(fmt, Path(folder) / "made.log")


def _frame_lines(fmt: str, made: Path) -> tuple[str, ...]:
    texts: list[str] = []
    if fmt in ("proton-j", "amqpnetlite", "pyamqp"):
        made_logs.printed(fmt, made, 3)
    elif fmt == "go-amqp":
        made_logs.goamqp(made, 3)
    elif fmt == "pika":
        made_logs.pika_frames(made, 3)  # pika's DEBUG log prints few frames
    elif fmt == "router":
        made_logs.router(ROOT / "captures" / "log-proton-broker.log", made)
    recorded = {"proton": ("broker", "p2p"), "rhea": ("broker",), "pika": ("broker", "closed")}
    for name in recorded.get(fmt, ()):
        texts += (ROOT / "captures" / f"log-{fmt}-{name}.log").read_text().splitlines()
    if made.exists():
        texts += made.read_text().splitlines()
    clear_caches()
    lines = []
    for text in texts:
        if list(records_from_log([text + "\n"], "x.log", fmt=fmt, findings=[])):
            lines.append(text)
    return tuple(dict.fromkeys(lines))


FORMATS = ["proton", "router", "rhea", "pika", "proton-j", "amqpnetlite", "pyamqp", "go-amqp"]


def read(lines: list[str], fmt: str, cold: bool) -> list[Any]:
    """Each record's JSON and the findings no frame carries; `cold`: every cache cleared
    before each line is read."""

    def fed() -> Iterator[str]:
        for line in lines:
            if cold:
                clear_caches()
            yield line + "\n"

    clear_caches()
    found: list[Any] = []
    records = [frame_ndjson(r) for r in records_from_log(fed(), "x.log", fmt=fmt, findings=found)]
    return [records, [(f.code, f.message) for f in found]]


@st.composite
def like(draw: st.DrawFn, line: str) -> str:
    """`line` with some of its runs of digits replaced."""
    runs = list(_RUN.finditer(line))
    out, pos = [], 0
    for m in runs:
        out.append(line[pos : m.start()])
        keep = draw(st.integers(0, 2)) == 0
        number = st.sampled_from(_EDGES) | st.just("0") | st.integers(0, 10**6).map(str)
        out.append(m.group() if keep else draw(number))
        pos = m.end()
    out.append(line[pos:])
    return "".join(out)


@pytest.fixture(scope="module")
def lines_of() -> dict[str, tuple[str, ...]]:
    """Each format's frame lines, made before any example (the printers are tests' own)."""
    return {fmt: frame_lines(fmt) for fmt in FORMATS}


def test_every_format_has_frame_lines(lines_of: dict[str, tuple[str, ...]]) -> None:
    for fmt in FORMATS:
        assert len(lines_of[fmt]) >= 5, fmt


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_line_reads_the_same_after_lines_of_its_shape(
    lines_of: dict[str, tuple[str, ...]], fmt: str, data: st.DataObject
) -> None:
    line = data.draw(st.sampled_from(lines_of[fmt]))
    before = data.draw(st.lists(like(line), min_size=2, max_size=3))
    after = data.draw(like(line))
    lines = [*before, *before, after]  # each shape of `before` seen twice: learned
    assert read(lines, fmt, cold=False) == read(lines, fmt, cold=True)
