"""Deliveries: one record per delivery in flight, from its first transfer until it is settled.

A delivery lives in two maps while unsettled, both bounded by what the wire holds open: its
session half's `deliveries` (delivery-id -> delivery, for dispositions, which name ids) and its
link's `unsettled` (delivery-tag -> delivery, for tag reuse and for what is left at the end).
Settled deliveries are dropped at once; only tallies and a bounded latency sample remain.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # link.py imports this module
    from amqpscope.track.amqp10.link import Link


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


def error_of(value: Any) -> dict[str, Any] | None:
    """`{condition, description}` of an error composite (or None)."""
    if not isinstance(value, dict):
        return None
    condition = value.get("condition")
    if condition is None:
        return None
    out: dict[str, Any] = {"condition": condition, "description": value.get("description")}
    if value.get("info"):
        out["info"] = value["info"]
    return out


def error_text(error: dict[str, Any]) -> str:
    description = error.get("description")
    return f"{error['condition']}" + (f": {description}" if description else "")
