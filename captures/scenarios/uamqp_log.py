"""A frame-trace log of Azure's C uamqp (issue 42), recorded side by side with a capture.

Why: uamqp (under uamqp-python, the Azure SDKs' transport before pyamqp) prints each frame as
`-> [ATTACH]* {name,0,false,...}`, its values bare and comma-separated with no field names,
inside a Python `b'...'` repr when uamqp-python logs it. amqpscope/logs/uamqp.py reads it; its
test compares this log's records with the capture of the same run, frame for frame.

What it needs to record (not to test): Debian's python3-uamqp (`apt-get install -y
python3-uamqp`, 1.5.3 at the time of recording) under the system python3, and the C++ example
broker of captures/scenarios/peers10.py (built once with g++). uamqp always speaks TLS, so each
of its two connections goes through a loopback relay that terminates TLS
(`record.TlsRelay(server=True)`, a throwaway certificate uamqp trusts) and carries the bytes to
the broker; only the plain leg, relay to broker, is captured. The ground truth is what uamqp
observed (its send states, the bodies it received, what its accept and reject returned).
"""

from __future__ import annotations

import json
import ssl
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import recorder as record  # captures/recorder/: the harness and shared helpers

HERE = Path(__file__).resolve().parent
#: peers10.py, loaded before this module (record.py loads the scenario modules in name order)
from scenarios import peers10  # noqa: E402  (loaded before this module, in name order)

NAME = "log-uamqp-broker"
CLIENT = str(HERE / "_uamqp_log_client.py")
record.DECODE_AS_AMQP[NAME] = peers10.CPP_PORT


@record.scenario(
    NAME,
    "1.0",
    "Azure's C uamqp (Debian's python3-uamqp 1.5.3, system python3) with debug=True, logging at"
    " DEBUG to stderr in Python logging's usual layout (the frames as `uamqp.c_uamqp INFO"
    " b'-> [OPEN]* {...}'`), against Qpid Proton's C++ example broker on"
    f" 127.0.0.1:{peers10.CPP_PORT}, SASL ANONYMOUS, each connection through a loopback TLS"
    " relay (only the plain leg is captured). A SendClient sends 3 messages to a queue (each"
    " accepted) and closes; a second connection's ReceiveClient (prefetch 10) takes them back,"
    " accepts two, rejects the third with amqp:not-allowed and closes. The trace is"
    f" {NAME}.log.",
    **peers10.CPP,
)
def s_log_uamqp_broker(ctx: record.Ctx) -> dict[str, Any]:
    """uamqp's own trace of a send and a receive, two connections, one log."""
    log_path = Path(ctx.capture.path).parent / f"{NAME}.log"
    with tempfile.TemporaryDirectory() as tmp, peers10.cpp_broker() as broker:
        made = record.self_signed_cert(Path(tmp))
        if made is None:
            raise RuntimeError("cannot make a certificate for the TLS relay")
        cert, key = made
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        relays = [
            record.TlsRelay((record.BROKER_HOST, peers10.CPP_PORT), context, server=True)
            for _ in range(2)
        ]
        try:
            ports = [str(relay.start()) for relay in relays]
            with open(log_path, "wb") as log:
                done = subprocess.run(
                    ["/usr/bin/python3", CLIENT, *ports, ctx.q(), str(cert)],
                    stdout=subprocess.PIPE,
                    stderr=log,
                    timeout=90,
                    check=False,
                )
            lines = done.stdout.decode().strip().splitlines()
            if done.returncode != 0 or not lines:
                raise RuntimeError(
                    f"uamqp exited with {done.returncode} (apt-get install python3-uamqp)"
                )
            for relay in relays:
                relay.finish()
        finally:
            for relay in relays:
                relay.stop()
    counts: dict[str, Any] = json.loads(lines[-1])
    counts.update(broker)
    counts["connections"] = 2
    counts["address"] = ctx.q()
    counts["log"] = log_path.name
    counts["log_lines"] = len(log_path.read_bytes().splitlines())
    return counts
