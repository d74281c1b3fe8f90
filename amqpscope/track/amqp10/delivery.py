"""Deliveries: one record per delivery in flight, from its first transfer until it is settled.

A delivery lives in two maps while unsettled, both bounded by what the wire holds open: its
session half's `deliveries` (delivery-id -> delivery, for dispositions, which name ids) and its
link's `unsettled` (delivery-tag -> delivery, for tag reuse and for what is left at the end).
Settled deliveries are dropped at once; only tallies and a bounded latency sample remain.

`DeliveryLevel` is the tracker's delivery level: what transfers and dispositions do to them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from amqpscope.codec.frames import Frame
from amqpscope.findings import Finding, finding
from amqpscope.track.amqp10.base import TrackerBase
from amqpscope.track.amqp10.errors import error_of, error_text
from amqpscope.track.amqp10.rules import (
    BACKLOG,
    CLIENT,
    NOTED_REJECTIONS,
    OTHER,
    OUTCOMES,
    RANGE_WALK,
    ROLE_REQUIRED,
    serial_add,
    serial_diff,
)

if TYPE_CHECKING:  # link.py and session.py import this module
    from amqpscope.track.amqp10.link import Link
    from amqpscope.track.amqp10.session import Half, Session


class Delivery:
    __slots__ = ("action", "frame", "id", "link", "outcome", "sender", "state", "tag", "ts", "txn")

    def __init__(self, id: int, tag: str | None, link: Link, sender: str, ts: float, frame: int):
        self.id = id
        self.tag = tag
        self.link = link  # the Link it travels on
        self.sender = sender  # the side that sent it (owner of its delivery-id)
        self.ts = ts  # its first transfer's capture time
        self.frame = frame
        self.state: str | None = None  # the last delivery state either end reported
        self.outcome: str | None = None  # the first terminal outcome
        self.txn: str | None = None  # the transaction it was transferred in
        self.action: dict[str, Any] | None = None  # a coordinator's declare or discharge


_TRANSFER_ROLE: Final = ROLE_REQUIRED["transfer"]  # the role of a link's sending end
#: outcomes a settling disposition applies itself (`rejected` has a finding to make)
_PLAIN_OUTCOMES: Final = frozenset(kind for kind in OUTCOMES if kind != "rejected")


class DeliveryLevel(TrackerBase):
    """Deliveries: transfers (delivery-ids, tags, settle modes, credit used), dispositions
    (outcomes, settlement), and their transactions."""

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
                f"transfer from {side}"
                + ("" if frame.channel is None else f" on channel {frame.channel}")
                + f" with the session's remote-incoming-window at {window}",
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
            # a sender may reuse a tag once its delivery is settled (ActiveMQ does): no finding
            # when bytes lost since that delivery may have held its settlement, or when the
            # session was met only after lost bytes (its peer's half, which settles, unknown)
            lost = self.lost_at is not None and self.lost_at > old.frame
            if not (lost or session.inferred):
                out.append(
                    finding(
                        "amqp10.delivery-tag-reused",
                        f"delivery-tag {tag} reused on {link.label()} while delivery-id"
                        f" {old.id} (frame {old.frame}) is unsettled",
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
