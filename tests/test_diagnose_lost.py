"""Diagnoses when the capture lost bytes: "not seen", not "never", and the hole as evidence.

A recorded capture (pika acking every delivery, RabbitMQ) with the one packet that carried an
ack taken out, as a capture that dropped it would be (`tools/damage.py`'s reader and writer):
the diagnosis of the delivery left unacked must say the ack was not seen, name the frame after
the hole, and `capture.bytes-lost` must say how many bytes the client lost. The untouched
capture gives neither.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from amqpscope.cli import main
from tests.scripts import load_tool

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "captures" / "091-publish-consume.pcap"
ACK = (60, 80)


def diagnoses(path: Path) -> list[dict[str, Any]]:
    result = CliRunner().invoke(main, ["diagnose", str(path), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["diagnoses"]


def frames(path: Path) -> dict[int, dict[str, Any]]:
    result = CliRunner().invoke(main, ["read", str(path), "--json"])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.output.splitlines()]
    return {r["frame"]: r for r in records if "frame" in r}


def the_finding(read: dict[int, dict[str, Any]], code: str) -> str:
    """The message of the one finding with `code` the frames carry."""
    (message,) = [f["message"] for r in read.values() for f in r["findings"] if f["code"] == code]
    return str(message)


def test_an_ack_the_capture_lost_is_not_seen_rather_than_never_sent(tmp_path: Path) -> None:
    damage = load_tool("damage")
    header, packets = damage.read_pcap(SOURCE)
    acks = [
        i
        for i, p in enumerate(packets)
        if p.c2s and p.payload and damage.frames_091(p.payload) == [(1, ACK)]
    ]
    # an ack in the middle: later client packets let the stream see the hole
    i = acks[len(acks) // 2]
    lost = packets[i]
    tag = int.from_bytes(lost.payload[11:19], "big")
    damaged = tmp_path / "lost-ack.pcap"
    damaged.write_bytes(damage.write_pcap(header, packets[:i] + packets[i + 1 :]))

    assert [d["code"] for d in diagnoses(SOURCE) if d["severity"] != "info"] == []
    found = {d["code"]: d for d in diagnoses(damaged)}
    assert set(found) == {"delivery.unacked-at-end", "capture.bytes-lost"}, found
    read = frames(damaged)

    unacked = found["delivery.unacked-at-end"]
    assert "not seen acked" in unacked["title"] and "never" not in unacked["title"]
    assert f"Delivery tags {tag} were not seen acked" in unacked["explanation"]
    # the requeue follows only if the ack really was not sent
    assert "; if they were not acked, the broker requeues them" in unacked["explanation"]
    assert (
        f"the capture lost {len(lost.payload)} bytes that the client sent"
        in (unacked["explanation"])
    )
    (hole,) = [
        n for n in unacked["evidence"] if any(f["code"] == "tcp.gap" for f in read[n]["findings"])
    ]
    assert read[hole]["dir"] == "c2s"

    # the tracker's own finding, on the frame that ended the channel, says the same
    ended = the_finding(read, "amqp091.unacked-at-end")
    assert "1 deliveries on channel 1 were not seen acked when it closed" in ended
    assert "if they were not acked, the broker requeues them" in ended

    whole = found["capture.bytes-lost"]
    assert whole["severity"] == "warning"
    assert f"lost {len(lost.payload)} bytes the client sent (1 hole)" in whole["title"]
    assert whole["evidence"] == [hole]


def test_a_confirm_the_capture_lost_is_not_seen_rather_than_never_sent(tmp_path: Path) -> None:
    """The broker's side: a publisher-confirm (basic.ack from the broker) the capture dropped."""
    damage = load_tool("damage")
    source = ROOT / "captures" / "091-confirms-return.pcap"
    header, packets = damage.read_pcap(source)
    confirms = [
        i
        for i, p in enumerate(packets)
        if not p.c2s and p.payload and damage.frames_091(p.payload) == [(1, ACK)]
    ]
    i = confirms[len(confirms) // 2]
    damaged = tmp_path / "lost-confirm.pcap"
    damaged.write_bytes(damage.write_pcap(header, packets[:i] + packets[i + 1 :]))

    assert "publish.unconfirmed" not in {d["code"] for d in diagnoses(source)}
    found = {d["code"]: d for d in diagnoses(damaged)}
    unconfirmed = found["publish.unconfirmed"]
    assert "not seen confirmed" in unconfirmed["title"] and "never" not in unconfirmed["title"]
    assert "the capture lost" in unconfirmed["explanation"]
    assert "bytes that the server sent" in unconfirmed["explanation"]
    read = frames(damaged)
    ended = the_finding(read, "amqp091.unconfirmed-at-end")
    assert "were not seen confirmed by the broker when it closed" in ended
    assert "the capture lost bytes the broker sent" in ended


def log_json(command: str, path: Path) -> list[dict[str, Any]]:
    """`command --json` of a log: its standard output only (a damaged log's findings go to
    standard error)."""
    result = CliRunner().invoke(main, [command, str(path), "--json"])
    assert result.exit_code == 0, result.output
    text = result.stdout
    return (
        [json.loads(text)] if command == "diagnose" else [json.loads(x) for x in text.splitlines()]
    )


def test_a_rule_broken_after_a_logs_bad_line_is_doubted(tmp_path: Path) -> None:
    """A frame-trace log whose line of the server's open does not parse: the begin after it
    looks sent before any open, a rule broken. The log lost that frame, the server did not
    break the rule: the diagnosis says so (info, naming the line and its frame), the frame
    carries `log.lost-line`. The same log whole blames no one for it."""
    log = ROOT / "captures" / "log-proton-broker.log"
    lines = log.read_text().splitlines(keepends=True)
    assert "<- @open(16)" in lines[10]
    # damaged before the performative's name: no frame is left of it (a line damaged after
    # its name is the frame's truncated record, issue 42, and nothing is lost)
    lines[10] = lines[10][:34] + "@@@]]]\n"
    damaged = tmp_path / "damaged.log"
    damaged.write_text("".join(lines))
    (doubted,) = [
        d for d in log_json("diagnose", damaged)[0]["diagnoses"] if d["code"] == "spec.violation"
    ]
    assert doubted["severity"] == "info"
    assert "or the log lost a frame" in doubted["title"]
    assert "line 11 of the log" in doubted["explanation"]
    assert "the bug is on its side" not in doubted["explanation"]
    begin = next(r for r in log_json("read", damaged) if r["name"] == "begin" and r["dir"] == "s2c")
    assert doubted["evidence"] == [begin["frame"]]
    assert "log.lost-line" in {f["code"] for f in begin["findings"]}
    whole = [d for d in log_json("diagnose", log)[0]["diagnoses"] if d["code"] == "spec.violation"]
    assert all("log lost" not in d["title"] for d in whole)
    assert not any(
        f["code"] == "log.lost-line" for r in log_json("read", log) for f in r["findings"]
    )
