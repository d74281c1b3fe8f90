"""Capture files in, `RawPacket`s out: pcap and pcapng, plain or gzip-compressed.

pcap records are read here (the hot path: two reads and one unpack a packet); pcapng's blocks
with scapy's `RawPcapNgReader`. No packet is dissected. Where scapy falls short this module
works around it:

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
import io
import os
import stat
import struct
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Final, cast

from ..findings import Finding, finding
from .packet import RawPacket
from .pipe import STDIN, open_path, open_stdin

if TYPE_CHECKING:
    from .pcapng import NgReader

__all__ = ["CaptureError", "CaptureReader", "Interface", "open_capture"]

# A read size no packet reaches: scapy slices each packet to the size it is given.
_NO_LIMIT: Final = 1 << 62
# The most of one pcap record that is believed (scapy's limit, 4 x its MTU): a larger captured
# length is damage.
PCAP_MAX_RECORD: Final = 0xFFFF * 4
#: what a regular pcap file is read by (`CaptureReader._iter_pcap_blocks`)
_BLOCK: Final = 1 << 18

#: a pcap file's magic -> (its byte order for `struct`, time units a second): the one table of
#: them (the spool's reader and the Spark planner's light scan read it too)
PCAP_MAGICS: Final = {
    b"\xa1\xb2\xc3\xd4": (">", 1_000_000),
    b"\xd4\xc3\xb2\xa1": ("<", 1_000_000),
    b"\xa1\xb2\x3c\x4d": (">", 1_000_000_000),
    b"\x4d\x3c\xb2\xa1": ("<", 1_000_000_000),
}
PCAPNG_MAGIC: Final = b"\x0a\x0d\x0d\x0a"
GZIP_MAGIC: Final = b"\x1f\x8b"
#: the first four bytes of every capture file amqpscope reads (uncompressed)
CAPTURE_MAGICS: Final = (*PCAP_MAGICS, PCAPNG_MAGIC)


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


def _timestamp(sec: int, frac: int, units: int) -> float:
    """`(sec * units + frac) / units`, correctly rounded as Python's division of ints is: while
    the numerator is below 2**53 a division of doubles gives the same; a nanosecond capture's
    is above it, and is divided as Python ints. The numerator is made in doubles first (compiled,
    natively; an int product this large is Python ints' arithmetic): exact while below 2**53,
    and at or above 2**53 whenever the exact one is (rounding keeps that order), so the test
    chooses as the exact numerator would."""
    units_f = float(units)
    whole_f = float(sec) * units_f + float(frac)
    if whole_f < _EXACT_F:
        return whole_f / units_f
    exact: Any = sec * units + frac
    return exact / units


#: integers below this are exact as doubles
_EXACT_F: Final = 9007199254740992.0  # 2.0**53


class _PcapHeader:
    """A pcap file's header (the 20 bytes after its magic): byte order, link type, snap length,
    and the struct of its record headers (seconds, fraction, captured and original length)."""

    __slots__ = ("endian", "linktype", "record", "snaplen")

    def __init__(self, f: IO[bytes], magic: bytes) -> None:
        self.endian = PCAP_MAGICS[magic][0]
        head = f.read(20)
        if len(head) < 20:
            raise EOFError("pcap file header cut short")
        _, _, _, _, self.snaplen, self.linktype = struct.unpack(self.endian + "HHIIII", head)
        self.record = struct.Struct(self.endian + "IIII")


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
    `findings` (filled while iterating; complete once iteration has ended), `secrets` (TLS key
    logs from pcapng Decryption Secrets Blocks, as iteration reaches them) and `packets` (the
    last number yielded: how many, with the `before` of files read earlier). Iterating again
    continues where the last iteration stopped.
    """

    def __init__(
        self, path: str | os.PathLike[str], stream: IO[bytes] | None = None, before: int = 0
    ) -> None:
        """`stream`: the file already open (`capture.textlog.open_stream`, which looked at its
        first bytes to tell a capture from a log); read from where it stands. `before`: packets
        of files read before this one (`capture.rotated`): numbering goes on from there."""
        self.path = os.fspath(path)
        self.format = ""
        self.compressed = False
        self.interfaces: list[Interface] = []
        self.findings: list[Finding] = []
        self.secrets: list[bytes] = []  # TLS key logs from pcapng DSBs, as they are read
        self.packets = before
        self._raw: IO[bytes] | None = None
        self._f: IO[bytes] | None = None
        self._pcap: _PcapHeader | None = None
        self._ng: NgReader | None = None
        self._pcap_snaplen = 0
        self._it: Iterator[RawPacket] = iter(())
        try:
            self._open(stream)
        except CaptureError:
            self.close()
            raise
        except Exception as exc:
            self.close()
            raise CaptureError(f"{self.path}: cannot be read: {exc}") from exc

    # -- opening ---------------------------------------------------------------------------

    def _fail(self, why: str) -> CaptureError:
        return CaptureError(f"{self.path}: {why}")

    def _open(self, stream: IO[bytes] | None) -> None:
        raw: Any
        try:
            if stream is not None:
                raw = self._raw = stream
            elif self.path == STDIN:  # read forward only, as it comes
                raw = self._raw = open_stdin(sys.stdin.fileno())
            else:
                # closed by close(); 64 KiB reads, not the default 8 (two small reads a packet)
                raw = self._raw = open_path(self.path, 1 << 16)
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
        if start == GZIP_MAGIC:
            self.compressed = True
            # a binary file object in all but typeshed's class hierarchy
            f = cast(IO[bytes], _GzipFile(fileobj=raw, mode="rb"))
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
        if magic in PCAP_MAGICS:
            self._open_pcap(f, magic)
        elif magic == PCAPNG_MAGIC:
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
        try:
            reader = _PcapHeader(f, magic)
        except Exception:
            raise self._fail("the pcap file header is cut short or unreadable") from None
        self._pcap = reader
        linktype = reader.linktype & 0x03FFFFFF  # upper bits: FCS length, not the link type
        units = PCAP_MAGICS[magic][1]
        self._pcap_snaplen = reader.snaplen
        self.interfaces.append(Interface(0, linktype, reader.snaplen, units))
        if self._regular_file():
            self._it = self._iter_pcap_blocks(linktype, units, reader.endian == "<")
        else:
            self._it = self._iter_pcap(linktype, units)

    def _regular_file(self) -> bool:
        """Whether the capture is read from an uncompressed regular file (not a pipe, not
        gzip): then reading ahead a block at a time is safe and ends as a record's reads do."""
        if self.compressed or self.path == STDIN or self._f is not self._raw:
            return False
        try:
            return stat.S_ISREG(os.fstat(self._raw.fileno()).st_mode)  # type: ignore[union-attr]
        except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
            return False

    def _open_pcapng(self, f: IO[bytes], magic: bytes) -> None:
        from .pcapng import NgReader  # scapy, only when a pcapng file is read (slow to import)

        self.format = "pcapng"
        reader = object.__new__(NgReader)
        try:
            NgReader.__init__(reader, self.path, f, magic, self)
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

    def position(self) -> tuple[int, int]:
        """(bytes of the file read so far, its size): for a progress bar. For a gzip file both
        count compressed bytes; (0, 0) when closed or not a regular file."""
        raw = self._raw
        if raw is None:
            return 0, 0
        try:
            return raw.tell(), os.fstat(raw.fileno()).st_size
        except (OSError, ValueError):
            return 0, 0

    # -- iterating ---------------------------------------------------------------------------

    def __iter__(self) -> Iterator[RawPacket]:
        return self._it

    def _iter_pcap(self, linktype: int, units: int) -> Iterator[RawPacket]:
        """The records, read here (the hot path: two reads and one unpack a packet). A read error
        ends reading as the end of the file would (`_ended` tells which it was)."""
        assert self._f is not None and self._pcap is not None
        read = self._f.read
        unpack = self._pcap.record.unpack
        number = self.packets  # 0, or the packets of the files read before
        pos = 24  # offset of the record being read
        snapped = first_snapped = 0
        # typed before the loop: the record's fields, unpacked as Any, are then native ints
        # (compiled, the timestamp and the length checks are native arithmetic)
        sec = frac = caplen = wirelen = 0
        try:
            while True:
                try:
                    head = read(16)
                    if len(head) < 16:
                        raise EOFError
                    sec, frac, caplen, wirelen = unpack(head)
                    data = read(caplen) if caplen <= PCAP_MAX_RECORD else b""
                except (OSError, OverflowError, zlib.error) as exc:
                    raise EOFError from exc
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
                yield RawPacket(number, _timestamp(sec, frac, units), linktype, data, wirelen, 0)
        except Exception as exc:  # EOFError at the end; anything on damage
            self._ended(pos, "pcap", exc)
        self._summarise_snaplen(snapped, first_snapped)

    def _iter_pcap_blocks(self, linktype: int, units: int, little: bool) -> Iterator[RawPacket]:
        """`_iter_pcap` of a regular file, uncompressed: read `_BLOCK` bytes at a time and each
        record cut from the block (one slice a packet, its header read byte by byte: natively,
        compiled), not two reads and an unpack a packet. The same packets, and the same ends: at
        the end of the file its position is where the records' reads would have left it."""
        assert self._f is not None
        read = self._f.read
        number = self.packets  # 0, or the packets of the files read before
        pos = 24  # offset of the record being read
        snapped = first_snapped = 0
        buf = b""
        i = have = 0  # the record's offset in `buf`, and the bytes in it
        try:
            while True:
                if have - i < 16:
                    try:
                        more = read(_BLOCK)
                    except (OSError, OverflowError) as exc:
                        raise EOFError from exc
                    if not more:
                        raise EOFError  # a clean end, or a record header cut short
                    buf = buf[i:] + more
                    i, have = 0, len(buf)
                    continue
                if little:
                    sec = buf[i] | buf[i + 1] << 8 | buf[i + 2] << 16 | buf[i + 3] << 24
                    frac = buf[i + 4] | buf[i + 5] << 8 | buf[i + 6] << 16 | buf[i + 7] << 24
                    caplen = buf[i + 8] | buf[i + 9] << 8 | buf[i + 10] << 16 | buf[i + 11] << 24
                    wirelen = buf[i + 12] | buf[i + 13] << 8 | buf[i + 14] << 16 | buf[i + 15] << 24
                else:
                    sec = buf[i] << 24 | buf[i + 1] << 16 | buf[i + 2] << 8 | buf[i + 3]
                    frac = buf[i + 4] << 24 | buf[i + 5] << 16 | buf[i + 6] << 8 | buf[i + 7]
                    caplen = buf[i + 8] << 24 | buf[i + 9] << 16 | buf[i + 10] << 8 | buf[i + 11]
                    wirelen = buf[i + 12] << 24 | buf[i + 13] << 16 | buf[i + 14] << 8 | buf[i + 15]
                if caplen > PCAP_MAX_RECORD:
                    self._pcap_short_record(pos, caplen)
                    break
                end = i + 16 + caplen
                if end > have:
                    try:
                        more = read(max(_BLOCK, end - have))
                    except (OSError, OverflowError) as exc:
                        raise EOFError from exc
                    if not more:  # the file ends inside the record's data
                        self._pcap_short_record(pos, caplen)
                        break
                    buf = buf[i:] + more
                    i, have = 0, len(buf)
                    continue
                data = buf[i + 16 : end]
                i = end
                pos += 16 + caplen
                number += 1
                if caplen < wirelen:
                    snapped += 1
                    if snapped == 1:
                        first_snapped = number
                self.packets = number
                yield RawPacket(number, _timestamp(sec, frac, units), linktype, data, wirelen, 0)
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
        if caplen > PCAP_MAX_RECORD:
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
        if not self._seekable():  # a pipe cannot go back: whether anything follows tells them apart
            try:
                return "damaged" if _read_tolerant(f, 1) else "truncated"
            except Exception:
                return "damaged"
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
                if head[:4] == PCAPNG_MAGIC:
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

    def _seekable(self) -> bool:
        raw = self._raw
        try:
            return raw is not None and raw.seekable()
        except (OSError, ValueError):
            return False

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
