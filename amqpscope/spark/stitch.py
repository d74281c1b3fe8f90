"""Connections that continue across rotated capture files (`tcpdump -C` / `-G` rings), found and
put back together (pure Python: the Spark job runs it on the driver over a few small records).

Every file is decoded on its own first. A TCP connection that touches an edge of its file is an
`Edge`: it started before the file did (no handshake seen: `head_open`) or was still open when
the file ended (no FIN or RST: `tail_open`). Two edges continue each other when

- they have the same endpoints (either way round: a mid-stream start guesses the roles),
- the earlier is tail-open in its file and the later head-open in a later file (files are
  ordered by their first packet's time), with no more than `max_gap` seconds between them, and
- where both saw the same direction, the TCP sequence numbers follow on: the later file's first
  sequence number is at or after the earlier's next expected one (within `RETRANSMIT_SLACK`
  bytes before it, for retransmissions) and less than a TCP window (1 GiB) after it.

Chains of continuing edges are the groups: each is decoded again from its packets in time order
(one `Dissector`, one `Tracker`), so frames cut by the rotation are whole again and the
accounting (credit, unsettled, unacked) runs over the whole connection, once.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

#: the largest TCP window: a later sequence number further on than this is not a continuation
MAX_AHEAD = 1 << 30
#: a later file may start with bytes retransmitted from before the earlier one ended
RETRANSMIT_SLACK = 1 << 16
#: default longest silence between two files' parts of one connection (seconds)
MAX_GAP = 3600.0


@dataclass(slots=True)
class Edge:
    """One connection at an edge of one capture file, as its file's decode saw it."""

    capture: str
    order: int  # the file's place in time order (set on the driver)
    conn: int  # the connection id in its file's decode
    client: str
    server: str
    first_ts: float
    last_ts: float
    head_open: bool
    tail_open: bool
    amqp: bool = True  # AMQP was found in this part
    fid: str = ""  # the file's id in the run's staging area (`tasks.file_id`)
    packets: str = ""  # where its packets were staged for a stitched decode
    #: sender endpoint -> [first seq seen, next seq after the last segment] (32-bit)
    seqs: dict[str, list[int]] = field(default_factory=dict)

    @property
    def pair(self) -> tuple[str, str]:
        a, b = sorted((self.client, self.server))
        return a, b


def follows(earlier: Edge, later: Edge, max_gap: float) -> bool:
    """Whether `later` continues `earlier` (the rules above)."""
    if not (earlier.tail_open and later.head_open and earlier.order < later.order):
        return False
    if later.first_ts - earlier.last_ts > max_gap:
        return False
    for sender, (_, nxt) in earlier.seqs.items():
        seen = later.seqs.get(sender)
        if seen is None:
            continue
        ahead = (seen[0] - nxt) % (1 << 32)
        if ahead >= MAX_AHEAD and ahead < (1 << 32) - RETRANSMIT_SLACK:
            return False
    return True


def groups(edges: list[Edge], max_gap: float = MAX_GAP) -> list[list[Edge]]:
    """Chains of two or more edges that are one connection, each in time order."""
    by_pair: dict[tuple[str, str], list[Edge]] = defaultdict(list)
    for edge in edges:
        by_pair[edge.pair].append(edge)
    out: list[list[Edge]] = []
    for candidates in by_pair.values():
        candidates.sort(key=lambda e: (e.order, e.first_ts, e.conn))
        chains: list[list[Edge]] = []
        for edge in candidates:
            for chain in chains:
                if follows(chain[-1], edge, max_gap):
                    chain.append(edge)
                    break
            else:
                chains.append([edge])
        out.extend(c for c in chains if len(c) > 1 and any(e.amqp for e in c))
    out.sort(key=lambda chain: (chain[0].order, chain[0].conn))
    return out


def flow_pair(a: str, b: str) -> tuple[str, str]:
    """Two endpoints in one order, whichever way a packet went."""
    return (a, b) if a <= b else (b, a)
