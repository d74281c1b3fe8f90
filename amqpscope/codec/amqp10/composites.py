"""Described types from the spec tables: composites as named fields, restricted types by name.

Everything here is compiled once, at import, from `spec.COMPOSITES` and `spec.RESTRICTED`:

- a composite (performatives, SASL frames, error, source, target, delivery states, transaction
  types, lifetime policies, message header and properties) is a described list whose elements
  are its fields in order. It decodes to a dict of the spec's hyphenated field names, in spec
  order: the fields that were on the wire, plus the spec default of each absent (or null) field
  that has one; nothing else. Nested composites also carry `"type": NAME` first.
- a field's type, resolved through restricted types to its primitive, gives the constructors it
  may use; another constructor is a finding (the value is still shown). Restricted types with
  numeric or boolean choices (role, settle modes, terminus durability, SASL code) show the
  choice's name; symbol choices (error conditions, expiry policies) are already readable.
- a `multiple` field is always a list, whether the wire had one value or an array.
- a described restricted type (the message sections) decodes to {"type": NAME, "value": ...}.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, NamedTuple

from amqpscope.codec.amqp10 import jsonmap, spec
from amqpscope.codec.amqp10.types import (
    ARRAYS,
    CONSTANTS,
    DESCRIBED,
    HANDLERS,
    NULL,
    READERS,
    TEXT8,
    UBYTES,
    Context,
    Malformed,
    read_at,
    read_descriptor,
)

_MISSING: Final = object()
#: list constructor -> width of its size and count fields (0 for list0)
_LIST_WIDTHS: Final = {c: e.width for c, e in spec.ENCODINGS.items() if e.type == "list"}
#: primitive type name -> the constructors that encode it
CONSTRUCTORS: Final[dict[str, frozenset[int]]] = {
    t: frozenset(c for c, e in spec.ENCODINGS.items() if e.type == t)
    for t in {e.type for e in spec.ENCODINGS.values()}
}
#: composite name -> composite
BY_NAME: Final = {c.name: c for c in spec.COMPOSITES.values()}
#: descriptor symbol -> numeric code, for composites and described restricted types
SYMBOL_CODES: dict[str, int] = {c.symbol: code for code, c in spec.COMPOSITES.items()}
SYMBOL_CODES |= {r.symbol: r.code for r in spec.RESTRICTED.values() if r.symbol and r.code}


def primitive(type_name: str) -> str:
    """The primitive a type name stands for ('*' for any type, or a composite's own name)."""
    seen = 0
    while type_name in spec.RESTRICTED and seen < 16:
        type_name = spec.RESTRICTED[type_name].source
        seen += 1
    return type_name


def providers(archetype: str) -> tuple[set[str], set[str]]:
    """(composites, primitives) that provide `archetype` (e.g. 'delivery-state', 'address')."""
    composites = {c.name for c in spec.COMPOSITES.values() if archetype in c.provides}
    primitives = {primitive(r.name) for r in spec.RESTRICTED.values() if archetype in r.provides}
    return composites, primitives - {"*"}


def allowed_constructors(field: spec.Field) -> frozenset[int] | None:
    """The constructors `field` may be encoded with (null always), or None for any."""
    if field.type == "*":
        if field.requires is None:
            return None
        composites, primitives = providers(field.requires)
        if not composites and not primitives:
            return None  # an archetype the tables do not define (e.g. global-tx-id)
        ctors: set[int] = {DESCRIBED} if composites else set()
        for name in primitives:
            ctors |= CONSTRUCTORS.get(name, set())
    else:
        base = primitive(field.type)
        if base in BY_NAME or base not in CONSTRUCTORS:
            ctors = {DESCRIBED}
        else:
            ctors = set(CONSTRUCTORS[base])
    if field.multiple:
        ctors |= ARRAYS
    return frozenset(ctors | {NULL})


def _choice_value(source: str, text: str) -> Any:
    base = primitive(source)
    if base == "boolean":
        return text == "true"
    if base in ("ubyte", "ushort", "uint", "ulong", "byte", "short", "int", "long"):
        return int(text)
    return text


def choices(type_name: str) -> dict[Any, str] | None:
    """Wire value -> choice name for a restricted type with numeric or boolean choices."""
    restricted = spec.RESTRICTED.get(type_name)
    if restricted is None or not restricted.choices:
        return None
    if primitive(type_name) in ("symbol", "string"):
        return None  # the symbol is the name already
    return {_choice_value(restricted.source, value): name for name, value in restricted.choices}


def default_value(field: spec.Field) -> Any:
    """A field's spec default as JSON: a choice's name, a number, a boolean or a symbol."""
    if field.default is None:
        return _MISSING
    restricted = spec.RESTRICTED.get(field.type)
    if restricted is not None and any(name == field.default for name, _ in restricted.choices):
        if choices(field.type) is not None:
            return field.default  # shown by name, as a decoded value of this field would be
        return dict(restricted.choices)[field.default]
    return _choice_value(field.type, field.default)


def expected(f: spec.Field) -> str:
    """How a finding names what `f` should hold: its type and, when restricted, the primitive
    ("delivery-tag (binary)", "uint", "source or target"), in an array or list if multiple."""
    base = primitive(f.type)
    if f.type == "*":
        text = f.requires or "any type"
    else:
        text = f.type if base in (f.type, "*") else f"{f.type} ({base})"
    return f"an array or list of {text}" if f.multiple else text


class FieldSpec(NamedTuple):
    name: str
    allowed: frozenset[int] | None
    choices: dict[Any, str] | None
    default: Any
    mandatory: bool
    multiple: bool
    requires: frozenset[str] | None  # composites the value must be, if it is described
    extension: bool  # a map of extension types (filters): unknown descriptors are expected
    expected: str  # what a finding says the value should have been: "delivery-tag (binary)"


class CompositeSpec(NamedTuple):
    name: str
    code: int
    fields: tuple[FieldSpec, ...]
    # per field, for the hot loop:
    names: tuple[str, ...]
    defaults: tuple[Any, ...]  # the spec default, or _MISSING
    mandatory: tuple[int, ...]  # indexes of the mandatory fields without a default
    allowed: tuple[frozenset[int] | None, ...]
    plain: tuple[bool, ...]  # the value needs no conversion or check after reading
    #: field index * 256 + constructor -> how `decode_fields` reads it (`_KIND_*`, plus
    #: `_NOT_ALLOWED` for a valid constructor the field may not have): one byte looked up per
    #: field instead of set and dict lookups
    kinds: bytes


def compile_composite(code: int, composite: spec.Composite) -> CompositeSpec:
    fields = []
    for f in composite.fields:
        required = providers(f.requires)[0] if f.requires else set()
        fields.append(
            FieldSpec(
                f.name,
                allowed_constructors(f),
                choices(f.type),
                default_value(f),
                f.mandatory,
                f.multiple,
                frozenset(required) or None,
                f.type == "filter-set",
                expected(f),
            )
        )
    plain = tuple(
        f.choices is None and not f.multiple and f.requires is None and not f.extension
        for f in fields
    )
    return CompositeSpec(
        composite.name,
        code,
        tuple(fields),
        tuple(f.name for f in fields),
        tuple(f.default for f in fields),
        tuple(i for i, f in enumerate(fields) if f.mandatory and f.default is _MISSING),
        tuple(f.allowed for f in fields),
        plain,
        b"".join(_kinds(f.allowed, is_plain) for f, is_plain in zip(fields, plain, strict=True)),
    )


#: the Python type the decoder gives a scalar primitive (bool is kept apart from int: AMQP's
#: boolean is no number, though Python's is)
_PYTHON_TYPES: Final[dict[str, type]] = {
    **dict.fromkeys(("ubyte", "ushort", "uint", "ulong", "byte", "short", "int", "long"), int),
    **dict.fromkeys(("string", "symbol"), str),
    "boolean": bool,
}

#: composite name -> {field: Python type} for its single-valued scalar fields without choices
SCALARS: Final[dict[str, dict[str, type]]] = {
    c.name: {
        f.name: _PYTHON_TYPES[primitive(f.type)]
        for f in c.fields
        if not f.multiple
        and primitive(f.type) in _PYTHON_TYPES
        and choices(f.type) is None  # a choice decodes to its name
    }
    for c in spec.COMPOSITES.values()
}

#: the Python types each primitive decodes to (types.py, jsonmap.py): binary is hex text,
#: timestamps, uuids, chars and decimals text, a non-finite float its name
_DECODED_AS: Final[dict[str, tuple[type, ...]]] = {
    **{t: (v,) for t, v in _PYTHON_TYPES.items()},
    **dict.fromkeys(("binary", "char", "timestamp", "uuid"), (str,)),
    **dict.fromkeys(("decimal32", "decimal64", "decimal128"), (str,)),
    **dict.fromkeys(("float", "double"), (float, str)),
    "list": (list,),
    "array": (list,),
    "map": (dict,),
    "null": (type(None),),
}


class FieldType(NamedTuple):
    """What a well-typed value of one field is, as decoded: its Python types (each element's,
    for a `multiple` field, which is always a list), and the composites it may be if described
    (None: any)."""

    types: tuple[type, ...]
    multiple: bool
    composites: frozenset[str] | None


def _field_type(f: spec.Field) -> FieldType | None:
    """The expectation of one field, or None where any value is fine (`*` fields of archetypes
    the tables do not define)."""
    allowed = allowed_constructors(f)
    if allowed is None:
        return None
    if choices(f.type) is not None:
        types: set[type] = {str}  # the choice's name
    else:
        types = set()
        for ctor in allowed - ARRAYS - {NULL}:
            if ctor == DESCRIBED:
                types.add(dict)
            else:
                types.update(_DECODED_AS[spec.ENCODINGS[ctor].type])
    required = providers(f.requires)[0] if f.requires else set()
    if not required and primitive(f.type) in BY_NAME:
        required = {primitive(f.type)}
    return FieldType(tuple(sorted(types, key=str)), f.multiple, frozenset(required) or None)


#: composite name -> {field: what a well-typed value of it is}: what `well_typed` checks
FIELD_TYPES: Final[dict[str, dict[str, FieldType]]] = {
    c.name: {f.name: t for f in c.fields if (t := _field_type(f)) is not None}
    for c in spec.COMPOSITES.values()
}

#: the findings after which a frame's fields are checked by `well_typed`
TYPE_DAMAGE: Final = frozenset(("amqp10.bad-field", "amqp10.bad-field-type"))


def _fits(expected: FieldType, value: Any) -> bool:
    if type(value) is dict and expected.composites is not None:
        kind = value.get("type")
        return kind not in BY_NAME or kind in expected.composites
    return type(value) in expected.types


def well_typed(name: str, fields: dict[str, Any]) -> dict[str, Any]:
    """`fields` of composite `name` without the values whose type is not their field's (a map
    for a delivery-tag, a boolean for a delivery-id, a number for a link name, a list of lists
    for capabilities, a source where a delivery state belongs: damage `decode_fields` reported
    as amqp10.bad-field-type or amqp10.bad-field), nested composites checked the same way. The
    frame keeps what was on the wire; the decoder's own bookkeeping, the trackers and everything
    after them compute with this."""
    expected = FIELD_TYPES.get(name)
    if expected is None:  # no composite the spec knows (an unknown descriptor): nothing typed
        return {}
    if not expected:  # one without fields (accepted, released): only its type
        return fields
    out = {}
    for key, value in fields.items():
        want = expected.get(key)
        if want is not None:
            if want.multiple:
                if type(value) is not list or not all(_fits(want, v) for v in value):
                    continue
            elif not _fits(want, value):
                continue
            if type(value) is dict and value.get("type") in FIELD_TYPES and key != "type":
                value = well_typed(value["type"], value)
        out[key] = value
    return out


def _field_value(
    ctx: Context, cspec: CompositeSpec, fs: FieldSpec, ctor: int, pos: int, stop: int, depth: int
) -> tuple[Any, int]:
    if fs.extension:
        ctx.extensions += 1
        try:
            value, nxt = READERS[ctor](ctx, pos + 1, stop, depth)
        finally:
            ctx.extensions -= 1
    else:
        value, nxt = READERS[ctor](ctx, pos + 1, stop, depth)
    if fs.choices is not None:
        name = fs.choices.get(value) if type(value) in (bool, int) else None
        if name is None:
            ctx.note("amqp10.bad-field", pos, f"{cspec.name}.{fs.name} {value!r} is not a choice")
        else:
            value = name
    if fs.multiple and ctor not in ARRAYS:
        value = [value]
    elif fs.multiple and fs.allowed is not None:  # an array: its elements' type
        element = pos + 1 + 2 * spec.ENCODINGS[ctor].width
        if element < stop and ctx.buf[element] not in fs.allowed and value:
            what = (
                f"{cspec.name}.{fs.name} is an array of {_ctor_name(ctx.buf[element])}, "
                f"not {fs.expected}"
            )
            ctx.note("amqp10.bad-field-type", element, what)
    elif fs.requires is not None and type(value) is dict:
        kind = value.get("type")
        if kind in BY_NAME and kind not in fs.requires:
            what = f"{cspec.name}.{fs.name} is {kind}, not {' or '.join(sorted(fs.requires))}"
            ctx.note("amqp10.bad-field-type", pos, what)
    return value, nxt


#: fixed encodings `decode_fields` reads inline (the readers of types.py give the same values):
#: zero-width constants and one-byte unsigned integers (`read_at`'s tables), four-byte uint,
#: binary up to 255 bytes (as hex), string and symbol up to 255 bytes (valid UTF-8)
_VBIN8: Final = next(c for c, e in spec.ENCODINGS.items() if e.type == "binary" and e.width == 1)
_UINT32: Final = next(c for c, e in spec.ENCODINGS.items() if e.type == "uint" and e.width == 4)
#: constructors that start a value (the rest are damage, which the readers report)
_VALID: Final = frozenset(spec.ENCODINGS) | {DESCRIBED}


#: how `decode_fields` reads a field's value, by its constructor
_KIND_READER: Final = 0  # by `read_at` (which reports damage)
_KIND_CONSTANT: Final = 1  # a zero-width constant (`_ZERO_VALUES`)
_KIND_BYTE: Final = 2  # a one-byte unsigned integer
_KIND_VBIN8: Final = 3  # binary up to 255 bytes, as hex
_KIND_FIELD: Final = 4  # by `_field_value` (a field that is not plain)
_KIND_ABSENT: Final = 5  # null: the default stays
_KIND_TEXT8: Final = 6  # string or symbol up to 255 bytes, valid UTF-8 (else by `read_at`)
_KIND_UINT32: Final = 7  # a four-byte unsigned integer
_NOT_ALLOWED: Final = 8  # added: a valid constructor the field may not have (a finding)
_ZERO_VALUES: Final = tuple(CONSTANTS.get(c) for c in range(256))


_KINDS_MADE: Final[dict[tuple[frozenset[int] | None, bool], bytes]] = {}


def _kinds(allowed: frozenset[int] | None, plain: bool) -> bytes:
    """The 256 `_KIND_*` of one field, by constructor (made once per allowed set: at import)."""
    made = _KINDS_MADE.get((allowed, plain))
    if made is not None:
        return made
    out = bytearray(256)
    for c in range(256):
        if c == NULL:
            out[c] = _KIND_ABSENT
            continue
        if not plain:
            kind = _KIND_FIELD
        elif c in CONSTANTS:
            kind = _KIND_CONSTANT
        elif c in UBYTES:
            kind = _KIND_BYTE
        elif c == _VBIN8:
            kind = _KIND_VBIN8
        elif c in TEXT8:
            kind = _KIND_TEXT8
        elif c == _UINT32:
            kind = _KIND_UINT32
        else:
            kind = _KIND_READER
        if allowed is not None and c not in allowed and c in _VALID:
            kind |= _NOT_ALLOWED
        out[c] = kind
    made = _KINDS_MADE[(allowed, plain)] = bytes(out)
    return made


SPECS: Final[dict[int, CompositeSpec]] = {
    code: compile_composite(code, c) for code, c in spec.COMPOSITES.items()
}


def _ctor_name(ctor: int) -> str:
    enc = spec.ENCODINGS.get(ctor)
    if enc is None:
        return "a described value"
    if enc.name == enc.type:
        return f"{enc.type} ({ctor:#04x})"
    return f"{enc.type} ({enc.name}, {ctor:#04x})"


def decode_fields(
    ctx: Context, cspec: CompositeSpec, ctor: int, off: int, end: int, depth: int, out: dict
) -> int:
    """Fill `out` with the fields of the composite list whose constructor `ctor` was just read
    (`off` is past it); return the position after the list. Damage inside a field is a finding;
    the fields before it are kept."""
    width = _LIST_WIDTHS.get(ctor)
    if width is None:
        raise Malformed(off - 1, f"{cspec.name} is not a list but {_ctor_name(ctor)}")
    buf = ctx.buf
    if width == 0:
        pos = stop = off
        count = 0
    else:
        if off + 2 * width > end:
            raise Malformed(off, f"{cspec.name} list header truncated")
        if width == 1:
            size, count = buf[off], buf[off + 1]
        else:
            size = int.from_bytes(buf[off : off + 4], "big")
            count = int.from_bytes(buf[off + 4 : off + 8], "big")
        pos = off + 2 * width
        stop = off + width + size
        if stop > end or stop < pos:
            raise Malformed(off, f"{cspec.name} list of {size} bytes runs past the end")
        if count > stop - pos:
            raise Malformed(off, f"{cspec.name} list count {count} exceeds its {stop - pos} bytes")
    fields = cspec.fields
    kinds = cspec.kinds
    names = cspec.names
    defaults = cspec.defaults
    nfields = len(fields)
    # each value goes into `out` as it is read, in field order (no list of values made and
    # read again); `i` is the first field not put in: from there on the defaults
    depth += 1
    i = 0
    gaps = False  # a field read left out of `out` (null without a default, or no value)
    try:
        while i < count:
            if pos >= stop:
                raise Malformed(pos, f"{cspec.name} ends after {i} of {count} fields")
            c = buf[pos]
            if i >= nfields:
                ctx.note("amqp10.bad-field", pos, f"{cspec.name} has {count} fields, not {nfields}")
                pos = stop
                break
            kind = kinds[i * 256 + c]
            if kind == _KIND_ABSENT:  # null: the default stays
                default = defaults[i]
                if default is not _MISSING:
                    out[names[i]] = default
                else:
                    gaps = True
                pos += 1
                i += 1
                continue
            if kind & _NOT_ALLOWED:
                what = f"{cspec.name}.{fields[i].name} is {_ctor_name(c)}, not {fields[i].expected}"
                ctx.note("amqp10.bad-field-type", pos, what)
                kind ^= _NOT_ALLOWED
            # the usual encodings of plain fields read here, not by a call; anything else, and
            # any that does not fit before `stop`, goes to its reader (which reports)
            value: Any
            if kind == _KIND_CONSTANT:
                value = _ZERO_VALUES[c]
                pos += 1
            elif kind == _KIND_BYTE and pos + 2 <= stop:
                value = buf[pos + 1]
                pos += 2
            elif kind == _KIND_TEXT8 and pos + 2 <= stop and pos + 2 + buf[pos + 1] <= stop:
                nxt = pos + 2 + buf[pos + 1]
                try:
                    value = buf[pos + 2 : nxt].decode("utf-8")
                    pos = nxt
                except UnicodeDecodeError:  # the reader notes it
                    value, pos = read_at(ctx, c, pos + 1, stop, depth)
            elif kind == _KIND_UINT32 and pos + 5 <= stop:
                value = (
                    (buf[pos + 1] << 24) | (buf[pos + 2] << 16) | (buf[pos + 3] << 8) | buf[pos + 4]
                )
                pos += 5
            elif kind == _KIND_VBIN8 and pos + 2 <= stop and pos + 2 + buf[pos + 1] <= stop:
                nxt = pos + 2 + buf[pos + 1]
                value = buf[pos + 2 : nxt].hex()
                pos = nxt
            elif kind == _KIND_FIELD:
                value, pos = _field_value(ctx, cspec, fields[i], c, pos, stop, depth)
            else:
                value, pos = read_at(ctx, c, pos + 1, stop, depth)
            if value is not _MISSING:
                out[names[i]] = value
            else:
                gaps = True
            i += 1
    except Malformed as exc:
        ctx.malformed(exc)
        pos = stop
        gaps = True
    if pos != stop:
        ctx.note("amqp10.bad-encoding", pos, f"{stop - pos} bytes left over in {cspec.name}")
    mandatory = cspec.mandatory
    # a mandatory field can be missing only if one was left out or the list ended before the
    # last of them (they are in field order): else no lookup per mandatory field
    if mandatory and (gaps or i <= mandatory[-1]):
        for j in mandatory:
            if j >= i or names[j] not in out:
                ctx.note("amqp10.missing-mandatory", off, f"{cspec.name} without {fields[j].name}")
    while i < nfields:
        default = defaults[i]
        if default is not _MISSING:
            out[names[i]] = default
        i += 1
    return stop


def _composite_handler(cspec: CompositeSpec) -> Callable[..., tuple[Any, int]]:
    name = cspec.name

    def handle(
        ctx: Context, descriptor: Any, ctor: int, off: int, end: int, depth: int
    ) -> tuple[Any, int]:
        out: dict[str, Any] = {"type": name}
        if ctor not in _LIST_WIDTHS:
            ctx.note("amqp10.bad-encoding", off - 1, f"{name} is not a list")
            value, pos = READERS[ctor](ctx, off, end, depth)
            return {"descriptor": jsonmap.descriptor(descriptor), "value": value}, pos
        return out, decode_fields(ctx, cspec, ctor, off, end, depth, out)

    return handle


def _restricted_handler(restricted: spec.Restricted) -> Callable[..., tuple[Any, int]]:
    name = restricted.name
    base = primitive(restricted.source)
    allowed = CONSTRUCTORS.get(base)

    def handle(
        ctx: Context, descriptor: Any, ctor: int, off: int, end: int, depth: int
    ) -> tuple[Any, int]:
        if allowed is not None and ctor not in allowed:
            what = f"{name} is {_ctor_name(ctor)}, not {restricted.source}"
            ctx.note("amqp10.bad-field-type", off - 1, what)
        value, pos = READERS[ctor](ctx, off, end, depth)
        return {"type": name, "value": value}, pos

    return handle


def _register() -> None:
    for code, cspec in SPECS.items():
        handler = _composite_handler(cspec)
        HANDLERS[code] = handler
        HANDLERS[spec.COMPOSITES[code].symbol] = handler
    for restricted in spec.RESTRICTED.values():
        if restricted.code is not None:
            handler = _restricted_handler(restricted)
            HANDLERS[restricted.code] = handler
            if restricted.symbol:
                HANDLERS[restricted.symbol] = handler


_register()


def descriptor_code(descriptor: Any) -> int | None:
    """The numeric code of a descriptor given as a code or as a spec symbol."""
    if type(descriptor) is int:
        return descriptor
    if type(descriptor) is str:
        return SYMBOL_CODES.get(descriptor)
    return None


def decode_body(ctx: Context, off: int, end: int) -> tuple[str | None, dict[str, Any], int]:
    """A frame body: the described composite at `off`. Returns (its name, its fields, the
    position after it); (None, {"descriptor", "value"}, ...) for a descriptor the tables do not
    know. Never raises: damage is a finding and what was decoded is kept."""
    buf = ctx.buf
    fields: dict[str, Any] = {}
    try:
        if off + 1 >= end or buf[off] != DESCRIBED:
            raise Malformed(off, "frame body is not a described type")
        descriptor, pos = read_descriptor(ctx, off + 1, end, 0)
        code = descriptor_code(descriptor)
        cspec = SPECS.get(code) if code is not None else None
        if pos >= end:
            raise Malformed(pos, "frame body without its value")
        if cspec is None:
            value, pos = READERS[buf[pos]](ctx, pos + 1, end, 1)
            return None, {"descriptor": jsonmap.descriptor(descriptor), "value": value}, pos
        return cspec.name, fields, decode_fields(ctx, cspec, buf[pos], pos + 1, end, 1, fields)
    except Malformed as exc:
        ctx.malformed(exc)
        return None, fields, end
