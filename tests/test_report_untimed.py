"""A log without timestamps (Proton's trace, captures/log-proton-starved.log) in `report` and
`export`: no time is made up. The report's rows show their log line where a capture's show a
time (as `read` does), the duration is not known, nothing is plotted over time (every frame
would be at 0 s: one bucket of hundreds of thousands of deliveries a second, latencies of
0 ms) and the page says why; `export` gives null for the first and last time, not 0.0.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from amqpscope.cli import main
from tests.test_report import CAPTURES, cell, data_of, make, read_json

UNTIMED = "log-proton-starved.log"
TIMED = "log-pika-closed.log"  # pika's log lines carry their time


def test_the_log_has_no_times() -> None:
    records = read_json(UNTIMED)
    assert records and all(r["ts"] is None for r in records)
    assert any(r["ts"] is not None for r in read_json(TIMED))


def test_report_rows_show_log_lines_and_nothing_is_plotted(tmp_path: Path) -> None:
    data = data_of(make(tmp_path, UNTIMED))
    facts = data["facts"]
    assert facts["timed"] is False and facts["duration"] is None and facts["start"] is None
    records = read_json(UNTIMED)
    assert [r[1] for r in data["rows"]] == [r["source"]["line"] for r in records]
    links = [u for u in data["units"] if u["kind"] == "link"]
    assert links and any(cell(data, u, "deliveries") for u in links)  # the tables still count
    for unit in data["units"]:
        assert unit["series"] == {} and unit["histograms"] == {}, unit["label"]
        for column in ("settle p50 ms", "settle p99 ms"):
            assert cell(data, unit, column) is None, (unit["label"], column)
    assert data["windows"] == []


def test_report_of_a_timed_log_keeps_its_times(tmp_path: Path) -> None:
    data = data_of(make(tmp_path, TIMED))
    assert data["facts"]["timed"] is True and data["facts"]["duration"] > 0
    records = read_json(TIMED)
    first = records[0]["ts"]
    assert [r[1] for r in data["rows"]] == [round(r["ts"] - first, 6) for r in records]


def export(tmp_path: Path, log: str) -> dict:
    out = tmp_path / f"{log}.json"  # one file a log: export writes over none without --force
    result = CliRunner().invoke(main, ["export", str(CAPTURES / log), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text())["capture"]


def test_export_first_and_last_time_are_null_without_times(tmp_path: Path) -> None:
    capture = export(tmp_path, UNTIMED)
    assert capture["frames"] > 0
    assert capture["first-ts"] is None and capture["last-ts"] is None
    timed = export(tmp_path, TIMED)
    records = read_json(TIMED)
    assert timed["first-ts"] == records[0]["ts"] and timed["last-ts"] == records[-1]["ts"]
