"""Property tests of the Proton grammar: performatives made with Proton, printed Proton's way,
read back by amqpscope, must decode to what the codec makes of Proton's own encoding.

Two printers:
- the old form is printed by Proton itself: `pn_data_format` (qpid-proton's `pn_inspect`, the
  text of `PN_TRACE_FRM` before 0.34 and of Qpid Dispatch routers) via python-qpid-proton's
  binding. No hand-written oracle at all.
- the new form (`value_dump.c`, 0.34 on) is not exposed by the binding outside a transport, so
  `dump_new` below prints it following that file's rules; the recorded logs
  (test_logs_proton.py) check it against the real tracer.

Either way the expected fields come from `codec.amqp10` decoding `Data.encode()`: Proton's
encoder, not ours.
"""

from __future__ import annotations

import string
import uuid
from typing import Any

import cproton
import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings
from proton import (
    UNDESCRIBED,
    Array,
    Data,
    Described,
    byte,
    int32,
    short,
    symbol,
    ubyte,
    uint,
    ulong,
    ushort,
)

from amqpscope.codec.amqp10 import spec
from amqpscope.codec.amqp10.decoder import Decoder
from amqpscope.codec.amqp10.frames import BODIES, TYPE_SASL, make_frame
from amqpscope.logs.amqp10_encode import frame_bytes, primitive
from amqpscope.logs.reader import LogReader

SASL_CODES = set(BODIES[TYPE_SASL])
FRAME_CODES = sorted(set(BODIES[0]) | SASL_CODES)
BY_NAME = {c.name: code for code, c in spec.COMPOSITES.items()}
DELIVERY_STATES = [BY_NAME[n] for n in ("accepted", "rejected", "released", "modified", "received")]

# text a symbol may hold (Proton prints other bytes escaped; a symbol is ASCII)
SYMBOL_TEXT = st.text(string.ascii_letters + string.digits + ":-._ ", max_size=12)
# strings: any text but a double quote (Proton does not escape it in the new form; see
# test_quote_inside_string for how far a quote is read)
STRING_TEXT = st.text(st.characters(blacklist_characters='"', codec="utf-8"), max_size=16)

PRIMITIVES: dict[str, st.SearchStrategy[Any]] = {
    "boolean": st.booleans(),
    "ubyte": st.integers(0, 0xFF).map(ubyte),
    "ushort": st.integers(0, 0xFFFF).map(ushort),
    "uint": st.integers(0, 0xFFFFFFFF).map(uint),
    "ulong": st.integers(0, 2**64 - 1).map(ulong),
    "byte": st.integers(-128, 127).map(byte),
    "short": st.integers(-(2**15), 2**15 - 1).map(short),
    "int": st.integers(-(2**31), 2**31 - 1).map(int32),
    "long": st.integers(-(2**63), 2**63 - 1),
    "string": STRING_TEXT,
    "symbol": SYMBOL_TEXT.map(symbol),
    "binary": st.binary(max_size=12),
    "uuid": st.uuids(),
}
# values whose JSON does not depend on the type the log loses (a timestamp or a char printed as
# a number or a bare character is only a number or text once printed: not generated untyped)
SIMPLE = st.one_of(
    st.none(),
    *(PRIMITIVES[t] for t in ("boolean", "uint", "ulong", "int", "long", "string", "symbol")),
    PRIMITIVES["binary"],
    PRIMITIVES["uuid"],
)
UNTYPED = st.recursive(
    SIMPLE,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(SYMBOL_TEXT.map(symbol), inner, max_size=3),
    ),
    max_leaves=6,
)


@st.composite
def composite(draw: Any, code: int, depth: int = 0) -> Described:
    """A described list of the composite `code`, each field present or not."""
    fields: list[Any] = []
    for field in spec.COMPOSITES[code].fields:
        if not draw(st.booleans()):
            fields.append(None)
            continue
        fields.append(draw(field_value(field, depth)))
    while fields and fields[-1] is None:
        fields.pop()
    return Described(ulong(code), fields)


def field_value(field: spec.Field, depth: int) -> st.SearchStrategy[Any]:
    if field.type == "*" or primitive(field.type) in BY_NAME:
        wanted = field.requires if field.type == "*" else primitive(field.type)
        codes = [c for c, comp in spec.COMPOSITES.items() if wanted in (comp.name, *comp.provides)]
        if wanted == "delivery-state":
            codes = DELIVERY_STATES
        if not codes or depth >= 2:
            return st.none()
        return st.sampled_from(codes).flatmap(lambda code: composite(code, depth + 1))
    base = primitive(field.type)
    if field.multiple:
        if base != "symbol":
            return st.none()
        return st.one_of(
            PRIMITIVES["symbol"],
            st.lists(SYMBOL_TEXT, min_size=1, max_size=3).map(_symbols),
        )
    if base in ("map", "fields"):
        return st.dictionaries(SYMBOL_TEXT.map(symbol), UNTYPED, max_size=3)
    if base in PRIMITIVES:
        return PRIMITIVES[base]
    if base == "timestamp":
        return st.integers(0, 2**40)
    return st.none()


def _symbols(items: list[str]) -> Array:
    return Array(UNDESCRIBED, Data.SYMBOL, *(symbol(i) for i in items))


def performatives() -> st.SearchStrategy[Described]:
    return st.sampled_from(FRAME_CODES).flatmap(composite)


def expected(value: Described) -> tuple[str, dict[str, Any]]:
    """What the codec makes of Proton's own encoding of `value`."""
    data = Data()
    data.put_object(value)
    sasl = int(value.descriptor) in SASL_CODES
    frame = make_frame(frame_bytes(0, TYPE_SASL if sasl else 0, bytes(data.encode())))
    Decoder(show_secrets=True).decode(frame)
    return frame.name, frame.fields


def logged(line: str) -> tuple[str, dict[str, Any]]:
    reader = LogReader("generated.log", show_secrets=True)
    frames = reader.feed(line, 1)
    assert reader.findings == [], (line, reader.findings)
    assert len(frames) == 1, line
    return frames[0].name, frames[0].fields


def proton_inspect(value: Any) -> str:
    """The old form, printed by Proton (`pn_data_format`, qpid-proton's `pn_inspect`)."""
    data = Data()
    data.put_object(value)
    err, text = cproton.pn_data_format(data._data, 1 << 20)
    assert err >= 0
    return bytes(text).decode()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(performatives())
def test_old_form_as_proton_prints_it(value: Described) -> None:
    text = proton_inspect(value)
    assert logged(f"[0x55d2c8a1e0a0]:0 -> {text}\n") == expected(value)


# -- the new form, printed as value_dump.c does --------------------------------------------
UNSIGNED = (ubyte, ushort, uint, ulong)


def quote(raw: bytes) -> str:
    """`pn_quote_data`: printable ASCII but the backslash as itself, other bytes as \\xNN."""
    return "".join(chr(b) if 32 <= b < 127 and b != 0x5C else f"\\x{b:02x}" for b in raw)


def dump_new(value: Any) -> str:
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, UNSIGNED):
        return f"0x{int(value):x}"
    if isinstance(value, symbol):
        raw = str(value).encode()
        bare = raw[:1].isalpha() and all(chr(c).isalnum() or c == 0x2D for c in raw[1:])
        return f":{quote(raw)}" if bare else f':"{quote(raw)}"'
    if isinstance(value, str):
        return f'"{quote(value.encode())}"'
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, bytes):
        return f'b"{quote(value)}"'
    if isinstance(value, uuid.UUID):
        return f"UUID({value})"
    if isinstance(value, Array):
        name = {Data.SYMBOL: "symbol"}[value.type]
        return f"@<{name}>[" + ", ".join(dump_new(e) for e in value.elements) + "]"
    if isinstance(value, Described):
        code = int(value.descriptor)
        comp = spec.COMPOSITES[code]
        items = [
            f"{comp.fields[i].name}={dump_new(v)}" if i < len(comp.fields) else dump_new(v)
            for i, v in enumerate(value.value)
            if v is not None
        ]
        return f"@{comp.name}({code}) [" + ", ".join(items) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{dump_new(k)}={dump_new(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(dump_new(v) for v in value) + "]"
    raise TypeError(type(value))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(performatives(), st.integers(0, 0xFFFF))
def test_new_form_as_value_dump_prints_it(value: Described, channel: int) -> None:
    layer = "SASL" if int(value.descriptor) in SASL_CODES else "AMQP"
    line = f"[0x7f00d8001ab0]: {layer}:FRAME:{channel} <- {dump_new(value)}\n"
    assert logged(line) == expected(value)


def test_quote_inside_string() -> None:
    """Proton's new form leaves a double quote in a string unescaped: it is kept unless what
    follows it could end the value."""
    line = '[0x1]: AMQP:FRAME:0 -> @open(16) [container-id="say "hi" now", hostname="h"]\n'
    assert logged(line)[1]["container-id"] == 'say "hi" now'
