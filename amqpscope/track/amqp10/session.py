"""Sessions: begin pairing, and the session windows exactly as the spec computes them (2.5.6).

Each side of a session has a sending half. For the half of side A (the transfers A sends):

    next-outgoing-id(A)        from A's begin, +1 per transfer frame A sends (A's flows restate it)
    remote-incoming-window(A)  = next-incoming-id(B) + incoming-window(B) - next-outgoing-id(A)

where B's next-incoming-id and incoming-window come from B's last flow (or B's begin, whose
implied next-incoming-id is A's initial next-outgoing-id; so is a flow's absent one). A transfer
sent when remote-incoming-window is not positive is beyond the window. Transfers in flight when B
sent its flow come out right: B's next-incoming-id lags A's next-outgoing-id by exactly them.

Delivery-ids are per half too: the half's `deliveries` maps the unsettled ones to their records.

`SessionLevel` is the tracker's session level: begin and end, and whether a side may use a
channel and a handle (the session and link tables of `rules`).
"""

from __future__ import annotations

from typing import Any, Final

from amqpscope.codec.frames import Frame
from amqpscope.findings import Finding, finding
from amqpscope.track.amqp10.base import Side
from amqpscope.track.amqp10.delivery import Delivery
from amqpscope.track.amqp10.errors import error_of, error_text
from amqpscope.track.amqp10.link import Link, LinkLevel
from amqpscope.track.amqp10.rules import (
    ATTACHED,
    CLIENT,
    DETACHED,
    LINK_TRANSITIONS,
    LINK_VIOLATION,
    MAPPED,
    OTHER,
    SERVER,
    SESSION_TRANSITIONS,
    SESSION_VIOLATION,
    UNMAPPED,
    serial_add,
    serial_diff,
)
from amqpscope.track.stats import Episodes


class Half:
    """What one side of a session sends: transfer-ids, its window statements, its deliveries."""

    __slots__ = (
        "begun",
        "channel",
        "deliveries",
        "ended",
        "error",
        "exhausted",
        "first_delivery",
        "handle_max",
        "handles",
        "incoming_window",
        "initial_outgoing",
        "next_delivery",
        "next_outgoing",
        "outgoing_window",
        "peer_iw",
        "peer_nii",
        "reopened",
        "transfers",
    )

    def __init__(self) -> None:
        self.channel: int | None = None
        self.begun = False
        self.initial_outgoing: int | None = None
        self.next_outgoing: int | None = None  # transfer-id of this side's next transfer
        self.outgoing_window: int | None = None  # as this side last stated it
        self.incoming_window: int | None = None  # as this side last stated it (for the peer)
        self.peer_nii: int | None = None  # the peer's next-incoming-id (None: our initial id)
        self.peer_iw: int | None = None  # the peer's incoming-window
        self.transfers = 0
        self.exhausted = Episodes()
        #: index in `exhausted.periods` -> the peer's begin or flow that re-opened the window
        self.reopened: dict[int, int] = {}
        self.first_delivery: int | None = None
        self.next_delivery: int | None = None
        self.deliveries: dict[int, Delivery] = {}  # delivery-id -> unsettled delivery
        self.handle_max: int | None = None
        self.handles: dict[int, Link] = {}  # this side's handle -> link
        self.ended = False
        self.error: dict[str, Any] | None = None

    def window(self) -> int | None:
        """remote-incoming-window: how many more transfers the peer allows (None: unknown)."""
        if self.peer_iw is None or self.next_outgoing is None:
            return None
        nii = self.peer_nii if self.peer_nii is not None else self.initial_outgoing
        if nii is None:
            return None
        return self.peer_iw - serial_diff(self.next_outgoing, nii)

    def transferred(self, ts: float, frame: int | None = None) -> int | None:
        """One transfer frame sent (frame number `frame`); returns the window it was sent
        into (None: unknown)."""
        window = self.window()
        self.transfers += 1
        if self.next_outgoing is not None:
            self.next_outgoing = serial_add(self.next_outgoing, 1)
        if window is not None and window == 1:
            self.exhausted.start(ts, frame)  # the transfer that used the last of the window
        return window

    def peer_stated(
        self,
        next_incoming_id: int | None,
        incoming_window: int,
        ts: float,
        frame: int | None = None,
    ) -> float | None:
        """The peer's begin or flow (frame number `frame`); returns a finished exhaustion
        episode's length. A listed episode keeps the frame that ended it, for the diagnosis."""
        self.peer_nii = next_incoming_id
        self.peer_iw = incoming_window
        window = self.window()
        if window is not None and window > 0:
            listed = len(self.exhausted.periods)
            length = self.exhausted.stop(ts)
            if frame is not None and len(self.exhausted.periods) > listed:
                self.reopened[listed] = frame
            return length
        return None

    def ever_sent(self, delivery_id: int, lenient: bool) -> bool:
        """Could `delivery_id` name a delivery this side has transferred?"""
        if self.next_delivery is None or self.first_delivery is None:
            return lenient
        if serial_diff(delivery_id, self.next_delivery) >= 0:
            return False
        return lenient or serial_diff(delivery_id, self.first_delivery) >= 0

    def summary(self, peer: Half) -> dict[str, Any]:
        return {
            "next-outgoing-id": self.next_outgoing,
            "outgoing-window": self.outgoing_window,
            "incoming-window": peer.incoming_window,
            "remote-incoming-window": self.window(),
            "transfers": self.transfers,
            "next-delivery-id": self.next_delivery,
            "exhausted": self.exhausted.summary(),
        }


class Session:
    """Both sides' begins paired by channel and remote-channel; the links attached on it."""

    __slots__ = (
        "begun_by",
        "by_name",
        "client_half",
        "ended",
        "half",
        "inferred",
        "links",
        "server_half",
    )

    def __init__(self, begun_by: str | None, inferred: bool = False) -> None:
        #: each side's half, also as attributes (a field read, not a dict lookup, per transfer)
        self.client_half = Half()
        self.server_half = Half()
        self.half = {CLIENT: self.client_half, SERVER: self.server_half}
        self.begun_by = begun_by
        self.links: list[Link] = []
        self.by_name: dict[tuple[str | None, str], Link] = {}  # (name, sender side) -> open link
        self.inferred = inferred
        self.ended: str | None = None  # why it ended, when both ends are gone

    def begin(self, side: str, fields: dict[str, Any], ts: float, frame: int | None = None) -> None:
        half = self.half[side]
        half.begun = True
        nxt = fields.get("next-outgoing-id")
        half.initial_outgoing = half.next_outgoing = nxt
        half.incoming_window = fields.get("incoming-window")
        half.outgoing_window = fields.get("outgoing-window")
        half.handle_max = fields.get("handle-max")
        if half.incoming_window is not None:  # implied next-incoming-id: the peer's initial id
            self.half[OTHER[side]].peer_stated(None, half.incoming_window, ts, frame)

    def flow(
        self, side: str, fields: dict[str, Any], ts: float, frame: int | None = None
    ) -> float | None:
        """The session part of a flow from `side`: returns an exhaustion episode that ended."""
        half = self.half[side]
        nxt = fields.get("next-outgoing-id")
        if nxt is not None:
            half.next_outgoing = nxt  # the side's own counter: exact, even mid-stream
            if half.initial_outgoing is None:
                half.initial_outgoing = nxt
        if fields.get("outgoing-window") is not None:
            half.outgoing_window = fields["outgoing-window"]
        iw = fields.get("incoming-window")
        if iw is None:
            return None
        half.incoming_window = iw
        return self.half[OTHER[side]].peer_stated(fields.get("next-incoming-id"), iw, ts, frame)

    def end(self, side: str, fields: dict[str, Any]) -> dict[str, Any] | None:
        half = self.half[side]
        half.ended = True
        half.error = error_of(fields.get("error"))
        return half.error

    def summary(self) -> dict[str, Any]:
        c, s = self.half[CLIENT], self.half[SERVER]
        error = None
        for side in (CLIENT, SERVER):
            side_error = self.half[side].error
            if side_error and error is None:
                error = {"by": side, **side_error}
        state = "ended" if c.ended and s.ended else "ending" if c.ended or s.ended else "mapped"
        if self.ended and state != "ended":
            state = self.ended
        return {
            "channel": c.channel,
            "remote-channel": s.channel,
            "begun-by": self.begun_by,
            "state": state,
            "inferred": self.inferred,
            "handle-max": {CLIENT: c.handle_max, SERVER: s.handle_max},
            "windows": {"c2s": c.summary(s), "s2c": s.summary(c)},
            "error": error,
            "links": [link.summary() for link in self.links],
        }


LINK_LEVEL: Final = frozenset(name for row in LINK_TRANSITIONS.values() for name in row)


class SessionLevel(LinkLevel):
    """Sessions: which channel a frame may use (the session and link tables of `rules`), begin
    pairing, end."""

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
        if channel is None:  # a log that shows no channel: its one session, if one only
            return self.unnamed if self.unnamed_sessions == 1 else None
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
            self._begin_unnamed(side, frame, out)
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

    def _begin_unnamed(self, side: str, frame: Frame, out: list[Finding]) -> None:
        """A begin that shows no channel (uamqp's and pyamqp's logs print none). While the
        connection has one session, every frame without a channel is that session's: nothing
        else it could be on. The peer's begin answers it (it names a remote-channel, or the
        session is begun by one side only); any other begin is another session, and from then
        on which session a channel-less frame is on is not known: said once
        (`amqp10.session-unknown`), and no such frame is placed on either, nothing guessed."""
        peer = OTHER[side]
        session = self.unnamed
        if (
            session is not None
            and self.unnamed_sessions == 1
            and session.half[peer].begun
            and not session.half[side].begun
        ):
            session.begin(side, frame.fields, frame.ts, frame.number)
            return
        self.unnamed_sessions += 1
        if self.unnamed_sessions == 2:
            out.append(
                finding(
                    "amqp10.session-unknown",
                    f"{side} began another session, and the {self.source} shows no channel:"
                    " which session a frame is on is not known from here on, so its links and"
                    " deliveries are not followed",
                )
            )
            return
        if self.unnamed_sessions > 2:
            return
        remote = frame.fields.get("remote-channel")
        session = Session(side if remote is None else peer, inferred=remote is not None)
        self.sessions.append(session)
        self.unnamed = session
        session.begin(side, frame.fields, frame.ts, frame.number)

    def _end(self, side: str, frame: Frame, out: list[Finding]) -> None:
        session = self._session(side, frame, out)
        if session is None:
            return
        me = self.sides[side]
        channel = frame.channel
        if channel is not None:
            del me.channels[channel]
            if me.pending.get(channel) is session:
                del me.pending[channel]
        error = session.end(side, frame.fields)
        if error:
            where = "" if channel is None else f" on channel {channel}"
            out.append(
                finding(
                    "amqp10.error",
                    f"{side} ended the session{where}: {error_text(error)}",
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
