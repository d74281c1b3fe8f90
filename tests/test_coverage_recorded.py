"""Diagnoses and findings that had no test, each on a recording (issue 40 item 14): what the
recorded client or peer saw (captures/NAME.json) against what amqpscope reads from the capture
or log of the same run.

log.truncated-payload: rhea's frame trace (DEBUG=rhea:frames) prints a payload as Node prints a
Buffer, its first 50 bytes and "... N more bytes": every transfer of log-rhea-broker.log is cut,
and the finding gives the payload's whole size, which is what Proton decodes out of the same
transfer in log-rhea-broker.pcap (tcpdump beside the trace).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from proton import Data

from amqpscope.capture.files import open_capture
from amqpscope.dissect import Dissector
from amqpscope.logs.detect import detect
from amqpscope.logs.reader import records_from_log

CAPTURES = Path(__file__).resolve().parent.parent / "captures"


def truth(name: str) -> dict[str, Any]:
    return json.loads((CAPTURES / f"{name}.json").read_text())["expect"]


def log_records(name: str) -> list[Any]:
    lines = (CAPTURES / name).read_text().splitlines(keepends=True)
    fmt = detect(lines)
    assert fmt is not None
    return list(records_from_log(lines, name, fmt))


def payload_sizes(pcap: Path) -> dict[tuple[str, str], int]:
    """(direction, delivery-tag) -> the payload's size of each transfer, Proton decoding the
    performative (the payload is what follows it)."""
    out = {}
    with open_capture(str(pcap)) as capture:
        for frame in Dissector().run(capture):
            if frame.name == "transfer":
                body = frame.data[frame.data[4] * 4 :]
                performative = Data().decode(body)
                out[(frame.direction, frame.fields["delivery-tag"])] = len(body) - performative
    return out


def test_a_payload_the_log_cut_short_is_found_with_its_whole_size() -> None:
    expect = truth("log-rhea-broker")
    records = log_records("log-rhea-broker.log")
    cut = {
        (r.direction, r.fields["delivery-tag"]): [
            f.message for f in r.findings if f.code == "log.truncated-payload"
        ]
        for r in records
        if r.name == "transfer"
    }
    transfers = [r for r in records if r.name == "transfer"]
    assert len(cut) == len(transfers) == expect["transfers_sent"] + expect["transfers_received"]
    wire = payload_sizes(CAPTURES / "log-rhea-broker.pcap")
    assert wire.keys() == cut.keys()
    for key, messages in cut.items():
        assert messages == [f"the log shows {wire[key]} payload bytes cut short"], key
    # and nothing but transfers is said to be cut, nor any transfer of a log that shows them
    codes = [(r.name, f.code) for r in records for f in r.findings]
    assert {name for name, code in codes if code == "log.truncated-payload"} == {"transfer"}
    proton = log_records("log-proton-broker.log")
    assert not [f for r in proton for f in r.findings if f.code == "log.truncated-payload"]
