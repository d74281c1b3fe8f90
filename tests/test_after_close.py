"""A 0-9-1 channel frame after connection.close-ok: the finding says what was tracked (a frame
after the connection closed, and the channel's state then), not "while it is open"; no channel
is made for it. The capture is 091-publish-consume with the client's FIN carrying a
channel.close-ok, sent after the server's connection.close-ok."""

from __future__ import annotations

from pathlib import Path

from amqpscope.capture.files import open_capture
from amqpscope.dissect import Dissector
from amqpscope.track.tracker import Tracker
from tests.crafted import CAPTURES, rewrite, with_payload

#: channel.close-ok on channel 1: type 1, channel 1, size 4, class 20 method 41, frame end
CHANNEL_CLOSE_OK = bytes.fromhex("0100010000000400140029ce")


def tracked(path: Path) -> tuple[list, Tracker]:
    tracker = Tracker()
    frames = []
    with open_capture(str(path)) as capture:
        for frame in Dissector().run(capture):
            tracker.feed(frame)
            frames.append(frame)
    tracker.finish()
    return frames, tracker


def test_a_channel_frame_after_connection_close_ok(tmp_path: Path) -> None:
    source = CAPTURES / "091-publish-consume.pcap"
    frames, _ = tracked(source)
    fin = max(f.packet for f in frames if f.kind != "transport") + 1  # the client's FIN
    path = with_payload(source, tmp_path / "late.pcap", fin, CHANNEL_CLOSE_OK)
    frames, tracker = tracked(path)
    names = [(f.direction, f.name) for f in frames if f.kind != "transport"]
    assert names[-2:] == [("s2c", "connection.close-ok"), ("c2s", "channel.close-ok")]
    late = frames[[f.name for f in frames].index("channel.close-ok", len(frames) - 3)]
    codes = [f.code for f in late.findings]
    assert codes == ["amqp091.frame-after-close"]
    message = late.findings[0].message
    assert "after the connection closed" in message and "while it is open" not in message
    close_ok = next(f for f in frames if f.name == "connection.close-ok")
    assert f"frame {close_ok.number}" in message
    summary = tracker.summary()
    (conn,) = summary["connections"]
    assert conn["state"] == "closed"
    assert [c["channel"] for c in conn["channels"]] == [1]  # no second epoch of channel 1


def test_the_channels_state_at_the_close_is_said(tmp_path: Path) -> None:
    """connection.close-ok while channel 1 was still open (its close-ok never came): the late
    channel.close-ok says the channel was open when the connection closed."""
    source = CAPTURES / "091-publish-consume.pcap"
    frames, _ = tracked(source)
    # the server's channel.close-ok moves to channel 2 (same length), so channel 1 is still
    # closing when the connection closes
    ok = next(f for f in frames if f.name == "channel.close-ok")
    other = ok.data[:1] + (2).to_bytes(2, "big") + ok.data[3:]
    step = rewrite(
        source, tmp_path / "step.pcap", lambda f: other if f.number == ok.number else None
    )
    fin = max(f.packet for f in frames if f.kind != "transport") + 1
    path = with_payload(step, tmp_path / "late.pcap", fin, CHANNEL_CLOSE_OK)
    frames, _ = tracked(path)
    late = [f for f in frames if f.kind != "transport"][-1]  # each FIN is a record of its own
    assert late.name == "channel.close-ok"
    assert late.findings[0].code == "amqp091.frame-after-close"
    assert "closing-by-client when it did" in late.findings[0].message
