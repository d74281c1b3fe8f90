"""The tracking layer's front door: frames in (from the codec), state and findings out.

One connection tracker per AMQP connection, chosen by version; 0-9-1 frames also go to a
capture-wide correlator (RPC pairs, message journeys across connections). Findings a tracker
raises are put on the frame that raised them, so the timeline shows them where they happen.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from amqpscope.codec.frames import Frame
from amqpscope.findings import Finding
from amqpscope.track import amqp091, amqp10

VERSIONS_091 = ("0-9-1", "0-9", "0-8")


class Tracker:
    def __init__(self) -> None:
        self.connections: dict[int, amqp10.ConnectionTracker | amqp091.ConnectionTracker] = {}
        self.correlator = amqp091.Correlator()
        self.findings: list[Finding] = []

    def feed(self, frame: Frame) -> None:
        tracker = self.connections.get(frame.conn)
        if tracker is None:
            if frame.version not in ("1.0", *VERSIONS_091):
                return  # named, not tracked (0-10, unknown headers)
            client, server = (
                (frame.src, frame.dst)
                if frame.direction == "c2s"
                else (
                    frame.dst,
                    frame.src,
                )
            )
            kind = amqp10 if frame.version == "1.0" else amqp091
            tracker = kind.ConnectionTracker(frame.conn, client, server, frame.version)
            self.connections[frame.conn] = tracker
        raised = tracker.feed(frame)
        if frame.version in VERSIONS_091:
            self.correlator.feed(frame)
        for found in raised:
            placed = replace(found, conn=frame.conn, frame=frame.number, packet=frame.packet)
            frame.findings.append(placed)
            self.findings.append(placed)

    def finish(self) -> None:
        for conn, tracker in self.connections.items():
            self.findings.extend(replace(f, conn=conn) for f in tracker.finish())

    def summary(self) -> dict[str, Any]:
        """What `amqpscope summary --json` prints."""
        out: dict[str, Any] = {
            "connections": [t.summary() for t in self.connections.values()],
            "findings": [f.to_json() for f in self.findings],
        }
        out.update(self.correlator.summary())
        return out
