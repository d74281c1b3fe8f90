"""Field tables and arrays: every type RabbitMQ reads, exact values, damage as `Malformed`.

Encodings are built here with struct (independently of the decoder) and by pika's encoder; the
decoded values follow docs/amqp091-json.md.
"""

from __future__ import annotations

import decimal
import struct
from datetime import UTC, datetime

import pika.data
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqpscope.codec.amqp091 import fieldtable as ft


def entry(key: str, tag: str, payload: bytes = b"") -> bytes:
    raw = key.encode()
    return bytes([len(raw)]) + raw + tag.encode() + payload


def table(*entries: bytes) -> bytes:
    body = b"".join(entries)
    return struct.pack(">I", len(body)) + body


def decode(raw: bytes) -> dict:
    value, end = ft.read_table(raw, 0, len(raw))
    assert end == len(raw)
    return value


def longstr(raw: bytes) -> bytes:
    return struct.pack(">I", len(raw)) + raw


EVERY_TYPE = [
    (entry("t", "t", b"\x01"), True),
    (entry("f0", "t", b"\x00"), False),
    (entry("b", "b", struct.pack(">b", -128)), -128),
    (entry("B", "B", b"\xff"), 255),
    (entry("s", "s", struct.pack(">h", -300)), -300),
    (entry("u", "u", struct.pack(">H", 65535)), 65535),
    (entry("I", "I", struct.pack(">i", -(2**31))), -(2**31)),
    (entry("i", "i", struct.pack(">I", 2**32 - 1)), 2**32 - 1),
    (entry("l", "l", struct.pack(">q", -(2**63))), -(2**63)),
    (entry("L", "L", struct.pack(">q", -2)), -2),  # RabbitMQ reads 'L' as 'l' (errata)
    (entry("f", "f", struct.pack(">f", 1.5)), 1.5),
    (entry("d", "d", struct.pack(">d", -2.25)), -2.25),
    (entry("D", "D", struct.pack(">Bi", 2, 314)), "3.14"),
    (entry("Dneg", "D", struct.pack(">Bi", 3, -1)), "-0.001"),
    (entry("D0", "D", struct.pack(">Bi", 0, 7)), "7"),
    (entry("Dtiny", "D", struct.pack(">Bi", 12, 5)), "0.000000000005"),
    (entry("S", "S", longstr("héllo".encode())), "héllo"),
    (entry("Sbin", "S", longstr(b"\xff\xfe")), {"hex": "fffe"}),
    (entry("x", "x", longstr(b"\x00\x01\xff")), {"hex": "0001ff"}),
    (entry("T", "T", struct.pack(">Q", 1700000000)), "2023-11-14T22:13:20Z"),
    (entry("Tbig", "T", struct.pack(">Q", 2**63)), 2**63),  # no calendar date: the number
    (entry("V", "V"), None),
    (entry("F", "F", table(entry("inner", "t", b"\x01"))), {"inner": True}),
    (
        entry(
            "A", "A", longstr(b"I" + struct.pack(">i", 7) + b"t\x00" + b"V" + b"S" + longstr(b"a"))
        ),
        [7, False, None, "a"],
    ),
]


@pytest.mark.parametrize("raw,expected", EVERY_TYPE, ids=[e[0][1:3].decode() for e in EVERY_TYPE])
def test_every_type(raw: bytes, expected: object) -> None:
    key = raw[1 : 1 + raw[0]].decode()
    assert decode(table(raw)) == {key: expected}


def test_every_type_in_one_table_keeps_order() -> None:
    got = decode(table(*(raw for raw, _ in EVERY_TYPE)))
    assert list(got.values()) == [value for _, value in EVERY_TYPE]


def test_non_finite_floats_are_strings_json_can_carry() -> None:
    got = decode(
        table(
            entry("nan", "d", struct.pack(">d", float("nan"))),
            entry("inf", "f", struct.pack(">f", float("inf"))),
            entry("ninf", "d", struct.pack(">d", float("-inf"))),
        )
    )
    assert got == {"nan": "NaN", "inf": "Infinity", "ninf": "-Infinity"}


def test_nested_arrays_and_tables() -> None:
    inner = table(entry("deep", "A", longstr(b"F" + table(entry("k", "s", b"\x00\x02")))))
    got = decode(table(entry("outer", "F", inner)))
    assert got == {"outer": {"deep": [{"k": 2}]}}


def test_nesting_deeper_than_the_bound_is_malformed_not_a_crash() -> None:
    raw = table(entry("leaf", "t", b"\x01"))
    for _ in range(ft.MAX_DEPTH + 5):
        raw = table(entry("n", "F", raw))
    with pytest.raises(ft.Malformed, match="deeper"):
        decode(raw)


def test_an_unknown_tag_stops_the_table_and_keeps_what_came_before() -> None:
    raw = table(entry("good", "t", b"\x01"), entry("bad", "Z", b"\x00\x00"), entry("x", "V"))
    with pytest.raises(ft.Malformed, match="unknown field type 'Z'") as info:
        decode(raw)
    assert info.value.partial == {"good": True}


def test_damage_inside_a_nested_table_keeps_the_partial_nesting() -> None:
    inner = table(entry("ok", "B", b"\x05"), entry("bad", "?"))
    raw = table(entry("first", "t", b"\x00"), entry("nested", "F", inner))
    with pytest.raises(ft.Malformed) as info:
        decode(raw)
    assert info.value.partial == {"first": False, "nested": {"ok": 5}}


@pytest.mark.parametrize(
    "raw,message",
    [
        (struct.pack(">I", 10) + b"\x00", "runs past the frame"),  # table longer than the frame
        (b"\x00\x00", "table length runs past"),  # not even a length
        (table(b"\x05ab"), "field name runs past"),  # key longer than the table
        (table(entry("k", "I", b"\x00\x01")), "'I' value runs past"),
        (table(entry("k", "S", struct.pack(">I", 99) + b"abc")), "'S' value of 99 bytes"),
        (table(entry("k", "x", b"\x00\x00")), "'x' length runs past"),
        (table(entry("k", "D", b"\x01")), "'D' value runs past"),
        (table(entry("k", "A", struct.pack(">I", 50))), "array of 50 bytes"),
        (table(entry("k", "F", struct.pack(">I", 50))), "table of 50 bytes"),
        (table(entry("k", "A", longstr(b"I\x00"))), "'I' value runs past"),
    ],
)
def test_lengths_past_the_frame_or_table(raw: bytes, message: str) -> None:
    with pytest.raises(ft.Malformed, match=message):
        decode(raw)


def test_a_value_may_not_cross_its_tables_end_even_when_the_frame_goes_on() -> None:
    """The table says 7 bytes; the 'I' inside needs 4 more than that: malformed, though the
    bytes that follow in the frame would have satisfied it."""
    raw = struct.pack(">I", 5) + entry("k", "I") + b"\x00\x00\x00\x01" + b"more"
    with pytest.raises(ft.Malformed, match="'I' value runs past"):
        ft.read_table(raw, 0, len(raw))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.binary(max_size=20))
def test_random_bytes_never_raise_anything_but_malformed_nor_read_past_the_limit(
    raw: bytes, beyond: bytes
) -> None:
    """Bytes after `limit` never change the outcome: nothing past it is read."""
    outcomes = []
    for tail in (beyond, b"\xff" * len(beyond)):
        try:
            outcomes.append(ft.read_table(raw + tail, 0, len(raw)))
        except ft.Malformed as exc:
            outcomes.append(("malformed", str(exc), repr(exc.partial)))
    assert outcomes[0] == outcomes[1]


# -- pika's encoder -----------------------------------------------------------------------------

keys = st.text(max_size=12).filter(lambda s: len(s.encode()) <= 255)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.text(max_size=30),
    st.binary(max_size=30),
    st.builds(
        lambda raw, scale: decimal.Decimal(raw).scaleb(-scale),
        st.integers(min_value=-(2**31), max_value=2**31 - 1),
        st.integers(min_value=0, max_value=9),
    ),
    st.datetimes(
        min_value=datetime(1970, 1, 1), max_value=datetime(9999, 12, 31), timezones=st.just(UTC)
    ).map(lambda d: d.replace(microsecond=0)),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=20,
)
tables = st.dictionaries(keys, values, max_size=6)


def as_decoded(value: object) -> object:
    """What amqpscope's JSON mapping makes of a value pika encoded."""
    if isinstance(value, dict):
        return {k: as_decoded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_decoded(v) for v in value]
    if isinstance(value, bytes):
        return {"hex": value.hex()}
    if isinstance(value, decimal.Decimal):
        return value  # compared by value below
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    return value


def same(decoded: object, expected: object) -> bool:
    if isinstance(expected, decimal.Decimal):
        return isinstance(decoded, str) and decimal.Decimal(decoded) == expected
    if isinstance(expected, dict) and isinstance(decoded, dict):
        return decoded.keys() == expected.keys() and all(
            same(decoded[k], v) for k, v in expected.items()
        )
    if isinstance(expected, list) and isinstance(decoded, list):
        return len(decoded) == len(expected) and all(map(same, decoded, expected))
    return type(decoded) is type(expected) and decoded == expected


@settings(max_examples=200, deadline=None)
@given(tables)
def test_tables_pika_encodes_decode_to_the_same_values(value: dict) -> None:
    pieces: list[bytes] = []
    pika.data.encode_table(pieces, value)
    raw = b"".join(pieces)
    assert same(decode(raw), as_decoded(value))
