"""AMQP 1.0 peer to peer: two Proton containers and no broker (`harness.PEER_TO_PEER`,
`amqp10.PeerToPeer`)."""

from __future__ import annotations

from typing import Any

from recorder.amqp10 import PeerToPeer
from recorder.harness import PEER_TO_PEER, Ctx, p2p_port_free, scenario


@scenario(
    "10-peer-to-peer",
    "1.0",
    "No broker: a Proton container listens on 127.0.0.1:5673 and a Proton client (same reactor) "
    "connects with SASL ANONYMOUS and sends 10 unsettled messages; the listener settles them "
    "cycling accepted, rejected (with an error condition), released, modified (p7 also "
    "undeliverable-here with annotations).",
    **PEER_TO_PEER,
)
def s10_peer_to_peer(ctx: Ctx) -> dict[str, Any]:
    """Proton on both ends: outcomes RabbitMQ never produces (modified, rejected with error)."""
    p2p_port_free()
    return PeerToPeer(ctx).run()
