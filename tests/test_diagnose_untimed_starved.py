"""A link starved when a log without timestamps ends (log-proton-starved).

The recorded Proton client grants credit for 3 of 10 waiting messages, takes them and grants no
more; 2 s later its process exits without closing anything, as a hung consumer that is killed.
Proton's trace has no timestamps, so the one-second floor for listing a stall can never be met:
the stall still on at the log's end is said without a length, with the same link, queue and
messages waiting as the capture of the same run, which times it to the TCP end. A stall the
receiver ended with a flow is not said from such a log: a dip to zero credit refilled by the
next flow looks the same as a long one when nothing has a time.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from amqpscope.cli import main

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
NAME = "log-proton-starved"
TRUTH = json.loads((CAPTURES / f"{NAME}.json").read_text())["expect"]


def diagnoses(path: Path) -> list[dict[str, Any]]:
    result = CliRunner().invoke(main, ["diagnose", str(path), "--json"])
    assert result.exit_code == 0, result.output
    found: list[dict[str, Any]] = json.loads(result.stdout)["diagnoses"]
    return found


def starved(path: Path) -> list[dict[str, Any]]:
    return [d for d in diagnoses(path) if d["code"] == "credit.starved"]


def test_the_log_says_the_link_was_starved_at_its_end_without_a_length() -> None:
    (mine,) = starved(CAPTURES / f"{NAME}.log")
    (wire,) = starved(CAPTURES / f"{NAME}.pcap")
    for key in ("link", "queue", "conn", "channel", "severity"):
        assert mine[key] == wire[key], key
    assert mine["ongoing"] and wire["ongoing"]
    assert mine["start"] is None and mine["duration"] == 0.0
    waiting = TRUTH["transfers_sent"] - TRUTH["transfers_received"]
    assert waiting == TRUTH["waiting_at_exit"]
    assert f"{waiting} still waiting" in mine["explanation"]
    assert "not known" in mine["explanation"] and " s " not in mine["title"]
    assert mine["evidence"], "the flow that reported the waiting messages"


def test_the_capture_times_the_same_starvation_to_the_tcp_end() -> None:
    """The client counted how long it held back; the capture's stall runs from the transfer
    that used the last credit to the TCP end its exit caused (not to its last AMQP frame)."""
    (wire,) = starved(CAPTURES / f"{NAME}.pcap")
    assert abs(wire["duration"] - TRUTH["starved_seconds"]) < 0.05
    assert re.search(r"starved of credit for 2\.\d s", wire["title"])


def test_a_stall_the_receiver_ended_is_not_said_from_an_untimed_log(tmp_path: Path) -> None:
    """The same log with the grant the client never sent added (its own flow line, with the
    delivery-count moved past the 3 received and credit for the 7 waiting)."""
    lines = (CAPTURES / f"{NAME}.log").read_text().splitlines(keepends=True)
    (grant,) = [line for line in lines if "-> @flow(19)" in line and "link-credit=0x3" in line]
    granted = grant.replace("delivery-count=0x0", "delivery-count=0x3").replace(
        "link-credit=0x3", "link-credit=0x7"
    )
    assert granted != grant
    path = tmp_path / "granted.log"
    path.write_text("".join(lines) + granted)
    assert starved(path) == []
    assert starved(CAPTURES / f"{NAME}.log"), "the same log without the grant"
