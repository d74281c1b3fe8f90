"""`types.read_at` reads the usual small encodings itself (short text, one-byte integers,
constants) instead of calling through `READERS`. The table's readers are the oracle: for every
constructor, on whole, cut, empty and invalid-UTF-8 values, `read_at` must give what the reader
gives (value and next position), raise what it raises and note what it notes."""

from __future__ import annotations

from typing import Any

import pytest

from amqpscope.codec.amqp10 import spec
from amqpscope.codec.amqp10.types import READERS, Context, Malformed, read_at

#: value bytes after a constructor: text, a cut size, invalid UTF-8, high bytes, nothing
TAILS = [
    b"",
    b"\x00",
    b"\x05hello",
    b"\x05hel",
    b"\x02\xc3\x28",
    b"\x7f",
    b"\x80",
    b"\xff",
    b"\x03\xe2\x82\xac",
    b"\x01\x00\x00\x00\x01\x41",
]


def _outcome(read: Any, data: bytes, end: int) -> tuple[Any, ...]:
    ctx = Context(memoryview(data))
    try:
        value, nxt = read(ctx, 1, end, 0)
    except Malformed as exc:
        return ("malformed", exc.offset, exc.why, [f.message for f in ctx.findings])
    return ("value", type(value), value, nxt, [f.message for f in ctx.findings])


@pytest.mark.parametrize("ctor", sorted(spec.ENCODINGS))
def test_read_at_gives_what_the_table_reader_gives(ctor: int) -> None:
    for tail in TAILS:
        data = bytes([ctor]) + tail
        for end in {len(data), max(1, len(data) - 1), 1}:
            expected = _outcome(READERS[ctor], data, end)
            got = _outcome(
                lambda ctx, off, end, depth: read_at(ctx, ctor, off, end, depth), data, end
            )
            assert got == expected, (hex(ctor), tail, end)


def test_read_at_gives_a_new_empty_list_each_time() -> None:
    ctx = Context(memoryview(b"\x45\x45"))
    first, _ = read_at(ctx, 0x45, 1, 2, 0)
    second, _ = read_at(ctx, 0x45, 2, 2, 0)
    assert first == second == [] and first is not second
