"""Several vantage points as one timeline (issue 44), on captures/091-vantage: two tcpdumps of
one run of two pika processes through RabbitMQ (the second started once the consumers were
ready, then shifted +1.234 s with editcap -t) and the publisher's pika DEBUG log. The ground
truth is the clients' (captures/scenarios/vantage.py): which consumer got which message and
what it answered, the shift applied; nothing here is read from the captures to be expected."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from amqpscope import schema
from amqpscope.capture.files import CaptureReader
from amqpscope.dissect import Dissector
from amqpscope.logs.reader import records_from_log
from amqpscope.merge import clocks
from amqpscope.merge.timeline import CAPTURE, Part, merge

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
A = CAPTURES / "091-vantage.pcap"
B = CAPTURES / "091-vantage-b.pcap"
LOGFILE = CAPTURES / "091-vantage.log"
TRUTH: dict[str, Any] = json.loads((CAPTURES / "091-vantage.json").read_text())["expect"]
SHIFT = TRUTH["vantage"]["shift"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def records(*args: str) -> tuple[list[dict[str, Any]], str]:
    done = run("read", "--json", *args)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()], done.stderr


def said_offset(stderr: str, name: str) -> tuple[float, str]:
    """The offset `amqpscope` said for input `name`, and its line."""
    [line] = [x for x in stderr.splitlines() if f"merge.clock-offset: input {name} (" in x]
    m = re.search(r": ([+-]\d+\.\d+) s", line)
    assert m is not None, line
    return float(m.group(1)), line


def captured(path: Path) -> list[Any]:
    with CaptureReader(str(path)) as capture:
        return list(Dissector().run(capture))


def test_two_vantage_points_give_each_frame_once() -> None:
    alone_a, _ = records(str(A))
    alone_b, _ = records(str(B))
    merged, stderr = records(str(A), str(B))  # told apart from a rotated set by content
    assert "input B (091-vantage-b.pcap)" in stderr
    # A holds the whole run (B started late): every frame once, none of B's twice
    assert len(merged) == len(alone_a) > len(alone_b) > 0
    for name, alone in (("A", alone_a), ("B", alone_b)):  # each input's frames, each once
        held = [
            (s["packet"], r["name"], r["channel"], r["dir"])
            for r in merged
            for s in r["seen"]
            if s["input"] == name
        ]
        assert sorted(held) == sorted(
            (r["packet"], r["name"], r["channel"], r["dir"]) for r in alone
        )
    # both capture times of a frame both hold: B's on its own clock, SHIFT ahead
    both = [r for r in merged if len(r["seen"]) == 2]
    assert len(both) == len(alone_b)
    for r in both:
        a_ts, b_ts = (s["ts"] for s in sorted(r["seen"], key=lambda s: s["input"]))
        assert b_ts - a_ts == pytest.approx(SHIFT, abs=0.005)
    # numbered anew, in time order, three connections (not six)
    assert [r["frame"] for r in merged] == list(range(1, len(merged) + 1))
    assert [r["ts"] for r in merged] == sorted(r["ts"] for r in merged)
    assert {r["conn"] for r in merged} == {1, 2, 3} and TRUTH["connections"] == 3
    validator = schema.validator("frame")
    for r in merged:
        errors = list(validator.iter_errors(r))
        assert not errors, errors[0].message


def test_the_shift_is_estimated_within_5_ms() -> None:
    done = run("summary", str(A), str(B))
    assert done.returncode == 0, done.stderr
    seconds, line = said_offset(done.stderr, "B")
    assert abs(seconds - SHIFT) <= 0.005, line
    assert "±" in line
    # sans-IO, the same: the merge module on the dissected records
    parts = [Part("A", str(A), CAPTURE, captured(A)), Part("B", str(B), CAPTURE, captured(B))]
    offset = merge(parts).offsets["B"]
    assert offset.how == clocks.ESTIMATED and offset.pairs > 50
    assert abs(offset.seconds - SHIFT) <= 0.005
    assert abs(offset.seconds - SHIFT) <= offset.bound + 0.000_002  # the bound holds the truth


def test_an_offset_given_is_used_and_said() -> None:
    _, stderr = records(str(A), str(B), "--offset", "B=+1.2")
    seconds, line = said_offset(stderr, "B")
    assert seconds == 1.2 and "(given)" in line
    bad = run("read", str(A), str(B), "--offset", "Z=1")
    assert bad.returncode == 2
    assert "'Z' names no single input" in bad.stderr and "Traceback" not in bad.stderr


def expected_hops(body: str) -> list[tuple[Any, ...]]:
    """The hops of the message with this body as the clients saw them."""
    [sent] = [p for p in TRUTH["published"] if p["body"] == body]
    hops: list[tuple[Any, ...]] = [("published", "publisher", None)]
    if sent["confirmed"]:
        hops.append(("confirmed", "publisher", None))
    for got in (d for d in TRUTH["delivered"] if d["body"] == body):
        event = "redelivered" if got["redelivered"] else "delivered"
        hops.append((event, got["consumer"], None))
        hops.append(
            ("acked", got["consumer"], None)
            if got["outcome"] == "ack"
            else ("nacked", got["consumer"], True)
        )
    return hops


def test_every_followed_journey_over_both_inputs_is_the_clients() -> None:
    done = run("follow", str(A), str(B), "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    errors = list(schema.validator("follow").iter_errors(document))
    assert not errors, errors[0].message
    roles = {name: role for role, name in TRUTH["connection_names"].items()}
    journeys = document["journeys"]
    assert [j["body"] for j in journeys] == [p["body"] for p in TRUTH["published"]]
    nacked = 0
    for journey, sent in zip(journeys, TRUTH["published"], strict=True):
        assert journey["message-id"] == sent["message_id"]
        assert journey["correlation-id"] == sent["correlation_id"]
        seen = [
            (h["event"], roles[h["connection-name"]], h.get("requeue")) for h in journey["hops"]
        ]
        assert seen == expected_hops(sent["body"]), sent["body"]
        assert journey["end"] == "acked"
        nacked += sum(1 for h in journey["hops"] if h["event"] == "nacked")
    assert nacked == TRUTH["nacks"] >= 1


def test_a_log_merged_with_its_capture_attaches_its_lines() -> None:
    alone, _ = records(str(A))
    merged, stderr = records(str(A), str(LOGFILE))
    assert "1 connection matched by content" in stderr
    # the capture's frames, each once, and no record of the log's own
    assert len(merged) == len(alone)
    assert all("source" not in r for r in merged)
    with open(LOGFILE, encoding="utf-8") as log:
        logged = list(records_from_log(log, str(LOGFILE), fmt="pika"))
    assert logged
    lines = {s["line"]: r for r in merged for s in r["seen"] if s["input"] == "B"}
    assert sorted(lines) == [f.source["line"] for f in logged]
    names = {r["conn"]: r for r in merged if r["name"] == "connection.start-ok"}
    for frame in logged:
        record = lines[frame.source["line"]]
        assert (record["name"], record["channel"], record["dir"]) == (
            frame.name,
            frame.channel,
            frame.direction,
        )
        # on the publisher's connection (the log is the publisher's)
        start_ok = names[record["conn"]]["fields"]["client-properties"]
        assert start_ok["connection_name"] == TRUTH["connection_names"]["publisher"]
    seconds, line = said_offset(stderr, "B")
    assert abs(seconds) < 0.01, line  # the same host's clock, a millisecond's resolution


def test_a_dateless_log_takes_the_capture_s_date(tmp_path: Path) -> None:
    """The same log with only times of day (its dates cut, as a log formatted with %H:%M:%S
    would print them): its lines attach to the same frames, dated from the capture."""
    text = LOGFILE.read_text(encoding="utf-8")
    dateless = tmp_path / "dateless.log"
    dateless.write_text(re.sub(r"(?m)^\d{4}-\d\d-\d\d ", "", text), encoding="utf-8")
    with_dates, _ = records(str(A), str(LOGFILE))
    merged, stderr = records(str(A), str(dateless))
    assert "dated from input A" in stderr
    lines = [(s["line"], r["frame"]) for r in merged for s in r["seen"] if s["input"] == "B"]
    kept = [(s["line"], r["frame"]) for r in with_dates for s in r["seen"] if s["input"] == "B"]
    assert lines == kept and lines


@pytest.mark.parametrize("name", ["log-proton-broker", "log-rhea-broker", "log-pika-broker"])
def test_each_logged_frame_is_attached_to_its_captured_frame(name: str) -> None:
    """The logs recorded beside their captures (captures/scenarios/logs.py): Proton's trace
    has no times, rhea's leaves out defaults (in a source's map too), pika's shows a few frames
    it received; each of their records is attached to the captured frame it is, matched by
    content (container-ids, link names, delivery ids and tags, every field the log shows),
    and none is left as a record of its own."""
    capture, log = CAPTURES / f"{name}.pcap", CAPTURES / f"{name}.log"
    alone, _ = records(str(capture))
    logged, _ = records(str(log))
    merged, stderr = records(str(capture), str(log))
    assert "matched by content" in stderr
    if name == "log-proton-broker":  # no time on its lines: no clock offset said of it
        assert "input B (log-proton-broker.log): no clock" in stderr
    assert len(merged) == len(alone)
    attached = {s["line"]: r for r in merged for s in r["seen"] if s["input"] == "B"}
    assert sorted(attached) == sorted(r["source"]["line"] for r in logged)
    for record in logged:
        frame = attached[record["source"]["line"]]
        assert (frame["name"], frame["channel"]) == (record["name"], record["channel"])


@pytest.mark.parametrize("nearer", ["server", "client"])
def test_causality_bounds_the_offset_of_two_hosts(nearer: str) -> None:
    """Two hosts' captures of one connection, a network between them (one-way delays of 2 to
    20 ms) and the second host's clock 0.1 s ahead: each frame seen at both ends bounds the
    offset from one side, and the estimate's bound holds the truth; which end the second is
    nearer is told by which interval is not empty."""
    import random

    rng = random.Random(44)
    truth = 0.1
    c2s, s2c, delays = [], [], []
    for _ in range(200):
        delay = rng.uniform(0.002, 0.02)
        delays.append(delay)
        # a client-to-server frame reaches the server's host `delay` after the client's
        toward = delay if nearer == "server" else -delay
        c2s.append(truth + toward)
        s2c.append(truth - toward)
    offset = clocks.between_captures(c2s, s2c)
    assert offset.nearer == nearer
    # as tight as the fastest frame each way allows: its one-way delay
    assert abs(offset.seconds - truth) <= offset.bound
    assert offset.bound == pytest.approx(min(delays), abs=1e-9)


@pytest.mark.parametrize(
    ("option", "said"),
    [
        (("-V",), "-V and -x show one capture's bytes; read one of the inputs (or --json)"),
        (("-x",), "-V and -x show one capture's bytes; read one of the inputs (or --json)"),
        (("-w", "cut.pcap"), "-w cuts one capture (or the pieces of one rotated capture);"),
    ],
)
def test_bytes_and_cuts_of_vantage_points_are_refused_in_a_line(
    option: tuple[str, ...], said: str, tmp_path: Path
) -> None:
    """Two vantage points hold no one file's bytes for -V/-x, and a cut of them is no one
    capture: a usage error that says so (not "a log has none": neither input is a log), and no
    file written."""
    args = [str(CAPTURES / "091-vantage.pcap"), str(CAPTURES / "091-vantage-b.pcap")]
    option = tuple(str(tmp_path / o) if o.endswith(".pcap") else o for o in option)
    done = run("read", *args, *option)
    assert done.returncode == 2, done
    assert done.stderr.startswith(f"amqpscope: {said}"), done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert not (tmp_path / "cut.pcap").exists()


def test_the_report_merges_vantage_points_too(tmp_path: Path) -> None:
    """`report A B` opens its inputs where every command does (`sources.open_source`, with
    --inputs and --offset): the page holds the merged timeline's clock offsets, B's the shift
    the recording applied."""
    page = tmp_path / "report.html"
    done = run("report", str(A), str(B), "-o", str(page))
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    offset, _bound = said_offset(done.stderr, "B")
    assert abs(offset - SHIFT) < 0.005
    assert text.count('"code":"merge.clock-offset"') == 2


def test_the_tui_takes_the_inputs_options() -> None:
    """`tui A B` opens through the same door with --inputs and --offset: an --offset that names
    no input is the usage error every command gives (before the screen changes)."""
    done = run("tui", str(A), str(B), "--offset", "C=+1")
    assert done.returncode == 2, done
    assert "'C' names no single input" in done.stderr
