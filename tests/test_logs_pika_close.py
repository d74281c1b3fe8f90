"""The broker's channel.close in pika's log (captures/log-pika-closed.*, a log and the pcap of
the same run): pika prints it only as the warning of channel.py's `_on_close_from_broker`,
`Received remote Channel.Close (%s): %r on %s` (reply code, reply text's repr, the channel),
not as a frame repr. It is read as the channel.close it reports: reply code and text as on the
wire, class-id and method-id absent (the line does not show them), and `diagnose` of the log
answers "why did my channel close" as `diagnose` of the capture does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
from click.testing import CliRunner
from hypothesis import given, settings

from amqpscope.capture.files import open_capture
from amqpscope.cli import main
from amqpscope.codec.frames import TRANSPORT
from amqpscope.dissect import Dissector
from amqpscope.logs.reader import records_from_log

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
NAME = "log-pika-closed"
TRUTH = json.loads((CAPTURES / f"{NAME}.json").read_text())["expect"]
LINE = next(
    line
    for line in (CAPTURES / f"{NAME}.log").read_text().splitlines()
    if "Received remote Channel.Close" in line
)


def records(path: Path) -> list[dict[str, Any]]:
    result = CliRunner().invoke(main, ["read", str(path), "--json"])
    assert result.exit_code == 0, result.output
    return [r for r in map(json.loads, result.stdout.splitlines()) if r.get("name")]


def test_the_close_is_the_captured_one() -> None:
    (logged,) = [r for r in records(CAPTURES / f"{NAME}.log") if r["name"] == "channel.close"]
    with open_capture(str(CAPTURES / f"{NAME}.pcap")) as capture:
        (wire,) = [
            f
            for f in Dissector().run(capture)
            if f.kind != TRANSPORT and f.name == "channel.close" and f.direction == "s2c"
        ]
    assert logged["dir"] == "s2c" and logged["channel"] == wire.channel
    for key in ("reply-code", "reply-text"):
        assert logged["fields"][key] == wire.fields[key]
    assert logged["fields"]["reply-code"] == TRUTH["channel_close"]["reply_code"]
    assert logged["fields"]["reply-text"] == TRUTH["channel_close"]["reply_text"]
    assert "class-id" not in logged["fields"] and wire.fields["class-id"] == 60  # basic.ack


def test_diagnose_of_the_log_names_the_close_as_of_the_capture() -> None:
    def closes(path: Path) -> list[str]:
        result = CliRunner().invoke(main, ["diagnose", str(path), "--json"])
        found = json.loads(result.stdout)["diagnoses"]
        return [
            d["explanation"].split(". Likely cause: ")[1]
            for d in found
            if d["code"] == "close.channel"
        ]

    (from_log,) = closes(CAPTURES / f"{NAME}.log")
    (from_wire,) = closes(CAPTURES / f"{NAME}.pcap")
    assert from_log.split(".")[0] == from_wire.split(".")[0]  # the same cause


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 999), st.text(max_size=40))
def test_any_reply_text_as_pika_prints_it(code: int, text: str) -> None:
    """Formatted by pika's own format string (Python's %r of the text), read back equal."""
    at = LINE.index("Received remote")
    channel = LINE[LINE.index(" on <Channel number=") + len(" on ") :]
    pikas = "Received remote Channel.Close (%s): %r on %s\n"  # channel.py's, as pika logs it
    line = LINE[:at] + pikas % (code, text, channel)
    found: list[Any] = []
    (frame,) = records_from_log(iter([line]), "pika.log", fmt="pika", findings=found)
    assert (frame.name, frame.channel) == ("channel.close", 1)
    assert frame.fields["reply-code"] == code and frame.fields["reply-text"] == text


def test_summary_of_the_log_ending_with_close_ok_says_closed() -> None:
    """pika logs the broker's connection.close-ok but not the close it sent: the connection,
    adopted mid-stream, is closed as the capture of the same run says, not left open."""

    def states(path: Path) -> list[str]:
        result = CliRunner().invoke(main, ["summary", str(path), "--json"])
        assert result.exit_code == 0, result.output
        return [c["state"] for c in json.loads(result.stdout)["connections"]]

    logged = [r["name"] for r in records(CAPTURES / f"{NAME}.log")]
    assert logged[-1] == "connection.close-ok"
    assert states(CAPTURES / f"{NAME}.log") == states(CAPTURES / f"{NAME}.pcap") == ["closed"]
