"""A logged AMQP 1.0 frame back into frame bytes, so the codec decodes it as it decodes the wire.

Why encode at all: the frame record's `fields` (names, defaults, choice names, `multiple` as
arrays, nested `type`s, redacted credentials) and a delivery's `message` are what
`codec/amqp10` makes of bytes. Encoding what the log printed and decoding it with the same
`Decoder` gives a log's records the capture's shapes by construction, with no second mapping
to keep in step. The bytes are private: the record keeps none (`size` is the log's to say, and
it says nothing).

Types: a printed integer has no width, so a performative field's spec type gives it (handle as
uint, channel-max as ushort, role's `false` as boolean); where no field type applies (map
values, list elements) an unsigned (hex) integer becomes a ulong and a signed one a long, which
read back as the same JSON number. The kinds the text shows (string, symbol, binary, list, map,
array, described) are kept as printed, so a field sent with the wrong type still gets the
decoder's finding.
"""

from __future__ import annotations

import struct
from typing import Any, Final

from amqpscope.codec.amqp10 import spec
from amqpscope.logs.proton_values import (
    Array,
    Binary,
    Decimal,
    Described,
    Fields,
    Hex,
    Map,
    Symbol,
    Uuid,
)

#: an integer type -> (constructor, struct format)
_INTS: Final = {
    "ubyte": (0x50, ">B"),
    "ushort": (0x60, ">H"),
    "uint": (0x70, ">I"),
    "ulong": (0x80, ">Q"),
    "byte": (0x51, ">b"),
    "short": (0x61, ">h"),
    "int": (0x71, ">i"),
    "long": (0x81, ">q"),
    "timestamp": (0x83, ">q"),
}
#: array element type names, new (`@<uint>`) and old (`@PN_UINT`) -> primitive type
_ARRAY_TYPES: Final = {
    **{t: t for t in (*_INTS, "boolean", "string", "symbol", "binary", "list", "map", "uuid")},
    "bool": "boolean",
    "float": "float",
    "double": "double",
    **{f"PN_{t.upper()}": t for t in (*_INTS, "string", "symbol", "binary", "list", "map")},
    "PN_BOOL": "boolean",
    "PN_UUID": "uuid",
    "PN_FLOAT": "float",
    "PN_DOUBLE": "double",
    "PN_DESCRIBED": "described",
}
#: composite by descriptor code and by name
_COMPOSITES: Final = spec.COMPOSITES
_BY_NAME: Final = {c.name: (code, c) for code, c in spec.COMPOSITES.items()}
#: composite name -> field name -> position
_FIELD_INDEX: Final = {
    c.name: {f.name: i for i, f in enumerate(c.fields)} for c in spec.COMPOSITES.values()
}
#: a type name -> the primitive it stands for
_PRIMITIVE: dict[str, str] = {}


def primitive(type_name: str) -> str:
    found = _PRIMITIVE.get(type_name)
    if found is None:
        found = type_name
        for _ in range(16):
            restricted = spec.RESTRICTED.get(found)
            if restricted is None:
                break
            found = restricted.source
        _PRIMITIVE[type_name] = found
    return found


def _sized(ctor: int, payload: bytes) -> bytes:
    return bytes((ctor,)) + struct.pack(">I", len(payload)) + payload


def _int(value: int, type_name: str | None, unsigned: bool) -> bytes:
    """`unsigned`: printed in hex, asked by the caller while the value is still an object
    (compiled, a value narrowed to int is unboxed and its `Hex` class lost)."""
    if type_name in _INTS:
        ctor, fmt = _INTS[type_name]
        try:
            return bytes((ctor,)) + struct.pack(fmt, value)
        except struct.error:
            pass  # does not fit the field's type: sent as something else
    unsigned = unsigned or value > 0x7FFFFFFFFFFFFFFF
    if unsigned and 0 <= value <= 0xFFFFFFFFFFFFFFFF:
        return b"\x80" + struct.pack(">Q", value)
    if -0x8000000000000000 <= value <= 0x7FFFFFFFFFFFFFFF:
        return b"\x81" + struct.pack(">q", value)
    raise ValueError(f"integer {value} does not fit 64 bits")


def encode(value: Any, type_name: str | None = None) -> bytes:
    """`value` (a printed-value tree) as AMQP 1.0 bytes; `type_name` the field's type, if any."""
    if value is None:
        return b"\x40"
    if value is True or value is False:
        return b"\x41" if value else b"\x42"
    if isinstance(value, Decimal):
        width = value.width
        ctor = {32: 0x74, 64: 0x84, 128: 0x94}.get(width)
        if ctor is None:
            raise ValueError(f"decimal of {width} bits")
        return bytes((ctor,)) + value.bits.to_bytes(width // 8, "big")
    unsigned = isinstance(value, Hex)  # asked before `value` is narrowed to int (see `_int`)
    if isinstance(value, int):
        return _int(value, primitive(type_name) if type_name else None, unsigned)
    if isinstance(value, float):
        if type_name and primitive(type_name) == "float":
            return b"\x72" + struct.pack(">f", value)
        return b"\x82" + struct.pack(">d", value)
    if isinstance(value, Symbol):
        return _sized(0xB3, value.encode())
    if isinstance(value, str):
        return _sized(0xB1, value.encode())
    if isinstance(value, Uuid):
        return b"\x98" + bytes(value)
    if isinstance(value, Binary):
        return _sized(0xB0, bytes(value))
    if isinstance(value, Described):
        return described(value)
    if isinstance(value, Map):
        body = b"".join(encode(k) + encode(v) for k, v in value.items)
        return b"\xd1" + struct.pack(">II", len(body) + 4, 2 * len(value.items)) + body
    if isinstance(value, Array):
        return array(value)
    if isinstance(value, list):
        body = b"".join(encode(v) for v in value)
        return b"\xd0" + struct.pack(">II", len(body) + 4, len(value)) + body
    raise ValueError(f"cannot encode {type(value).__name__}")


def array(value: Array) -> bytes:
    element = _ARRAY_TYPES.get(value.type)
    if element is None or element == "described":
        raise ValueError(f"array of {value.type}")
    if element in ("string", "symbol", "binary", "list", "map", "boolean"):
        # one constructor for all: the 32-bit forms (booleans as 0x56 and a byte)
        if element == "boolean":
            body = b"".join(b"\x01" if v else b"\x00" for v in value.items)
            ctor = 0x56
        else:
            parts = [encode(Symbol(v) if element == "symbol" else v) for v in value.items]
            ctor = parts[0][0] if parts else {"string": 0xB1, "symbol": 0xB3}.get(element, 0xB0)
            if any(p[0] != ctor for p in parts):
                raise ValueError(f"array of {value.type} holds other types")
            body = b"".join(p[1:] for p in parts)
    elif element in _INTS:
        ctor, fmt = _INTS[element]
        body = b"".join(struct.pack(fmt, int(v)) for v in value.items)
    elif element in ("float", "double"):
        ctor, fmt = (0x72, ">f") if element == "float" else (0x82, ">d")
        body = b"".join(struct.pack(fmt, float(v)) for v in value.items)
    else:  # uuid
        ctor = 0x98
        body = b"".join(bytes(v) for v in value.items)
    count = len(value.items)
    return b"\xf0" + struct.pack(">II", len(body) + 5, count) + bytes((ctor,)) + body


def described(value: Described) -> bytes:
    """A described value; a known composite's fields placed and typed by the spec table."""
    descriptor = value.descriptor
    composite = _COMPOSITES.get(descriptor) if isinstance(descriptor, int) else None
    if composite is None and value.name is not None and value.name in _BY_NAME:
        descriptor, composite = _BY_NAME[value.name]
    head = (
        b"\x00" + _sized(0xB3, descriptor.encode())
        if isinstance(descriptor, str)
        else b"\x00\x80" + struct.pack(">Q", descriptor)
    )
    inner = value.value
    if composite is None or not isinstance(inner, Fields):
        if isinstance(inner, Fields):
            inner = [v for _, v in inner]
        return head + encode(inner)
    slots: list[bytes] = []
    index = _FIELD_INDEX[composite.name]
    for position, (name, item) in enumerate(inner):
        at = index.get(name, position) if name is not None else len(slots)
        if name is None and at < len(composite.fields):
            at = max(at, position)
        while len(slots) <= at:
            slots.append(b"\x40")
        field_type = composite.fields[at].type if at < len(composite.fields) else None
        multiple = at < len(composite.fields) and composite.fields[at].multiple
        if multiple and isinstance(item, Array):
            slots[at] = array(item)
        else:
            slots[at] = encode(item, None if field_type == "*" else field_type)
    body = b"".join(slots)
    return head + b"\xd0" + struct.pack(">II", len(body) + 4, len(slots)) + body


#: frame types for the frame header
TYPE_AMQP: Final = 0x00
TYPE_SASL: Final = 0x01


def frame_bytes(channel: int, frame_type: int, body: bytes, payload: bytes = b"") -> bytes:
    """A whole frame: the 8-byte header (doff 2), the body, then any transfer payload."""
    size = 8 + len(body) + len(payload)
    return struct.pack(">IBBH", size, 2, frame_type, channel) + body + payload
