"""One tracker protocol (`track/protocol.py`) both versions' connection trackers implement: the
same methods with the same signatures, and `feed` with a caller's reused list gives the findings
a fresh list would (the tracking layer feeds both versions one way)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from amqpscope.capture.files import open_capture
from amqpscope.codec.frames import Frame
from amqpscope.dissect import Dissector
from amqpscope.findings import Finding
from amqpscope.track import amqp091, amqp10
from amqpscope.track.protocol import ConnectionTrackerProtocol
from amqpscope.track.tracker import IMPLEMENTATIONS, TRACKED_VERSIONS

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
METHODS = ("feed", "transport", "finish", "summary")


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS, ids=lambda cls: cls.__module__)
def test_both_trackers_have_the_protocol_s_methods_and_signatures(implementation: type) -> None:
    for name in METHODS:
        assert inspect.signature(getattr(implementation, name)) == inspect.signature(
            getattr(ConnectionTrackerProtocol, name)
        ), (implementation, name)


@pytest.mark.parametrize(
    "capture",
    [
        "10-link-violations.pcap",
        "10-outcomes.pcap",
        "mid-stream.pcap",
        "091-bad-acks.pcap",
        "091-rpc.pcap",
    ],
)
def test_feed_into_a_reused_list_raises_what_a_fresh_list_does(capture: str) -> None:
    """Each connection's tracker fed directly, one list reused for every frame (cleared after
    each), against the same tracker fed with no list: the same findings, frame by frame."""
    reused: dict[int, ConnectionTrackerProtocol] = {}
    fresh: dict[int, ConnectionTrackerProtocol] = {}
    out: list[Finding] = []
    raised = 0
    with open_capture(str(CAPTURES / capture)) as packets:
        for frame in Dissector().run(packets):
            if frame.kind in ("transport", "layer") or frame.version not in TRACKED_VERSIONS:
                continue
            for trackers in (reused, fresh):
                if frame.conn not in trackers:
                    trackers[frame.conn] = _new(frame)
            given = reused[frame.conn].feed(frame, out)
            assert given is out
            assert [f.to_json() for f in out] == [
                f.to_json() for f in fresh[frame.conn].feed(frame)
            ]
            raised += len(out)
            out.clear()
    assert reused and all(t.frames for t in reused.values())
    assert [t.summary() for t in reused.values()] == [t.summary() for t in fresh.values()]
    assert raised > 0  # the comparison compares something: each capture raises findings


def _new(frame: Frame) -> ConnectionTrackerProtocol:
    """The connection tracker of the frame's version, as `Tracker` makes it."""
    client, server = (frame.src, frame.dst) if frame.direction == "c2s" else (frame.dst, frame.src)
    if frame.version == "1.0":
        return amqp10.ConnectionTracker(frame.conn, client, server, frame.version)
    return amqp091.ConnectionTracker(frame.conn, client, server, frame.version)
