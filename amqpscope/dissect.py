"""Dissection: raw packets in, AMQP frames out (sans-IO), the step every face reads through.

capture (link layer → TCP segments) → stream (reassembly) → codec (framing, naming). The caller
feeds packets from any source (file, interface, Spark partition) and gets frames back in the order
of the packet that completes each one; findings that no frame carries collect in `findings`.

With `retire=True` (the CLI's reads of a file, the Spark job's) a connection whose TCP
closed is forgotten when the next packet comes (its frames have all been handed out and handled
by then): what the end of the capture reads of it is kept compact, its census kind and whether
it was AMQP (and with `keep_ends`, its ends and span: `Ended`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from amqpscope.capture.linklayer import SegmentDecoder
from amqpscope.capture.packet import RawPacket, Segment
from amqpscope.codec.connection import ConnectionCodec
from amqpscope.codec.frames import TRANSPORT, Frame
from amqpscope.codec.layers import LayerContext
from amqpscope.findings import GAP_SNAPPED, Finding, finding, gap_message, unseen_message
from amqpscope.stream.events import (
    C2S,
    S2C,
    StreamClose,
    StreamData,
    StreamFin,
    StreamGap,
    StreamOpen,
    StreamUnseen,
)
from amqpscope.stream.tcp import TcpReassembler

#: endpoint pairs with snap-length cuts remembered before the memory starts over
MAX_CUT_FLOWS = 4096
#: the TCP ends reported as a `transport` record when the connection closes. Not "eof": the
#: capture stopped, the connection did not (it may well go on); every capture cut mid-connection
#: would end with such a record, and the summary already says "open" and its findings "when the
#: capture ended". Not "fin" either: each side's FIN is a record of its own, at its own time
#: (`StreamFin`), so that a FIN long before the peer's reset shows when it happened.
TRANSPORT_EVENTS = ("rst", "idle")


def endpoint_text(endpoint: tuple[str, int]) -> str:
    """`ip:port`, with IPv6 addresses in brackets as URLs write them."""
    host, port = endpoint
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(slots=True)
class Connection:
    """What the dissector knows of one TCP connection: its ends, its codec, whether it is AMQP."""

    conn: int
    client: str
    server: str
    role_from: str
    codec: ConnectionCodec
    first_packet: int
    first_ts: float
    last_packet: int = 0
    last_ts: float = 0.0
    closed: str = ""
    flipped: bool = False  # client and server were guessed the wrong way round
    #: the second side's FIN record, held until the codec gave what it still held at the close
    #: (a TLS record or frame cut by a gap): the connection's last record, as each reader of
    #: `transport` records takes it (the Spark rows retire the connection there)
    last_fin: Frame | None = None

    @property
    def is_amqp(self) -> bool:
        return self.codec.is_amqp

    @property
    def version(self) -> str | None:
        return self.codec.version


@dataclass(slots=True)
class Ended:
    """What a forgotten connection leaves when asked (`keep_ends`): its ends and its span, as
    the Spark job's edges read them (`spark.rows._edges`), a few hundred bytes."""

    conn: int
    client: str
    server: str
    role_from: str
    first_packet: int
    first_ts: float
    last_ts: float
    closed: str
    is_amqp: bool


class Dissector:
    """Feed raw packets, get frames. Holds the per-connection state of every layer."""

    def __init__(
        self,
        show_secrets: bool = False,
        keylog: object = None,
        messages: bool = True,
        redact_bodies: bool = False,
        carriers: bool = False,
        retire: bool = False,
        keep_ends: bool = False,
    ) -> None:
        self.show_secrets = show_secrets  # decode credentials rather than redact them
        # note on each frame which packets carried its bytes (`Frame.carriers`: -x, -w)
        self.carriers = carriers
        self.redact_bodies = redact_bodies  # message bodies counted, never kept or shown
        # packets whose TCP payload the snap length cut, per (src, dst), to explain the gap
        self.cut: dict[tuple[str, str], deque[tuple[int, int, int]]] = {}
        # False (what `summary` needs): AMQP 1.0 messages are not decoded, only followed; 0-9-1
        # message bodies are kept as bytes, not rendered (`frame.message` is not output)
        self.messages = messages
        # what TLS layers decrypt with (a `codec.tls.KeyLog`; pcapng secrets are added to it)
        self.context = LayerContext(keylog=keylog, show_secrets=show_secrets)
        self.segments = SegmentDecoder()
        self.tcp = TcpReassembler()
        self.connections: dict[int, Connection] = {}
        self.frames = 0
        self.packets = 0
        self.findings: list[Finding] = []
        self.segment: Segment | None = None  # the TCP segment of the packet fed last (-w)
        # retirement (see the module's docstring)
        self.retire = retire
        self.ended: list[int] = []  # closed connections, forgotten at the next packet
        self.retired_amqp = bytearray()  # conn id -> 1: a forgotten connection was AMQP
        self.retired_kinds: dict[Any, int] = {}  # `census.kind` of forgotten ones -> count
        self.keep_ends = keep_ends
        self.ends: list[Ended] = []  # forgotten connections' ends, with `keep_ends`

    def feed(self, packet: RawPacket) -> list[Frame]:
        if self.ended:
            self.retire_ended()
        self.packets += 1
        segment = self.segment = self.segments.decode(packet)
        if segment is None:
            return []
        if packet.wirelen > len(packet.data) and segment.payload:
            self._cut(packet, segment)
        out: list[Frame] = []
        for event in self.tcp.feed(segment):
            self._event(event, out)
        return out

    def finish(self) -> list[Frame]:
        """End of input: flush reassembly and codecs; collect the findings nothing carried."""
        out: list[Frame] = []
        if self.ended:
            self.retire_ended()
        self.segments.flush()
        for event in self.tcp.flush():
            self._event(event, out)
        for conn in self.connections.values():
            if conn.closed == "":
                out.extend(self._close(conn, conn.last_packet))
        tcp = [f for f in self.tcp.findings if self.reported(f)]
        self.findings[:0] = self.segments.findings + tcp
        return out

    def conn_of(self, segment: Segment) -> int | None:
        """The connection `segment` belongs to (while the stream layer follows it)."""
        return self.tcp.conn_of(segment.src, segment.dst)

    def reported(self, f: Finding) -> bool:
        """Whether a TCP finding is reported (`finish`, `evict_closed`): it matters for AMQP
        connections only, and a gap already rides the next frame."""
        if f.code == "tcp.gap" or f.conn is None:
            return False
        conn = self.connections.get(f.conn)
        if conn is None:
            amqp = self.retired_amqp
            return 0 <= f.conn < len(amqp) and amqp[f.conn] == 1
        return conn.is_amqp

    def retire_ended(self) -> None:
        """Forget the connections that closed (`retire`): each counted by its census kind, and
        marked when it was AMQP (for `reported`)."""
        from amqpscope.census import kind

        ended, self.ended = self.ended, []
        kinds = self.retired_kinds
        for cid in ended:
            conn = self.connections.pop(cid, None)
            if conn is None:
                continue
            if conn.is_amqp:
                amqp = self.retired_amqp
                if len(amqp) <= cid:
                    amqp.extend(bytes(cid + 1 - len(amqp) + len(amqp) // 2))
                amqp[cid] = 1
            key = kind(conn)
            kinds[key] = kinds.get(key, 0) + 1
            if self.keep_ends:
                self.ends.append(
                    Ended(
                        cid,
                        conn.client,
                        conn.server,
                        conn.role_from,
                        conn.first_packet,
                        conn.first_ts,
                        conn.last_ts,
                        conn.closed,
                        conn.is_amqp,
                    )
                )

    def expire_idle(self, now: float, idle: float) -> list[Frame]:
        """For long captures: close connections without a packet for `idle` seconds before `now`
        (`TcpReassembler.expire_idle`); returns the frames their close completed."""
        out: list[Frame] = []
        for event in self.tcp.expire_idle(now, idle):
            self._event(event, out)
        return out

    def evict_closed(self) -> list[Connection]:
        """For long captures: forget the connections that have closed (all their frames were
        returned) and return them. Their TCP findings that `finish` would report move to
        `findings` now; the caller may read and clear `findings` at any time."""
        gone = [c for c in self.connections.values() if c.closed]
        if not gone:
            return gone
        ids = {c.conn for c in gone}
        kept: list[Finding] = []
        for f in self.tcp.findings:
            if f.conn not in ids:
                kept.append(f)
            elif self.reported(f):
                self.findings.append(f)
        self.tcp.findings[:] = kept
        for conn in gone:
            del self.connections[conn.conn]
        return gone

    def run(self, packets: Iterable[RawPacket]) -> Iterator[Frame]:
        """All frames of `packets`. A capture file that carries TLS secrets (pcapng Decryption
        Secrets Blocks: its `secrets`) decrypts with them, with no key log given."""
        if hasattr(packets, "secrets"):
            self.take_secrets(packets.secrets)
        for packet in packets:
            frames = self.feed(packet)
            if frames:  # a typed loop over the list: compiled, no iterator object per packet
                for frame in frames:  # noqa: UP028 (see above)
                    yield frame
        yield from self.finish()

    def take_secrets(self, secrets: list[bytes]) -> None:
        """Read key logs from `secrets` (a `CaptureReader`'s, a list that grows while the capture
        is read) whenever a TLS connection's key is missing, on top of the key log given. `run`
        does this itself when given the reader; a caller that wraps the reader calls it."""
        from amqpscope.codec.tls import KeyLog

        keylog = self.context.keylog
        if keylog is None:
            keylog = self.context.keylog = KeyLog()
        before = keylog.refresh
        taken = 0

        def refresh() -> None:
            nonlocal taken
            if before is not None:
                before()
            while taken < len(secrets):
                keylog.add_bytes(secrets[taken])
                taken += 1

        keylog.refresh = refresh

    # -- stream events ---------------------------------------------------------------------------
    def _event(self, event: object, out: list[Frame]) -> None:
        if isinstance(event, StreamData):
            conn = self.connections[event.conn]
            conn.last_packet, conn.last_ts = event.packet, event.ts
            frames = conn.codec.data(event.direction, event.data, event.packet, event.ts)
            self._number(conn, frames, out)
        elif isinstance(event, StreamOpen):
            codec = ConnectionCodec(
                event.role_from == "syn",
                self.show_secrets,
                self.context,
                self.messages,
                self.redact_bodies,
                server_port=event.server[1],
            )
            codec.carriers = self.carriers
            self.connections[event.conn] = Connection(
                event.conn,
                endpoint_text(event.client),
                endpoint_text(event.server),
                event.role_from,
                codec,
                event.packet,
                event.ts,
                event.packet,
                event.ts,
            )
        elif isinstance(event, StreamGap):
            conn = self.connections[event.conn]
            note = self._gap_note(conn, event)
            conn.codec.gap(event.direction, event.missing, note)
        elif isinstance(event, StreamUnseen):
            conn = self.connections[event.conn]
            text = unseen_message(event.unseen, _sender(conn, event.direction))
            conn.codec.note(finding("tcp.ack-unseen", text, event.packet))
        elif isinstance(event, StreamFin):
            conn = self.connections[event.conn]
            if not conn.closed and conn.is_amqp:
                if event.last:  # its StreamClose follows: after what the codec still holds
                    conn.last_fin = self._fin(conn, event)
                else:
                    self._number(conn, [self._fin(conn, event)], out)
        elif isinstance(event, StreamClose):
            conn = self.connections[event.conn]
            if not conn.closed:
                conn.closed = event.how
                self._number(conn, conn.codec.end(event.packet), out)
                if conn.last_fin is not None:
                    self._number(conn, [conn.last_fin], out)
                    conn.last_fin = None
                self._carry(conn)
                if event.how in TRANSPORT_EVENTS and conn.is_amqp:
                    self._number(conn, [self._transport(conn, event)], out)
                if self.retire:
                    self.ended.append(conn.conn)

    @staticmethod
    def _transport(conn: Connection, event: StreamClose) -> Frame:
        """The `transport` record of an AMQP connection's TCP end: `event` (rst, idle; each FIN
        is a record of its own, `_fin`), `by` (client, server, or None when nobody sent the
        RST) and, when a FIN came before the reset, `after-fin` (whose). Its direction is the
        sender of what ended it ("c2s" when nobody sent anything: an idle end), so the
        timeline's arrow points the way it went."""
        frame = Frame(conn.version or "unknown", TRANSPORT, event.how, None, b"")
        frame.packet, frame.ts = event.packet, event.ts
        flip = conn.flipped  # `_number` turns stream directions into client/server ones
        frame.direction = event.by or (S2C if flip else C2S)

        def side(direction: str | None) -> str | None:
            if direction is None:
                return None
            return "client" if (direction == C2S) != flip else "server"

        frame.fields = {"event": event.how, "by": side(event.by)}
        if event.how == "rst" and event.fin_by is not None:
            frame.fields["after-fin"] = side(event.fin_by)
        return frame

    @staticmethod
    def _fin(conn: Connection, event: StreamFin) -> Frame:
        """The `transport` record of one side's FIN (`event` fin, `by` its sender), at the time
        of the packet that brought it, going the way it went."""
        frame = Frame(conn.version or "unknown", TRANSPORT, "fin", None, b"")
        frame.packet, frame.ts = event.packet, event.ts
        frame.direction = event.direction
        by = "client" if (event.direction == C2S) != conn.flipped else "server"
        frame.fields = {"event": "fin", "by": by}
        return frame

    def _cut(self, packet: RawPacket, segment: Segment) -> None:
        """Remember a TCP payload cut by the snap length: the gap it leaves is explained by it."""
        cut = self.cut
        if len(cut) > MAX_CUT_FLOWS:
            cut.clear()
        flow = (endpoint_text(segment.src), endpoint_text(segment.dst))
        kept = len(segment.payload)
        cut.setdefault(flow, deque(maxlen=64)).append(
            (packet.number, kept, kept + packet.wirelen - len(packet.data))
        )

    def _gap_note(self, conn: Connection, event: StreamGap) -> Finding:
        """The `tcp.gap` finding a gap rides on; it says so when the snap length cut the payload
        of a packet of this direction."""
        sender = _sender(conn, event.direction)
        what = gap_message(event.missing, sender)
        c2s = sender == C2S
        flow = (conn.client, conn.server) if c2s else (conn.server, conn.client)
        cuts = self.cut.get(flow)
        if cuts:
            number, kept, size = cuts.popleft()
            if not cuts:
                del self.cut[flow]
            what += f": {GAP_SNAPPED} {number}'s payload ({kept} of {size} bytes kept)"
        return finding("tcp.gap", what, event.packet)

    def _close(self, conn: Connection, packet: int) -> list[Frame]:
        conn.closed = "eof"
        out: list[Frame] = []
        self._number(conn, conn.codec.end(packet), out)
        self._carry(conn)
        return out

    def _carry(self, conn: Connection) -> None:
        if conn.is_amqp or conn.codec.layers:
            self.findings.extend(replace(f, conn=conn.conn) for f in conn.codec.findings)
        conn.codec.findings.clear()

    def _number(self, conn: Connection, frames: list[Frame], out: list[Frame]) -> None:
        if not frames:
            return
        codec = conn.codec
        if (
            conn.role_from == "guess"
            and not conn.flipped
            and codec.first_header_dir is not None
            and codec.first_header_dir != C2S
        ):
            # the first protocol header comes from the client: the port guess was wrong
            conn.client, conn.server = conn.server, conn.client
            conn.flipped = True
            conn.role_from = "header"
        for frame in frames:
            self.frames += 1
            frame.number = self.frames
            frame.conn = conn.conn
            c2s = frame.direction == C2S
            if conn.flipped:
                c2s = not c2s
                frame.direction = "c2s" if c2s else "s2c"
            if c2s:  # two assignments, not a tuple made per frame
                frame.src = conn.client
                frame.dst = conn.server
            else:
                frame.src = conn.server
                frame.dst = conn.client
            out.append(frame)


def _sender(conn: Connection, direction: str) -> str:
    """A stream direction as the client/server one ("c2s", "s2c") that findings name: the
    stream's, unless client and server were guessed the wrong way round."""
    return ("s2c" if direction == C2S else "c2s") if conn.flipped else direction
