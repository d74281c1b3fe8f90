"""pcapng blocks: scapy's block framing, SHB and option parsing; our packet, interface and
Decryption Secrets Blocks. Imported by `files.py` only when a pcapng file is opened: scapy takes
longer to import than a pcap of thousands of packets takes to read.
"""

from __future__ import annotations

import logging
import struct
from typing import IO, TYPE_CHECKING, Any

from scapy.data import MTU
from scapy.utils import RawPcapNgReader

from ..findings import finding
from .files import Interface
from .packet import RawPacket

if TYPE_CHECKING:
    from .files import CaptureReader

# pcapng Decryption Secrets Block: secrets type "TLSK" is an NSS key log (editcap --inject-secrets)
_DSB_TLS_KEYLOG = 0x544C534B


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


class NgReader(RawPcapNgReader):
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
        self.number = owner.packets  # 0, or the packets of the files read before
        self.snapped = 0
        self.first_snapped = 0
        self._set_structs("<")
        super().__init__(filename, fdesc, magic)  # reads the first SHB
        # Only the blocks we need: scapy's DSB handler would load TLS keys into its global conf,
        # ours hands them to the owner (`CaptureReader.secrets`).
        self.blocktypes = {
            1: self._read_block_idb,
            2: self._read_block_pkt,
            3: self._read_block_spb,
            6: self._read_block_epb,
            10: self._read_block_dsb,
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

    def _read_block_dsb(self, block: bytes, _size: int) -> None:
        if len(block) < 8:
            self._damaged(f"a Decryption Secrets Block is too short ({len(block)} bytes)")
            return None
        kind, length = struct.unpack(self.endian + "2I", block[:8])
        if kind == _DSB_TLS_KEYLOG:
            self.owner.secrets.append(bytes(block[8 : 8 + length]))
        return None

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
