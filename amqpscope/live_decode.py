"""Dissection and tracking of a capture that may run for hours (`live`), with bounded memory.

The loop that drives `dissect.Dissector` and `track.Tracker` over packets as they arrive: it
lived in `capture/live.py`, which now only produces packets (the architecture's one-way flow:
capture makes packets, this consumes them).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from amqpscope.capture.packet import RawPacket
from amqpscope.codec.frames import Frame
from amqpscope.dissect import Dissector
from amqpscope.findings import Finding
from amqpscope.track.tracker import Tracker

if TYPE_CHECKING:
    from amqpscope.diagnose import Diagnoser, Diagnosis, Watch

#: a connection without a packet for this long is closed ("idle") and forgotten
IDLE_SECONDS = 600.0
#: summaries of closed connections kept for --summary (the oldest are dropped, and counted)
KEEP_SUMMARIES = 1000
#: findings kept for the end (the rest are counted)
KEEP_FINDINGS = 1000


class LiveDecoder:
    """Dissector + Tracker for a capture that may run for hours, with bounded memory.

    Every `tick(now)` (the caller calls it about once a second): connections without a packet for
    `idle` seconds are closed ("idle", their last frames returned); closed connections are evicted
    from the dissector (`Dissector.evict_closed`) and from the tracker, whose summary of them is
    kept (the last `keep` of them; older ones are counted in `summaries_dropped`). Per-connection
    buffers are capped in the layers themselves (TCP reassembly: 4 MiB out of order per direction;
    framing and message assembly: 64 MiB). Findings that no frame carries are kept up to
    `KEEP_FINDINGS` (the rest counted). With `journeys=False` (no summary wanted) the tracker's
    capture-wide 0-9-1 correlator, which only feeds the summary, is not run.
    """

    def __init__(
        self,
        show_secrets: bool = False,
        idle: float = IDLE_SECONDS,
        keep: int = KEEP_SUMMARIES,
        journeys: bool = True,
        redact_bodies: bool = False,
        diagnoser: Diagnoser | None = None,
        watch: Watch | None = None,
    ) -> None:
        self.dissector = Dissector(show_secrets=show_secrets, redact_bodies=redact_bodies)
        #: `live --diagnose`: fed every tracked frame, and each connection the tracker forgets
        self.diagnoser = diagnoser
        #: `live --diagnose`: told of each connection the tracker forgets, so a stall it had
        #: ends with the connection; `watched` holds those reports for the caller to print
        self.watch = watch
        self.watched: list[tuple[str, Diagnosis]] = []
        # the capture-wide correlator only feeds the summary (RPC pairs, message journeys) and
        # remembers up to 200,000 publishes: without --summary it is not run at all
        self.tracker = Tracker(journeys=journeys)
        self.idle = idle
        self.closed_summaries: deque[dict[str, Any]] = deque(maxlen=keep)
        self.summaries_dropped = 0
        self.evicted = 0
        self.findings: list[Finding] = []
        self.findings_dropped = 0
        #: `live --metrics`: told of each finished connection the tracker has just forgotten
        self.on_evict: Callable[[Any], None] | None = None

    def feed(self, pkt: RawPacket) -> list[Frame]:
        frames = self.dissector.feed(pkt)
        track = self.tracker.feed
        for frame in frames:
            track(frame)
        if self.diagnoser is not None:
            for frame in frames:
                self.diagnoser.feed(frame)
        return frames

    def tick(self, now: float) -> list[Frame]:
        frames = self.dissector.expire_idle(now, self.idle)
        for frame in frames:
            self.tracker.feed(frame)
            if self.diagnoser is not None:
                self.diagnoser.feed(frame)
        for conn in self.dissector.evict_closed():
            self._evict_tracked(conn.conn)
            self.evicted += 1
        self._take_findings()
        return frames

    def finish(self) -> list[Frame]:
        frames = self.dissector.finish()
        for frame in frames:
            self.tracker.feed(frame)
            if self.diagnoser is not None:
                self.diagnoser.feed(frame)
        self.tracker.finish()
        self._take_findings()
        return frames

    def _evict_tracked(self, conn: int) -> None:
        tracked = self.tracker.connections.get(conn)
        summary = self.tracker.evict(conn)  # finishes it
        if tracked is not None and self.watch is not None:
            self.watched += self.watch.evicted(tracked)
        if tracked is not None and self.diagnoser is not None:
            self.diagnoser.evicted(tracked)
        if tracked is not None and self.on_evict is not None:
            self.on_evict(tracked)
        if summary is None:
            return
        if len(self.closed_summaries) == self.closed_summaries.maxlen:
            self.summaries_dropped += 1
        self.closed_summaries.append(summary)

    def _take_findings(self) -> None:
        d = self.dissector
        taken = d.segments.findings + d.findings
        d.segments.findings.clear()
        d.findings.clear()
        self.add_findings(taken)

    def add_findings(self, taken: list[Finding]) -> None:
        """Keep findings up to `KEEP_FINDINGS` (the rest are counted): the dissector's, and the
        capture's own (a full spool)."""
        if not taken:
            return
        room = KEEP_FINDINGS - len(self.findings)
        self.findings.extend(taken[: max(room, 0)])
        self.findings_dropped += max(len(taken) - max(room, 0), 0)

    def summary(self) -> dict[str, Any]:
        """The tracker's summary with the closed connections' summaries put back in."""
        result = self.tracker.summary()
        connections = [*self.closed_summaries, *result.get("connections", [])]
        connections.sort(key=lambda c: c.get("id") or 0)
        result["connections"] = connections
        if self.summaries_dropped:
            result["connections_not_kept"] = self.summaries_dropped
        return result

    @property
    def open_connections(self) -> int:
        return len(self.dissector.connections)
