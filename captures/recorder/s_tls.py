"""TLS scenarios: pika over TLS 1.2 and 1.3 (a key log, and the secrets embedded in a pcapng),
Proton over TLS, and the AMQP 1.0 in-band TLS upgrade."""

from __future__ import annotations

import socket
import ssl
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

import pika
import pika.exceptions

from recorder.amqp091 import basic_round_trip
from recorder.amqp10 import PeerToPeer
from recorder.harness import (
    BROKER_HOST,
    P2P_PORT,
    PEER_TO_PEER,
    CaptureSpec,
    Ctx,
    busy_connections,
    scenario,
)
from recorder.s10_messaging import SendThenReceive
from recorder.tls import (
    TLS_LISTENER,
    TLS_PORT,
    TlsRelay,
    embed_secrets,
    keylog_path,
    noting_handshakes,
    self_signed_cert,
    tls_client_context,
)


def s_091_tls(ctx: Ctx, version: ssl.TLSVersion) -> dict[str, Any]:
    """091-publish-consume's conversation over TLS to RabbitMQ's 5671."""
    facts: dict[str, Any] = {}
    context = noting_handshakes(tls_client_context(ctx, version), facts)
    n = basic_round_trip(
        ctx,
        messages=10,
        port=TLS_PORT,
        ssl_options=pika.SSLOptions(context, "localhost"),
    )
    n["tls"] = facts
    n["keylog"] = keylog_path(ctx).name
    return n


def pika_over_tls(name: str, version: ssl.TLSVersion, said: str, note: str = "", **kw: Any) -> None:
    """Register `name`: s_091_tls over TLS `version` (`said`: "1.2" or "1.3"); the 0-9-1 TLS
    scenarios differ by nothing else but how they are captured (`kw`)."""
    scenario(
        name,
        "0-9-1",
        f"091-publish-consume over TLS {said}: pika (Python's ssl, key log in {name}.keys) to "
        f"RabbitMQ's TLS listener on {TLS_PORT}{note}; declare, publish 10, consume and ack them, "
        "cancel, delete the queue, close.",
        **{**TLS_LISTENER, **kw},
    )(partial(s_091_tls, version=version))


pika_over_tls("091-tls12", ssl.TLSVersion.TLSv1_2, "1.2", " (a certificate made by record.py)")
pika_over_tls("091-tls13", ssl.TLSVersion.TLSv1_3, "1.3")
scenario(
    "091-tls13-embedded",
    "0-9-1",
    "As 091-tls13, recorded with dumpcap into pcapng; the key log was then injected into the file "
    "(editcap --inject-secrets tls,KEYS: a Decryption Secrets Block), so it decrypts with no "
    "option given.",
    port=TLS_PORT,
    capture=CaptureSpec(tool="dumpcap", bpf=f"tcp port {TLS_PORT}", ext="pcapng"),
    post=embed_secrets,
)(partial(s_091_tls, version=ssl.TLSVersion.TLSv1_3))


@scenario(
    "10-tls",
    "1.0",
    "10-send-receive over TLS 1.3 to RabbitMQ's TLS listener on 5671: Proton's reactor speaks "
    "to a loopback relay that carries its bytes through Python's ssl (OpenSSL, key log in "
    "10-tls.keys; Proton's own SSL cannot log keys). 10 unsettled messages accepted by the "
    "broker, received back and accepted, close. Only the TLS leg is captured.",
    **TLS_LISTENER,
    setup=(("q", {}),),
    queues=(),
)
def s10_tls(ctx: Ctx) -> dict[str, Any]:
    relay = TlsRelay((BROKER_HOST, TLS_PORT), tls_client_context(ctx, ssl.TLSVersion.TLSv1_3))
    try:
        client = SendThenReceive(ctx, 10)
        client.url = f"amqp://127.0.0.1:{relay.start()}"
        n = client.run()
        relay.finish()
    finally:
        relay.stop()
    n["tls"] = relay.n.get("tls")
    n["keylog"] = keylog_path(ctx).name
    return n


class InBandPeerToPeer(PeerToPeer):
    """10-peer-to-peer, but the connection goes through the in-band TLS upgrade: the client's
    relay sends `AMQP 2 1 0 0` to 5673, the server's answers it, and both switch to TLS."""

    def __init__(self, ctx: Ctx, client_port: int, listener_port: int) -> None:
        super().__init__(ctx)
        self.url = f"amqp://127.0.0.1:{client_port}"
        self.listener_port = listener_port

    def begin(self) -> None:
        self.acceptor = self.container.listen(f"127.0.0.1:{self.listener_port}")
        self.conn = self.connect()
        self.sender = self.container.create_sender(self.conn, "amqpscope/peer-to-peer")


@scenario(
    "10-tls-inband",
    "1.0",
    "No broker: 10-peer-to-peer through AMQP 1.0's in-band TLS upgrade on 127.0.0.1:5673 (which "
    "Wireshark does not follow). Each end exchanges the TLS protocol header `AMQP 2 1 0 0`, then "
    "TLS 1.3 (Python's ssl on both ends, key log in 10-tls-inband.keys) carries the Proton "
    "client's and listener's bytes: SASL ANONYMOUS, 10 unsettled messages settled accepted, "
    "rejected, released, modified in turn. Only the 5673 leg is captured.",
    **PEER_TO_PEER,
)
def s10_tls_inband(ctx: Ctx) -> dict[str, Any]:
    if busy_connections({P2P_PORT}):  # (no probe connection: it would be captured)
        raise RuntimeError(f"port {P2P_PORT} is already in use")
    with tempfile.TemporaryDirectory() as tmp:
        made = self_signed_cert(Path(tmp))
        if made is None:
            raise RuntimeError("cannot make a certificate")
        server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_context.load_cert_chain(*made)
        with socket.create_server(("127.0.0.1", 0)) as probe:
            listener_port = probe.getsockname()[1]  # where Proton's listener will be
        server = TlsRelay(
            ("127.0.0.1", listener_port), server_context, True, True, listen_port=P2P_PORT
        )
        client = TlsRelay(
            ("127.0.0.1", P2P_PORT),
            tls_client_context(ctx, ssl.TLSVersion.TLSv1_3),
            inband=True,
        )
        try:
            server.start()
            peers = InBandPeerToPeer(ctx, client.start(), listener_port)
            n = peers.run()
            client.finish()
            server.finish()
        finally:
            client.stop()
            server.stop()
    n["tls"] = client.n.get("tls")
    n["inband_headers"] = {
        "server_received": server.n.get("header_received"),
        "client_received": client.n.get("header_received"),
    }
    n["keylog"] = keylog_path(ctx).name
    return n
