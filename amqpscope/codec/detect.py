"""Which AMQP a byte stream speaks: protocol headers by table, frame shape when there is none.

A connection seen from its first byte announces itself with an 8-byte protocol header; the table
below names every header AMQP has had, so older versions are named rather than mistaken for 0-9-1.
A capture that starts mid-connection (or resumes after lost segments) has no header: there the
stream is only claimed when several consecutive frames are valid in every checkable detail, so
that other protocols (RabbitMQ streams, EPMD, TLS, HTTP) are never taken for AMQP.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from amqpscope.codec.amqp091 import frames as frames091
from amqpscope.codec.amqp10 import frames as frames10

MAGIC: Final = b"AMQP"


class Header(NamedTuple):
    """A protocol header: the version it names, and for 1.0 the layer that follows it."""

    version: str
    layer: str  # "amqp", "sasl", "tls" for 1.0; "amqp" for the others


#: the 4 bytes after "AMQP" -> what they announce
PROTOCOL_HEADERS: Final[dict[bytes, Header]] = {
    b"\x00\x01\x00\x00": Header("1.0", "amqp"),
    b"\x02\x01\x00\x00": Header("1.0", "tls"),
    b"\x03\x01\x00\x00": Header("1.0", "sasl"),
    b"\x00\x00\x09\x01": Header("0-9-1", "amqp"),
    b"\x01\x01\x09\x01": Header("0-8", "amqp"),  # 0-8 as the published spec wrote it (py-amqplib)
    b"\x01\x01\x00\x09": Header("0-9", "amqp"),
    b"\x01\x01\x08\x00": Header("0-8", "amqp"),
    b"\x01\x01\x00\x0a": Header("0-10", "amqp"),
}

#: versions framed like 0-9-1 (type, channel, size, payload, 0xCE)
FRAMED_LIKE_091: Final = frozenset({"0-9-1", "0-9", "0-8"})

#: frames that must check out in a row before a headerless stream is claimed as AMQP
FRAMES_TO_CLAIM: Final = 3
#: when the other direction is already known to be AMQP of that version, one strong frame will do
FRAMES_TO_CLAIM_KNOWN: Final = 1


def parse_header(buf: bytes | bytearray | memoryview, off: int = 0) -> Header | None:
    """The header at `off`, if the 8 bytes there are a protocol header amqpscope knows."""
    if buf[off : off + 4] != MAGIC:
        return None
    return PROTOCOL_HEADERS.get(bytes(buf[off + 4 : off + 8]))


def header_name(raw: bytes) -> str:
    """A readable name for any 8-byte "AMQP" header, known or not (`AMQP 0-9-1`, `AMQP 1.2.3.4`)."""
    header = PROTOCOL_HEADERS.get(raw[4:8])
    if header is None:
        return "AMQP " + ".".join(str(b) for b in raw[4:8])
    if header.version == "1.0":
        return f"AMQP 1.0 ({header.layer})"
    return f"AMQP {header.version}"


def probe(version: str, buf: bytes | bytearray | memoryview, off: int, sasl: bool = False) -> int:
    """Length of the well-formed frame of `version` at `off`; 0 if more bytes are needed; -1 if
    the bytes there cannot be such a frame. Strict: used to find frames, not just to split."""
    if version == "1.0":
        return frames10.probe(buf, off, sasl)
    return frames091.probe(buf, off, version)


class Claim(NamedTuple):
    """What a hunt found: `status` is "found" (a boundary at `offset` of `version`), "more" (keep
    the bytes from `offset` and hunt again when more arrive) or "none" (nothing before `offset`
    can start a frame: drop those bytes)."""

    status: str
    offset: int
    version: str = ""


def claim(
    buf: bytes | bytearray | memoryview,
    versions: tuple[str, ...],
    needed: int,
    final: bool,
    sasl: bool = False,
) -> Claim:
    """Hunt for the first frame boundary in `buf`: a protocol header, or `needed` consecutive
    strict frames of one of `versions`. With `final` (no more bytes will come), a run of valid
    frames that reaches the end of the buffer counts as found. `sasl`: 1.0 SASL frames count
    too (a direction hunted from its start, whose SASL header is missing)."""
    size = len(buf)
    for off in range(size):
        if buf[off] == 0x41 and buf[off : off + 4] == MAGIC:
            if size - off < 8:
                return Claim("more", off)
            header = parse_header(buf, off)
            if header is not None:
                return Claim("found", off, header.version)
        for version in versions:
            found, pos, length = 0, off, -1
            while found < needed:
                length = probe(version, buf, pos, sasl)
                if length <= 0:
                    break
                found += 1
                pos += length
            if found >= needed:
                return Claim("found", off, version)
            if length == 0:  # every frame so far checked out; the buffer ends inside the next
                if final and found:
                    return Claim("found", off, version)
                if not final:
                    return Claim("more", off)
    return Claim("none", size)
