"""Transactions (spec part 4): declare and discharge on coordinator links, and the deliveries
whose transfers or dispositions carry a transactional-state, grouped by txn-id.

A controller attaches a link whose target is a `coordinator` and sends messages whose body is an
amqp-value `declare` or `discharge`. The coordinator settles a declare with `declared` (carrying
the txn-id) or `rejected` (a peer with no coordinator may settle it `accepted`, as any message:
no txn-id, so no transaction; counted failed); a discharge with `accepted` (committed, or rolled
back when `fail`) or `rejected`. Transfers and dispositions in a transaction carry
`transactional-state` with the txn-id (and, on dispositions, the outcome that takes effect when
the transaction commits).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from amqpscope.track.amqp10.errors import error_of
from amqpscope.track.amqp10.rules import OUTCOMES

if TYPE_CHECKING:  # delivery.py builds on base.py, which imports this module
    from amqpscope.track.amqp10.delivery import Delivery

KEEP: Final = 1000  # finished transactions kept for the summary (counts stay exact)


class Transaction:
    __slots__ = ("channel", "error", "frame", "outcomes", "state", "transfers", "txn_id")

    def __init__(self, txn_id: str, frame: int | None, channel: int | None) -> None:
        self.txn_id = txn_id
        self.frame = frame  # the frame that declared it (None: declared before the capture)
        self.channel = channel
        self.state = "declared"
        self.transfers = 0  # deliveries transferred in it
        self.outcomes = dict.fromkeys(OUTCOMES, 0)  # outcomes disposed in it
        self.error: dict[str, Any] | None = None

    def summary(self) -> dict[str, Any]:
        return {
            "txn-id": self.txn_id,
            "channel": self.channel,
            "declared-frame": self.frame,
            "state": self.state,
            "transfers": self.transfers,
            "outcomes": dict(self.outcomes),
            "error": self.error,
        }


class Transactions:
    def __init__(self) -> None:
        self.coordinators = 0  # coordinator links attached
        self.declares = 0
        self.declared = 0
        self.discharges = 0
        self.committed = 0
        self.rolled_back = 0
        self.failed = 0
        self.items: dict[str, Transaction] = {}

    def action(self, delivery: Delivery, message: dict[str, Any] | None) -> None:
        """A coordinator link's delivery completed: note whether it declares or discharges."""
        body = (message or {}).get("body") or {}
        value = body.get("value") if isinstance(body, dict) else None
        if not isinstance(value, dict):
            return
        kind = value.get("type")
        if kind == "declare":
            self.declares += 1
            delivery.action = {"type": "declare"}
        elif kind == "discharge":
            self.discharges += 1
            delivery.action = {
                "type": "discharge",
                "txn-id": value.get("txn-id"),
                "fail": bool(value.get("fail")),
            }

    def outcome(
        self, delivery: Delivery, state: dict[str, Any], frame: int, channel: int | None
    ) -> str | None:
        """The coordinator's answer to a declare or discharge; a failure's text, if it failed."""
        action = delivery.action
        if action is None:
            return None
        kind = state.get("type")
        if action["type"] == "declare":
            delivery.action = None  # answered
            if kind == "declared" and state.get("txn-id") is not None:
                self.declared += 1
                self._get(str(state["txn-id"]), frame, channel)
                return None
            self.failed += 1  # no txn-id came back: no transaction began
            if kind == "rejected":
                error = error_of(state.get("error"))
                return "declare rejected" + (f": {error['condition']}" if error else "")
            return (
                f"declare settled {kind if isinstance(kind, str) else 'with no outcome'}, not"
                " declared: no txn-id came back, so no transaction began (a peer with no"
                " transaction coordinator settles a declare as any message)"
            )
        txn = self._get(str(action["txn-id"]), None, channel)
        delivery.action = None
        if kind == "accepted":
            txn.state = "rolled-back" if action["fail"] else "committed"
            if action["fail"]:
                self.rolled_back += 1
            else:
                self.committed += 1
            return None
        if kind == "rejected":
            self.failed += 1
            txn.state = "discharge-failed"
            txn.error = error_of(state.get("error"))
            return f"discharge of {txn.txn_id} rejected" + (
                f": {txn.error['condition']}" if txn.error else ""
            )
        return None

    def transferred(self, txn_id: Any, channel: int | None) -> None:
        self._get(str(txn_id), None, channel).transfers += 1

    def disposed(self, txn_id: Any, outcome: Any, channel: int | None) -> None:
        txn = self._get(str(txn_id), None, channel)
        kind = outcome.get("type") if isinstance(outcome, dict) else None
        if kind in txn.outcomes:
            txn.outcomes[kind] += 1

    def _get(self, txn_id: str, frame: int | None, channel: int | None) -> Transaction:
        txn = self.items.get(txn_id)
        if txn is None:
            txn = self.items[txn_id] = Transaction(txn_id, frame, channel)
            if len(self.items) > KEEP:  # drop the oldest finished one
                for key, old in self.items.items():
                    if old.state != "declared":
                        del self.items[key]
                        break
        return txn

    def summary(self) -> dict[str, Any]:
        return {
            "coordinator-links": self.coordinators,
            "declares": self.declares,
            "declared": self.declared,
            "discharges": self.discharges,
            "committed": self.committed,
            "rolled-back": self.rolled_back,
            "failed": self.failed,
            "items": [t.summary() for t in self.items.values()],
        }
