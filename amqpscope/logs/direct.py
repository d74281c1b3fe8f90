"""A logged AMQP 1.0 performative straight into the capture decoder's field shapes.

`amqp10_encode.py` encodes what a log printed and `codec.amqp10.Decoder` decodes the bytes, so a
log's records have the capture's shapes by construction, at the price of building and reading
bytes for every line (most of a log's reading time). This module gives the same dict without
the bytes: for each value it works out the constructor `amqp10_encode.encode` would write and
the value `codec.amqp10.composites.decode_fields` (and `types.py`'s readers) would read back,
using the decoder's own per-field tables (`composites.SPECS`: which constructors a field allows,
its choices, defaults, `multiple`, required composites).

It covers everything the round trip reads without a finding. Where the round trip would report
something (a constructor the field does not allow, a value that is not a choice, a missing
mandatory field, an unknown descriptor, a duplicate map key, a number too wide, text that is not
UTF-8) or where the encoder gives up (decimals, arrays of floats, lists or uuids, integers past
64 bits), `performative` returns None and the reader takes the round trip, whose findings are
the ones a capture would have. `tests/test_logs_direct.py` holds both paths equal on every
recorded log and on property-generated values.
"""

from __future__ import annotations

from typing import Any, Final

from amqpscope.codec.amqp10 import composites, jsonmap, spec
from amqpscope.codec.amqp10.frames import BODIES
from amqpscope.logs.values import Array, Binary, Described, Fields, Hex, Map, Symbol, Uuid

#: frame types, as `amqp10_encode` writes them
TYPE_AMQP: Final = 0x00
TYPE_SASL: Final = 0x01

# constructors `amqp10_encode.encode` writes (AMQP 1.0, 1.6)
_DESCRIBED: Final = 0x00
_TRUE: Final = 0x41
_FALSE: Final = 0x42
_ULONG: Final = 0x80
_LONG: Final = 0x81
_FLOAT: Final = 0x72
_DOUBLE: Final = 0x82
_UUID: Final = 0x98
_BINARY: Final = 0xB0
_STRING: Final = 0xB1
_SYMBOL: Final = 0xB3
_LIST: Final = 0xD0
_MAP: Final = 0xD1
_ARRAY: Final = 0xF0
_ARRAYS: Final = frozenset(c for c, e in spec.ENCODINGS.items() if e.category == "array")

#: nesting past this goes the round trip (which has the decoder's own depth limit, 64)
MAX_DEPTH: Final = 40

#: an integer type -> (constructor, smallest, largest); timestamps also read as text
_INTS: Final[dict[str, tuple[int, int, int]]] = {
    "ubyte": (0x50, 0, 0xFF),
    "ushort": (0x60, 0, 0xFFFF),
    "uint": (0x70, 0, 0xFFFFFFFF),
    "ulong": (0x80, 0, 0xFFFFFFFFFFFFFFFF),
    "byte": (0x51, -0x80, 0x7F),
    "short": (0x61, -0x8000, 0x7FFF),
    "int": (0x71, -0x80000000, 0x7FFFFFFF),
    "long": (0x81, -0x8000000000000000, 0x7FFFFFFFFFFFFFFF),
    "timestamp": (0x83, -0x8000000000000000, 0x7FFFFFFFFFFFFFFF),
}
#: array element types (`@<uint>`, `@PN_UINT`) read here -> the primitive
_ARRAY_TYPES: Final[dict[str, str]] = {
    **{t: t for t in (*_INTS, "boolean", "string", "symbol", "binary")},
    "bool": "boolean",
    **{f"PN_{t.upper()}": t for t in (*_INTS, "string", "symbol", "binary")},
    "PN_BOOL": "boolean",
}
_TEXT_CTORS: Final = {"string": _STRING, "symbol": _SYMBOL, "binary": _BINARY}


class NotDirect(Exception):
    """The round trip would report something here (or the encoder refuses): take it."""


class _Composite:
    """One composite's decoding table (`composites.SPECS`) and the field types the encoder
    gives printed integers (`amqp10_encode.described`)."""

    __slots__ = ("code", "index", "ints", "name", "nfields", "spec", "wire_float")

    def __init__(self, code: int, cspec: composites.CompositeSpec, fields: list[str]) -> None:
        self.code = code
        self.name = cspec.name
        self.spec = cspec
        self.nfields = len(cspec.fields)
        self.index: dict[str, int] = {f.name: i for i, f in enumerate(cspec.fields)}
        ints: list[tuple[int, int, int] | None] = []
        floats: list[bool] = []
        for type_name in fields:
            base = _primitive(type_name) if type_name != "*" else ""
            ints.append(_INTS.get(base))
            floats.append(base == "float")
        self.ints = tuple(ints)
        self.wire_float = tuple(floats)


def _primitive(type_name: str) -> str:
    for _ in range(16):
        restricted = spec.RESTRICTED.get(type_name)
        if restricted is None:
            break
        type_name = restricted.source
    return type_name


_BY_CODE: Final[dict[int, _Composite]] = {
    code: _Composite(code, composites.SPECS[code], [f.type for f in c.fields])
    for code, c in spec.COMPOSITES.items()
}
_BY_NAME: Final[dict[str, _Composite]] = {c.name: c for c in _BY_CODE.values()}
#: restricted types a described value may name by code or symbol: (name, allowed constructors)
_RESTRICTED: Final[dict[Any, tuple[str, frozenset[int] | None]]] = {}
for _r in spec.RESTRICTED.values():
    if _r.code is not None:
        _allowed = composites.CONSTRUCTORS.get(composites.primitive(_r.source))
        _RESTRICTED[_r.code] = (_r.name, _allowed)
        if _r.symbol:
            _RESTRICTED[_r.symbol] = (_r.name, _allowed)
#: symbols of composites: a described value naming one by symbol goes the round trip
_COMPOSITE_SYMBOLS: Final = frozenset(c.symbol for c in spec.COMPOSITES.values())
_SASL_BODIES: Final = BODIES[TYPE_SASL]
_AMQP_BODIES: Final = BODIES[TYPE_AMQP]
_NOT_ALLOWED: Final = 8  # composites' flag in a field's kind: a constructor it may not have
_KIND_FIELD: Final = 4  # composites' kind of a field read by `_field_value` (not plain)


def _composite_of(value: Described) -> _Composite | None:
    """The composite `amqp10_encode.described` encodes `value` as (by code, else by name)."""
    descriptor = value.descriptor
    found = (
        _BY_CODE.get(int(descriptor))
        if isinstance(descriptor, int) and not isinstance(descriptor, bool)
        else None
    )
    if found is None and value.name is not None:
        found = _BY_NAME.get(value.name)
    return found


def performative(value: Described, sasl: bool) -> tuple[str, dict[str, Any]] | None:
    """(name, fields) of a frame whose body is `value`, sent as a SASL frame when `sasl`, as
    the round trip would decode them; None where it would not read cleanly (take it then)."""
    composite = _composite_of(value)
    if composite is None or not isinstance(value.value, Fields):
        return None
    name = (_SASL_BODIES if sasl else _AMQP_BODIES).get(composite.code)
    if name is None:
        return None  # a composite that is no frame body of this type: the decoder's finding
    out: dict[str, Any] = {}
    try:
        _fill(composite, value.value, out, 1, False)
    except NotDirect:
        return None
    return name, out


def _fill(composite: _Composite, items: Fields, out: dict[str, Any], depth: int, ext: bool) -> None:
    """`out` gets the composite's fields: placed as `amqp10_encode.described` places printed
    fields, read as `composites.decode_fields` reads them."""
    index = composite.index
    nfields = composite.nfields
    slots: list[Any] = []
    for position, item in enumerate(items):
        name, value = item
        if name is not None:
            at = index.get(name, position)
        else:
            at = len(slots)
            if at < nfields:
                at = max(at, position)
        while len(slots) <= at:
            slots.append(None)
        slots[at] = value
    if len(slots) > nfields:
        raise NotDirect  # more fields than the spec has: a finding
    cspec = composite.spec
    values: list[Any] = list(cspec.defaults)
    kinds = cspec.kinds
    fields = cspec.fields
    for i, value in enumerate(slots):
        if value is None:
            continue  # null: the default stays
        field = fields[i]
        ctor, read = _typed(composite, i, value, depth, ext or field.extension)
        kind = kinds[i * 256 + ctor]
        if kind & _NOT_ALLOWED:
            raise NotDirect
        if kind == _KIND_FIELD:
            read = _field_value(field, ctor, value, read)
        values[i] = read
    missing = composites._MISSING
    for i in cspec.mandatory:
        if values[i] is missing:
            raise NotDirect
    names = cspec.names
    for i in range(nfields):
        read = values[i]
        if read is not missing:
            out[names[i]] = read


def _typed(composite: _Composite, i: int, value: Any, depth: int, ext: bool) -> tuple[int, Any]:
    """(constructor, value read back) of field `i`'s printed `value`, encoded with the field's
    type as `amqp10_encode.encode` does (a described field's value read in `_field_value`)."""
    if value is True:
        return _TRUE, True
    if value is False:
        return _FALSE, False
    unsigned = isinstance(value, Hex)  # asked before `value` is narrowed to int (see `_int`)
    if isinstance(value, int):
        wire = composite.ints[i]
        number = int(value)
        if wire is not None and wire[1] <= number <= wire[2]:
            ctor = wire[0]
            return ctor, (jsonmap.timestamp(number) if ctor == 0x83 else number)
        return _int(number, unsigned)
    if isinstance(value, float) and composite.wire_float[i]:
        raise NotDirect  # a float32: the round trip reads it back
    return _untyped(value, depth, ext)


def _field_value(field: composites.FieldSpec, ctor: int, printed: Any, value: Any) -> Any:
    """`composites._field_value` on what was read: a choice's name, a `multiple` field's list,
    a described field's composite checked against the ones it may be."""
    choices = field.choices
    if choices is not None:
        name = choices.get(value) if type(value) is bool or type(value) is int else None
        if name is None:
            raise NotDirect
        value = name
    if field.multiple:
        if ctor not in _ARRAYS:
            return [value]
        if field.allowed is not None and value:
            element = _array_element(printed)
            if element not in field.allowed:
                raise NotDirect
        return value
    required = field.requires
    if required is not None and type(value) is dict:
        kind = value.get("type")
        if kind in composites.BY_NAME and kind not in required:
            raise NotDirect
    return value


def _int(number: int, unsigned: bool) -> tuple[int, int]:
    """An integer without a field type: unsigned (printed in hex, or too large for a long) as a
    ulong, else a long. Whether it was printed in hex is asked by the caller while the value
    is still an object: compiled, a value narrowed to int is unboxed and its `Hex` class lost."""
    if unsigned or number > 0x7FFFFFFFFFFFFFFF:
        if 0 <= number <= 0xFFFFFFFFFFFFFFFF:
            return _ULONG, number
    elif -0x8000000000000000 <= number <= 0x7FFFFFFFFFFFFFFF:
        return _LONG, number
    raise NotDirect  # does not fit 64 bits: the encoder says so


def _text(value: str) -> str:
    """`value` as UTF-8 would read it back (the same text), or NotDirect for text UTF-8 cannot
    carry (lone surrogates: the encoder raises)."""
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError as exc:
            raise NotDirect from exc
    return str(value)


def _untyped(value: Any, depth: int, ext: bool) -> tuple[int, Any]:
    """(constructor, value read back) of a value encoded without a field type."""
    if value is None:
        return 0x40, None
    if value is True:
        return _TRUE, True
    if value is False:
        return _FALSE, False
    unsigned = isinstance(value, Hex)  # asked before `value` is narrowed to int (see `_int`)
    if isinstance(value, int):
        return _int(int(value), unsigned)
    if isinstance(value, float):
        return _DOUBLE, jsonmap.double(value)
    if isinstance(value, Symbol):
        return _SYMBOL, _text(value)
    if isinstance(value, str):
        return _STRING, _text(value)
    if isinstance(value, Uuid):
        if len(value) != 16:
            raise NotDirect
        return _UUID, jsonmap.uuid(bytes(value))
    if isinstance(value, Binary):
        return _BINARY, value.hex()
    if depth >= MAX_DEPTH:
        raise NotDirect
    if isinstance(value, Described):  # the decoder counts two levels: described, then list
        return _DESCRIBED, _described(value, depth + 2, ext)
    if isinstance(value, Map):
        out: dict[str, Any] = {}
        for key, item in value.items:
            read = _untyped(key, depth + 1, ext)[1]
            if type(read) is not str:
                read = jsonmap.map_key(read)
            if read in out:
                raise NotDirect  # a duplicate key: the decoder's finding
            out[read] = _untyped(item, depth + 1, ext)[1]
        return _MAP, out
    if isinstance(value, Array):
        return _ARRAY, _array(value)
    if isinstance(value, list) and not isinstance(value, Fields):
        return _LIST, [_untyped(item, depth + 1, ext)[1] for item in value]
    raise NotDirect  # what the encoder cannot encode (a decimal, a bare field list)


def _described(value: Any, depth: int, ext: bool) -> Any:
    """A described value as the decoder reads it: a composite's fields with its `type` first,
    a restricted type's {"type", "value"}, an extension type's {"descriptor", "value"}."""
    if not isinstance(value, Described):
        raise NotDirect
    composite = _composite_of(value)
    inner = value.value
    if composite is not None:
        if not isinstance(inner, Fields):
            raise NotDirect
        out: dict[str, Any] = {"type": composite.name}
        _fill(composite, inner, out, depth, ext)
        return out
    if isinstance(inner, Fields):
        inner = [item for _, item in inner]
    descriptor = value.descriptor
    if isinstance(descriptor, str):
        key: Any = str(descriptor)
        if key in _COMPOSITE_SYMBOLS:
            raise NotDirect  # a composite by symbol: its fields read by position
    elif isinstance(descriptor, int) and not isinstance(descriptor, bool):
        key = int(descriptor)
        if not 0 <= key <= 0xFFFFFFFFFFFFFFFF:
            raise NotDirect
    else:
        raise NotDirect
    ctor, read = _untyped(inner, depth, ext)
    restricted = _RESTRICTED.get(key)
    if restricted is not None:
        allowed = restricted[1]
        if allowed is not None and ctor not in allowed:
            raise NotDirect
        return {"type": restricted[0], "value": read}
    if not ext:
        raise NotDirect  # a descriptor the spec does not know: the decoder's finding
    return {"descriptor": jsonmap.descriptor(key), "value": read}


def _array_type(value: Array) -> str:
    element = _ARRAY_TYPES.get(value.type)
    if element is None:
        raise NotDirect  # floats, uuids, lists, maps, described: the round trip
    return element


def _array_element(value: Any) -> int:
    """The element constructor of the array `amqp10_encode.array` writes for `value`."""
    if not isinstance(value, Array):
        raise NotDirect
    element = _array_type(value)
    if element == "boolean":
        return 0x56
    wire = _INTS.get(element)
    if wire is not None:
        return wire[0]
    if element == "symbol":
        return _SYMBOL
    # strings and binaries: the first element's own constructor
    return _untyped(value.items[0], 0, False)[0] if value.items else _TEXT_CTORS[element]


def _array(value: Array) -> list[Any]:
    """The elements of an array as the decoder reads them."""
    element = _array_type(value)
    items = value.items
    if element == "boolean":
        return [bool(item) for item in items]
    wire = _INTS.get(element)
    if wire is not None:
        out: list[Any] = []
        for item in items:
            if not isinstance(item, int) or isinstance(item, bool):
                raise NotDirect
            number = int(item)
            if not wire[1] <= number <= wire[2]:
                raise NotDirect
            out.append(jsonmap.timestamp(number) if element == "timestamp" else number)
        return out
    if element == "symbol":
        for item in items:
            if not isinstance(item, str):
                raise NotDirect
        return [_text(item) for item in items]
    # strings and binaries: each element encoded as itself, all with the first one's constructor
    ctor = -1
    out = []
    for item in items:
        if not isinstance(item, (str, Binary)):
            raise NotDirect
        item_ctor, read = _untyped(item, 0, False)
        if ctor >= 0 and item_ctor != ctor:
            raise NotDirect
        ctor = item_ctor
        out.append(read)
    return out


def plain_type(composite: str, field: str) -> str:
    """The primitive of a composite's field when it reads as it is (no choices, not multiple,
    nothing required of it), else "": what a grammar's cache may put in without reading."""
    found = _BY_NAME.get(composite)
    if found is None or field not in found.index:
        return ""
    at = found.index[field]
    if not found.spec.plain[at]:
        return ""
    return _primitive(spec.COMPOSITES[found.code].fields[at].type)
