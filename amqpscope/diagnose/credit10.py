"""1.0 credit waits the tracker's starvation episodes cannot show: a sender that never states
`available` (Qpid Proton's C++ example broker), and a receiver that never grants credit at all.

A stall is known when the sender says it has messages (`available`) and no credit. A sender that
never says so leaves it to inference: when the receiver, after leaving the link without credit
for a while, grants some and transfers follow within milliseconds, the sender had them waiting.
The diagnosis says it is inferred, from how many transfers and how soon, and how sure that is.
"""

from __future__ import annotations

from typing import Final

from amqpscope.diagnose.amqp10 import _address, _last_frame, _links
from amqpscope.diagnose.evidence import Evidence
from amqpscope.diagnose.model import Diagnosis, make
from amqpscope.track.amqp10.connection import ConnectionTracker
from amqpscope.track.amqp10.link import Link, Wait
from amqpscope.track.amqp10.rules import CLIENT, FOLLOW_SECONDS, OTHER, SERVER

#: a burst this many transfers long (or one that used all the new credit) leaves little doubt
#: the sender had them waiting; a single transfer may be a message that arrived just then
SURE_FOLLOWED: Final = 3
#: why a link ended (`Link.ended`) -> the words of "until ..."
UNTIL: Final = {
    "detached": "it detached",
    "session ended": "its session ended",
    "connection closed": "the connection closed",
    "transport closed": "the TCP connection ended",
    "open at end": "the capture ended",
}


def _confidence(wait: Wait) -> str:
    """How sure the inference is, in words, from the burst that answered the grant."""
    if wait.followed >= wait.granted or wait.followed >= SURE_FOLLOWED:
        return "high"
    return "low"


def _inferred(conn: ConnectionTracker, link: Link, wait: Wait, channel: int | None) -> Diagnosis:
    address = _address(link)
    sender = link.sender or "?"
    receiver = OTHER.get(sender, "peer")
    ms = wait.within * 1000
    all_of = " (all of the new credit)" if wait.followed >= wait.granted else ""
    return make(
        "credit.starved",
        f"{link.label().capitalize()} starved of credit for {wait.seconds:.1f} s (inferred)"
        + (f" ({address})" if address else ""),
        f"Inferred, confidence {_confidence(wait)}: {wait.followed} transfer"
        f"{'' if wait.followed == 1 else 's'} followed the grant within {ms:.1f} ms{all_of}."
        f" The {sender}'s end used its last credit in frame {wait.dry_frame}; the {receiver}"
        f" granted none for {wait.seconds:.1f} s, then {wait.granted} in frame"
        f" {wait.grant_frame}, and the {sender} sent at once: it had the messages waiting. It"
        " never states `available` in a flow, so the wait is inferred from how soon the"
        f" transfers followed (within {FOLLOW_SECONDS * 1000:.0f} ms counts as at once), not"
        f" read from the wire. The receiving {receiver} stopped issuing credit: a consumer"
        " that stopped calling flow/receive, a full prefetch buffer, or a slow handler. Check"
        " the receiver's credit window and its processing.",
        conn=conn.conn,
        channel=channel,
        link=link.name,
        queue=address,
        start=wait.start,
        duration=wait.seconds,
        evidence=[wait.dry_frame, wait.grant_frame, wait.first_frame],
    )


def _never(
    conn: ConnectionTracker,
    ev: Evidence,
    link: Link,
    start: float,
    seconds: float,
    frame: int,
    channel: int | None,
) -> Diagnosis:
    address = _address(link)
    sender = link.sender or "?"
    receiver = OTHER.get(sender, "peer")
    available = link.credit.available
    if link.credit.stated and available:
        waiting = f" Its flows said {available} message{'s' if available != 1 else ''} waited."
    elif link.credit.stated:
        waiting = " Its flows said it had none available."
    else:
        waiting = (
            f" Whether messages waited the capture does not show: the {sender} never stated"
            " `available`."
        )
    until = UNTIL.get(link.ended or "", "the capture ended")
    last = _last_frame(ev, conn.conn)
    return make(
        "credit.never-granted",
        f"{link.label().capitalize()} was never granted credit ({seconds:.1f} s)"
        + (f" ({address})" if address else ""),
        f"The {receiver} attached the receiving end in frame {frame} and granted no link-credit"
        f" in the {seconds:.1f} s until {until}: the {sender} could send it nothing.{waiting}"
        " A consumer that never asks for messages: prefetch 0 with no receive/flow call, or a"
        " credit policy that grants nothing. Check how the receiver issues credit.",
        conn=conn.conn,
        channel=channel,
        link=link.name,
        queue=address,
        start=start,
        duration=seconds,
        evidence=[frame, last.number if last is not None and link.ended != "detached" else 0],
        ongoing=link.ended == "open at end",
    )


def credit_waits(conn: ConnectionTracker, ev: Evidence) -> list[Diagnosis]:
    """Inferred starvation, and receivers that never granted credit, per link."""
    out = []
    for session, link in _links(conn):
        channel = session.half[CLIENT].channel
        if channel is None:
            channel = session.half[SERVER].channel
        for wait in link.credit.waits():
            out.append(_inferred(conn, link, wait, channel))
        ungranted = link.credit.ungranted
        if ungranted is not None and link.attach[CLIENT] and link.attach[SERVER]:
            start, seconds, frame = ungranted
            out.append(_never(conn, ev, link, start, seconds, frame, channel))
    return out
