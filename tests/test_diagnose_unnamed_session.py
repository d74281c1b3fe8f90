"""A log that shows no channel (uamqp's trace: captures/log-uamqp-broker.log, recorded beside
its pcap by captures/scenarios/uamqp_log.py): while a connection has one session, its frames
are that session's, so `diagnose` links the rejected disposition to its delivery and link as
it does on the capture; with a second session it says that it cannot tell and guesses nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from amqpscope.cli import main

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
LOG = CAPTURES / "log-uamqp-broker.log"
PCAP = CAPTURES / "log-uamqp-broker.pcap"


def run(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def diagnoses(path: Path) -> list[dict[str, Any]]:
    return json.loads(run("diagnose", str(path), "--json"))["diagnoses"]


def frame(path: Path, number: int) -> dict[str, Any]:
    records = [json.loads(line) for line in run("read", str(path), "--json").splitlines()]
    return next(r for r in records if r.get("frame") == number)


def test_the_log_gives_the_captures_rejection_diagnosis() -> None:
    truth = json.loads((CAPTURES / "log-uamqp-broker.json").read_text())["expect"]
    assert ["rejected", True] in truth["settled"]
    [of_log] = [d for d in diagnoses(LOG) if d["code"] == "delivery.rejected"]
    [of_pcap] = [d for d in diagnoses(PCAP) if d["code"] == "delivery.rejected"]
    # the same delivery on the same link, rejected with the same error, on the same connection
    assert of_log["explanation"] == of_pcap["explanation"]
    assert "delivery-id 2 on link 'receiver-link-" in of_log["explanation"]
    assert "amqp:not-allowed: rejected by the test" in of_log["explanation"]
    assert (of_log["conn"], of_log["severity"]) == (of_pcap["conn"], of_pcap["severity"])
    # the log shows no channel: the title does not name one (the capture's says channel 0)
    assert of_pcap["title"] == "A delivery was rejected on channel 0"
    assert of_log["title"] == "A delivery was rejected" and of_log["channel"] is None
    assert abs(of_log["start"] - of_pcap["start"]) < 0.01  # the same host, ms in the log
    [at_log], [at_pcap] = of_log["evidence"], of_pcap["evidence"]
    logged, captured = frame(LOG, at_log), frame(PCAP, at_pcap)
    assert logged["name"] == captured["name"] == "disposition"
    for key in ("role", "first", "settled"):
        assert logged["fields"][key] == captured["fields"][key]
    assert logged["channel"] is None  # the record still says what the log showed


def test_a_second_session_is_said_and_nothing_is_guessed(tmp_path: Path) -> None:
    """The receiver's connection with its begins logged twice (the real lines, repeated): two
    sessions, so no channel-less frame is placed on either: said once, no rejection linked."""
    lines = LOG.read_text(encoding="utf-8").splitlines(keepends=True)
    begins = [n for n, line in enumerate(lines) if "[BEGIN]" in line][2:4]
    assert len(begins) == 2
    doubled = lines[: begins[1] + 1] + [lines[n] for n in begins] + lines[begins[1] + 1 :]
    log = tmp_path / "two-sessions.log"
    log.write_text("".join(doubled), encoding="utf-8")
    found = [d["code"] for d in diagnoses(log)]
    assert "delivery.rejected" not in found
    records = [json.loads(x) for x in run("read", str(log), "--json").splitlines()]
    said = [
        f for r in records for f in r.get("findings", []) if f["code"] == "amqp10.session-unknown"
    ]
    assert len(said) == 1
    assert "began another session" in said[0]["message"]
