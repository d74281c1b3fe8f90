"""amqpscope.capture.files: capture files (hand-built bytes) in, RawPackets and findings out."""

from __future__ import annotations

import gzip
import logging
import os
import shutil
import struct
import subprocess
import zlib
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqpscope.capture.files import CaptureError, CaptureReader, Interface, open_capture
from amqpscope.capture.packet import RawPacket
from tests.oracle import missing

# ---------------------------------------------------------------------------------------------
# Builders: pcap and pcapng, byte by byte.

USEC = 0xA1B2C3D4
NSEC = 0xA1B23C4D


def pcap(records=(), *, endian="<", nano=False, linktype=1, snaplen=262144) -> bytes:
    """records: (sec, fraction, data[, wirelen])."""
    out = struct.pack(endian + "IHHiIII", NSEC if nano else USEC, 2, 4, 0, 0, snaplen, linktype)
    for rec in records:
        sec, frac, data = rec[:3]
        wirelen = rec[3] if len(rec) > 3 else len(data)
        out += struct.pack(endian + "IIII", sec, frac, len(data), wirelen) + data
    return out


def pad4(b: bytes) -> bytes:
    return b + b"\0" * (-len(b) % 4)


def block(btype: int, body: bytes, e: str = "<") -> bytes:
    body = pad4(body)
    n = 12 + len(body)
    return struct.pack(e + "II", btype, n) + body + struct.pack(e + "I", n)


def option(code: int, value: bytes, e: str = "<") -> bytes:
    return struct.pack(e + "HH", code, len(value)) + pad4(value)


def shb(e: str = "<", options: bytes = b"") -> bytes:
    body = struct.pack(e + "IHHq", 0x1A2B3C4D, 1, 0, -1) + options
    return block(0x0A0D0D0A, body, e)


def idb(linktype: int, *, snaplen=0, tsresol=None, tsoffset=None, name=None, e="<") -> bytes:
    opts = b""
    if tsresol is not None:
        opts += option(9, bytes([tsresol]), e)
    if tsoffset is not None:
        opts += option(14, struct.pack(e + "q", tsoffset), e)
    if name is not None:
        opts += option(2, name.encode(), e)
    if opts:
        opts += option(0, b"", e)
    return block(1, struct.pack(e + "HHI", linktype, 0, snaplen) + opts, e)


def epb(intid: int, ts: int, data: bytes, wirelen=None, e="<", options=b"") -> bytes:
    wirelen = len(data) if wirelen is None else wirelen
    head = struct.pack(e + "IIIII", intid, ts >> 32, ts & 0xFFFFFFFF, len(data), wirelen)
    return block(6, head + pad4(data) + options, e)


def spb(data: bytes, wirelen=None, e="<") -> bytes:
    return block(3, struct.pack(e + "I", len(data) if wirelen is None else wirelen) + data, e)


def obsolete_pb(intid: int, ts: int, data: bytes, e="<") -> bytes:
    head = struct.pack(e + "HHIIII", intid, 0, ts >> 32, ts & 0xFFFFFFFF, len(data), len(data))
    return block(2, head + data, e)


def isb(intid: int, e="<") -> bytes:  # Interface Statistics Block: not a packet
    return block(5, struct.pack(e + "III", intid, 0, 0), e)


def exact(units: int, per_second: int) -> float:
    """The correctly rounded float of units / per_second."""
    return float(Fraction(units, per_second))


def write(tmp_path: Path, data: bytes, name: str = "c.pcap") -> str:
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


def read_all(path: str) -> tuple[list[RawPacket], CaptureReader]:
    with open_capture(path) as r:
        return list(r), r


def codes(reader: CaptureReader) -> list[str]:
    return [f.code for f in reader.findings]


T0 = 1_700_000_000

# ---------------------------------------------------------------------------------------------
# pcap


@pytest.mark.parametrize("endian", ["<", ">"])
@pytest.mark.parametrize("nano", [False, True])
def test_pcap_byte_orders_and_resolutions(tmp_path, endian, nano):
    frac = 123_456_789 if nano else 123_456
    units = 10**9 if nano else 10**6
    recs = [(T0, frac, b"\x01\x02\x03"), (T0 + 1, units - 1, b"", 60), (T0 + 2, 0, b"xyz" * 100)]
    pkts, r = read_all(write(tmp_path, pcap(recs, endian=endian, nano=nano, linktype=113)))
    assert r.format == "pcap"
    assert not r.compressed
    assert r.ts_resolution == units
    assert r.nanosecond is nano
    assert r.linktypes == [113]
    assert r.interfaces == [Interface(0, 113, 262144, units)]
    assert r.snaplen == 262144
    assert r.packets == 3
    assert pkts == [
        RawPacket(1, exact(T0 * units + frac, units), 113, b"\x01\x02\x03", 3, 0),
        RawPacket(2, exact((T0 + 1) * units + units - 1, units), 113, b"", 60, 0),
        RawPacket(3, float(T0 + 2), 113, b"xyz" * 100, 300, 0),
    ]
    # one summary for the packet cut by the snap length, not one per packet
    assert [(f.code, f.packet) for f in r.findings] == [("capture.snaplen", 2)]


def test_pcap_header_only_is_an_empty_capture(tmp_path):
    pkts, r = read_all(write(tmp_path, pcap()))
    assert pkts == []
    assert r.findings == []


def test_pcap_linktype_fcs_bits_are_masked(tmp_path):
    # the top bits of the link type field carry FCS information (pcap spec), not the link type
    pkts, r = read_all(write(tmp_path, pcap([(T0, 0, b"a")], linktype=0x14000000 | 1)))
    assert r.linktypes == [1]
    assert pkts[0].linktype == 1


@settings(max_examples=300)
@given(sec=st.integers(0, 2**32 - 1), frac=st.integers(0, 10**9 - 1), nano=st.booleans())
def test_pcap_timestamps_are_exact(tmp_path_factory, sec, frac, nano):
    units = 10**9 if nano else 10**6
    frac %= units
    path = write(tmp_path_factory.mktemp("ts"), pcap([(sec, frac, b"")], nano=nano))
    (pkt,), _ = read_all(path)
    assert pkt.ts == exact(sec * units + frac, units)


CUTS = {
    "in the record header": 24 + 16 + 5 + 10,
    "in the packet data": 24 + 16 + 5 + 16 + 3,
}


@pytest.mark.parametrize("where", sorted(CUTS))
@pytest.mark.parametrize("compress", [False, True])
def test_pcap_truncated_last_record(tmp_path, where, compress, caplog):
    whole = pcap([(T0, 1, b"first"), (T0, 2, b"second")])
    cut = whole[: CUTS[where]]
    if compress:
        cut = gzip.compress(cut)
    with caplog.at_level(logging.WARNING):
        pkts, r = read_all(write(tmp_path, cut))
    assert [p.data for p in pkts] == [b"first"]
    assert [(f.code, f.packet) for f in r.findings] == [("capture.truncated", 1)]
    assert "offset 45" in r.findings[0].message
    assert not [rec for rec in caplog.records if rec.name.startswith("scapy")]


def test_pcap_cut_in_the_first_record(tmp_path):
    pkts, r = read_all(write(tmp_path, pcap([(T0, 1, b"first")])[:30]))
    assert pkts == []
    assert [(f.code, f.packet) for f in r.findings] == [("capture.truncated", None)]


def test_pcap_record_larger_than_any_packet_is_damage(tmp_path):
    data = pcap([(T0, 0, b"ok")]) + struct.pack("<IIII", T0, 0, 1 << 30, 1 << 30) + b"x" * 100
    pkts, r = read_all(write(tmp_path, data))
    assert [p.data for p in pkts] == [b"ok"]
    assert codes(r) == ["capture.damaged"]


@pytest.mark.parametrize("size", [1, 3, 4, 10, 23])
def test_pcap_file_header_cut_short_is_an_error(tmp_path, size):
    path = write(tmp_path, pcap()[:size])
    with pytest.raises(CaptureError) as err:
        open_capture(path)
    assert path in str(err.value)
    assert "\n" not in str(err.value)


# ---------------------------------------------------------------------------------------------
# pcapng


def two_interfaces(e: str = "<") -> bytes:
    return (
        shb(e)
        + idb(1, snaplen=65535, name="eth0", e=e)  # default resolution: microseconds
        + idb(101, tsresol=9, e=e)  # nanoseconds, raw IP
        + idb(113, tsresol=0x80 | 20, tsoffset=-5, e=e)  # 2**-20 s, shifted 5 s back
        + epb(0, T0 * 10**6 + 999_999, b"eth", e=e)
        + isb(0, e)
        + epb(1, T0 * 10**9 + 123_456_789, b"raw ip", e=e, options=option(1, b"hi", e))
        + epb(2, (T0 << 20) + 3, b"sll", wirelen=100, e=e)
        + epb(0, (T0 + 1) * 10**6, b"again", e=e)
    )


@pytest.mark.parametrize("endian", ["<", ">"])
def test_pcapng_interfaces_with_their_own_linktype_and_resolution(tmp_path, endian):
    pkts, r = read_all(write(tmp_path, two_interfaces(endian), "c.pcapng"))
    assert r.format == "pcapng"
    assert r.linktypes == [1, 101, 113]
    assert r.interfaces == [
        Interface(0, 1, 65535, 10**6, 0, "eth0"),
        Interface(1, 101, 0, 10**9),
        Interface(2, 113, 0, 2**20, -5),
    ]
    assert r.ts_resolution == 10**6
    assert r.nanosecond
    assert r.snaplen == 65535
    assert pkts == [
        RawPacket(1, exact(T0 * 10**6 + 999_999, 10**6), 1, b"eth", 3, 0),
        RawPacket(2, exact(T0 * 10**9 + 123_456_789, 10**9), 101, b"raw ip", 6, 1),
        RawPacket(3, exact(((T0 - 5) << 20) + 3, 2**20), 113, b"sll", 100, 2),
        RawPacket(4, float(T0 + 1), 1, b"again", 5, 0),
    ]
    assert [(f.code, f.packet) for f in r.findings] == [("capture.snaplen", 3)]


def test_pcapng_interfaces_are_known_once_opened(tmp_path):
    with open_capture(write(tmp_path, two_interfaces(), "c.pcapng")) as r:
        assert r.linktypes == [1, 101, 113]
        assert next(iter(r)).number == 1


def test_pcapng_simple_packet_blocks(tmp_path):
    data = (
        shb()
        + idb(1)  # snap length 0: no limit
        + spb(b"before any timestamp")
        + epb(0, T0 * 10**6 + 5, b"timed")
        + spb(b"abcde")  # padded to 8 bytes in the block; the packet is 5
        + block(3, struct.pack("<I", 1500) + b"short")  # claims more than it has: damaged
        + spb(b"last")
    )
    pkts, r = read_all(write(tmp_path, data, "c.pcapng"))
    t = exact(T0 * 10**6 + 5, 10**6)
    assert pkts == [
        RawPacket(1, 0.0, 1, b"before any timestamp", 20, 0),
        RawPacket(2, t, 1, b"timed", 5, 0),
        RawPacket(3, t, 1, b"abcde", 5, 0),
        RawPacket(4, t, 1, b"last", 4, 0),
    ]
    assert codes(r) == ["capture.damaged"]


def test_pcapng_simple_packet_block_respects_snaplen(tmp_path):
    data = shb() + idb(1, snaplen=4) + spb(b"abcd", wirelen=9)
    pkts, _ = read_all(write(tmp_path, data, "c.pcapng"))
    assert [(p.data, p.wirelen) for p in pkts] == [(b"abcd", 9)]


def test_pcapng_obsolete_packet_block(tmp_path):
    data = shb() + idb(1) + idb(0, tsresol=3) + obsolete_pb(1, T0 * 1000 + 7, b"old")
    pkts, _ = read_all(write(tmp_path, data, "c.pcapng"))
    assert pkts == [RawPacket(1, exact(T0 * 1000 + 7, 1000), 0, b"old", 3, 1)]


def test_pcapng_sections_number_interfaces_afresh(tmp_path):
    data = (
        shb("<")
        + idb(1, e="<")
        + epb(0, T0 * 10**6, b"one", e="<")
        + shb(">")
        + idb(276, tsresol=9, e=">")
        + epb(0, T0 * 10**9 + 1, b"two", e=">")
        + shb("<")
        + idb(0, e="<")
        + idb(228, e="<")
        + epb(1, T0 * 10**6, b"three", e="<")
    )
    pkts, r = read_all(write(tmp_path, data, "c.pcapng"))
    assert r.linktypes == [1, 276, 0, 228]
    assert [(p.data, p.linktype, p.interface) for p in pkts] == [
        (b"one", 1, 0),
        (b"two", 276, 1),
        (b"three", 228, 3),
    ]
    assert pkts[1].ts == exact(T0 * 10**9 + 1, 10**9)
    assert r.findings == []


def test_pcapng_packet_on_an_undescribed_interface_is_damage(tmp_path):
    data = shb() + idb(1) + epb(3, 0, b"lost") + epb(0, 0, b"kept")
    pkts, r = read_all(write(tmp_path, data, "c.pcapng"))
    assert [(p.number, p.data) for p in pkts] == [(1, b"kept")]
    assert codes(r) == ["capture.damaged"]


def test_pcapng_unknown_and_secrets_blocks_are_skipped(tmp_path):
    dsb = block(10, struct.pack("<II", 0x544C534B, 4) + b"junk")
    data = shb() + idb(1) + dsb + block(0x0BAD, b"whatever") + epb(0, 0, b"p")
    pkts, r = read_all(write(tmp_path, data, "c.pcapng"))
    assert [p.data for p in pkts] == [b"p"]
    assert r.findings == []


def pcapng_cuts() -> dict[str, int]:
    head = shb() + idb(1) + epb(0, 1, b"first")
    last = epb(0, 2, b"second packet")
    return {
        "in the block type": len(head) + 2,
        "in the block length": len(head) + 6,
        "in the block body": len(head) + 20,
        "in the trailing length": len(head) + len(last) - 2,
    }


@pytest.mark.parametrize("where", sorted(pcapng_cuts()))
@pytest.mark.parametrize("compress", [False, True])
def test_pcapng_truncated_block(tmp_path, where, compress, caplog):
    data = (shb() + idb(1) + epb(0, 1, b"first") + epb(0, 2, b"second packet"))[
        : pcapng_cuts()[where]
    ]
    if compress:
        data = gzip.compress(data)
    with caplog.at_level(logging.WARNING):
        pkts, r = read_all(write(tmp_path, data, "c.pcapng"))
    assert [p.data for p in pkts] == [b"first"]
    assert [(f.code, f.packet) for f in r.findings] == [("capture.truncated", 1)]
    assert not [rec for rec in caplog.records if rec.name.startswith("scapy")]


def test_pcapng_truncated_before_the_first_packet(tmp_path):
    data = shb() + idb(1) + epb(0, 1, b"first")
    pkts, r = read_all(write(tmp_path, data[:-3], "c.pcapng"))
    assert pkts == []
    assert r.linktypes == [1]
    assert [(f.code, f.packet) for f in r.findings] == [("capture.truncated", None)]


def test_pcapng_bad_trailing_length_is_damage(tmp_path):
    bad = bytearray(epb(0, 2, b"second"))
    bad[-4:] = struct.pack("<I", 999)
    data = shb() + idb(1) + epb(0, 1, b"first") + bytes(bad) + epb(0, 3, b"third")
    pkts, r = read_all(write(tmp_path, data, "c.pcapng"))
    assert [p.data for p in pkts] == [b"first"]
    assert codes(r) == ["capture.damaged"]


@pytest.mark.parametrize("size", [4, 8, 20, 27])
def test_pcapng_section_header_cut_short_is_an_error(tmp_path, size):
    with pytest.raises(CaptureError, match="section header"):
        open_capture(write(tmp_path, shb()[:size], "c.pcapng"))


# ---------------------------------------------------------------------------------------------
# gzip


@pytest.mark.parametrize(
    "data, fmt", [(pcap([(T0, 5, b"zipped")], nano=True), "pcap"), (two_interfaces(), "pcapng")]
)
def test_gzip_compressed_files(tmp_path, data, fmt):
    plain, _ = read_all(write(tmp_path, data, "plain"))
    pkts, r = read_all(write(tmp_path, gzip.compress(data), "c.gz"))
    assert r.compressed
    assert r.format == fmt
    assert pkts == plain


def test_gzip_stream_cut_short(tmp_path):
    data = pcap([(T0, i, os.urandom(200)) for i in range(200)])
    packed = gzip.compress(data)
    pkts, r = read_all(write(tmp_path, packed[: len(packed) // 2], "c.gz"))
    whole, _ = read_all(write(tmp_path, data, "whole"))
    assert 0 < len(pkts) < 200
    assert pkts == whole[: len(pkts)]
    assert codes(r) == ["capture.truncated"]
    assert r.findings[0].packet == len(pkts)


def test_gzip_cut_at_a_record_boundary(tmp_path):
    data = pcap([(T0, 1, b"a"), (T0, 2, b"b")])
    z = zlib.compressobj(wbits=31)
    stream = z.compress(data) + z.flush(zlib.Z_SYNC_FLUSH)  # no gzip trailer
    pkts, r = read_all(write(tmp_path, stream, "c.gz"))
    assert [p.data for p in pkts] == [b"a", b"b"]
    assert codes(r) == ["capture.truncated"]


def test_gzip_corrupt_stream_is_damage(tmp_path):
    data = gzip.compress(pcap([(T0, i, bytes(500)) for i in range(50)]))
    data = data[:-8] + b"\0" * 8  # the CRC and length in the trailer are wrong
    pkts, r = read_all(write(tmp_path, data, "c.gz"))
    assert len(pkts) == 50
    assert codes(r) == ["capture.damaged"]


def test_gzip_of_nothing_is_an_empty_file(tmp_path):
    with pytest.raises(CaptureError, match="empty"):
        open_capture(write(tmp_path, gzip.compress(b""), "c.gz"))


def test_gzip_header_cut_short_is_an_error(tmp_path):
    with pytest.raises(CaptureError, match="gzip"):
        open_capture(write(tmp_path, gzip.compress(pcap())[:5], "c.gz"))


# ---------------------------------------------------------------------------------------------
# Files that are no capture at all.


def test_missing_file(tmp_path):
    with pytest.raises(CaptureError, match="no such file"):
        open_capture(str(tmp_path / "nope.pcap"))


def test_empty_file(tmp_path):
    with pytest.raises(CaptureError, match="empty"):
        open_capture(write(tmp_path, b""))


def test_directory(tmp_path):
    with pytest.raises(CaptureError, match="directory"):
        open_capture(str(tmp_path))


def test_unreadable_file(tmp_path):
    """A file the reader may not open is 'permission denied'. Root reads anything, so as root
    (CI) the check runs in a forked child that has dropped to user nobody (it needs no
    interpreter started, which under /root nobody could not reach)."""
    path = write(tmp_path, pcap())
    os.chmod(path, 0)
    if os.geteuid() != 0:
        with pytest.raises(CaptureError, match="permission denied"):
            open_capture(path)
        return
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: says what open_capture raised, and exits without pytest's cleanup
        said = b"read a file it may not open"
        try:
            os.setgid(65534)
            os.setuid(65534)
            open_capture(path)
        except CaptureError as err:
            said = str(err).encode()
        except BaseException as err:  # whatever it was, the parent reports it
            said = repr(err).encode()
        os.write(writer, said)
        os._exit(0)
    os.close(writer)
    with os.fdopen(reader, "rb") as pipe:
        said = pipe.read().decode()
    os.waitpid(pid, 0)
    assert "permission denied" in said, said


@pytest.mark.parametrize(
    "data, says",
    [
        (b"hello, this is not a capture\n", "text ('hello, this is n')"),
        (b"PK\x03\x04\x14\x00\x00\x00", "zip archive"),
        (b"BZh91AY&SY", "bzip2"),
        (b"\xde\xad\xbe\xef\x00\x01\x02\x03", "starts with de ad be ef 00 01 02 03"),
        (b"\xa1\xb2\xcd\x34" + bytes(20), "Kuznetzov"),
        (b"ab", "too short"),
    ],
)
def test_not_a_capture_file(tmp_path, data, says):
    path = write(tmp_path, data, "c.bin")
    with pytest.raises(CaptureError) as err:
        open_capture(path)
    msg = str(err.value)
    assert says in msg
    assert msg.startswith(path + ": ")
    assert "\n" not in msg


def test_not_a_capture_inside_gzip(tmp_path):
    with pytest.raises(CaptureError, match=r"looks like text.*after gunzip"):
        open_capture(write(tmp_path, gzip.compress(b"just some text"), "c.gz"))


# ---------------------------------------------------------------------------------------------
# The reader object.


def test_close_and_context_manager(tmp_path):
    path = write(tmp_path, pcap([(T0, i, b"p") for i in range(5)]))
    r = open_capture(path)
    it = iter(r)
    assert next(it).number == 1
    assert next(iter(r)).number == 2  # iterating again continues
    r.close()
    r.close()
    assert list(r) == []
    with open_capture(path) as r2:
        assert len(list(r2)) == 5
    assert list(r2) == []


def test_scapy_written_files(tmp_path):
    from scapy.layers.inet import IP, TCP
    from scapy.layers.l2 import Ether
    from scapy.utils import wrpcap, wrpcapng

    pkts = []
    for i in range(3):
        p = Ether() / IP() / TCP(sport=i)
        p.time = Decimal(T0) + Decimal(i) / 8
        pkts.append(p)
    for name, writer in (("s.pcap", wrpcap), ("s.pcapng", wrpcapng)):
        writer(str(tmp_path / name), pkts)
        got, r = read_all(str(tmp_path / name))
        assert [(g.data, g.ts, g.linktype) for g in got] == [
            (bytes(p), T0 + i / 8, 1) for i, p in enumerate(pkts)
        ]
        assert r.findings == []


# ---------------------------------------------------------------------------------------------
# Garbage never escapes as anything but CaptureError, and never from iteration.


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=200), st.sampled_from(["pcap", "pcapng", "none", "gzip"]))
def test_random_bytes_never_raise(tmp_path, tail, head):
    if head == "pcap":
        data = pcap([(T0, 0, b"ok")]) + tail
    elif head == "pcapng":
        data = shb() + idb(1) + tail
    elif head == "gzip":
        data = gzip.compress(pcap([(T0, 0, b"ok")]) + tail)[: 20 + len(tail)]
    else:
        data = tail
    path = write(tmp_path, data, "fuzz")
    try:
        r = open_capture(path)
    except CaptureError as err:
        assert "\n" not in str(err)
        return
    with r:
        pkts = list(r)
    assert [p.number for p in pkts] == list(range(1, len(pkts) + 1))
    if head == "pcap":
        assert pkts[0].data == b"ok"


def truncation_subjects() -> dict[str, tuple[bytes, set[int]]]:
    """Whole files, and the offsets at which a cut leaves only complete records."""
    recs = [pcap()] + [pcap([(T0, i, bytes([i]) * i)])[24:] for i in range(12)]
    # every block ends a valid file: a cut between the two interface blocks is no truncation
    blocks = [shb(), idb(1), idb(101, tsresol=9)] + [
        epb(i % 2, i, bytes([i]) * i) for i in range(12)
    ]
    out = {}
    for name, parts in (("pcap", recs), ("pcapng", blocks)):
        ends, n = set(), 0
        for part in parts:
            n += len(part)
            ends.add(n)
        out[name] = (b"".join(parts), ends)
    return out


SUBJECTS = truncation_subjects()


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(sorted(SUBJECTS)), st.integers(0, 1000), st.booleans())
def test_every_truncation_yields_the_complete_packets(tmp_path, fmt, cut, compress):
    whole, boundaries = SUBJECTS[fmt]
    cut = min(cut, len(whole))
    full, _ = read_all(write(tmp_path, whole, "whole"))
    data = gzip.compress(whole[:cut]) if compress else whole[:cut]
    try:
        pkts, r = read_all(write(tmp_path, data, "cut"))
    except CaptureError:
        assert cut < min(boundaries)
        return
    if fmt == "pcapng" and cut < 80 and not compress and cut in boundaries:
        assert pkts == []
    assert pkts == full[: len(pkts)]
    assert codes(r) == ([] if cut in boundaries else ["capture.truncated"])


# ---------------------------------------------------------------------------------------------
# Timestamps as Wireshark reads them.


@pytest.mark.tshark
@pytest.mark.skipif(shutil.which("tshark") is None, reason=missing("tshark"))
@pytest.mark.parametrize(
    "data",
    [
        pcap([(T0 + i, 999_999_999 - i * 7_654_321, b"x") for i in range(20)], nano=True),
        pcap([(T0 + i * 3600, 999_999 - i * 44_321, b"x") for i in range(20)], endian=">"),
        shb()
        + idb(1, tsresol=9)
        + idb(1, tsresol=0x80 | 30)
        + idb(1, tsresol=4, tsoffset=-3600)
        + b"".join(
            epb(
                i % 3,
                [T0 * 10**9 + i * 987_654_321, (T0 << 30) + i * 77_777, T0 * 10**4 + i][i % 3],
                b"x",
            )
            for i in range(30)
        ),
    ],
    ids=["pcap-nsec", "pcap-usec-be", "pcapng-tsresol"],
)
def test_timestamps_match_tshark(tmp_path, data):
    path = write(tmp_path, data, "ts.pcapng")
    out = subprocess.run(
        ["tshark", "-r", path, "-T", "fields", "-e", "frame.time_epoch"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split()
    pkts, _ = read_all(path)
    assert [p.ts for p in pkts] == [float(t) for t in out]


def test_gzip_twice(tmp_path):
    with pytest.raises(CaptureError, match="compressed twice"):
        open_capture(write(tmp_path, gzip.compress(gzip.compress(pcap())), "c.gz"))
