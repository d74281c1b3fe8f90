"""pika's DEBUG log against the capture of the same run (captures/log-pika-broker.*).

pika logs only some of the frames it receives (amqpscope/logs/pika.py lists which), never one
it sends, so the rule tested: the log's records are, in order, a subsequence of the captured
broker-to-client frames, each equal to its captured frame in name, channel, direction and
every field it has; and the log's records are all the frames pika printed (every line holding
a frame repr gave a record, no finding).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from amqpscope import schema
from amqpscope.capture.files import open_capture
from amqpscope.codec.frames import TRANSPORT, Frame
from amqpscope.dissect import Dissector
from amqpscope.findings import Finding
from amqpscope.logs.detect import detect
from amqpscope.logs.reader import records_from_log

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
NAME = "log-pika-broker"


def captured() -> list[Frame]:
    with open_capture(str(CAPTURES / f"{NAME}.pcap")) as capture:
        return [f for f in Dissector().run(capture) if f.kind != TRANSPORT]


def logged() -> tuple[list[Frame], list[Finding]]:
    found: list[Finding] = []
    with open(CAPTURES / f"{NAME}.log", encoding="utf-8") as log:
        frames = list(records_from_log(log, f"{NAME}.log", fmt="pika", findings=found))
    return frames, found


def test_detected_by_content() -> None:
    lines = (CAPTURES / f"{NAME}.log").read_text().splitlines(keepends=True)
    assert detect(lines) == "pika"


def test_every_printed_frame_is_a_record() -> None:
    text = (CAPTURES / f"{NAME}.log").read_text().splitlines()
    printed = [
        n
        for n, line in enumerate(text, 1)
        if re.search(
            r"<(METHOD|Header|Body)\(\[|Received <[A-Z]\w+\.\w+.* on <Channel number=", line
        )
    ]
    frames, found = logged()
    assert found == []
    assert printed, "the recorded log prints frames"
    assert [f.source["line"] for f in frames] == printed


def test_records_are_the_captured_frames_pika_received() -> None:
    wire = [f for f in captured() if f.direction == "s2c"]
    frames, _ = logged()
    assert {f.direction for f in frames} == {"s2c"}
    at = 0
    for record in frames:
        while at < len(wire) and (wire[at].name, wire[at].channel) != (record.name, record.channel):
            at += 1
        assert at < len(wire), f"{record.name} on line {record.source['line']} not on the wire"
        expected = wire[at]
        assert record.kind == expected.kind
        for key, value in record.fields.items():
            assert value == expected.fields[key], (record.source, key)
        at += 1


def test_what_pika_1_4_logs_of_this_run() -> None:
    """The frames pika printed, as its code says it prints them (amqpscope/logs/pika.py): the
    consume-ok it discards, the get-empty, the channel's and the connection's close-ok; the
    ground truth (what the client counted) agrees on the one it counts."""
    truth = json.loads((CAPTURES / f"{NAME}.json").read_text())
    frames, _ = logged()
    names = [(f.name, f.channel) for f in frames]
    assert names == [
        ("basic.consume-ok", 1),
        ("basic.get-empty", 1),
        ("channel.close-ok", 1),
        ("connection.close-ok", 0),
    ]
    assert [n for n, _ in names].count("basic.get-empty") == truth["expect"]["get_empty"]
    assert [f.ts > 0 for f in frames] == [True] * 4  # Python logging's asctime


def test_summary_channels_where_the_log_shows_them() -> None:
    """`summary` of the log and of the capture agree on what the log shows: the connection's
    channels. Deliveries the log does not show (pika prints none) are not invented: 0."""

    def channels(path: Path) -> list[dict[str, Any]]:
        done = subprocess.run(
            [sys.executable, "-m", "amqpscope.cli", "summary", str(path), "--json"],
            capture_output=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert not list(schema.validator("summary").iter_errors(result))
        return [ch for c in result["connections"] for ch in c["channels"]]

    from_log = channels(CAPTURES / f"{NAME}.log")
    from_wire = channels(CAPTURES / f"{NAME}.pcap")
    assert [c["channel"] for c in from_log] == [c["channel"] for c in from_wire] == [1]
    truth = json.loads((CAPTURES / f"{NAME}.json").read_text())["expect"]
    assert from_wire[0]["deliveries"] == truth["deliveries"] + truth["get_ok"]
    assert from_log[0]["deliveries"] == 0
