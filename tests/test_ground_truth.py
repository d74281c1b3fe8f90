"""Each recorded capture against what its scenario did, as the client libraries counted it.

The ground truth (captures/NAME.json, `expect`) was tallied by pika and Proton while the scenario
ran, never read from the capture. Here every count that framing alone can check is checked:
frames by name and direction, connections, and the reader's details (link types, timestamps,
IPv6 endpoints).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from amqpscope.capture.files import open_capture
from amqpscope.dissect import Dissector
from tests.oracle import keylog_for

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
SCENARIOS = sorted(CAPTURES.glob("*.json"))

#: ground-truth key -> (frame name, direction it travels, or None for either)
FRAME_COUNTS: dict[str, tuple[str, str | None]] = {
    "publishes": ("basic.publish", "c2s"),
    "acks": ("basic.ack", "c2s"),
    "nacks": ("basic.nack", "c2s"),
    "rejects": ("basic.reject", "c2s"),
    "returns": ("basic.return", "s2c"),
    "gets": ("basic.get", "c2s"),
    "get_ok": ("basic.get-ok", "s2c"),
    "get_empty": ("basic.get-empty", "s2c"),
    "consumers": ("basic.consume", "c2s"),
    "confirm_selects": ("confirm.select", "c2s"),
    "tx_selects": ("tx.select", "c2s"),
    "tx_commits": ("tx.commit", "c2s"),
    "tx_rollbacks": ("tx.rollback", "c2s"),
    "exchange_declares": ("exchange.declare", "c2s"),
    "exchange_deletes": ("exchange.delete", "c2s"),
    "exchange_binds": ("exchange.bind", "c2s"),
    "exchange_unbinds": ("exchange.unbind", "c2s"),
    "queue_declares": ("queue.declare", "c2s"),
    "queue_deletes": ("queue.delete", "c2s"),
    "queue_binds": ("queue.bind", "c2s"),
    "queue_unbinds": ("queue.unbind", "c2s"),
    "queue_purges": ("queue.purge", "c2s"),
    "connection_closes": ("connection.close", "c2s"),
    "heartbeats_sent_by_client": ("heartbeat", "c2s"),
    "heartbeats_received_by_client": ("heartbeat", "s2c"),
    "connection_starts_received": ("connection.start", "s2c"),
    "sessions_begun": ("begin", "c2s"),
    "attaches": ("attach", "c2s"),
    "coordinator_attaches": ("attach", "c2s"),
}
#: counts of messages that equal transfer frames only when no message spans several frames
TRANSFER_COUNTS = {"transfers_sent": "c2s", "transfers_received": "s2c"}


def scenario(meta_path: Path) -> tuple[dict, list]:
    meta = json.loads(meta_path.read_text())
    path = meta_path.parent / meta["file"]
    with open_capture(str(path)) as capture:
        frames = list(Dissector(keylog=keylog_for(path)).run(capture))
    return meta, frames


def check_counts(meta: dict, frames: list) -> int:
    """Assert every framing-level count of the scenario's ground truth; return how many."""
    expect = meta["expect"]
    seen = Counter((f.name, f.direction) for f in frames)
    checked = 0
    for key, (name, direction) in FRAME_COUNTS.items():
        if isinstance(expect.get(key), int) and not isinstance(expect[key], bool):
            got = sum(n for (fname, d), n in seen.items() if fname == name and direction in (d,))
            assert got == expect[key], f"{key}: {name} {direction}: {got} != {expect[key]}"
            checked += 1
    if "local_max_frame_size" not in expect:
        for key, direction in TRANSFER_COUNTS.items():
            if isinstance(expect.get(key), int):
                assert seen[("transfer", direction)] == expect[key], key
                checked += 1
    if isinstance(expect.get("deliveries"), int):
        assert seen[("basic.deliver", "s2c")] == expect["deliveries"]
        checked += 1
    if isinstance(expect.get("channel_errors"), list):
        assert seen[("channel.close", "s2c")] == len(expect["channel_errors"])
        checked += 1
    if "delivery_tags" in expect:
        assert seen[("basic.deliver", "s2c")] == len(expect["delivery_tags"])
        checked += 1
    if "sasl_outcome" in expect:
        assert seen[("sasl-outcome", "s2c")] == 1 and seen[("sasl-init", "c2s")] == 1
        checked += 1
    connections = expect.get("connections", expect.get("connections_opened"))
    if "amqp_connections" in expect:
        connections = expect["amqp_connections"]
    if connections is not None:
        assert len({f.conn for f in frames}) == connections
        checked += 1
    return checked


@pytest.mark.parametrize("meta_path", SCENARIOS, ids=lambda p: p.stem)
def test_frame_counts_match_the_scenario(meta_path: Path) -> None:
    meta, frames = scenario(meta_path)
    assert check_counts(meta, frames), f"nothing in {meta_path.name} was checked"


def test_large_messages_arrive_whole_in_frames() -> None:
    meta, frames = scenario(CAPTURES / "091-large-body.json")
    bodies = [f for f in frames if f.name == "content-body" and f.direction == "c2s"]
    payload = sum(len(f.data) - 8 for f in bodies)
    assert payload == meta["expect"]["body_size"]
    assert all(len(f.data) <= meta["expect"]["negotiated_frame_max"] for f in frames)
    meta, frames = scenario(CAPTURES / "10-large-message.json")
    limit = meta["expect"]["local_max_frame_size"]
    transfers = [f for f in frames if f.name == "transfer" and f.direction == "c2s"]
    assert len(transfers) > meta["expect"]["body_size"] // limit
    assert all(len(f.data) <= limit for f in frames)


def test_the_peer_to_peer_capture_on_5673_is_found_without_options() -> None:
    meta, frames = scenario(CAPTURES / "10-peer-to-peer.json")
    assert {f.dst.rsplit(":", 1)[1] for f in frames if f.direction == "c2s"} == {"5673"}
    assert Counter(f.name for f in frames)["transfer"] == meta["expect"]["transfers_sent"]


def test_mid_stream_capture_yields_the_frames_after_the_first_boundary() -> None:
    _meta, frames = scenario(CAPTURES / "mid-stream.json")
    assert not any(f.kind == "protocol-header" for f in frames)
    assert frames and frames[0].version == "0-9-1"
    # roles come from the well-known port when the handshake was not captured
    assert all(f.src.endswith(":5672") == (f.direction == "s2c") for f in frames)


@pytest.mark.parametrize(
    ("name", "linktype", "nanosecond"),
    [
        ("linux-cooked.pcap", 276, False),
        ("linux-cooked-v1.pcap", 113, False),
        ("pcapng.pcapng", 1, True),  # dumpcap writes if_tsresol=9
        ("nanosecond.pcap", 1, True),
        ("ipv6.pcap", 1, False),
    ],
)
def test_reader_captures(name: str, linktype: int, nanosecond: bool) -> None:
    with open_capture(str(CAPTURES / name)) as capture:
        assert capture.linktypes[0] == linktype
        assert capture.nanosecond == nanosecond
        packets = list(capture)
    with open_capture(str(CAPTURES / name)) as capture:
        frames = list(Dissector().run(capture))
    assert Counter(f.name for f in frames)["basic.publish"] >= 1
    times = {p.number: p.ts for p in packets}
    assert all(f.ts == times[f.packet] for f in frames)
    if name == "ipv6.pcap":
        assert all(f.src.startswith("[::1]:") for f in frames)
