"""The 1.0 transfer's highlights written out (`_transfer_words`) say what HIGHLIGHTS' rules say."""

from __future__ import annotations

from itertools import product
from typing import Any

from amqpscope.codec.frames import PERFORMATIVE, Frame
from amqpscope.render.lines import RULES, _transfer_words, by_rules, highlights

_MISSING = object()
HANDLES = (0, 7, 0xFFFFFFFF, 1 << 32, -1, None, "h", True)
IDS = (12, 0, None, 2.5)
TAGS = ("31", "x" * 15, "x" * 16, "", "a b", "\x1b[2J", "<redacted>", None, 5)
FLAGS = (True, False, None, 1, _MISSING)
STATES = (_MISSING, {"type": "accepted"})


def _fields(values: tuple[Any, ...]) -> dict[str, Any]:
    names = ("handle", "delivery-id", "delivery-tag", "settled", "more", "aborted", "state")
    return {name: value for name, value in zip(names, values, strict=True) if value is not _MISSING}


def test_the_written_out_transfer_says_what_the_rules_say() -> None:
    rules = RULES["1.0"]["transfer"]
    taken = 0
    for values in product(HANDLES, IDS, TAGS, FLAGS, FLAGS, FLAGS, STATES):
        fields = _fields(values)
        words = _transfer_words(fields)
        if words:
            taken += 1
            assert words == by_rules(rules, fields), fields
    assert taken > 0  # the usual transfers do take the written-out path


def test_a_frames_highlights_are_the_rules_either_way() -> None:
    for fields in (
        {"handle": 0, "delivery-id": 3, "delivery-tag": "33", "settled": False, "more": True},
        {"handle": 0, "delivery-id": 3, "delivery-tag": "a\nb", "settled": True},
    ):
        frame = Frame("1.0", PERFORMATIVE, "transfer", 0, b"")
        frame.fields = fields
        assert highlights(frame) == by_rules(RULES["1.0"]["transfer"], fields)
