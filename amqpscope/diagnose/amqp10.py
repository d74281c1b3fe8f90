"""Diagnoses of one AMQP 1.0 connection, from its tracker's state and the evidence kept.

Credit and window stalls come from the trackers' episode lists (start, length, open at the end);
errors on close, end and detach are explained by their condition from `causes`; violations say
which side sent the frame that broke a rule.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from amqpscope.diagnose import causes
from amqpscope.diagnose.amqp091 import LISTED, came_back, per_finding, redelivered
from amqpscope.diagnose.evidence import Evidence, Placed, Seen
from amqpscope.diagnose.lost import caveat, lost_line
from amqpscope.diagnose.model import Diagnosis, make
from amqpscope.diagnose.tokens import expired_token, requests
from amqpscope.findings import INFO
from amqpscope.track.amqp10.connection import ConnectionTracker
from amqpscope.track.amqp10.link import ENDED_AS, Link
from amqpscope.track.amqp10.rules import CLIENT, DIRECTION_OF, OTHER, SERVER, SIDE_OF
from amqpscope.track.amqp10.session import Session

#: the performative that carried an error -> the diagnosis code
ERROR_CODES: Final = {"close": "close.connection", "end": "close.session", "detach": "close.link"}
#: a performative carrying an error -> the peer's frames it most likely answers, the likeliest
#: first (an end with not-found answers the attach the broker could not satisfy)
ANSWERS: Final = {"detach": ("attach",), "end": ("attach", "begin"), "close": ("open",)}


#: a link end's role -> the terminus that names the node it is attached to: a receiver's
#: messages come from its source, a sender's go to its target (the other terminus is the
#: end's own, which amqp10 and uamqp fill in: 'localhost', a container-id)
NODE_TERMINUS: Final = {"receiver": "source", "sender": "target"}


def terminus_address(fields: dict[str, object], key: str) -> str | None:
    """The address of an attach's `key` terminus, or None."""
    value = fields.get(key)
    if isinstance(value, dict) and isinstance(value.get("address"), str):
        return str(value["address"])
    return None


def _address(link: Link) -> str | None:
    """The node `link` is attached to: the terminus that names it for the client's role,
    whichever end's attach says it (the broker's usually echoes it). A link whose roles are
    not known (no attach seen) tries the source, then the target."""
    role = link.role_of(CLIENT)
    keys = (NODE_TERMINUS[role],) if role is not None else ("source", "target")
    for key in keys:
        for side in (CLIENT, SERVER):
            attach = link.attach[side]
            address = terminus_address(attach, key) if attach else None
            if address is not None:
                return address
    return None


def _links(conn: ConnectionTracker) -> list[tuple[Session, Link]]:
    return [(session, link) for session in conn.sessions for link in session.links]


def _flows(ev: Evidence, conn: int, session: Session, link: Link) -> list[Seen]:
    """The last flows each end sent on the link, in frame order."""
    out: list[Seen] = []
    for side in (CLIENT, SERVER):
        channel = session.half[side].channel
        out += ev.link_flows(conn, DIRECTION_OF[side], channel, link.handle[side])
    return sorted(out, key=lambda seen: seen.number)


def _waiting(granted: Seen | None, began: int | None, waited: int | None) -> str:
    """What the sender had to send, in the frames' own words: the last flow that stated
    `available` (with the credit it stated) and the frame that used the last credit, with what
    was still waiting then (the flow's `available` is older: transfers spent credit since)."""
    said = []
    if granted is not None:
        fields = granted.fields
        credit = fields.get("link-credit")
        said.append(
            f"its flow in frame {granted.number} reported {fields['available']} available"
            + (f" with link-credit {credit}" if isinstance(credit, int) else "")
        )
    if began is not None:
        said.append(
            f"frame {began} used the last credit"
            + (f" with {waited} still to send" if waited else "")
        )
    return f" ({'; '.join(said)})" if said else ""


def _starving(link: Link) -> bool:
    """At the end of the input the link's sender had messages waiting and no credit."""
    credit = link.credit.credit
    return credit is not None and credit <= 0 and bool(link.credit.available)


def _starved_untimed(
    conn: ConnectionTracker,
    link: Link,
    flows: list[Seen],
    address: str | None,
    channel: int | None,
    sender: str,
) -> Diagnosis:
    """A link starved when an input without timestamps (Proton's trace) ended. Stalls are
    listed from one second on, which such an input cannot show; a stall still on at its end is
    worth saying, without a length: a dip to zero credit that the next flow refills is not."""
    granted = [s for s in flows if s.fields.get("available")][-1:]
    began = link.credit.starvation.opened[0]  # the transfer that used the last credit
    waiting = (
        f" (its flow in frame {granted[0].number} reported"
        f" {granted[0].fields['available']} available, {link.credit.available} still waiting"
        + (f"; frame {began} used the last credit" if began else "")
        + ")"
        if granted
        else ""
    )
    return make(
        "credit.starved",
        f"{link.label().capitalize()} had no credit when the log ended"
        + (f" ({address})" if address else ""),
        f"The {sender}'s end had messages to send{waiting} but its link-credit was 0, and it"
        " was still waiting when the link, connection or log ended. The log has no"
        " timestamps, so how long it waited is not known. The receiving"
        f" {OTHER.get(sender, 'peer')} stopped issuing credit: a consumer that stopped calling"
        " flow/receive, a full prefetch buffer, or a slow handler. Check the receiver's"
        " credit window and its processing.",
        conn=conn.conn,
        channel=channel,
        link=link.name,
        queue=address,
        evidence=sorted({s.number for s in granted + flows[-1:]} | ({began} if began else set())),
        ongoing=True,
    )


def credit(conn: ConnectionTracker, ev: Evidence) -> list[Diagnosis]:
    out = []
    for session, link in _links(conn):
        flows = _flows(ev, conn.conn, session, link)
        address = _address(link)
        channel = session.half[CLIENT].channel
        sender = link.sender or "?"
        starvation = link.credit.starvation
        for i, (start, seconds, at_end) in enumerate(starvation.periods):
            began, waited = starvation.starts[i] if i < len(starvation.starts) else (None, None)
            before = [s.number for s in flows if s.ts <= start][-1:]
            after = [s.number for s in flows if start < s.ts <= start + seconds + 1e-6][:1]
            ending = (
                "and it was still waiting when the link, connection or capture ended"
                if at_end
                else "until the receiver granted credit again"
            )
            granted = [s for s in flows if s.ts <= start and s.fields.get("available")][-1:]
            waiting = _waiting(granted[0] if granted else None, began, waited)
            out.append(
                make(
                    "credit.starved",
                    f"{link.label().capitalize()} starved of credit for {seconds:.1f} s"
                    + (f" ({address})" if address else ""),
                    f"The {sender}'s end had messages to send{waiting} but its link-credit"
                    f" was 0, {ending}. The"
                    f" receiving {OTHER.get(sender, 'peer')} stopped issuing credit: a consumer"
                    " that stopped calling flow/receive, a full prefetch buffer, or a slow"
                    " handler. Check the receiver's credit window and its processing.",
                    conn=conn.conn,
                    channel=channel,
                    link=link.name,
                    queue=address,
                    start=start,
                    duration=seconds,
                    evidence=sorted({*before, *([began] if began else []), *after}),
                    ongoing=at_end,
                )
            )
        if not ev.timed and not link.credit.starvation.periods and _starving(link):
            out.append(_starved_untimed(conn, link, flows, address, channel, sender))
        if link.credit.draining and link.ended is not None:
            out.append(
                make(
                    "credit.drain-incomplete",
                    f"A drain on {link.label()} never completed",
                    "The receiver asked the sender to drain (use or give back its credit), and"
                    " the sender never answered with a flow that did. A receiver waiting for"
                    " the drain to finish waits forever; check the sender's drain support.",
                    conn=conn.conn,
                    channel=channel,
                    link=link.name,
                    queue=address,
                    start=flows[-1].ts if flows else None,
                    evidence=[s.number for s in flows[-2:]],
                )
            )
    for session in conn.sessions:
        for side, half in session.half.items():
            for i, (start, seconds, at_end) in enumerate(half.exhausted.periods):
                starts = half.exhausted.starts
                began = starts[i][0] if i < len(starts) else None  # the last transfer it allowed
                reopened = half.reopened.get(i)  # the flow that opened it again
                out.append(
                    make(
                        "session.window-closed",
                        f"The {side}'s session{on_channel(half.channel)} had no window for"
                        f" {seconds:.1f} s",
                        f"The {OTHER[side]}'s incoming-window for the session was used up and"
                        + (
                            " never re-opened"
                            if at_end
                            else f" re-opened only after {seconds:.1f} s"
                        )
                        + f": the {side} could send no transfer on any of its links. Check"
                        f" the {OTHER[side]}'s session window (incoming-window in begin/flow).",
                        conn=conn.conn,
                        channel=session.half[CLIENT].channel,
                        start=start,
                        duration=seconds,
                        evidence=[f for f in (began, reopened) if f is not None],
                        ongoing=at_end,
                    )
                )
    return out


def _answered(placed: Placed) -> Seen | None:
    """The frame an error answers: the peer's attach/begin/open just before it, same channel."""
    for wanted in ANSWERS.get(placed.frame.name, ()):
        for seen in reversed(placed.before):
            if seen.name == wanted and seen.direction != placed.frame.direction:
                return seen
    return None


def _link_of(conn: ConnectionTracker, placed: Placed) -> Link | None:
    """The link a detach ended: its sender's channel and handle (a handle may be used again
    by a later link), and the same error in the link's own record of the detach."""
    if placed.frame.name != "detach":
        return None
    side = SIDE_OF.get(placed.frame.direction, CLIENT)
    fields = placed.frame.fields
    error = fields.get("error")
    condition = error.get("condition") if isinstance(error, dict) else None
    for session, link in _links(conn):
        detach = link.detach[side]
        theirs = detach.get("error") if detach is not None else None
        if (
            isinstance(theirs, dict)
            and theirs.get("condition") == condition
            and session.half[side].channel == placed.frame.channel
            and link.handle[side] == fields.get("handle")
        ):
            return link
    return None


def _after_peer_end(conn: ConnectionTracker, ev: Evidence, placed: Placed) -> Seen | None:
    """The peer's FIN that came before this error frame, when the TCP stream's first end was
    the other side's: the error answers a peer that is gone, not what it sent."""
    end = ev.ends.get(conn.conn)
    if end is None or end.name != "fin" or end.direction == placed.frame.direction:
        return None
    return end if end.number < placed.frame.number else None


def errors(conn: ConnectionTracker, ev: Evidence) -> list[Diagnosis]:
    out = []
    for placed in ev.found(conn.conn, "amqp10.error"):
        error = placed.frame.fields.get("error")
        condition = str(error.get("condition")) if isinstance(error, dict) else "?"
        description = error.get("description") if isinstance(error, dict) else None
        cause, check = causes.CONDITION_CAUSES.get(
            condition, ("an error condition the table does not explain", "the description")
        )
        side = SIDE_OF.get(placed.frame.direction, "?")
        gone = _after_peer_end(conn, ev, placed)
        if gone is not None:  # e.g. Proton's engine: framing-error "connection aborted"
            peer = SIDE_OF.get(gone.direction, "peer")
            cause = (
                f"the {peer} had ended its TCP stream (FIN, frame {gone.number}) before this"
                f" {placed.frame.name}: the {side} reacts to a {peer} that is gone (killed,"
                f" crashed or vanished with no close), not to anything the {peer} sent"
            )
            check = f"the {peer}'s process and why it ended with no close"
        link = _link_of(conn, placed)
        expired = expired_token(
            conn.conn, ev, placed, _address(link) if link else None, link.name if link else None
        )
        if expired is not None:
            out.append(expired)
            continue
        answered = _answered(placed)
        name = placed.frame.name
        what = {"close": "closed the connection", "end": "ended the session"}.get(
            name, "detached the link"
        )
        named = ""
        address = None
        if answered is not None and answered.name == "attach":
            role = answered.fields.get("role")
            keys = (NODE_TERMINUS[role],) if role in NODE_TERMINUS else ("source", "target")
            for key in keys:
                address = address or terminus_address(answered.fields, key)
            named = f" The attach it answers is frame {answered.number}" + (
                f" (address {address!r})." if address else "."
            )
        out.append(
            make(
                ERROR_CODES.get(name, "close.link"),
                f"The {side} {what}: {condition}",
                (f"{description}. " if description else "")
                + f"Likely cause: {cause}.{named} Check {check}.",
                conn=conn.conn,
                channel=placed.frame.channel,
                queue=address,
                start=placed.frame.ts,
                evidence=[
                    answered.number if answered else 0,
                    gone.number if gone else 0,
                    placed.frame.number,
                ],
            )
        )
    for placed in ev.found(conn.conn, "amqp10.sasl-failed"):
        init = [s.number for s in placed.before if s.name == "sasl-init"]
        out.append(
            make(
                "auth.refused",
                f"SASL authentication failed: {placed.frame.fields.get('code')}",
                f"{placed.finding.message}. The server refused the credentials (or the"
                " mechanism); check the user name, password and the broker's auth backends.",
                conn=conn.conn,
                start=placed.frame.ts,
                evidence=[*init[-1:], placed.frame.number],
            )
        )
    out.extend(
        per_finding(
            conn.conn,
            ev,
            "amqp10.rejected",
            "delivery.rejected",
            "A delivery was rejected on channel {channel}",
            "The receiver refused the message with an error; it is not redelivered. Check the"
            " message against the receiver's checks.",
        )
    )
    out.extend(
        per_finding(
            conn.conn,
            ev,
            "amqp10.transaction-failed",
            "transaction.failed",
            "A transaction declare or discharge failed on channel {channel}",
            "What the controller sent in the transaction did not take effect as one. Check that"
            " the peer supports transactions (has a coordinator) and the error it gave.",
        )
    )
    return out


def on_channel(channel: int | None) -> str:
    """ " on channel N", or nothing for a log that shows no channel (uamqp's, pyamqp's)."""
    return "" if channel is None else f" on channel {channel}"


#: why a link ended (`Link.ended`), as the unsettled finding says it
ENDED_WHEN: Final = {ended: why for why, ended in ENDED_AS.items()}


def left_at_end(conn: ConnectionTracker, ev: Evidence) -> list[Diagnosis]:
    """Each link that ended with deliveries unsettled: their transfers (the oldest first)
    and the frame that ended the link, the oldest's age as the duration. A link ended by the
    input's end (a log of a connection closed, a capture that stops before TCP does) has its
    finding on no frame: its last frame stands for the end."""
    out = []
    links = [(session, link) for session, link in _links(conn) if link.left_unsettled]
    told: set[int] = set()
    for placed in ev.found(conn.conn, "amqp10.unsettled-at-end"):
        found = next(((s, k) for s, k in links if k.label() in placed.finding.message), None)
        channel = placed.frame.channel  # None on a TCP end: then the link's session's
        if found is not None:
            told.add(id(found[1]))
            if channel is None:
                channel = found[0].half[CLIENT].channel
            if channel is None:
                channel = found[0].half[SERVER].channel
        end = placed.frame
        out.append(
            _left(
                conn,
                ev,
                found[1] if found else None,
                placed.finding.message,
                end.ts,
                end,
                channel,
            )
        )
    for session, link in links:
        if id(link) in told:
            continue
        count = link.left
        message = (
            f"{count} deliver{'y' if count == 1 else 'ies'} left unsettled on {link.label()}"
            f" when {ENDED_WHEN.get(link.ended or '', 'the capture ended')}"
        )
        last = _last_frame(ev, conn.conn)
        end_ts = last.ts if last is not None else conn.ts
        channel = session.half[CLIENT].channel
        if channel is None:
            channel = session.half[SERVER].channel
        out.append(_left(conn, ev, link, message, end_ts, last, channel))
    return out


def _last_frame(ev: Evidence, conn: int) -> Seen | None:
    """The last frame of `conn` either side sent."""
    sent = [ev.last_sent.get((conn, direction)) for direction in DIRECTION_OF.values()]
    return max((s for s in sent if s is not None), key=lambda seen: seen.number, default=None)


def _left(
    conn: ConnectionTracker,
    ev: Evidence,
    link: Link | None,
    message: str,
    end_ts: float,
    end: Seen | None,
    channel: int | None = None,
) -> Diagnosis:
    """The diagnosis of `link`'s deliveries left unsettled, `message` the tracker's words."""
    left = link.left_unsettled if link is not None else []
    if end is not None and channel is None:
        channel = end.channel
    oldest = max((end_ts - ts for _id, ts, _frame in left), default=0.0)
    ages = ", ".join(f"{end_ts - ts:.1f} s" for _id, ts, _frame in left[:LISTED])
    back, again = came_back(ev, conn.conn, [frame for _id, _ts, frame in left])
    # either end may settle: bytes lost of either, after the oldest, leave it unknown
    since = end_ts - oldest
    lost, holes = caveat(ev, conn.conn, "c2s", since)
    lost_s2c, holes_s2c = caveat(ev, conn.conn, "s2c", since)
    return make(
        "delivery.unsettled-at-end",
        f"Deliveries {'not seen settled' if holes or holes_s2c else 'left unsettled'}"
        f"{on_channel(channel)}" + (f" (oldest {oldest:.1f} s)" if left and ev.timed else ""),
        f"{message}."
        + (f" Their ages at the end: {ages}." if left and ev.timed else "")
        + back
        + lost
        + lost_s2c
        + " Unsettled deliveries of a link that ends are sent again on the next link"
        " (duplicates) unless resumed; check that the receiver settles every delivery"
        " before detaching.",
        conn=conn.conn,
        channel=channel,
        link=link.name if link is not None else None,
        queue=_address(link) if link is not None else None,
        start=end_ts - oldest,
        duration=oldest,
        evidence=[frame for _id, _ts, frame in left[:LISTED]]
        + ([end.number] if end is not None else [])
        + again
        + holes
        + holes_s2c,
        ongoing=link is not None and link.ended == "open at end",
    )


def redeliveries(conn: ConnectionTracker, ev: Evidence) -> list[Diagnosis]:
    count = ev.redeliveries.get(conn.conn, 0)
    if not count:
        return []
    why = (
        "These transfers carry messages delivered before: the sender marked them (header"
        " delivery-count above 0, or first-acquirer false), or sent again a message whose"
        " earlier delivery was released, modified or left unsettled when its link ended."
    )
    return [redelivered(conn.conn, count, ev.relinked.get(conn.conn, []), [], why)]


def liveness(conn: ConnectionTracker, ev: Evidence) -> list[Diagnosis]:
    out = []
    for placed in ev.found(conn.conn, "amqp10.heartbeat-late"):
        previous = placed.previous
        gap = placed.frame.ts - previous.ts if previous else 0.0
        side = SIDE_OF.get(placed.frame.direction, "?")
        out.append(
            make(
                "liveness.heartbeat-missed",
                f"The {side} sent nothing for {gap:.1f} s, past its peer's idle-time-out",
                f"{placed.finding.message}. The peer may close the connection"
                " (amqp:resource-limit-exceeded, idle-timeout). Check for a paused or"
                " overloaded process, or a client that does not send empty frames.",
                conn=conn.conn,
                start=previous.ts if previous else None,
                duration=gap,
                evidence=[previous.number if previous else 0, placed.frame.number],
            )
        )
    end = ev.ends.get(conn.conn)
    if conn.dropped and end is not None:
        last = ev.recent.get(conn.conn)
        out.append(
            make(
                "liveness.dropped",
                f"TCP ended ({end.fields.get('event')} by {end.fields.get('by')}) with the"
                " connection open",
                "No close was sent: "
                + next(
                    (p.finding.message for p in ev.found(conn.conn, "amqp10.transport-closed")),
                    "the TCP connection ended first",
                )
                + ". A killed or crashed peer, or a network device closing the connection.",
                conn=conn.conn,
                start=end.ts,
                evidence=[last[-1].number if last else 0, end.number],
            )
        )
    return out


def _clean_end(conn: ConnectionTracker) -> bool:
    """The connection was closed (by either side) and no close carried an error."""
    closes = [c for c in (conn.client_side.closed, conn.server_side.closed) if c is not None]
    return bool(closes) and not any(c.get("error") for c in closes)


def violations(conn: ConnectionTracker, ev: Evidence) -> list[Diagnosis]:
    out = []
    clean = _clean_end(conn)
    for code, (rule, section) in causes.VIOLATIONS.items():
        if not code.startswith("amqp10."):
            continue
        told = False  # a harmless one reported for this connection already
        for placed in ev.found(conn.conn, code):
            side = SIDE_OF.get(placed.frame.direction, "?")
            harmless = placed.frame.name in causes.HARMLESS.get(code, ()) or (
                clean and code in causes.HARMLESS_ON_CLEAN_END
            )
            if harmless and code in causes.HARMLESS_ON_CLEAN_END:
                if told:
                    continue
                told = True
            doubt, lost = lost_line(ev, conn.conn, placed.frame.number)
            diagnosis = make(
                "spec.violation",
                f"The {side} broke a rule: {placed.frame.name}"
                + ("" if placed.frame.channel is None else f" on channel {placed.frame.channel}")
                + (", or the log lost a frame" if doubt else ""),
                f"{placed.finding.message}. Rule: {rule} ({section}). The {side} sent the"
                + (" frame." + doubt if doubt else " frame, so the bug is on its side.")
                + (" Harmless: the connection was closing anyway." if harmless else ""),
                conn=conn.conn,
                channel=placed.frame.channel,
                start=placed.frame.ts,
                evidence=sorted({*lost, placed.frame.number}),
            )
            if harmless or doubt:
                diagnosis.severity = INFO
            out.append(diagnosis)
    return out


RULES: Final[tuple[Callable[[ConnectionTracker, Evidence], list[Diagnosis]], ...]] = (
    credit,
    errors,
    left_at_end,
    redeliveries,
    liveness,
    violations,
    requests,
)
