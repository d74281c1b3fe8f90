"""The tracking layer's front door: frames in (from the codec), state and findings out.

One connection tracker per AMQP connection, chosen by version; 0-9-1 frames also go to a
capture-wide correlator (RPC pairs, message journeys across connections). Findings a tracker
raises are put on the frame that raised them, so the timeline shows them where they happen. A
`transport` record (the TCP end) goes to its connection's tracker only (`transport()`). `layer`
records (TLS, WebSocket under the AMQP) are kept here as the connection's `layers`; a connection
that has layers but no AMQP frame (TLS without its key) is listed as `undecoded`, so a summary
of an encrypted capture says what it holds instead of nothing.
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace
from typing import Any, Final

from amqpscope.codec.connection import LAYER_KIND
from amqpscope.codec.frames import TRANSPORT, Frame
from amqpscope.findings import Finding
from amqpscope.track import amqp091, amqp10

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
    have none, and matching them costs a few percent)."""

    def __init__(self, journeys: bool = True) -> None:
        self.connections: dict[int, amqp10.ConnectionTracker | amqp091.ConnectionTracker] = {}
        self.correlator: amqp091.Correlator | None = amqp091.Correlator() if journeys else None
        self.findings: list[Finding] = []
        self.findings_dropped = 0
        self.raised: list[Finding] = []  # what the frame being fed raised (0-9-1)
        #: conn -> layer name -> its facts; conn -> (client, server), for undecoded connections
        self.layers: dict[int, dict[str, dict[str, Any]]] = {}
        self.endpoints: dict[int, tuple[str, str]] = {}
        #: undecoded connections that ended and were evicted (live capture), the latest kept
        self.undecoded_closed: deque[dict[str, Any]] = deque(maxlen=MAX_LAYERED)

    def feed(self, frame: Frame) -> None:
        if frame.kind == LAYER_KIND:
            self._layer(frame)
            return
        tracker = self.connections.get(frame.conn)
        if frame.kind == TRANSPORT:  # the TCP end: no frame, and no connection of its own
            if tracker is not None:
                self._place(frame, tracker.transport(frame))
            return
        if tracker is None:
            if frame.version not in TRACKED_VERSIONS:
                return  # named, not tracked (0-10, unknown headers)
            client, server = _endpoints(frame)
            kind = amqp10 if frame.version == "1.0" else amqp091
            tracker = kind.ConnectionTracker(frame.conn, client, server, frame.version)
            self.connections[frame.conn] = tracker
        if isinstance(tracker, amqp091.ConnectionTracker):
            raised = self.raised  # one list for every frame: few frames raise anything
            tracker.feed(frame, raised)
            if self.correlator is not None and frame.version in VERSIONS_091:
                self.correlator.feed(frame)
            if raised:
                self._place(frame, raised)
                raised.clear()
            return
        self._place(frame, tracker.feed(frame))

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

    def finish(self) -> None:
        for conn, tracker in self.connections.items():
            for found in tracker.finish():
                self._keep(replace(found, conn=conn))

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
