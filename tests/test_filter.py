"""Display filters: the grammar, Wireshark's semantics for absent fields, errors with columns."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from amqpscope.filter import FilterError, compile_filter

TRANSFER = {
    "name": "transfer",
    "kind": "performative",
    "channel": 0,
    "src": "127.0.0.1:5672",
    "fields": {"handle": 0, "delivery-id": 12, "settled": False, "more": True, "tag": "00ff"},
    "findings": [],
}
CLOSE = {
    "name": "channel.close",
    "kind": "method",
    "channel": 3,
    "src": "[::1]:40000",
    "fields": {"reply-code": 406, "reply-text": "PRECONDITION_FAILED - unknown delivery tag 9"},
    "findings": [{"code": "amqp.resync"}],
}


@pytest.mark.parametrize(
    ("expr", "transfer", "close"),
    [
        ('name == "transfer"', True, False),
        ('name == "transfer" and fields.settled == false', True, False),
        ("fields.settled == false", True, False),
        ("fields.settled != true", True, False),  # absent field: false, as in Wireshark
        ("fields.delivery-id >= 12 && fields.more", True, False),
        ("fields.reply-code > 400", False, True),
        ("fields.reply-code == 406 or fields.handle == 0", True, True),
        ('not name == "transfer"', False, True),
        ('!(name == "transfer") and channel == 3', False, True),
        ("findings", False, True),
        ("findings[0].code == 'amqp.resync'", False, True),
        ("findings[-1]", False, True),
        ('src contains "::1"', False, True),
        ('fields.reply-text matches "unknown delivery tag \\\\d+"', False, True),
        ('fields contains "handle"', True, False),
        ("fields.settled == 0", False, False),  # booleans are not numbers
        ('channel == "0"', False, False),  # nor strings
        ("fields.reply-code < 1e3", False, True),
        ("fields.nothing.deeper == 1", False, False),
    ],
)
def test_filters(expr: str, transfer: bool, close: bool) -> None:
    predicate = compile_filter(expr)
    assert predicate(TRANSFER) is transfer
    assert predicate(CLOSE) is close


@pytest.mark.parametrize(
    ("expr", "column"),
    [
        ("", 1),
        ('name == "transfer" and', 23),
        ("name ==", 8),
        ("name = 3", 6),
        ("(name == 1", 11),
        ("fields. == 1", 9),
        ('name matches "("', 14),
        ("name == 1 2", 11),
        ("== 1", 1),
        ("findings[x]", 10),
    ],
)
def test_bad_filters_point_at_the_column(expr: str, column: int) -> None:
    with pytest.raises(FilterError) as excinfo:
        compile_filter(expr)
    assert excinfo.value.column == column, str(excinfo.value)
    assert str(excinfo.value).startswith(f"column {column}: ")


@given(st.text(max_size=40))
def test_any_text_compiles_or_fails_cleanly(text: str) -> None:
    try:
        predicate = compile_filter(text)
    except FilterError as exc:
        assert 1 <= exc.column <= len(text) + 1
    else:
        assert predicate(TRANSFER) in (True, False)
        assert predicate({}) in (True, False)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("(" * 3000 + "frame" + ")" * 3000, "nested too deeply (more than 100 levels)"),
        ("not " * 101 + "frame", "nested too deeply (more than 100 levels)"),
        (
            'name matches "a{4294967296}"',
            "bad regular expression: the repetition number is too large",
        ),
        (
            'name matches "' + "(" * 5000 + ")" * 5000 + '"',
            "bad regular expression: nested too deeply",
        ),
    ],
)
def test_what_python_cannot_compile_is_a_filter_error(text: str, message: str) -> None:
    """Deep nesting once raised RecursionError and a huge repeat count OverflowError: both ended
    `read -Y` in "internal error"."""
    with pytest.raises(FilterError) as caught:
        compile_filter(text)
    assert str(caught.value.args[0]) == message or message in str(caught.value)


def test_a_hundred_levels_still_parse() -> None:
    predicate = compile_filter("(" * 50 + "not " * 50 + "frame" + ")" * 50)
    assert predicate({"frame": 1}) is True
