"""Writing packets out (`read -w`): pcap or pcapng, as Wireshark and amqpscope read them.

The only writer of capture files, so it lives with the readers. A pcapng input stays pcapng: its
interfaces (link type, snap length, name, timestamp resolution) and its Decryption Secrets
Blocks (TLS key logs) are written before the first packet that needs them, so a TLS cut still
decrypts. A pcap input is written as pcap (with its link type, snap length and timestamp
resolution) unless the name asks for pcapng. Packets are written as they come: nothing is kept.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import IO, Any, Final

from amqpscope.capture.packet import RawPacket

PCAP_MAGIC_US: Final = 0xA1B2C3D4
PCAP_MAGIC_NS: Final = 0xA1B23C4D
SHB: Final = 0x0A0D0D0A
IDB: Final = 0x00000001
EPB: Final = 0x00000006
DSB: Final = 0x0000000A
BYTE_ORDER: Final = 0x1A2B3C4D
DSB_TLS_KEYLOG: Final = 0x544C534B
OPT_END: Final = 0
OPT_NAME: Final = 2
OPT_TSRESOL: Final = 9


def format_for(name: str, input_format: str) -> str:
    """The format a cut is written in: pcapng when the input is pcapng (its interfaces and
    secrets go with it) or the name ends in .pcapng; else pcap."""
    if input_format == "pcapng" or name.lower().endswith((".pcapng", ".ntar")):
        return "pcapng"
    return "pcap"


def _pad(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 4)


def _option(code: int, value: bytes) -> bytes:
    return struct.pack("<HH", code, len(value)) + _pad(value)


def _block(kind: int, body: bytes) -> bytes:
    length = 12 + len(body)
    return struct.pack("<II", kind, length) + body + struct.pack("<I", length)


class CaptureWriter:
    """Writes `RawPacket`s of `source` (an open `CaptureReader`: its format, interfaces and
    secrets) to `out`, a binary file, in `fmt` ("pcap" or "pcapng")."""

    def __init__(self, out: IO[bytes], source: Any, fmt: str) -> None:
        self.out = out
        self.source = source
        self.format = fmt
        self.started = False
        self.interfaces_written = 0  # pcapng: IDBs written, in the input's order
        self.secrets_written = 0  # pcapng: DSBs written
        self.packets = 0
        self.units = 10**9 if getattr(source, "nanosecond", False) else 10**6

    def _start(self) -> None:
        self.started = True
        if self.format == "pcapng":
            body = struct.pack("<IHHq", BYTE_ORDER, 1, 0, -1)
            self.out.write(_block(SHB, body))
            return
        interfaces = self.source.interfaces
        linktype = interfaces[0].linktype if interfaces else 1
        snaplen = self.source.snaplen or 262144
        magic = PCAP_MAGIC_NS if self.units == 10**9 else PCAP_MAGIC_US
        self.out.write(struct.pack("<IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype))

    def _catch_up(self) -> None:
        """pcapng: the interfaces and secrets the input has described by now, not yet written."""
        interfaces = self.source.interfaces
        while self.interfaces_written < len(interfaces):
            iface = interfaces[self.interfaces_written]
            options = b""
            if iface.name:
                options += _option(OPT_NAME, iface.name.encode())
            resolution = iface.ts_resolution
            exponent = len(str(resolution)) - 1
            if resolution == 10**exponent and exponent != 6:
                options += _option(OPT_TSRESOL, bytes([exponent]))
            if options:
                options += _option(OPT_END, b"")
            body = struct.pack("<HHI", iface.linktype, 0, iface.snaplen) + options
            self.out.write(_block(IDB, body))
            self.interfaces_written += 1
        secrets = self.source.secrets
        while self.secrets_written < len(secrets):
            secret = secrets[self.secrets_written]
            body = struct.pack("<II", DSB_TLS_KEYLOG, len(secret)) + _pad(secret)
            self.out.write(_block(DSB, body))
            self.secrets_written += 1

    def write(self, packet: RawPacket) -> None:
        if not self.started:
            self._start()
        self.packets += 1
        data = packet.data
        if self.format == "pcap":
            units = round(packet.ts * self.units)
            seconds, fraction = divmod(units, self.units)
            self.out.write(struct.pack("<IIII", seconds, fraction, len(data), packet.wirelen))
            self.out.write(data)
            return
        self._catch_up()
        iface = self.source.interfaces[packet.interface]
        resolution = iface.ts_resolution
        exponent = len(str(resolution)) - 1
        if resolution != 10**exponent:
            resolution = 10**6  # a power-of-two resolution is written in microseconds
        stamp = round(packet.ts * resolution)  # the offset is in `ts` already; none is written
        head = struct.pack(
            "<IIIII", packet.interface, stamp >> 32, stamp & 0xFFFFFFFF, len(data), packet.wirelen
        )
        self.out.write(_block(EPB, head + _pad(data)))

    def close(self) -> None:
        """Finish the file: an input with no packet to write still makes a readable file."""
        if not self.started:
            self._start()
        if self.format == "pcapng":
            self._catch_up()
        self.out.flush()


#: what a credential's bytes become in a written packet (`read -w` without --show-secrets): as
#: many as there were, so that TCP's sequence numbers and the frames' sizes still hold
MASK: Final = 0x2A  # "*", as `read -x` blanks them


@dataclass(frozen=True, slots=True)
class Span:
    """Secret bytes within one packet's share of a frame: `chunk` the frame's bytes that packet
    carried, `start` and `length` the secret's place in `chunk`; `where` the chunk's place in
    the TCP payload: "end" (the frame goes on in the next packet), "start" (it began in an
    earlier one), "whole", "any" (the frame is whole in this packet: it is looked for), or
    "tail" (it begins `tail` bytes before the payload's end: a WebSocket frame's payload, whose
    place only the layer knew). `fill`: what the secret's bytes become, when not MASK bytes (a
    masked WebSocket payload's: MASK under the frame's own masking key)."""

    chunk: bytes
    start: int
    length: int
    where: str
    fill: bytes = b""
    tail: int = 0


def _sum16(data: bytes) -> int:
    """The one's complement sum of `data` as 16-bit words (TCP's checksum arithmetic)."""
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def mask_packet(packet: RawPacket, spans: list[Span]) -> RawPacket:
    """`packet` with the bytes of `spans` masked (MASK), its TCP checksum updated for the change
    (RFC 1624: a checksum that was right stays right; one a NIC was to fill in stays as it
    was). A payload not whole in the packet (an IP fragment's) has its secrets looked for in
    the packet's bytes, when they are long enough (8 bytes) to be found only where they are."""
    from amqpscope.capture.linklayer import SegmentDecoder

    segment = SegmentDecoder().decode(packet)
    raw = packet.data
    data = bytearray(raw)
    payload = segment.payload if segment is not None else b""
    at = raw.rfind(payload) if payload else -1
    end = at + len(payload)
    for span in spans:
        size = len(span.chunk)
        places: list[int] = []
        if at >= 0:
            if span.where == "end":
                places = [end - size]
            elif span.where == "tail":
                places = [end - span.tail]
            elif span.where in ("start", "whole"):
                places = [at]
            else:
                places = _occurrences(raw, span.chunk, at, end)
            places = [p for p in places if at <= p and raw[p : p + size] == span.chunk]
        if not places and size >= 8:
            places = _occurrences(raw, span.chunk, 0, len(raw))
        for place in places:
            first = place + span.start
            data[first : first + span.length] = span.fill or bytes([MASK]) * span.length
    if at >= 0 and segment is not None:
        _fix_checksum(data, raw, at, end, segment)
    return RawPacket(
        packet.number, packet.ts, packet.linktype, bytes(data), packet.wirelen, packet.interface
    )


def _occurrences(data: bytes, chunk: bytes, start: int, end: int) -> list[int]:
    out = []
    place = data.find(chunk, start, end)
    while place >= 0:
        out.append(place)
        place = data.find(chunk, place + 1, end)
    return out


def _fix_checksum(data: bytearray, raw: bytes, at: int, end: int, segment: Any) -> None:
    """Update the TCP checksum of the header before the payload at `at` (found by its data
    offset and ports) for the payload's change from `raw` to `data`."""
    ports = struct.pack("!HH", segment.src[1], segment.dst[1])
    for hlen in range(20, 64, 4):
        head = at - hlen
        if head >= 0 and raw[head + 12] >> 4 == hlen // 4 and raw[head : head + 4] == ports:
            break
    else:
        return
    old, new = _sum16(raw[at:end]), _sum16(bytes(data[at:end]))
    if old == new:
        return
    checksum = struct.unpack_from("!H", raw, head + 16)[0]
    total = (~checksum & 0xFFFF) + (~old & 0xFFFF) + new
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    struct.pack_into("!H", data, head + 16, ~total & 0xFFFF)


class PcapToPcapng:
    """pcap bytes in, as a capture tool writes them (in any pieces); the same packets out as
    pcapng blocks (`live -w NAME.pcapng`, as `read -w` writes that name): a Section Header and
    an Interface Description (the pcap header's link type, snap length and time resolution),
    then an Enhanced Packet Block per record, its timestamp in the pcap's own units, exact.
    ValueError: not pcap, or a record no capture tool writes (damage)."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._record: struct.Struct | None = None
        self._units = 1_000_000

    def feed(self, data: bytes) -> bytes:
        from amqpscope.capture.files import PCAP_MAGICS

        buf = self._buf
        buf += data
        out: list[bytes] = []
        offset = 0
        if self._record is None:
            if len(buf) < 24:
                return b""
            known = PCAP_MAGICS.get(bytes(buf[:4]))
            if known is None:
                raise ValueError(f"not a pcap stream (starts {bytes(buf[:4]).hex()})")
            endian, self._units = known
            snaplen, linktype = struct.unpack_from(endian + "II", buf, 16)
            self._record = struct.Struct(endian + "IIII")
            out.append(_block(SHB, struct.pack("<IHHq", BYTE_ORDER, 1, 0, -1)))
            options = b""
            if self._units == 10**9:
                options = _option(OPT_TSRESOL, bytes([9])) + _option(OPT_END, b"")
            head = struct.pack("<HHI", linktype & 0xFFFF, 0, snaplen)
            out.append(_block(IDB, head + options))
            offset = 24
        record = self._record
        while len(buf) - offset >= 16:
            seconds, fraction, caplen, wirelen = record.unpack_from(buf, offset)
            if caplen > 16 * 1024 * 1024:
                raise ValueError(f"a record of {caplen} bytes: the stream is damaged")
            if len(buf) - offset - 16 < caplen:
                break
            start = offset + 16
            offset = start + caplen
            stamp = seconds * self._units + fraction
            head = struct.pack("<IIIII", 0, stamp >> 32, stamp & 0xFFFFFFFF, caplen, wirelen)
            out.append(_block(EPB, head + _pad(bytes(buf[start:offset]))))
        del buf[:offset]
        return b"".join(out)
