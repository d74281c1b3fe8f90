"""The frames every message sends are handed to their handlers by name on the hot path (compiled,
a direct call instead of one through a table). The tables stay the one place that says which
handler a frame has: these hold the named calls to what the tables say."""

from __future__ import annotations

import inspect
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from amqpscope.capture.files import open_capture
from amqpscope.codec.amqp10 import decoder as decoder10
from amqpscope.dissect import Dissector
from amqpscope.track.amqp091 import connection as connection091
from amqpscope.track.amqp091.channel import METHODS, ChannelEpoch
from amqpscope.track.amqp10 import connection as connection10
from amqpscope.track.amqp10.connection import ConnectionTracker
from amqpscope.track.tracker import Tracker
from tests.oracle import keylog_for

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
sys.path.insert(0, str(CAPTURES.parent / "bench"))

from synth import build_10  # noqa: E402


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
    assert "self._transfer(frame, fields, buf, pos, ctx.findings, None, ctx)" in (
        inspect.getsource(decoder10.Decoder.decode)
    )
    tracker = ConnectionTracker(1, "c", "s", "1.0")
    assert tracker.handlers["transfer"].__func__ is ConnectionTracker._transfer
    assert "self._transfer_checked(me, frame, out)" in inspect.getsource(ConnectionTracker.feed)
    # the usual transfer goes straight on to what the table's handler ends in; any other is
    # checked and handled as the tables say
    checked = inspect.getsource(ConnectionTracker._transfer_checked)
    assert "self._check_session(me, frame, out)" in checked
    assert "self._transfer(me.name, frame, out)" in checked
    assert "self._transfer_on(session, half, link, side, frame, out)" in checked
    assert "self._transfer_on(" in inspect.getsource(ConnectionTracker._transfer)


def _tracked(paths: list[Path]) -> list[Any]:
    """What the tracker makes of each capture: every frame's findings, and the summary."""
    out: list[Any] = []
    for path in paths:
        tracker = Tracker()
        with open_capture(str(path)) as capture:
            for frame in Dissector(keylog=keylog_for(path)).run(capture):
                tracker.feed(frame)
                out.append([f.to_json() for f in frame.findings])
        tracker.finish()
        out.append([f.to_json() for f in tracker.findings])
        out.append(tracker.summary())
    return out


def test_1_0_tracker_fast_paths_say_what_the_checked_paths_say(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The usual transfer's session and link found once, and a settling disposition's levels
    set once per link, give the frames' findings and the summary (its series included) that
    the checked path and a level set per delivery give: on every 1.0 capture, the mid-stream
    one, and a bench-like one of 600 messages settled in batches of 50."""
    bench = tmp_path / "bench-10.pcap"
    build_10(bench, 600)
    paths = [*sorted(CAPTURES.glob("10-*.pcap")), CAPTURES / "mid-stream.pcap", bench]
    calls: Counter[str] = Counter()
    checked, transfer = ConnectionTracker._transfer_checked, ConnectionTracker._transfer

    def counted_checked(self: ConnectionTracker, *args: Any) -> None:
        calls["transfers"] += 1
        checked(self, *args)

    def counted(self: ConnectionTracker, *args: Any) -> None:
        calls["checked"] += 1  # the fast path declined this one
        transfer(self, *args)

    monkeypatch.setattr(ConnectionTracker, "_transfer_checked", counted_checked)
    monkeypatch.setattr(ConnectionTracker, "_transfer", counted)
    fast = _tracked(paths)
    # the comparison compares something: the fast path took nearly every transfer
    assert calls["transfers"] > 1000 and calls["checked"] < calls["transfers"] // 20, calls
    calls.clear()
    forget = ConnectionTracker._forget

    def forget_levelled(
        self: ConnectionTracker, session: Any, delivery: Any, left: bool = False, level: bool = True
    ) -> bool:
        return forget(self, session, delivery, left)  # every level set as it falls

    monkeypatch.setattr(connection10, "_TRANSFER_MAPPED", False)  # every transfer checked
    monkeypatch.setattr(ConnectionTracker, "_forget", forget_levelled)
    assert _tracked(paths) == fast
    assert calls["checked"] == calls["transfers"] > 1000, calls  # and here none of them
