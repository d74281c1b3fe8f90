"""TCP reassembly, sans-IO: `Segment`s in, `StreamEvent`s out, no I/O and no clocks.

`TcpReassembler.feed(segment)` returns the events that segment caused; `flush()` ends the capture.
Findings (`tcp.gap`, `tcp.overlap-mismatch`, `tcp.buffer-limit`, `tcp.reset`) are appended to
`TcpReassembler.findings` as they happen; the caller may read and clear that list at any time.
Every `StreamGap` event has exactly one `tcp.gap` finding (same packet).

Rules
-----
Connections. Keyed by the endpoint pair, whichever way a segment goes. A SYN or SYN-ACK starts a
new connection unless it belongs to the live one (that connection's handshake was seen and the
sender's ISN is unknown yet, or repeats the known ISN); a live connection it replaces is closed
with how="eof". Closed connections leave only a tombstone (bounded, `MAX_CLOSED`): for
`TIME_WAIT` seconds non-SYN stragglers (last ACK, retransmitted FIN, a second RST) are ignored;
after that a non-SYN segment opens a new mid-stream connection. A RST for an unknown pair is
ignored; any other segment of an unknown pair opens a connection. `conn` ids count from 1 in
order of first appearance; `StreamOpen` is the first event of every connection.

Roles. The sender of a SYN (without ACK) is the client; if a SYN-ACK is the first thing seen, its
receiver is the client (role_from="syn"). Otherwise role_from="guess": the server is the endpoint
whose port is in `WELL_KNOWN_PORTS` when exactly one is; else the lower port; on equal ports the
destination of the first segment.

Sequence numbers. Positions are kept as unbounded ints ("unwrapped"): every 32-bit seq/ack is
read as a signed offset from the next expected position, so wrap-around needs no special case.
A direction is anchored at ISN+1 by its SYN (or by the ack of a SYN-ACK). Mid-stream it is
anchored provisionally by the first segment seen in that direction; until a byte of it has been
delivered, a data segment starting at most `START_SLACK` bytes earlier moves the anchor back
(a few segments reordered at the start are not lost), a 1-byte ACK-only first segment counts as
a keep-alive (anchor after its byte, byte dropped), and data exactly one byte after a zero-length
first segment moves the anchor forward (that segment was a keep-alive at seq-1).
Data starting `MAX_AHEAD` (1 GiB, the largest TCP window) or more past the expected position is
out-of-window garbage and is ignored; acks that far ahead are ignored too.

Data. In-order bytes are delivered at once as `StreamData` (fast path). Bytes before the expected
position are dropped (retransmissions, overlaps: the first copy wins). Bytes ahead of it are kept
in a per-direction buffer of non-overlapping pieces until the hole fills; contiguous pieces are
delivered as one `StreamData` whose packet/ts are those of the segment that filled the hole;
when a hole is declared missing instead, the pieces after it keep the packet/ts that brought
them (the latest so far along the stream: bytes are complete when their last piece came), so
frames after a lost segment have the packets Wireshark gives them. A
retransmission whose bytes differ from the copy kept is a `tcp.overlap-mismatch` finding, once per
connection direction. It is compared with buffered data, and with delivered data the peer has not
acknowledged yet (at most `HISTORY` bytes are remembered; acknowledged data is forgotten). A 1-byte
segment at seq-1 (keep-alive / zero-window probe) is neither compared nor delivered.

Gaps. A hole is declared missing (`StreamGap` + `tcp.gap`) and delivery goes on with the data
after it when
  (a) the peer has acknowledged bytes beyond the hole *and* something after the hole is already
      known (buffered data or the FIN): the gap runs to that data, or to the ack if it is lower.
      An ack alone, with nothing buffered, declares nothing yet (an ACK can precede the data it
      acks in a capture); the next out-of-order segment or the close settles it;
  (b) the buffer holds more than `max_buffer` bytes or `MAX_PIECES` pieces: holes are skipped,
      oldest first, until it fits (`tcp.buffer-limit` as well);
  (c) the connection closes (both FINs, RST, a replacing SYN) or the capture ends: every hole
      before buffered data or before the FIN is missing. Then, if the peer acknowledged more than
      was seen, that trailing part is missing too; a byte of it is taken for an unseen FIN when
      the peer sent a FIN and this direction's FIN was not seen, and a lone extra byte in a
      direction that never delivered anything is taken for a keep-alive.

FIN and RST. A FIN takes one sequence number; data past it is ignored. The direction is finished
once every byte before the FIN is delivered or declared missing; when both are, the connection
closes with how="fin" and its state is dropped. At `flush()` a connection that saw any FIN closes
as "fin", otherwise "eof". `expire_idle(now, idle)` closes connections quiet for too long as
"idle" (live capture). A RST closes the connection at once (holes become gaps, as in (c)) with
how="rst". A reset is routine, so `tcp.reset` is reported only when it strands data: buffered
bytes behind a hole, or bytes the capture saw that the peer had not acknowledged (only when acks
from that peer were seen at all). `StreamClose.by` names the direction that ended the connection
(the reset's sender, else the first FIN's) and `fin_by` the first FIN's, so that "who hung up"
reaches the report. Each direction's FIN is also a `StreamFin` of its own, at its own packet,
once the stream reached it (after its data): a FIN long before the peer's reset (a broker
hanging up on a silent client that wakes later) is seen when it happened.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import Final

from amqpscope.capture.packet import ACK, CUT, FIN, RST, SYN, Segment
from amqpscope.findings import Finding, finding
from amqpscope.stream.events import (
    C2S,
    S2C,
    StreamClose,
    StreamData,
    StreamEvent,
    StreamFin,
    StreamGap,
    StreamOpen,
    StreamUnseen,
)

#: Ports that mark the server when the handshake was not seen.
WELL_KNOWN_PORTS: Final = (5672, 5671)
#: Default cap on out-of-order bytes buffered per direction.
MAX_BUFFER: Final = 4 * 1024 * 1024
#: Cap on out-of-order pieces buffered per direction (tiny segments would make inserts slow).
MAX_PIECES: Final = 16384
#: Data or acks this far or further ahead of the expected position are ignored as garbage.
MAX_AHEAD: Final = 1 << 30
#: How far back a mid-stream direction's provisional anchor may move before its first delivery.
START_SLACK: Final = 64 * 1024
#: Unacknowledged delivered bytes remembered per direction to check retransmissions against.
HISTORY: Final = 64 * 1024
#: Seconds after a close during which non-SYN segments of that pair are ignored.
TIME_WAIT: Final = 120.0
#: Most closed endpoint pairs remembered (two entries per connection).
MAX_CLOSED: Final = 1 << 16

_MOD: Final = 1 << 32
_MASK: Final = _MOD - 1
_HALF: Final = 1 << 31
_SLOW: Final = SYN | FIN | RST | CUT


class _Half:
    """One direction of a connection. Positions are unwrapped ints (raw seq + k * 2**32)."""

    __slots__ = (
        "acked",
        "buffered",
        "came",
        "cid",
        "conn",
        "direction",
        "done",
        "fast",
        "fin",
        "fin_packet",
        "fin_ts",
        "firm",
        "hist",
        "hist_at",
        "hist_len",
        "isn",
        "mismatch",
        "nxt",
        "peer",
        "segs",
        "sport",
        "src",
        "starts",
        "unseen",
        "zero_anchor",
    )

    def __init__(self, conn: _Conn, direction: str) -> None:
        self.conn = conn
        self.cid = conn.id
        self.peer: _Half = self
        self.direction = direction
        # the address and port this direction is sent from (what `TcpReassembler.feed`'s cache
        # of the last flows compares)
        sender = conn.client if direction == C2S else conn.server
        self.src = sender[0]
        self.sport = sender[1]
        self.nxt: int | None = None  # next expected position; None until anchored
        self.isn: int | None = None  # raw ISN when the SYN was seen (or implied by a SYN-ACK)
        self.firm = False  # anchor final: SYN seen, or something delivered / declared missing
        self.zero_anchor = False  # provisionally anchored by a segment without payload
        self.fast = False  # firm, no FIN, empty buffer: in-order segments take the fast path
        self.acked = 0  # highest position the peer acknowledged (0: none seen)
        self.unseen = 0  # the ack that last reported bytes acknowledged but not seen
        self.starts: list[int] = []  # sorted starts of buffered, non-overlapping pieces
        self.segs: dict[int, bytes] = {}  # start -> piece
        self.came: dict[int, tuple[int, float]] = {}  # start -> (packet, ts) that brought it
        self.buffered = 0
        self.fin: int | None = None  # position of the FIN
        self.fin_packet = 0  # the packet that brought the FIN, and its time
        self.fin_ts = 0.0
        self.done = False  # every byte before the FIN delivered or declared missing
        #: (end, data) delivered, not yet acked: the entries from `hist_at` on (a list with a
        #: moving start, not a deque: compiled, its appends and reads are native)
        self.hist: list[tuple[int, bytes]] = []
        self.hist_at = 0
        self.hist_len = 0
        self.mismatch = False

    def forget_acked(self, acked: int) -> None:
        """Forget the delivered bytes the peer acknowledged (those ending at or before it)."""
        hist = self.hist
        at = self.hist_at
        n = len(hist)
        while at < n:
            end, data = hist[at]
            if end > acked:
                break
            self.hist_len -= len(data)
            at += 1
        self.forgot(at)

    def forgot(self, at: int) -> None:
        """The entries of `hist` before `at` are forgotten: dropped once they are all or most
        of it (amortised: each entry is moved at most once on average)."""
        hist = self.hist
        if at >= len(hist):
            if hist:
                hist.clear()
            self.hist_at = 0
        elif at > 32 and 2 * at > len(hist):
            del hist[:at]
            self.hist_at = 0
        else:
            self.hist_at = at

    def clear_hist(self) -> None:
        self.hist.clear()
        self.hist_at = 0
        self.hist_len = 0


class _Conn:
    __slots__ = (
        "c2s",
        "client",
        "fin_by",
        "id",
        "last_packet",
        "last_ts",
        "role_from",
        "s2c",
        "server",
    )

    def __init__(
        self,
        cid: int,
        client: tuple[str, int],
        server: tuple[str, int],
        role_from: str,
        packet: int,
        ts: float,
    ) -> None:
        self.id = cid
        self.client = client
        self.server = server
        self.role_from = role_from
        self.c2s = _Half(self, C2S)
        self.s2c = _Half(self, S2C)
        self.c2s.peer = self.s2c
        self.s2c.peer = self.c2s
        self.last_packet = packet
        self.last_ts = ts
        self.fin_by: str | None = None  # the direction whose FIN was seen first


def _pos(h: _Half) -> int:
    """`h.nxt` of a half already anchored (the slow-path steps run only after anchoring)."""
    nxt = h.nxt
    assert nxt is not None
    return nxt


def _sends(h: _Half, src: tuple[str, int], dst: tuple[str, int]) -> bool:
    """Whether `h` is the direction from `src` to `dst`."""
    peer = h.peer
    return h.sport == src[1] and peer.sport == dst[1] and h.src == src[0] and peer.src == dst[0]


def guess_server(src: tuple[str, int], dst: tuple[str, int]) -> tuple[str, int]:
    s_wk = src[1] in WELL_KNOWN_PORTS
    d_wk = dst[1] in WELL_KNOWN_PORTS
    if s_wk != d_wk:
        return src if s_wk else dst
    if src[1] != dst[1]:
        return src if src[1] < dst[1] else dst
    return dst


class TcpReassembler:
    """Reassemble TCP connections from segments in capture order (see the module docstring)."""

    def __init__(self, max_buffer: int = MAX_BUFFER) -> None:
        self.max_buffer = max_buffer
        self.findings: list[Finding] = []
        self._flows: dict[tuple[tuple[str, int], tuple[str, int]], _Half] = {}
        self._conns: dict[int, _Conn] = {}
        # endpoint pair (both ways) -> ts of the close; oldest first, for O(1) eviction
        self._closed: OrderedDict[tuple[tuple[str, int], tuple[str, int]], float] = OrderedDict()
        self._next_id = 1
        # the halves of the last two segments' flows, tried before `_flows` (traffic mostly
        # alternates between the two directions of one connection): compared field by field,
        # natively, where a lookup makes and hashes a tuple of tuples; emptied whenever
        # `_flows` changes
        self._last: _Half | None = None
        self._before: _Half | None = None

    # -- public -------------------------------------------------------------------------------

    def feed(self, seg: Segment) -> list[StreamEvent]:
        """Take one segment; return the events it caused, in order."""
        src, dst = seg.src, seg.dst
        h = self._last
        if h is None or not _sends(h, src, dst):
            h = self._before
            if h is None or not _sends(h, src, dst):
                h = self._flows.get((src, dst))
            if h is not None:
                self._before, self._last = self._last, h
        flags = seg.flags
        if h is None or flags & _SLOW or h.nxt is None:
            return self._feed_slow(seg, h)
        # Fast path: a known connection and direction, no SYN/FIN/RST.
        packet = seg.packet
        ts = seg.ts
        conn = h.conn
        conn.last_packet = packet
        conn.last_ts = ts
        out: list[StreamEvent] = []
        if flags & ACK:
            p = h.peer
            nxt = p.nxt
            if nxt is not None:
                a = nxt + (((seg.ack - nxt + _HALF) & _MASK) - _HALF)
                if a > p.acked and a - nxt < MAX_AHEAD:
                    p.acked = a
                    if len(p.hist) > p.hist_at:
                        p.forget_acked(a)
                    if a > nxt and (p.starts or (p.fin is not None and not p.done)):
                        self._resolve(p, packet, ts, out)
                        if p.done and h.done:
                            self._close(conn, "fin", packet, ts, out)
                            return out
                    elif a > nxt + 1 and nxt >= p.unseen:
                        self._unseen(p, a, packet, ts, out)
        payload = seg.payload
        if payload:
            anchored = h.nxt
            if anchored is None:  # (not after the check on the way in)
                self._data(h, seg.seq, payload, packet, ts, out)
                return out
            at: int = anchored  # compiled, native arithmetic (not that of an optional int)
            if h.fast and not (seg.seq - at) & _MASK:  # in order
                at += len(payload)
                h.nxt = at
                out.append(StreamData(h.cid, h.direction, payload, packet, ts))
                h.hist.append((at, payload))
                h.hist_len += len(payload)
                if h.hist_len > HISTORY:
                    self._trim_hist(h)
            else:
                self._data(h, seg.seq, payload, packet, ts, out)
        return out

    def conn_of(self, src: tuple[str, int], dst: tuple[str, int]) -> int | None:
        """The id of the connection whose `src` to `dst` direction is followed, if any."""
        h = self._flows.get((src, dst))
        return None if h is None else h.cid

    def flush(self) -> list[StreamEvent]:
        """End of capture: settle every open connection and close it ("fin" or "eof")."""
        out: list[StreamEvent] = []
        for conn in list(self._conns.values()):
            how = "fin" if conn.c2s.fin is not None or conn.s2c.fin is not None else "eof"
            self._close(conn, how, conn.last_packet, conn.last_ts, out, tombstone=False)
        self._closed.clear()
        return out

    def expire_idle(self, now: float, idle: float) -> list[StreamEvent]:
        """For long captures: close (how="idle") every connection whose last segment is more than
        `idle` seconds before `now`, settling it as a close does, and forget tombstones older than
        `TIME_WAIT`. No tombstone is left for an expired connection: a later segment of its pair
        opens a new, mid-stream connection."""
        out: list[StreamEvent] = []
        limit = now - idle
        for conn in [c for c in self._conns.values() if c.last_ts < limit]:
            self._close(conn, "idle", conn.last_packet, conn.last_ts, out, tombstone=False)
        closed = self._closed
        while closed and next(iter(closed.values())) < now - TIME_WAIT:
            closed.popitem(last=False)
        return out

    @property
    def open_connections(self) -> int:
        return len(self._conns)

    # -- connections --------------------------------------------------------------------------

    def _feed_slow(self, seg: Segment, h: _Half | None) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        flags = seg.flags
        if flags & SYN:
            if h is not None and not self._same_syn(h, seg):
                self._close(h.conn, "eof", seg.packet, seg.ts, out, tombstone=False)
                h = None
            if h is None:
                if flags & ACK:
                    h = self._open(seg, client=seg.dst, server=seg.src, role_from="syn", out=out)
                else:
                    h = self._open(seg, client=seg.src, server=seg.dst, role_from="syn", out=out)
        elif h is None:
            key = (seg.src, seg.dst)
            closed_at = self._closed.get(key)
            if closed_at is not None:
                if seg.ts - closed_at <= TIME_WAIT:
                    return out
                self._closed.pop(key, None)
                self._closed.pop((seg.dst, seg.src), None)
            if flags & RST:
                return out
            server = guess_server(seg.src, seg.dst)
            client = seg.src if server == seg.dst else seg.dst
            h = self._open(seg, client=client, server=server, role_from="guess", out=out)
        conn = h.conn
        conn.last_packet = seg.packet
        conn.last_ts = seg.ts
        if flags & RST:
            if flags & ACK:  # what the reset acknowledges was delivered: not stranded by it
                self._acked_by_reset(h.peer, seg.ack)
            self._reset(conn, seg, out)
            return out
        packet, ts = seg.packet, seg.ts
        p = h.peer
        if flags & ACK:
            self._ack(p, seg.ack, packet, ts, out)
        seq = seg.seq
        payload = seg.payload
        if flags & SYN:
            if h.isn is None:
                h.isn = seq
                if h.nxt is None:
                    h.nxt = seq + 1 + _MOD
                    h.firm = True
                elif not h.firm:  # data came before the SYN-ACK: anchor at ISN+1 if earlier
                    off = ((seq + 1 - h.nxt + _HALF) & _MASK) - _HALF
                    if -MAX_AHEAD < off <= 0:
                        h.nxt += off
                        h.firm = True
            if flags & ACK and p.nxt is None:
                # The SYN-ACK acknowledges the client's SYN: its data starts at the ack.
                p.isn = (seg.ack - 1) & _MASK
                p.nxt = seg.ack + _MOD
                p.firm = True
                self._refast(p)
            seq = (seq + 1) & _MASK
        elif h.nxt is None:
            h.nxt = seq + _MOD
            if len(payload) == 1 and flags == ACK:
                h.nxt += 1  # a keep-alive's byte: skip it
                payload = b""
            else:
                h.zero_anchor = not payload
        if payload:
            self._data(h, seq, payload, packet, ts, out)
        if flags & CUT:
            self._snapped(h, seq, len(payload), seg.cut, packet, ts, out)
        if flags & FIN:
            self._fin(h, (seq + len(payload) + seg.cut) & _MASK, packet, ts, out)
        self._refast(h)
        self._refast(p)
        if h.done and p.done:
            self._close(conn, "fin", packet, ts, out)
        return out

    @staticmethod
    def _same_syn(h: _Half, seg: Segment) -> bool:
        """Whether a SYN / SYN-ACK from `h`'s sender belongs to `h`'s live connection."""
        if h.conn.role_from != "syn":
            return False
        if h.isn is not None:
            return h.isn == seg.seq
        # The server's first SYN-ACK: it must acknowledge the client's SYN (whose ISN is known,
        # from its SYN or from an earlier SYN-ACK). Its data may have been seen already.
        p = h.peer
        return bool(
            seg.flags & ACK
            and h.direction == S2C
            and p.isn is not None
            and (seg.ack - 1) & _MASK == p.isn
        )

    def _open(
        self,
        seg: Segment,
        *,
        client: tuple[str, int],
        server: tuple[str, int],
        role_from: str,
        out: list[StreamEvent],
    ) -> _Half:
        cid = self._next_id
        self._next_id += 1
        conn = _Conn(cid, client, server, role_from, seg.packet, seg.ts)
        self._conns[cid] = conn
        self._flows[(client, server)] = conn.c2s
        self._flows[(server, client)] = conn.s2c
        self._last = self._before = None
        self._closed.pop((client, server), None)
        self._closed.pop((server, client), None)
        out.append(StreamOpen(cid, client, server, role_from, seg.packet, seg.ts))
        return conn.c2s if seg.src == client else conn.s2c

    def _close(
        self,
        conn: _Conn,
        how: str,
        packet: int,
        ts: float,
        out: list[StreamEvent],
        *,
        tombstone: bool = True,
        by: str | None = None,
    ) -> None:
        self._finish(conn.c2s, packet, ts, out)
        self._finish(conn.s2c, packet, ts, out)
        fin_by = conn.fin_by
        out.append(StreamClose(conn.id, how, packet, ts, by or fin_by, fin_by))
        del self._conns[conn.id]
        c, s = conn.client, conn.server
        if self._flows.get((c, s)) is conn.c2s:
            del self._flows[(c, s)]
            del self._flows[(s, c)]
            self._last = self._before = None
        for half in (conn.c2s, conn.s2c):  # drop buffers now, whoever still holds the objects
            half.starts = []
            half.segs = {}
            half.came = {}
            half.hist = []
            half.hist_at = 0
            half.fast = False
        if tombstone:
            closed = self._closed
            closed[(c, s)] = ts
            closed[(s, c)] = ts
            while len(closed) > MAX_CLOSED:
                closed.popitem(last=False)

    @staticmethod
    def _acked_by_reset(p: _Half, ack: int) -> None:
        """A RST with ACK acknowledges `ack` (raw) of `p`'s direction: the bytes (and FIN) it
        covers reached the resetter. Why: aiormq sends connection.close and its FIN at once and
        resets on the close-ok, which that RST acknowledges: nothing stranded."""
        nxt = p.nxt
        if nxt is None:
            return
        a = nxt + (((ack - nxt + _HALF) & _MASK) - _HALF)
        if a > p.acked and a - nxt <= 1:  # up to what was seen (and a FIN's one number)
            p.acked = a

    def _reset(self, conn: _Conn, seg: Segment, out: list[StreamEvent]) -> None:
        stranded = False
        for h in (conn.c2s, conn.s2c):
            if h.nxt is None:
                continue
            end = h.fin if h.done and h.fin is not None else h.nxt
            if h.starts or (h.acked and h.acked < end):
                stranded = True
        flow = self._flows.get((seg.src, seg.dst))
        by = flow.direction if flow is not None and flow.conn is conn else None
        self._close(conn, "rst", seg.packet, seg.ts, out, by=by)
        if stranded:
            self.findings.append(
                finding(
                    "tcp.reset",
                    f"connection {conn.id} was reset with data not yet acknowledged or "
                    "still waiting behind a hole",
                    seg.packet,
                    conn.id,
                )
            )

    # -- one direction ------------------------------------------------------------------------

    @staticmethod
    def _refast(h: _Half) -> None:
        h.fast = h.firm and h.fin is None and not h.starts and h.nxt is not None

    def _ack(self, p: _Half, ack: int, packet: int, ts: float, out: list[StreamEvent]) -> None:
        """The peer of `p`'s sender acknowledged `ack` (raw) of `p`'s direction."""
        nxt = p.nxt
        if nxt is None:
            return
        a = nxt + (((ack - nxt + _HALF) & _MASK) - _HALF)
        if a <= p.acked or a - nxt >= MAX_AHEAD:
            return
        p.acked = a
        p.forget_acked(a)
        if a > nxt and (p.starts or (p.fin is not None and not p.done)):
            self._resolve(p, packet, ts, out)
        elif a > nxt + 1 and nxt >= p.unseen and p.firm:
            self._unseen(p, a, packet, ts, out)

    @staticmethod
    def _unseen(p: _Half, a: int, packet: int, ts: float, out: list[StreamEvent]) -> None:
        """The peer acknowledged up to `a`, past all `p` delivered, with nothing buffered: bytes
        not seen (more than a FIN's or a keep-alive's one). Reported once until the stream
        reaches `a`; not declared missing (rule (a) waits for what comes after them)."""
        nxt = p.nxt
        if nxt is None or not p.firm or p.done:
            return
        p.unseen = a
        out.append(StreamUnseen(p.cid, p.direction, a - nxt, packet, ts))

    @staticmethod
    def _trim_hist(h: _Half) -> None:
        """Forget the oldest delivered bytes down to half of `HISTORY` (amortised trimming)."""
        hist = h.hist
        at = h.hist_at
        n = len(hist)
        while at < n and h.hist_len > HISTORY // 2:
            h.hist_len -= len(hist[at][1])
            at += 1
        h.forgot(at)

    def _data(
        self,
        h: _Half,
        seq: int,
        payload: bytes,
        packet: int,
        ts: float,
        out: list[StreamEvent],
    ) -> None:
        """Slow path for a payload: anchoring, trimming, buffering."""
        nxt = h.nxt
        if nxt is None or h.done:
            return
        off = ((seq - nxt + _HALF) & _MASK) - _HALF
        if not h.firm and (-START_SLACK <= off < 0 or (off == 1 and h.zero_anchor)):
            h.nxt = nxt = nxt + off  # provisional anchor moves (see "Sequence numbers")
            off = 0
        if off >= MAX_AHEAD:
            return  # out-of-window garbage
        pos = nxt + off
        end = pos + len(payload)
        fin = h.fin
        if fin is not None and end > fin:
            if pos >= fin:
                return
            payload = payload[: fin - pos]
            end = fin
        if pos < nxt:
            if end <= nxt:
                if not h.mismatch and not (end == nxt and len(payload) == 1):
                    self._check_hist(h, pos, payload, packet)
                return
            if not h.mismatch:
                self._check_hist(h, pos, payload[: nxt - pos], packet)
            payload = payload[nxt - pos :]
            pos = nxt
        if pos == nxt and not h.starts:
            self._deliver(h, payload, packet, ts, out)
        else:
            self._insert(h, pos, payload, packet, ts)
            self._drain(h, out)
            if h.buffered > self.max_buffer or len(h.starts) > MAX_PIECES:
                self._overflow(h, packet, ts, out)
            if h.acked > _pos(h) and h.starts:
                self._resolve(h, packet, ts, out)
        self._refast(h)

    def _deliver(
        self, h: _Half, data: bytes, packet: int, ts: float, out: list[StreamEvent]
    ) -> None:
        end = _pos(h) + len(data)
        h.nxt = end
        h.firm = True
        out.append(StreamData(h.cid, h.direction, data, packet, ts))
        h.hist.append((end, data))
        h.hist_len += len(data)
        if h.hist_len > HISTORY:
            self._trim_hist(h)
        if h.fin is not None and end == h.fin:
            self._reach_fin(h, out)

    def _snapped(
        self, h: _Half, seq: int, kept: int, cut: int, packet: int, ts: float, out: list
    ) -> None:
        """The snap length cut `cut` bytes off the end of a segment: when what it kept ends
        where the stream is now (it came in order), they are missing now, not at the next
        segment or the peer's ack, so what follows the hole (in either direction) is read
        knowing of it."""
        if h.done or h.starts or cut <= 0:
            return
        nxt = _pos(h)
        if (seq + kept - nxt) & _MASK == 0:
            self._gap(h, nxt + cut, packet, ts, out, "cut by the snap length")

    def _gap(
        self, h: _Half, to: int, packet: int, ts: float, out: list[StreamEvent], why: str
    ) -> None:
        n = to - _pos(h)
        out.append(StreamGap(h.cid, h.direction, n, packet, ts))
        self.findings.append(
            finding(
                "tcp.gap",
                f"connection {h.cid} {h.direction}: {n} bytes missing from the capture ({why})",
                packet,
                h.cid,
            )
        )
        h.nxt = to
        h.firm = True
        h.clear_hist()
        if h.fin is not None and to == h.fin:
            self._reach_fin(h, out)

    @staticmethod
    def _reach_fin(h: _Half, out: list[StreamEvent]) -> None:
        """Every byte before the FIN is delivered or declared missing: the FIN is an event now,
        at the time of the packet that brought it."""
        fin = h.fin
        assert fin is not None  # called once the stream reached its FIN
        out.append(StreamFin(h.cid, h.direction, h.fin_packet, h.fin_ts, h.peer.done))
        h.nxt = fin + 1
        h.done = True
        h.fast = False
        h.starts.clear()
        h.segs.clear()
        h.came.clear()
        h.buffered = 0
        h.clear_hist()

    def _mismatch(self, h: _Half, packet: int) -> None:
        h.mismatch = True
        self.findings.append(
            finding(
                "tcp.overlap-mismatch",
                f"connection {h.cid} {h.direction}: a retransmission carried different bytes "
                "than the first copy (the first copy was kept)",
                packet,
                h.cid,
            )
        )

    def _check_hist(self, h: _Half, pos: int, data: bytes, packet: int) -> None:
        """Compare `data` at `pos` (all before `h.nxt`) with remembered delivered bytes."""
        hist = h.hist
        if h.hist_at >= len(hist):
            return
        lo = max(pos, _pos(h) - h.hist_len)
        hi = pos + len(data)
        if lo >= hi:
            return
        pieces = []
        for k in range(h.hist_at, len(hist)):
            end, d = hist[k]
            start = end - len(d)
            if end <= lo:
                continue
            if start >= hi:
                break
            pieces.append(d[max(lo - start, 0) : min(hi, end) - start])
        if b"".join(pieces) != data[lo - pos : hi - pos]:
            self._mismatch(h, packet)

    def _insert(self, h: _Half, pos: int, data: bytes, packet: int, ts: float) -> None:
        """Buffer `data` at `pos` (>= h.nxt), keeping pieces that are already there."""
        starts = h.starts
        segs = h.segs
        came = h.came
        end = pos + len(data)
        i = bisect_right(starts, pos) - 1
        if i >= 0:
            s = starts[i]
            d = segs[s]
            e = s + len(d)
            if e > pos:
                o = min(e, end)
                if not h.mismatch and data[: o - pos] != d[pos - s : o - s]:
                    self._mismatch(h, packet)
                if e >= end:
                    return
                data = data[e - pos :]
                pos = e
        i += 1
        while True:
            if i < len(starts) and starts[i] < end:
                s = starts[i]
                if s > pos:
                    piece = data[: s - pos]
                    starts.insert(i, pos)
                    segs[pos] = piece
                    came[pos] = (packet, ts)
                    h.buffered += len(piece)
                    i += 1
                    data = data[s - pos :]
                    pos = s
                d = segs[s]
                e = s + len(d)
                o = min(e, end)
                if not h.mismatch and data[: o - s] != d[: o - s]:
                    self._mismatch(h, packet)
                if e >= end:
                    return
                data = data[e - pos :]
                pos = e
                i += 1
            else:
                starts.insert(i, pos)
                segs[pos] = data
                came[pos] = (packet, ts)
                h.buffered += len(data)
                return

    def _drain(self, h: _Half, out: list[StreamEvent]) -> None:
        """Deliver the buffered pieces that continue the stream: one `StreamData` for each
        latest packet along them (after a segment that filled the hole, that segment's for
        all; after a hole declared missing, the packets that brought them)."""
        starts = h.starts
        pos = h.nxt
        if not starts or starts[0] != pos:
            return
        segs = h.segs
        came = h.came
        runs: list[tuple[int, float, list[bytes]]] = []  # (packet, ts, pieces)
        latest = -1
        i = 0
        while i < len(starts) and starts[i] == pos:
            d = segs.pop(pos)
            brought, at = came.pop(pos)
            if brought > latest:
                latest = brought
                runs.append((brought, at, [d]))
            else:
                runs[-1][2].append(d)
            pos += len(d)
            i += 1
        del starts[:i]
        h.buffered -= pos - _pos(h)
        for brought, at, pieces in runs:
            self._deliver(h, pieces[0] if len(pieces) == 1 else b"".join(pieces), brought, at, out)

    def _next_known(self, h: _Half) -> int | None:
        """The position of the next thing known after the hole: buffered data or the FIN."""
        if h.starts:
            return h.starts[0]
        return h.fin

    def _resolve(self, h: _Half, packet: int, ts: float, out: list[StreamEvent]) -> None:
        """Rule (a): the peer acknowledged past the hole, so what we lack there is missing."""
        limit = h.acked
        while not h.done and _pos(h) < limit:
            b = self._next_known(h)
            before = _pos(h)
            if b is None:
                break
            if b > before:
                self._gap(h, min(b, limit), packet, ts, out, "acknowledged by the peer")
            self._drain(h, out)
            if h.nxt == before:
                break
        self._refast(h)

    def _overflow(self, h: _Half, packet: int, ts: float, out: list[StreamEvent]) -> None:
        """Rule (b): too much waits behind holes; skip them, oldest first, until it fits."""
        self.findings.append(
            finding(
                "tcp.buffer-limit",
                f"connection {h.cid} {h.direction}: more than {self.max_buffer} bytes (or "
                f"{MAX_PIECES} pieces) waited behind a hole; the hole was given up as missing",
                packet,
                h.cid,
            )
        )
        while (
            (h.buffered > self.max_buffer or len(h.starts) > MAX_PIECES) and h.starts and not h.done
        ):
            if h.starts[0] > _pos(h):
                self._gap(h, h.starts[0], packet, ts, out, "reassembly buffer full")
            self._drain(h, out)

    def _fin(self, h: _Half, seq: int, packet: int, ts: float, out: list[StreamEvent]) -> None:
        nxt = h.nxt
        if nxt is None or h.done:
            return
        off = ((seq - nxt + _HALF) & _MASK) - _HALF
        if off >= MAX_AHEAD or off < 0:
            return  # garbage, or a FIN before bytes already delivered: ignore it
        if h.fin is None:
            if h.conn.fin_by is None:
                h.conn.fin_by = h.direction
            fin = nxt + off
            h.fin = fin
            h.fin_packet = packet
            h.fin_ts = ts
            h.fast = False
            starts = h.starts
            while starts and starts[-1] >= fin:  # data past the FIN is ignored
                last = starts.pop()
                h.came.pop(last)
                h.buffered -= len(h.segs.pop(last))
            if starts:
                last = starts[-1]
                d = h.segs[last]
                if last + len(d) > fin:
                    h.segs[last] = d[: fin - last]
                    h.buffered -= last + len(d) - fin
        if h.nxt == h.fin:
            self._reach_fin(h, out)
        elif h.acked > _pos(h):
            self._resolve(h, packet, ts, out)

    def _finish(self, h: _Half, packet: int, ts: float, out: list[StreamEvent]) -> None:
        """Rule (c): the connection is closing; whatever is still missing is missing."""
        if h.nxt is None or h.done:
            return
        while not h.done:
            b = self._next_known(h)
            before = _pos(h)
            if b is None:
                break
            if b > before:
                self._gap(h, b, packet, ts, out, "never retransmitted before the close")
            self._drain(h, out)
            if h.nxt == before:
                break
        nxt = _pos(h)
        if not h.done and h.acked > nxt:
            extra = h.acked - nxt
            if h.fin is None and h.peer.fin is not None:
                extra -= 1  # the peer acknowledged our FIN, which the capture missed
            if extra == 1 and not h.firm:
                extra = 0  # a keep-alive was the anchor
            if extra > 0:
                self._gap(h, nxt + extra, packet, ts, out, "acknowledged by the peer")


def events_from_segments(
    segments: Iterable[Segment], *, findings: list[Finding] | None = None
) -> Iterator[StreamEvent]:
    """Reassemble `segments` (capture order) and end with `flush()`. Findings, if wanted, are
    appended to `findings` as they happen."""
    r = TcpReassembler()
    if findings is not None:
        r.findings = findings
    feed = r.feed
    for seg in segments:
        yield from feed(seg)
    yield from r.flush()
