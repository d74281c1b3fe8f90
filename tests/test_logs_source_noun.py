"""Tracker findings on a frame-trace log name the log, not a capture ("the log ended", "the log
starts mid-connection"): the trackers are told the noun where they are made (`source`), and a
capture's findings keep their words."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from amqpscope.logs.reader import records_from_log
from amqpscope.track.tracker import Tracker

CAPTURES = Path(__file__).resolve().parent.parent / "captures"


def amqpscope(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", *args], capture_output=True, timeout=120
    )


def test_a_log_cut_at_both_ends_is_told_as_a_log(tmp_path: Path) -> None:
    """1.0: a Proton log whose first and last lines are gone."""
    lines = (CAPTURES / "log-proton-broker.log").read_text().splitlines(keepends=True)
    cut = tmp_path / "middle.log"
    cut.write_text("".join(lines[12:30]))
    for command in ("read", "diagnose", "export", "summary"):
        done = amqpscope(command, str(cut), "--ndjson" if command == "export" else "--json")
        assert done.returncode in (0, 3), done.stderr
        said = (done.stdout + done.stderr).decode()
        # the export's schema names its header record and key "capture", whatever the input
        words = said.replace('"record":"capture"', "").replace('"capture":', "")
        assert "capture" not in words, (command, words[:2000])
    done = amqpscope("read", str(cut), "--json")
    said = done.stderr.decode() + done.stdout.decode()
    assert "the log starts mid-connection" in said
    assert "when the log ended" in said


def test_0_9_1_tracker_names_its_source() -> None:
    """0-9-1: pika's log without its first frames, tracked as a log and (the default) as a
    capture, which keeps its words."""
    lines = (CAPTURES / "log-pika-closed.log").read_text().splitlines(keepends=True)
    frames = list(records_from_log(lines, "p.log", "pika"))[1:]
    said = {}
    for source in ("capture", "log"):
        tracker = Tracker(source=source) if source != "capture" else Tracker()
        for frame in frames:
            tracker.feed(frame)
        tracker.finish()
        said[source] = [f.message for f in tracker.findings if f.code == "amqp091.mid-stream"]
    assert said["capture"] and said["capture"][0].startswith(
        "the capture starts inside this connection: its handshake (products, user, vhost, tune"
        " and heartbeat) was not captured,"
    )
    assert said["log"] and said["log"][0].startswith(
        "the log starts inside this connection: its handshake (products, user, vhost, tune and"
        " heartbeat) is not in the log,"
    )
    assert "capture" not in said["log"][0]
