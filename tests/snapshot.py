"""Snapshots of printed output (tests/snapshots/NAME.txt): compared, never written by a test run
unless asked. A missing snapshot fails: a test that wrote what it printed and passed would pass
on any output. AMQPSCOPE_UPDATE_SNAPSHOTS=1 writes them after a deliberate change (review the
diff)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

#: the environment variable that lets a run write snapshots
FLAG = "AMQPSCOPE_UPDATE_SNAPSHOTS"
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"


def matches(text: str, snapshot: Path) -> None:
    """Assert `text` is what `snapshot` holds; with the flag set, write it there first."""
    if os.environ.get(FLAG) == "1":
        snapshot.write_text(text)
    if not snapshot.exists():
        pytest.fail(f"no snapshot {snapshot.name}: {FLAG}=1 writes it (then review it)")
    assert text == snapshot.read_text()
