"""SVG snapshots of the TUI (pytest-textual-snapshot) at 80x24 and 160x48: a 1.0 capture as it
opens, and a 0-9-1 capture filtered to its errors with a frame's detail open. Update with
`pytest tests/test_tui_snapshots.py --snapshot-update` after a deliberate change, and look at
the report it writes before committing."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("textual", reason="the TUI needs the tui extra (make install installs it)")
pytest.importorskip(
    "pytest_textual_snapshot",
    reason="the TUI's snapshots need the dev extra (make install installs it)",
)

from textual.pilot import Pilot

from tests.test_tui import filter_with, loaded, make_app

SIZES = [(80, 24), (160, 48)]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_opened(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(make_app("10-outcomes.pcap"), terminal_size=size, run_before=loaded)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_errors_filtered_with_detail(snap_compare: Any, size: tuple[int, int]) -> None:
    async def errors(pilot: Pilot[Any]) -> None:
        await loaded(pilot)
        await filter_with(pilot, "findings")
        await pilot.press("down")
        await pilot.pause()

    assert snap_compare(make_app("091-channel-errors.pcap"), terminal_size=size, run_before=errors)
