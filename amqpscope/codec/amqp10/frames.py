"""AMQP 1.0 framing: size, doff, type (AMQP or SASL), channel; bodies named by descriptor.

A frame's body starts with a described type; its descriptor (a ulong code or a symbol) names the
performative or SASL frame. An empty body is a heartbeat. Names come from the spec tables.
"""

from __future__ import annotations

import struct
from typing import Final

from amqpscope.codec import frames as k
from amqpscope.codec.amqp10 import spec
from amqpscope.findings import finding

FRAME_HEADER: Final = struct.Struct(">IBBH")
HEADER_SIZE: Final = FRAME_HEADER.size
#: the header's size and data offset alone, for splitting a stream
_SIZE_DOFF: Final = struct.Struct(">IB")
TYPE_AMQP: Final = 0x00
TYPE_SASL: Final = 0x01
#: what a body of each frame type must be: the `provides` of its composite
PROVIDES: Final = {TYPE_AMQP: "frame", TYPE_SASL: "sasl-frame"}
#: descriptor code -> name, for bodies of each frame type
BODIES: Final[dict[int, dict[int, str]]] = {
    ftype: {code: c.name for code, c in spec.COMPOSITES.items() if provides in c.provides}
    for ftype, provides in PROVIDES.items()
}
BODY_SYMBOLS: Final[dict[int, dict[bytes, int]]] = {
    ftype: {spec.COMPOSITES[code].symbol.encode(): code for code in codes}
    for ftype, codes in BODIES.items()
}
ULONG: Final = struct.Struct(">Q")
UINT: Final = struct.Struct(">I")
HUNT_MAX_FRAME: Final = 4 * 1024 * 1024
MIN_MAX_FRAME_SIZE: Final = 512  # the spec's floor for max-frame-size


def descriptor_at(buf: bytes | bytearray | memoryview, off: int, end: int) -> int | bytes | None:
    """The descriptor of the described type at `off` (a code, or a symbol's bytes), or None."""
    if end - off < 2 or buf[off] != 0x00:
        return None
    ctor = buf[off + 1]
    if ctor == 0x53 and end - off >= 3:
        return buf[off + 2]
    if ctor == 0x80 and end - off >= 10:
        return ULONG.unpack_from(buf, off + 2)[0]
    if ctor == 0x44:
        return 0
    if ctor == 0xA3 and end - off >= 3:
        size = buf[off + 2]
        return bytes(buf[off + 3 : off + 3 + size]) if end - off >= 3 + size else None
    if ctor == 0xB3 and end - off >= 6:
        size = UINT.unpack_from(buf, off + 2)[0]
        return bytes(buf[off + 6 : off + 6 + size]) if end - off >= 6 + size else None
    return None


def body_code(descriptor: int | bytes | None, ftype: int) -> int | None:
    if isinstance(descriptor, bytes):
        return BODY_SYMBOLS[ftype].get(descriptor)
    return descriptor if descriptor in BODIES.get(ftype, ()) else None


def probe(buf: bytes | bytearray | memoryview, off: int, sasl: bool = False) -> int:
    """Strict check of the frame at `off`: its length, 0 if incomplete, -1 if it cannot be one.
    SASL frames only count when `sasl` (they never follow the AMQP layer)."""
    avail = len(buf) - off
    if avail < HEADER_SIZE:
        return 0 if avail <= 0 or buf[off] == 0 else -1
    size, doff, ftype, _channel = FRAME_HEADER.unpack_from(buf, off)
    if size < HEADER_SIZE or size > HUNT_MAX_FRAME or doff < 2 or doff * 4 > size:
        return -1
    if ftype != TYPE_AMQP and not (sasl and ftype == TYPE_SASL):
        return -1
    if size == doff * 4:  # empty frame: a heartbeat, AMQP only
        return size if ftype == TYPE_AMQP else -1
    body = off + doff * 4
    end = off + size
    if avail < min(size, doff * 4 + 40):
        return 0
    if body_code(descriptor_at(buf, body, min(end, len(buf))), ftype) is None:
        return -1
    return size if avail >= size else 0


def frame_length(buf: bytes | bytearray | memoryview, off: int) -> int:
    """Length of the frame at `off` as its header says (0 if the header is incomplete), for
    splitting a stream known to be 1.0; -1 if the size or data offset cannot be right."""
    if len(buf) - off < HEADER_SIZE:
        return 0
    if isinstance(buf, bytes):  # the usual case: read byte by byte, natively when compiled
        size = buf[off] << 24 | buf[off + 1] << 16 | buf[off + 2] << 8 | buf[off + 3]
        doff = buf[off + 4]
    else:
        size, doff = _SIZE_DOFF.unpack_from(buf, off)
    if size < HEADER_SIZE or doff < 2 or doff * 4 > size:
        return -1
    return size


#: descriptor code -> name of the AMQP frame bodies (performatives), the usual case
_PERFORMATIVES: Final[dict[int, str]] = BODIES[TYPE_AMQP]
#: the same by code, for `make_frame`: a tuple index, not a dict lookup
_PERFORMATIVE_BY_CODE: Final[tuple[str | None, ...]] = tuple(
    [_PERFORMATIVES.get(code) for code in range(256)]
)


def make_frame(data: bytes) -> k.Frame:
    """Name the complete frame `data` and note what is wrong with it."""
    n = len(data)
    if n >= HEADER_SIZE + 3 and data[5] == TYPE_AMQP:
        # the common case, a performative whose descriptor is a small code: the header read byte
        # by byte (natively, compiled), not by struct
        size = data[0] << 24 | data[1] << 16 | data[2] << 8 | data[3]
        body = data[4] * 4
        if (
            size > body
            and size - body >= 3
            and body + 3 <= n
            and data[body] == 0x00
            and data[body + 1] == 0x53
        ):
            name = _PERFORMATIVE_BY_CODE[data[body + 2]]
            if name is not None:
                return k.Frame("1.0", k.PERFORMATIVE, name, data[6] << 8 | data[7], data)
    return _checked_frame(data)


def _checked_frame(data: bytes) -> k.Frame:
    """`make_frame` of a frame that is not the common case (SASL, a heartbeat, a descriptor
    given another way, damage)."""
    size, doff, ftype, channel = FRAME_HEADER.unpack_from(data)
    if ftype not in PROVIDES:
        findings = [finding("amqp.bad-frame", f"unknown AMQP 1.0 frame type {ftype:#04x}")]
        return k.Frame("1.0", "unknown", "unknown", channel, data, findings=findings)
    kind = k.PERFORMATIVE if ftype == TYPE_AMQP else k.SASL
    if size == doff * 4:
        if ftype == TYPE_SASL:
            findings = [finding("amqp.bad-frame", "empty SASL frame")]
            return k.Frame("1.0", kind, kind, channel, data, findings=findings)
        return k.Frame("1.0", k.HEARTBEAT, k.HEARTBEAT, channel, data)
    body = doff * 4
    descriptor: int | bytes | None
    if size - body >= 3 and data[body] == 0x00 and data[body + 1] == 0x53:
        descriptor = data[body + 2]  # the usual form, as `descriptor_at` reads it: a small code
    else:
        descriptor = descriptor_at(data, body, size)
    code = body_code(descriptor, ftype)
    if code is None:
        what = f"frame body with descriptor {descriptor!r}"
        return k.Frame(
            "1.0", kind, kind, channel, data, findings=[finding("amqp.unknown-descriptor", what)]
        )
    return k.Frame("1.0", kind, BODIES[ftype][code], channel if kind != k.SASL else None, data)
