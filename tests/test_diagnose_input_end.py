"""Deliveries left unsettled when the input ends before the TCP connection does.

A link's unsettled deliveries are reported on the frame that ended the link (a detach, the TCP
end). A capture that stops first, or a frame-trace log (which has no TCP), ends links with no
frame to carry the finding: the diagnosis must still be made, its last frame standing for the
end. The recorded Proton run (captures/log-proton-broker.*, the trace and the capture of the
same run) is cut after the six transfers its receiver got and before it settled them, as a
process killed there would leave its log. The trace has no timestamps: the diagnosis says where,
not when (no ages, no start).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from amqpscope.cli import main
from tests.crafted import CAPTURES, drop

LOG = CAPTURES / "log-proton-broker.log"
PCAP = CAPTURES / "log-proton-broker.pcap"


def run(*args: str) -> list[dict[str, Any]]:
    result = CliRunner().invoke(main, [*args])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def diagnoses(path: Path) -> list[dict[str, Any]]:
    result = CliRunner().invoke(main, ["diagnose", str(path), "--json"])
    assert result.exit_code == 0, result.output
    return list(json.loads(result.stdout)["diagnoses"])


def received(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The transfers the client received, up to the first disposition it sent after them."""
    out: list[dict[str, Any]] = []
    for record in records:
        if record.get("name") == "transfer" and record["dir"] == "s2c":
            out.append(record)
        elif out and record.get("name") == "disposition" and record["dir"] == "c2s":
            break
    return out


def unsettled(path: Path) -> dict[str, Any]:
    (found,) = [d for d in diagnoses(path) if d["code"] == "delivery.unsettled-at-end"]
    return found


def test_a_trace_cut_before_the_receiver_settled(tmp_path: Path) -> None:
    transfers = received(run("read", str(LOG), "--json"))
    assert len(transfers) == 6
    last_line = transfers[-1]["source"]["line"]
    cut = tmp_path / "killed.log"
    cut.write_text("".join(LOG.read_text().splitlines(keepends=True)[:last_line]))
    assert [d["code"] for d in diagnoses(LOG) if d["severity"] != "info"] == []

    found = unsettled(cut)
    assert found["explanation"].startswith("6 deliveries left unsettled on link")
    assert "when the log ended" in found["explanation"]
    assert found["ongoing"] and found["start"] is None and found["duration"] == 0.0
    assert "oldest" not in found["title"] and "ages" not in found["explanation"]
    assert found["evidence"] == [t["frame"] for t in transfers]


def test_a_capture_cut_before_the_receiver_settled(tmp_path: Path) -> None:
    transfers = received(run("read", str(PCAP), "--json"))
    assert len(transfers) == 6
    after = transfers[-1]["packet"]
    cut = drop(PCAP, tmp_path / "cut.pcap", lambda raw: raw.number <= after)
    found = unsettled(cut)
    assert found["explanation"].startswith("6 deliveries left unsettled on link")
    assert found["ongoing"] and found["start"] is not None
    assert "(oldest " in found["title"] and "Their ages at the end" in found["explanation"]
    assert found["evidence"] == [t["frame"] for t in transfers]
