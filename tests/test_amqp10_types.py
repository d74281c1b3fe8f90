"""The AMQP 1.0 type system: values Qpid Proton encodes decode to what they were, and damage of
every kind becomes findings, never an exception and never a read past the end."""

from __future__ import annotations

import json
import math
import struct
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import proton
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqpscope.codec.amqp10 import composites, jsonmap, spec, types  # noqa: F401 (handlers)

D = proton.Data

# -- an independent model of values: (kind, payload) nodes, put with Proton, expected as JSON --
INT_RANGES = {
    "ubyte": (0, 2**8 - 1),
    "byte": (-(2**7), 2**7 - 1),
    "ushort": (0, 2**16 - 1),
    "short": (-(2**15), 2**15 - 1),
    "uint": (0, 2**32 - 1),
    "int": (-(2**31), 2**31 - 1),
    "ulong": (0, 2**64 - 1),
    "long": (-(2**63), 2**63 - 1),
}
#: kind -> (Proton's array element type, Data method)
PROTON = {
    "null": (D.NULL, "put_null"),
    "bool": (D.BOOL, "put_bool"),
    "ubyte": (D.UBYTE, "put_ubyte"),
    "byte": (D.BYTE, "put_byte"),
    "ushort": (D.USHORT, "put_ushort"),
    "short": (D.SHORT, "put_short"),
    "uint": (D.UINT, "put_uint"),
    "int": (D.INT, "put_int"),
    "ulong": (D.ULONG, "put_ulong"),
    "long": (D.LONG, "put_long"),
    "float": (D.FLOAT, "put_float"),
    "double": (D.DOUBLE, "put_double"),
    "decimal32": (D.DECIMAL32, "put_decimal32"),
    "decimal64": (D.DECIMAL64, "put_decimal64"),
    "decimal128": (D.DECIMAL128, "put_decimal128"),
    "char": (D.CHAR, "put_char"),
    "timestamp": (D.TIMESTAMP, "put_timestamp"),
    "uuid": (D.UUID, "put_uuid"),
    "binary": (D.BINARY, "put_binary"),
    "string": (D.STRING, "put_string"),
    "symbol": (D.SYMBOL, "put_symbol"),
}
#: IEEE 754-2008 BID parameters: width -> (trailing bits t, bias, precision, max biased exponent)
BID = {32: (20, 101, 7, 191), 64: (50, 398, 16, 767), 128: (110, 6176, 34, 12287)}
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MIN_MS = int((datetime(1, 1, 1, tzinfo=UTC) - EPOCH) / timedelta(milliseconds=1))
MAX_MS = (
    int((datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC) - EPOCH).total_seconds()) * 1000
)


def bid_bits(sign: int, coefficient: int, biased: int, width: int) -> int:
    """Encode a decimal the way IEEE 754-2008 BID does (written from the standard, for the test)."""
    t = BID[width][0]
    top = sign << (width - 1)
    if coefficient < 1 << (t + 3):
        return top | (biased << (t + 3)) | coefficient
    return top | (0b11 << (width - 3)) | (biased << (t + 1)) | (coefficient & ((1 << (t + 1)) - 1))


def decimals(width: int) -> st.SearchStrategy:
    """(sign, coefficient, biased exponent) of a canonical decimal of `width` bits."""
    _t, _bias, precision, emax = BID[width]
    return st.tuples(st.integers(0, 1), st.integers(0, 10**precision - 1), st.integers(0, emax))


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=300)
#: kind -> a strategy for its raw values (built once: Hypothesis describes strategies lazily)
RAW: dict[str, st.SearchStrategy] = {
    "bool": st.booleans(),
    "float": st.floats(width=32),
    "double": st.floats(),
    "decimal32": decimals(32),
    "decimal64": decimals(64),
    "decimal128": decimals(128),
    "char": st.characters(blacklist_categories=("Cs",)),
    "timestamp": st.integers(MIN_MS, MAX_MS),
    "uuid": st.uuids(),
    "binary": st.binary(max_size=300),
    "string": _TEXT,
    "symbol": st.text("abcdefghijklmnopqrstuvwxyz:-._0123456789", max_size=300),
} | {kind: st.integers(lo, hi) for kind, (lo, hi) in INT_RANGES.items()}


def _tagged(kind: str) -> st.SearchStrategy:
    return RAW[kind].map(lambda v: (kind, v))


SCALARS = st.one_of([st.just(("null", None))] + [_tagged(kind) for kind in RAW])
KEY_KINDS = ("string", "symbol", "ulong", "int", "bool", "uuid", "binary", "timestamp")
KEYS = st.one_of([st.just(("null", None))] + [_tagged(kind) for kind in KEY_KINDS])
DESCRIPTORS = st.one_of(  # outside the spec's: vendor codes (domain > 0) and `test:` symbols
    st.integers(1 << 32, 2**64 - 1),
    st.text("abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=12).map(lambda s: "test:" + s),
)


def _arrays(kind: str) -> st.SearchStrategy:
    items = st.lists(RAW[kind], max_size=6)
    return st.one_of(
        items.map(lambda v: ("array", (kind, v))),
        st.tuples(DESCRIPTORS, items).map(lambda dv: ("darray", (dv[0], kind, dv[1]))),
    )


ARRAYS = st.one_of([_arrays(kind) for kind in RAW])


def key_text(node: tuple[str, Any]) -> str:
    value = expected(node)
    return value if isinstance(value, str) else json.dumps(value)


def compound(children: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        st.lists(children, max_size=6).map(lambda v: ("list", v)),
        st.lists(st.tuples(KEYS, children), max_size=6, unique_by=lambda kv: key_text(kv[0])).map(
            lambda v: ("map", v)
        ),
        st.tuples(DESCRIPTORS, children).map(lambda v: ("described", v)),
        ARRAYS,
    )


#: values nested in lists, maps, arrays and described types
VALUES = st.recursive(SCALARS, compound, max_leaves=25)
#: Hypothesis warns that describing VALUES takes a long text; it only describes it, once
LONG_REPR = pytest.mark.filterwarnings("ignore:Generating overly large repr")


def put(data: proton.Data, node: tuple[str, Any]) -> None:
    kind, value = node
    if kind == "list":
        data.put_list()
        data.enter()
        for child in value:
            put(data, child)
        data.exit()
    elif kind == "map":
        data.put_map()
        data.enter()
        for key, child in value:
            put(data, key)
            put(data, child)
        data.exit()
    elif kind == "described":
        descriptor, child = value
        data.put_described()
        data.enter()
        put(data, ("ulong" if isinstance(descriptor, int) else "symbol", descriptor))
        put(data, child)
        data.exit()
    elif kind in ("array", "darray"):
        descriptor, element, items = value if kind == "darray" else (None, *value)
        data.put_array(descriptor is not None, PROTON[element][0])
        data.enter()
        if descriptor is not None:
            put(data, ("ulong" if isinstance(descriptor, int) else "symbol", descriptor))
        for item in items:
            put(data, (element, item))
        data.exit()
    elif kind.startswith("decimal"):
        width = int(kind[7:])
        bits = bid_bits(value[0], value[1], value[2], width)
        data_value: Any = bits.to_bytes(16, "big") if width == 128 else bits
        getattr(data, PROTON[kind][1])(data_value)
    elif kind == "null":
        data.put_null()
    else:
        getattr(data, PROTON[kind][1])(value)


def expected(node: tuple[str, Any]) -> Any:
    """What amqpscope's JSON mapping (docs/amqp10-json.md) says `node` reads as."""
    kind, value = node
    if kind == "list":
        return [expected(child) for child in value]
    if kind == "map":
        return {key_text(key): expected(child) for key, child in value}
    if kind == "described":
        return {"descriptor": descriptor_text(value[0]), "value": expected(value[1])}
    if kind == "array":
        return [expected((value[0], item)) for item in value[1]]
    if kind == "darray":
        descriptor, element, items = value
        return [
            {"descriptor": descriptor_text(descriptor), "value": expected((element, item))}
            for item in items
        ]
    if kind.startswith("decimal"):
        sign, coefficient, biased = value
        bias = BID[int(kind[7:])][1]
        return str(Decimal((sign, tuple(int(d) for d in str(coefficient)), biased - bias)))
    if kind == "timestamp":
        moment = EPOCH + timedelta(milliseconds=value)
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if kind == "uuid":
        return str(value)
    if kind == "binary":
        return value.hex()
    if kind in ("float", "double") and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def descriptor_text(descriptor: int | str) -> str:
    if isinstance(descriptor, int):
        return f"0x{descriptor >> 32:08x}:0x{descriptor & 0xFFFFFFFF:08x}"
    return descriptor


def same(want: Any, got: Any) -> bool:
    """Equality, except that a float32 matches when it reads back as the same float32."""
    if isinstance(want, float) and isinstance(got, float):
        if want == got:
            return True
        try:
            return struct.pack(">f", want) == struct.pack(">f", got)
        except OverflowError:
            return False
    if isinstance(want, list) and isinstance(got, list):
        return len(want) == len(got) and all(same(w, g) for w, g in zip(want, got, strict=True))
    if isinstance(want, dict) and isinstance(got, dict):
        return want.keys() == got.keys() and all(same(want[k], got[k]) for k in want)
    return type(want) is type(got) and want == got


def encode(node: tuple[str, Any]) -> bytes:
    data = proton.Data()
    put(data, node)
    return data.encode()


@LONG_REPR
@settings(max_examples=400, deadline=None)
@given(VALUES)
def test_values_proton_encodes_decode_to_the_same_values(node: tuple[str, Any]) -> None:
    raw = encode(node)
    value, end, findings = types.decode(raw)
    assert end == len(raw)
    assert same(expected(node), value), (node, value)
    assert {f.code for f in findings} <= {"amqp.unknown-descriptor"}


@settings(max_examples=200, deadline=None)
@given(st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_float32_is_the_shortest_decimal_that_reads_back(value: float) -> None:
    got = types.decode(encode(("float", value)))[0]
    assert struct.pack(">f", got) == struct.pack(">f", value)
    assert len(repr(got)) <= len(repr(struct.unpack(">f", struct.pack(">f", value))[0]))


# -- every constructor in the table, including the compact forms Proton's Data does not pick --
HAND_ENCODED = {
    0x40: ("40", None),
    0x41: ("41", True),
    0x42: ("42", False),
    0x43: ("43", 0),
    0x44: ("44", 0),
    0x45: ("45", []),
    0x50: ("50ff", 255),
    0x51: ("51ff", -1),
    0x52: ("5207", 7),
    0x53: ("53ff", 255),
    0x54: ("54fe", -2),
    0x55: ("5580", -128),
    0x56: ("5601", True),
    0x60: ("60ffff", 65535),
    0x61: ("618000", -32768),
    0x70: ("70ffffffff", 2**32 - 1),
    0x71: ("7180000000", -(2**31)),
    0x72: ("723f800000", 1.0),
    0x73: ("730001f600", "\U0001f600"),
    0x74: ("7432800001", "1"),
    0x80: ("80ffffffffffffffff", 2**64 - 1),
    0x81: ("818000000000000000", -(2**63)),
    0x82: ("82c00c000000000000", -3.5),
    0x83: ("830000000000000000", "1970-01-01T00:00:00.000Z"),
    0x84: ("84b180000000000096", "-1.50"),
    0x94: ("94" + "30400000000000000000000000000001", "1"),
    0x98: ("98" + "0123456789abcdef0123456789abcdef", "01234567-89ab-cdef-0123-456789abcdef"),
    0xA0: ("a0020aff", "0aff"),
    0xA1: ("a103c3a96b", "ék"),
    0xA3: ("a3026162", "ab"),
    0xB0: ("b0000000020aff", "0aff"),
    0xB1: ("b10000000161", "a"),
    0xB3: ("b30000000161", "a"),
    0xC0: ("c00502a1016140", ["a", None]),
    0xC1: ("c10602a301615201", {"a": 1}),
    0xD0: ("d0000000050000000143", [0]),
    0xD1: ("d1000000080000000252015202", {"1": 2}),
    0xE0: ("e00402520102", [1, 2]),
    0xF0: ("f00000000700000002560100", [True, False]),
}


def test_every_encoding_in_the_table_decodes() -> None:
    assert set(HAND_ENCODED) == set(spec.ENCODINGS)
    for code, (hexed, want) in HAND_ENCODED.items():
        raw = bytes.fromhex(hexed)
        value, end, findings = types.decode(raw)
        assert (value, end, findings) == (want, len(raw), []), f"{code:#04x}: {value!r}"


@pytest.mark.parametrize(
    ("bits", "width", "text"),
    [
        (0x32800001, 32, "1"),
        (0x31C0000000000001, 64, "1"),
        (0x3040 << 112 | 1, 128, "1"),
        (0xB180000000000096, 64, "-1.50"),
        (bid_bits(0, 9999999, 191, 32), 32, "9.999999E+96"),  # the 11-form
        (0x77F8967F, 32, "9.999999E+96"),  # the same value, as the standard spells it
        (0x78000000, 32, "Infinity"),
        (0xF8000000, 32, "-Infinity"),
        (0x7C000000, 32, "NaN"),
        (0x7E000000, 32, "sNaN"),
        (0x601FFFFF, 32, "0E-101"),  # non-canonical coefficient (> 10**7 - 1) reads as 0
        (0x00000000, 32, "0E-101"),
    ],
)
def test_decimals_are_exact(bits: int, width: int, text: str) -> None:
    assert jsonmap.decimal(bits, width) == text


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "1970-01-01T00:00:00.000Z"),
        (-1, "1969-12-31T23:59:59.999Z"),
        (951782400000, "2000-02-29T00:00:00.000Z"),
        (1700000000123, "2023-11-14T22:13:20.123Z"),
        (2**63 - 1, "+292278994-08-17T07:12:55.807Z"),
        (-(2**63), "-292275055-05-16T16:47:04.192Z"),
    ],
)
def test_timestamps_are_iso_8601_with_milliseconds(ms: int, text: str) -> None:
    assert jsonmap.timestamp(ms) == text


@settings(max_examples=300, deadline=None)
@given(st.integers(MIN_MS, MAX_MS))
def test_timestamps_agree_with_datetime(ms: int) -> None:
    assert jsonmap.timestamp(ms) == expected(("timestamp", ms))


def test_known_composites_are_named_and_unknown_descriptors_kept() -> None:
    value, _, findings = types.decode(bytes.fromhex("0053274541"))  # modified, as list0
    assert value == {"type": "modified"}
    assert findings == []
    value, _, findings = types.decode(bytes.fromhex("00a309616d71703a666f6f3a5201"))
    assert value == {"descriptor": "amqp:foo:", "value": 1}
    assert [f.code for f in findings] == ["amqp.unknown-descriptor"]
    value, _, findings = types.decode(bytes.fromhex("0053777101020304"))  # amqp-value section
    assert value == {"type": "amqp-value", "value": 0x01020304}


def test_map_keys_that_are_not_strings_become_json_text() -> None:
    raw = encode(("map", [(("ulong", 5), ("null", None)), (("bool", True), ("int", 1))]))
    assert types.decode(raw)[0] == {"5": None, "true": 1}
    assert jsonmap.map_key(["a", 1]) == '["a",1]'


# -- damage -------------------------------------------------------------------------------------
def codes(raw: bytes) -> list[str]:
    return [f.code for f in types.decode(raw)[2]]


@pytest.mark.parametrize(
    ("hexed", "code", "words"),
    [
        ("7000", "amqp10.bad-encoding", "uint needs 4 bytes"),  # truncated value
        ("ff", "amqp10.bad-encoding", "invalid constructor 0xff"),  # bad constructor
        ("0f", "amqp10.bad-encoding", "invalid constructor 0x0f"),
        ("c003054040", "amqp10.bad-encoding", "count 5 is larger"),  # count larger than size
        ("d0ffffffff00000001" + "40", "amqp10.bad-encoding", "runs past the end"),  # 4 GB size
        ("b0fffffff0", "amqp10.bad-encoding", "runs past the end"),
        ("c1040340404040", "amqp10.bad-encoding", "odd count"),  # odd map count
        ("a102c328", "amqp10.invalid-utf8", "not valid UTF-8"),
        ("5602", "amqp10.bad-encoding", "neither 0 nor 1"),
        ("7300110000", "amqp10.bad-encoding", "not a Unicode scalar value"),
        ("e00402700001", "amqp10.bad-encoding", "uint needs 4 bytes"),
        ("f0ffffffffffffffff", "amqp10.bad-encoding", "runs past the end"),
        ("e0030f4000", "amqp10.bad-encoding", "left over"),
        ("c00402404040", "amqp10.bad-encoding", "left over"),
        ("00", "amqp10.bad-encoding", "without its descriptor"),
        ("0053", "amqp10.bad-encoding", "needs 1 bytes"),
        ("005310", "amqp10.bad-encoding", "without its value"),
        ("00c00100" + "40", "amqp10.bad-encoding", "neither a ulong nor a symbol"),
    ],
)
def test_damage_is_a_finding_at_its_offset(hexed: str, code: str, words: str) -> None:
    _value, end, findings = types.decode(bytes.fromhex(hexed))
    assert code in [f.code for f in findings]
    assert any(words in f.message and " at offset " in f.message for f in findings), findings
    assert end <= len(hexed) // 2


def test_nesting_thousands_deep_is_cut_at_the_limit() -> None:
    depth = 5000
    total = 9 * depth + 1
    raw = b"".join(b"\xd0" + struct.pack(">II", total - 9 * i - 5, 1) for i in range(depth))
    raw += b"\x40"
    value, _, findings = types.decode(raw)
    assert value is None
    assert [f.code for f in findings] == ["amqp10.bad-encoding"]
    assert f"deeper than {types.MAX_DEPTH}" in findings[0].message
    described = b"\x00\x53\x99" * 10000 + b"\x40"
    assert any("deeper than" in f.message for f in types.decode(described)[2])
    arrays = b"\xe0\x03\x01\xe0" * 3000
    assert types.decode(arrays)[2]


def test_zero_width_arrays_claiming_billions_of_elements_are_capped() -> None:
    raw = bytes.fromhex("f0000000050fffffff40")  # 268 million nulls in 10 bytes
    value, _, findings = types.decode(raw)
    assert len(value) == types.MAX_ZERO_WIDTH_ELEMENTS
    assert [f.code for f in findings] == ["amqp10.bad-encoding"]


@LONG_REPR
@settings(max_examples=150, deadline=None)
@given(VALUES, st.data())
def test_a_value_cut_anywhere_never_reads_past_the_cut(node: tuple[str, Any], data: Any) -> None:
    """The bytes after `end` would complete the value: decoding must not look at them."""
    raw = encode(node)
    cut = data.draw(st.integers(0, len(raw) - 1))
    _value, end, findings = types.decode(raw, 0, cut)
    assert end <= cut
    assert findings, "a truncated value must be reported"


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_never_raise(raw: bytes) -> None:
    value, end, findings = types.decode(raw)
    assert end <= len(raw)
    assert isinstance(findings, list)
    json.dumps(value)  # whatever came out is JSON


def test_every_value_is_json() -> None:
    raw = encode(
        ("list", [("double", float("nan")), ("float", float("-inf")), ("uuid", uuid.UUID(int=1))])
    )
    value = types.decode(raw)[0]
    assert json.loads(json.dumps(value)) == [
        "NaN",
        "-Infinity",
        "00000000-0000-0000-0000-000000000001",
    ]
