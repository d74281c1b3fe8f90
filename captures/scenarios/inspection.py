"""Recordings for issue 23's inspection work: 1.0 transactions end to end.

RabbitMQ refuses AMQP 1.0 transactions (`10-transaction` records the refusal), so the summary's
transaction table had no real capture to show. Here Proton is on both ends, as in
`10-peer-to-peer`: the client declares a transaction on a coordinator link (Proton's
`declare_transaction`), sends two messages in it and commits; then declares a second, sends two
and rolls it back (discharge with fail=true). The listener answers each declare with `declared`
(a txn-id of its own), accepts the transfers and the discharges. The counts are what Proton's
callbacks reported on each side.
"""

from __future__ import annotations

from typing import Any

import recorder as record  # captures/recorder/: the harness and shared helpers
from proton import Delivery, Described, Message, symbol
from proton.handlers import TransactionHandler

DECLARE = (0x31, symbol("amqp:declare:list"))
DISCHARGE = (0x32, symbol("amqp:discharge:list"))
DECLARED = 0x33  # the delivery state the listener answers a declare with


class PeerTransactions(record.ProtonPeers, TransactionHandler):
    """A Proton listener acting as a transaction coordinator, and a Proton client using it."""

    PER_TXN = 2

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self.txn: Any = None
        self.rounds = 0  # transactions declared by the client
        self.accepted_in_round = 0
        self.ids = 0

    def begin(self) -> None:
        assert self.container is not None
        self.listen()
        self.conn = self.connect()
        self.sender = self.container.create_sender(self.conn, "amqpscope/transactions")
        self.container.declare_transaction(self.conn, handler=self)

    # -- the client --------------------------------------------------------------------------
    def on_transaction_declared(self, event: Any) -> None:
        self.n.inc("client_declared")
        self.txn = event.transaction
        self.rounds += 1
        self.accepted_in_round = 0
        for i in range(self.PER_TXN):
            self.txn.send(self.sender, Message(id=f"t{self.rounds}-{i}", body=f"txn {i}"))
            self.n.inc("client_sent_in_txn")

    def on_accepted(self, event: Any) -> None:
        self.n.inc("client_accepted")
        self.accepted_in_round += 1
        if self.accepted_in_round == self.PER_TXN:
            if self.rounds == 1:
                self.txn.commit()
            else:
                self.txn.abort()

    def on_transaction_committed(self, event: Any) -> None:
        self.n.inc("client_committed")
        assert self.container is not None
        self.container.declare_transaction(self.conn, handler=self)

    def on_transaction_aborted(self, event: Any) -> None:
        self.n.inc("client_rolled_back")
        self.shutdown()

    # -- the listener -------------------------------------------------------------------------
    def on_message(self, event: Any) -> None:
        delivery = event.delivery
        body = event.message.body
        if isinstance(body, Described) and body.descriptor in DECLARE:
            self.ids += 1
            txn_id = f"txn-{self.ids}".encode()
            self.n.add("listener_txn_ids", txn_id.hex())
            delivery.local.data = [txn_id]
            delivery.update(DECLARED)
        elif isinstance(body, Described) and body.descriptor in DISCHARGE:
            self.n.inc("listener_discharges")
            delivery.update(Delivery.ACCEPTED)
        else:
            self.n.inc("listener_transfers_received")
            delivery.update(Delivery.ACCEPTED)
        delivery.settle()


@record.scenario(
    "10-peer-to-peer-transactions",
    "1.0",
    "No broker: a Proton listener on 127.0.0.1:5673 acts as the transaction coordinator; a "
    "Proton client declares a transaction, sends 2 messages in it and commits, then declares a "
    "second, sends 2 and rolls it back. The listener answers declares with declared (txn-1, "
    "txn-2) and accepts every transfer and discharge.",
    **record.PEER_TO_PEER,
)
def s10_peer_transactions(ctx: Any) -> dict[str, Any]:
    """1.0 transactions as RabbitMQ cannot show them: declared, committed and rolled back."""
    record.p2p_port_free()
    return PeerTransactions(ctx).run()
