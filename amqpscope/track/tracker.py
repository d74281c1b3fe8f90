"""The tracking layer's front door: frames in (from the codec), state and findings out.

One connection tracker per AMQP connection, chosen by version; 0-9-1 frames also go to a
capture-wide correlator (RPC pairs, message journeys across connections). Findings a tracker
raises are put on the frame that raised them, so the timeline shows them where they happen. A
`transport` record (the TCP end) goes to its connection's tracker only (`transport()`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from amqpscope.codec.frames import TRANSPORT, Frame
from amqpscope.findings import Finding
from amqpscope.track import amqp091, amqp10

VERSIONS_091 = ("0-9-1", "0-9", "0-8")
#: the versions a connection tracker exists for (concatenated: mypyc cannot compile a starred
#: item in a tuple display)
TRACKED_VERSIONS = ("1.0",) + VERSIONS_091  # noqa: RUF005
#: findings kept for the summary; past it they are counted, not kept (live capture runs for hours)
MAX_FINDINGS = 100_000


class Tracker:
    def __init__(self) -> None:
        self.connections: dict[int, amqp10.ConnectionTracker | amqp091.ConnectionTracker] = {}
        self.correlator = amqp091.Correlator()
        self.findings: list[Finding] = []
        self.findings_dropped = 0

    def feed(self, frame: Frame) -> None:
        tracker = self.connections.get(frame.conn)
        if frame.kind == TRANSPORT:  # the TCP end: no frame, and no connection of its own
            if tracker is not None:
                self._place(frame, tracker.transport(frame))
            return
        if tracker is None:
            if frame.version not in TRACKED_VERSIONS:
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
        self._place(frame, raised)

    def _place(self, frame: Frame, raised: list[Finding]) -> None:
        for found in raised:
            placed = replace(found, conn=frame.conn, frame=frame.number, packet=frame.packet)
            frame.findings.append(placed)
            self._keep(placed)

    def finish(self) -> None:
        for conn, tracker in self.connections.items():
            for found in tracker.finish():
                self._keep(replace(found, conn=conn))

    def evict(self, conn: int) -> dict[str, Any] | None:
        """Forget a connection that has ended (live capture): finish it, keep its findings, and
        hand back its summary for the caller to keep or drop."""
        tracker = self.connections.pop(conn, None)
        if tracker is None:
            return None
        for found in tracker.finish():
            self._keep(replace(found, conn=conn))
        return tracker.summary()

    def _keep(self, found: Finding) -> None:
        if len(self.findings) < MAX_FINDINGS:
            self.findings.append(found)
        else:
            self.findings_dropped += 1

    def summary(self) -> dict[str, Any]:
        """What `amqpscope summary --json` prints."""
        out: dict[str, Any] = {
            "connections": [t.summary() for t in self.connections.values()],
            "findings": [f.to_json() for f in self.findings],
        }
        if self.findings_dropped:
            out["findings-dropped"] = self.findings_dropped
        out.update(self.correlator.summary())
        return out
