"""1.0 connections that never opened: the TCP connection ended before either side's `open`.

Which step it stopped at says what happened: the server answered the protocol header with
another protocol's (it does not speak AMQP 1.0 there), or hung up without answering; the client
left after `sasl-mechanisms` without a `sasl-init` (no mechanism in common); or it stopped
elsewhere in the handshake. A failed SASL outcome is `auth.refused`, not this.
"""

from __future__ import annotations

from amqpscope.diagnose.amqp10 import _last_frame
from amqpscope.diagnose.evidence import Evidence, Seen
from amqpscope.diagnose.model import Diagnosis, make
from amqpscope.track.amqp10.connection import ConnectionTracker
from amqpscope.track.amqp10.rules import CLIENT, SERVER

#: the protocol-header of a 1.0 connection, without the SASL or TLS layer it names
AMQP10 = "AMQP 1.0"


def _how(conn: ConnectionTracker, by: str) -> tuple[str, str, str]:
    """(title, what happened, what to check) from how far the handshake got."""
    client, server = conn.headers[CLIENT], conn.headers[SERVER]
    offered = conn.sasl["mechanisms"]
    hung_up = f"the {by} closed the TCP connection" if by != "?" else "the TCP connection ended"
    if client and server and not server[-1].startswith(AMQP10):
        return (
            f"The server answered AMQP 1.0 with {server[-1]}: the connection never opened",
            f"The client sent the protocol header {client[-1]}; the server answered with"
            f" {server[-1]}, the protocol it speaks, and {hung_up}. The server does not speak"
            " AMQP 1.0 on this port.",
            "the port (a 0-9-1-only broker, or a broker whose AMQP 1.0 plugin is not enabled)",
        )
    if client and not server:
        return (
            "The server hung up after the protocol header: the connection never opened",
            f"The client sent the protocol header {client[-1]} and {hung_up} with no header"
            " from the server in answer.",
            "that the server speaks AMQP 1.0 (or this layer: SASL, TLS) on this port, and its"
            " log for a refused or dropped connection",
        )
    if offered is not None and conn.sasl["mechanism"] is None:
        mechanisms = ", ".join(str(m) for m in offered) if isinstance(offered, list) else offered
        return (
            "No SASL mechanism in common: the connection never opened",
            f"The server offered the SASL mechanisms {mechanisms}; the client chose none (no"
            f" sasl-init) and {hung_up}. The client's library found no mechanism it may use"
            " among them.",
            "the mechanisms the client allows (allowed_mechs, its SASL configuration) against"
            " the server's",
        )
    return (
        "The connection ended before it opened",
        f"Neither side sent open: {hung_up} during the handshake.",
        "the server's log for a refused connection",
    )


def not_opened(conn: ConnectionTracker, ev: Evidence) -> list[Diagnosis]:
    """A connection whose TCP ended with no open from either side (not a mid-stream capture,
    not a failed SASL outcome, which `auth.refused` explains)."""
    end = ev.ends.get(conn.conn)
    if (
        end is None
        or conn.mid_stream
        or conn.client_side.opened is not None
        or conn.server_side.opened is not None
        or conn.sasl["outcome"] not in (None, "ok")
        or not conn.headers[CLIENT]
    ):
        return []
    # an RST that answers the other side's FIN: the one that sent the FIN left first
    by = str(end.fields.get("after-fin") or end.fields.get("by") or "?")
    title, what, check = _how(conn, by)
    last: Seen | None = _last_frame(ev, conn.conn)
    return [
        make(
            "connection.not-opened",
            title,
            f"{what} Check {check}.",
            conn=conn.conn,
            start=end.ts,
            evidence=[last.number if last is not None else 0, end.number],
        )
    ]
