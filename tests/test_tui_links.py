"""1.0 links on the first screen at 120 columns: the tree and the frame list lead with the
link's role and address (the queue it sends to or takes from), not with its name, which rhea
generates (`0de004d4-cb51-ac40-...`): the name, cut by the pane, hid the address. The name
stays in the attach frame's detail pane."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("textual", reason="the TUI needs the tui extra (make install installs it)")

from textual.widgets import Tree

from tests.test_tui import filter_with, labels_of, opened, row_text, shown

#: the queue the scenario made (captures/scenarios/logs.py: `record.queue_address`)
ADDRESS = "/amq/queue/amqpscope.log-rhea-broker.q"


def pane_lines(tree: Tree[Any]) -> list[str]:
    """The tree pane's lines as the terminal shows them, cut at its width."""
    return [tree.render_line(y).text.rstrip() for y in range(tree.size.height)]


def test_links_lead_with_role_and_address_at_120_columns() -> None:
    async def run() -> tuple[list[str], list[str], list[str], list[dict[str, Any]]]:
        async with opened("log-rhea-broker.pcap", size=(120, 40)) as pilot:
            app = pilot.app
            tree = pane_lines(app.scopes)
            await filter_with(pilot, 'name == "attach"')
            attaches = shown(app)
            rows = [row_text(app, row) for row in range(len(attaches))]
            app.frames.go(0)  # the sender's attach: its detail
            await pilot.pause()
            detail = labels_of(app.detail)
            return tree, rows, detail, attaches

    tree, rows, detail, attaches = asyncio.run(run())
    names = {r["fields"]["name"] for r in attaches}
    assert len(names) == 2 and all(len(name) == 36 for name in names)  # rhea's generated ones
    # the sender's link to the queue, and the receiver's from it: address first, visible
    shown_links = [line for line in tree if " → /amq/queue/" in line or " ← /amq/queue/" in line]
    assert any("sender → /amq/queue/" in line for line in shown_links), tree
    assert any("receiver ← /amq/queue/" in line for line in shown_links), tree
    assert not any(name[:8] in line for line in shown_links for name in names)
    # the frame list's 84 columns: the address's start at least, before any name
    start = ADDRESS[: ADDRESS.index(".") + 1]  # /amq/queue/amqpscope.
    assert len(rows) == 4 and all(f"={start}" in row for row in rows), rows
    assert not any(name[:8] in row for row in rows for name in names)
    assert f'name: "{attaches[0]["fields"]["name"]}"' in "\n".join(detail), detail
