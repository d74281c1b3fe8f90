"""One AMQP 1.0 connection's state, fed its frames in capture order (sans-IO).

The tracker looks each frame up in the tables of `rules` (connection, session and link state per
side), then hands it to the level it concerns: `Session` (windows, delivery-ids), `Link` /
`Credit` (credit), the deliveries, `Transactions`. Findings are returned, never printed; the
caller puts them on the frame. feed() is dict lookups and arithmetic: no copies of frames, no
per-frame lists that grow.
"""

from __future__ import annotations

from itertools import islice
from typing import Any, Final, final

from amqpscope.codec.amqp10.composites import TYPE_DAMAGE
from amqpscope.codec.frames import Frame
from amqpscope.codec.typed import typed_fields
from amqpscope.findings import Finding, finding, gap_lost
from amqpscope.track.amqp10.delivery import Delivery, error_of, error_text
from amqpscope.track.amqp10.link import ENDED_AS, LEFT_LISTED, Link
from amqpscope.track.amqp10.rules import (
    ATTACHED,
    BACKLOG,
    CLIENT,
    CLOSED,
    CONNECTION_TRANSITIONS,
    CONNECTION_VIOLATION,
    DETACHED,
    HEADER,
    LINK_TRANSITIONS,
    LINK_VIOLATION,
    MAPPED,
    NOTED_REJECTIONS,
    OPENED,
    OTHER,
    OUTCOMES,
    RANGE_WALK,
    ROLE_REQUIRED,
    SERVER,
    SESSION_TRANSITIONS,
    SESSION_VIOLATION,
    SETTLED_REQUIRED,
    STALL_SECONDS,
    START,
    UNKNOWN,
    UNMAPPED,
    serial_add,
    serial_diff,
)
from amqpscope.track.amqp10.session import Half, Session
from amqpscope.track.amqp10.transaction import Transactions
from amqpscope.track.transport import transport_summary, transport_text

OPEN_FIELDS: Final = (
    "container-id",
    "hostname",
    "max-frame-size",
    "channel-max",
    "idle-time-out",
    "outgoing-locales",
    "incoming-locales",
    "offered-capabilities",
    "desired-capabilities",
)
ATTACH_FIELDS: Final = (
    "name",
    "handle",
    "role",
    "snd-settle-mode",
    "rcv-settle-mode",
    "source",
    "target",
    "initial-delivery-count",
    "max-message-size",
)
KNOWN: Final = frozenset(name for row in CONNECTION_TRANSITIONS.values() for name in row)
SESSION_LEVEL: Final = frozenset(name for row in SESSION_TRANSITIONS.values() for name in row)
LINK_LEVEL: Final = frozenset(name for row in LINK_TRANSITIONS.values() for name in row)
KEEP_LINKS: Final = (
    1000  # ended links kept per session for the summary (their tallies stay counted)
)
NOTES: Final = 50  # things a mid-stream capture could not know, listed (the rest counted)
_TRANSFER_ROLE: Final = ROLE_REQUIRED["transfer"]  # the role of a link's sending end
#: the connection state after a transfer on an open connection (it stays open)
_TRANSFER_OPENED: Final = CONNECTION_TRANSITIONS[OPENED].get("transfer")
#: outcomes a settling disposition applies itself (`rejected` has a finding to make)
_PLAIN_OUTCOMES: Final = frozenset(kind for kind in OUTCOMES if kind != "rejected")
#: whether the tables allow a transfer on a mapped session, on an attached link (they do)
_TRANSFER_MAPPED: Final = SESSION_TRANSITIONS[MAPPED].get("transfer") is not None
_TRANSFER_ATTACHED: Final = LINK_TRANSITIONS[ATTACHED].get("transfer") is not None


@final
class Side:
    """One side's connection-level state: typed attributes, so that the per-frame checks read
    slots (compiled, a field access) rather than dicts keyed by side."""

    __slots__ = (
        "channels",
        "closed",
        "heartbeats",
        "idle",
        "last_ts",
        "late",
        "max_frame",
        "max_gap",
        "name",
        "opened",
        "peer",
        "pending",
        "state",
    )

    def __init__(self, name: str) -> None:
        self.name = name  # CLIENT or SERVER
        self.state = START
        self.last_ts: float | None = None
        self.heartbeats = 0
        self.max_gap = 0.0
        self.late = 0
        self.opened: dict[str, Any] | None = None  # what this side's open said (OPEN_FIELDS)
        self.closed: dict[str, Any] | None = None
        #: from `opened`: what this side holds its peer to (None: not said, or no open yet)
        self.idle: Any = None
        self.max_frame: Any = None
        self.channels: dict[int, Session] = {}  # channel -> the session this side began on it
        self.pending: dict[int, Session] = {}  # sessions begun, the peer's begin not yet seen
        self.peer: Side = self  # the other side (set by the tracker)

    def open(self, opened: dict[str, Any]) -> None:
        self.opened = opened
        self.idle = opened.get("idle-time-out")
        self.max_frame = opened.get("max-frame-size")


class ConnectionTracker:
    """Frames of one connection in; state, and findings about what the frames mean, out."""

    def __init__(
        self,
        conn: int,
        client: str,
        server: str,
        version: str,
        stats: bool = True,
        source: str = "capture",
    ) -> None:
        self.conn = conn
        self.source = source  # what findings call the frames' source: "capture", "log"
        #: keep what only the summary shows (each link's settle-latency reservoir and its
        #: sparklines' series); False for a reader that never asks for a summary (`read`)
        self.stats = stats
        self.client = client
        self.server = server
        self.version = version
        self.client_side = Side(CLIENT)
        self.server_side = Side(SERVER)
        self.client_side.peer = self.server_side
        self.server_side.peer = self.client_side
        self.sides: dict[str, Side] = {CLIENT: self.client_side, SERVER: self.server_side}
        self.started = False
        self.mid_stream = False
        self.lenient = False  # mid-stream, or bytes were lost: unknown state is not a violation
        self.lost_at: int | None = None  # the frame after the last bytes lost (a `tcp.gap`)
        self.first_frame: int | None = None
        self.headers: dict[str, list[str]] = {CLIENT: [], SERVER: []}
        self.sasl: dict[str, Any] = {"mechanisms": None, "mechanism": None, "outcome": None}
        self.channel_max: Any = None  # the lower channel-max of the opens seen (`_open`)
        self.sessions: list[Session] = []
        self.dropped_links = 0
        self.txns = Transactions()
        self.ts = 0.0
        self.noted: set[tuple[str, Any]] = set()  # violations reported once (bounded by kinds)
        self.notes: list[str] = []
        self.more_notes = 0
        self.frames = 0
        self.transport_end: dict[str, Any] | None = None  # the `transport` record's fields
        self.dropped = False  # TCP ended while the AMQP connection was open (transport-closed)
        self.handlers = {
            "protocol-header": self._header,
            "sasl-mechanisms": self._sasl_mechanisms,
            "sasl-init": self._sasl_init,
            "sasl-outcome": self._sasl_outcome,
            "open": self._open,
            "close": self._close,
            "begin": self._begin,
            "end": self._end,
            "attach": self._attach,
            "detach": self._detach,
            "flow": self._flow,
            "transfer": self._transfer,
            "disposition": self._disposition,
        }

    # --- each side's state by side, as a dict (what readers of a finished tracker ask for) ------

    @property
    def state(self) -> dict[str, str]:
        return {CLIENT: self.client_side.state, SERVER: self.server_side.state}

    # --- the front door -----------------------------------------------------------------------

    def feed(self, frame: Frame) -> list[Finding]:
        """Apply one frame; return the findings it raises (the caller puts them on the frame)."""
        direction = frame.direction
        if direction == "c2s":
            me = self.client_side
        elif direction == "s2c":
            me = self.server_side
        else:
            return []
        side = me.name
        name = frame.name
        if name not in KNOWN:
            return []
        out: list[Finding] = []
        self.frames += 1
        self.ts = frame.ts
        if not self.started:
            self.started = True
            self.first_frame = frame.number
            if frame.kind != "protocol-header":
                self._begin_mid_stream(frame)
        if frame.findings:
            codes = {f.code for f in frame.findings}
            if "tcp.gap" in codes:
                self._bytes_lost(frame)
            elif "tcp.ack-unseen" in codes:
                self._maybe_lost(frame)
            if not codes.isdisjoint(TYPE_DAMAGE):  # compute only with values of their fields' types
                frame = frame.with_fields(typed_fields(frame))
        state = me.state
        if name == "transfer" and state == OPENED:  # most frames: no table lookups
            nxt: str | None = _TRANSFER_OPENED
        else:
            nxt = CONNECTION_TRANSITIONS[state].get(name)
        if nxt is None:
            self._violation(out, CONNECTION_VIOLATION[state], (state, side), side, frame)
        else:
            me.state = nxt
        kind = frame.kind
        self._timing(me, frame, kind, state, out)
        if kind == "performative" or kind == "heartbeat":
            self._limits(me, frame, out)
        if name == "transfer":  # most frames: called by name, compiled a direct C call
            self._transfer_checked(me, frame, out)
            return out
        if name in SESSION_LEVEL:
            self._check_session(me, frame, out)
        handler = self.handlers.get(name)
        if handler is not None:
            handler(side, frame, out)
        return out

    def transport(self, frame: Frame, gone: bool = True) -> list[Finding]:
        """The TCP connection ended (a `transport` record: fin, rst or idle; the first one says
        who ended it first). While the AMQP connection was open or opening (no close from either
        side) this is `amqp10.transport-closed`: the client vanished, was killed, or the broker
        dropped it; its sessions and links end once the client is `gone` (its FIN, a reset, the
        second FIN: after the broker's FIN the client may still send, not knowing) with
        "transport closed", so their unsettled deliveries are reported once, then. After a
        close, or when SASL failed or nothing was opened, the TCP end is the normal end and only
        the summary's `transport` records it."""
        out: list[Finding] = []
        if self.transport_end is not None:
            if gone and self.dropped:
                self.ts = max(self.ts, frame.ts)
                self._end_sessions(out, "transport closed", "the TCP connection ended")
            return out
        fields = frame.fields
        self.transport_end = {"event": fields.get("event"), "by": fields.get("by")}
        self.ts = max(self.ts, frame.ts)  # a stall open until now lasted until the TCP end
        state = self._state()
        if state not in ("open", "opening"):
            return out
        self.dropped = True
        sessions = [s for s in self.sessions if not (s.half[CLIENT].ended and s.half[SERVER].ended)]
        links = [link for s in sessions for link in s.links if link.ended is None]
        unsettled = sum(len(link.unsettled) for link in links)
        left = (
            f"{len(sessions)} session{'' if len(sessions) == 1 else 's'} and {len(links)}"
            f" link{'' if len(links) == 1 else 's'} still open"
        )
        if unsettled:
            left += f", {unsettled} deliver{'y' if unsettled == 1 else 'ies'} unsettled"
        out.append(
            finding(
                "amqp10.transport-closed",
                f"{transport_text(fields)} while the AMQP connection was {state}"
                f" (no close): {left}",
            )
        )
        if gone:
            self._end_sessions(out, "transport closed", "the TCP connection ended")
        return out

    def finish(self) -> list[Finding]:
        """The capture ended: findings for what was left open (unsettled, stalls, unknowns)."""
        out: list[Finding] = []
        closed = self.client_side.closed is not None or self.server_side.closed is not None
        reason = "the connection closed" if closed else f"the {self.source} ended"
        self._end_sessions(out, "connection closed" if closed else "open at end", reason)
        if self.notes or self.mid_stream:
            first = f" (first frame {self.first_frame})" if self.mid_stream else ""
            more = f"; and {self.more_notes} more" if self.more_notes else ""
            out.append(
                finding(
                    "amqp10.mid-stream",
                    (
                        f"the {self.source} starts mid-connection"
                        if self.mid_stream
                        else "bytes were lost"
                    )
                    + f"{first}; not known: "
                    + "; ".join(self.notes)
                    + more,
                )
            )
        return out

    def _end_sessions(self, out: list[Finding], word: str, reason: str) -> None:
        """End every session and link still open: `word` is the session's summary state,
        `reason` says why in the unsettled findings. What an earlier call ended stays ended."""
        for session in self.sessions:
            if session.ended is None and not (
                session.half[CLIENT].ended and session.half[SERVER].ended
            ):
                session.ended = word
            for half in session.half.values():
                if half.exhausted.since is not None:
                    length = half.exhausted.stop(self.ts, at_end=True)
                    self._stall_window(out, session, half, length, open_at_end=True)
            for link in session.links:
                if link.credit.starvation.since is not None:
                    length = link.credit.starvation.stop(self.ts, at_end=True)
                    self._stall_credit(out, link, length, open_at_end=True)
                if link.ended is None:
                    self._end_link(out, session, link, reason)

    # --- connection ---------------------------------------------------------------------------

    def _begin_mid_stream(self, frame: Frame) -> None:
        self.mid_stream = self.lenient = True
        self.client_side.state = self.server_side.state = UNKNOWN
        self._note(
            "the protocol headers, SASL and open (container-ids, max-frame-size, channel-max, "
            "idle-time-out)"
        )

    def _bytes_lost(self, frame: Frame) -> None:
        self.lenient = True
        self.lost_at = frame.number
        for f in frame.findings:
            if f.code == "tcp.gap":
                _missing, lost = gap_lost(f, frame.direction)
                me = self.client_side if lost == "c2s" else self.server_side
                if me.state in (START, HEADER):  # its open may be in the lost bytes
                    me.state = UNKNOWN
        self._note(f"transfers, flows and settlements in bytes lost before frame {frame.number}")
        for session in self.sessions:
            for half in session.half.values():
                half.next_outgoing = None
                half.next_delivery = None
                half.exhausted.cancel()
            for link in session.links:
                link.credit.forget()
                link.current = None

    def _maybe_lost(self, frame: Frame) -> None:
        """Bytes of a side acknowledged but not seen (maybe lost, maybe late): lenient, and the
        side's next delivery-id is no longer known (they may hold transfers), so a settlement
        of an id past the last seen is not a delivery never sent; nothing else is forgotten."""
        self.lenient = True
        for f in frame.findings:
            if f.code == "tcp.ack-unseen":
                _unseen, lost = gap_lost(f, frame.direction)
                side = CLIENT if lost == "c2s" else SERVER
                for session in self.sessions:
                    session.half[side].next_delivery = None

    def _header(self, side: str, frame: Frame, out: list[Finding]) -> None:
        protocol = frame.fields.get("protocol")
        if protocol is not None and len(self.headers[side]) < 4:
            self.headers[side].append(protocol)

    def _sasl_mechanisms(self, side: str, frame: Frame, out: list[Finding]) -> None:
        self.sasl["mechanisms"] = frame.fields.get("sasl-server-mechanisms")

    def _sasl_init(self, side: str, frame: Frame, out: list[Finding]) -> None:
        self.sasl["mechanism"] = frame.fields.get("mechanism")

    def _sasl_outcome(self, side: str, frame: Frame, out: list[Finding]) -> None:
        code = frame.fields.get("code")
        self.sasl["outcome"] = code
        if code is not None and code != "ok":
            mech = self.sasl["mechanism"]
            out.append(
                finding(
                    "amqp10.sasl-failed",
                    f"SASL outcome {code}" + (f" for mechanism {mech}" if mech else ""),
                )
            )

    def _open(self, side: str, frame: Frame, out: list[Finding]) -> None:
        fields = frame.fields
        self.sides[side].open({k: fields[k] for k in OPEN_FIELDS if k in fields})
        # the lower of the two sides' channel-max, computed here rather than for every frame
        self.channel_max = min(
            (o.get("channel-max", 65535) for o in self._opens() if o is not None),
            default=None,
        )

    def _opens(self) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """What the client's and the server's opens said."""
        return self.client_side.opened, self.server_side.opened

    def _close(self, side: str, frame: Frame, out: list[Finding]) -> None:
        error = error_of(frame.fields.get("error"))
        self.sides[side].closed = {"error": error}
        if error:
            out.append(
                finding("amqp10.error", f"{side} closed the connection: {error_text(error)}")
            )

    def _timing(self, me: Side, frame: Frame, kind: str, before: str, out: list[Finding]) -> None:
        """Heartbeats: a side must send something at least every idle-time-out of its peer."""
        if kind == "heartbeat":
            me.heartbeats += 1
        last = me.last_ts
        ts = frame.ts
        me.last_ts = ts
        if last is None or (before != OPENED and before != UNKNOWN):
            return
        gap = ts - last
        if gap > me.max_gap:
            me.max_gap = gap
        idle = me.peer.idle
        if idle and gap * 1000.0 > idle:
            me.late += 1
            if me.late == 1:
                side = me.name
                out.append(
                    finding(
                        "amqp10.heartbeat-late",
                        f"{side} sent nothing for {gap:.3f} s; {OTHER[side]}'s idle-time-out "
                        f"is {idle / 1000:g} s",
                    )
                )

    def _limits(self, me: Side, frame: Frame, out: list[Finding]) -> None:
        """Frame size and channel against what the receiving peer's open allows."""
        if me.peer.opened is None:
            return  # not negotiated yet (or before the capture): nothing to hold it to
        side = me.name
        limit = me.peer.max_frame
        if limit is None:
            over = False
        elif type(limit) is int:  # the usual: compared as ints
            frame_limit: int = limit
            over = frame.size > frame_limit
        else:
            over = frame.size > limit
        if over:
            self._violation(
                out,
                "amqp10.frame-too-large",
                ("frame-size", side),
                side,
                frame,
                f"{frame.name} of {frame.size} bytes from {side}; {OTHER[side]}'s "
                f"max-frame-size is {limit} (reported once per side)",
            )
        channel_max = self.channel_max
        if frame.channel is not None and channel_max is not None and frame.channel > channel_max:
            self._violation(
                out,
                "amqp10.channel-over-max",
                ("channel-max", side, frame.channel),
                side,
                frame,
                f"channel {frame.channel} is above the channel-max {channel_max}",
            )

    # --- sessions -----------------------------------------------------------------------------

    def _check_session(self, me: Side, frame: Frame, out: list[Finding]) -> None:
        """The session and link tables of `rules`: may `me` send this frame on this channel
        and handle? (Mid-stream, unknown channels and handles are not violations.)"""
        side = me.name
        name, channel = frame.name, frame.channel
        if channel is None:  # a log that shows no channel (pyamqp's, uamqp's): nothing to check
            return
        session = me.channels.get(channel)
        state = MAPPED if session is not None else UNMAPPED
        if SESSION_TRANSITIONS[state].get(name) is None:
            if state == MAPPED or not self.lenient:
                text = (
                    f"begin on channel {channel}, which {side} has already begun"
                    if state == MAPPED
                    else f"{name} on channel {channel}, which {side} has not begun"
                )
                key = ("session", side, channel, state)
                self._violation(out, SESSION_VIOLATION[state], key, side, frame, text)
            return
        handle = frame.fields.get("handle")
        if session is None or handle is None or name not in LINK_LEVEL:
            return
        link = session.half[side].handles.get(handle)
        lstate = ATTACHED if link is not None else DETACHED
        if LINK_TRANSITIONS[lstate].get(name) is None and (lstate == ATTACHED or not self.lenient):
            text = (
                f"attach of {frame.fields.get('name')!r} on handle {handle} (channel {channel}),"
                f" still attached to {link.name!r}"
                if link is not None
                else f"{name} on handle {handle} (channel {channel}), which {side} has not attached"
            )
            link_key = ("link", side, channel, handle, lstate)
            self._violation(out, LINK_VIOLATION[lstate], link_key, side, frame, text)
        elif lstate == ATTACHED and self.noted:  # most frames: nothing noted, no key to make
            self.noted.discard(("link", side, channel, handle, DETACHED))

    def _session(self, side: str, frame: Frame, out: list[Finding]) -> Session | None:
        """The session `side` has mapped to the frame's channel; when there is none (a
        violation, or a session begun before the capture), one is inferred to keep tracking."""
        channel = frame.channel
        if channel is None:
            return None
        session = self.sides[side].channels.get(channel)
        if session is not None:
            return session
        if self.lenient:
            self._note(f"the begin of {side} channel {channel}")
        peer = OTHER[side]
        session = self.sides[peer].channels.get(channel)
        if session is not None and session.inferred and session.half[side].channel is None:
            self._note(f"which channels pair: assumed {CLIENT} {channel} = {SERVER} {channel}")
        else:
            session = Session(None, inferred=True)
            self.sessions.append(session)
        session.half[side].channel = channel
        session.half[side].begun = True
        self.sides[side].channels[channel] = session
        return session

    def _begin(self, side: str, frame: Frame, out: list[Finding]) -> None:
        channel = frame.channel
        if channel is None:
            return
        fields = frame.fields
        peer = OTHER[side]
        remote = fields.get("remote-channel")
        session = self.sides[peer].pending.pop(remote, None) if remote is not None else None
        if session is None:
            session = Session(side if remote is None else peer, inferred=remote is not None)
            if remote is not None:
                session.half[peer].channel = remote
                if self.lenient:
                    self._note(f"the begin of {peer} channel {remote}")
            self.sessions.append(session)
            if remote is None:
                self.sides[side].pending[channel] = session
        session.half[side].channel = channel
        self.sides[side].channels[channel] = session
        session.begin(side, fields, frame.ts, frame.number)

    def _end(self, side: str, frame: Frame, out: list[Finding]) -> None:
        session = self._session(side, frame, out)
        if session is None:
            return
        me = self.sides[side]
        del me.channels[frame.channel]  # type: ignore[arg-type]
        if me.pending.get(frame.channel) is session:  # type: ignore[arg-type]
            del me.pending[frame.channel]  # type: ignore[arg-type]
        error = session.end(side, frame.fields)
        if error:
            out.append(
                finding(
                    "amqp10.error",
                    f"{side} ended the session on channel {frame.channel}: {error_text(error)}",
                )
            )
        half = session.half[side]
        half.handles.clear()  # ending a session detaches its links
        peer = session.half[OTHER[side]]
        if peer.ended or not peer.begun:
            for link in session.links:
                if link.ended is None:
                    self._end_link(out, session, link, "the session ended")
        else:
            for link in session.links:
                if link.ended is None and link.attach[side] is not None:
                    link.detach[side] = link.detach[side] or {"closed": True, "implicit": True}

    # --- links --------------------------------------------------------------------------------

    def _link(self, session: Session, side: str, frame: Frame, out: list[Finding]) -> Link | None:
        handle = frame.fields.get("handle")
        if handle is None:
            return None
        link = session.half[side].handles.get(handle)
        if link is not None or frame.name == "detach":
            return link
        channel = frame.channel
        if self.lenient:
            self._note(f"the attach of {side} handle {handle} on channel {channel}")
        peer = OTHER[side]
        link = session.half[peer].handles.get(handle)
        if link is not None and link.inferred and link.handle[side] is None:
            self._note(f"which handles pair: assumed {CLIENT} {handle} = {SERVER} {handle}")
        else:
            sender = side if frame.name == "transfer" else None
            link = Link(None, sender, inferred=True)
            session.links.append(link)
        link.handle[side] = handle
        session.half[side].handles[handle] = link
        return link

    def _attach(self, side: str, frame: Frame, out: list[Finding]) -> None:
        session = self._session(side, frame, out)
        if session is None:
            return
        fields = frame.fields
        name, handle, role = fields.get("name"), fields.get("handle"), fields.get("role")
        peer = OTHER[side]
        sender = side if role == "sender" else peer if role == "receiver" else None
        key = (name, sender or side)
        link = session.by_name.get(key)
        if link is None or link.attach[side] is not None:
            link = Link(name, sender)
            session.links.append(link)
            session.by_name[key] = link
        half = session.half[side]
        if handle is not None:
            handle_max = session.half[peer].handle_max
            if handle_max is not None and handle > handle_max:
                out.append(
                    finding(
                        "amqp10.handle-over-max",
                        f"attach of {name!r} on handle {handle}; {peer}'s handle-max is "
                        f"{handle_max}",
                    )
                )
            half.handles[handle] = link
        link.handle[side] = handle
        attach = link.attach[side] = {k: fields[k] for k in ATTACH_FIELDS if k in fields}
        # the `settled` flag its snd-settle-mode requires of this side's first transfers,
        # looked up here once, not per transfer
        mode = attach.get("snd-settle-mode")
        required = SETTLED_REQUIRED.get(mode) if isinstance(mode, str) else None
        if side == CLIENT:
            link.client_settled = required
        else:
            link.server_settled = required
        unsettled = fields.get("unsettled")
        if isinstance(unsettled, dict):
            link.resume_unsettled = max(link.resume_unsettled, len(unsettled))
        if role == "sender":
            link.credit.sender_attached(fields.get("initial-delivery-count"))
            if self.stats:
                link.credit_series.set(frame.ts, link.credit.credit)
            target = fields.get("target")
            if isinstance(target, dict) and target.get("type") == "coordinator":
                if not link.coordinator:
                    self.txns.coordinators += 1
                link.coordinator = True
        elif role == "receiver":
            link.credit.receiver_attached(frame.ts, frame.number)
            target = fields.get("target")
            if isinstance(target, dict) and target.get("type") == "coordinator":
                link.coordinator = True

    def _detach(self, side: str, frame: Frame, out: list[Finding]) -> None:
        session = self._session(side, frame, out)
        if session is None:
            return
        link = self._link(session, side, frame, out)
        if link is None:
            return  # a detach of a handle never attached: reported by _check_session
        session.half[side].handles.pop(frame.fields.get("handle"), None)  # type: ignore[arg-type]
        error = error_of(frame.fields.get("error"))
        closed = bool(frame.fields.get("closed"))
        link.detach[side] = {"closed": closed, "error": error}
        if error:
            out.append(
                finding(
                    "amqp10.error",
                    f"{side} detached {link.label()}"
                    + (" (closed)" if closed else "")
                    + f": {error_text(error)}",
                )
            )
        peer = OTHER[side]
        if link.ended is not None:
            return
        if link.detach[peer] is not None or link.attach[peer] is None or session.half[peer].ended:
            self._end_link(out, session, link, "it detached")

    def _end_link(self, out: list[Finding], session: Session, link: Link, why: str) -> None:
        link.ended = ENDED_AS.get(why, "open at end")
        link.current = None
        link.credit.ended(self.ts)
        key = (link.name, link.sender or _attacher(link))
        if session.by_name.get(key) is link:
            del session.by_name[key]
        left = len(link.unsettled)
        if left:
            # bytes lost after the first of them may have held their settlement: not seen
            lost = self.lost_at is not None and self.lost_at > min(
                d.frame for d in link.unsettled.values()
            )
            listed = islice(link.unsettled.values(), LEFT_LISTED - len(link.left_unsettled))
            link.left_unsettled += [(d.id, d.ts, d.frame) for d in listed]
            for delivery in link.unsettled.values():
                session.half[delivery.sender].deliveries.pop(delivery.id, None)
            link.unsettled.clear()
            link.left += left
            out.append(
                finding(
                    "amqp10.unsettled-at-end",
                    f"{left} deliver{'y' if left == 1 else 'ies'}"
                    f" {'not seen settled' if lost else 'left unsettled'} on {link.label()}"
                    f" when {why}" + (" (bytes were lost after the first of them)" if lost else ""),
                )
            )
        if len(session.links) > KEEP_LINKS:  # drop the oldest ended link from the summary
            for i, old in enumerate(session.links):
                if old.ended is not None and old is not link:
                    del session.links[i]
                    self.dropped_links += 1
                    break

    def _flow(self, side: str, frame: Frame, out: list[Finding]) -> None:
        session = self._session(side, frame, out)
        if session is None:
            return
        fields = frame.fields
        waited = session.flow(side, fields, frame.ts, frame.number)
        if waited is not None:
            self._stall_window(out, session, session.half[OTHER[side]], waited)
        if fields.get("handle") is None:
            return
        link = self._link(session, side, frame, out)
        if link is None:
            return
        role = link.role_of(side)
        drain = bool(fields.get("drain"))
        echo = bool(fields.get("echo"))
        if role == "receiver":
            waited = link.credit.receiver_flow(
                fields.get("delivery-count"),
                fields.get("link-credit"),
                drain,
                echo,
                frame.ts,
                frame.number,
            )
        elif role == "sender":
            waited = link.credit.sender_flow(
                fields.get("delivery-count"),
                fields.get("link-credit"),
                fields.get("available"),
                drain,
                echo,
                frame.ts,
                frame.number,
            )
            link.no_credit_run = False
        else:
            return  # an inferred link whose direction is not known yet
        if self.stats:
            link.credit_series.set(frame.ts, link.credit.credit)
        if waited is not None:
            self._stall_credit(out, link, waited)

    # --- deliveries ---------------------------------------------------------------------------

    def _transfer_checked(self, me: Side, frame: Frame, out: list[Finding]) -> None:
        """A transfer: `_check_session`, then `_transfer`. The usual one (on a channel `me`
        began, a handle it attached, both of which the tables allow a transfer on) finds its
        session and link once, not once to check them and again to use them."""
        channel = frame.channel
        session = me.channels.get(channel) if channel is not None else None
        if session is not None and _TRANSFER_MAPPED:
            handle = frame.fields.get("handle")
            if handle is not None:
                side = me.name
                half = session.client_half if side == CLIENT else session.server_half
                link = half.handles.get(handle)
                if link is not None and _TRANSFER_ATTACHED:
                    if self.noted:
                        self.noted.discard(("link", side, channel, handle, DETACHED))
                    self._transfer_on(session, half, link, side, frame, out)
                    return
        self._check_session(me, frame, out)
        self._transfer(me.name, frame, out)

    def _transfer(self, side: str, frame: Frame, out: list[Finding]) -> None:
        session = self._session(side, frame, out)
        if session is None:
            return
        link = self._link(session, side, frame, out)
        if link is None:
            return
        self._transfer_on(session, session.half[side], link, side, frame, out)

    def _transfer_on(
        self, session: Session, half: Half, link: Link, side: str, frame: Frame, out: list[Finding]
    ) -> None:
        """A transfer from `side` on `link` (`half`: `side`'s half of `session`)."""
        fields = frame.fields
        if link.sender is None:
            link.sender = side  # inferred link: a transfer shows who sends
        if link.role_of(side) != _TRANSFER_ROLE:
            self._violation(
                out,
                "amqp10.wrong-role",
                ("role", side, frame.channel, link.handle[side]),
                side,
                frame,
                f"transfer on {link.label()} from {side}, its receiving end",
            )
        window = half.transferred(frame.ts, frame.number)
        if window is not None and window <= 0:
            self._violation(
                out,
                "amqp10.window-exceeded",
                ("window", side, frame.channel),
                side,
                frame,
                f"transfer from {side} on channel {frame.channel} with the session's "
                f"remote-incoming-window at {window}",
            )
        elif self.noted:  # most transfers: nothing noted, no key to make
            self.noted.discard(("window", side, frame.channel))
        settled = bool(fields.get("settled"))
        delivery = link.current
        if delivery is None and self.lenient:
            delivery = self._continued(half, link, fields)
        if delivery is None:
            delivery = self._first_transfer(session, half, link, side, frame, settled, out)
        elif settled and half.deliveries.get(delivery.id) is delivery:
            self._settle(session, delivery, frame.ts)  # the sender settled it mid-delivery
        if fields.get("aborted"):
            link.aborted += 1
            self._forget(session, delivery)
            link.current = None
        elif fields.get("more"):
            link.current = delivery
        else:
            link.current = None
            if link.coordinator:
                self.txns.action(delivery, frame.message)

    @staticmethod
    def _continued(half: Half, link: Link, fields: dict[str, Any]) -> Delivery | None:
        """After lost bytes: a transfer whose delivery-id (and tag) name an unsettled delivery
        of this link is more of it (its frames in between were in the lost bytes), not a new
        delivery reusing the id."""
        did = fields.get("delivery-id")
        old = half.deliveries.get(did) if did is not None else None
        if old is None or old.link is not link:
            return None
        tag = fields.get("delivery-tag")
        return old if tag is None or tag == old.tag else None

    def _first_transfer(
        self,
        session: Session,
        half: Half,
        link: Link,
        side: str,
        frame: Frame,
        settled: bool,
        out: list[Finding],
    ) -> Delivery:
        fields = frame.fields
        did = fields.get("delivery-id")
        if did is None:
            did = half.next_delivery if half.next_delivery is not None else 0
        tag = fields.get("delivery-tag")
        old = half.deliveries.get(did)
        if old is not None:
            out.append(
                finding(
                    "amqp10.delivery-id-reused",
                    f"delivery-id {did} from {side} reused while delivery {old.tag} on "
                    f"{old.link.label()} (frame {old.frame}) is unsettled",
                )
            )
            self._forget(session, old, left=True)
        resume = fields.get("resume")
        old = link.unsettled.get(tag) if tag is not None else None
        if old is not None and not resume:
            out.append(
                finding(
                    "amqp10.delivery-tag-reused",
                    f"delivery-tag {tag} reused on {link.label()} while delivery-id {old.id} "
                    f"(frame {old.frame}) is unsettled",
                )
            )
            self._forget(session, old, left=True)
        count = link.credit.count
        credit = link.credit.transfer(frame.ts, frame.number)
        stats = self.stats
        if stats:
            link.delivery_series.add(frame.ts)
            if credit is not None:
                link.credit_series.set(frame.ts, credit - 1)  # this delivery used one
        if credit is not None and credit <= 0:
            if not link.no_credit_run:
                link.no_credit_run = True
                c = link.credit
                out.append(
                    finding(
                        "amqp10.transfer-without-credit",
                        f"delivery-id {did} sent on {link.label()} with link-credit {credit} "
                        f"(the sender's delivery-count {count}, the receiver's limit {c.limit})"
                        + (
                            " after the sender's flow completed a drain"
                            if c.drains_completed
                            else ""
                        ),
                    )
                )
        else:
            link.no_credit_run = False
        if resume:
            link.resumed += 1
        required = link.client_settled if side == CLIENT else link.server_settled
        if required is not None and settled != required:
            attach = link.attach[side]
            mode = attach.get("snd-settle-mode") if attach is not None else None
            self._violation(
                out,
                "amqp10.settle-mode-violated",
                ("settle-mode", side, frame.channel, link.handle[side]),
                side,
                frame,
                f"transfer {'settled' if settled else 'unsettled'} on {link.label()}, whose "
                f"snd-settle-mode is {mode}",
            )
        link.deliveries += 1
        if half.first_delivery is None:
            half.first_delivery = did
        half.next_delivery = serial_add(did, 1)
        delivery = Delivery(did, tag, link, side, frame.ts, frame.number)
        state = fields.get("state")
        if isinstance(state, dict) and state.get("type") == "transactional-state":
            delivery.txn = state.get("txn-id")
            self.txns.transferred(delivery.txn, frame.channel)
        if settled:
            link.presettled += 1
        else:
            half.deliveries[did] = delivery
            link.unsettled[tag if tag is not None else f"#{did}"] = delivery
            if stats:
                link.unsettled_series.set(frame.ts, len(link.unsettled))
            if len(link.unsettled) >= BACKLOG and not link.backlogged:
                link.backlogged = True
                out.append(
                    finding(
                        "amqp10.unsettled-backlog",
                        f"{len(link.unsettled)} deliveries unsettled on {link.label()}",
                    )
                )
        return delivery

    def _disposition(self, side: str, frame: Frame, out: list[Finding]) -> None:
        session = self._session(side, frame, out)
        if session is None:
            return
        fields = frame.fields
        role, first = fields.get("role"), fields.get("first")
        if role not in ("sender", "receiver") or first is None:
            return
        owner = side if role == "sender" else OTHER[side]  # whose delivery-ids it names
        half = session.half[owner]
        last = fields.get("last")
        if last is None:
            last = first
        span = serial_diff(last, first) + 1
        if span <= 0:
            span = 1
        settled = bool(fields.get("settled"))
        state = fields.get("state")
        deliveries = half.deliveries
        # walked: a settling disposition's deliveries are taken out of `deliveries` as they are
        # found (one lookup, not a lookup to find and another to delete)
        walked = span <= RANGE_WALK or span <= len(deliveries)
        if walked:
            matched = []
            unknown = []
            for i in range(span):  # one pass over the range (batches of dozens are usual)
                did = serial_add(first, i)
                delivery = deliveries.pop(did, None) if settled else deliveries.get(did)
                if delivery is not None:
                    matched.append(delivery)
                elif not half.ever_sent(did, self.lenient):
                    unknown.append(did)
        else:
            matched = [
                d for i, d in half.deliveries.items() if serial_diff(i, first) in range(span)
            ]
            unknown = [i for i in (first, last) if not half.ever_sent(i, self.lenient)]
        if unknown:
            shown = f"{unknown[0]}" if len(unknown) == 1 else f"{unknown[0]}..{unknown[-1]}"
            out.append(
                finding(
                    "amqp10.unknown-delivery",
                    f"disposition ({role}) from {side} for delivery-id {shown}, which {owner} "
                    "never transferred on this session",
                )
            )
        disposed = state if isinstance(state, dict) else None
        if not settled:
            if disposed is not None:
                for delivery in matched:
                    self._apply_state(session, delivery, disposed, frame, out)
            return
        # the usual state, a plain outcome (accepted, released, modified), is applied here:
        # each delivery's state and outcome set, its link's count added once per run of the
        # same link (`_apply_state` for anything else, and on a coordinator's link)
        kind = disposed.get("type") if disposed is not None else None
        plain = kind if isinstance(kind, str) and kind in _PLAIN_OUTCOMES else None
        counting: Link | None = None
        counted = 0
        # settled: each link's unsettled level is set once, after the range (every delivery
        # forgotten here lowers it at this same time: its last value is all the series keeps)
        ts = frame.ts
        lowered: list[Link] = []
        stats = self.stats
        for delivery in matched:
            link = delivery.link
            if plain is not None and not link.coordinator:
                delivery.state = plain
                if delivery.outcome is None:
                    delivery.outcome = plain
                    if link is not counting:
                        if counting is not None:
                            counting.outcomes[plain] += counted
                        counting = link
                        counted = 0
                    counted += 1
            elif disposed is not None:
                self._apply_state(session, delivery, disposed, frame, out)
            # `_forget`'s work inline (its level set once below, not per delivery); `matched`
            # came from `deliveries` (each one's sender is `owner`), walked: already out of it
            did = delivery.id
            if not walked and deliveries.get(did) is delivery:
                del deliveries[did]
            tag = delivery.tag
            key = tag if tag is not None else f"#{did}"
            unsettled = link.unsettled
            if unsettled.get(key) is delivery:
                del unsettled[key]
                if stats and (not lowered or lowered[-1] is not link):
                    lowered.append(link)
            link.settled += 1
            if stats:
                link.latency.add(ts - delivery.ts)
                link.latency_series.add(ts, ts - delivery.ts)
        if counting is not None and plain is not None:
            counting.outcomes[plain] += counted
        for link in lowered:
            link.unsettled_series.set(ts, len(link.unsettled))

    def _apply_state(
        self, session: Session, delivery: Delivery, state: dict[str, Any], frame: Frame, out: list
    ) -> None:
        link = delivery.link
        kind = state.get("type")
        if kind == "transactional-state":
            link.states[kind] = link.states.get(kind, 0) + 1
            self.txns.disposed(state.get("txn-id"), state.get("outcome"), frame.channel)
            outcome = state.get("outcome")
            if not isinstance(outcome, dict):
                return
            state, kind = outcome, outcome.get("type")
        delivery.state = kind
        if kind in OUTCOMES:
            if delivery.outcome is None:
                delivery.outcome = kind
                link.outcomes[kind] += 1
                if kind == "rejected":
                    self._rejected(link, delivery, state, out)
        else:
            key = kind if isinstance(kind, str) else "unknown"
            link.states[key] = link.states.get(key, 0) + 1
        if link.coordinator and delivery.action is not None:
            failure = self.txns.outcome(delivery, state, frame.number, frame.channel)
            if failure:
                out.append(finding("amqp10.transaction-failed", f"{failure} on {link.label()}"))

    def _rejected(self, link: Link, delivery: Delivery, state: dict, out: list) -> None:
        error = error_of(state.get("error"))
        if error is None:
            return
        key = (str(error["condition"]), str(error.get("description") or ""))
        if key in link.rejections:
            link.rejections[key] += 1
        elif len(link.rejections) < NOTED_REJECTIONS:
            link.rejections[key] = 1
            out.append(
                finding(
                    "amqp10.rejected",
                    f"delivery-id {delivery.id} on {link.label()} rejected: {error_text(error)}",
                )
            )

    def _settle(self, session: Session, delivery: Delivery, ts: float) -> None:
        link = delivery.link
        self._forget(session, delivery)
        link.settled += 1
        if self.stats:
            link.latency.add(ts - delivery.ts)
            link.latency_series.add(ts, ts - delivery.ts)

    def _forget(self, session: Session, delivery: Delivery, left: bool = False) -> bool:
        """Drop a delivery from the unsettled maps (settled, aborted, or replaced); whether its
        link's unsettled count went down (then set in its series now). A settling disposition
        does this inline (`_disposition`)."""
        half = session.half[delivery.sender]
        if half.deliveries.get(delivery.id) is delivery:
            del half.deliveries[delivery.id]
        link = delivery.link
        key = delivery.tag if delivery.tag is not None else f"#{delivery.id}"
        lowered = False
        if link.unsettled.get(key) is delivery:
            del link.unsettled[key]
            lowered = True
            if self.stats:
                link.unsettled_series.set(self.ts, len(link.unsettled))
        if left:
            link.left += 1
        return lowered

    # --- stalls, violations, notes ------------------------------------------------------------

    def _stall_credit(
        self, out: list[Finding], link: Link, seconds: float | None, open_at_end: bool = False
    ) -> None:
        if seconds is None or seconds < STALL_SECONDS:
            return
        out.append(
            finding(
                "amqp10.credit-starvation",
                f"the sender on {link.label()} had messages (available "
                f"{link.credit.available}) but no credit for {seconds:.3f} s"
                + (f" (still waiting when the {self.source} ended)" if open_at_end else ""),
            )
        )

    def _stall_window(
        self,
        out: list[Finding],
        session: Session,
        half: Any,
        seconds: float | None,
        open_at_end: bool = False,
    ) -> None:
        if seconds is None or seconds < STALL_SECONDS:
            return
        side = CLIENT if half is session.half[CLIENT] else SERVER
        out.append(
            finding(
                "amqp10.window-exhausted",
                f"{side}'s session on channel {half.channel} had no incoming window at its peer "
                f"for {seconds:.3f} s" + (" (still closed at the end)" if open_at_end else ""),
            )
        )

    def _violation(
        self, out: list[Finding], code: str, key: Any, side: str, frame: Frame, text: str = ""
    ) -> None:
        """A frame its sender's state does not allow; reported once per `key` (a run)."""
        if key in self.noted:
            return
        if len(self.noted) < 10_000:
            self.noted.add(key)
        if not text:
            state = self.sides[side].state
            text = (
                f"{frame.name} from {side} after its close"
                if state == CLOSED
                else f"{frame.name} from {side} in connection state {state}"
            )
        out.append(finding(code, text))

    def _note(self, text: str) -> None:
        if text in self.notes:
            return
        if len(self.notes) < NOTES:
            self.notes.append(text)
        else:
            self.more_notes += 1

    # --- summary ------------------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        """The connection as `amqpscope summary --json` shows it."""
        close = None
        for side in (SERVER, CLIENT):
            c = self.sides[side].closed
            if c is not None and c["error"] and close is None:
                close = {"by": side, **c["error"]}
        return {
            "id": self.conn,
            "version": self.version,
            "client": self.client,
            "server": self.server,
            "state": self._state(),
            "mid-stream": self.mid_stream,
            "headers": {side: list(h) for side, h in self.headers.items()},
            "sasl": self.sasl if any(v is not None for v in self.sasl.values()) else None,
            "open": self._open_summary(),
            "close": close,
            "transport": transport_summary(self.transport_end),
            "dropped": self.dropped,
            "heartbeats": {
                side: {
                    "sent": self.sides[side].heartbeats,
                    "max-gap-ms": round(self.sides[side].max_gap * 1000.0, 3),
                    "late": self.sides[side].late,
                }
                for side in (CLIENT, SERVER)
            },
            "sessions": [s.summary() for s in self.sessions],
            "dropped-links": self.dropped_links,
            "transactions": self.txns.summary(),
            "unknown": list(self.notes) + ([f"{self.more_notes} more"] if self.more_notes else []),
        }

    def _state(self) -> str:
        c, s = self.client_side.closed, self.server_side.closed
        if c is not None and s is not None:
            return "closed"
        if c is not None or s is not None:
            return "closing"
        opened_c, opened_s = self._opens()
        if (opened_c is not None and opened_s is not None) or self.mid_stream:
            return "open"
        if self.sasl["outcome"] not in (None, "ok"):
            return "sasl-failed"
        if opened_c is not None or opened_s is not None:
            return "opening"
        return "not-opened"

    def _open_summary(self) -> dict[str, Any] | None:
        c, s = self._opens()
        if c is None and s is None:
            return None
        holds: dict[str, Any] = {
            "max-frame-size": {
                "c2s": s.get("max-frame-size") if s else None,
                "s2c": c.get("max-frame-size") if c else None,
            },
            "channel-max": min(
                (o.get("channel-max", 65535) for o in (c, s) if o is not None), default=None
            ),
            "idle-time-out": {  # each direction must carry a frame at least this often (ms)
                "c2s": (s.get("idle-time-out") or None) if s else None,
                "s2c": (c.get("idle-time-out") or None) if c else None,
            },
        }
        return {CLIENT: c, SERVER: s, "holds": holds}


def _attacher(link: Link) -> str:
    return CLIENT if link.attach[CLIENT] is not None else SERVER
