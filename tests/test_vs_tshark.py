"""Every bundled capture, framed by amqpscope and by Wireshark's dissector: the same frames.

Where Wireshark is wrong or needs help, a test here shows it (and the README says so):
- it does not dissect the 0-9-1 protocol header (`AMQP 0 0 9 1`) as an AMQP PDU;
- it finds AMQP on port 5672 only: other ports need Decode As (`-d tcp.port==N,amqp`);
- it names exchange.unbind-ok (class 40, method 51, a RabbitMQ extension) "Unknown";
- forced onto a non-AMQP port with Decode As, it dissects other protocols as AMQP.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from amqpscope.capture.files import open_capture
from amqpscope.dissect import Dissector
from tests.oracle import TSHARK, keylog_for, tshark_frames, visible_to_wireshark

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
FILES = sorted(p for p in CAPTURES.iterdir() if p.suffix in (".pcap", ".pcapng", ".gz"))

pytestmark = pytest.mark.tshark


def truth(path: Path) -> dict:
    meta = path.with_name(path.name.split(".")[0] + ".json")
    return json.loads(meta.read_text()) if meta.exists() else {}


def amqp_ports(path: Path) -> tuple[int, ...]:
    """The ports the scenario spoke AMQP on (none for the non-AMQP capture)."""
    meta = truth(path)
    if meta.get("protocol") == "none":
        return ()
    port = meta.get("port", 5672)
    return tuple(port) if isinstance(port, list) else (int(port),)


#: frames Wireshark 4.0 misnames: its name -> (class id, method id) the bytes really carry
WIRESHARK_MISNAMES = {"exchange.unknown": (40, 51)}


def as_wireshark_names_it(frame) -> str:  # type: ignore[no-untyped-def]
    """Our frame's name as Wireshark spells it, where Wireshark is known to be wrong (checked
    against the frame's raw class and method ids, not our tables)."""
    for wrong, ids in WIRESHARK_MISNAMES.items():
        if frame.kind == "method" and struct.unpack_from(">HH", frame.data, 7) == ids:
            return wrong
    return frame.name


def ours(path: Path) -> list:
    with open_capture(str(path)) as capture:
        return visible_to_wireshark(list(Dissector(keylog=keylog_for(path)).run(capture)))


def test_there_are_captures() -> None:
    assert len(FILES) >= 20, "captures/ should hold the recorded scenarios"


@pytest.mark.skipif(TSHARK is None, reason="tshark is not installed (make test installs it)")
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_frames_equal_wiresharks(path: Path) -> None:
    decode_as = tuple(p for p in amqp_ports(path) if p != 5672)
    theirs = tshark_frames(str(path), decode_as)
    mine = [(f.packet, as_wireshark_names_it(f)) for f in ours(path)]
    # Wireshark skips some 0-9-1 protocol headers (see the test below); nothing else may differ,
    # frame by frame, in the packet that completes each frame.
    missed = Counter(mine) - Counter(theirs)
    assert Counter(theirs) - Counter(mine) == Counter()
    assert all(name == "protocol-header" for _, name in missed), missed
    assert [m for m in mine if m in set(theirs)] == theirs


@pytest.mark.skipif(TSHARK is None, reason="tshark is not installed (make test installs it)")
def test_wireshark_does_not_dissect_a_091_clients_protocol_header() -> None:
    """Wireshark 4.0 takes `AMQP 0 0 9 1` at the start of a connection for an unknown version
    and shows the packet as bare TCP; amqpscope names it."""
    path = CAPTURES / "091-publish-consume.pcap"
    headers = [f for f in ours(path) if f.kind == "protocol-header"]
    assert headers and all(f.data == b"AMQP\x00\x00\x09\x01" for f in headers)
    packets = {f.packet for f in headers}
    assert not packets & {number for number, _ in tshark_frames(str(path))}


@pytest.mark.skipif(TSHARK is None, reason="tshark is not installed (make test installs it)")
def test_port_5673_needs_decode_as_in_wireshark_but_not_here() -> None:
    path = CAPTURES / "10-peer-to-peer.pcap"
    assert tshark_frames(str(path)) == []
    frames = ours(path)
    assert len(frames) == len(tshark_frames(str(path), (5673,))) + 0 > 10
    result = subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", "read", "--json", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    # `read --json` also writes the records Wireshark has no AMQP for: how TCP ended
    transport = [f for f in Dissector().run(open_capture(str(path))) if f.kind == "transport"]
    assert len(result.stdout.splitlines()) == len(frames) + len(transport)


@pytest.mark.skipif(TSHARK is None, reason="tshark is not installed (make test installs it)")
def test_wireshark_calls_exchange_unbind_ok_unknown() -> None:
    path = CAPTURES / "091-exchanges.pcap"
    frames = [f for f in ours(path) if f.name == "exchange.unbind-ok"]
    assert frames and all(struct.unpack_from(">HH", f.data, 7) == (40, 51) for f in frames)
    theirs = dict(tshark_frames(str(path)))
    assert {theirs[f.packet] for f in frames} == {"exchange.unknown"}


@pytest.mark.skipif(TSHARK is None, reason="tshark is not installed (make test installs it)")
def test_non_amqp_is_never_claimed_though_decode_as_makes_wireshark_try() -> None:
    path = CAPTURES / "non-amqp.pcap"
    assert ours(path) == []
    forced = tshark_frames(str(path), tuple(truth(path)["port"]))
    assert forced, "Decode As should have made Wireshark dissect something as AMQP"
