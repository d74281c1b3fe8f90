"""The state diagrams in the docs are drawn from the trackers' tables (as h11 draws its own):
the committed page is what the tables draw now, every transition of every table is an edge on
it, and the rules' docstrings draw no diagram by hand that could drift from the tables."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from amqpscope.track import diagrams
from amqpscope.track.amqp091 import rules as r091
from amqpscope.track.amqp10 import rules as r10

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "developer" / "state-machines.md"
TABLES = {
    "0-9-1 connection": r091.CONNECTION_TRANSITIONS,
    "0-9-1 channel": r091.CHANNEL_TRANSITIONS,
    "1.0 connection": r10.CONNECTION_TRANSITIONS,
    "1.0 session": r10.SESSION_TRANSITIONS,
    "1.0 link": r10.LINK_TRANSITIONS,
}


def test_the_committed_diagrams_are_what_the_tables_draw() -> None:
    assert PAGE.exists(), "run python3 tools/state_diagrams.py"
    drawn = diagrams.committed(PAGE.read_text(encoding="utf-8"))
    assert drawn is not None, "the page lost its BEGIN and END lines"
    assert drawn == diagrams.drawn(), (
        "docs/developer/state-machines.md differs from the tables: run"
        " python3 tools/state_diagrams.py"
    )


def test_the_tool_s_check_says_so_too() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "state_diagrams.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("name", TABLES)
def test_every_transition_is_an_edge(name: str) -> None:
    """Each (state, event, next state) of the table is on an edge line of the page."""
    edges: dict[tuple[str, str], set[str]] = {}
    for line in diagrams.drawn().splitlines():
        if " --> " in line and " : " in line and "[*]" not in line:
            arrow, label = line.strip().split(" : ", 1)
            before, after = arrow.split(" --> ")
            edges.setdefault((before, after), set()).update(label.split(", "))
    table = TABLES[name]
    assert table
    for state, row in table.items():
        for key, after in row.items():
            event = key if isinstance(key, str) else f"{key[0]} {key[1]}"
            assert event in edges.get((diagrams._id(state), diagrams._id(after)), set()), (
                name,
                state,
                event,
                after,
            )


@pytest.mark.parametrize("rules", [r091, r10], ids=["amqp091", "amqp10"])
def test_the_rules_draw_no_diagram_by_hand(rules: object) -> None:
    source = Path(rules.__file__).read_text(encoding="utf-8")  # type: ignore[attr-defined]
    docstring = ast.get_docstring(ast.parse(source)) or ""
    assert "-->" not in docstring and "state-machines.md" in docstring
