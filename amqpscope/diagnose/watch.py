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
from amqpscope.track.amqp10.rules import CLIENT
from amqpscope.track.tracker import Tracker

BEGAN: Final = "began"
ENDED: Final = "ended"
#: key of an open episode: (kind, connection, where, its start)
Key = tuple[str, int, object, float]


def _open_091(conn: amqp091.ConnectionTracker, now: float) -> Iterator[tuple[Key, Diagnosis]]:
    for epoch in conn.channels.values():
        since = epoch.saturated_since
        if since is None:
            continue
        seconds = now - since
        limit = epoch.saturated_limit
        yield (
            ("stall", conn.conn, (epoch.number, epoch.epoch), since),
            make(
                "consumer.stalled",
                f"Consumer on channel {epoch.number} stopped: {len(epoch.outstanding)} of"
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
            make(
                "publish.blocked",
                f"Publishing blocked by the broker for {seconds:.1f} s so far:"
                f" {conn.blocked_reason}",
                "The broker sent connection.blocked (a resource alarm) and has not unblocked"
                " the connection yet.",
                conn=conn.conn,
                start=since,
                duration=seconds,
                evidence=[conn.blocked_frame],
                ongoing=True,
            ),
        )


def _open_10(conn: amqp10.ConnectionTracker, now: float) -> Iterator[tuple[Key, Diagnosis]]:
    for session in conn.sessions:
        for link in session.links:
            since = link.credit.starvation.since
            if since is None:
                continue
            seconds = now - since
            yield (
                ("credit", conn.conn, (id(session), link.name), since),
                make(
                    "credit.starved",
                    f"{link.label().capitalize()} without credit for {seconds:.1f} s so far",
                    "Its sender has messages to send and the receiver has granted no credit since.",
                    conn=conn.conn,
                    channel=session.half[CLIENT].channel,
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
        #: how long each reported stall was last seen on (live time runs on between frames)
        self.seen: dict[Key, float] = {}

    def check(self, tracker: Tracker, now: float) -> list[tuple[str, Diagnosis]]:
        """(BEGAN or ENDED, diagnosis) for each stall that passed the threshold or ended."""
        out: list[tuple[str, Diagnosis]] = []
        current: set[Key] = set()
        for conn in tracker.connections.values():
            if isinstance(conn, amqp091.ConnectionTracker):
                found = _open_091(conn, now)
            else:
                found = _open_10(conn, now)
            for key, diagnosis in found:
                current.add(key)
                if key in self.reported:
                    self.seen[key] = diagnosis.duration
                elif diagnosis.duration >= causes.STALL_SECONDS:
                    self.reported[key] = diagnosis
                    self.seen[key] = diagnosis.duration
                    out.append((BEGAN, diagnosis))
        for key in [k for k in self.reported if k not in current]:
            began = self.reported.pop(key)
            seen = self.seen.pop(key)
            gone = tracker.connections.get(key[1])
            out.append((ENDED, _ended(gone, key, began, now, seen, gone is None)))
        return out

    def evicted(
        self, conn: amqp091.ConnectionTracker | amqp10.ConnectionTracker
    ) -> list[tuple[str, Diagnosis]]:
        """The stalls reported of `conn`, finished and about to be forgotten: each ended when
        the connection did, with the length the tracker gave it."""
        out = []
        last = conn.last_ts if isinstance(conn, amqp091.ConnectionTracker) else conn.ts
        for key in [k for k in self.reported if k[1] == conn.conn]:
            began = self.reported.pop(key)
            out.append((ENDED, _ended(conn, key, began, last, self.seen.pop(key), True)))
        return out


def _ended(
    conn: amqp091.ConnectionTracker | amqp10.ConnectionTracker | None,
    key: Key,
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
    title = began.title.split(" for ")[0].replace(" so far", "")
    words = {"stall": "acked again", "blocked": "unblocked", "credit": "credit came"}
    how = (
        " ended with its channel, connection or the capture, still on"
        if cut
        else f" ended: the {words[kind]}" + (f" in frame {last}" if last else "")
    )
    return make(
        began.code,
        f"{title} ended after {seconds:.1f} s" + (" (still on at its end)" if cut else ""),
        f"The stall that began at frame {began.evidence[0] if began.evidence else '?'}" + how + ".",
        conn=began.conn,
        channel=began.channel,
        link=began.link,
        queue=began.queue,
        start=since,
        duration=seconds,
        evidence=[*began.evidence, last],
        ongoing=cut,
    )
