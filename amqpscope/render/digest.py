"""`summary` of many connections: their totals, and the busiest and most troubled of them.

A capture of 200,000 short connections would print 200,000 tables, which nobody reads, and
would have to keep them all to print them. Past `LISTED` connections the summary prints what
the `Digest` folded as each connection's summary (the summary document's entry) went by: how
many connections of each version and state, their frames and messages, then the `SHOWN`
busiest (most messages) and the `SHOWN` most troubled (most findings; a dropped connection or
an error close counts as one) in full, and a line saying that `--all` lists every one. Up to
`LISTED` connections it keeps them all, and the summary is the one it always was. Ties go to
the connection that began first, so the choice does not depend on when connections ended.
"""

from __future__ import annotations

import heapq
from collections import Counter
from typing import Any, Final

Row = dict[str, Any]
Pieces = list[tuple[str, str]]

#: connections listed in full before the summary prints their digest instead
LISTED: Final = 100
#: connections shown in full in each of the digest's two groups
SHOWN: Final = 10
VERSIONS_091: Final = ("0-9-1", "0-9", "0-8")


def _messages(conn: Row) -> int:
    """A connection's messages: 0-9-1 publishes and deliveries, 1.0 deliveries on its links."""
    if conn.get("version") == "1.0":
        total = 0
        for session in conn.get("sessions") or []:
            for link in session.get("links") or []:
                count = link.get("deliveries")
                total += count if isinstance(count, int) else 0
        return total
    totals = conn.get("totals") or {}
    return sum(v for k, v in totals.items() if k in ("publishes", "deliveries") and type(v) is int)


def _troubles(conn: Row, findings: int) -> int:
    """Its findings, and one more for a dropped connection or a close with an error."""
    close = conn.get("close")
    bad_close = False
    if isinstance(close, dict):
        code = close.get("reply-code")
        bad_close = bool(close.get("condition")) or (isinstance(code, int) and code >= 300)
    return findings + bool(conn.get("dropped")) + bad_close


class Digest:
    """Every connection's summary goes by once (`add`, in any order); kept: the first `LISTED`
    (all of them, when there are no more), the totals, and the candidates to show."""

    FINDINGS: Final = 20  # findings listed with a digest (the rest counted by code)

    def __init__(self) -> None:
        self.count = 0
        self.kept: dict[int, Row] = {}  # order -> summary, while there are at most LISTED
        self.versions: Counter[str] = Counter()
        self.states: Counter[str] = Counter()
        self.frames = 0
        self.messages = 0
        self.totals_091: Counter[str] = Counter()
        self.outcomes_10: Counter[str] = Counter()
        # min-heaps of (score, -order, summary): the largest scores, the earliest first on ties
        self.busiest: list[tuple[int, int, Row]] = []
        self.troubled: list[tuple[int, int, Row]] = []

    def add(self, order: int, conn: Row, findings: int) -> None:
        """One connection's summary; `order` is its place among them (its first frame's),
        `findings` how many it raised."""
        self.count += 1
        if self.count <= LISTED:
            self.kept[order] = conn
        elif self.kept:
            self.kept.clear()
        version = str(conn.get("version"))
        self.versions[version] += 1
        self.states["dropped" if conn.get("dropped") else str(conn.get("state"))] += 1
        frames = conn.get("frames")
        self.frames += frames if type(frames) is int else 0
        messages = _messages(conn)
        self.messages += messages
        if version == "1.0":
            for session in conn.get("sessions") or []:
                for link in session.get("links") or []:
                    for key, value in (link.get("outcomes") or {}).items():
                        if type(value) is int:
                            self.outcomes_10[str(key)] += value
        else:
            for key, value in (conn.get("totals") or {}).items():
                if type(value) is int:
                    self.totals_091[str(key)] += value
        self._offer(self.busiest, SHOWN, messages, order, conn)
        troubles = _troubles(conn, findings)
        if troubles:
            self._offer(self.troubled, 2 * SHOWN, troubles, order, conn)

    @staticmethod
    def _offer(
        heap: list[tuple[int, int, Row]], size: int, score: int, order: int, conn: Row
    ) -> None:
        entry = (score, -order, conn)
        if len(heap) < size:
            heapq.heappush(heap, entry)
        elif entry[:2] > heap[0][:2]:
            heapq.heapreplace(heap, entry)

    @property
    def listed(self) -> bool:
        """Few enough to list every one (`kept`)."""
        return self.count <= LISTED

    def all_kept(self) -> list[Row]:
        return [self.kept[order] for order in sorted(self.kept)]

    # -- what the summary prints ----------------------------------------------------------
    def head(self) -> list[Pieces]:
        """The totals' lines."""
        versions = ", ".join(f"{n} AMQP {v}" for v, n in sorted(self.versions.items()))
        states = ", ".join(f"{n} {s}" for s, n in self.states.most_common())
        out: list[Pieces] = [
            [
                (f"{self.count} connections", "bold"),
                (f": {versions} · {states} · {self.messages} messages", ""),
            ]
        ]
        if any(v in self.versions for v in VERSIONS_091):
            words = ", ".join(f"{n} {k}" for k, n in self.totals_091.items() if n)
            out.append([("  0-9-1 channels: ", "bold"), (words or "nothing", "")])
            if self.frames:
                out[-1].append((f" · {self.frames} frames", ""))
        if "1.0" in self.versions:
            words = ", ".join(f"{n} {k}" for k, n in self.outcomes_10.items() if n)
            out.append([("  1.0 links: ", "bold"), (words or "no outcomes", "")])
        out.append([("", "")])
        return out

    def groups(self) -> list[tuple[Pieces, list[Row]]]:
        """(heading, connections) of the busiest, then of the most troubled not shown yet."""
        busiest = sorted(self.busiest, reverse=True)
        shown = {-entry[1] for entry in busiest}
        troubled = [e for e in sorted(self.troubled, reverse=True) if -e[1] not in shown]
        troubled = troubled[:SHOWN]
        out: list[tuple[Pieces, list[Row]]] = []
        if busiest:
            heading = f"the {len(busiest)} busiest connections (most messages):"
            out.append(([(heading, "bold")], [entry[2] for entry in busiest]))
        if troubled:
            heading = f"the {len(troubled)} most troubled connections (most findings):"
            out.append(([(heading, "bold")], [entry[2] for entry in troubled]))
        return out

    def more(self) -> Pieces:
        shown = sum(len(group) for _, group in self.groups())
        return [(f"{self.count - shown} more connections not listed (--all lists every one)", "")]

    @staticmethod
    def finding_counts(findings: list[dict[str, Any]]) -> list[Pieces]:
        """The findings counted by code, most first."""
        counts = Counter(str(f.get("code")) for f in findings)
        words = ", ".join(f"{n} {code}" for code, n in counts.most_common())
        return [[("  by code: ", "bold"), (words, "")]]
