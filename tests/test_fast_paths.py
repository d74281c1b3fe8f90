"""The frames every message sends are handed to their handlers by name on the hot path (compiled,
a direct call instead of one through a table). The tables stay the one place that says which
handler a frame has: these hold the named calls to what the tables say."""

from __future__ import annotations

import inspect

from amqpscope.codec.amqp10 import decoder as decoder10
from amqpscope.track.amqp091 import connection as connection091
from amqpscope.track.amqp091.channel import METHODS, ChannelEpoch
from amqpscope.track.amqp10.connection import ConnectionTracker


def test_0_9_1_tracker_calls_by_name_what_the_method_table_says() -> None:
    source = inspect.getsource(connection091.ConnectionTracker)
    named = {
        ("C2S", "basic.publish"): "publish",
        ("S2C", "basic.deliver"): "deliver",
        ("C2S", "basic.ack"): "client_settles",
    }
    for (direction, name), handler in named.items():
        assert f'direction == {direction} and name == "{name}"' in source
        assert f"epoch.{handler}(frame, out)" in source
        key = (getattr(connection091, direction), name)
        assert METHODS[key] is getattr(ChannelEpoch, handler)


def test_1_0_decoder_and_tracker_call_transfer_by_name_as_their_tables_say() -> None:
    assert decoder10._AFTER["transfer"] is decoder10.Decoder._transfer
    assert "self._transfer(frame, fields, buf, pos, ctx.findings)" in inspect.getsource(
        decoder10.Decoder.decode
    )
    tracker = ConnectionTracker(1, "c", "s", "1.0")
    assert tracker.handlers["transfer"].__func__ is ConnectionTracker._transfer
    assert "self._transfer(side, frame, out)" in inspect.getsource(ConnectionTracker.feed)
