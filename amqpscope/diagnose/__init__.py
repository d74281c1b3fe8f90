"""The diagnose layer: rules over tracked state and findings → ranked `Diagnosis` values.

Fed after the tracker (capture → stream → codec → track → diagnose → render): `Diagnoser.feed`
takes each frame once the tracker has placed its findings on it, `Diagnoser.diagnoses` reads the
trackers once they are finished. Sans-IO: frames and tracker state in, values out.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from amqpscope.codec.frames import Frame
from amqpscope.diagnose import amqp091 as rules091
from amqpscope.diagnose import amqp10 as rules10
from amqpscope.diagnose.credit10 import credit_waits
from amqpscope.diagnose.evidence import Evidence
from amqpscope.diagnose.lost import lost_bytes
from amqpscope.diagnose.model import Diagnosis, ranked
from amqpscope.diagnose.opening10 import not_opened
from amqpscope.diagnose.watch import Watch
from amqpscope.track import amqp091, amqp10
from amqpscope.track.tracker import Tracker

__all__ = ["Diagnoser", "Diagnosis", "Watch", "diagnose_frames"]


#: diagnoses of connections that ended and were evicted (live capture), the latest kept
MAX_KEPT = 10_000
#: the 1.0 rules: `amqp10`'s, then those of modules built on its helpers
RULES10 = (*rules10.RULES, credit_waits, not_opened)


class Diagnoser:
    def __init__(self) -> None:
        self.evidence = Evidence()
        self.kept: deque[Diagnosis] = deque(maxlen=MAX_KEPT)

    def feed(self, frame: Frame) -> None:
        """After `Tracker.feed(frame)`: the findings it placed on the frame are read here."""
        self.evidence.feed(frame)

    def connection(
        self, conn: amqp091.ConnectionTracker | amqp10.ConnectionTracker
    ) -> list[Diagnosis]:
        """The diagnoses of one finished connection."""
        out: list[Diagnosis] = []
        if isinstance(conn, amqp091.ConnectionTracker):
            for rule in rules091.RULES:
                out.extend(rule(conn, self.evidence))
        else:
            for rule10 in RULES10:
                out.extend(rule10(conn, self.evidence))
        out.extend(lost_bytes(conn.conn, self.evidence))
        return out

    def evicted(self, conn: amqp091.ConnectionTracker | amqp10.ConnectionTracker) -> None:
        """A connection the tracker finished and forgot (live capture): its diagnoses are kept,
        its evidence dropped."""
        self.kept.extend(self.connection(conn))
        self.evidence.forget(conn.conn)

    def diagnoses(self, tracker: Tracker) -> list[Diagnosis]:
        """Every diagnosis the tracked state supports, most severe and longest first. Call
        after `tracker.finish()` (what was left open at the end is known only then)."""
        out: list[Diagnosis] = list(self.kept)
        for conn in tracker.connections.values():
            out.extend(self.connection(conn))
        if not self.evidence.timed:  # a log without timestamps: no frame has a time
            for diagnosis in out:
                diagnosis.start = None
                diagnosis.duration = 0.0
        return ranked(out)


def diagnose_frames(frames: Iterable[Frame]) -> list[Diagnosis]:
    """Track and diagnose an iterable of frames (tests, small inputs)."""
    tracker = Tracker()
    diagnoser = Diagnoser()
    for frame in frames:
        tracker.feed(frame)
        diagnoser.feed(frame)
    tracker.finish()
    return diagnoser.diagnoses(tracker)
