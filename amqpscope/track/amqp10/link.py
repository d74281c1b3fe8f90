"""Links: attach pairing, and credit exactly as the spec does the arithmetic (section 2.6.7).

The observer sits between the two ends, so it keeps the *sender's* view, which is the one that
decides whether a transfer is allowed:

    link-credit(snd) = delivery-count(rcv) + link-credit(rcv) - delivery-count(snd)

`Credit` keeps `limit` = delivery-count(rcv) + link-credit(rcv) (the delivery-count the sender may
reach) and `count` = delivery-count(snd); credit is their serial difference. A receiver's flow
moves `limit` (when it has no delivery-count, the receiver had not yet seen the sender's attach
and the spec uses the sender's initial-delivery-count); each delivery's first transfer moves
`count` by one; a sender's flow states both (drain: the sender advances its delivery-count to use
up the credit it has no messages for). Credit taken back while transfers are in flight comes out
right with no special case: the receiver's delivery-count in its flow lags the sender's.

`LinkLevel` is the tracker's link level: attach, detach, flow (a link's credit and its session's
window), and a link's end with what it left unsettled.
"""

from __future__ import annotations

from itertools import islice
from typing import TYPE_CHECKING, Any, Final

from amqpscope.codec.frames import Frame
from amqpscope.findings import Finding, finding
from amqpscope.track.amqp10.delivery import Delivery, DeliveryLevel
from amqpscope.track.amqp10.errors import error_of, error_text
from amqpscope.track.amqp10.rules import (
    CLIENT,
    FOLLOW_SECONDS,
    OTHER,
    OUTCOMES,
    RESERVOIR,
    SERVER,
    SETTLED_REQUIRED,
    STALL_SECONDS,
    serial_add,
    serial_diff,
)
from amqpscope.track.stats import Durations, Episodes, Latency, Level, Rate

if TYPE_CHECKING:  # session.py builds on this module
    from amqpscope.track.amqp10.session import Session


class Wait:
    """A wait for credit inferred on a link whose sender never states `available`: its last
    credit used by a transfer (`dry_frame` at `start`), no grant for `seconds`, then a grant
    (`grant_frame`, `granted` credits) that `followed` transfers answered within `within`
    seconds (the first of them `first_frame`): the sender had them ready."""

    __slots__ = (
        "dry_frame",
        "first_frame",
        "followed",
        "grant_frame",
        "granted",
        "granted_at",
        "seconds",
        "start",
        "within",
    )

    def __init__(
        self, start: float, dry_frame: int, granted_at: float, grant_frame: int, granted: int
    ) -> None:
        self.start = start
        self.dry_frame = dry_frame
        self.granted_at = granted_at
        self.grant_frame = grant_frame
        self.granted = granted
        self.seconds = granted_at - start
        self.followed = 0
        self.within = 0.0
        self.first_frame = 0


class Credit:
    """One link's flow control, from the flows and transfers on the wire. Unknown is None."""

    __slots__ = (
        "attached_at",
        "attached_frame",
        "available",
        "burst",
        "count",
        "drained",
        "draining",
        "drains",
        "drains_completed",
        "dry",
        "echo_answered",
        "echo_asked",
        "echo_pending",
        "high",
        "inferred",
        "initial",
        "issued",
        "last_receiver",
        "limit",
        "pending",
        "starvation",
        "stated",
        "ungranted",
        "without_credit",
    )

    def __init__(self) -> None:
        self.initial: int | None = None  # the sender's initial-delivery-count
        self.count: int | None = None  # delivery-count(snd)
        self.limit: int | None = (
            None  # delivery-count(rcv) + link-credit(rcv), as the sender sees it
        )
        self.pending: int | None = None  # link-credit granted before the sender's count was known
        self.high: int | None = None  # the highest limit the receiver ever granted
        self.issued = 0  # credit granted in total: how far the receiver moved the limit forward
        self.available: int | None = None  # the sender's last `available`, less what it sent since
        self.draining = False  # a drain was asked for and has not completed
        self.drains = 0
        self.drains_completed = 0
        self.drained = 0  # credit the sender gave back by advancing its delivery-count on drain
        self.echo_asked = 0
        self.echo_answered = 0
        self.echo_pending: str | None = None  # "sender" or "receiver": whose echo awaits an answer
        self.without_credit = 0  # deliveries sent with no credit
        self.starvation = Episodes()
        self.last_receiver: tuple[int | None, int] | None = None  # (delivery-count, link-credit)
        #: the sender stated `available` in a flow: starvation is known, not inferred
        self.stated = False
        #: (time, frame) of the transfer that used the last credit, while `available` is unknown
        self.dry: tuple[float, int] | None = None
        self.burst: Wait | None = None  # a wait ended by a grant, its transfers still coming
        self.inferred: list[Wait] = []  # waits inferred from transfers that followed a grant
        #: when the receiving end attached (its frame), and the wait for a first grant that
        #: lasted until the link ended: (start, seconds, the attach's frame)
        self.attached_at: float | None = None
        self.attached_frame = 0
        self.ungranted: tuple[float, float, int] | None = None

    @property
    def credit(self) -> int | None:
        """The sender's view of link-credit, or None while unknown."""
        if self.count is None or self.limit is None:
            return None
        return serial_diff(self.limit, self.count)

    # --- events -------------------------------------------------------------------------------

    def sender_attached(self, initial: int | None) -> None:
        """The sender's attach: its initial-delivery-count starts its delivery-count."""
        if initial is None:
            return
        self.initial = initial
        if self.count is None:
            self.count = initial
        if self.pending is not None:
            pending, self.pending = self.pending, None
            self._grant(initial, serial_add(initial, pending))

    def receiver_flow(
        self,
        delivery_count: int | None,
        link_credit: int | None,
        drain: bool,
        echo: bool,
        ts: float,
        number: int = 0,
    ) -> float | None:
        """A flow from the receiving end; returns a finished starvation episode's length."""
        self._echo("receiver", echo)
        if drain and not self.draining:
            self.drains += 1
        self.draining = drain
        if link_credit is None:
            return None
        self.last_receiver = (delivery_count, link_credit)
        base = delivery_count if delivery_count is not None else self.initial
        if base is None:  # no delivery-count and no attach from the sender yet
            self.pending = link_credit
            return None
        before = self.credit
        self._grant(base, serial_add(base, link_credit))
        if self.dry is not None:
            self._granted_after_dry(before, ts, number)
        return self._renewed(before, ts)

    def sender_flow(
        self,
        delivery_count: int | None,
        link_credit: int | None,
        available: int | None,
        drain: bool,
        echo: bool,
        ts: float,
        frame: int | None = None,
    ) -> float | None:
        """A flow from the sending end: its own delivery-count and link-credit, `available`.
        Returns a finished starvation episode's length. `frame`: the flow's number."""
        self._echo("sender", echo)
        before = self.credit
        if delivery_count is not None:
            if self.count is not None and self.draining:
                advanced = serial_diff(delivery_count, self.count)
                if advanced > 0:
                    self.drained += advanced
            self.count = delivery_count
            if link_credit is not None:
                self.limit = serial_add(delivery_count, link_credit)
        if available is not None:
            self.available = available
            if not self.stated:
                self.stated = True
                self.dry = None
                self.burst = None
        credit = self.credit
        if self.draining and drain and credit is not None and credit <= 0:
            self.drains_completed += 1
            self.draining = False
        ended = self._renewed(before, ts)
        if credit is not None and credit <= 0:
            if self.available:
                self.starvation.start(ts, frame, self.available)
            elif self.available == 0:
                ended = self.starvation.stop(ts)  # nothing left to send: the wait is over
        return ended

    def transfer(self, ts: float, frame: int | None = None) -> int | None:
        """A delivery's first transfer (`frame`, its number); returns the credit it was sent
        with (None: unknown)."""
        credit = self.credit
        if not self.stated and credit is not None:
            self._infer(ts, frame if frame is not None else 0, credit)
        if self.count is not None:  # unknown mid-stream until the sender's first flow
            self.count = serial_add(self.count, 1)
        if self.available:
            self.available -= 1
        if credit is not None:
            if credit <= 0:
                self.without_credit += 1
            elif credit == 1:  # this transfer used the last of it
                if self.draining:
                    self.drains_completed += 1
                    self.draining = False
                if self.available:
                    self.starvation.start(ts, frame, self.available)
        return credit

    def forget(self) -> None:
        """Bytes were lost: what the sender's count and limit are is no longer known."""
        self.count = None
        self.limit = None
        self.pending = None
        self.starvation.cancel()
        self.dry = None
        self.burst = None

    def receiver_attached(self, ts: float, number: int) -> None:
        """The receiving end's attach: from here it may grant credit."""
        if self.attached_at is None:
            self.attached_at = ts
            self.attached_frame = number

    def ended(self, ts: float) -> None:
        """The link ended at `ts`: a receiver that never granted credit since it attached, for
        STALL_SECONDS or more, is noted (`ungranted`); a burst still coming is complete."""
        self._close_burst()
        self.dry = None
        start = self.attached_at
        if start is None or self.issued or self.pending is not None or self.ungranted:
            return
        if ts - start >= STALL_SECONDS:
            self.ungranted = (start, ts - start, self.attached_frame)

    def waits(self) -> list[Wait]:
        """The waits inferred so far, with a burst still coming."""
        burst = self.burst
        if burst is not None and burst.followed:
            return [*self.inferred, burst]
        return list(self.inferred)

    # --- internals ----------------------------------------------------------------------------

    def _grant(self, base: int, limit: int) -> None:
        self.limit = limit
        if self.high is None:
            self.high = base
        gained = serial_diff(limit, self.high)
        if gained > 0:
            self.issued += gained
            self.high = limit

    def _infer(self, ts: float, number: int, credit: int) -> None:
        """A transfer while `available` was never stated: counted in the burst that answers a
        grant when it comes within FOLLOW_SECONDS of it; one that uses the last credit starts a
        dry spell (the sender may or may not have more: the next grant's burst says)."""
        burst = self.burst
        if burst is not None:
            if ts - burst.granted_at <= FOLLOW_SECONDS:
                if not burst.followed:
                    burst.first_frame = number
                burst.followed += 1
                burst.within = ts - burst.granted_at
            else:
                self._close_burst()
        if credit == 1:
            self._close_burst()
            self.dry = (ts, number)

    def _granted_after_dry(self, before: int | None, ts: float, number: int) -> None:
        """A grant after a dry spell: one STALL_SECONDS or longer starts a burst to watch."""
        credit = self.credit
        dry = self.dry
        if dry is None or credit is None or credit <= 0 or (before is not None and before > 0):
            return
        self.dry = None
        if ts - dry[0] >= STALL_SECONDS:
            self.burst = Wait(dry[0], dry[1], ts, number, credit)

    def _close_burst(self) -> None:
        burst = self.burst
        if burst is not None:
            self.burst = None
            if burst.followed:
                self.inferred.append(burst)

    def _renewed(self, before: int | None, ts: float) -> float | None:
        credit = self.credit
        if credit is not None and credit > 0 and (before is None or before <= 0):
            return self.starvation.stop(ts)
        return None

    def _echo(self, role: str, echo: bool) -> None:
        if self.echo_pending is not None and self.echo_pending != role:
            self.echo_answered += 1
            self.echo_pending = None
        if echo:
            self.echo_asked += 1
            self.echo_pending = role

    def summary(self) -> dict[str, Any]:
        return {
            "issued": self.issued,
            "link-credit": self.credit,
            "delivery-count": self.count,
            "available": self.available,
            "drain": {
                "requested": self.drains,
                "completed": self.drains_completed,
                "drained": self.drained,
                "draining": self.draining,
            },
            "echo": {"requested": self.echo_asked, "answered": self.echo_answered},
            "without-credit": self.without_credit,
            "starvation": self.starvation.summary(),
        }


#: deliveries left unsettled at a link's end that are listed with their frames and times
LEFT_LISTED: Final = 32
#: why a link ended, as findings say it -> `Link.ended`, as the summary says it
ENDED_AS: Final = {
    "it detached": "detached",
    "the session ended": "session ended",
    "the connection closed": "connection closed",
    "the TCP connection ended": "transport closed",
    "the capture ended": "open at end",
    "the log ended": "open at end",
}


class Link:
    """One link: both ends' attaches paired by name, its credit, its deliveries' tallies."""

    __slots__ = (
        "aborted",
        "attach",
        "backlogged",
        "client_settled",
        "coordinator",
        "credit",
        "credit_series",
        "current",
        "deliveries",
        "delivery_series",
        "detach",
        "ended",
        "handle",
        "inferred",
        "latency",
        "latency_series",
        "left",
        "left_unsettled",
        "name",
        "no_credit_run",
        "outcomes",
        "presettled",
        "rejections",
        "resume_unsettled",
        "resumed",
        "sender",
        "server_settled",
        "settled",
        "states",
        "unsettled",
        "unsettled_series",
    )

    def __init__(self, name: str | None, sender: str | None, inferred: bool = False) -> None:
        self.name = name
        self.sender = sender  # the side whose end is the sender (None: not known yet)
        self.handle: dict[str, int | None] = {CLIENT: None, SERVER: None}
        self.attach: dict[str, dict[str, Any] | None] = {CLIENT: None, SERVER: None}
        #: the `settled` flag each side's attach (snd-settle-mode) requires of its first
        #: transfers (None: either, or no attach)
        self.client_settled: bool | None = None
        self.server_settled: bool | None = None
        self.detach: dict[str, dict[str, Any] | None] = {CLIENT: None, SERVER: None}
        self.credit = Credit()
        self.deliveries = 0
        self.presettled = 0
        self.settled = 0
        self.aborted = 0
        self.resumed = 0
        self.resume_unsettled = 0  # entries in an attach's unsettled map
        self.left = 0  # deliveries still unsettled when the link ended
        #: (delivery-id, first transfer's time, its frame) of the first LEFT_LISTED of them
        self.left_unsettled: list[tuple[int, float, int]] = []
        self.unsettled: dict[str, Delivery] = {}  # delivery-tag -> unsettled delivery
        self.outcomes = dict.fromkeys(OUTCOMES, 0)
        self.states: dict[str, int] = {}  # non-terminal and transactional states seen
        self.latency = Latency(RESERVOIR)
        self.current: Delivery | None = None  # a delivery whose transfers are still coming
        self.inferred = inferred  # seen only mid-stream: no attach
        self.rejections: dict[tuple[str, str], int] = {}
        self.backlogged = False
        self.ended: str | None = None  # why it ended: detached, session ended, ...
        self.coordinator = False
        self.no_credit_run = False  # in a run of transfers without credit (reported once)
        # over time, for the summary's sparklines: the sender's view of link-credit, the
        # deliveries unsettled, and the deliveries begun per bucket
        self.credit_series = Level()
        self.unsettled_series = Level()
        self.delivery_series = Rate()
        self.latency_series = Durations()  # settle latency, by when the delivery settled

    def role_of(self, side: str) -> str | None:
        if self.sender is None:
            return None
        return "sender" if side == self.sender else "receiver"

    def label(self) -> str:
        name = repr(self.name) if self.name is not None else "(name unknown)"
        handles = "/".join(
            str(self.handle[s]) for s in (CLIENT, SERVER) if self.handle[s] is not None
        )
        return f"link {name}" + (f" (handle {handles})" if handles else "")

    def summary(self) -> dict[str, Any]:
        sender_attach = self.attach[self.sender] if self.sender else None
        receiver_attach = self.attach[_other(self.sender)] if self.sender else None
        any_attach = self.attach[CLIENT] or self.attach[SERVER] or {}
        sa = sender_attach or any_attach
        ra = receiver_attach or any_attach
        source = _terminus(sa.get("source")) or _terminus(ra.get("source"))
        target = _terminus(ra.get("target")) or _terminus(sa.get("target"))
        error = None
        for side in (CLIENT, SERVER):
            d = self.detach[side]
            if d is not None and d.get("error") and error is None:
                error = {"by": side, **d["error"]}
        return {
            "name": self.name,
            "handle": self.handle[CLIENT],
            "remote-handle": self.handle[SERVER],
            "role": self.role_of(CLIENT),
            "source": source,
            "target": target,
            "snd-settle-mode": sa.get("snd-settle-mode"),
            "rcv-settle-mode": ra.get("rcv-settle-mode"),
            "initial-delivery-count": self.credit.initial,
            "max-message-size": {
                side: (self.attach[side] or {}).get("max-message-size") for side in (CLIENT, SERVER)
            },
            "state": self._state(),
            "inferred": self.inferred,
            "deliveries": self.deliveries,
            "presettled": self.presettled,
            "settled": self.settled,
            "unsettled": self.left + len(self.unsettled),
            "aborted": self.aborted,
            "resumed": self.resumed,
            "resume-unsettled": self.resume_unsettled,
            "outcomes": dict(self.outcomes),
            "states": dict(self.states),
            "rejections": [
                {"condition": c, "description": d, "count": n}
                for (c, d), n in self.rejections.items()
            ],
            "credit": self.credit.summary(),
            "latency": self.latency.to_json(),
            "error": error,
            "series": {
                "link-credit": self.credit_series.to_json(),
                "unsettled": self.unsettled_series.to_json(),
                "deliveries": self.delivery_series.to_json(),
                "settle-latency": self.latency_series.to_json(),
            },
        }

    def _state(self) -> str:
        attached = [s for s in (CLIENT, SERVER) if self.attach[s] is not None]
        detached = [s for s in (CLIENT, SERVER) if self.detach[s] is not None]
        if self.ended and self.ended != "detached":
            return self.ended
        if len(detached) == 2 or (detached and len(attached) < 2):
            return "detached"
        if detached:
            return "detaching"
        if len(attached) == 2 or self.inferred:
            return "attached"
        return "attaching"


def _other(side: str | None) -> str:
    return SERVER if side == CLIENT else CLIENT


def _terminus(value: Any) -> str | dict[str, Any] | None:
    """A source or target as the summary shows it: its address, "coordinator", or for a
    dynamic node without an address yet `{"dynamic": true}`."""
    if not isinstance(value, dict):
        return None
    if value.get("type") == "coordinator":
        return "coordinator"
    address = value.get("address")
    if address is not None:
        return address if isinstance(address, str) else str(address)
    if value.get("dynamic"):
        return {"dynamic": True}
    return None


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
KEEP_LINKS: Final = (
    1000  # ended links kept per session for the summary (their tallies stay counted)
)


class LinkLevel(DeliveryLevel):
    """Links: attach pairing, detach, flow (credit and session windows), a link's end."""

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


def _attacher(link: Link) -> str:
    return CLIENT if link.attach[CLIENT] is not None else SERVER
