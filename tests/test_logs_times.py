"""Times of log lines in forms besides ISO 8601 and ctime: epoch seconds (Python logging's
`%(created)f`), syslog's date without a year, a time of day alone (crossing midnight: the next
day), and a form no grammar reads, which is one `log.no-time` finding, not silence."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from amqpscope.logs.reader import LogReader

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
LINES = [
    line
    for line in (CAPTURES / "log-proton-broker.log").read_text().splitlines(keepends=True)
    if line.startswith("[")
]
#: 2026-11-27T06:33:37Z, a Friday
NOW = dt.datetime(2026, 11, 27, 6, 33, 37, tzinfo=dt.UTC).timestamp()


def read(stamp: Callable[[int], str], now: float = NOW) -> tuple[list[float], list]:
    """The frames' times and the log's findings, each line behind `stamp(its index)`."""
    reader = LogReader("stamped.log", now=now)
    frames = []
    for number, line in enumerate(LINES, 1):
        frames += reader.feed(stamp(number - 1) + line, number)
    frames += reader.flush()
    reader.finish()
    return [f.ts for f in frames], reader.findings


def test_epoch_seconds_as_python_logging_writes_them() -> None:
    times, found = read(lambda i: f"{1795324933.572 + i / 4:f} DEBUG ")
    assert times[0] == pytest.approx(1795324933.572)
    assert times[-1] == pytest.approx(1795324933.572 + (len(LINES) - 1) / 4)
    assert not [f for f in found if f.code == "log.no-time"]


def test_syslog_date_without_a_year_takes_the_year_of_reading() -> None:
    times, found = read(lambda i: f"Nov 27 06:33:{i % 60:02d} host app[42]: ")
    assert times[0] == pytest.approx(NOW - 37)
    assert not [f for f in found if f.code == "log.no-time"]
    # read in January, a December log is last year's; a log crossing New Year goes on
    january = dt.datetime(2027, 1, 2, tzinfo=dt.UTC).timestamp()
    times, _ = read(
        lambda i: "Dec 31 23:59:59 h a: " if i < 5 else "Jan  1 00:00:01 h a: ", january
    )
    assert times[0] == dt.datetime(2026, 12, 31, 23, 59, 59, tzinfo=dt.UTC).timestamp()
    assert times[-1] == dt.datetime(2027, 1, 1, 0, 0, 1, tzinfo=dt.UTC).timestamp()


def test_a_time_of_day_alone_crosses_midnight_forward() -> None:
    """No date: the first day is 1970-01-01; past midnight the next, never back in time."""
    stamps = [f"23:59:{58 + i // 2}.{i % 2 * 5}00 " for i in range(4)] + ["00:00:00.100 "] * 99

    def stamp(i: int) -> str:
        return stamps[min(i, len(stamps) - 1)]

    times, found = read(stamp)
    assert times[0] == pytest.approx(86_398.0)
    assert times[4] == pytest.approx(86_400.1)
    assert times == sorted(times)
    assert not [f for f in found if f.code == "log.no-time"]


def test_a_time_in_no_form_read_is_one_finding_with_its_line() -> None:
    times, found = read(lambda i: f"06h33m{i % 60:02d}s ")
    assert set(times) == {0.0}
    said = [f for f in found if f.code == "log.no-time"]
    assert len(said) == 1 and said[0].message.startswith("stamped.log:1: ")
    assert "frames carry no times" in said[0].message
    # a log without any prefix is not told it lacks times: it never had them
    _, found = read(lambda i: "")
    assert not [f for f in found if f.code == "log.no-time"]


def test_cli_read_gives_the_times(tmp_path: Path) -> None:
    log = tmp_path / "created.log"
    log.write_text("".join(f"{1795324933 + i}.250000 {line}" for i, line in enumerate(LINES)))
    done = subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", "read", str(log), "--json"],
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert records and records[0]["ts"] == pytest.approx(1795324933.25)
    assert b"log.no-time" not in done.stderr
