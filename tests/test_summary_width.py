"""The summary's cheap bound of a table's width (`render/summary._widest`) is never below what
rich measures: the summary skips rich's measure when the bound fits the console, so a bound too
low would keep a sparkline the console has no room for. Checked on the tables of every bundled
capture, with every sparkline, and with rows made of long and wide (two-cell) text."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rich.console import Console
from rich.measure import Measurement

from amqpscope.cli import main
from amqpscope.render import sparkline
from amqpscope.render import summary as render

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = sorted(str(p) for p in (ROOT / "captures").glob("*.pcap*"))


def tables(result: dict[str, Any]) -> list[tuple[list[render.Column], list[dict[str, Any]], Any]]:
    out = []
    for conn in result.get("connections", []):
        if conn.get("version") == "1.0":
            rows = [
                {**link, "_channel": session.get("channel")}
                for session in conn.get("sessions") or []
                for link in session.get("links") or []
            ]
            out.append((render.LINK_COLUMNS, rows, render.LINK_SPARKS))
        else:
            out.append((render.CHANNEL_COLUMNS, conn.get("channels") or [], render.CHANNEL_SPARKS))
    return [t for t in out if t[1]]


def check(columns: list[render.Column], rows: list[dict[str, Any]], sparks: Any) -> int:
    """Assert the bound holds for the table with every sparkline; return rich's measure."""
    console = Console(width=10_000, markup=False, highlight=False, file=io.StringIO())
    cells = [[render._text(fn(r)) if fn(r) is not None else "" for _, fn in columns] for r in rows]
    keep = [i for i in range(len(columns)) if any(c[i] not in ("", "0") for c in cells)]
    axis = sparkline.span([render._get(r, "series", key) for r in rows for _, key, _ in sparks])
    steps = sparkline.glyphs(console.encoding)
    lines = [
        (name, [sparkline.sparkline(render._get(r, "series", key), axis, steps, low) for r in rows])
        for name, key, low in sparks
    ]
    table = render._columns("t", columns, cells, keep, lines)
    measured = Measurement.get(console, console.options.update_width(1 << 16), table).maximum
    assert render._widest(columns, cells, keep, lines) >= measured
    return measured


@pytest.mark.parametrize("path", CAPTURES, ids=[Path(p).name for p in CAPTURES])
def test_the_bound_holds_on_every_capture(path: str) -> None:
    result = CliRunner().invoke(main, ["summary", "--json", path])
    assert result.exit_code in (0, 1), result.output
    for columns, rows, sparks in tables(json.loads(result.stdout)):
        assert check(columns, rows, sparks) > 0


def test_the_bound_holds_on_long_and_wide_text() -> None:
    rows = [
        {
            "_channel": 0,
            "handle": 1,
            "role": "sender",
            "target": "队列" * 40,  # two cells a character, longer than the column's max_width
            "deliveries": 12345678901234567890,
            "error": {"condition": "amqp:internal-error", "description": "x" * 200},
            "outcomes": {"accepted": 3, "rejected": 1},
        },
        {"_channel": 1, "handle": 2, "role": "receiver", "source": "q", "deliveries": 0},
    ]
    assert check(render.LINK_COLUMNS, rows, render.LINK_SPARKS) > 48
