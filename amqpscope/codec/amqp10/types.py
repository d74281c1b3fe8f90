"""The AMQP 1.0 type system: constructor bytes to JSON-ready values, bounded by the frame.

Every reader is built from `spec.ENCODINGS` (the constructor byte gives the type, the category and
the width) and dispatched through one 256-entry table. A reader takes the buffer position just
past its constructor and the end it may not cross, and returns (value, next position). Damage
raises `Malformed` (internal: the callers that can resume, composites and message sections,
catch it and report a finding at the offset); oddities that do not stop decoding (invalid UTF-8,
leftover bytes in a list) are noted in `Context.findings` and decoding goes on.

Bounds that keep a hostile frame cheap: nothing is read past `end`; a size or count is checked
against the bytes that are really there before anything is decoded (so a "4 GB" size costs
nothing); compound values nest at most `MAX_DEPTH` deep; the elements of zero-width type (which
cost no bytes, so a few bytes could claim millions) are capped per decoding pass, not per array.
The limits are module constants, read at each use, so a caller may change them.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Final

from amqpscope.codec.amqp10 import jsonmap, spec
from amqpscope.findings import Finding, finding

MAX_DEPTH: Final = 64
#: elements of a zero-width type (null, true, uint0, list0...) the arrays of one decoding pass
#: (a frame body, a message) may claim to hold, all arrays together
MAX_ZERO_WIDTH_ELEMENTS: Final = 4096
DESCRIBED: Final = 0x00
NULL: Final = 0x40
#: the constructor of a one-byte ulong, how descriptor codes are usually sent
SMALL_ULONG: Final = next(
    c for c, e in spec.ENCODINGS.items() if e.type == "ulong" and e.width == 1
)
#: constructors of each category, from the table
ARRAYS: Final = frozenset(c for c, e in spec.ENCODINGS.items() if e.category == "array")
LISTS: Final = frozenset(c for c, e in spec.ENCODINGS.items() if e.type == "list")
MAPS: Final = frozenset(c for c, e in spec.ENCODINGS.items() if e.type == "map")
BINARIES: Final = frozenset(c for c, e in spec.ENCODINGS.items() if e.type == "binary")
SYMBOLS: Final = frozenset(c for c, e in spec.ENCODINGS.items() if e.type == "symbol")


class Malformed(Exception):
    """The value at `offset` cannot be decoded. Never leaves this package."""

    def __init__(self, offset: int, why: str) -> None:
        super().__init__(why)
        self.offset = offset
        self.why = why


class Context:
    """One decoding pass over `buf`: where findings go, how offsets are named, which described
    types have a decoder (`composites.py` fills `HANDLERS`), and whether unknown descriptors are
    expected here (filter values are extension types by definition). The buffer is bytes (a
    copy of anything else): compiled, indexing bytes is a C primitive, a memoryview's a call
    through the object protocol with the index boxed."""

    __slots__ = ("buf", "extensions", "findings", "handlers", "where", "zero_width")

    def __init__(self, buf: bytes | bytearray | memoryview, where: str = "offset") -> None:
        self.buf: bytes = buf if isinstance(buf, bytes) else bytes(buf)
        self.zero_width = MAX_ZERO_WIDTH_ELEMENTS  # zero-width array elements still allowed
        self.findings: list[Finding] = []
        self.where = where
        self.handlers = HANDLERS
        self.extensions = 0

    def note(self, code: str, offset: int, why: str) -> None:
        self.findings.append(finding(code, f"{why} at {self.where} {offset}"))

    def malformed(self, exc: Malformed) -> None:
        self.note("amqp10.bad-encoding", exc.offset, exc.why)


#: (context, position past the constructor, end, depth) -> (value, next position)
Reader = Callable[[Context, int, int, int], tuple[Any, int]]
#: a described type's decoder: (context, descriptor, constructor of the described value,
#: position past that constructor, end, depth) -> (value, next position)
Handler = Callable[[Context, Any, int, int, int, int], tuple[Any, int]]
#: descriptor (numeric code and symbol) -> handler; filled by composites.py
HANDLERS: Final[dict[Any, Handler]] = {}
READERS: Final[list[Reader]] = []


# -- fixed width -------------------------------------------------------------------------------
_INT_FORMATS = {(False, 1): "B", (False, 2): "H", (False, 4): "I", (False, 8): "Q"}
_INT_FORMATS |= {(True, 1): "b", (True, 2): "h", (True, 4): "i", (True, 8): "q"}
_SIGNED: Final = frozenset(("byte", "short", "int", "long"))
_UNSIGNED: Final = frozenset(("ubyte", "ushort", "uint", "ulong"))


def _short(name: str, need: int, off: int, end: int) -> Malformed:
    return Malformed(off, f"{name} needs {need} bytes, {max(end - off, 0)} left")


def _constant(value: Any) -> Reader:
    def read(ctx: Context, off: int, end: int, depth: int) -> tuple[Any, int]:
        return value, off

    return read


def _empty_list(ctx: Context, off: int, end: int, depth: int) -> tuple[Any, int]:
    return [], off


def _unpacker(enc: spec.Encoding, fmt: str, convert: Callable[..., Any] | None = None) -> Reader:
    unpack = struct.Struct(">" + fmt).unpack_from
    width = enc.width
    name = enc.type

    if convert is None:

        def read(ctx: Context, off: int, end: int, depth: int) -> tuple[Any, int]:
            nxt = off + width
            if nxt > end:
                raise _short(name, width, off, end)
            return unpack(ctx.buf, off)[0], nxt

    else:

        def read(ctx: Context, off: int, end: int, depth: int) -> tuple[Any, int]:
            nxt = off + width
            if nxt > end:
                raise _short(name, width, off, end)
            return convert(ctx, off, unpack(ctx.buf, off)[0]), nxt

    return read


def _to_bool(ctx: Context, off: int, raw: int) -> bool:
    if raw > 1:
        ctx.note("amqp10.bad-encoding", off, f"boolean byte {raw:#04x} is neither 0 nor 1")
    return raw != 0


def _to_char(ctx: Context, off: int, raw: int) -> str:
    if raw > 0x10FFFF or 0xD800 <= raw <= 0xDFFF:
        ctx.note("amqp10.bad-encoding", off, f"char {raw:#x} is not a Unicode scalar value")
        return f"U+{raw:04X}"
    return chr(raw)


def _to_timestamp(ctx: Context, off: int, raw: int) -> str:
    return jsonmap.timestamp(raw)


def _to_double(ctx: Context, off: int, raw: float) -> float | str:
    return jsonmap.double(raw)


def _to_float(ctx: Context, off: int, raw: float) -> float | str:
    return jsonmap.float32(ctx.buf[off : off + 4], raw)


def _to_decimal(bits: int) -> Callable[[Context, int, Any], str]:
    def convert(ctx: Context, off: int, raw: int) -> str:
        return jsonmap.decimal(raw, bits)

    return convert


def _bytes_reader(enc: spec.Encoding, convert: Callable[[bytes], Any]) -> Reader:
    width = enc.width
    name = enc.type

    def read(ctx: Context, off: int, end: int, depth: int) -> tuple[Any, int]:
        nxt = off + width
        if nxt > end:
            raise _short(name, width, off, end)
        return convert(ctx.buf[off:nxt]), nxt

    return read


def _decimal128(raw: bytes) -> str:
    return jsonmap.decimal(int.from_bytes(raw, "big"), 128)


def _fixed(enc: spec.Encoding) -> Reader:
    """The reader of a fixed-width encoding, chosen by its type, name and width."""
    t, width = enc.type, enc.width
    if width == 0:
        if t == "list":
            return _empty_list
        value = {"null": None, "true": True, "false": False}.get(enc.name, 0)
        return _constant(value)
    if t in _SIGNED or t in _UNSIGNED:
        return _unpacker(enc, _INT_FORMATS[(t in _SIGNED, width)])
    if t == "boolean":
        return _unpacker(enc, "B", _to_bool)
    if t == "char":
        return _unpacker(enc, "I", _to_char)
    if t == "timestamp":
        return _unpacker(enc, "q", _to_timestamp)
    if t == "float":
        return _unpacker(enc, "f", _to_float)
    if t == "double":
        return _unpacker(enc, "d", _to_double)
    if t in ("decimal32", "decimal64"):
        return _unpacker(enc, "I" if width == 4 else "Q", _to_decimal(width * 8))
    if t == "decimal128":
        return _bytes_reader(enc, _decimal128)
    if t == "uuid":
        return _bytes_reader(enc, jsonmap.uuid)
    raise ValueError(f"no reader for fixed encoding {enc}")  # pragma: no cover (table error)


# -- variable width: binary, string, symbol ----------------------------------------------------
def _variable(enc: spec.Encoding) -> Reader:
    width = enc.width
    size_of = struct.Struct(">B" if width == 1 else ">I").unpack_from
    t = enc.type

    def sized(ctx: Context, off: int, end: int) -> tuple[int, int]:
        start = off + width
        if start > end:
            raise _short(f"{t} size", width, off, end)
        size = size_of(ctx.buf, off)[0]
        if size > end - start:
            raise Malformed(off, f"{t} of {size} bytes runs past the end ({end - start} left)")
        return start, start + size

    if t == "binary":

        def read(ctx: Context, off: int, end: int, depth: int) -> tuple[Any, int]:
            start, nxt = sized(ctx, off, end)
            return ctx.buf[start:nxt].hex(), nxt

    else:

        def read(ctx: Context, off: int, end: int, depth: int) -> tuple[Any, int]:
            start, nxt = sized(ctx, off, end)
            raw = ctx.buf[start:nxt]
            try:
                return raw.decode("utf-8"), nxt  # compiled: PyUnicode_DecodeUTF8, no type call
            except UnicodeDecodeError as exc:
                ctx.note("amqp10.invalid-utf8", start + exc.start, f"{t} is not valid UTF-8")
                return str(raw, "utf-8", "backslashreplace"), nxt

    return read


# -- compound: list and map; array -------------------------------------------------------------
def _compound_header(
    ctx: Context, off: int, end: int, depth: int, width: int, what: str
) -> tuple[int, int, int]:
    """(first element position, end of the value, element count), checked against the bytes
    that are there: each element needs at least its constructor byte. The size and count
    fields (`width` bytes each, big-endian) are read byte by byte: compiled, native arithmetic,
    not a call to a struct's unpack and the tuple it makes."""
    if depth >= MAX_DEPTH:
        raise Malformed(off - 1, f"values nested deeper than {MAX_DEPTH}")
    start = off + 2 * width
    if start > end:
        raise _short(f"{what} header", 2 * width, off, end)
    buf = ctx.buf
    if width == 1:
        size = buf[off]
        count = buf[off + 1]
    else:
        size = buf[off] << 24 | buf[off + 1] << 16 | buf[off + 2] << 8 | buf[off + 3]
        count = buf[off + 4] << 24 | buf[off + 5] << 16 | buf[off + 6] << 8 | buf[off + 7]
    stop = off + width + size
    if stop > end:
        raise Malformed(off, f"{what} of {size} bytes runs past the end ({end - off - width} left)")
    if stop < start:
        raise Malformed(off, f"{what} size {size} is smaller than its count field")
    if count > stop - start:
        raise Malformed(off, f"{what} count {count} is larger than its {stop - start} bytes")
    return start, stop, count


#: a list's, map's or array's size and count fields, each one byte (…8) or four (…32)
COMPOUND8: Final = struct.Struct(">BB").unpack_from
COMPOUND32: Final = struct.Struct(">II").unpack_from


def _list(enc: spec.Encoding) -> Reader:
    width = enc.width

    def read(ctx: Context, off: int, end: int, depth: int) -> tuple[Any, int]:
        pos, stop, count = _compound_header(ctx, off, end, depth, width, "list")
        buf = ctx.buf
        out: list[Any] = []
        append = out.append
        depth += 1
        for _ in range(count):
            if pos >= stop:
                raise Malformed(pos, f"list ends after {len(out)} of {count} elements")
            value, pos = read_at(ctx, buf[pos], pos + 1, stop, depth)
            append(value)
        if pos != stop:
            ctx.note("amqp10.bad-encoding", pos, f"{stop - pos} bytes left over in a list")
        return out, stop

    return read


def _map(enc: spec.Encoding) -> Reader:
    width = enc.width

    def read(ctx: Context, off: int, end: int, depth: int) -> tuple[Any, int]:
        return read_map(ctx, off, end, depth, width)

    return read


def read_map(ctx: Context, off: int, end: int, depth: int, width: int) -> tuple[Any, int]:
    """A map whose size and count fields are `width` bytes each; compiled, `read_at` calls it
    directly (application-properties, annotations)."""
    pos, stop, count = _compound_header(ctx, off, end, depth, width, "map")
    if count % 2:
        ctx.note("amqp10.bad-encoding", off, f"map with an odd count of {count} elements")
    buf = ctx.buf
    out: dict[str, Any] = {}
    depth += 1
    for i in range((count + 1) // 2):
        if pos >= stop:
            raise Malformed(pos, f"map ends after {i} of {count // 2} entries")
        key, pos = read_at(ctx, buf[pos], pos + 1, stop, depth)
        if type(key) is not str:  # (the module's attribute looked up only then)
            key = jsonmap.map_key(key)
        if 2 * i + 1 < count:
            if pos >= stop:
                raise Malformed(pos, f"map ends after {i} of {count // 2} entries")
            value, pos = read_at(ctx, buf[pos], pos + 1, stop, depth)
        else:
            value = None
        out[key] = value
    if len(out) < (count + 1) // 2:
        ctx.note("amqp10.bad-encoding", off, "map with duplicate keys (the last one is kept)")
    if pos != stop:
        ctx.note("amqp10.bad-encoding", pos, f"{stop - pos} bytes left over in a map")
    return out, stop


def _array(enc: spec.Encoding) -> Reader:
    width = enc.width
    unpack = COMPOUND8 if width == 1 else COMPOUND32

    def read(ctx: Context, off: int, end: int, depth: int) -> tuple[Any, int]:
        if depth >= MAX_DEPTH:
            raise Malformed(off - 1, f"values nested deeper than {MAX_DEPTH}")
        start = off + 2 * width
        if start > end:
            raise _short("array header", 2 * width, off, end)
        size, count = unpack(ctx.buf, off)
        stop = off + width + size
        if stop > end:
            raise Malformed(off, f"array of {size} bytes runs past the end ({end - start} left)")
        if stop < start:
            raise Malformed(off, f"array size {size} is smaller than its count field")
        buf = ctx.buf
        out: list[Any] = []
        if count == 0:  # the element constructor of an empty array says nothing
            return out, stop
        if start >= stop:
            raise Malformed(start, "array without its element constructor")
        ctor = buf[start]
        pos = start + 1
        depth += 1
        element: Reader
        if ctor == DESCRIBED:
            if pos >= stop:
                raise Malformed(pos, "array element descriptor missing")
            descriptor, pos = READERS[buf[pos]](ctx, pos + 1, stop, depth)
            if pos >= stop:
                raise Malformed(pos, "array element constructor missing")
            ctor = buf[pos]
            pos += 1
            handler = described_handler(ctx, descriptor, start)

            def element(ctx: Context, pos: int, stop: int, depth: int) -> tuple[Any, int]:
                return handler(ctx, descriptor, ctor, pos, stop, depth)

        else:
            element = READERS[ctor]
        enc_of = spec.ENCODINGS.get(ctor)
        if enc_of is not None and enc_of.category == "fixed" and enc_of.width == 0:
            if count > ctx.zero_width:
                ctx.note("amqp10.bad-encoding", off, f"array of {count} zero-width elements cut")
                count = ctx.zero_width
            ctx.zero_width -= count
        elif count > stop - pos:
            raise Malformed(off, f"array count {count} is larger than its {stop - pos} bytes")
        append = out.append
        for _ in range(count):
            value, pos = element(ctx, pos, stop, depth)
            append(value)
        if pos != stop:
            ctx.note("amqp10.bad-encoding", pos, f"{stop - pos} bytes left over in an array")
        return out, stop

    return read


# -- described ---------------------------------------------------------------------------------
def generic_described(
    ctx: Context, descriptor: Any, ctor: int, off: int, end: int, depth: int
) -> tuple[Any, int]:
    """A described value no table names: kept as {"descriptor": ..., "value": ...}."""
    value, pos = READERS[ctor](ctx, off, end, depth)
    return {"descriptor": jsonmap.descriptor(descriptor), "value": value}, pos


def described_handler(ctx: Context, descriptor: Any, off: int) -> Handler:
    """The decoder of `descriptor`'s type; for one no table knows, the generic one (noted)."""
    kind = type(descriptor)
    if kind is int or kind is str:
        handler = ctx.handlers.get(descriptor)
        if handler is not None:
            return handler
        if not ctx.extensions:
            text = jsonmap.descriptor(descriptor)
            ctx.note("amqp.unknown-descriptor", off, f"descriptor {text} is not in the spec")
    else:
        ctx.note("amqp10.bad-encoding", off, "a descriptor that is neither a ulong nor a symbol")
    return generic_described


def read_descriptor(ctx: Context, off: int, end: int, depth: int) -> tuple[Any, int]:
    """The descriptor at `off` (a code or a symbol), and the position after it."""
    buf = ctx.buf
    if buf[off] == SMALL_ULONG and off + 1 < end:  # the usual form: a one-byte code
        return buf[off + 1], off + 2
    return READERS[buf[off]](ctx, off + 1, end, depth + 1)


def read_described(ctx: Context, off: int, end: int, depth: int) -> tuple[Any, int]:
    """0x00: a descriptor value, then the described value (with its own constructor)."""
    if depth >= MAX_DEPTH:
        raise Malformed(off - 1, f"values nested deeper than {MAX_DEPTH}")
    if off >= end:
        raise Malformed(off, "described type without its descriptor")
    buf = ctx.buf
    descriptor, pos = read_descriptor(ctx, off, end, depth)
    if pos >= end:
        raise Malformed(pos, "described type without its value")
    kind = type(descriptor)
    handler = ctx.handlers.get(descriptor) if kind is int or kind is str else None
    if handler is None:
        handler = described_handler(ctx, descriptor, off)
    return handler(ctx, descriptor, buf[pos], pos + 1, end, depth + 1)


def _invalid(ctor: int) -> Reader:
    def read(ctx: Context, off: int, end: int, depth: int) -> tuple[Any, int]:
        raise Malformed(off - 1, f"invalid constructor {ctor:#04x}")

    return read


_BUILDERS: Final[dict[str, Callable[[spec.Encoding], Reader]]] = {
    "fixed": _fixed,
    "variable": _variable,
    "array": _array,
}


def _build(enc: spec.Encoding) -> Reader:
    if enc.category == "compound":
        return _list(enc) if enc.type == "list" else _map(enc)
    return _BUILDERS[enc.category](enc)


READERS.extend(_invalid(c) for c in range(256))
for _code, _enc in spec.ENCODINGS.items():
    READERS[_code] = _build(_enc)
READERS[DESCRIBED] = read_described


# -- the usual small encodings, read without a call through the table ---------------------------
#: zero-width scalars (null, true, false, uint0, ulong0; not list0, a new list each time)
CONSTANTS: Final[dict[int, Any]] = {
    c: {"null": None, "true": True, "false": False}.get(e.name, 0)
    for c, e in spec.ENCODINGS.items()
    if e.category == "fixed" and e.width == 0 and e.type != "list"
}
#: one-byte integers, unsigned and signed
UBYTES: Final = frozenset(
    c
    for c, e in spec.ENCODINGS.items()
    if e.category == "fixed" and e.width == 1 and e.type in _UNSIGNED
)
_SBYTES: Final = frozenset(
    c
    for c, e in spec.ENCODINGS.items()
    if e.category == "fixed" and e.width == 1 and e.type in _SIGNED
)
#: str8-utf8 and sym8: text of up to 255 bytes
TEXT8: Final = frozenset(
    c
    for c, e in spec.ENCODINGS.items()
    if e.category == "variable" and e.width == 1 and e.type in ("string", "symbol")
)
#: map8 and map32, and how their size and count are read
_MAP8: Final = next(c for c, e in spec.ENCODINGS.items() if e.type == "map" and e.width == 1)
_MAP32: Final = next(c for c, e in spec.ENCODINGS.items() if e.type == "map" and e.width == 4)
#: how `read_at` reads each constructor: one byte looked up instead of set and dict lookups
_BY_TABLE: Final = 0
_BY_TEXT8: Final = 1
_BY_CONSTANT: Final = 2
_BY_UBYTE: Final = 3
_BY_SBYTE: Final = 4
_BY_MAP8: Final = 5
_BY_MAP32: Final = 6
_READ_KINDS: Final = bytes(
    _BY_TEXT8
    if c in TEXT8
    else _BY_CONSTANT
    if c in CONSTANTS
    else _BY_UBYTE
    if c in UBYTES
    else _BY_SBYTE
    if c in _SBYTES
    else _BY_MAP8
    if c == _MAP8
    else _BY_MAP32
    if c == _MAP32
    else _BY_TABLE
    for c in range(256)
)
_CONSTANT_VALUES: Final = tuple(CONSTANTS.get(c) for c in range(256))


def read_at(ctx: Context, ctor: int, off: int, end: int, depth: int) -> tuple[Any, int]:
    """`READERS[ctor](ctx, off, end, depth)`: the value of constructor `ctor`, `off` just past
    it. The usual encodings of map keys, list items and short fields (short text, one-byte
    integers, constants, maps) are read here; compiled, a direct call instead of a call through
    the table with its arguments boxed. Anything else, damage included, goes to the table's
    reader, which gives the same value (or raises and notes as it would)."""
    buf = ctx.buf
    kind = _READ_KINDS[ctor]
    if kind == _BY_TEXT8:
        if off < end:
            nxt = off + 1 + buf[off]
            if nxt <= end:
                try:
                    return buf[off + 1 : nxt].decode("utf-8"), nxt
                except UnicodeDecodeError:
                    pass  # the reader notes it
    elif kind == _BY_CONSTANT:
        return _CONSTANT_VALUES[ctor], off
    elif kind == _BY_UBYTE:
        if off < end:
            return buf[off], off + 1
    elif kind == _BY_SBYTE:
        if off < end:
            raw = buf[off]
            return (raw - 256 if raw > 127 else raw), off + 1
    elif kind == _BY_MAP8:
        return read_map(ctx, off, end, depth, 1)
    elif kind == _BY_MAP32:
        return read_map(ctx, off, end, depth, 4)
    return READERS[ctor](ctx, off, end, depth)


# -- entry points ------------------------------------------------------------------------------
def read_value(ctx: Context, off: int, end: int, depth: int = 0) -> tuple[Any, int]:
    """The value whose constructor is at `off` (raises Malformed)."""
    if off >= end:
        raise Malformed(off, "value expected, no bytes left")
    return READERS[ctx.buf[off]](ctx, off + 1, end, depth)


def decode(
    data: bytes | bytearray | memoryview, off: int = 0, end: int | None = None
) -> tuple[Any, int, list]:
    """Decode one value of `data` at `off`: (value, position after it, findings). Never raises:
    a malformed value is None with a finding. Uses the composite tables when `composites` has
    been imported (the package's decoder does)."""
    ctx = Context(data)
    stop = len(ctx.buf) if end is None else min(end, len(ctx.buf))
    try:
        value, pos = read_value(ctx, off, stop)
    except Malformed as exc:
        ctx.malformed(exc)
        return None, stop, ctx.findings
    return value, pos, ctx.findings
