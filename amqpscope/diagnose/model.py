"""A diagnosis: the answer to a user's question about a capture, with the frames that prove it.

`to_json()` is a published shape (`amqpscope schema diagnose`, the HTML report reads it): keys
are added, never renamed or removed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from amqpscope.diagnose.causes import CODES
from amqpscope.findings import ERROR, INFO, WARNING

#: severities, most severe first: the ranking's first key
SEVERITY_RANK: Final = {ERROR: 0, WARNING: 1, INFO: 2}


@dataclass(slots=True)
class Diagnosis:
    """One diagnosis. `start` is capture time (seconds since the epoch, as frames' `ts`);
    `duration` is seconds (0.0 for a moment); `evidence` holds frame numbers, in order."""

    code: str
    severity: str
    title: str
    explanation: str
    conn: int | None = None
    channel: int | None = None  # 0-9-1 channel, or 1.0 session channel (the client's)
    link: str | None = None  # 1.0 link name
    queue: str | None = None  # 0-9-1 queue, or 1.0 address (source or target)
    start: float | None = None
    duration: float = 0.0
    evidence: list[int] = field(default_factory=list)
    ongoing: bool = False  # still true when the capture ended

    def rank(self) -> tuple[int, float, float]:
        """Most severe first, then longest, then earliest."""
        return (SEVERITY_RANK.get(self.severity, 3), -self.duration, self.start or 0.0)

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "title": self.title,
            "explanation": self.explanation,
            "conn": self.conn,
            "channel": self.channel,
            "link": self.link,
            "queue": self.queue,
            "start": self.start,
            "duration": round(self.duration, 6),
            "evidence": sorted(set(self.evidence)),
            "ongoing": self.ongoing,
        }


def make(code: str, title: str, explanation: str, **where: Any) -> Diagnosis:
    """A diagnosis of `code`, with the severity `causes.CODES` gives that code."""
    severity, _ = CODES[code]
    return Diagnosis(code, severity, title, explanation, **where)


def ranked(diagnoses: list[Diagnosis]) -> list[Diagnosis]:
    """The report's order, with each evidence list in frame order without repeats."""
    for diagnosis in diagnoses:
        diagnosis.evidence = sorted(set(n for n in diagnosis.evidence if n))
    return sorted(diagnoses, key=Diagnosis.rank)
