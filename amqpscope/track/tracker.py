"""The tracking layer's front door: frames in (from the codec), state and findings out.

One connection tracker per AMQP connection, chosen by version, each fed the same way (both
implement `protocol.ConnectionTrackerProtocol`); 0-9-1 frames also go to a
capture-wide correlator (RPC pairs, message journeys across connections). Findings a tracker
raises are put on the frame that raised them, so the timeline shows them where they happen. A
`transport` record (the TCP end) goes to its connection's tracker only (`transport()`). `layer`
records (TLS, WebSocket under the AMQP) are kept here as the connection's `layers`; a connection
that has layers but no AMQP frame (TLS without its key) is listed as `undecoded`, so a summary
of an encrypted capture says what it holds instead of nothing.

Retirement (`retire=True`, the CLI's reads of a file): a connection whose TCP ended (its
`transport` record, its last frame) is finished and forgotten when the next frame comes (or at
`finish`), once the caller has done with that record; `on_retire` gets its finished tracker
first, to fold what the caller's output needs. What `finish` would have reported of it is
kept, and reported in the order of the connections' first frames, so the findings come out as
they do when every connection is kept to the end. A capture of 200,000 short connections is held
a few connections at a time.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, Final

from amqpscope.codec.connection import LAYER_KIND
from amqpscope.codec.frames import TRANSPORT, Frame
from amqpscope.findings import Finding
from amqpscope.track import amqp091, amqp10
from amqpscope.track.protocol import ConnectionTrackerProtocol

VERSIONS_091: Final = ("0-9-1", "0-9", "0-8")
#: the versions a connection tracker exists for (concatenated: mypyc cannot compile a starred
#: item in a tuple display)
TRACKED_VERSIONS: Final = ("1.0",) + VERSIONS_091  # noqa: RUF005
#: findings kept for the summary; past it they are counted, not kept (live capture runs for hours)
MAX_FINDINGS: Final = 100_000
#: what the summary keeps of a layer record's fields, per layer
LAYER_FACTS: Final = {
    "tls": ("version", "cipher-suite", "sni", "alpn", "decrypted"),
    "websocket": ("path", "subprotocol", "host", "status"),
}
#: connections whose layers are kept (live capture forgets them with the connection)
MAX_LAYERED = 10_000

ConnTracker = amqp10.ConnectionTracker | amqp091.ConnectionTracker
#: both versions' trackers implement the one protocol (mypy checks this line)
IMPLEMENTATIONS: Final[tuple[type[ConnectionTrackerProtocol], ...]] = (
    amqp10.ConnectionTracker,
    amqp091.ConnectionTracker,
)
#: what `Tracker.on_retire` is given: the connection's order (its first frame's, among tracked
#: connections), its finished tracker, its layers' facts, and how many findings it raised
Retire = Callable[[int, ConnTracker, dict[str, dict[str, Any]] | None, int], None]


def _undecoded(
    conn: int, endpoints: tuple[str, str], layers: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """A connection with layers (TLS) but no AMQP read, as the summary lists it."""
    client, server = endpoints
    return {"id": conn, "client": client, "server": server, "layers": [*layers.values()]}


def _endpoints(frame: Frame) -> tuple[str, str]:
    """(client, server) of the frame's connection, from the frame's direction."""
    return (frame.src, frame.dst) if frame.direction == "c2s" else (frame.dst, frame.src)


class Tracker:
    """`journeys` False: no RPC pairs or message journeys across connections (the Spark tables
    have none, and matching them costs a few percent). `stats` False: the 1.0 trackers keep none
    of what only the summary shows (settle latencies and the sparklines' series, a few percent
    of `read`), and their summaries show none; findings are the same either way."""

    def __init__(
        self,
        journeys: bool = True,
        retire: bool = False,
        on_retire: Retire | None = None,
        stats: bool = True,
        source: str = "capture",
    ) -> None:
        self.stats = stats
        #: what the frames come from, as findings name it ("the capture ended", "the log ended")
        self.source = source
        self.connections: dict[int, amqp10.ConnectionTracker | amqp091.ConnectionTracker] = {}
        self.correlator: amqp091.Correlator | None = amqp091.Correlator() if journeys else None
        self.findings: list[Finding] = []
        self.findings_dropped = 0
        self.raised: list[Finding] = []  # what the frame being fed raised
        #: conn -> layer name -> its facts; conn -> (client, server), for undecoded connections
        self.layers: dict[int, dict[str, dict[str, Any]]] = {}
        self.endpoints: dict[int, tuple[str, str]] = {}
        #: undecoded connections that ended and were evicted (live capture), the latest kept
        self.undecoded_closed: deque[dict[str, Any]] = deque(maxlen=MAX_LAYERED)
        # retirement (see the module's docstring)
        self.retire = retire
        self.on_retire = on_retire
        self.ended: list[int] = []  # connections whose TCP ended, retired at the next frame
        #: conn -> who sent the first FIN, while the other side may still send (half-closed)
        self.half_closed: dict[int, str] = {}
        self.order: dict[int, int] = {}  # conn -> its order among tracked connections
        self.created = 0
        self.raised_count: dict[int, int] = {}  # conn -> findings placed on its frames
        self.retired = 0
        #: (order, findings) of retired connections whose `finish` found something
        self.retired_findings: list[tuple[int, list[Finding]]] = []

    def feed(self, frame: Frame) -> None:
        if self.ended:
            self.retire_ended()
        if frame.kind == LAYER_KIND:
            self._layer(frame)
            return
        tracker = self.connections.get(frame.conn)
        if frame.kind == TRANSPORT:  # the TCP end: no frame, and no connection of its own
            over = self._tcp_over(frame)
            if tracker is not None:
                # the client's FIN ends its channels and links (it sends nothing more); after
                # the broker's, the client may still send, not knowing, until the TCP end
                gone = over or frame.fields.get("by") == "client"
                self._place(frame, tracker.transport(frame, gone))
                if over and self.retire:
                    self.ended.append(frame.conn)
            return
        if tracker is None:
            if frame.version not in TRACKED_VERSIONS:
                return  # named, not tracked (0-10, unknown headers)
            client, server = _endpoints(frame)
            if frame.version == "1.0":
                tracker = amqp10.ConnectionTracker(
                    frame.conn, client, server, frame.version, self.stats, self.source
                )
            else:
                tracker = amqp091.ConnectionTracker(
                    frame.conn, client, server, frame.version, self.source
                )
            self.connections[frame.conn] = tracker
            if self.retire:
                self.order[frame.conn] = self.created
            self.created += 1
        raised = self.raised  # one list for every frame: few frames raise anything
        tracker.feed(frame, raised)
        if self.correlator is not None and frame.version in VERSIONS_091:
            self.correlator.feed(frame)
        if raised:
            self._place(frame, raised)
            raised.clear()

    def feed_all(self, frames: Iterable[Frame]) -> bool:
        """Feed every frame of `frames` (`summary`'s loop: here, compiled, each `feed` a direct
        C call rather than a call from the interpreter); returns whether none had a time (a
        log's lines may have none)."""
        untimed = True
        for frame in frames:
            self.feed(frame)
            if untimed and frame.ts:
                untimed = False
        return untimed

    def _layer(self, frame: Frame) -> None:
        """Keep what a layer record says of its connection: the latest facts, `decrypted` once
        true, and the codes of the findings it carried (tls.no-key says why nothing follows)."""
        layers = self.layers.get(frame.conn)
        if layers is None:
            if len(self.layers) >= MAX_LAYERED:
                return
            layers = self.layers[frame.conn] = {}
            self.endpoints[frame.conn] = _endpoints(frame)
        entry = layers.setdefault(frame.name, {"name": frame.name})
        fields = frame.fields
        for key in LAYER_FACTS.get(frame.name, ()):
            if key in fields:
                entry[key] = (
                    bool(entry.get(key) or fields[key]) if key == "decrypted" else fields[key]
                )
        for found in frame.findings:
            codes = entry.setdefault("findings", [])
            if found.code not in codes:
                codes.append(found.code)

    def _place(self, frame: Frame, raised: list[Finding]) -> None:
        for found in raised:
            placed = replace(found, conn=frame.conn, frame=frame.number, packet=frame.packet)
            frame.findings.append(placed)
            self._keep(placed)
        if self.retire and raised:
            count = self.raised_count
            count[frame.conn] = count.get(frame.conn, 0) + len(raised)

    def finish(self) -> None:
        if self.ended:
            self.retire_ended()
        retired = sorted(self.retired_findings, key=lambda entry: entry[0])
        self.retired_findings = []
        at = 0
        for conn, tracker in self.connections.items():
            order = self.order.get(conn)
            while order is not None and at < len(retired) and retired[at][0] < order:
                for found in retired[at][1]:
                    self._keep(found)
                at += 1
            for found in tracker.finish():
                self._keep(replace(found, conn=conn))
        for _, findings in retired[at:]:
            for found in findings:
                self._keep(found)

    def _tcp_over(self, frame: Frame) -> bool:
        """Whether a `transport` record ends the TCP connection: a reset, an idle end, or the
        second side's FIN (after the first, the other side may still send)."""
        conn = frame.conn
        if frame.name == "fin" and self.half_closed.get(conn, frame.fields.get("by")) == (
            frame.fields.get("by")
        ):
            self.half_closed[conn] = str(frame.fields.get("by"))
            return False
        self.half_closed.pop(conn, None)
        return True

    def retire_ended(self) -> None:
        """Finish and forget the connections whose TCP ended (after their last frame was
        handled): `on_retire` folds each, its `finish` findings wait for `finish`."""
        ended, self.ended = self.ended, []
        for conn in ended:
            tracker = self.connections.pop(conn, None)
            if tracker is None:
                continue
            order = self.order.pop(conn)
            layers = self.layers.pop(conn, None)
            self.endpoints.pop(conn, None)
            found = [replace(f, conn=conn) for f in tracker.finish()]
            if found:
                self.retired_findings.append((order, found))
            raised = self.raised_count.pop(conn, 0) + len(found)
            self.retired += 1
            if self.on_retire is not None:
                self.on_retire(order, tracker, layers, raised)

    def evict(self, conn: int) -> dict[str, Any] | None:
        """Forget a connection that has ended (live capture): finish it, keep its findings, and
        hand back its summary for the caller to keep or drop."""
        tracker = self.connections.pop(conn, None)
        layers = self.layers.pop(conn, None)
        endpoints = self.endpoints.pop(conn, None)
        if tracker is None:
            if layers and endpoints is not None:  # no AMQP read: still listed as undecoded
                self.undecoded_closed.append(_undecoded(conn, endpoints, layers))
            return None
        for found in tracker.finish():
            self._keep(replace(found, conn=conn))
        return self._with_layers(tracker.summary(), layers)

    @staticmethod
    def _with_layers(summary: dict[str, Any], layers: dict[str, dict] | None) -> dict[str, Any]:
        """A connection's summary with its layers' facts (`layers`), as `summary` lists it."""
        if layers:
            summary["layers"] = list(layers.values())
        return summary

    def _keep(self, found: Finding) -> None:
        if len(self.findings) < MAX_FINDINGS:
            self.findings.append(found)
        else:
            self.findings_dropped += 1

    def summary(self) -> dict[str, Any]:
        """What `amqpscope summary --json` prints."""
        out: dict[str, Any] = {
            "connections": [
                self._with_layers(t.summary(), self.layers.get(conn))
                for conn, t in self.connections.items()
            ],
            "findings": [f.to_json() for f in self.findings],
        }
        undecoded = [*self.undecoded_closed] + [
            _undecoded(conn, self.endpoints[conn], layers)
            for conn, layers in self.layers.items()
            if conn not in self.connections
        ]
        undecoded.sort(key=lambda entry: entry["id"])
        if undecoded:
            out["undecoded"] = undecoded
        if self.findings_dropped:
            out["findings-dropped"] = self.findings_dropped
        if self.correlator is not None:
            out.update(self.correlator.summary())
        return out
