"""Stalls while they happen (live capture): each is reported once it has lasted STALL_SECONDS,
and again when it ends, with its length.

Read from the trackers' open episodes: a 0-9-1 channel at its prefetch limit, a blocked
connection, a 1.0 link with no credit while its sender has messages. The finished episode's
numbers are the tracker's own (`ChannelEpoch.stalls`, `blocked`, `Episodes.periods`), so the
"ended" report says what `diagnose` says of the same capture afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from amqpscope.diagnose import causes
from amqpscope.diagnose.amqp091 import queue_of
from amqpscope.diagnose.model import Diagnosis, make
from amqpscope.track import amqp091, amqp10
from amqpscope.track.amqp091.channel import ChannelEpoch
from amqpscope.track.amqp10.link import Link
from amqpscope.track.amqp10.rules import CLIENT, SERVER
from amqpscope.track.tracker import Tracker

BEGAN: Final = "began"
ENDED: Final = "ended"
#: key of an open episode: (kind, connection, where, its start)
Key = tuple[str, int, object, float]


def _consumer_091(conn: amqp091.ConnectionTracker, epoch: ChannelEpoch) -> str:
    """Who stalled, as the texts name it: `consumer 'ctag' on channel 1 of connection c1
    (queue 'q')` (the channel's consumers not cancelled; the queue the channel last used)."""
    tags = [repr(tag) for tag, consumer in epoch.consumers.items() if not consumer.cancelled]
    who = "consumers " + ", ".join(tags) if len(tags) > 1 else " ".join(["consumer", *tags])
    queue = queue_of(epoch)
    return f"{who} on channel {epoch.number} of connection c{conn.conn}" + (
        f" (queue {queue!r})" if queue else ""
    )


def _link_10(conn: amqp10.ConnectionTracker, channel: int | None, link: Link) -> str:
    """Which link starved: `link 'name' to '/queue/q' on channel 0 of connection c1`."""
    source, target = _address(link, "source"), _address(link, "target")
    address = target or source
    toward = " to" if target else " from"
    where = f" on channel {channel}" if channel is not None else ""
    return (
        link.label()
        + (f"{toward} {address!r}" if address else "")
        + f"{where} of connection c{conn.conn}"
    )


def _address(link: Link, which: str) -> str | None:
    """The address of a link's source or target, as either end's attach gave it."""
    for side in (CLIENT, SERVER):
        terminus = (link.attach[side] or {}).get(which)
        if isinstance(terminus, dict) and terminus.get("address") is not None:
            return str(terminus["address"])
    return None


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _open_091(conn: amqp091.ConnectionTracker, now: float) -> Iterator[tuple[Key, str, Diagnosis]]:
    for epoch in conn.channels.values():
        since = epoch.saturated_since
        if since is None:
            continue
        seconds = now - since
        limit = epoch.saturated_limit
        who = _consumer_091(conn, epoch)
        yield (
            ("stall", conn.conn, (epoch.number, epoch.epoch), since),
            who,
            make(
                "consumer.stalled",
                f"{_capital(who)} stopped: {len(epoch.outstanding)} of"
                f" {limit} prefetched messages unacked for {seconds:.1f} s so far",
                f"The channel reached its prefetch limit of {limit} at frame"
                f" {epoch.saturated_frame} and the client has acked nothing since.",
                conn=conn.conn,
                channel=epoch.number,
                queue=queue_of(epoch),
                start=since,
                duration=seconds,
                evidence=[epoch.saturated_frame],
                ongoing=True,
            ),
        )
    since = conn.blocked_since
    if since is not None:
        seconds = now - since
        yield (
            ("blocked", conn.conn, 0, since),
            f"connection c{conn.conn}",
            make(
                "publish.blocked",
                f"Publishing on connection c{conn.conn} blocked by the broker for"
                f" {seconds:.1f} s so far: {conn.blocked_reason}",
                "The broker sent connection.blocked (a resource alarm) and has not unblocked"
                " the connection yet.",
                conn=conn.conn,
                start=since,
                duration=seconds,
                evidence=[conn.blocked_frame],
                ongoing=True,
            ),
        )


def _open_10(conn: amqp10.ConnectionTracker, now: float) -> Iterator[tuple[Key, str, Diagnosis]]:
    for session in conn.sessions:
        for link in session.links:
            since = link.credit.starvation.since
            if since is None:
                continue
            seconds = now - since
            channel = session.half[CLIENT].channel
            who = _link_10(conn, channel, link)
            yield (
                ("credit", conn.conn, (id(session), link.name), since),
                who,
                make(
                    "credit.starved",
                    f"{_capital(who)} without credit for {seconds:.1f} s so far",
                    "Its sender has messages to send and the receiver has granted no credit since.",
                    conn=conn.conn,
                    channel=channel,
                    link=link.name,
                    start=since,
                    duration=seconds,
                    ongoing=True,
                ),
            )


class Watch:
    """Call `check(tracker, now)` after frames are tracked and about once a second, and
    `evicted(conn)` when the tracker forgets a finished connection (live capture)."""

    def __init__(self) -> None:
        self.reported: dict[Key, Diagnosis] = {}
        #: who stalled, as the texts name it (`consumer 'ctag' on channel 1 of connection c1`)
        self.subjects: dict[Key, str] = {}
        #: how long each reported stall was last seen on (live time runs on between frames)
        self.seen: dict[Key, float] = {}
        #: each reported stall still on, as the last check saw it (its length so far)
        self.latest: dict[Key, Diagnosis] = {}

    def check(self, tracker: Tracker, now: float) -> list[tuple[str, Diagnosis]]:
        """(BEGAN or ENDED, diagnosis) for each stall that passed the threshold or ended."""
        out: list[tuple[str, Diagnosis]] = []
        current: set[Key] = set()
        for conn in tracker.connections.values():
            if isinstance(conn, amqp091.ConnectionTracker):
                found = _open_091(conn, now)
            else:
                found = _open_10(conn, now)
            for key, subject, diagnosis in found:
                current.add(key)
                if key in self.reported:
                    self.seen[key] = diagnosis.duration
                    self.latest[key] = diagnosis
                elif diagnosis.duration >= causes.STALL_SECONDS:
                    self.reported[key] = self.latest[key] = diagnosis
                    self.subjects[key] = subject
                    self.seen[key] = diagnosis.duration
                    out.append((BEGAN, diagnosis))
        for key in [k for k in self.reported if k not in current]:
            began = self.reported.pop(key)
            seen = self.seen.pop(key)
            self.latest.pop(key, None)
            gone = tracker.connections.get(key[1])
            subject = self.subjects.pop(key)
            out.append((ENDED, _ended(gone, key, subject, began, now, seen, gone is None)))
        return out

    def evicted(
        self, conn: amqp091.ConnectionTracker | amqp10.ConnectionTracker
    ) -> list[tuple[str, Diagnosis]]:
        """The stalls reported of `conn`, finished and about to be forgotten: each ended when
        the connection did, with the length the tracker gave it."""
        out = []
        last = conn.last_ts if isinstance(conn, amqp091.ConnectionTracker) else conn.ts
        for key in [k for k in self.reported if k[1] == conn.conn]:
            began, subject = self.reported.pop(key), self.subjects.pop(key)
            self.latest.pop(key, None)
            out.append((ENDED, _ended(conn, key, subject, began, last, self.seen.pop(key), True)))
        return out

    def ongoing(self) -> list[Diagnosis]:
        """The reported stalls still on, each as long as the last `check` saw it (`tui
        --live`'s `d` list shows them while they last)."""
        return list(self.latest.values())


def _ended(
    conn: amqp091.ConnectionTracker | amqp10.ConnectionTracker | None,
    key: Key,
    subject: str,
    began: Diagnosis,
    now: float,
    seen: float,
    gone: bool,
) -> Diagnosis:
    """The episode as the tracker closed it (its length, last frame, and whether the
    connection's or the capture's end closed it). One the tracker did not list (it ended
    with its connection, `gone`, before a frame showed it long) was on for as long as the
    watch last saw it (`seen`: live time runs on between frames) or until `now`."""
    kind, _conn_id, where, since = key
    seconds = max(now - since, seen)
    last = 0
    cut = gone  # ended by its channel's, connection's or the capture's end
    link: Link | None
    if isinstance(conn, amqp091.ConnectionTracker):
        if kind == "stall":
            for epoch in conn.epochs:
                for stall in epoch.stalls:
                    if (epoch.number, epoch.epoch) == where and stall[0] == since:
                        seconds, last = stall[2] - since, stall[3]
                        cut = not last
        elif conn.blocked:
            period = conn.blocked[-1]
            seconds = float(period.get("seconds") or seconds)
            last = period.get("unblocked-frame") or 0
            cut = not last
    elif isinstance(conn, amqp10.ConnectionTracker):
        for session in conn.sessions:
            for link in session.links:
                if (id(session), link.name) != where:
                    continue
                for start, length, at_end in link.credit.starvation.periods:
                    if start == since:
                        seconds, cut = length, at_end
    how = ""  # what the wire showed end it
    if kind == "stall":
        noun, how = "stall", f"{subject} acked again"
    elif kind == "blocked":
        noun, how = "publishing block", f"the broker unblocked {subject}"
    else:
        noun = "credit starvation"
        link = _link_of(conn, where)
        credit = None if link is None else link.credit.credit
        if credit is not None and credit > 0:
            how = f"{subject} was granted credit"
        elif link is not None and link.credit.available == 0:
            how = f"the sender of {subject} had nothing left to send"
    began_at = f" that began at frame {began.evidence[0]}" if began.evidence else ""
    if cut:
        text = f"The {noun} of {subject}{began_at} ended with its channel, connection or the"
        text += " capture, still on."
    elif how:
        text = f"The {noun}{began_at} ended: {how}" + (f" in frame {last}" if last else "") + "."
    else:
        text = f"The {noun} of {subject}{began_at} ended."
    title = f"{_capital(noun)} of {subject} ended after {seconds:.1f} s"
    return make(
        began.code,
        title + (" (still on at its end)" if cut else ""),
        text,
        conn=began.conn,
        channel=began.channel,
        link=began.link,
        queue=began.queue,
        start=since,
        duration=seconds,
        evidence=[*began.evidence, last],
        ongoing=cut,
    )


def _link_of(
    conn: amqp091.ConnectionTracker | amqp10.ConnectionTracker | None, where: object
) -> Link | None:
    """The 1.0 link a credit episode's key names, while its connection is still tracked."""
    if not isinstance(conn, amqp10.ConnectionTracker):
        return None
    for session in conn.sessions:
        for link in session.links:
            if (id(session), link.name) == where:
                return link
    return None
