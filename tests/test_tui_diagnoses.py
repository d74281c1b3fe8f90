"""The TUI's `d` list: what it counts and what it shows while a live capture runs.

`tui --live` reports a consumer stalled at its prefetch as `live --diagnose` does on the same
traffic (both feed `diagnose.Watch`); the recorded stall is replayed through `load_live`, the
path live packets take, and `d` pressed while the capture still runs (before it stops, no
diagnosis is made at all)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("textual", reason="the TUI needs the tui extra (make install installs it)")

from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import OptionList, Static

from amqpscope.capture.files import open_capture
from amqpscope.capture.packet import RawPacket
from amqpscope.tui.app import AmqpScope
from amqpscope.tui.loader import load_file, load_live
from tests.test_tui import CAPTURES, loaded, truth


class Running:
    """A recorded capture's packets handed to `load_live` as a `LiveCapture` hands them: each
    at its recorded time after the first, stamped with the wall clock's time (None while the
    wire is quiet), then nothing until `stop()`: a live capture still running."""

    error = None

    def __init__(self, path: Path) -> None:
        self.path = path
        self.stopped = threading.Event()
        self.replayed = threading.Event()

    def packets(self) -> Iterator[RawPacket | None]:
        with open_capture(str(self.path)) as capture:
            packets = list(capture)
        shift = time.time() - packets[0].ts
        for pkt in packets:
            while time.time() < pkt.ts + shift:
                time.sleep(0.02)
                yield None
            pkt.ts += shift
            yield pkt
        self.replayed.set()
        while not self.stopped.wait(0.05):
            yield None

    def stop(self) -> None:
        self.stopped.set()


async def listed(pilot: Pilot[Any]) -> tuple[str, list[str]]:
    """`d`: the list's heading and its entries' texts."""
    app = pilot.app
    await pilot.press("d")
    await pilot.pause()
    head = app.screen.query(Static).first().render()  # the heading, above the list
    texts = []
    for options in app.screen.query(OptionList):
        for i in range(options.option_count):
            prompt = options.get_option_at_index(i).prompt
            texts.append(prompt.plain if isinstance(prompt, Text) else str(prompt))
    await pilot.press("escape")
    await pilot.pause()
    return str(head), texts


def test_live_d_lists_a_consumer_stalled_while_the_capture_runs() -> None:
    """The stall 091-stalled-consumer recorded (pika held 5 deliveries unacked for 2.5 s,
    and nothing crossed the wire meanwhile: only the clock shows it):
    `live --diagnose` reports it began and ended; `tui --live`'s `d` listed only the
    trackers' findings until the capture stopped, so never the stall."""
    capture = Running(CAPTURES / "091-stalled-consumer.pcap")
    seconds = truth("091-stalled-consumer")["stall"]["seconds"]

    async def run() -> tuple[str, list[str], list[dict[str, Any]]]:
        app = AmqpScope(partial(load_live, capture=capture), on_exit=capture.stop)
        async with app.run_test(size=(160, 48)) as pilot:
            for _ in range(400):
                await pilot.pause(0.05)
                if capture.replayed.is_set() and getattr(app.loading, "stalls", None):
                    break
            await pilot.pause(0.5)
            assert capture.replayed.is_set() and not app.loading.done  # still capturing
            head, texts = await listed(pilot)
            return head, texts, list(getattr(app.loading, "stalls", []))

    head, texts, stalls = asyncio.run(run())
    assert any("Stall of consumer" in text for text in texts), texts
    (stall,) = stalls
    assert stall["code"] == "consumer.stalled" and not stall["ongoing"]
    assert abs(stall["duration"] - seconds) < 0.01
    assert stall["queue"] == "amqpscope.091-stalled-consumer.q"
    assert head.startswith("1 diagnosis so far")
    assert texts[0].startswith("warning Stall of consumer ")
    assert f"ended after {seconds:.1f} s" in texts[0] and "c1 frame 70" in texts[0]


def test_d_counts_a_logs_bad_lines_as_notes_not_diagnoses(tmp_path: Path) -> None:
    """A log with a line that does not parse: `d` lists the line (`log.bad-line`) after the
    diagnoses and counts it apart; the heading counted it as a diagnosis."""
    lines = (CAPTURES / "log-proton-broker.log").read_text().splitlines(keepends=True)
    lines[15] = "[0x56080b9f7cb0]: AMQP:FRAME:0 -> @flow(19) [incoming-window=0xzz]\n"
    log = tmp_path / "damaged.log"
    log.write_text("".join(lines))

    async def run() -> tuple[int, str, list[str]]:
        app = AmqpScope(partial(load_file, path=str(log)), title="damaged.log")
        async with app.run_test(size=(160, 48)) as pilot:
            await loaded(pilot)
            assert app.loading.diagnoses is not None
            head, texts = await listed(pilot)
            return len(app.loading.diagnoses), head, texts

    diagnosed, head, texts = asyncio.run(run())
    assert [t for t in texts if "log.bad-line" in t]
    assert len(texts) == diagnosed + 1
    many = "diagnosis" if diagnosed == 1 else "diagnoses"
    assert head == f"{diagnosed} {many} · 1 note on the input — Enter: evidence"
