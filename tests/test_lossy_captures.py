"""Captures that lost bytes (a snap length) raise no error the whole capture does not have.

A capture taken with a snap length (`tcpdump -s 200`, or an old tcpdump's default) keeps the
start of each packet: the rest of the payload is missing. The bytes lost may hold a handshake
step, the deliveries a client then acks, or the method a content frame belongs to. Before
amqpscope knew of the loss when the lossy direction next framed something, so the client's acks
of the lost deliveries (read first) were "unknown delivery tags", errors the broker would close
the channel for, in a capture where nothing went wrong.

Wireshark's editcap (`-s`) cuts every bundled capture here (the oracle for what a snap length
does to a file); the IP length says how much each packet lost, so the gap is known at the
packet itself and rides the connection's next frame, whichever direction it goes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from amqpscope.capture.files import open_capture
from amqpscope.cli import main
from amqpscope.dissect import Dissector
from amqpscope.findings import gap_lost
from tests.oracle import TSHARK

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "captures"
EDITCAP = shutil.which("editcap")
pytestmark = pytest.mark.skipif(
    EDITCAP is None, reason="editcap (Debian's wireshark-common, which make test installs)"
)
#: what only the lost bytes could explain: never raised because a capture lost them
MADE_UP = {
    "amqp10.delivery-tag-reused",
    "amqp091.body-size-mismatch",
    "amqp091.unknown-delivery-tag",
    "amqp091.unexpected-method",
    "amqp091.unexpected-content",
    "amqp10.unexpected-frame",
    "amqp10.unknown-delivery",
    "amqp10.unbegun-channel",
    "amqp10.unattached-handle",
    "amqp10.bad-message",
    "amqp10.delivery-id-reused",
}
#: every bundled capture but the encrypted ones (a cut TLS record is undecryptable as a whole)
NAMES = sorted(
    p.name
    for p in CAPTURES.iterdir()
    if p.suffix in (".pcap", ".pcapng") and "tls" not in p.name and "websocket" not in p.name
)


def cut(source: Path, snaplen: int, where: Path) -> Path:
    out = where / f"{source.stem}.s{snaplen}{source.suffix}"
    assert EDITCAP is not None
    subprocess.run([EDITCAP, "-s", str(snaplen), str(source), str(out)], check=True)
    return out


def codes(path: Path) -> Counter[str]:
    """Every finding `summary --json` reports (frames' and the ends'), by code."""
    result = CliRunner().invoke(main, ["summary", "--json", str(path)])
    assert result.exit_code == 0, result.output
    return Counter(f["code"] for f in json.loads(result.stdout)["findings"])


@pytest.mark.parametrize("name", NAMES)
def test_a_snap_length_makes_up_no_error(name: str, tmp_path: Path) -> None:
    whole = codes(CAPTURES / name)
    for snaplen in (200, 400):
        lossy = codes(cut(CAPTURES / name, snaplen, tmp_path))
        made_up = {code: n for code, n in lossy.items() if code in MADE_UP and n > whole[code]}
        assert not made_up, (snaplen, made_up)


@pytest.mark.parametrize("name", NAMES)
def test_a_dropped_packet_makes_up_no_error(name: str, tmp_path: Path) -> None:
    """As the kernel drops a packet under load: editcap deletes one packet with data, at three
    places of each capture, one at a time (which packets have data: tshark's reading)."""
    if TSHARK is None:
        pytest.skip("tshark (Debian's package, which make test installs)")
    source = CAPTURES / name
    fields = subprocess.run(
        [str(TSHARK), "-r", str(source), "-T", "fields", "-e", "frame.number", "-e", "tcp.len"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    with_data = [
        int(number)
        for number, size in (line.split("\t") for line in fields.splitlines())
        if size and int(size) > 0
    ]
    whole = codes(source)
    for share in (0.3, 0.5, 0.7):
        packet = with_data[int(len(with_data) * share)]
        out = tmp_path / f"{source.stem}-{packet}{source.suffix}"
        assert EDITCAP is not None
        subprocess.run([EDITCAP, str(source), str(out), str(packet)], check=True)
        lossy = codes(out)
        made_up = {code: n for code, n in lossy.items() if code in MADE_UP and n > whole[code]}
        assert not made_up, (packet, made_up)


def read_json(path: Path) -> list[dict[str, Any]]:
    result = CliRunner().invoke(main, ["read", "--json", str(path)])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_acks_of_deliveries_the_snap_length_cut_are_acks(tmp_path: Path) -> None:
    """091-publish-consume cut at 120 bytes: the deliveries' packet lost most of its payload,
    and the client's ten acks follow before the server frames anything again."""
    source = CAPTURES / "091-publish-consume.pcap"
    truth = json.loads(source.with_suffix(".json").read_text())["expect"]
    records = read_json(cut(source, 120, tmp_path))
    acks = [r for r in records if r["name"] == "basic.ack"]
    assert len(acks) == truth["acks"]
    assert not [f for r in records for f in r.get("findings", []) if f["code"] in MADE_UP]
    # the loss of the deliveries rides the first frame after the packet that lost them: the
    # first ack (the server sent nothing in between), and it names the server's direction
    lost = [r for r in records for f in r.get("findings", []) if "bytes of s2c" in f["message"]]
    assert lost and lost[-1]["frame"] <= acks[0]["frame"]
    summary = json.loads(
        CliRunner()
        .invoke(main, ["summary", "--json", str(tmp_path / "091-publish-consume.s120.pcap")])
        .stdout
    )
    (channel,) = [c for conn in summary["connections"] for c in conn["channels"]]
    assert channel["acks"] == truth["acks"]
    assert channel["unacked"] == 0


def test_a_gap_names_the_direction_and_packet_the_snap_length_cut(tmp_path: Path) -> None:
    """Whichever frame it rides, a `tcp.gap` names the direction whose bytes were lost and the
    packet that lost them: as tshark reads the cut file (its frame.len against frame.cap_len,
    and which port sent it)."""
    if TSHARK is None:
        pytest.skip("tshark (Debian's package, which make test installs)")
    tshark = str(TSHARK)
    path = cut(CAPTURES / "091-publish-consume.pcap", 120, tmp_path)
    fields = subprocess.run(
        [
            tshark,
            "-r",
            str(path),
            "-T",
            "fields",
            "-e",
            "frame.number",
            "-e",
            "tcp.srcport",
            "-e",
            "frame.len",
            "-e",
            "frame.cap_len",
            "-e",
            "tcp.len",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    theirs = {}
    for line in fields.splitlines():
        number, port, size, kept, payload = line.split("\t")
        if int(kept) < int(size) and int(payload) > 0:
            theirs[int(number)] = "s2c" if port == "5672" else "c2s"
    with open_capture(str(path)) as capture:
        frames = list(Dissector().run(capture))
    mine = {}
    for frame in frames:
        for f in frame.findings:
            if f.code == "tcp.gap":
                _n, lost = gap_lost(f)
                packet = int(f.message.split("cut packet ")[1].split("'")[0])
                mine[packet] = lost
    assert theirs and mine == theirs


def test_the_diagnosis_says_the_snap_length_cut_the_bytes(tmp_path: Path) -> None:
    """Told from bytes lost in transit: the answer is to capture whole packets."""
    path = cut(CAPTURES / "091-publish-consume.pcap", 120, tmp_path)
    result = CliRunner().invoke(main, ["diagnose", "--json", str(path)])
    assert result.exit_code == 0, result.output
    (lost,) = [
        d for d in json.loads(result.stdout)["diagnoses"] if d["code"] == "capture.bytes-lost"
    ]
    assert "snap length cut" in lost["explanation"] and "-s 0" in lost["explanation"]
    assert lost["evidence"] == sorted(set(lost["evidence"]))
    whole = CliRunner().invoke(
        main, ["diagnose", "--json", str(CAPTURES / "091-publish-consume.pcap")]
    )
    assert "capture.bytes-lost" not in whole.stdout


def test_acks_of_deliveries_a_dropped_packet_held_are_no_violation(tmp_path: Path) -> None:
    """The last packet of deliveries before the client's acks is not in the capture (as the
    kernel drops one under load; editcap deletes it). The client's TCP ack of those bytes comes
    with its first basic.ack: a `tcp.ack-unseen` on that frame says the server's bytes were not
    seen, so the acks are counted, not flagged, and the diagnosis blames no one."""
    source = CAPTURES / "091-publish-consume.pcap"
    records = read_json(source)
    first_ack = min(r["packet"] for r in records if r["name"] == "basic.ack")
    last = max(
        r["packet"] for r in records if r["name"] == "basic.deliver" and r["packet"] < first_ack
    )
    dropped = tmp_path / "dropped.pcap"
    assert EDITCAP is not None
    subprocess.run([EDITCAP, str(source), str(dropped), str(last)], check=True)
    result = CliRunner().invoke(main, ["diagnose", "--json", str(dropped)])
    assert result.exit_code == 0, result.output
    diagnoses = json.loads(result.stdout)["diagnoses"]
    found = Counter(d["code"] for d in diagnoses)
    assert found["capture.bytes-lost"] == 1
    assert found["spec.violation"] == 0, found
    lossy = read_json(dropped)
    (lost,) = [d for d in diagnoses if d["code"] == "capture.bytes-lost"]
    first_ack = min(r["frame"] for r in lossy if r["name"] == "basic.ack")
    assert first_ack in lost["evidence"] and "TCP acks showed the loss first" in lost["explanation"]
    assert not [f for r in lossy for f in r.get("findings", []) if f["code"] in MADE_UP]
    (unseen,) = [r for r in lossy for f in r.get("findings", []) if f["code"] == "tcp.ack-unseen"]
    assert "bytes of s2c" in json.dumps(unseen["findings"])
    assert unseen["frame"] <= min(r["frame"] for r in lossy if r["name"] == "basic.ack")
    assert sum(r["name"] == "basic.ack" for r in lossy) == sum(
        r["name"] == "basic.ack" for r in records
    )


def test_no_bytes_are_unseen_in_a_whole_capture() -> None:
    """The warning is about loss: no bundled capture (recorded whole) has one."""
    for name in NAMES:
        assert "tcp.ack-unseen" not in codes(CAPTURES / name), name


def test_a_capture_that_starts_inside_a_message_flags_none_of_its_content(
    tmp_path: Path,
) -> None:
    """tcpdump started while a client was publishing a 100 KB message: the capture's first
    frames are that message's bodies, whose method came before the capture. They are shown as
    bodies, with no finding that they follow no method (editcap -r keeps packets from the
    first body packet on)."""
    source = CAPTURES / "091-large-body.pcap"
    records = read_json(source)
    bodies = [r["packet"] for r in records if r["name"] == "content-body"]
    later = tmp_path / "late.pcap"
    assert EDITCAP is not None
    subprocess.run([EDITCAP, "-r", str(source), str(later), f"{bodies[1]}-100000"], check=True)
    late = read_json(later)
    assert late[0]["name"] == "content-body"
    assert not [f for r in late for f in r.get("findings", []) if f["code"] in MADE_UP]
    # a method after that is checked as ever: the next message's content is its own
    assert [r["name"] for r in late].count("content-header") == [
        r["name"] for r in records if r["packet"] > bodies[1]
    ].count("content-header")


@pytest.mark.parametrize("how", ["dropped", "late"])
def test_a_large_10_message_missing_its_first_transfers_is_no_bad_message(
    how: str, tmp_path: Path
) -> None:
    """10-large-message sends one 300 KB message in many transfers. A packet dropped in the
    middle (editcap deletes it), or a capture started there (editcap -r): the transfers after
    it are the rest of a message whose start is not known. They are counted as it, not read as
    a message (which would be "not a section"), nor as a new delivery reusing its id."""
    source = CAPTURES / "10-large-message.pcap"
    records = read_json(source)
    more = [
        r["packet"]
        for r in records
        if r["name"] == "transfer" and r["fields"].get("more") and r["dir"] == "c2s"
    ]
    middle = more[len(more) // 2]
    out = tmp_path / f"{how}.pcap"
    assert EDITCAP is not None
    args = [str(source), str(out), str(middle)] if how == "dropped" else []
    if how == "late":
        args = ["-r", str(source), str(out), f"{middle}-100000"]
    subprocess.run([EDITCAP, *args], check=True)
    lossy = read_json(out)
    assert not [f for r in lossy for f in r.get("findings", []) if f["code"] in MADE_UP]
    last = [r for r in lossy if r["name"] == "transfer" and not r["fields"].get("more")]
    whole = [r for r in records if r["name"] == "transfer" and not r["fields"].get("more")]
    assert len(last) == len(whole)
    assert last[0]["message"]["truncated"] is True  # its start is not known: not decoded
    # the rest of the message is no new delivery: the links' counts are the whole capture's
    assert deliveries(out) == deliveries(source)


def deliveries(path: Path) -> list[int]:
    result = CliRunner().invoke(main, ["summary", "--json", str(path)])
    assert result.exit_code == 0, result.output
    conns = json.loads(result.stdout)["connections"]
    return [link["deliveries"] for c in conns for s in c["sessions"] for link in s["links"]]


def unsettled_at_end(path: Path) -> list[str]:
    result = CliRunner().invoke(main, ["summary", "--json", str(path)])
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)["findings"]
    return sorted(f["message"] for f in found if f["code"] == "amqp10.unsettled-at-end")


def test_deliveries_whose_settlement_a_dropped_packet_held_are_not_seen_settled(
    tmp_path: Path,
) -> None:
    """10-redelivered: the broker settles the sender's three deliveries in one packet; then
    receiver A detaches with three unsettled. With that packet deleted (editcap), the sender's
    deliveries are unsettled at end too, but bytes were lost after them: the tracker says they
    were not seen settled. Receiver A's came after the hole: its finding reads as before."""
    source = CAPTURES / "10-redelivered.pcap"
    records = read_json(source)
    (settles,) = [r["packet"] for r in records if r["name"] == "disposition" and r["dir"] == "s2c"]
    dropped = tmp_path / "dropped.pcap"
    assert EDITCAP is not None
    subprocess.run([EDITCAP, str(source), str(dropped), str(settles)], check=True)
    (whole,) = unsettled_at_end(source)
    assert whole.startswith("3 deliveries left unsettled on link 'amqpscope-first'")
    lossy = unsettled_at_end(dropped)
    assert whole in lossy  # the link whose deliveries came after the hole: unchanged
    (sender,) = [m for m in lossy if m != whole]
    assert sender.startswith("3 deliveries not seen settled on link 'amqpscope-10-redelivered-")
    assert sender.endswith("when it detached (bytes were lost after the first of them)")
    assert "left unsettled" not in sender
