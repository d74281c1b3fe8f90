"""The terminal timeline at fixed widths, against snapshots (AMQPSCOPE_UPDATE_SNAPSHOTS=1 rewrites
them after a deliberate change; review the diff)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from amqpscope.capture.files import open_capture
from amqpscope.dissect import Dissector
from amqpscope.render.summary import print_summary
from amqpscope.render.timeline import Timeline
from amqpscope.track.tracker import Tracker
from tests.snapshot import matches as snapshot_matches

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"


def render(name: str, width: int, **options: bool) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, color_system=None, force_terminal=False)
    timeline = Timeline(console, fit=True, **options)
    tracker = Tracker()
    with open_capture(str(CAPTURES / name)) as capture:
        for frame in Dissector().run(capture):
            tracker.feed(frame)
            timeline.frame(frame)
    timeline.finish()
    return buffer.getvalue()


@pytest.mark.parametrize("width", [80, 200])
@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("091-channel-errors.pcap", {}),
        ("10-outcomes.pcap", {}),
        ("091-qos-prefetch.pcap", {"collapse": True}),
        ("10-large-message.pcap", {"collapse": True}),
    ],
)
def test_timeline_snapshot(name: str, options: dict, width: int) -> None:
    text = render(name, width, **options)
    assert all(len(line) <= width for line in text.splitlines())
    suffix = "-collapse" if options.get("collapse") else ""
    snapshot = SNAPSHOTS / f"{name.split('.')[0]}{suffix}-{width}.txt"
    snapshot_matches(text, snapshot)


def test_channel_errors_read_as_the_scenario_says() -> None:
    text = render("091-channel-errors.pcap", 200)
    closes = [line for line in text.splitlines() if "channel.close " in line and "←" in line]
    assert [line.split("channel.close ")[1].split()[0] for line in closes] == ["406", "403", "406"]
    assert "unknown delivery tag 999 by basic.ack" in text


def test_collapse_folds_runs_and_keeps_counts() -> None:
    text = render("10-large-message.pcap", 200, collapse=True)
    assert "transfer ×74" in text  # noqa: RUF001
    assert len(text.splitlines()) < len(render("10-large-message.pcap", 200).splitlines()) / 3


def render_summary(name: str, width: int) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, color_system=None, force_terminal=False)
    tracker = Tracker()
    with open_capture(str(CAPTURES / name)) as capture:
        for frame in Dissector().run(capture):
            tracker.feed(frame)
    tracker.finish()
    print_summary(tracker.summary(), console)
    return buffer.getvalue()


@pytest.mark.parametrize("width", [80, 200])
@pytest.mark.parametrize(
    "name", ["091-channel-errors.pcap", "10-peer-to-peer.pcap", "091-rpc.pcap"]
)
def test_summary_snapshot(name: str, width: int) -> None:
    text = render_summary(name, width)
    assert all(len(line) <= width for line in text.splitlines())
    snapshot = SNAPSHOTS / f"summary-{name.split('.')[0]}-{width}.txt"
    snapshot_matches(text, snapshot)


def test_summary_tables_carry_the_scenarios_numbers() -> None:
    text = render_summary("10-peer-to-peer.pcap", 200)
    expect = json.loads((CAPTURES / "10-peer-to-peer.json").read_text())["expect"]
    link = next(line for line in text.splitlines() if line.startswith("sender"))
    cells = [cell.strip() for cell in link.split("│")]
    outcomes = expect["listener_outcomes"]
    wanted = [expect["transfers_sent"]] + [
        outcomes.get(k, 0) for k in ("accepted", "rejected", "released", "modified")
    ]
    assert cells[2:7] == [str(n) for n in wanted]


def test_seconds_say_what_percent_formatting_says() -> None:
    """The time column is made from integers where that is sure to match "%10.6f" (`seconds`):
    at capture resolutions (microseconds, nanoseconds, from a late start), near rounding ties,
    at the edges of its range and on any double at all, it says what % says."""
    import random
    import struct

    from amqpscope.render.timeline import seconds

    draw = random.Random(24)
    values = [0.0, -0.0, 5e-7, 4.9999999e-7, 1.5e-6, 2.5e-6, 0.1234565, 999999.9999995, 1e6]
    values += [float("inf"), float("-inf"), float("nan"), -1.5, 1e300]
    for _ in range(20_000):
        t0 = draw.randint(1_600_000_000_000_000, 1_800_000_000_000_000) / 1e6
        values.append(t0 + draw.randint(0, 10**11) / 1e6 - t0)
        values.append(t0 + draw.randint(0, 10**12) / 1e9 - t0)
        values.append(draw.randint(0, 10**12) / 1e6 + 5e-7)  # a tie, as near as a double gets
        values.append(draw.uniform(0, 2e6))
        values.append(struct.unpack("<d", draw.randbytes(8))[0])
    wrong = [x for x in values if seconds(x) != "%10.6f" % x]  # noqa: UP031 (what it replaces)
    assert not wrong, wrong[:5]
