"""A starving link in rhea's trace and in the capture of the same run (log-rhea-starved).

rhea's JSON leaves out every 0, so RabbitMQ's attach as the sender of the client's receiving
link shows no initial-delivery-count. The spec makes it mandatory for a sender ("MUST NOT be
null if role is sender"), so the grammar reads it as the 0 it was: then the tracker counts the
link's credit from the log as from the wire. Without it, a receiver's first flow (no
delivery-count: rhea left out its 0 too) has nothing to count from, and the credit, its
starvation and the diagnosis are lost.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from amqpscope.capture.files import open_capture
from amqpscope.cli import main
from amqpscope.codec.frames import TRANSPORT, Frame
from amqpscope.dissect import Dissector
from amqpscope.logs.reader import records_from_log

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
NAME = "log-rhea-starved"
TRUTH = json.loads((CAPTURES / f"{NAME}.json").read_text())["expect"]


def captured() -> list[Frame]:
    with open_capture(str(CAPTURES / f"{NAME}.pcap")) as capture:
        return [f for f in Dissector().run(capture) if f.kind != TRANSPORT]


def logged(text: str | None = None) -> list[Frame]:
    lines = (text or (CAPTURES / f"{NAME}.log").read_text()).splitlines(keepends=True)
    return list(records_from_log(iter(lines), f"{NAME}.log", fmt="rhea", findings=[]))


def attaches(frames: list[Frame]) -> list[dict[str, Any]]:
    return [dict(f.fields) for f in frames if f.name == "attach" and f.direction == "s2c"]


def credit(path: Path) -> list[dict[str, Any]]:
    result = CliRunner().invoke(main, ["summary", str(path), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    keys = ("issued", "link-credit", "delivery-count", "available", "starvation")
    return [
        {key: link["credit"][key] for key in keys}
        for c in summary["connections"]
        for s in c["sessions"]
        for link in s["links"]
    ]


def test_the_senders_initial_delivery_count_is_read_as_the_wire_has_it() -> None:
    wire, log = attaches(captured()), attaches(logged())
    assert len(wire) == len(log) == 2
    for theirs, mine in zip(wire, log, strict=True):
        assert mine.get("role") == theirs.get("role")
        if theirs.get("role") == "sender":  # the broker as sender: mandatory, 0 on the wire
            assert mine["initial-delivery-count"] == theirs["initial-delivery-count"] == 0
        else:  # as receiver: ignored, and not made up
            assert "initial-delivery-count" not in mine


def test_the_link_credit_and_its_starvation_as_the_capture_has_them() -> None:
    from_log, from_wire = credit(CAPTURES / f"{NAME}.log"), credit(CAPTURES / f"{NAME}.pcap")
    for mine, theirs in zip(from_log, from_wire, strict=True):
        for key in ("issued", "link-credit", "delivery-count", "available"):
            assert mine[key] == theirs[key], key
        assert mine["starvation"]["episodes"] == theirs["starvation"]["episodes"]
        # the log's times are rhea's milliseconds
        assert abs(mine["starvation"]["seconds"] - theirs["starvation"]["seconds"]) < 0.01
    receiving = [c for c in from_log if c["available"]]
    assert [c["issued"] for c in receiving] == [TRUTH["credit_granted"]]
    waiting = TRUTH["transfers_sent"] - TRUTH["transfers_received"]
    assert [c["available"] for c in receiving] == [waiting]
    result = CliRunner().invoke(main, ["diagnose", str(CAPTURES / f"{NAME}.log"), "--json"])
    codes = [d["code"] for d in json.loads(result.stdout)["diagnoses"]]
    assert codes.count("credit.starved") == 1


def test_a_receivers_attach_gets_no_initial_delivery_count() -> None:
    """The rule is the spec's, for a sender only: the broker's attach as sender, written as a
    receiver's (role true), reads with no initial-delivery-count."""
    text = (CAPTURES / f"{NAME}.log").read_text()
    line = next(
        line for line in text.splitlines() if "<- attach#12" in line and '"role"' not in line
    )
    flipped = line.replace('<- attach#12 {"name":', '<- attach#12 {"role":true,"name":')
    (record,) = [f for f in logged(flipped + "\n") if f.name == "attach"]
    assert record.fields["role"] == "receiver" and "initial-delivery-count" not in record.fields


def test_the_starvation_cites_frames_as_they_read() -> None:
    """The diagnosis of the log and of the capture names the flow that stated `available`
    with the numbers that flow shows (its credit too: it was not starved then), and the
    transfer that used the last credit, the client's `credit_granted`-th delivery, is in the
    evidence with what was still waiting then."""
    for path in (CAPTURES / f"{NAME}.log", CAPTURES / f"{NAME}.pcap"):
        read = CliRunner().invoke(main, ["read", str(path), "--json"])
        frames = {r["frame"]: r for r in map(json.loads, read.stdout.splitlines()) if r.get("name")}
        result = CliRunner().invoke(main, ["diagnose", str(path), "--json"])
        (starved,) = [
            d for d in json.loads(result.stdout)["diagnoses"] if d["code"] == "credit.starved"
        ]
        text = starved["explanation"]
        said = re.search(r"frame (\d+) reported (\d+) available with link-credit (\d+)", text)
        assert said, text
        flow = frames[int(said[1])]
        assert flow["name"] == "flow"
        assert flow["fields"]["available"] == int(said[2])
        assert flow["fields"]["link-credit"] == int(said[3])
        assert int(said[3]) == TRUTH["credit_granted"]
        # the deliveries after that flow: the last its credit allowed used the last of it
        sent = [
            n for n, r in sorted(frames.items()) if r["name"] == "transfer" and n > flow["frame"]
        ]
        last = sent[TRUTH["credit_granted"] - 1]
        assert last in starved["evidence"]
        waiting = int(said[2]) - TRUTH["credit_granted"]
        assert f"frame {last} used the last credit with {waiting} still to send" in text
