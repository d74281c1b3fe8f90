"""AMQP 0-9-1 framing: type, channel, size, payload, 0xCE; every frame named from the tables.

0-8 and 0-9 frame the same way; their methods are named from the 0-8 table where ids differ.
"""

from __future__ import annotations

import struct
from typing import Final

from amqpscope.codec import frames as k
from amqpscope.codec.amqp091 import spec, spec08
from amqpscope.findings import Finding, finding

FRAME_HEADER: Final = struct.Struct(">BHI")
CLASS_METHOD: Final = struct.Struct(">HH")
HEADER_SIZE: Final = FRAME_HEADER.size
FRAME_END: Final = spec.CONSTANTS["FRAME-END"]
TYPE_METHOD: Final = spec.CONSTANTS["FRAME-METHOD"]
TYPE_HEADER: Final = spec.CONSTANTS["FRAME-HEADER"]
TYPE_BODY: Final = spec.CONSTANTS["FRAME-BODY"]
TYPE_HEARTBEAT: Final = spec.CONSTANTS["FRAME-HEARTBEAT"]
KINDS: Final = {
    TYPE_METHOD: k.METHOD,
    TYPE_HEADER: k.CONTENT_HEADER,
    TYPE_BODY: k.CONTENT_BODY,
    TYPE_HEARTBEAT: k.HEARTBEAT,
}
#: KINDS by frame type, as a tuple of the 256 types ("" for none): no dict lookup per frame
KIND_OF: Final = tuple(KINDS.get(ftype, "") for ftype in range(256))
#: the methods' names by the frame's class and method ids read as one number (class-id << 16 |
#: method-id): `make_frame` names a method with no tuple made and hashed, and no attribute of a
#: Method (a NamedTuple, read by getattr when compiled). Bound here as Final: compiled, a Final
#: name is read directly, any other module-level name (or another module's attribute) by a
#: dictionary lookup per use
NAMES_091_BY_ID: Final = {c << 16 | m: method.name for (c, m), method in spec.METHODS.items()}
NAMES_08_BY_ID: Final = {c << 16 | m: method.name for (c, m), method in spec08.METHODS.items()}
#: largest frame believed while hunting for a boundary (RabbitMQ's default frame_max is 128 KiB;
#: peers may negotiate more, which is fine once framing is locked)
HUNT_MAX_FRAME: Final = 4 * 1024 * 1024
#: largest frame believed at all: above this the size field is damage, not data
MAX_FRAME: Final = 1 << 31
#: the first byte of a protocol header ("AMQP"), which is no frame type; `frame_length` says
#: MAYBE_HEADER (no length is ever negative but -1) when a frame would start with it
HEADER_FIRST: Final = ord("A")
MAYBE_HEADER: Final = -2


#: 0-9 is named with the 0-9-1 table, as RabbitMQ frames it ("we can safely treat [0-9] as
#: though it were 0-9-1", rabbit_reader); only 0-8 has tables of its own
def methods_for(
    version: str,
) -> dict[tuple[int, int], spec.Method] | dict[tuple[int, int], spec08.Method]:
    return spec08.METHODS if version == "0-8" else spec.METHODS


def probe(buf: bytes | bytearray | memoryview, off: int, version: str = "0-9-1") -> int:
    """Strict check of the frame at `off`: its length, 0 if incomplete, -1 if it cannot be one."""
    if len(buf) - off < HEADER_SIZE:
        return 0 if off >= len(buf) or buf[off] in KINDS else -1
    ftype, channel, size = FRAME_HEADER.unpack_from(buf, off)
    if ftype not in KINDS or size > HUNT_MAX_FRAME:
        return -1
    if ftype == TYPE_HEARTBEAT and (size or channel):
        return -1
    if ftype == TYPE_METHOD:
        if size < 4:
            return -1
        ids_known = len(buf) - off >= HEADER_SIZE + 4
        if ids_known and CLASS_METHOD.unpack_from(buf, off + HEADER_SIZE) not in methods_for(
            version
        ):
            return -1
    if ftype == TYPE_HEADER:
        if size < 14:
            return -1
        class_known = len(buf) - off >= HEADER_SIZE + 2
        if class_known and struct.unpack_from(">H", buf, off + HEADER_SIZE)[0] not in spec.CLASSES:
            return -1
    end = off + HEADER_SIZE + size
    if len(buf) <= end:
        return 0
    return end + 1 - off if buf[end] == FRAME_END else -1


def frame_length(buf: bytes | bytearray | memoryview, off: int, checked: bool = False) -> int:
    """Length of the frame at `off` as its header says (0 if the header is incomplete), for
    splitting a stream already known to be 0-9-1; -1 if the size field is beyond belief. Unless
    `checked`, MAYBE_HEADER when the first byte is a protocol header's: the caller, which must
    notice a header at every boundary, looks for one only then (not at every frame)."""
    have = len(buf) - off
    if have < HEADER_SIZE:
        return MAYBE_HEADER if have > 0 and not checked and buf[off] == HEADER_FIRST else 0
    if isinstance(buf, bytes):  # the usual case: read byte by byte, natively when compiled
        ftype = buf[off]
        size = buf[off + 3] << 24 | buf[off + 4] << 16 | buf[off + 5] << 8 | buf[off + 6]
    else:
        ftype, _, size = FRAME_HEADER.unpack_from(buf, off)
    if ftype == HEADER_FIRST and not checked:
        return MAYBE_HEADER
    return HEADER_SIZE + size + 1 if size < MAX_FRAME else -1


def make_frame(data: bytes, version: str) -> k.Frame:
    """Name the complete frame `data` (header to frame-end) and note what is wrong with it."""
    n = len(data)
    if n > HEADER_SIZE and data[n - 1] == FRAME_END:
        # the common case, first and without a findings list; the header read byte by byte
        # (natively, compiled), not by struct
        ftype = data[0]
        channel = data[1] << 8 | data[2]
        if ftype == TYPE_METHOD:
            size = data[3] << 24 | data[4] << 16 | data[5] << 8 | data[6]
            if size >= 4 and n >= HEADER_SIZE + 4:
                ids = data[7] << 24 | data[8] << 16 | data[9] << 8 | data[10]
                names = NAMES_08_BY_ID if version == "0-8" else NAMES_091_BY_ID
                name = names.get(ids)
                if name is not None:
                    return k.Frame(version, k.METHOD, name, channel, data)
        else:
            kind = KIND_OF[ftype]
            if kind:
                return k.Frame(version, kind, kind, channel, data)
    return _checked_frame(data, version)


def _checked_frame(data: bytes, version: str) -> k.Frame:
    """`make_frame` of a frame that is not the common case: its findings."""
    ftype, channel, size = FRAME_HEADER.unpack_from(data)
    findings: list[Finding] = []
    kind = KINDS.get(ftype)
    if data[-1] != FRAME_END:
        findings.append(finding("amqp.bad-frame-end", f"frame-end is {data[-1]:#04x}, not 0xce"))
    if kind is None:
        findings.append(finding("amqp.bad-frame", f"unknown 0-9-1 frame type {ftype}"))
        return k.Frame(version, "unknown", "unknown", channel, data, findings=findings)
    name = kind
    if ftype == TYPE_METHOD:
        if size < 4:
            findings.append(finding("amqp.bad-frame", f"method frame of {size} bytes"))
        else:
            ids = CLASS_METHOD.unpack_from(data, HEADER_SIZE)
            method = methods_for(version).get(ids)
            if method is None:
                findings.append(finding("amqp.unknown-method", f"class {ids[0]} method {ids[1]}"))
            else:
                name = method.name
    return k.Frame(version, kind, name, channel, data, findings=findings)
