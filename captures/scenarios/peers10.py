"""AMQP 1.0 recordings of other peers than RabbitMQ with Proton and rhea: Qpid Proton's C++
example broker, the node `amqp10` client, a 0-9-1 broker answering a 1.0 client, and a client
with no SASL mechanism in common with RabbitMQ.

Why: `diagnose` was tuned on RabbitMQ, pika, Proton and rhea; these peers fill in what those
leave out (amqp10 fills in its own end's terminus, 'localhost'; Proton's example broker never
states `available`), or end before anything opens.

What each needs to record (not to test): the C++ broker is Debian's example
(libqpid-proton11-dev-examples ships /usr/share/proton/examples/cpp/broker.cpp;
libqpid-proton-cpp12-dev the library), built once with g++ into a temporary folder; amqp10 is
installed from npm into a temporary folder (node and npm on PATH); garagemq is the one
`record.ensure_garagemq` runs. Ground truth is what the client counted and timed (Date.now()
or time.time(), the clock tcpdump stamps packets with), never read from the capture.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import recorder as record  # captures/recorder/: the harness and shared helpers
from recorder.brokers import dpkg_version

#: where the C++ example broker listens (loopback only; no other recording uses this port)
CPP_PORT = 5677
CPP_SOURCE = Path("/usr/share/proton/examples/cpp")
CPP_DIR = Path(tempfile.gettempdir()) / "amqpscope-proton-cpp"
#: the node amqp10 client, from npm, installed where the recorder keeps it (not in the repository)
AMQP10 = "amqp10@3.6.0"
NODE_DIR = "amqpscope-node-amqp10"
HERE = Path(__file__).resolve().parent
#: how long the starved receiver grants nothing (the issue saw 3 s), and how long the receiver
#: that never grants waits (the issue saw 30 s; a few seconds show the same)
STARVED_SECONDS = 3.0
NEVER_SECONDS = 3.0


def _cpp_broker_binary() -> Path:
    """Proton's C++ example broker, built once (g++); RuntimeError when it cannot be."""
    binary = CPP_DIR / "broker"
    if binary.exists():
        return binary
    source = CPP_SOURCE / "broker.cpp"
    if not source.exists():
        raise RuntimeError(f"no {source}: apt-get install libqpid-proton11-dev-examples")
    if shutil.which("g++") is None:
        raise RuntimeError("g++ is not on PATH (the C++ example broker is built with it)")
    CPP_DIR.mkdir(parents=True, exist_ok=True)
    compile_and_link = ["g++", "-O1", "-std=c++11", f"-I{CPP_SOURCE}", str(source)]
    compile_and_link += ["-o", str(binary), "-lqpid-proton-cpp", "-lpthread"]
    built = subprocess.run(
        compile_and_link,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if built.returncode != 0:
        raise RuntimeError(
            "building broker.cpp failed (apt-get install libqpid-proton-cpp12-dev):"
            f" {built.stderr.strip()[-400:]}"
        )
    return binary


def _cpp_version() -> str:
    """The Debian version of the C++ library the broker was linked with."""
    return dpkg_version("libqpid-proton-cpp12")


@contextlib.contextmanager
def cpp_broker() -> Iterator[dict[str, Any]]:
    """The C++ example broker listening on CPP_PORT for the duration (its own process, ended
    by its pid when the block ends)."""
    binary = _cpp_broker_binary()
    proc = subprocess.Popen(
        [str(binary), "-a", f"127.0.0.1:{CPP_PORT}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if "listening" not in line:
            raise RuntimeError(f"the C++ broker did not start: {line.strip()}")
        yield {"broker": "qpid-proton C++ examples/cpp/broker.cpp", "proton_cpp": _cpp_version()}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def amqp10_client(mode: str, url: str, address: str, pause: float = 0.0) -> dict[str, Any]:
    """Run amqp10_client.js in `mode`; its stdout's last line is what amqp10 observed."""
    modules = record.npm_modules(AMQP10, NODE_DIR)
    done = subprocess.run(
        ["node", str(HERE / "amqp10_client.js"), mode, url, address, str(int(pause * 1000))],
        env=dict(os.environ, NODE_PATH=str(modules)),
        capture_output=True,
        timeout=60,
        check=False,
    )
    lines = done.stdout.decode().strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(
            f"amqp10 client exited with {done.returncode}: {lines[-1:]} {done.stderr[-400:]!r}"
        )
    counts: dict[str, Any] = json.loads(lines[-1])
    counts["amqp10"] = json.loads((modules / "amqp10" / "package.json").read_text())["version"]
    counts["node"] = subprocess.run(
        ["node", "--version"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return counts


CPP = {
    "port": CPP_PORT,
    "capture": record.CaptureSpec(bpf=f"tcp port {CPP_PORT}"),
    "queues": (),
    "needs_broker": False,
}
record.DECODE_AS_AMQP.update(
    {
        "10-amqp10-cpp-broker": CPP_PORT,
        "10-amqp10-cpp-starved": CPP_PORT,
        "10-amqp10-never-granted": CPP_PORT,
        "10-uamqp-cpp-broker": CPP_PORT,
        "10-header-hangup": record.GARAGEMQ_PORT,
        "10-stream-port-hangup": record.STREAM_PORT,
    }
)


def _on_cpp(ctx: record.Ctx, mode: str, pause: float = 0.0) -> dict[str, Any]:
    with cpp_broker() as broker:
        counts = amqp10_client(mode, f"amqp://127.0.0.1:{CPP_PORT}", ctx.q(), pause)
    counts.update(broker)
    counts["connections"] = 1
    return counts


@record.scenario(
    "10-amqp10-cpp-broker",
    "1.0",
    f"The node amqp10 client ({AMQP10}, npm) against Qpid Proton's C++ example broker (Debian's"
    f" examples/cpp/broker.cpp, on 127.0.0.1:{CPP_PORT}), no SASL: a sender sends 3 messages"
    " to a queue (each accepted), a receiver with amqp10's default credit policy takes them"
    " back and settles them, the client disconnects. amqp10 fills in its own terminus"
    " ('localhost'). A happy path.",
    **CPP,
)
def s10_amqp10_cpp_broker(ctx: record.Ctx) -> dict[str, Any]:
    """A happy path of two peers the rest of the recordings do not have."""
    return _on_cpp(ctx, "happy")


@record.scenario(
    "10-amqp10-cpp-starved",
    "1.0",
    f"The node amqp10 client ({AMQP10}) against Proton's C++ example broker (which never states"
    " `available` in a flow): 20 messages sent to a queue (accepted); a receiver (source the"
    " queue, target amqp10's own 'localhost') grants link-credit 5 when it attaches, takes 5,"
    f" then grants nothing for {STARVED_SECONDS:.0f} s while 15 wait; then grants 10 (the 10"
    " transfers follow within milliseconds), takes them, grants the last 5 at once, takes them"
    " and disconnects.",
    **CPP,
)
def s10_amqp10_cpp_starved(ctx: record.Ctx) -> dict[str, Any]:
    """Credit starvation the sender never says it has messages for."""
    counts = _on_cpp(ctx, "starved", STARVED_SECONDS)
    times = counts["times"]
    counts["starvation"] = {
        "started": times["starved"],
        "ended": times["granted"],
        "seconds": round(times["granted"] - times["starved"], 6),
        "first_transfer_after": round(times["first_after_grant"] - times["granted"], 6),
    }
    return counts


@record.scenario(
    "10-amqp10-never-granted",
    "1.0",
    f"The node amqp10 client ({AMQP10}) against Proton's C++ example broker: 5 messages sent to"
    " a queue (accepted); a receiver on the queue whose credit policy grants nothing attaches"
    f" and waits {NEVER_SECONDS:.0f} s (scaled down from the 30 s seen) with no credit while"
    " the 5 wait on the node, then the client disconnects.",
    **CPP,
)
def s10_amqp10_never_granted(ctx: record.Ctx) -> dict[str, Any]:
    """A receiver that never grants credit."""
    counts = _on_cpp(ctx, "never", NEVER_SECONDS)
    times = counts["times"]
    counts["no_credit_seconds"] = round(times["disconnect"] - times["receiver_attached"], 6)
    return counts


def _uamqp(mode: str, port: int, address: str, cert: Path) -> dict[str, Any]:
    """Debian's python3-uamqp under the system python3 (_uamqp_client.py), to `port`."""
    python = "/usr/bin/python3"
    done = subprocess.run(
        [python, str(HERE / "_uamqp_client.py"), mode, str(port), address, str(cert)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(
            f"uamqp ({mode}) exited with {done.returncode} (apt-get install python3-uamqp):"
            f" {done.stderr.strip()[-400:]}"
        )
    result: dict[str, Any] = json.loads(lines[-1])
    return result


@record.scenario(
    "10-uamqp-cpp-broker",
    "1.0",
    "Azure's C uamqp (Debian's python3-uamqp, system python3) against Proton's C++ example"
    f" broker on 127.0.0.1:{CPP_PORT}, SASL ANONYMOUS. uamqp always speaks TLS: each of its"
    " connections goes to a loopback relay that terminates TLS (Python's ssl, a throwaway"
    " certificate uamqp trusts) and carries the bytes to the broker; only the plain leg, relay"
    " to broker, is captured, so its TCP ends are the relay's. A SendClient sends 3 messages"
    " to a queue (each accepted) and closes; a ReceiveClient (prefetch 10) takes them back,"
    " accepts them and closes. uamqp fills in its own terminus (its container-id). A happy"
    " path.",
    **CPP,
)
def s10_uamqp_cpp_broker(ctx: record.Ctx) -> dict[str, Any]:
    """A happy path of uamqp, whose own end's terminus names its container."""
    import ssl

    counts: dict[str, Any] = {"connections": 0, "connections_opened": 0}
    with tempfile.TemporaryDirectory() as tmp, cpp_broker() as broker:
        made = record.self_signed_cert(Path(tmp))
        if made is None:
            raise RuntimeError("cannot make a certificate for the TLS relay")
        cert, key = made
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        for mode in ("send", "receive"):
            relay = record.TlsRelay((record.BROKER_HOST, CPP_PORT), context, server=True)
            try:
                counts.update(_uamqp(mode, relay.start(), ctx.q(), cert))
                if not relay.done.wait(10):
                    raise RuntimeError(f"the TLS relay did not finish: {relay.n}")
            finally:
                relay.stop()
            counts["connections"] += 1
            counts["connections_opened"] += 1  # uamqp raises unless its connection opened
    counts.update(broker)
    counts["address"] = ctx.q()
    return counts


def start_quiet_capture(ctx: record.Ctx, port: int) -> None:
    """Start the capture of `port` without the connections other clients hold open to it now
    (the brokers are shared: another recording's consumer would leak into this one)."""
    held = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError), open(table) as fh:
            for line in list(fh)[1:]:
                cols = line.split()
                local, remote = (int(c.rsplit(":", 1)[1], 16) for c in cols[1:3])
                if remote == port:
                    held.add(local)
    ctx.capture.start(f"tcp port {port}" + "".join(f" and not tcp port {p}" for p in sorted(held)))


@record.scenario(
    "10-amqp10-rabbitmq",
    "1.0",
    f"The node amqp10 client ({AMQP10}) against RabbitMQ's AMQP 1.0 plugin, SASL PLAIN: a"
    " sender sends 3 messages to a queue (each accepted), a receiver with a credit quantum of"
    " 4 takes them back and settles them; amqp10 refreshes its credit (a flow) after the third,"
    " and disconnects at once. RabbitMQ answers the close, then sends a flow for the refreshed"
    " credit after it. A happy path.",
    setup=(("q", {}),),
    queues=(),
    manual_capture=True,
)
def s10_amqp10_rabbitmq(ctx: record.Ctx) -> dict[str, Any]:
    """A happy path on which the broker sends a frame after its close."""
    record.npm_modules(AMQP10, NODE_DIR)  # installed before the capture starts
    start_quiet_capture(ctx, record.BROKER_PORT)
    url = f"amqp://guest:guest@{record.BROKER_HOST}:{record.BROKER_PORT}"
    counts = amqp10_client("refresh", url, f"/amq/queue/{ctx.q()}")
    counts["connections"] = 1
    return counts


class Refused(record.ProtonClient):
    """A Proton client whose connection never opens: it notes the transport error Proton
    reports (the condition and its text) and that no open came."""

    def __init__(self, ctx: record.Ctx, url: str, **connect_kw: Any) -> None:
        super().__init__(ctx, timeout=10.0)
        self.url = url
        self.connect_kw = connect_kw

    def begin(self) -> None:
        start_quiet_capture(self.ctx, int(self.url.rsplit(":", 1)[1]))
        self.connect(**self.connect_kw)

    def on_transport_error(self, event: Any) -> None:
        """Proton's own words for why the transport failed (never on the wire: no frame
        carries them), and the SASL outcome it set locally (no sasl-outcome frame came)."""
        from proton.handlers import MessagingHandler

        self.n["proton_error"] = record.cond_dict(event.transport.condition)
        self.n["proton_error_at"] = time.time()
        outcome = event.transport.sasl().outcome
        if outcome is not None:
            self.n["proton_sasl_outcome"] = record.SASL_OUTCOMES.get(outcome, outcome)
        for task in self.timers:
            task.cancel()
        MessagingHandler.on_transport_error(self, event)

    def run(self) -> record.Counts:
        n = super().run()
        n.setdefault("connections_opened", 0)
        return n


@record.scenario(
    "10-header-hangup",
    "1.0",
    "A python-qpid-proton client (SASL header first) connects to garagemq, a 0-9-1-only broker"
    f" (Debian's garagemq on {record.GARAGEMQ_PORT}): the broker answers with its own protocol"
    " header (AMQP 0-9-1) and closes the TCP connection; Proton reports a framing error and no"
    " connection opens. A real broker that hangs up after the protocol header.",
    port=record.GARAGEMQ_PORT,
    capture=record.CaptureSpec(bpf=f"tcp port {record.GARAGEMQ_PORT}"),
    queues=(),
    manual_capture=True,
)
def s10_header_hangup(ctx: record.Ctx) -> dict[str, Any]:
    """A connection that never opens: the server hung up after the protocol header."""
    n = Refused(ctx, f"amqp://{record.BROKER_HOST}:{record.GARAGEMQ_PORT}").run()
    n["broker"] = "garagemq (AMQP 0-9-1 only)"
    return n


@record.scenario(
    "10-sasl-no-mechanism",
    "1.0",
    "A python-qpid-proton client allowed only SASL SCRAM-SHA-256 (allowed_mechs) connects to"
    " RabbitMQ's AMQP 1.0 plugin, which offers ANONYMOUS, PLAIN and AMQPLAIN: with no mechanism"
    " in common the client sends no sasl-init and closes the TCP connection after"
    " sasl-mechanisms (Proton: 'Authentication failed [mech=none]'); no connection opens.",
    queues=(),
    manual_capture=True,
)
def s10_sasl_no_mechanism(ctx: record.Ctx) -> dict[str, Any]:
    """A connection that never opens: no SASL mechanism in common."""
    url = f"amqp://guest:guest@{record.BROKER_HOST}:{record.BROKER_PORT}"
    n = Refused(ctx, url, allowed_mechs="SCRAM-SHA-256").run()
    n["allowed_mechs"] = ["SCRAM-SHA-256"]
    return n


@record.scenario(
    "10-stream-port-hangup",
    "1.0",
    "A python-qpid-proton client (SASL header first) connects to RabbitMQ's stream protocol"
    f" listener ({record.STREAM_PORT}, the rabbitmq_stream plugin) as if it were AMQP 1.0: the"
    " broker reads the header as a stream frame's size, sends nothing and closes the TCP"
    " connection; Proton reports a framing error (no protocol header) and no connection opens."
    " A real broker that hangs up after the protocol header without a word.",
    port=record.STREAM_PORT,
    capture=record.CaptureSpec(bpf=f"tcp port {record.STREAM_PORT}"),
    queues=(),
    manual_capture=True,
)
def s10_stream_port_hangup(ctx: record.Ctx) -> dict[str, Any]:
    """A connection that never opens: the server hung up on the header, answering nothing."""
    if not record.port_open(record.BROKER_HOST, record.STREAM_PORT):
        raise RuntimeError(f"nothing listens on {record.STREAM_PORT} (the rabbitmq_stream plugin)")
    n = Refused(ctx, f"amqp://{record.BROKER_HOST}:{record.STREAM_PORT}").run()
    n["broker"] = "RabbitMQ's stream protocol listener (rabbitmq_stream)"
    return n
