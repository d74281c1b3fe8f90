"""The benchmark's harness, run small: the captures it builds are long, clean conversations
(amqpscope tracks every message through them without a finding, tshark reassembles the same
frames from their TCP sequence numbers), and `bench/run.py` prints its table. No timing is
asserted: the numbers belong in the README, measured on a quiet machine."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from amqpscope.capture.files import open_capture
from amqpscope.dissect import Dissector
from amqpscope.track.tracker import Tracker
from tests.oracle import missing

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))
import run  # the harness  # noqa: E402
import synth  # noqa: E402

MESSAGES = 230  # not a multiple of the batch sizes: the last batch is a short one


def decode(path: Path, messages: bool = True) -> tuple[list, dict, list]:
    """Frames, the summary and the findings no frame carries, as `read` and `summary` make them."""
    dissector, tracker = Dissector(messages=messages), Tracker()
    with open_capture(path) as capture:
        frames = list(dissector.run(capture))
        for frame in frames:
            tracker.feed(frame)
        tracker.finish()
        unplaced = capture.findings + dissector.findings
    return frames, tracker.summary(), unplaced


def test_091_capture_is_one_clean_conversation(tmp_path: Path) -> None:
    path = tmp_path / "091.pcap"
    packets = synth.build_091(path, MESSAGES)
    frames, summary, unplaced = decode(path)
    assert len({f.packet for f in frames}) < packets  # handshake, TCP acks: packets without AMQP
    assert unplaced == []
    names = Counter(f.name for f in frames)
    assert names["basic.publish"] == names["basic.deliver"] == names["basic.ack"] == MESSAGES
    tags = [f.fields["delivery-tag"] for f in frames if f.name == "basic.deliver"]
    assert tags == list(range(1, MESSAGES + 1))
    acked = [f.fields["delivery-tag"] for f in frames if f.name == "basic.ack"]
    assert acked == tags
    (conn,) = summary["connections"]
    assert conn["close"]["reply-code"] == 200
    # the broker waits for acks at the prefetch limit: the one thing worth saying about it
    assert {f["code"] for f in summary["findings"]} <= {"amqp091.prefetch-saturated"}
    (queue,) = summary["journeys"]
    assert (queue["matched"], queue["unmatched"]) == (MESSAGES, 0)


def test_10_capture_is_one_clean_conversation(tmp_path: Path) -> None:
    path = tmp_path / "10.pcap"
    synth.build_10(path, MESSAGES)
    frames, summary, unplaced = decode(path)
    assert unplaced == []
    assert summary["findings"] == []
    transfers = Counter(f.direction for f in frames if f.name == "transfer")
    assert transfers == {"c2s": MESSAGES, "s2c": MESSAGES}
    assert all(f.message is not None for f in frames if f.name == "transfer")
    (conn,) = summary["connections"]
    links = [link for session in conn["sessions"] for link in session["links"]]
    assert sorted(link["role"] for link in links) == ["receiver", "sender"]
    for link in links:
        assert link["deliveries"] == MESSAGES
        assert link["settled"] == MESSAGES and link["outcomes"]["accepted"] == MESSAGES
    # what `summary` reads (messages followed, not decoded) tracks the same
    assert decode(path, messages=False)[1] == summary
    # each message is one of its own (id and body), received as it was sent
    ids, bodies = {}, {}
    for direction in ("c2s", "s2c"):
        messages = [f.message for f in frames if f.name == "transfer" and f.direction == direction]
        ids[direction] = [m["properties"]["message-id"] for m in messages]
        bodies[direction] = [m["body"]["value"] for m in messages]
    assert len(set(ids["c2s"])) == len(set(bodies["c2s"])) == MESSAGES
    assert ids["s2c"] == ids["c2s"] and bodies["s2c"] == bodies["c2s"]


def message_id(frame) -> str:
    """The message-id of a transfer's message, as amqpscope decodes it."""
    return frame.message["properties"]["message-id"]


@pytest.mark.tshark
@pytest.mark.skipif(shutil.which("tshark") is None, reason=missing("tshark"))
@pytest.mark.parametrize(
    ("build", "field"), [(synth.build_091, "amqp.type"), (synth.build_10, "amqp.performative")]
)
def test_tshark_reassembles_the_same_frames(tmp_path: Path, build, field: str) -> None:
    """An independent TCP reassembler agrees that the sequence numbers are consistent."""
    path = tmp_path / "big.pcap"
    build(path, MESSAGES)
    out = subprocess.run(
        ["tshark", "-r", str(path), "-Y", "amqp", "-T", "fields", "-e", field],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    theirs = sum(len([v for v in line.split(",") if v]) for line in out.splitlines())
    frames = decode(path)[0]
    skipped = ("protocol-header", "heartbeat", "sasl", "transport")  # transport: TCP's, not AMQP's
    ours = sum(1 for f in frames if f.kind not in skipped)
    assert theirs == ours > 2 * MESSAGES


@pytest.mark.tshark
@pytest.mark.skipif(shutil.which("tshark") is None, reason=missing("tshark"))
def test_tshark_reads_the_10_message_ids(tmp_path: Path) -> None:
    """The re-encoded properties sections are well formed to an independent decoder: tshark
    reads every 1.0 message's own id, the ones amqpscope reads, in the same order."""
    path = tmp_path / "10.pcap"
    synth.build_10(path, MESSAGES)
    out = subprocess.run(
        ["tshark", "-r", str(path), "-Y", "amqp", "-T", "fields", "-e",
         "amqp.message.messageId.string"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout  # fmt: skip
    theirs = [v for line in out.splitlines() for v in line.split(",") if v]
    ours = [message_id(f) for f in decode(path)[0] if f.name == "transfer"]
    assert theirs == ours
    assert len(set(theirs)) == MESSAGES and len(theirs) == 2 * MESSAGES


def test_run_prints_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--messages-091", "60", "--messages-10", "40", "--keep", str(tmp_path)]
    args += ["--builds", "pure"]  # the compiled build's turn: test_compiled.py
    if shutil.which("tshark") is None:
        args.append("--no-tshark")
    assert run.main(args) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [line for line in out if line.startswith(("| 0-9-1 |", "| 1.0 |"))]
    assert len(rows) == 8, out  # read --json, summary, the timeline piped and on a terminal
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[2] == "pure"
        assert cells[3].endswith(")") and float(cells[3].split()[0]) > 0
    assert sorted(p.name for p in tmp_path.glob("*.pcap")) == [
        "0-9-1-half.pcap",
        "0-9-1.pcap",
        "1.0-half.pcap",
        "1.0.pcap",
    ]


@pytest.mark.parametrize(
    "capture", sorted(p.name for p in (BENCH.parent / "captures").glob("*.pcap*")), ids=str
)
def test_summary_fast_path_tracks_the_same(capture: str) -> None:
    """`summary` follows AMQP 1.0 deliveries without decoding their messages: on every bundled
    capture its summary, and what it leaves unplaced, are those of a full decode."""
    path = BENCH.parent / "captures" / capture
    full, fast = decode(path), decode(path, messages=False)
    assert fast[1] == full[1]
    assert [f.to_json() for f in fast[2]] == [f.to_json() for f in full[2]]
