"""The TUI's `w`: it names the file in every message, refuses the capture being read (through
a link too), and asks before it replaces a file that exists (it replaced one without asking,
and said "not written: No such file or directory" without saying which)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("textual", reason="the TUI needs the tui extra (make install installs it)")

from textual.pilot import Pilot
from textual.widgets import Input

from tests.test_tui import CAPTURES, filter_with, opened, read_w

EXPRESSION = "conn == 2"


def said(pilot: Pilot[Any]) -> list[str]:
    return [str(n.message) for n in pilot.app._notifications]


async def ask(pilot: Pilot[Any], path: Path) -> None:
    """`w`, the file's name typed, Enter (the cut not written yet if it asks)."""
    app = pilot.app
    await pilot.press("w")
    await pilot.pause()
    app.screen.query_one("#answer", Input).value = str(path)
    await pilot.press("enter")
    await app.workers.wait_for_complete()
    await pilot.pause()


async def answer(pilot: Pilot[Any], key: str) -> None:
    await pilot.press(key)
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def test_w_asks_before_it_replaces_a_file(tmp_path: Path) -> None:
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(b"someone's notes\n")

    async def run() -> tuple[list[str], bytes, list[str]]:
        async with opened("091-rpc.pcap") as pilot:
            await filter_with(pilot, EXPRESSION)
            await ask(pilot, cut)
            await answer(pilot, "n")  # no: kept as it was
            kept, first = cut.read_bytes(), said(pilot)
            await ask(pilot, cut)
            await answer(pilot, "y")  # yes: replaced by the cut
            return first, kept, said(pilot)

    first, kept, then = asyncio.run(run())
    assert kept == b"someone's notes\n"
    assert f"not written: {cut} exists and was kept" in first
    assert not any(line.startswith("wrote") for line in first)
    assert cut.read_bytes() == read_w(tmp_path, "091-rpc.pcap", EXPRESSION, "read.pcap")
    assert then[-1].startswith("wrote ") and then[-1].endswith(f" frames to {cut}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.pcap", "read.pcap"]  # no part


def test_w_refuses_the_capture_it_reads_through_a_link(tmp_path: Path) -> None:
    link = tmp_path / "link.pcap"
    link.symlink_to(CAPTURES / "091-rpc.pcap")
    before = (CAPTURES / "091-rpc.pcap").read_bytes()

    async def run() -> list[str]:
        async with opened("091-rpc.pcap") as pilot:
            await filter_with(pilot, EXPRESSION)
            await ask(pilot, link)
            await answer(pilot, "y")  # a stray yes: nothing was asked
            return said(pilot)

    lines = asyncio.run(run())
    assert (CAPTURES / "091-rpc.pcap").read_bytes() == before
    assert [line for line in lines if str(link) in line] == [
        f"not written: {link} is the capture being read; write the cut elsewhere"
    ]


def test_w_names_the_file_it_could_not_write(tmp_path: Path) -> None:
    nowhere = tmp_path / "no" / "such.pcap"

    async def run() -> list[str]:
        async with opened("091-rpc.pcap") as pilot:
            await filter_with(pilot, EXPRESSION)
            await ask(pilot, nowhere)
            await filter_with(pilot, 'name == "no.such-method"')
            await ask(pilot, tmp_path / "empty.pcap")
            return said(pilot)

    lines = asyncio.run(run())
    assert f"not written to {nowhere}: No such file or directory" in lines
    assert f"nothing written to {tmp_path / 'empty.pcap'}: no frames shown" in lines
    assert list(tmp_path.iterdir()) == []
