"""A logged AMQP 0-9-1 frame back into frame bytes, so `codec/amqp091` decodes it as the wire.

Why encode: the frame record's `fields` (hyphenated names, the readable extras `reply-name`,
`method`, `user`, redacted credentials, `property-flags`) and a delivery's `message` are what
the 0-9-1 decoder makes of bytes; encoding what the log printed and decoding it with the same
`Decoder` gives the log's records the capture's shapes with no second mapping to keep in step.
The bytes are private: the record keeps none.

Field-table values carry no tag in a log, so each Python type gets the tag whose JSON is the
same (int → `l`, str → `S`, bytes → `x`, bool → `t`, float → `d`, Decimal → `D`, datetime →
`T`, None → `V`, list → `A`, dict → `F`); the capture's JSON of any tag of that type is equal.
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct
from typing import Any, Final

from amqpscope.codec.amqp091 import spec

FRAME_METHOD: Final = spec.CONSTANTS["FRAME-METHOD"]
FRAME_HEADER: Final = spec.CONSTANTS["FRAME-HEADER"]
FRAME_BODY: Final = spec.CONSTANTS["FRAME-BODY"]
FRAME_END: Final = spec.CONSTANTS["FRAME-END"]
#: method name (`basic.deliver`) -> (class id, method id)
METHOD_IDS: Final = {m.name: ids for ids, m in spec.METHODS.items()}
METHODS_BY_NAME: Final = {m.name: m for m in spec.METHODS.values()}
BASIC_CLASS: Final = 60

#: an integer domain's packer (compiled once: a format string is looked up on every call)
_INTS: Final = {
    domain: struct.Struct(form).pack
    for domain, form in (
        ("octet", ">B"),
        ("short", ">H"),
        ("long", ">I"),
        ("longlong", ">Q"),
        ("timestamp", ">Q"),
    )
}
_FRAME_HEAD: Final = struct.Struct(">BHI").pack
_METHOD_HEAD: Final = struct.Struct(">HH").pack
_FRAME_END: Final = bytes([FRAME_END])


def frame(frame_type: int, channel: int, payload: bytes) -> bytes:
    """A whole frame: header, payload, frame-end."""
    return _FRAME_HEAD(frame_type, channel, len(payload)) + payload + _FRAME_END


def method(name: str, values: dict[str, Any]) -> bytes:
    """A method frame's payload; an argument missing from `values` is encoded as its zero."""
    class_id, method_id = METHOD_IDS[name]
    out = [_METHOD_HEAD(class_id, method_id)]
    bits: list[bool] = []
    for argument, domain in METHODS_BY_NAME[name].arguments:
        value = values.get(argument)
        if domain == "bit":
            bits.append(bool(value))
            continue
        if bits:
            out.append(_bits(bits))
            bits = []
        out.append(_argument(domain, value))
    if bits:
        out.append(_bits(bits))
    return b"".join(out)


def header(body_size: int, properties: dict[str, Any], class_id: int = BASIC_CLASS) -> bytes:
    """A content header's payload: class, weight 0, body size, flags, the set properties."""
    flags = 0
    out: list[bytes] = []
    for index, (name, domain) in enumerate(spec.PROPERTIES[class_id]):
        value = properties.get(name)
        if value is None:
            continue
        flags |= 1 << (15 - index)
        out.append(_argument(domain, value))
    return struct.pack(">HHQH", class_id, 0, body_size, flags) + b"".join(out)


def _bits(bits: list[bool]) -> bytes:
    octet = 0
    for index, bit in enumerate(bits):
        octet |= int(bit) << index
    return bytes([octet])


def _argument(domain: str, value: Any) -> bytes:
    pack = _INTS.get(domain)
    if pack is not None:
        if isinstance(value, dt.datetime):
            value = int(value.timestamp())
        return pack(int(value or 0))
    if domain == "shortstr":
        raw = _bytes(value)
        if len(raw) > 255:
            raise ValueError(f"a short string of {len(raw)} bytes")
        return bytes([len(raw)]) + raw
    if domain == "longstr":
        raw = _bytes(value)
        return struct.pack(">I", len(raw)) + raw
    if domain == "table":
        return _table(value or {})
    raise ValueError(f"no encoding for the domain {domain}")


def _bytes(value: Any) -> bytes:
    if value is None:
        return b""
    if isinstance(value, bytes):
        return value
    return str(value).encode("utf-8", "surrogateescape")


def _table(table: dict[Any, Any]) -> bytes:
    body = b"".join(_short(key) + _value(item) for key, item in table.items())
    return struct.pack(">I", len(body)) + body


def _short(key: Any) -> bytes:
    raw = _bytes(key)
    return bytes([len(raw) & 0xFF]) + raw[:255]


def _value(value: Any) -> bytes:
    """A tagged field value (the tag whose JSON matches the Python type; see the docstring)."""
    if value is None:
        return b"V"
    if isinstance(value, bool):
        return b"t" + bytes([int(value)])
    if isinstance(value, int):
        if -(2**63) <= value < 2**63:
            return b"l" + struct.pack(">q", value)
        return b"T" + struct.pack(">Q", value)  # only an unsigned 64-bit number is this big
    if isinstance(value, float):
        return b"d" + struct.pack(">d", value)
    if isinstance(value, decimal.Decimal):
        exponent = value.as_tuple().exponent
        scale = -int(exponent) if isinstance(exponent, int) and exponent < 0 else 0
        unscaled = int(value.scaleb(scale))
        return b"D" + struct.pack(">Bi", scale, unscaled)
    if isinstance(value, dt.datetime):
        when = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return b"T" + struct.pack(">Q", int(when.timestamp()))
    if isinstance(value, str):
        raw = value.encode("utf-8", "surrogateescape")
        return b"S" + struct.pack(">I", len(raw)) + raw
    if isinstance(value, (bytes, bytearray)):
        return b"x" + struct.pack(">I", len(value)) + bytes(value)
    if isinstance(value, dict):
        return b"F" + _table(value)
    if isinstance(value, (list, tuple)):
        body = b"".join(_value(item) for item in value)
        return b"A" + struct.pack(">I", len(body)) + body
    raise ValueError(f"no field-table encoding for {type(value).__name__}")
