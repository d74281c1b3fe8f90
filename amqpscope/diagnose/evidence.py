"""What the rules need of the frames themselves, kept while the frames pass (sans-IO, bounded).

The trackers keep state; a diagnosis also names frames (the declare a close refers to, the last
frame before a silence, the flows of a starved link). `Evidence` is fed every frame after the
tracker has placed its findings on it, and keeps only: the findings with their frame's time and
the few frames of the same channel just before, the last frame each direction sent, the last
flows of each 1.0 link, redelivered deliveries (each linked to the earlier delivery of the same
message by `redelivery.Redeliveries`), and each connection's TCP end. Everything is capped, so
a live capture that runs for hours stays small.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Final

from amqpscope.codec.frames import TRANSPORT, Frame
from amqpscope.codec.typed import typed_fields
from amqpscope.diagnose.redelivery import REQUEUED, Redeliveries, Redelivery
from amqpscope.diagnose.requests import Requests
from amqpscope.findings import Finding

#: frames remembered per connection, to name what came just before a finding
RECENT: Final = 48
#: frames of the finding's channel kept with it
BEFORE: Final = 8
#: findings kept with their evidence; connections followed
MAX_PLACED: Final = 10_000
MAX_CONNECTIONS: Final = 10_000
#: flows remembered per 1.0 link end, redelivered deliveries per connection
FLOWS: Final = 4
MAX_REDELIVERED: Final = 16
#: redeliveries kept after their connection was forgotten, for the diagnoses of the earlier ones
MAX_KEPT_LINKS: Final = 100_000


@dataclass(slots=True)
class Seen:
    """A frame as evidence: where and when, its name and fields (no payload)."""

    number: int
    ts: float
    direction: str
    channel: int | None
    name: str
    fields: dict

    @classmethod
    def of(cls, frame: Frame) -> Seen:
        """What the rules may read of `frame`: its fields of the types the spec allows (a map
        where a handle belongs is left out, `codec.typed`), as the trackers see them."""
        fields = typed_fields(frame)
        return cls(frame.number, frame.ts, frame.direction, frame.channel, frame.name, fields)


@dataclass(slots=True)
class Placed:
    """A tracker finding on the frame that raised it, with that channel's frames just before."""

    finding: Finding
    frame: Seen
    before: list[Seen] = field(default_factory=list)
    previous: Seen | None = None  # the frame its direction sent before this one
    #: the connection's frames just before, on any channel (a client deletes on one channel
    #: the queue it consumes on another: amqp091-go in captures/091-go-cancel)
    around: list[Seen] = field(default_factory=list)


class Evidence:
    def __init__(self) -> None:
        self.recent: dict[int, deque[Seen]] = {}
        self.last_sent: dict[tuple[int, str], Seen] = {}
        self.placed: dict[int, list[Placed]] = {}  # conn -> its findings, in frame order
        self.kept = 0  # findings kept, across connections
        self.ends: dict[int, Seen] = {}  # conn -> its TCP end (a transport record)
        self.flows: dict[tuple[int, str, int | None, object], deque[Seen]] = {}
        self.redelivered: dict[int, list[Seen]] = {}
        self.matcher = Redeliveries()
        # conn -> its redeliveries (with the frame that completed each) and how many
        self.relinked: dict[int, list[tuple[Redelivery, Seen]]] = {}
        self.redeliveries: dict[int, int] = {}
        self.unmarked: dict[int, int] = {}  # conn -> redeliveries the broker did not mark
        self.kept_links = 0  # relinked entries kept of connections forgotten
        self.first_ts: float | None = None
        self.last_ts = 0.0
        self.timed = False  # a frame had a time (a log without timestamps has none: ts 0.0)
        self.requests = Requests()  # management / CBS requests and their responses

    def feed(self, frame: Frame) -> None:
        if self.first_ts is None:
            self.first_ts = frame.ts
        self.last_ts = frame.ts
        if frame.ts:
            self.timed = True
        conn = frame.conn
        seen = Seen.of(frame)
        if frame.kind == TRANSPORT:
            self.ends.setdefault(conn, seen)
            self._place(frame, seen, None)
            return
        recent = self.recent.get(conn)
        if recent is None:
            if len(self.recent) >= MAX_CONNECTIONS:
                return
            recent = self.recent[conn] = deque(maxlen=RECENT)
        key = (conn, frame.direction)
        previous = self.last_sent.get(key)
        if frame.findings:
            self._place(frame, seen, previous, recent)
        recent.append(seen)
        self.last_sent[key] = seen
        link = self.matcher.feed_frame(frame, seen.fields)
        if link is not None:
            self.redeliveries[conn] = self.redeliveries.get(conn, 0) + 1
            if link.why == REQUEUED:
                self.unmarked[conn] = self.unmarked.get(conn, 0) + 1
            links = self.relinked.setdefault(conn, [])
            if len(links) < MAX_REDELIVERED:
                links.append((link, seen))
        name = frame.name
        if name == "flow" and "handle" in seen.fields:
            flow_key = (conn, frame.direction, frame.channel, seen.fields.get("handle"))
            flows = self.flows.get(flow_key)
            if flows is None:
                flows = self.flows[flow_key] = deque(maxlen=FLOWS)
            flows.append(seen)
        elif name in ("basic.deliver", "basic.get-ok") and seen.fields.get("redelivered"):
            kept = self.redelivered.setdefault(conn, [])
            if len(kept) < MAX_REDELIVERED:
                kept.append(seen)
        message = frame.message
        if message is not None:
            pattern = message.get("request-reply")
            if isinstance(pattern, dict):
                self.requests.feed(conn, frame.number, frame.ts, pattern)

    def _place(
        self,
        frame: Frame,
        seen: Seen,
        previous: Seen | None,
        recent: deque[Seen] | None = None,
    ) -> None:
        if self.kept >= MAX_PLACED:
            return
        before: list[Seen] = []
        around: list[Seen] = []
        if recent is not None:
            channel = frame.channel
            # a 0-9-1 channel 0 (and a frame with no channel: SASL, headers) concerns the whole
            # connection; a 1.0 channel 0 is a session like any other
            whole = channel is None or (channel == 0 and frame.version != "1.0")
            before = [s for s in recent if whole or s.channel == channel][-BEFORE:]
            around = list(recent)[-BEFORE:]
        placed = self.placed.setdefault(frame.conn, [])
        for found in frame.findings:
            placed.append(Placed(found, seen, before, previous, around))
            self.kept += 1

    def forget(self, conn: int) -> None:
        """The connection was diagnosed and forgotten (live capture): drop what it left here."""
        self.recent.pop(conn, None)
        self.ends.pop(conn, None)
        self.redelivered.pop(conn, None)
        links = self.relinked.pop(conn, None)
        # redeliveries of what another connection left: that one's diagnosis may come later
        # (`diagnose` of many connections diagnoses those with unacked deliveries at the end)
        others = [(k, s) for k, s in links or () if k.earlier and k.earlier_conn != conn]
        if others and self.kept_links + len(others) <= MAX_KEPT_LINKS:
            self.relinked[conn] = others
            self.kept_links += len(others)
        self.redeliveries.pop(conn, None)
        self.unmarked.pop(conn, None)
        self.requests.forget(conn)
        self.matcher.forget(conn)
        self.kept -= len(self.placed.pop(conn, ()))
        for key in [k for k in self.last_sent if k[0] == conn]:
            del self.last_sent[key]
        for flow in [k for k in self.flows if k[0] == conn]:
            del self.flows[flow]

    # -- what the rules ask ----------------------------------------------------------------
    def found(self, conn: int, code: str) -> list[Placed]:
        return [p for p in self.placed.get(conn, ()) if p.finding.code == code]

    def on_frame(self, conn: int, number: int | None) -> Placed | None:
        """The first finding placed on frame `number` of `conn`."""
        if not number:
            return None
        for placed in self.placed.get(conn, ()):
            if placed.frame.number == number:
                return placed
        return None

    def link_flows(
        self, conn: int, direction: str, channel: int | None, handle: object
    ) -> list[Seen]:
        return list(self.flows.get((conn, direction, channel, handle), ()))
