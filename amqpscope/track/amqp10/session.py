"""Sessions: begin pairing, and the session windows exactly as the spec computes them (2.5.6).

Each side of a session has a sending half. For the half of side A (the transfers A sends):

    next-outgoing-id(A)        from A's begin, +1 per transfer frame A sends (A's flows restate it)
    remote-incoming-window(A)  = next-incoming-id(B) + incoming-window(B) - next-outgoing-id(A)

where B's next-incoming-id and incoming-window come from B's last flow (or B's begin, whose
implied next-incoming-id is A's initial next-outgoing-id; so is a flow's absent one). A transfer
sent when remote-incoming-window is not positive is beyond the window. Transfers in flight when B
sent its flow come out right: B's next-incoming-id lags A's next-outgoing-id by exactly them.

Delivery-ids are per half too: the half's `deliveries` maps the unsettled ones to their records.
"""

from __future__ import annotations

from typing import Any

from amqpscope.track.amqp10.delivery import Delivery, error_of
from amqpscope.track.amqp10.link import Link
from amqpscope.track.amqp10.rules import CLIENT, OTHER, SERVER, serial_add, serial_diff
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
