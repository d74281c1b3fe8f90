"""pika's cache of frame reprs held to the uncached read.

Lines are pika's own reprs (pika's classes, as `test_logs_pika_property` builds them) with
their slots (whole items' numbers, a body's plain text) filled with other values, including
the cache's own markers and holes, a number's leading zeros and numbers too long to be slots;
each line is read through the cache (first, second and later sightings) and without it, and
the two reads must be equal, value types included, or fail alike.
"""

from __future__ import annotations

import re
from typing import Any

import hypothesis.strategies as st
from hypothesis import given, settings

from amqpscope.logs import pika
from amqpscope.logs.proton_values import LogSyntaxError
from tests.test_logs_pika_property import frames, received

NUMBER = re.compile(r"=(\d+)(?=['\"])")
FRAGMENT = re.compile(r"fragment=b'([^'\"\\]*)'")

digits = st.one_of(
    st.integers(0, 2**64).map(str),
    st.integers(0, 9999).map(lambda n: f"00{n}"),
    st.integers(0, 8).map(lambda i: str(739_104_628_551_000_000 + i)),
    st.text("0123456789", min_size=19, max_size=30),
    st.sampled_from(["\x00", "\x01", "x", "٣"]),
)
plain = st.one_of(
    st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=12),
    st.integers(0, 8).map(lambda i: f"amqpscope slot {i}"),
    st.sampled_from(["", "\x00", "\x01", "a=5", "'", '"', "\\x00", "é"]),
)


def read(line: str, cached: bool) -> Any:
    at = line.index("<")
    try:
        shown = pika._cached(line, at) if cached else pika._frame(line, at)
    except (LogSyntaxError, ValueError) as why:
        return type(why).__name__
    values = sorted((k, type(v).__name__, repr(v)) for k, v in shown.values.items())
    try:  # the frame's bytes: the cache may make them without encoding
        data: Any = pika.frame_bytes(shown)
    except LogSyntaxError as why:
        data = str(why)
    return (
        shown.kind,
        shown.channel,
        shown.method,
        values,
        shown.body_size,
        repr(shown.fragment),
        data,
    )


@st.composite
def variants(draw: st.DrawFn) -> list[str]:
    """A frame's repr and copies of it with some slots refilled."""
    line = repr(received(draw(frames)))
    lines = [line]
    for _ in range(draw(st.integers(1, 4))):
        copy = NUMBER.sub(lambda m: "=" + (draw(digits) if draw(st.booleans()) else m[1]), line)
        copy = FRAGMENT.sub(lambda m: f"fragment=b'{draw(plain)}'", copy)
        lines.append(copy)
    return lines


@settings(max_examples=400, deadline=None)
@given(st.lists(variants(), min_size=1, max_size=3), st.randoms(use_true_random=False))
def test_cached_reads_equal_uncached(groups: list[list[str]], rng: Any) -> None:
    pika._CACHE.clear()
    lines = [line for group in groups for line in group] * 3
    rng.shuffle(lines)
    for line in lines:
        assert read(line, cached=True) == read(line, cached=False), line


def test_a_delivery_is_read_from_the_cache() -> None:
    """The cache is used: a delivery's reprs after the second hit the cache's entries."""
    pika._CACHE.clear()
    for tag in range(1, 4):
        for line in (
            "<METHOD(['channel_number=1', 'frame_type=1', \"method=<Basic.Deliver(["
            f"'consumer_tag=c1', 'delivery_tag={tag}', 'exchange=', 'redelivered=False', "
            "'routing_key=q'])>\"])>",
            f"<Header(['body_size={tag + 9}', 'channel_number=1', 'frame_type=2', "
            "\"properties=<BasicProperties(['content_type=text/plain', 'delivery_mode=2'])>\"])>",
            f"<Body(['channel_number=1', \"fragment=b'message {tag}'\", 'frame_type=3'])>",
        ):
            assert read(line, cached=True) == read(line, cached=False)
    entries = list(pika._CACHE.values())
    assert all(isinstance(entry, pika._Entry) for entry in entries)
    assert len(entries) == 3
    # a method's and a header's bytes are made without encoding (a body's are its text)
    assert [entry.data is not None for entry in entries if isinstance(entry, pika._Entry)] == [
        True,
        True,
        False,
    ]


@settings(max_examples=1000, deadline=None)
@given(
    st.lists(
        st.sampled_from(["=", "'", '"', "5", "12", "0" * 18, "9", "٣", "²", "x", "[", "=="]),
        max_size=10,
    ).map("".join)
)
def test_numbers_are_split_as_the_pattern_splits_them(text: str) -> None:
    """`pika._split_numbers` gives what `pika._NUMBER.split` does."""
    parts = pika._NUMBER.split(text)
    assert pika._split_numbers(text) == (parts[::2], parts[1::2])
