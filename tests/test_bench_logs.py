"""bench/logs.py run small: the log it builds from the recorded trace is one clean conversation
that the reader and tracker follow message for message. No timing is asserted."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from amqpscope.logs.reader import LogReader
from amqpscope.track.tracker import Tracker

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))
import logs as bench_logs  # noqa: E402  (bench/logs.py)


def test_synthesized_log_is_clean(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    lines = bench_logs.synthesize(path, 2345, noise=2)
    assert lines == len(path.read_text().splitlines())
    reader, tracker = LogReader(path.name), Tracker()
    with open(path, encoding="utf-8") as log:
        for number, line in enumerate(log, 1):
            for frame in reader.feed(line, number):
                tracker.feed(frame)
    tracker.finish()
    assert reader.findings == []
    assert reader.skipped == 2345 * 2
    summary = tracker.summary()
    assert [f for f in summary["findings"] if f["severity"] != "info"] == []
    sender = next(
        link
        for c in summary["connections"]
        for s in c["sessions"]
        for link in s["links"]
        if link["role"] == "sender"
    )
    assert sender["deliveries"] == sender["settled"] == sender["outcomes"]["accepted"] == 2345


def test_bench_prints_rates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--messages", "30", "--repeat", "1", "--builds", "pure", "--keep", str(tmp_path)]
    assert bench_logs.main(args) == 0
    out = capsys.readouterr().out
    assert "lines/s" in out and "amqpscope summary" in out
    assert "pasted excerpts" in out and "frames found" in out and "field values agreeing" in out
