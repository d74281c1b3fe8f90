"""Mirrored traffic in a tunnel is decoded as if captured itself.

Cloud and switch mirroring deliver copies of packets inside a tunnel: AWS Traffic Mirroring and
Azure's virtual network TAP in VXLAN, AWS's Gateway Load Balancer in Geneve, a switch's remote
SPAN in GRE/ERSPAN. A capture taken at the mirror's collector holds only those tunnels. Here a
bundled capture is wrapped packet for packet in each tunnel by scapy's own layers (VXLAN,
Geneve, GRE with and without a key, ERSPAN II and III, and VXLAN over IPv6); amqpscope must give
the frames it gives for the capture itself, and tshark (which opens these tunnels by default)
must find the same AMQP frames in the same packets.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from amqpscope.cli import main
from tests.oracle import tshark_frames, tshark_or_skip

scapy_all = pytest.importorskip(
    "scapy.all", reason="scapy (a dependency of amqpscope: make test installs it)"
)
from scapy.contrib.erspan import ERSPAN_II, ERSPAN_III  # noqa: E402
from scapy.contrib.geneve import GENEVE  # noqa: E402
from scapy.layers.inet import GRE, IP, UDP  # noqa: E402
from scapy.layers.inet6 import IPv6  # noqa: E402
from scapy.layers.l2 import Ether  # noqa: E402
from scapy.layers.vxlan import VXLAN  # noqa: E402

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
SOURCES = ("091-publish-consume.pcap", "10-send-receive.pcap")


def _outer4() -> Any:
    return Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(
        src="10.9.0.1", dst="10.9.0.2"
    )


def _outer6() -> Any:
    return Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IPv6(
        src="fd00::1", dst="fd00::2"
    )


#: tunnel -> how it wraps one mirrored Ethernet frame
TUNNELS: dict[str, Callable[[Any], Any]] = {
    "vxlan": lambda p: _outer4() / UDP(sport=40000, dport=4789) / VXLAN(vni=42) / p,
    "vxlan-ipv6": lambda p: _outer6() / UDP(sport=40000, dport=4789) / VXLAN(vni=42) / p,
    "geneve": lambda p: _outer4() / UDP(sport=40000, dport=6081) / GENEVE(vni=7, proto=0x6558) / p,
    "gre-ip": lambda p: _outer4() / GRE(proto=0x0800) / p[IP],
    "gre-ethernet-keyed": lambda p: _outer4() / GRE(key_present=1, key=5, proto=0x6558) / p,
    "erspan-ii": lambda p: (
        _outer4()
        / GRE(seqnum_present=1, sequence_number=1, proto=0x88BE)
        / ERSPAN_II(session_id=1)
        / p
    ),
    "erspan-iii": lambda p: (
        _outer4()
        / GRE(seqnum_present=1, sequence_number=1, proto=0x22EB)
        / ERSPAN_III(session_id=1)
        / p
    ),
}


def wrapped(source: str, tunnel: str, where: Path) -> Path:
    packets = scapy_all.rdpcap(str(CAPTURES / source))
    out = []
    for packet in packets:
        outer = TUNNELS[tunnel](packet)
        outer.time = packet.time
        out.append(outer)
    path = where / f"{tunnel}-{source}"
    scapy_all.wrpcap(str(path), out)
    return path


def frames(path: Path) -> list[dict[str, Any]]:
    result = CliRunner().invoke(main, ["read", "--json", str(path)])
    assert result.exit_code == 0, result.output
    keep = ("number", "packet", "name", "channel", "direction", "fields", "findings")
    return [{k: r.get(k) for k in keep} for r in map(json.loads, result.stdout.splitlines())]


def endpoints(path: Path) -> set[tuple[str, str]]:
    result = CliRunner().invoke(main, ["read", "--json", str(path)])
    return {(r["src"], r["dst"]) for r in map(json.loads, result.stdout.splitlines())}


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("tunnel", sorted(TUNNELS))
def test_a_tunnel_gives_the_frames_of_the_capture_itself(
    tunnel: str, source: str, tmp_path: Path
) -> None:
    path = wrapped(source, tunnel, tmp_path)
    mine, plain = frames(path), frames(CAPTURES / source)
    assert mine and mine == plain
    assert endpoints(path) == endpoints(CAPTURES / source)  # the mirrored packets' own
    tshark_or_skip()
    assert tshark_frames(str(path)) == tshark_frames(str(CAPTURES / source))


def test_a_udp_datagram_to_another_port_is_no_tunnel(tmp_path: Path) -> None:
    """The same bytes to UDP 4790 are not opened: nothing is read from them."""
    packets = scapy_all.rdpcap(str(CAPTURES / SOURCES[0]))
    out = [_outer4() / UDP(sport=40000, dport=4790) / VXLAN(vni=42) / p for p in packets]
    path = tmp_path / "not-vxlan.pcap"
    scapy_all.wrpcap(str(path), out)
    assert frames(path) == []


def test_tunnels_in_tunnels_end_at_a_bound(tmp_path: Path) -> None:
    """GRE in GRE in ... 40 deep (960 bytes of outer headers): no recursion without end; the
    packet is simply not read."""
    inner = scapy_all.rdpcap(str(CAPTURES / SOURCES[0]))[0][IP]
    for _ in range(40):
        inner = IP(src="10.9.0.1", dst="10.9.0.2") / GRE(proto=0x0800) / inner
    path = tmp_path / "deep.pcap"
    scapy_all.wrpcap(str(path), [Ether() / inner])
    result = CliRunner().invoke(main, ["read", "--json", str(path)])
    assert result.exit_code == 0 and result.stdout == ""


def test_the_planners_light_scan_leaves_tunnels_to_the_decoder(tmp_path: Path) -> None:
    """The Spark planner's light scan reads TCP over IP alone: a file with tunnels falls back
    to the full scan (the segment decoder's), whose plan is the capture's own."""
    from amqpscope.spark import lightscan, plan

    source = CAPTURES / SOURCES[0]
    path = wrapped(SOURCES[0], "vxlan", tmp_path)
    assert lightscan.scan(str(path), str(path), str(path)) is None
    mine = plan.full_scan(str(path), str(path), str(path))
    theirs = plan.full_scan(str(source), str(source), str(source))
    assert (mine.first_ts, mine.parts, mine.error) == (theirs.first_ts, theirs.parts, None)
