"""The planner's light scan (`spark/lightscan.py`) gives the scan the reassembler gives
(`plan.full_scan`), or nothing (then the full scan runs): on every bundled pcap, whole and cut
into rotated pieces (connections open at a piece's start or end, the edges the plan stitches)."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from amqpscope.spark import lightscan, plan

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
PCAPS = sorted(
    p
    for p in CAPTURES.glob("*.pcap")
    if p.read_bytes()[:4] in (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4")
)


def _records(path: Path) -> tuple[bytes, list[bytes]]:
    """A little-endian or big-endian microsecond pcap's header and its records, as bytes."""
    data = path.read_bytes()
    endian = "<" if data[:4] == b"\xd4\xc3\xb2\xa1" else ">"
    out, off = [], 24
    while off + 16 <= len(data):
        caplen = struct.unpack_from(endian + "I", data, off + 8)[0]
        out.append(data[off : off + 16 + caplen])
        off += 16 + caplen
    return data[:24], out


def _pieces(path: Path, tmp: Path, n: int) -> list[Path]:
    """`path` cut into `n` files of consecutive packets, as a rotating capture writes them."""
    header, records = _records(path)
    out = []
    for i in range(n):
        piece = tmp / f"{path.stem}-{n}-{i}.pcap"
        piece.write_bytes(
            header + b"".join(records[i * len(records) // n : (i + 1) * len(records) // n])
        )
        out.append(piece)
    return out


def _as_json(found: plan.Scan) -> tuple[object, ...]:
    return found.first_ts, found.error, [part.to_json() for part in found.parts]


def test_the_light_scan_is_the_full_scan_or_nothing(tmp_path: Path) -> None:
    followed = 0
    edges = 0
    for capture in PCAPS:
        for path in [capture, *_pieces(capture, tmp_path, 3), *_pieces(capture, tmp_path, 7)]:
            light = lightscan.scan(str(path), str(path), str(path))
            if light is None:
                continue
            followed += 1
            edges += len(light.parts)
            assert _as_json(light) == _as_json(plan.full_scan(str(path), str(path), str(path))), (
                path
            )
    # most of them are clean enough, and the cuts have edges (connections open at either end)
    assert followed > 10 * len(PCAPS) // 2
    assert edges > len(PCAPS)


def _relinked(path: Path, out: Path, linktype: int) -> Path:
    """An Ethernet pcap's packets behind Linux cooked headers (113: SLL, 276: SLL2, what
    `tcpdump -i any` writes)."""
    header, records = _records(path)
    endian = "<" if header[:4] == b"\xd4\xc3\xb2\xa1" else ">"
    body = []
    for record in records:
        sec, frac, _, wirelen = struct.unpack(endian + "IIII", record[:16])
        data = record[16:]
        kind = data[12:14]
        if linktype == 113:  # packet type, ARPHRD_ETHER, address length, address, protocol
            link = b"\x00\x00\x00\x01\x00\x06" + data[6:12] + b"\x00\x00" + kind
        else:  # protocol, reserved, interface index, ARPHRD_ETHER, type, length, address
            link = kind + b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01\x00\x06" + data[6:12]
            link += b"\x00\x00"
        grown = len(link) - 14
        body.append(struct.pack(endian + "IIII", sec, frac, len(data) + grown, wirelen + grown))
        body.append(link + data[14:])
    out.write_bytes(header[:20] + struct.pack(endian + "I", linktype) + b"".join(body))
    return out


@pytest.mark.parametrize("linktype", [113, 276])
def test_linux_cooked_captures_are_scanned_the_light_way(tmp_path: Path, linktype: int) -> None:
    source = _relinked(CAPTURES / "091-qos-prefetch.pcap", tmp_path / "cooked.pcap", linktype)
    edges = 0
    for path in [source, *_pieces(source, tmp_path, 3)]:
        light = lightscan.scan(str(path), str(path), str(path))
        assert light is not None, path
        assert _as_json(light) == _as_json(plan.full_scan(str(path), str(path), str(path))), path
        edges += len(light.parts)
    assert edges >= 3  # each piece has its cut connection


@pytest.mark.parametrize("change", ["retransmitted", "reordered", "cut-record", "pcapng"])
def test_what_it_does_not_follow_is_scanned_the_full_way(tmp_path: Path, change: str) -> None:
    source = CAPTURES / "091-publish-consume.pcap"
    header, records = _records(source)
    data = [r for r in records if len(r) > 16 + 14 + 20 + 20 + 8]  # segments with AMQP bytes
    at = records.index(data[len(data) // 2])
    if change == "retransmitted":
        records.insert(at + 1, records[at])
    elif change == "reordered":  # two data segments of one direction, the later first
        flow = records[at][16 + 26 : 16 + 36]  # IPv4 source and destination, TCP ports
        later = next(r for r in data if r is not records[at] and r[16 + 26 : 16 + 36] == flow
                     and records.index(r) > at)  # fmt: skip
        there = records.index(later)
        records[at], records[there] = records[there], records[at]
    path = tmp_path / "changed.pcap"
    body = header + b"".join(records)
    if change == "cut-record":
        body = body[:-3]
    path.write_bytes(body)
    if change == "pcapng":
        path = CAPTURES / next(p.name for p in CAPTURES.glob("*.pcapng"))
    assert lightscan.scan(str(path), str(path), str(path)) is None
    # and the planner's scan is the reassembler's
    assert _as_json(plan._scan(str(path), str(path), str(path))) == _as_json(
        plan.full_scan(str(path), str(path), str(path))
    )


def test_files_larger_than_a_block_read_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan reads the file in blocks (not mapped: a file cut while it is read must not
    kill the planner with SIGBUS): with blocks smaller than a record, every record crosses
    a block's end, and the scans are the same."""
    whole = {}
    for capture in PCAPS[:6]:
        whole[capture] = lightscan.scan(str(capture), str(capture), str(capture))
    monkeypatch.setattr(lightscan, "_BLOCK", 97)
    for capture, found in whole.items():
        small = lightscan.scan(str(capture), str(capture), str(capture))
        assert (small is None) == (found is None), capture
        if found is not None and small is not None:
            assert _as_json(small) == _as_json(found), capture
    assert any(found is not None for found in whole.values())


def test_the_planning_worker_loads_no_decoder(tmp_path: Path) -> None:
    """Spark plans a data source read in a Python process of its own (`plan_data_source_read`)
    on a session's first query: the reader made and its partitions planned over clean pcaps
    (light scans) load neither the decoder nor the job nor, of ours, pyarrow (Spark's planner
    loads it itself), which took ~0.17 CPU s of that process. A fresh interpreter, as Spark's
    worker is."""
    pytest.importorskip(
        "pyspark", reason="needs pyspark (the spark extra; make install installs it)"
    )
    import subprocess
    import sys

    pieces = _pieces(CAPTURES / "091-qos-prefetch.pcap", tmp_path, 2)
    script = (
        "import sys\n"
        "from amqpscope.spark.datasource import AmqpReader\n"
        f"tasks = AmqpReader({{'path': {str(tmp_path)!r}}}).partitions()\n"
        "heavy = ('amqpscope.dissect', 'amqpscope.spark.rows', 'amqpscope.spark.spark',"
        " 'pyarrow', 'urllib.request')\n"
        "print(len(tasks), [m for m in heavy if m in sys.modules])\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}  # no scan kept by another run
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
    ).stdout.split(" ", 1)
    assert int(out[0]) >= len(pieces)
    assert out[1].strip() == "[]"
