"""The 0-9-1 frames' highlights written out (`_basic_words`) say what HIGHLIGHTS' rules say."""

from __future__ import annotations

from itertools import product
from typing import Any

from amqpscope.codec.frames import Frame
from amqpscope.render.lines import RULES, _basic_words, by_rules, highlights

_MISSING = object()
NUMBERS = (0, 5, 2**64 - 1, 10**61, -1, None, True, "5", 2.5, _MISSING)
STRINGS = (
    "orders",
    "",
    "x" * 60,
    "x" * 61,
    "a b",
    "a\nb",
    "\x1b[2J",
    "\u202e",
    "é",
    "<redacted>",
    None,
    5,
    _MISSING,
)
FLAGS = (True, False, None, 1, "", _MISSING)
KINDS = (*STRINGS, "size=5", "size=50", "size=5 text/plain")


def _fields(names: tuple[str, ...], values: tuple[Any, ...]) -> dict[str, Any]:
    return {name: value for name, value in zip(names, values, strict=True) if value is not _MISSING}


def _cases() -> list[tuple[str, dict[str, Any]]]:
    cases: list[tuple[str, dict[str, Any]]] = []
    for size in NUMBERS:
        cases.append(("content-body", _fields(("size",), (size,))))
        for kind in KINDS:
            properties = _fields(("content-type",), (kind,))
            cases.append(("content-header", {"body-size": size, "properties": properties}))
        cases.append(("content-header", {"body-size": size, "properties": "x"}))
        cases.append(("content-header", {"body-size": size}))
    names = ("exchange", "routing-key", "mandatory")
    for values in product(STRINGS, STRINGS, FLAGS):
        cases.append(("basic.publish", _fields(names, values)))
    names = ("delivery-tag", "routing-key", "redelivered")
    for values in product(NUMBERS, STRINGS, FLAGS):
        cases.append(("basic.deliver", _fields(names, values)))
    for values in product(NUMBERS, FLAGS):
        cases.append(("basic.ack", _fields(("delivery-tag", "multiple"), values)))
    return cases


def test_the_written_out_frames_say_what_the_rules_say() -> None:
    taken: set[str] = set()
    for name, fields in _cases():
        words = _basic_words(name, fields)
        if words:
            taken.add(name)
            assert words == by_rules(RULES["0-9-1"][name], fields), (name, fields)
    # the usual frames do take the written-out path
    assert taken == {
        "content-header",
        "content-body",
        "basic.publish",
        "basic.deliver",
        "basic.ack",
    }


def test_other_frames_are_the_rules_own() -> None:
    assert _basic_words("basic.get-ok", {"delivery-tag": 1, "redelivered": False}) == ""
    assert _basic_words("basic.nack", {"delivery-tag": 1, "multiple": False}) == ""


def test_a_frames_highlights_are_the_rules_either_way() -> None:
    for version in ("0-9-1", "0-8"):
        for name, fields in _cases():
            frame = Frame(version, "method", name, 1, b"")
            frame.fields = fields
            assert highlights(frame) == by_rules(RULES["0-9-1"][name], fields), (name, fields)
