"""The trackers' state moves only by the step functions of their `rules.py`, and each fast path
in them (an answer read from the tables once, or a lookup skipped for most frames) gives what
the tables give, over every (state, event) pair the tables can see.

The 0-9-1 connection's order of its four tables (handshake, close from any state, adoption
after lost bytes, a mid-stream close-ok) was decided in `connection.py` until issue 41; the
oracle below is that code as it was, so `rules.connection_step` is held to the same answers."""

from __future__ import annotations

import itertools

from amqpscope.codec.amqp091.spec import METHODS as SPEC_METHODS
from amqpscope.track.amqp091 import rules as r091
from amqpscope.track.amqp10 import rules as r10

#: every 0-9-1 event name a tracker can be fed on channel 0 or a channel
NAMES_091 = sorted({m.name for m in SPEC_METHODS.values()} | {"protocol-header", "bogus.method"})
DIRECTIONS = (r091.C2S, r091.S2C)
#: every 1.0 frame name the tables know, and one they do not
NAMES_10 = sorted({name for row in r10.CONNECTION_TRANSITIONS.values() for name in row} | {"bogus"})


def _old_connection_decision(
    state: str, key: tuple[str, str], from_start: bool, lenient: bool
) -> tuple[str | None, bool]:
    """amqp091/connection.py's `_connection` before issue 41 (its state and unexpected count)."""
    after = r091.CONNECTION_TRANSITIONS[state].get(key)
    if after is None and state != r091.CLOSED:
        after = r091.CONNECTION_ANY_STATE.get(key)
        if after is not None and state == r091.CLOSING:
            after = None
    if after is None and lenient:
        after = r091.CONNECTION_ADOPTED.get(key)
    if after is None and not from_start and state == r091.OPEN:
        after = r091.CONNECTION_ADOPTED_CLOSE.get(key)
    unexpected = False
    if after is None:
        allowed = r091.CONNECTION_STAYS.get(key)
        if (allowed is None or state not in allowed) and from_start and not lenient:
            unexpected = True
    return after, unexpected


def test_0_9_1_connection_step_orders_the_tables_as_the_tracker_did() -> None:
    pairs = 0
    for state, direction, name, from_start, lenient in itertools.product(
        r091.CONNECTION_TRANSITIONS, DIRECTIONS, NAMES_091, (True, False), (True, False)
    ):
        key = (direction, name)
        got = r091.connection_step(state, key, from_start, lenient)
        assert got == _old_connection_decision(state, key, from_start, lenient), (state, key)
        pairs += 1
    # every state, direction and method of the spec, from the start or not, lenient or not
    assert pairs == len(r091.CONNECTION_TRANSITIONS) * 2 * len(NAMES_091) * 4 > 5000


def test_0_9_1_connection_step_moves_the_handshake_and_adopts_mid_stream() -> None:
    """A few answers worked by hand, so the oracle above is no copy of a wrong rule."""
    step = r091.connection_step
    assert step(r091.AWAIT_HEADER, (r091.C2S, "protocol-header"), True, False) == (
        r091.AWAIT_START,
        False,
    )
    assert step(r091.TUNING, (r091.S2C, "connection.close"), True, False) == (r091.CLOSING, False)
    assert step(r091.CLOSING, (r091.S2C, "connection.close"), True, False) == (None, False)
    assert step(r091.OPEN, (r091.C2S, "connection.tune-ok"), True, False) == (None, True)
    assert step(r091.OPEN, (r091.C2S, "connection.tune-ok"), True, True) == (r091.TUNED, False)
    assert step(r091.OPEN, (r091.S2C, "connection.close-ok"), False, False) == (
        r091.CLOSED,
        False,
    )
    assert r091.connection_first(True) == r091.AWAIT_HEADER
    assert r091.connection_first(False) == r091.OPEN


def test_0_9_1_channel_fast_path_equals_the_table_for_every_state_and_method() -> None:
    """`channel_step` skips the lookup for methods no channel transition names (every
    message's); for every state, direction and method it answers what the table answers."""
    for state, direction, name in itertools.product(
        r091.CHANNEL_TRANSITIONS, DIRECTIONS, NAMES_091
    ):
        table = r091.CHANNEL_TRANSITIONS[state].get((direction, name))
        assert r091.channel_step(state, direction, name) == table, (state, direction, name)
    # the skip skips something: the message methods move no channel
    assert "basic.publish" not in r091.CHANNEL_EVENTS


def test_0_9_1_channel_adoption_closes_only_an_active_channel_on_close_ok() -> None:
    for state, name in itertools.product(r091.CHANNEL_TRANSITIONS, NAMES_091):
        expected = (
            r091.CH_CLOSED
            if state in (r091.CH_OPENING, r091.CH_OPEN) and name == "channel.close-ok"
            else None
        )
        assert r091.channel_adopted_step(state, name) == expected, (state, name)
    assert r091.channel_first(True) == r091.CH_CLOSED
    assert r091.channel_first(False) == r091.CH_OPEN


def test_1_0_connection_fast_path_equals_the_table_for_every_state_and_frame() -> None:
    for state, name in itertools.product(r10.CONNECTION_TRANSITIONS, NAMES_10):
        table = r10.CONNECTION_TRANSITIONS[state].get(name)
        assert r10.connection_step(state, name) == table, (state, name)
    assert r10.TRANSFER_ON_OPENED == r10.OPENED


def test_1_0_session_and_link_fast_paths_equal_the_tables() -> None:
    """The transfer fast path (`ConnectionTracker._transfer_checked`) takes a transfer on a
    mapped session's attached link as allowed: so do the tables, and they allow it on no other
    session or link state."""
    for state in r10.SESSION_TRANSITIONS:
        allowed = r10.SESSION_TRANSITIONS[state].get("transfer") is not None
        assert allowed == (state == r10.MAPPED and r10.TRANSFER_ON_MAPPED), state
    for state in r10.LINK_TRANSITIONS:
        allowed = r10.LINK_TRANSITIONS[state].get("transfer") is not None
        assert allowed == (state == r10.ATTACHED and r10.TRANSFER_ON_ATTACHED), state


def test_1_0_lost_bytes_and_mid_stream_adopt_unknown_before_open_only() -> None:
    for state in r10.CONNECTION_TRANSITIONS:
        expected = r10.UNKNOWN if state in (r10.START, r10.HEADER) else state
        assert r10.connection_lost(state) == expected, state
    assert r10.CONNECTION_MID_STREAM == r10.UNKNOWN
