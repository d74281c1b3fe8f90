"""AMQP 0-9-1 field tables and arrays, as RabbitMQ encodes them, to JSON-ready values.

The tags are RabbitMQ's (the 0-9-1 errata, not the spec's grammar, which no broker follows):
t bool, b int8, B uint8, s int16, u uint16, I int32, i uint32, l int64 (and L, read as l),
f float32, d float64, D decimal, S long string, A array, T timestamp, F table, V void, x byte
array. Values become plain JSON (docs/amqp091-json.md): decimals exact as strings, timestamps
ISO 8601, bytes as {"hex": ...}, non-finite floats as strings. Damage raises `Malformed`, which
carries what was decoded before it, so a caller can show the good part and skip the table by
its length.
Nothing here reads past `limit`, the end of the enclosing table, array or frame.
"""

from __future__ import annotations

import math
import struct
from datetime import UTC, datetime
from typing import Any, Final

#: deepest nesting of tables and arrays believed (RabbitMQ sets none; real peers use 2 or 3)
MAX_DEPTH: Final = 32

U8: Final = struct.Struct(">B")
U32: Final = struct.Struct(">I")
U64: Final = struct.Struct(">Q")
DECIMAL: Final = struct.Struct(
    ">Bi"
)  # scale octet, then a signed 32-bit value (as the spec's prose)

_NO_PARTIAL: Final = object()


class Malformed(Exception):
    """A table, array or value that cannot be decoded; `partial` is what was decoded so far."""

    def __init__(self, message: str, partial: Any = _NO_PARTIAL) -> None:
        super().__init__(message)
        self.partial = partial


def text(raw: bytes) -> str | dict[str, str]:
    """An AMQP string: text when it is UTF-8 (pika and RabbitMQ's own reading), else hex."""
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return {"hex": raw.hex()}


def timestamp(seconds: int) -> str | int:
    """Seconds since the epoch as ISO 8601 UTC; the bare number when no calendar date fits."""
    try:
        return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return seconds


def decimal(scale: int, value: int) -> str:
    """A decimal as an exact string: scale 2, value 314 is "3.14" (never exponent notation)."""
    from decimal import Decimal  # here: rarely needed, and 1 ms of every startup

    return format(Decimal(value).scaleb(-scale), "f")


def floating(value: float) -> float | str:
    """A float as JSON allows it: NaN and the infinities have no JSON literal, so they are
    strings ("NaN", "Infinity", "-Infinity")."""
    if math.isfinite(value):
        return value
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


#: fixed-width tags: tag byte -> (struct, conversion or None)
_FIXED: Final[dict[int, tuple[struct.Struct, Any]]] = {
    ord("t"): (U8, bool),
    ord("b"): (struct.Struct(">b"), None),
    ord("B"): (U8, None),
    ord("s"): (struct.Struct(">h"), None),
    ord("u"): (struct.Struct(">H"), None),
    ord("I"): (struct.Struct(">i"), None),
    ord("i"): (U32, None),
    ord("l"): (struct.Struct(">q"), None),
    ord("L"): (struct.Struct(">q"), None),  # RabbitMQ reads 'L' as 'l' (signed; the errata)
    ord("f"): (struct.Struct(">f"), floating),
    ord("d"): (struct.Struct(">d"), floating),
    ord("T"): (U64, timestamp),
}
_S, _X, _A, _F, _V, _D = (ord(c) for c in "SxAFVD")
TAGS: Final = "".join(sorted(chr(t) for t in (*_FIXED, _S, _X, _A, _F, _V, _D)))


def read_table(buf: bytes, pos: int, limit: int, depth: int = 0) -> tuple[dict[str, Any], int]:
    """The table whose 4-byte length is at `pos`: (table, offset after it). Raises `Malformed`
    (with the entries decoded before the damage) if it or anything in it is malformed."""
    if pos + 4 > limit:
        raise Malformed(f"table length runs past the frame (at offset {pos})", {})
    end = pos + 4 + U32.unpack_from(buf, pos)[0]
    if end > limit:
        raise Malformed(f"table of {end - pos - 4} bytes runs past the frame (at offset {pos})", {})
    return table_entries(buf, pos + 4, end, depth), end


def table_entries(buf: bytes, pos: int, end: int, depth: int = 0) -> dict[str, Any]:
    """The entries between `pos` and `end` (a table's body: also AMQPLAIN's response)."""
    if depth >= MAX_DEPTH:
        raise Malformed(f"tables nested deeper than {MAX_DEPTH}", {})
    out: dict[str, Any] = {}
    key: str | None = None
    try:
        while pos < end:
            key = None
            stop = pos + 1 + buf[pos]
            if stop >= end:
                raise Malformed(f"field name runs past the table (at offset {pos})")
            name = text(buf[pos + 1 : stop])
            key = name if isinstance(name, str) else name["hex"]
            out[key], pos = _value(buf, stop, end, depth)
    except Malformed as exc:
        if key is not None and exc.partial is not _NO_PARTIAL:
            out[key] = exc.partial
        exc.partial = out
        raise
    return out


def read_array(buf: bytes, pos: int, limit: int, depth: int = 0) -> tuple[list[Any], int]:
    """The array whose 4-byte length is at `pos`: (values, offset after it)."""
    if depth >= MAX_DEPTH:
        raise Malformed(f"arrays nested deeper than {MAX_DEPTH}", [])
    if pos + 4 > limit:
        raise Malformed(f"array length runs past its table (at offset {pos})", [])
    end = pos + 4 + U32.unpack_from(buf, pos)[0]
    if end > limit:
        raise Malformed(f"array of {end - pos - 4} bytes runs past its table (at offset {pos})", [])
    out: list[Any] = []
    pos += 4
    try:
        while pos < end:
            value, pos = _value(buf, pos, end, depth)
            out.append(value)
    except Malformed as exc:
        if exc.partial is not _NO_PARTIAL:
            out.append(exc.partial)
        exc.partial = out
        raise
    return out, end


def _value(buf: bytes, pos: int, limit: int, depth: int) -> tuple[Any, int]:
    """The tagged value at `pos` (its tag byte first): (value, offset after it)."""
    tag = buf[pos]
    pos += 1
    fixed = _FIXED.get(tag)
    if fixed is not None:
        st, convert = fixed
        if pos + st.size > limit:
            raise Malformed(f"{chr(tag)!r} value runs past its table (at offset {pos})")
        value = st.unpack_from(buf, pos)[0]
        return (convert(value) if convert else value), pos + st.size
    if tag in (_S, _X):
        if pos + 4 > limit:
            raise Malformed(f"{chr(tag)!r} length runs past its table (at offset {pos})")
        end = pos + 4 + U32.unpack_from(buf, pos)[0]
        if end > limit:
            raise Malformed(
                f"{chr(tag)!r} value of {end - pos - 4} bytes runs past its table (at offset {pos})"
            )
        raw = buf[pos + 4 : end]
        return (text(raw) if tag == _S else {"hex": raw.hex()}), end
    if tag == _F:
        return read_table(buf, pos, limit, depth + 1)
    if tag == _A:
        return read_array(buf, pos, limit, depth + 1)
    if tag == _V:
        return None, pos
    if tag == _D:
        if pos + 5 > limit:
            raise Malformed(f"'D' value runs past its table (at offset {pos})")
        scale, value = DECIMAL.unpack_from(buf, pos)
        return decimal(scale, value), pos + 5
    shown = chr(tag) if 32 < tag < 127 else f"0x{tag:02x}"
    raise Malformed(f"unknown field type {shown!r} at offset {pos - 1} (RabbitMQ knows {TAGS})")
