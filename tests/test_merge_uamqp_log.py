"""uamqp's trace log merged with the capture of the same run (captures/log-uamqp-broker.*,
recorded by captures/scenarios/logs.py: uamqp-python 1.5.3 against Proton's C++ broker, a
sender's connection then a receiver's). Its lines name no connection and no channel, so each of
its connections is found by what its frames show (the opens' container-ids, link names,
delivery ids and tags) and joined to the captured connection that shows the same."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from amqpscope.capture.files import CaptureReader
from amqpscope.dissect import Dissector
from amqpscope.logs.reader import records_from_log
from amqpscope.merge import align
from tests.cli import run

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
PCAP = CAPTURES / "log-uamqp-broker.pcap"
LOG = CAPTURES / "log-uamqp-broker.log"
FALSE = ("amqp10.unexpected-frame", "amqp10.frame-after-close")
TRUTH: dict[str, Any] = json.loads((CAPTURES / "log-uamqp-broker.json").read_text())["expect"]


def records(*args: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in run("read", "--json", *args).stdout.splitlines()]


def container(frames: list[dict[str, Any]], conn: int) -> str:
    """The container-id of the client's open on connection `conn`."""
    [cid] = [
        f["fields"]["container-id"]
        for f in frames
        if f["conn"] == conn and f["name"] == "open" and f["dir"] == "c2s"
    ]
    return str(cid)


def test_each_uamqp_line_is_seen_with_the_captured_frame_it_shows() -> None:
    alone = records(str(PCAP))
    logged = records(str(LOG))
    merged = records(str(PCAP), str(LOG))
    assert {container(logged, f["conn"]) for f in logged} == {
        container(alone, f["conn"]) for f in alone
    }  # the recording holds both connections, in the capture and in the log
    # the capture's frames, each once, no record of the log's own
    assert len(merged) == len(alone)
    assert [(f["conn"], f["name"], f["dir"]) for f in merged] == [
        (f["conn"], f["name"], f["dir"]) for f in alone
    ]
    assert all("source" not in f for f in merged)
    attached: dict[int, dict[str, Any]] = {}
    for frame in merged:
        lines = [s["line"] for s in frame["seen"] if s["input"] == "B"]
        assert len(lines) <= 1, frame  # a captured frame is one logged line at most
        attached.update((line, frame) for line in lines)
    assert sorted(attached) == sorted(r["source"]["line"] for r in logged)
    last: dict[tuple[int, str], int] = {}
    for record in logged:
        frame = attached[record["source"]["line"]]
        # the same performative, on the connection whose open names the log's container
        assert (frame["name"], frame["dir"]) == (record["name"], record["dir"])
        assert container(merged, frame["conn"]) == container(logged, record["conn"])
        # in the log's order, each way
        way = (record["conn"], record["dir"])
        assert frame["frame"] > last.get(way, 0), record
        last[way] = frame["frame"]
    assert not [f for f in merged for x in f["findings"] if x["code"] in FALSE]


def diagnoses(*paths: Path, code: str) -> list[dict[str, Any]]:
    found = json.loads(run("diagnose", "--json", *map(str, paths)).stdout)["diagnoses"]
    return [d for d in found if d["code"] == code]


def test_the_merged_diagnosis_of_the_rejection_is_the_capture_s() -> None:
    alone = diagnoses(PCAP, code="delivery.rejected")
    # as many as the receiver rejected (the client's own account)
    assert len(alone) == sum(1 for state, _ in TRUTH["settled"] if state == "rejected") >= 1
    merged = diagnoses(PCAP, LOG, code="delivery.rejected")
    assert merged == alone
    assert not diagnoses(PCAP, LOG, code="spec.violation")


def test_a_log_connection_never_matches_a_capture_connection_of_another_container() -> None:
    """The sender's logged connection beside the receiver's captured one: their protocol
    headers and closes look alike, but the opens name different containers."""
    with CaptureReader(str(PCAP)) as capture:
        wire = align.connections(list(Dissector().run(capture)))
    with open(LOG, encoding="utf-8") as text:
        logged = align.connections(list(records_from_log(text, str(LOG), fmt="uamqp")))
    by_id = {
        f.fields["container-id"]: conn
        for conn in wire.values()
        for f in conn.frames
        if f.name == "open" and f.direction == "c2s"
    }
    assert len(logged) == len(by_id) == 2
    for conn in logged.values():
        [cid] = [
            f.fields["container-id"]
            for f in conn.frames
            if f.name == "open" and f.direction == "c2s"
        ]
        others = [c for k, c in by_id.items() if k != cid]
        assert align.best_capture(conn, others) == (conn, ([], []))
        target, (captured, _) = align.best_capture(conn, list(wire.values()))
        assert target is by_id[cid] and len(captured) == len(conn.frames)
