"""One AMQP 1.0 connection's state, fed its frames in capture order (sans-IO).

The tracker looks each frame up in the tables of `rules` (connection, session and link state per
side), then hands it to the level it concerns, each beside its data: `session.SessionLevel`
(begin, end, windows, delivery-ids), `link.LinkLevel` (attach, detach, flow, credit),
`delivery.DeliveryLevel` (transfers, dispositions, `Transactions`); this module keeps the
connection level (headers, SASL, open, close, heartbeats, limits) and the summary. Findings are
returned, never printed; the caller puts them on the frame. feed() is dict lookups and
arithmetic: no copies of frames, no per-frame lists that grow.
"""

from __future__ import annotations

from typing import Any, Final

from amqpscope.codec.amqp10.composites import TYPE_DAMAGE
from amqpscope.codec.frames import Frame
from amqpscope.codec.typed import typed_fields
from amqpscope.findings import Finding, finding, gap_lost
from amqpscope.track.amqp10.base import Side
from amqpscope.track.amqp10.errors import error_of, error_text
from amqpscope.track.amqp10.rules import (
    CLIENT,
    CONNECTION_MID_STREAM,
    CONNECTION_TRANSITIONS,
    CONNECTION_VIOLATION,
    DETACHED,
    OPENED,
    OTHER,
    SERVER,
    SESSION_TRANSITIONS,
    TRANSFER_ON_ATTACHED,
    TRANSFER_ON_MAPPED,
    UNKNOWN,
    connection_lost,
    connection_step,
)
from amqpscope.track.amqp10.session import SessionLevel
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
KNOWN: Final = frozenset(name for row in CONNECTION_TRANSITIONS.values() for name in row)
SESSION_LEVEL: Final = frozenset(name for row in SESSION_TRANSITIONS.values() for name in row)
#: whether the tables allow a transfer on a mapped session, on an attached link (they do)
_TRANSFER_MAPPED: Final = TRANSFER_ON_MAPPED
_TRANSFER_ATTACHED: Final = TRANSFER_ON_ATTACHED


class ConnectionTracker(SessionLevel):
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
        super().__init__(conn, client, server, version, stats, source)
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

    def feed(self, frame: Frame, out: list[Finding] | None = None) -> list[Finding]:
        """Apply one frame; return the findings it raises (the caller puts them on the frame),
        appended to `out` when given (a caller's list, reused: no list made per frame)."""
        if out is None:
            out = []
        direction = frame.direction
        if direction == "c2s":
            me = self.client_side
        elif direction == "s2c":
            me = self.server_side
        else:
            return out
        side = me.name
        name = frame.name
        if name not in KNOWN:
            return out
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
        nxt = connection_step(state, name)
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
        self.transport_ts = frame.ts
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
        self.client_side.state = self.server_side.state = CONNECTION_MID_STREAM
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
                me.state = connection_lost(me.state)  # its open may be in the lost bytes
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
        code = self.sasl["outcome"]
        if code is not None and code != "ok":  # ActiveMQ 5.17 sends its AMQP header after auth
            out.append(
                finding(
                    "amqp10.header-after-failed-sasl",
                    f"the {side} sent a protocol header ({protocol or 'unknown'}) after SASL"
                    f" outcome {code} (a failed outcome ends the connection)",
                )
            )

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

    # --- transfers: the usual one's fast path (the rest of a delivery is `DeliveryLevel`) -----

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
