"""How many messages made each path, per queue or address, and how long each hop took
(sans-IO): `summary`'s journey paths, made from `Follower`'s journeys once the input ended.

A path is the journey's hops in order, each named by what its frame showed:

- 0-9-1: published, confirmed, publish-nacked, returned, delivered, redelivered, acked,
  nacked or rejected (with "(requeue)" when the consumer asked for one, "(no requeue)" when it
  did not), unacked-at-close. A message never delivered in the input makes a path that stops
  at published (or confirmed, returned).
- 1.0: sent (the client's transfer to its peer), delivered and redelivered (the peer's transfer
  to the client, a redelivery one that `Redeliveries` ties to an earlier delivery), and each
  disposition by its outcome (accepted, rejected, released, modified; settled when it has
  none). Who did what is in the order: the peer's disposition of a send, the client's of a
  delivery.

Rows are grouped by where the message went: the queue a 0-9-1 delivery came from (else, never
delivered, the exchange and routing key it was published to), the address of a 1.0 message's
first link. A hop's time is the time between its frame and the one before, only where the input
gave both frames a time (a log without timestamps: counts alone).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from amqpscope.journeys.follow import Hop, Journey
from amqpscope.track.stats import Latency

#: distinct (where, path) rows kept; later ones are counted in `left_out`
MAX_ROWS: Final = 1000
#: steps of a path kept (a message redelivered many times); the rest say how many more
MAX_STEPS: Final = 16
#: latency samples kept per hop (exact percentiles up to this many messages)
SAMPLES: Final = 1024
_ANSWERS: Final = frozenset(("nacked", "rejected"))


def step(hop: Hop) -> str:
    """The hop's name in a path."""
    d = hop.details
    if hop.event in _ANSWERS:
        return f"{hop.event} ({'requeue' if d.get('requeue') else 'no requeue'})"
    if hop.event == "transfer":
        if d.get("dir") == "c2s":
            return "sent"
        return "redelivered" if d.get("earlier-frame") else "delivered"
    if hop.event == "disposition":
        state = d.get("state")
        return str(state) if state else ("settled" if d.get("settled") else "disposition")
    return hop.event


def where(journey: Journey) -> tuple[str | None, str | None, str | None, str | None]:
    """(queue, address, exchange, routing key): the queue of its first 0-9-1 delivery, the
    address of its first 1.0 link; the exchange and routing key of a 0-9-1 publish that no
    delivery in the input names a queue for."""
    published: Hop | None = None
    for hop in journey.hops:
        if hop.event in ("delivered", "redelivered") and hop.details.get("queue"):
            return str(hop.details["queue"]), None, None, None
        if hop.event == "transfer" and hop.details.get("address"):
            return None, str(hop.details["address"]), None, None
        if hop.event == "published" and published is None:
            published = hop
    if published is not None:
        d = published.details
        return None, None, d.get("exchange"), d.get("routing-key")
    return None, None, None, None


@dataclass(slots=True)
class Row:
    """The messages of one place that made one path, and each hop's times."""

    place: tuple[str | None, str | None, str | None, str | None]
    path: tuple[str, ...]
    more: int  # steps past MAX_STEPS
    messages: int = 0
    hops: list[Latency] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        queue, address, exchange, key = self.place
        out: dict[str, Any] = {}
        if address is not None:
            out["address"] = address
        else:
            out["queue"] = queue
            if queue is None:
                out["exchange"] = exchange
                out["routing-key"] = key
        out["path"] = list(self.path)
        if self.more:
            out["more-steps"] = self.more
        out["messages"] = self.messages
        out["hop-ms"] = [latency.to_json() for latency in self.hops]
        return out


class Paths:
    """Journeys in (each once, when the input ended), rows out: `to_json()`."""

    def __init__(self) -> None:
        self.rows: dict[tuple[Any, ...], Row] = {}
        self.left_out = 0  # messages whose (place, path) came past MAX_ROWS

    def add(self, journey: Journey) -> None:
        hops = journey.hops
        if not hops:
            return
        steps = tuple(step(hop) for hop in hops)
        kept = steps[:MAX_STEPS]
        place = where(journey)
        key = (place, kept, len(steps) - len(kept))
        row = self.rows.get(key)
        if row is None:
            if len(self.rows) >= MAX_ROWS:
                self.left_out += 1
                return
            row = Row(place, kept, len(steps) - len(kept))
            row.hops = [Latency(SAMPLES) for _ in kept[1:]]
            self.rows[key] = row
        row.messages += 1
        for i, latency in enumerate(row.hops, start=1):
            before, after = hops[i - 1].ts, hops[i].ts
            if before and after:  # an untimed frame (ts 0.0) gives no time
                latency.add(after - before)

    def add_all(self, journeys: list[Journey]) -> Paths:
        for journey in journeys:
            self.add(journey)
        return self

    def to_json(self) -> list[dict[str, Any]]:
        """The rows, each place's together in the order places were first seen, its paths by
        how many messages made them (most first)."""
        order: dict[Any, int] = {}
        for row in self.rows.values():
            order.setdefault(row.place, len(order))
        rows = sorted(self.rows.values(), key=lambda r: (order[r.place], -r.messages))
        return [row.to_json() for row in rows]
