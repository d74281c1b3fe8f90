"""A frame line whose prefix is damaged (Proton's `[0x5581...:0` with its `]` lost, a line cut
into mid-prefix, rhea's `rhea:frames [` garbled) is still recognisably a frame line of the log:
a `log.bad-line` with its line number (and the next frames doubted by `log.lost-line`), not a
line merely skipped. A line with nothing of a frame in it is still skipped."""

from __future__ import annotations

from pathlib import Path

import pytest

from amqpscope.logs.reader import LogReader

CAPTURES = Path(__file__).resolve().parent.parent / "captures"


def read(name: str, fmt: str, at: int, damage: str) -> LogReader:
    lines = (CAPTURES / name).read_text().splitlines(keepends=True)
    lines[at] = damage if "\n" in damage else damage + "\n"
    reader = LogReader("damaged.log", fmt)
    for number, line in enumerate(lines, 1):
        reader.feed(line, number)
    reader.flush()
    reader.finish()
    return reader


PROTON = (CAPTURES / "log-proton-broker.log").read_text().splitlines()
RHEA = (CAPTURES / "log-rhea-broker.log").read_text().splitlines()


@pytest.mark.parametrize(
    ("name", "fmt", "damage"),
    [
        ("log-proton-broker.log", "proton", PROTON[6].replace("]:", ":", 1)),  # `]` lost
        ("log-proton-broker.log", "proton", PROTON[6][9:]),  # cut into mid-prefix
        (
            "log-proton-broker.log",
            "router",
            "2024-01-31 12:00:00 PROTOCOL (trace) [C1 -> @open(16) []",
        ),
        ("log-rhea-broker.log", "rhea", RHEA[6].replace("rhea:frames [", "rhea:fr", 1)),
    ],
)
def test_a_frame_line_with_a_damaged_prefix_is_a_bad_line(name: str, fmt: str, damage: str) -> None:
    reader = read(name, fmt, 6, damage)
    bad = [f for f in reader.findings if f.code == "log.bad-line"]
    assert len(bad) == 1 and bad[0].message.startswith("damaged.log:7: "), reader.findings
    assert "damaged prefix" in bad[0].message
    assert reader.skipped == 0


@pytest.mark.parametrize("damage", ["[", "some application line -> with an arrow", ""])
def test_a_line_with_nothing_of_a_frame_is_skipped(damage: str) -> None:
    reader = read("log-proton-broker.log", "proton", 6, damage)
    assert not [f for f in reader.findings if f.code == "log.bad-line"]
    assert reader.skipped == 1
