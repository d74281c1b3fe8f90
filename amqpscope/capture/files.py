"""Capture files in, `RawPacket`s out: pcap and pcapng, plain or gzip-compressed.

scapy's raw readers (`RawPcapReader`, `RawPcapNgReader`) do the reading; no packet is dissected.
Where they fall short this module works around them:

* timestamps are computed exactly, as ``(seconds * units + fraction) / units`` in integers, so
  the float is the correctly rounded value of the recorded time (it matches tshark's
  ``frame.time_epoch``); pcapng ``if_tsoffset`` is honoured (scapy ignores it);
* pcapng interface ids are per section (scapy numbers them across the whole file), so a file
  with several sections maps each packet to the right interface; `RawPacket.interface` is the
  interface's ordinal in the file (as Wireshark counts them);
* a Simple Packet Block's length comes from the block (scapy cuts it to the interface's
  snap length, which makes every packet empty when the snap length is 0, "no limit");
* scapy ends quietly, or returns a partial packet, when a file is cut short; here every complete
  packet is yielded and then a ``capture.truncated`` finding says where the file ended. Damage
  that stops reading is a ``capture.damaged`` finding;
* scapy's own log warnings about these files are dropped (they become findings instead), and
  Decryption Secrets Blocks are ignored (scapy would load TLS keys into its global config).

Nothing but `CaptureError` escapes from `open_capture`, and nothing at all from iterating.
"""

from __future__ import annotations

import contextlib
import gzip
import logging
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from scapy.data import MTU
from scapy.utils import RawPcapNgReader, RawPcapReader

from ..findings import Finding, finding
from .packet import RawPacket

__all__ = ["CaptureError", "CaptureReader", "Interface", "open_capture"]

# A read size no packet reaches: scapy slices each packet to the size it is given.
_NO_LIMIT = 1 << 62
# scapy's pcap reader reads at most this much of one record and skips the rest.
_PCAP_MAX_RECORD = MTU * 4

_PCAP_MAGICS = {
    b"\xa1\xb2\xc3\xd4": 1_000_000,
    b"\xd4\xc3\xb2\xa1": 1_000_000,
    b"\xa1\xb2\x3c\x4d": 1_000_000_000,
    b"\x4d\x3c\xb2\xa1": 1_000_000_000,
}
_PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"
_GZIP_MAGIC = b"\x1f\x8b"


class _GzipFile(gzip.GzipFile):
    """GzipFile that remembers why a read failed: scapy turns every failure into "the end"."""

    error: BaseException | None = None

    def read(self, size: int | None = -1) -> bytes:
        try:
            return super().read(size)
        except Exception as exc:
            self.error = exc
            raise


class CaptureError(Exception):
    """A capture file that cannot be read at all; `str()` is one line for a human."""


@dataclass(frozen=True, slots=True)
class Interface:
    """One capture interface: pcap has exactly one, pcapng one per Interface Description Block.

    `ts_resolution` is timestamp units per second (10**6 for microseconds); `ts_offset` is the
    pcapng ``if_tsoffset`` in seconds, already included in every packet's `ts`.
    """

    index: int
    linktype: int
    snaplen: int
    ts_resolution: int
    ts_offset: int = 0
    name: str | None = None


# ---------------------------------------------------------------------------------------------
# scapy's warnings: every one its raw readers log about a file becomes a finding here instead.


class _DropReaderWarnings(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.msg
        return not (isinstance(msg, str) and msg.startswith(("Pcap: ", "PcapNg: ")))


def _install_warning_filter() -> None:
    log = logging.getLogger("scapy.runtime")
    if not any(isinstance(f, _DropReaderWarnings) for f in log.filters):
        # First in line: scapy's own rate-limiting filter walks the stack for every record.
        log.filters.insert(0, _DropReaderWarnings())


_install_warning_filter()


# ---------------------------------------------------------------------------------------------
# pcapng: scapy's block framing, SHB and option parsing; our packet and interface blocks.


class _NgReader(RawPcapNgReader):
    """`RawPcapNgReader` whose packet blocks return finished `RawPacket`s.

    `_read_packet` returns the next `RawPacket` or raises (EOFError at the end or on damage);
    `block_start` is the offset of the block being read, for diagnosing a failure.
    """

    def __init__(self, filename: str, fdesc: IO[bytes], magic: bytes, owner: CaptureReader):
        self.owner = owner
        self.ifaces: list[tuple[int, int, int, int]] = []  # (linktype, snaplen, units/s, offset)
        self.section_base = 0  # global index of the current section's interface 0
        self.block_start = 0
        self.last_ts = 0.0
        self.number = 0
        self.snapped = 0
        self.first_snapped = 0
        self._set_structs("<")
        super().__init__(filename, fdesc, magic)  # reads the first SHB
        # Only the blocks we need: scapy's DSB handler would load TLS keys into its global conf.
        self.blocktypes = {
            1: self._read_block_idb,
            2: self._read_block_pkt,
            3: self._read_block_spb,
            6: self._read_block_epb,
        }

    def _set_structs(self, endian: str) -> None:
        self.s_epb = struct.Struct(endian + "5I")
        self.s_pb = struct.Struct(endian + "HH4I")
        self.s_u32 = struct.Struct(endian + "I")
        self.s_idb = struct.Struct(endian + "HxxI")
        self.s_i64 = struct.Struct(endian + "q")

    def _read_packet(self, size: int = MTU) -> Any:
        f = self.f
        read_block = self._read_block
        while True:
            self.block_start = f.tell()
            res = read_block(size)
            if res is not None:
                return res

    def _read_block_shb(self) -> None:
        super()._read_block_shb()
        # Interface ids restart in every section.
        self.section_base = len(self.ifaces)
        self._set_structs(self.endian)

    def _damaged(self, what: str) -> None:
        self.owner.findings.append(
            finding("capture.damaged", f"{what} (block at offset {self.block_start}); skipped")
        )

    def _read_block_idb(self, block: bytes, _size: int) -> None:
        if len(block) < 8:
            self._damaged(f"an Interface Description Block is too short ({len(block)} bytes)")
            return None
        linktype, snaplen = self.s_idb.unpack_from(block)
        opts = self._read_options(block[8:])
        units = 1_000_000
        tsresol = opts.get(9)
        if isinstance(tsresol, bytes) and len(tsresol) == 1:
            units = (2 if tsresol[0] & 0x80 else 10) ** (tsresol[0] & 0x7F)
        offset = 0
        tsoffset = opts.get(14)
        if isinstance(tsoffset, bytes) and len(tsoffset) == 8:
            (offset,) = self.s_i64.unpack(tsoffset)
        name = opts.get(2)
        iface = Interface(
            index=len(self.ifaces),
            linktype=linktype,
            snaplen=snaplen,
            ts_resolution=units,
            ts_offset=offset,
            name=name.rstrip(b"\0").decode("utf-8", "replace") if isinstance(name, bytes) else None,
        )
        self.ifaces.append((linktype, snaplen, units, offset * units))
        self.owner.interfaces.append(iface)
        return None

    def _packet(
        self, intid: int, ts_units: int | None, data: bytes, caplen: int, wirelen: int
    ) -> RawPacket | None:
        idx = self.section_base + intid
        if idx >= len(self.ifaces):
            self._damaged(f"a packet names interface {intid}, which its section does not describe")
            return None
        linktype, _snaplen, units, offset_units = self.ifaces[idx]
        if ts_units is None:
            ts = self.last_ts
        else:
            ts = self.last_ts = (ts_units + offset_units) / units
        if caplen < wirelen:
            self.snapped += 1
            if not self.first_snapped:
                self.first_snapped = self.number + 1
        self.number += 1
        return RawPacket(self.number, ts, linktype, data, wirelen, idx)

    def _read_block_epb(self, block: bytes, _size: int) -> RawPacket | None:
        """Enhanced Packet Block: its options (comments, flags, ...) are not read."""
        if len(block) < 20:
            self._damaged(f"an Enhanced Packet Block is too short ({len(block)} bytes)")
            return None
        intid, hi, lo, caplen, wirelen = self.s_epb.unpack_from(block)
        if caplen > len(block) - 20:
            self._damaged(f"an Enhanced Packet Block claims {caplen} bytes of packet data")
            return None
        return self._packet(intid, (hi << 32) | lo, block[20 : 20 + caplen], caplen, wirelen)

    def _read_block_spb(self, block: bytes, _size: int) -> RawPacket | None:
        """Simple Packet Block: interface 0 of the section, no timestamp (the previous one's)."""
        if len(block) < 4:
            self._damaged(f"a Simple Packet Block is too short ({len(block)} bytes)")
            return None
        # The captured length is not recorded: it is the packet's length, cut to the snap length
        # (0: no limit). scapy cuts to the snap length even when that is 0.
        (wirelen,) = self.s_u32.unpack_from(block)
        caplen = wirelen
        idx = self.section_base
        if idx < len(self.ifaces) and 0 < self.ifaces[idx][1] < caplen:
            caplen = self.ifaces[idx][1]
        if caplen > len(block) - 4:
            self._damaged(f"a Simple Packet Block is too short for its {caplen}-byte packet")
            return None
        return self._packet(0, None, block[4 : 4 + caplen], caplen, wirelen)

    def _read_block_pkt(self, block: bytes, _size: int) -> RawPacket | None:
        """The obsolete Packet Block."""
        if len(block) < 20:
            self._damaged(f"a Packet Block is too short ({len(block)} bytes)")
            return None
        intid, _drops, hi, lo, caplen, wirelen = self.s_pb.unpack_from(block)
        if caplen > len(block) - 20:
            self._damaged(f"a Packet Block claims {caplen} bytes of packet data")
            return None
        return self._packet(intid, (hi << 32) | lo, block[20 : 20 + caplen], caplen, wirelen)


# ---------------------------------------------------------------------------------------------


def _describe(head: bytes) -> str:
    """What the first bytes of a file that is no capture look like."""
    hexed = " ".join(f"{b:02x}" for b in head[:8])
    kinds = (
        (b"\x1f\x8b", "gzip-compressed data (compressed twice?)"),
        (b"BZh", "bzip2-compressed data"),
        (b"\xfd7zXZ\x00", "xz-compressed data"),
        (b"\x28\xb5\x2f\xfd", "zstd-compressed data"),
        (b"\x04\x22\x4d\x18", "lz4-compressed data"),
        (b"PK\x03\x04", "a zip archive"),
        (b"\xa1\xb2\xcd\x34", "a modified (Kuznetzov) pcap file, which is not supported"),
        (b"\x34\xcd\xb2\xa1", "a modified (Kuznetzov) pcap file, which is not supported"),
        (b"\x00\x00\x00\x00\x00\x00\x00\x00", "zero bytes"),
    )
    kind = next((k for magic, k in kinds if head.startswith(magic)), None)
    if kind is None:
        try:
            text = head.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None and text.isprintable():
            kind = f"text ({text[:16]!r})"
    return f"starts with {hexed}" + (f", which looks like {kind}" if kind else "")


def _read_tolerant(f: IO[bytes], n: int) -> bytes:
    """Up to `n` bytes, fewer where the file or a cut-short gzip stream ends.

    Byte by byte: a gzip read that hits the cut raises and loses what it had read. Only used
    for a few bytes, once per file."""
    out = bytearray()
    try:
        while len(out) < n:
            b = f.read(1)
            if not b:
                break
            out += b
    except EOFError:
        pass
    return bytes(out)


class CaptureReader:
    """An open capture file; iterate it for `RawPacket`s (numbered from 1, in file order).

    Attributes: `path`, `format` ("pcap" or "pcapng"), `compressed` (gzip), `interfaces`
    (`Interface`s; for pcapng those described before the first packet are known once opened,
    later ones appear while iterating), `snaplen` (pcap's header; pcapng: interface 0's),
    `findings` (filled while iterating; complete once iteration has ended) and `packets` (how
    many were yielded). Iterating again continues where the last iteration stopped.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self.format = ""
        self.compressed = False
        self.interfaces: list[Interface] = []
        self.findings: list[Finding] = []
        self.packets = 0
        self._raw: IO[bytes] | None = None
        self._f: IO[bytes] | None = None
        self._pcap: RawPcapReader | None = None
        self._ng: _NgReader | None = None
        self._pcap_snaplen = 0
        self._it: Iterator[RawPacket] = iter(())
        try:
            self._open()
        except CaptureError:
            self.close()
            raise
        except Exception as exc:
            self.close()
            raise CaptureError(f"{self.path}: cannot be read: {exc}") from exc

    # -- opening ---------------------------------------------------------------------------

    def _fail(self, why: str) -> CaptureError:
        return CaptureError(f"{self.path}: {why}")

    def _open(self) -> None:
        try:
            raw = self._raw = open(self.path, "rb")  # noqa: SIM115 - closed by close()
        except FileNotFoundError:
            raise self._fail("no such file") from None
        except IsADirectoryError:
            raise self._fail("is a directory, not a capture file") from None
        except PermissionError:
            raise self._fail("permission denied") from None
        except OSError as exc:
            raise self._fail(f"cannot open: {exc.strerror or exc}") from None
        try:
            start = raw.peek(2)[:2]
        except OSError as exc:
            raise self._fail(f"cannot read: {exc.strerror or exc}") from None
        f: IO[bytes] = raw
        if start == _GZIP_MAGIC:
            self.compressed = True
            f = _GzipFile(fileobj=raw, mode="rb")
        self._f = f
        try:
            magic = f.read(4)
        except EOFError:
            raise self._fail("the gzip-compressed data is cut short") from None
        except (OSError, ValueError) as exc:  # BadGzipFile, zlib.error
            what = "gzip-compressed data is damaged" if self.compressed else "cannot be read"
            raise self._fail(f"{what}: {exc}") from None
        if not magic:
            raise self._fail("the file is empty" + (" (after gunzip)" if self.compressed else ""))
        if magic in _PCAP_MAGICS:
            self._open_pcap(f, magic)
        elif magic == _PCAPNG_MAGIC:
            self._open_pcapng(f, magic)
        else:
            head = magic + _read_tolerant(f, 12)
            inner = " after gunzip" if self.compressed else ""
            if len(head) < 4:
                raise self._fail(
                    f"too short to be a capture file ({len(head)} bytes{inner}: {head.hex(' ')})"
                )
            raise self._fail(f"not a pcap or pcapng file: it {_describe(head)}{inner}")

    def _open_pcap(self, f: IO[bytes], magic: bytes) -> None:
        self.format = "pcap"
        reader = object.__new__(RawPcapReader)
        try:
            RawPcapReader.__init__(reader, self.path, f, magic)
        except Exception:
            raise self._fail("the pcap file header is cut short or unreadable") from None
        self._pcap = reader
        linktype = reader.linktype & 0x03FFFFFF  # upper bits: FCS length, not the link type
        units = _PCAP_MAGICS[magic]
        self._pcap_snaplen = reader.snaplen
        self.interfaces.append(Interface(0, linktype, reader.snaplen, units))
        self._it = self._iter_pcap(linktype, units)

    def _open_pcapng(self, f: IO[bytes], magic: bytes) -> None:
        self.format = "pcapng"
        reader = object.__new__(_NgReader)
        try:
            reader.__init__(self.path, f, magic, self)
        except Exception:
            raise self._fail("the pcapng section header block is cut short or malformed") from None
        self._ng = reader
        # Read up to the first packet so the interfaces described before it are known now.
        first: RawPacket | None = None
        try:
            first = reader._read_packet(_NO_LIMIT)
        except Exception as exc:
            self._ng_failed(exc)
        self._it = self._iter_pcapng(first)

    # -- the file's properties ---------------------------------------------------------------

    @property
    def linktypes(self) -> list[int]:
        """The link type of each interface, by interface index."""
        return [i.linktype for i in self.interfaces]

    @property
    def ts_resolution(self) -> int:
        """Timestamp units per second: pcap's, or pcapng interface 0's (10**6 if none yet)."""
        return self.interfaces[0].ts_resolution if self.interfaces else 1_000_000

    @property
    def nanosecond(self) -> bool:
        """Whether any interface records timestamps finer than microseconds."""
        return any(i.ts_resolution > 1_000_000 for i in self.interfaces)

    @property
    def snaplen(self) -> int:
        if self.format == "pcap":
            return self._pcap_snaplen
        return self.interfaces[0].snaplen if self.interfaces else 0

    # -- iterating ---------------------------------------------------------------------------

    def __iter__(self) -> Iterator[RawPacket]:
        return self._it

    def _iter_pcap(self, linktype: int, units: int) -> Iterator[RawPacket]:
        read = self._pcap._read_packet  # type: ignore[union-attr]
        number = 0
        pos = 24  # offset of the record being read
        snapped = first_snapped = 0
        try:
            while True:
                data, meta = read(_NO_LIMIT)
                sec, frac, wirelen, caplen = meta
                if len(data) != caplen:
                    self._pcap_short_record(pos, caplen)
                    break
                pos += 16 + caplen
                number += 1
                if caplen < wirelen:
                    snapped += 1
                    if snapped == 1:
                        first_snapped = number
                self.packets = number
                yield RawPacket(number, (sec * units + frac) / units, linktype, data, wirelen, 0)
        except Exception as exc:  # EOFError at the end; anything on damage
            self._ended(pos, "pcap", exc)
        self._summarise_snaplen(snapped, first_snapped)

    def _iter_pcapng(self, first: RawPacket | None) -> Iterator[RawPacket]:
        ng = self._ng
        assert ng is not None
        if first is not None:
            self.packets = first.number
            yield first
            read = ng._read_packet
            try:
                while True:
                    pkt = read(_NO_LIMIT)
                    self.packets = pkt.number
                    yield pkt
            except Exception as exc:
                self._ng_failed(exc)
        self._summarise_snaplen(ng.snapped, ng.first_snapped)

    # -- how reading ended ------------------------------------------------------------------

    def _record_end(self, kind: str, offset: int, detail: str = "") -> None:
        after = f" after packet {self.packets}" if self.packets else " before any packet"
        if kind == "truncated":
            msg = f"the file ends inside the record at offset {offset}{after}"
            if self.compressed:
                msg += " (or its gzip stream is cut short)"
            self.findings.append(finding("capture.truncated", msg, self.packets or None))
        else:
            msg = f"the record at offset {offset} could not be read{after}; reading stopped"
            if detail:
                msg += f" ({detail})"
            self.findings.append(finding("capture.damaged", msg, self.packets or None))

    def _probe_end(self) -> tuple[str, str] | None:
        """At a clean record boundary with nothing more read: is this really the end?"""
        f = self._f
        assert f is not None
        try:
            more = f.read(1)
        except EOFError:
            return "truncated", ""
        except Exception as exc:
            return "damaged", f"gzip: {exc}" if self.compressed else str(exc)
        return ("damaged", "unexpected data after the end") if more else None

    def _ended(self, start: int, fmt: str, exc: BaseException) -> None:
        """Reading stopped at the record at offset `start` with `exc` (scapy's EOFError stands
        for the end of the file and for most damage alike): record what it was, if not the end.
        """
        f = self._f
        assert f is not None
        gz_error = getattr(f, "error", None)
        if gz_error is not None:  # the gzip stream failed (scapy reports that as the end)
            if isinstance(gz_error, EOFError):
                self._record_end("truncated", start)
            else:
                self._record_end("damaged", start, f"gzip: {gz_error}")
            return
        detail = ""
        if isinstance(exc, EOFError):
            try:
                here = f.tell()
            except Exception:
                here = -1
            if here == start:  # nothing of another record: the end, or a cut gzip stream
                end = self._probe_end()
                if end is not None:
                    self._record_end(end[0], start, end[1])
                return
        else:
            detail = f"{type(exc).__name__}: {exc}"
        kind = self._classify(start, fmt)
        self._record_end(kind, start, "" if kind == "truncated" else detail)

    def _pcap_short_record(self, pos: int, caplen: int) -> None:
        if caplen > _PCAP_MAX_RECORD:
            self._record_end("damaged", pos, f"it claims {caplen} bytes of packet data")
        else:
            self._record_end("truncated", pos)

    def _ng_failed(self, exc: BaseException) -> None:
        assert self._ng is not None
        self._ended(self._ng.block_start, "pcapng", exc)

    def _classify(self, start: int, fmt: str) -> str:
        """After a failed read of the record at `start`: "truncated" if the file ends inside it,
        else "damaged". Runs once per file, so seeking back (even in gzip) is fine."""
        f = self._f
        assert f is not None
        try:
            f.seek(start)
            if fmt == "pcap":
                head = _read_tolerant(f, 16)
                if len(head) < 16:
                    return "truncated"
                assert self._pcap is not None
                (caplen,) = struct.unpack_from(self._pcap.endian + "I", head, 8)
                need = 16 + caplen
            else:
                head = _read_tolerant(f, 12)
                if len(head) < 8:
                    return "truncated"
                assert self._ng is not None
                endian = self._ng.endian
                if head[:4] == _PCAPNG_MAGIC:
                    if len(head) < 12:
                        return "truncated"
                    bom = head[8:12]
                    endian = ">" if bom == b"\x1a\x2b\x3c\x4d" else "<"
                (need,) = struct.unpack_from(endian + "I", head, 4)
                if need < 12:
                    return "damaged"
            f.seek(start + need - 1)
            return "damaged" if f.read(1) else "truncated"
        except EOFError:
            return "truncated"
        except Exception:
            return "damaged"

    def _summarise_snaplen(self, snapped: int, first: int) -> None:
        if snapped:
            self.findings.append(
                finding(
                    "capture.snaplen",
                    f"{snapped} packet(s) were cut short by the capture's snap length "
                    f"(the first is packet {first})",
                    first,
                )
            )

    # -- closing -------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the file; iterating afterwards yields nothing. Safe to call twice."""
        it = self._it
        self._it = iter(())
        close_it = getattr(it, "close", None)
        if close_it is not None:
            close_it()
        for f in (self._f, self._raw):
            if f is not None:
                with contextlib.suppress(Exception):  # a broken gzip stream may raise
                    f.close()
        self._f = self._raw = None

    def __enter__(self) -> CaptureReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_capture(path: str | os.PathLike[str]) -> CaptureReader:
    """Open a pcap or pcapng file (either may be gzip-compressed).

    Raises `CaptureError` (and nothing else) when the file cannot be read at all.
    """
    return CaptureReader(path)
