"""A regular pcap file is read in blocks (`CaptureReader._iter_pcap_blocks`), anything else a
record at a time (`_iter_pcap`): both give the same packets and end the same way, the file
whole, cut anywhere, with a record claiming too much, with stray bytes after the last record,
in either byte order and at nanosecond resolution."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from amqpscope.capture.files import CaptureReader

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
SOURCE = CAPTURES / "091-get.pcap"


def _read(path: Path, blocks: bool, monkeypatch: pytest.MonkeyPatch) -> tuple:
    with monkeypatch.context() as m:
        if not blocks:
            m.setattr(CaptureReader, "_regular_file", lambda self: False)
        with CaptureReader(path) as reader:
            assert (reader._it.__name__ == "_iter_pcap_blocks") == blocks  # type: ignore[attr-defined]
            packets = [(p.number, p.ts, p.data, p.wirelen, p.linktype) for p in reader]
            return packets, [(f.code, f.message, f.packet) for f in reader.findings]


def _variants(tmp: Path) -> list[Path]:
    data = SOURCE.read_bytes()
    out = []
    for cut in (24, 30, 40, 100, 200, len(data) - 20, len(data) - 5, len(data) - 1, len(data)):
        out.append(tmp / f"cut{cut}.pcap")
        out[-1].write_bytes(data[:cut])
    huge = bytearray(data)
    huge[32:36] = b"\xff\xff\xff\x0f"  # the first record's captured length
    out.append(tmp / "huge.pcap")
    out[-1].write_bytes(bytes(huge))
    out.append(tmp / "tail.pcap")
    out[-1].write_bytes(data + b"\x01\x02\x03")
    # big-endian, and nanosecond timestamps (past 2**53 as integers)
    magic, major, minor, zone, sigfigs, snaplen, link = struct.unpack("<IHHiIII", data[:24])
    big = [struct.pack(">IHHiIII", magic, major, minor, zone, sigfigs, snaplen, link)]
    nano = [struct.pack("<IHHiIII", 0xA1B23C4D, major, minor, zone, sigfigs, snaplen, link)]
    pos = 24
    while pos + 16 <= len(data):
        sec, frac, caplen, wirelen = struct.unpack_from("<IIII", data, pos)
        body = data[pos + 16 : pos + 16 + caplen]
        big.append(struct.pack(">IIII", sec, frac, caplen, wirelen) + body)
        nano.append(struct.pack("<IIII", sec, frac * 1000 + 7, caplen, wirelen) + body)
        pos += 16 + caplen
    for name, parts in (("big.pcap", big), ("nano.pcap", nano)):
        out.append(tmp / name)
        out[-1].write_bytes(b"".join(parts))
    return out


def test_blocks_read_as_records_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for path in _variants(tmp_path):
        by_records = _read(path, False, monkeypatch)
        assert _read(path, True, monkeypatch) == by_records, path.name
    # the variants did reach the ends they are for
    assert _read(tmp_path / "cut100.pcap", True, monkeypatch)[1][0][0] == "capture.truncated"
    assert _read(tmp_path / "huge.pcap", True, monkeypatch)[1][0][0] == "capture.damaged"
    assert _read(tmp_path / "tail.pcap", True, monkeypatch)[1]
    assert len(_read(tmp_path / "nano.pcap", True, monkeypatch)[0]) > 10
