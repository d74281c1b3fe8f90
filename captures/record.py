#!/usr/bin/env python3
"""Record real AMQP 0-9-1 and AMQP 1.0 traffic into pcap files with ground truth.

Why this exists: amqpscope's decoders and trackers must be tested against what
real brokers and client libraries put on the wire, not against hand-made bytes.
Each scenario drives pika (0-9-1) or Qpid Proton (1.0) against a local RabbitMQ
while tcpdump/dumpcap records loopback, and writes NAME.json next to the capture
with counts that the *client library* observed while the scenario ran (never
derived from the capture itself), so tests can compare the analyzer against them.

Usage:
    python3 captures/record.py                  # record every scenario
    python3 captures/record.py --only 091-get 10-drain
    python3 captures/record.py --list
    python3 captures/record.py --out /tmp/caps  # write somewhere else

Needs root (packet capture), tcpdump, dumpcap (for the pcapng capture), and a
RabbitMQ 3.x install; the broker is started and its plugins enabled if needed.
Each scenario runs in its own process group with a timeout so a hang cannot
stall the whole run; the exit status is non-zero if any scenario failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import hashlib
import http.client
import http.server
import importlib.metadata
import json
import os
import platform
import random
import re
import shlex
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pika
import pika.exceptions
from proton import Condition, Connection, Delivery, Endpoint, Link, Message, Receiver
from proton.handlers import MessagingHandler, TransactionHandler
from proton.reactor import AtMostOnce, Container

HERE = Path(__file__).resolve().parent
BROKER_HOST = "127.0.0.1"
BROKER_PORT = 5672
STREAM_PORT = 5552
P2P_PORT = 5673
#: garagemq (a Go 0-9-1 broker, Debian's `garagemq`) listens here, beside RabbitMQ on 5672
GARAGEMQ_PORT = 5674
GARAGEMQ_ADMIN_PORT = 15674
#: garagemq's own configuration, database and log: outside the work tree, kept between runs
GARAGEMQ_HOME = Path(os.environ.get("AMQPSCOPE_GARAGEMQ_HOME", "/var/tmp/amqpscope-garagemq"))
GUEST = ("guest", "guest")
# Plugins the scenarios use; only amqp1_0 is mandatory, the others add coverage.
REQUIRED_PLUGINS = ("rabbitmq_amqp1_0",)
OPTIONAL_PLUGINS = ("rabbitmq_stream", "rabbitmq_consistent_hash_exchange")
LINKTYPES = {1: "EN10MB", 113: "LINUX_SLL", 276: "LINUX_SLL2"}
RING_KIB = 131072  # capture buffer; see Capture._command
SASL_OUTCOMES = {0: "ok", 1: "auth", 2: "sys", 3: "perm", 4: "temp"}


def log(msg: str) -> None:
    """Progress output goes to stderr so CI logs show where a run stalled."""
    print(f"[record] {msg}", file=sys.stderr, flush=True)


class Counts(dict[str, Any]):
    """Ground-truth counters, filled in by scenario code as the client library reports events."""

    def inc(self, key: str, n: int = 1) -> None:
        """Count one more occurrence of `key`."""
        self[key] = self.get(key, 0) + n

    def add(self, key: str, item: Any) -> None:
        """Append a detailed record (errors, per-delivery facts) under `key`."""
        self.setdefault(key, []).append(item)

    def tally(self, key: str, sub: str, n: int = 1) -> None:
        """Count `sub` inside the mapping `key`, e.g. outcomes by kind."""
        bucket = self.setdefault(key, {})
        bucket[sub] = bucket.get(sub, 0) + n


# --------------------------------------------------------------------------
# Packet capture
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class CaptureSpec:
    """How one scenario is captured: tool, interface, filter and file format."""

    tool: str = "tcpdump"
    interface: str = "lo"
    bpf: str = f"tcp port {BROKER_PORT}"
    extra: tuple[str, ...] = ()
    ext: str = "pcap"


#: what every Proton-to-Proton scenario is: no broker, its listener's port captured
PEER_TO_PEER: dict[str, Any] = {
    "port": P2P_PORT,
    "capture": CaptureSpec(bpf=f"tcp port {P2P_PORT}"),
    "queues": (),
    "needs_broker": False,
}


class Capture:
    """A running tcpdump/dumpcap process that is known to be capturing.

    Why: a capture started "too late" silently misses the connection
    handshake, and one stopped abruptly loses buffered packets, so start()
    waits for the tool's ready line and stop() uses SIGINT and checks the
    tool's own packet/drop statistics.
    """

    def __init__(self, spec: CaptureSpec, path: Path) -> None:
        self.spec = spec
        self.path = path
        self.bpf = spec.bpf
        self.proc: subprocess.Popen[str] | None = None
        self.lines: list[str] = []
        self.ready = threading.Event()
        self.reader: threading.Thread | None = None
        self.command: list[str] = []

    @property
    def started(self) -> bool:
        """True once start() succeeded (mid-stream scenarios start it themselves)."""
        return self.proc is not None

    def _command(self) -> list[str]:
        if self.spec.tool == "tcpdump":
            # -U + --immediate-mode: write every packet as it arrives (no libpcap
            # block buffering). Immediate mode uses TPACKET_V2, whose ring slots
            # are sized for lo's 64 KiB MTU, so the default 2 MB ring overflows
            # after ~30 packets: -B enlarges it. -Z root keeps files root-owned.
            return [
                "tcpdump",
                "-i",
                self.spec.interface,
                "-U",
                "--immediate-mode",
                "-B",
                str(RING_KIB),
                "-Z",
                "root",
                *self.spec.extra,
                "-w",
                str(self.path),
                self.bpf,
            ]
        if self.spec.tool == "dumpcap":
            return [
                "dumpcap",
                "-i",
                self.spec.interface,
                "-B",
                str(RING_KIB // 1024),
                "-f",
                self.bpf,
                *self.spec.extra,
                "-w",
                str(self.path),
            ]
        raise ValueError(f"unknown capture tool {self.spec.tool}")

    def _read_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        marker = "listening on" if self.spec.tool == "tcpdump" else "File:"
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))
            if marker in line:
                self.ready.set()

    def start(self, bpf: str | None = None) -> None:
        """Start the capture and block until the tool reports it is capturing."""
        if self.proc is not None:
            raise RuntimeError("capture already started")
        if bpf:
            self.bpf = bpf
        self.path.unlink(missing_ok=True)
        self.command = self._command()
        log(f"  $ {shlex.join(self.command)}")
        self.proc = subprocess.Popen(
            self.command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.reader = threading.Thread(target=self._read_stderr, daemon=True)
        self.reader.start()
        if not self.ready.wait(15):
            self.kill()
            raise RuntimeError(f"{self.spec.tool} did not start capturing: {self.lines}")
        # The ready line is printed after the filter is installed; a short pause
        # covers dumpcap, whose "File:" line can precede the first poll.
        time.sleep(0.3 if self.spec.tool == "tcpdump" else 0.8)

    def stop(self) -> dict[str, Any]:
        """Stop with SIGINT (clean flush) and return the tool's capture statistics."""
        if self.proc is None:
            raise RuntimeError("capture was never started")
        if self.spec.tool == "dumpcap":
            time.sleep(0.5)  # dumpcap writes on its own update interval
        self.proc.send_signal(signal.SIGINT)
        try:
            rc = self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError(f"{self.spec.tool} did not exit after SIGINT") from None
        if self.reader is not None:
            self.reader.join(5)
        self.proc = None
        text = "\n".join(self.lines)
        if rc != 0:
            raise RuntimeError(f"{self.spec.tool} exited with {rc}: {text}")
        stats: dict[str, Any] = {}
        if self.spec.tool == "tcpdump":
            if m := re.search(r"(\d+) packets? captured", text):
                stats["packets_captured"] = int(m.group(1))
            if m := re.search(r"(\d+) packets? dropped by kernel", text):
                stats["packets_dropped"] = int(m.group(1))
        else:
            if m := re.search(r"Packets captured: (\d+)", text):
                stats["packets_captured"] = int(m.group(1))
            if m := re.search(r"received/dropped on interface '[^']*': \d+/(\d+)", text):
                stats["packets_dropped"] = int(m.group(1))
        if stats.get("packets_dropped"):
            raise RuntimeError(f"{self.spec.tool} dropped packets: {text}")
        if not stats.get("packets_captured"):
            raise RuntimeError(f"{self.spec.tool} captured nothing: {text}")
        return stats

    def kill(self) -> None:
        """Last-resort stop when a scenario failed; the partial file is discarded anyway."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        self.proc = None


def pcap_file_info(path: Path) -> dict[str, Any]:
    """Read format, link type and timestamp precision from the file header.

    Why: the JSON should state what the file really is (e.g. SLL2 vs SLL),
    as written by the capture tool, without interpreting any packets.
    """
    head = path.read_bytes()[:64]
    magic = head[:4]
    if magic in (
        b"\xd4\xc3\xb2\xa1",
        b"\x4d\x3c\xb2\xa1",
        b"\xa1\xb2\xc3\xd4",
        b"\xa1\xb2\x3c\x4d",
    ):
        endian = "<" if magic[0] in (0xD4, 0x4D) else ">"
        linktype = struct.unpack(endian + "I", head[20:24])[0]
        nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
        return {
            "format": "pcap",
            "magic": struct.unpack(endian + "I", magic)[0].to_bytes(4, "big").hex(),
            "link_type": LINKTYPES.get(linktype, str(linktype)),
            "link_type_value": linktype,
            "timestamp_precision": "nano" if nano else "micro",
        }
    if magic == b"\x0a\x0d\x0d\x0a":
        endian = "<" if head[8:12] == b"\x4d\x3c\x2b\x1a" else ">"
        shb_len = struct.unpack(endian + "I", head[4:8])[0]
        data = path.read_bytes()
        block_type, block_len = struct.unpack(endian + "II", data[shb_len : shb_len + 8])
        idb = data[shb_len : shb_len + block_len]
        linktype = struct.unpack(endian + "H", idb[8:10])[0] if block_type == 1 else -1
        return {
            "format": "pcapng",
            "link_type": LINKTYPES.get(linktype, str(linktype)),
            "link_type_value": linktype,
            "timestamp_precision": _pcapng_precision(idb, endian),
        }
    raise RuntimeError(f"{path}: not a pcap/pcapng file")


def _pcapng_precision(idb: bytes, endian: str) -> str:
    """The first interface's timestamp resolution, from its if_tsresol option (code 9)."""
    pos = 16  # block type, length, link type, reserved, snaplen
    while pos + 4 <= len(idb) - 4:
        code, size = struct.unpack(endian + "HH", idb[pos : pos + 4])
        if code == 0:
            break
        if code == 9 and size == 1:
            value = idb[pos + 4]
            if value & 0x80:
                return f"2^-{value & 0x7F} s"
            return {6: "micro", 9: "nano"}.get(value, f"10^-{value} s")
        pos += 4 + (size + 3) // 4 * 4
    return "micro (if_tsresol absent: the default)"


# --------------------------------------------------------------------------
# Broker management
# --------------------------------------------------------------------------


def p2p_port_free() -> None:
    """Raise unless the peer-to-peer listener's port is free (the probe's refused connection
    shows in the capture, before the scenario's own)."""
    if busy_connections({P2P_PORT}) or port_open("127.0.0.1", P2P_PORT, 0.5):
        raise RuntimeError(f"port {P2P_PORT} is already in use")


def port_open(host: str, port: int, timeout: float = 1.0) -> bool:
    """Cheap liveness probe that needs no Erlang CLI start-up."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def run_cmd(
    cmd: list[str], timeout: float = 120, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run a broker CLI command non-interactively, with a timeout (CI has no stdin)."""
    proc = subprocess.run(
        cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout
    )
    if check and proc.returncode != 0:
        raise RuntimeError(
            f"{shlex.join(cmd)} failed ({proc.returncode}): {proc.stdout}{proc.stderr}"
        )
    return proc


def amqp10_header_reply() -> bytes:
    """Send the AMQP 1.0 SASL protocol header; the amqp1_0 plugin answers with one."""
    with socket.create_connection((BROKER_HOST, BROKER_PORT), timeout=5) as sock:
        sock.sendall(b"AMQP\x03\x01\x00\x00")
        return sock.recv(8)


def wait_for_broker(deadline: float) -> None:
    """Wait until the node has booted and 5672 accepts connections."""
    while True:
        ok = run_cmd(["rabbitmqctl", "await_startup", "--timeout", "30"], timeout=60, check=False)
        if ok.returncode == 0 and port_open(BROKER_HOST, BROKER_PORT):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"RabbitMQ did not start: {ok.stdout}{ok.stderr}")
        time.sleep(2)


def ensure_broker() -> None:
    """Make sure RabbitMQ runs on 5672 with the AMQP 1.0 plugin; idempotent.

    Why: CI runs `make` as root on a fresh machine; the broker may be stopped
    and the plugin disabled. Plugins are enabled offline before a start (no
    restart needed) or online on a running node. Guest may log in over
    loopback and the 1.0 plugin maps SASL ANONYMOUS to its default_user
    (guest), so no configuration file is needed.
    """
    wanted = [*REQUIRED_PLUGINS, *OPTIONAL_PLUGINS]
    if not port_open(BROKER_HOST, BROKER_PORT):
        log("RabbitMQ is not listening on 5672; enabling plugins offline and starting it")
        if (
            run_cmd(["rabbitmq-plugins", "enable", "--offline", *wanted], check=False).returncode
            != 0
        ):
            run_cmd(["rabbitmq-plugins", "enable", "--offline", *REQUIRED_PLUGINS])
        subprocess.run(
            ["rabbitmq-server", "-detached"],
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            check=True,
            timeout=60,
        )
        wait_for_broker(time.monotonic() + 120)
    else:
        wait_for_broker(time.monotonic() + 60)
        listed = run_cmd(["rabbitmq-plugins", "list", "--enabled", "--minimal"]).stdout.split()
        missing = [p for p in wanted if p not in listed]
        if missing:
            log(f"enabling plugins {missing}")
            if run_cmd(["rabbitmq-plugins", "enable", *missing], check=False).returncode != 0:
                run_cmd(
                    ["rabbitmq-plugins", "enable", *[p for p in missing if p in REQUIRED_PLUGINS]]
                )
    deadline = time.monotonic() + 30
    while (reply := amqp10_header_reply()) != b"AMQP\x03\x01\x00\x00":
        if time.monotonic() > deadline:
            raise RuntimeError(f"AMQP 1.0 plugin not answering on 5672 (got {reply!r})")
        time.sleep(1)
    log("RabbitMQ is up with AMQP 1.0 on 5672")
    ensure_tls_listener()


#: garagemq's configuration: its package's /etc/garagemq/config.yaml (guest/guest, md5 checked),
#: moved to GARAGEMQ_PORT, with a database of its own so the Debian service is never touched
GARAGEMQ_CONFIG = """\
proto: amqp-rabbit
users:
  - username: guest
    password: 084e0343a0486ff05530df6c705c8bb4 # guest md5
tcp:
  ip: 127.0.0.1
  port: {port}
  nodelay: false
  readBufSize: 196608
  writeBufSize: 196608
admin:
  ip: 127.0.0.1
  port: {admin_port}
queue:
  shardSize: 8192
  maxMessagesInRam: 131072
db:
  defaultPath: {db}
  engine: badger
vhost:
  defaultPath: /
security:
  passwordCheck: md5
connection:
  channelsMax: 4096
  frameMaxSize: 65536
"""


def ensure_garagemq() -> None:
    """Make sure garagemq runs on GARAGEMQ_PORT; idempotent.

    Why: diagnoses must hold on other brokers than RabbitMQ (garagemq answers differently: 530 on
    a wrong password, no tx.select-ok, requeues without the redelivered bit). It is started
    detached with a configuration of its own, as `make broker` starts RabbitMQ.
    """
    if port_open(BROKER_HOST, GARAGEMQ_PORT):
        return
    binary = shutil.which("garagemq")
    if binary is None:
        raise RuntimeError("no garagemq (Debian's garagemq package has it)")
    GARAGEMQ_HOME.mkdir(parents=True, exist_ok=True)
    config = GARAGEMQ_HOME / "config.yaml"
    config.write_text(
        GARAGEMQ_CONFIG.format(
            port=GARAGEMQ_PORT, admin_port=GARAGEMQ_ADMIN_PORT, db=GARAGEMQ_HOME / "db"
        )
    )
    with open(GARAGEMQ_HOME / "garagemq.log", "ab") as out:
        subprocess.Popen(
            [binary, "--config", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=GARAGEMQ_HOME,
            start_new_session=True,
        )
    deadline = time.monotonic() + 30
    while not port_open(BROKER_HOST, GARAGEMQ_PORT):
        if time.monotonic() > deadline:
            raise RuntimeError(f"garagemq did not listen on {GARAGEMQ_PORT}: see {out.name}")
        time.sleep(0.2)
    log(f"garagemq is up on {GARAGEMQ_PORT}")


def first_line(cmd: list[str]) -> str | None:
    """First non-empty output line of a --version style command, or None if missing."""
    if not shutil.which(cmd[0]):
        return None
    proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    lines = [line.strip() for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    return lines[0] if lines else None


def software_versions(with_broker: bool) -> dict[str, Any]:
    """Versions of everything that shaped the bytes on the wire, for the JSON and README."""
    versions: dict[str, Any] = {
        "python": platform.python_version(),
        "pika": pika.__version__,
        "python-qpid-proton": importlib.metadata.version("python-qpid-proton"),
        "kernel": platform.release(),
        "tcpdump": first_line(["tcpdump", "--version"]),
        "dumpcap": first_line(["dumpcap", "--version"]),
    }
    tcpdump_out = subprocess.run(["tcpdump", "--version"], capture_output=True, text=True).stdout
    if m := re.search(r"libpcap version (\S+)", tcpdump_out):
        versions["libpcap"] = m.group(1)
    if with_broker:
        versions["rabbitmqctl"] = first_line(["rabbitmqctl", "version"])
        conn = pika.BlockingConnection(pika_params(name="amqpscope recorder version probe"))
        props = conn._impl.server_properties  # the broker's connection.start properties
        conn.close()

        def text(value: Any) -> str:
            return value.decode() if isinstance(value, bytes) else str(value)

        versions["rabbitmq_server"] = text(props.get("version"))
        versions["erlang"] = text(props.get("platform"))
    return versions


# --------------------------------------------------------------------------
# Scenario plumbing
# --------------------------------------------------------------------------


@dataclass
class Ctx:
    """What a scenario gets: its name (for unique resource names) and its capture."""

    name: str
    capture: Capture
    state: dict[str, Any] = field(default_factory=dict)
    port: Any = None  # scenarios with dynamic ports report them here

    def q(self, suffix: str = "q") -> str:
        """Broker resource name unique to this scenario, so runs never collide."""
        return f"amqpscope.{self.name}.{suffix}"


RunFn = Callable[[Ctx], dict[str, Any]]


@dataclass(frozen=True)
class Scenario:
    """One recording: what to run, how to capture it, and which broker objects to clean up."""

    name: str
    protocol: str
    description: str
    run: RunFn
    port: Any = BROKER_PORT
    capture: CaptureSpec = CaptureSpec()
    queues: tuple[str, ...] = ("q",)
    exchanges: tuple[str, ...] = ()
    setup: tuple[tuple[str, dict[str, Any]], ...] = ()  # queues pre-declared outside the capture
    prepare: Callable[[Ctx], None] | None = None
    manual_capture: bool = False
    needs_broker: bool = True
    timeout: float = 60.0
    post: Callable[[Path, Path, str], None] | None = None  # (capture, out dir, name) once final
    #: run once the capture stopped, whatever happened (e.g. lift a broker alarm the scenario
    #: left on so that nothing after the client's end reaches the capture)
    cleanup: Callable[[Ctx], None] | None = None


SCENARIOS: dict[str, Scenario] = {}


def scenario(name: str, protocol: str, description: str, **kw: Any) -> Callable[[RunFn], RunFn]:
    """Register a scenario; registration order is recording order."""

    def register(fn: RunFn) -> RunFn:
        SCENARIOS[name] = Scenario(
            name=name, protocol=protocol, description=description, run=fn, **kw
        )
        return fn

    return register


def busy_connections(ports: set[int]) -> list[str]:
    """Live TCP connections touching `ports` (from /proc, so no iproute2 dependency).

    Why: a connection still closing from the previous scenario (or someone
    else's client) would leak packets into this scenario's capture.
    """
    idle_states = {"0A", "06", "07"}  # LISTEN, TIME_WAIT, CLOSE
    busy = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError), open(table) as fh:
            for line in list(fh)[1:]:
                cols = line.split()
                local_port = int(cols[1].rsplit(":", 1)[1], 16)
                remote_port = int(cols[2].rsplit(":", 1)[1], 16)
                if cols[3] not in idle_states and (local_port in ports or remote_port in ports):
                    busy.append(f"{table}: {cols[1]} -> {cols[2]} state {cols[3]}")
    return busy


def wait_quiet(ports: set[int], timeout: float) -> list[str]:
    """Wait until no connection on `ports` is open or closing; return leftovers."""
    deadline = time.monotonic() + timeout
    while (busy := busy_connections(ports)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return busy


def ports_of(port: Any) -> set[int]:
    """Normalise the JSON "port" value (int or list) to a set."""
    return set(port) if isinstance(port, (list, tuple)) else {int(port)}


def pika_params(
    host: str = BROKER_HOST,
    user: str = GUEST[0],
    password: str = GUEST[1],
    name: str = "amqpscope",
    port: int = BROKER_PORT,
    **kw: Any,
) -> pika.ConnectionParameters:
    """Connection parameters with short timeouts so failures surface quickly."""
    return pika.ConnectionParameters(
        host=host,
        port=port,
        credentials=pika.PlainCredentials(user, password),
        connection_attempts=1,
        socket_timeout=5,
        stack_timeout=15,
        blocked_connection_timeout=15,
        client_properties={"connection_name": name},
        **kw,
    )


def broker_housekeeping(ctx: Ctx, sc: Scenario, declare: bool) -> None:
    """Delete this scenario's queues/exchanges (and pre-declare setup queues) outside the capture.

    Why: a failed earlier run may have left messages behind, which would
    change what this run's consumers see.
    """
    names = [ctx.q(s) for s in sc.queues] + [ctx.q(s) for s, _ in sc.setup]
    if not names and not sc.exchanges:
        return
    conn = pika.BlockingConnection(pika_params(name=f"amqpscope housekeeping {ctx.name}"))
    try:
        ch = conn.channel()
        for qname in dict.fromkeys(names):
            ch.queue_delete(qname)
        for ex in sc.exchanges:
            ch.exchange_delete(ctx.q(ex))
        if declare:
            for suffix, args in sc.setup:
                quorum = args.get("x-queue-type") == "quorum"
                ch.queue_declare(ctx.q(suffix), durable=quorum, arguments=args or None)
    finally:
        conn.close()


# --------------------------------------------------------------------------
# AMQP 0-9-1 helpers (pika)
# --------------------------------------------------------------------------


def connect_091(ctx: Ctx, n: Counts, **kw: Any) -> pika.BlockingConnection:
    """Open a counted pika connection named after the scenario (visible in start-ok)."""
    kw.setdefault("name", f"amqpscope {ctx.name}")
    conn = pika.BlockingConnection(pika_params(**kw))
    n.inc("connections")
    return conn


def channel_with_queue(ctx: Ctx, n: Counts) -> tuple[pika.BlockingConnection, Any, str]:
    """The start most 0-9-1 scenarios share: a connection, a channel, the scenario's queue."""
    conn = connect_091(ctx, n)
    ch = conn.channel()
    n.inc("channels")
    q = ctx.q()
    ch.queue_declare(q)
    n.inc("queue_declares")
    return conn, ch, q


def pump(conn: pika.BlockingConnection, done: Callable[[], bool], timeout: float = 15.0) -> None:
    """Run pika's I/O loop until `done()`; raise instead of hanging."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError("timed out waiting for the broker")
        conn.process_data_events(time_limit=0.05)


def publish_plain(
    ch: Any, n: Counts, routing_key: str, body: bytes, exchange: str = "", **props: Any
) -> None:
    """basic.publish with text properties, counted."""
    ch.basic_publish(
        exchange, routing_key, body, pika.BasicProperties(content_type="text/plain", **props)
    )
    n.inc("publishes")


def consume_and_ack(
    conn: pika.BlockingConnection, ch: Any, n: Counts, queue: str, count: int
) -> None:
    """basic.consume with manual acks until `count` messages arrived, then basic.cancel."""
    got: list[int] = []

    def on_message(chan: Any, method: Any, _props: Any, _body: bytes) -> None:
        n.inc("deliveries")
        chan.basic_ack(method.delivery_tag)
        n.inc("acks")
        got.append(method.delivery_tag)

    tag = ch.basic_consume(queue, on_message)
    n.inc("consumers")
    pump(conn, lambda: len(got) >= count)
    ch.basic_cancel(tag)
    n.inc("cancels")


def close_091(conn: pika.BlockingConnection, n: Counts) -> None:
    """Client-initiated connection.close, counted."""
    conn.close()
    n.inc("connection_closes")


def basic_round_trip(ctx: Ctx, host: str = BROKER_HOST, messages: int = 3, **kw: Any) -> Counts:
    """Small publish/consume/ack exchange reused by the capture-format scenarios (`kw`: more
    connection parameters, e.g. TLS)."""
    n = Counts()
    conn = connect_091(ctx, n, host=host, **kw)
    ch = conn.channel()
    n.inc("channels")
    q = ctx.q()
    ch.queue_declare(q)
    n.inc("queue_declares")
    for i in range(messages):
        publish_plain(ch, n, q, f"{ctx.name} message {i}".encode(), message_id=f"m{i}")
    consume_and_ack(conn, ch, n, q, messages)
    ch.queue_delete(q)
    n.inc("queue_deletes")
    close_091(conn, n)
    return n


# --------------------------------------------------------------------------
# AMQP 0-9-1 scenarios
# --------------------------------------------------------------------------


@scenario(
    "091-publish-consume",
    "0-9-1",
    "One connection and channel: declare a queue, publish 10 messages to the default exchange, "
    "consume them with basic.consume and ack each one, cancel, delete the queue, close.",
)
def s_publish_consume(ctx: Ctx) -> dict[str, Any]:
    """The baseline conversation every decoder must get right."""
    return basic_round_trip(ctx, messages=10)


@scenario(
    "091-ack-nack-reject",
    "0-9-1",
    "Six messages m0..m5 consumed with manual acks: m0-m2 acked with one basic.ack multiple=True, "
    "m3 nacked with requeue=True then acked when redelivered, m4 rejected with requeue=False, m5 "
    "acked.",
)
def s_ack_nack_reject(ctx: Ctx) -> dict[str, Any]:
    """Exercises multiple-ack ranges, requeue/redelivery and reject bookkeeping."""
    n = Counts()
    conn, ch, q = channel_with_queue(ctx, n)
    for i in range(6):
        publish_plain(ch, n, q, f"m{i}".encode(), message_id=f"m{i}")
    done: list[str] = []

    def on_message(chan: Any, method: Any, _props: Any, body: bytes) -> None:
        tag, text = method.delivery_tag, body.decode()
        n.inc("deliveries")
        n.add(
            "delivery_log",
            {"delivery_tag": tag, "body": text, "redelivered": bool(method.redelivered)},
        )
        if method.redelivered:
            n.inc("redeliveries")
        if text == "m2":
            chan.basic_ack(tag, multiple=True)
            n.inc("acks")
            n.inc("acks_multiple")
            n.inc("acked_messages", 3)
            done.extend(["m0", "m1", "m2"])
        elif text == "m3" and not method.redelivered:
            chan.basic_nack(tag, multiple=False, requeue=True)
            n.inc("nacks")
            n.inc("nacks_requeue")
        elif text == "m4":
            chan.basic_reject(tag, requeue=False)
            n.inc("rejects")
            done.append(text)
        elif text in ("m3", "m5"):
            chan.basic_ack(tag)
            n.inc("acks")
            n.inc("acked_messages")
            done.append(text)

    tag = ch.basic_consume(q, on_message)
    n.inc("consumers")
    pump(conn, lambda: len(done) >= 6)
    ch.basic_cancel(tag)
    n.inc("cancels")
    res = ch.queue_delete(q)
    n.inc("queue_deletes")
    n["queue_message_count_at_delete"] = res.method.message_count
    close_091(conn, n)
    return n


@scenario(
    "091-qos-prefetch",
    "0-9-1",
    "basic.qos prefetch_count=5, 20 messages published, a slow consumer that only acks (one at a "
    "time, about 50 ms apart) once 5 deliveries are outstanding, so the broker's window stays "
    "saturated.",
)
def s_qos_prefetch(ctx: Ctx) -> dict[str, Any]:
    """Shows flow limited by prefetch: deliveries trail acks one for one."""
    n = Counts()
    conn, ch, q = channel_with_queue(ctx, n)
    ch.basic_qos(prefetch_count=5)
    n["prefetch_count"] = 5
    for i in range(20):
        publish_plain(ch, n, q, f"work item {i}".encode(), message_id=f"w{i}")
    unacked: deque[int] = deque()
    delivered = [0]
    n["max_unacked"] = 0

    def on_message(_chan: Any, method: Any, _props: Any, _body: bytes) -> None:
        delivered[0] += 1
        n.inc("deliveries")
        unacked.append(method.delivery_tag)
        n["max_unacked"] = max(n["max_unacked"], len(unacked))

    tag = ch.basic_consume(q, on_message)
    n.inc("consumers")
    deadline = time.monotonic() + 20
    acked = 0
    while acked < 20:
        if time.monotonic() > deadline:
            raise TimeoutError("qos scenario stalled")
        conn.process_data_events(time_limit=0.05)
        if unacked and (len(unacked) >= 5 or delivered[0] == 20):
            time.sleep(0.05)  # the "slow" consumer
            ch.basic_ack(unacked.popleft())
            n.inc("acks")
            acked += 1
    ch.basic_cancel(tag)
    n.inc("cancels")
    ch.queue_delete(q)
    n.inc("queue_deletes")
    close_091(conn, n)
    return n


@scenario(
    "091-confirms-return",
    "0-9-1",
    "confirm.select, 10 publishes each confirmed by basic.ack, then one mandatory publish to an "
    "unroutable routing key that comes back as basic.return 312 NO_ROUTE (and is then confirmed).",
)
def s_confirms_return(ctx: Ctx) -> dict[str, Any]:
    """Publisher confirms and mandatory returns share delivery-tag accounting."""
    n = Counts()
    conn, ch, q = channel_with_queue(ctx, n)
    ch.confirm_delivery()
    n.inc("confirm_selects")
    for i in range(10):
        try:
            publish_plain(ch, n, q, f"confirmed {i}".encode(), message_id=f"c{i}")
            n.inc("confirms_acked")
        except pika.exceptions.NackError:
            n.inc("confirms_nacked")
    unroutable = ctx.q("nowhere")
    try:
        ch.basic_publish("", unroutable, b"nobody wants this", mandatory=True)
        n.inc("publishes")
        n.inc("confirms_acked")
    except pika.exceptions.UnroutableError as err:
        # pika raises this only after the broker's basic.ack for the returned message.
        n.inc("publishes")
        n.inc("confirms_acked")
        for returned in err.messages:
            n.inc("returns")
            n.add(
                "return_details",
                {
                    "reply_code": returned.method.reply_code,
                    "reply_text": returned.method.reply_text,
                    "exchange": returned.method.exchange,
                    "routing_key": returned.method.routing_key,
                },
            )
    except pika.exceptions.NackError:
        n.inc("publishes")
        n.inc("confirms_nacked")
    res = ch.queue_delete(q)
    n.inc("queue_deletes")
    n["queue_message_count_at_delete"] = res.method.message_count
    close_091(conn, n)
    return n


@scenario(
    "091-tx",
    "0-9-1",
    "tx.select; publish + tx.commit; publish + tx.rollback; basic.get the committed message and "
    "basic.ack it inside the transaction, tx.commit; a passive declare then shows the queue empty.",
)
def s_tx(ctx: Ctx) -> dict[str, Any]:
    """Transactional publish/ack: the rolled-back message must never be delivered."""
    n = Counts()
    conn, ch, q = channel_with_queue(ctx, n)
    ch.tx_select()
    n.inc("tx_selects")
    publish_plain(ch, n, q, b"committed", message_id="committed")
    ch.tx_commit()
    n.inc("tx_commits")
    publish_plain(ch, n, q, b"rolled back", message_id="rolled-back")
    ch.tx_rollback()
    n.inc("tx_rollbacks")
    method, _props, body = ch.basic_get(q, auto_ack=False)
    n.inc("gets")
    if method is None:
        n.inc("get_empty")
    else:
        n.inc("get_ok")
        n["got_body"] = body.decode()
        ch.basic_ack(method.delivery_tag)
        n.inc("acks")
    ch.tx_commit()
    n.inc("tx_commits")
    res = ch.queue_declare(q, passive=True)
    n.inc("queue_declares")
    n["queue_message_count_after"] = res.method.message_count
    ch.queue_delete(q)
    n.inc("queue_deletes")
    close_091(conn, n)
    return n


@scenario(
    "091-get",
    "0-9-1",
    "Two messages published; basic.get (manual ack, then basic.ack) returns get-ok, basic.get with "
    "no-ack returns get-ok, and a third basic.get on the now empty queue returns get-empty.",
)
def s_get(ctx: Ctx) -> dict[str, Any]:
    """Polling consumption: get-ok carries message-count, get-empty has no content."""
    n = Counts()
    conn, ch, q = channel_with_queue(ctx, n)
    publish_plain(ch, n, q, b"first", message_id="g1")
    publish_plain(ch, n, q, b"second", message_id="g2")
    for auto_ack in (False, True, True):
        method, _props, body = ch.basic_get(q, auto_ack=auto_ack)
        n.inc("gets")
        if method is None:
            n.inc("get_empty")
            continue
        n.inc("get_ok")
        n.add(
            "get_ok_details",
            {
                "body": body.decode(),
                "message_count": method.message_count,
                "delivery_tag": method.delivery_tag,
                "no_ack": auto_ack,
            },
        )
        if not auto_ack:
            ch.basic_ack(method.delivery_tag)
            n.inc("acks")
    ch.queue_delete(q)
    n.inc("queue_deletes")
    close_091(conn, n)
    return n


def prepare_exchanges(ctx: Ctx) -> None:
    """Probe (outside the capture) which plugin exchange types the broker has."""
    found = []
    conn = pika.BlockingConnection(pika_params(name=f"amqpscope probe {ctx.name}"))
    try:
        for ex_type in ("x-consistent-hash",):
            ch = conn.channel()
            try:
                ch.exchange_declare(ctx.q("probe"), ex_type)
                ch.exchange_delete(ctx.q("probe"))
                found.append(ex_type)
                ch.close()
            except pika.exceptions.ChannelClosedByBroker:
                log(f"  exchange type {ex_type} not available; skipping it")
    finally:
        conn.close()
    ctx.state["plugin_types"] = found


@scenario(
    "091-exchanges",
    "0-9-1",
    "Declares direct, fanout, topic, headers and (plugin) x-consistent-hash exchanges, binds one "
    "queue to each and publishes one routed message per exchange, binds topic->fanout "
    "exchange-to-exchange and routes one message through it, unbinds everything, purges, deletes "
    "the queue and exchanges.",
    exchanges=("direct", "fanout", "topic", "headers", "x-consistent-hash", "probe"),
    prepare=prepare_exchanges,
)
def s_exchanges(ctx: Ctx) -> dict[str, Any]:
    """Covers the declare/bind/unbind/purge/delete method family, including e2e bindings."""
    n = Counts()
    conn = connect_091(ctx, n)
    ch = conn.channel()
    n.inc("channels")
    q = ctx.q()
    types = ["direct", "fanout", "topic", "headers", *ctx.state["plugin_types"]]
    binding = {
        "direct": ("key", None, "key", None),
        "fanout": ("", None, "anything", None),
        "topic": ("a.*", None, "a.b", None),
        "headers": ("", {"x-match": "all", "kind": "amqpscope"}, "", {"kind": "amqpscope"}),
        "x-consistent-hash": ("10", None, "some-id", None),
    }
    for ex_type in types:
        ch.exchange_declare(ctx.q(ex_type), ex_type, durable=False)
        n.inc("exchange_declares")
        n.add("exchange_types", ex_type)
    ch.queue_declare(q)
    n.inc("queue_declares")
    for ex_type in types:
        key, args, _, _ = binding[ex_type]
        ch.queue_bind(q, ctx.q(ex_type), routing_key=key, arguments=args)
        n.inc("queue_binds")
    for ex_type in types:
        _, _, publish_key, headers = binding[ex_type]
        publish_plain(
            ch, n, publish_key, f"via {ex_type}".encode(), exchange=ctx.q(ex_type), headers=headers
        )
    ch.exchange_bind(destination=ctx.q("fanout"), source=ctx.q("topic"), routing_key="e2e.#")
    n.inc("exchange_binds")
    publish_plain(ch, n, "e2e.hop", b"via topic->fanout", exchange=ctx.q("topic"))
    ch.exchange_unbind(destination=ctx.q("fanout"), source=ctx.q("topic"), routing_key="e2e.#")
    n.inc("exchange_unbinds")
    for ex_type in types:
        key, args, _, _ = binding[ex_type]
        ch.queue_unbind(q, ctx.q(ex_type), routing_key=key, arguments=args)
        n.inc("queue_unbinds")
    res = ch.queue_purge(q)
    n.inc("queue_purges")
    n["purged_messages"] = res.method.message_count
    ch.queue_delete(q)
    n.inc("queue_deletes")
    for ex_type in types:
        ch.exchange_delete(ctx.q(ex_type))
        n.inc("exchange_deletes")
    close_091(conn, n)
    return n


@scenario(
    "091-channel-errors",
    "0-9-1",
    "One connection, channel 2 kept open throughout; channel 1 is opened four times: an "
    "inequivalent queue redeclare (406), declaring 'amq.foo' (403), acking unknown delivery tag "
    "999 (406, noticed on the next queue.declare), then normal cleanup. Channel number 1 is reused "
    "after each close.",
)
def s_channel_errors(ctx: Ctx) -> dict[str, Any]:
    """Channel-level errors must be attributed to the right channel incarnation."""
    n = Counts()
    conn = connect_091(ctx, n)
    q = ctx.q()
    ch2 = conn.channel(channel_number=2)
    n.inc("channels")

    def declare(ch: Any, name: str, **kw: Any) -> None:
        # Count every queue.declare put on the wire, and separately those answered.
        n.inc("queue_declares")
        ch.queue_declare(name, **kw)
        n.inc("queue_declare_oks")

    declare(ch2, q)

    def attempt(trigger: str, action: Callable[[Any], None]) -> None:
        ch = conn.channel(channel_number=1)
        n.inc("channels")
        n.add("channel_numbers_opened", ch.channel_number)
        try:
            action(ch)
        except pika.exceptions.ChannelClosedByBroker as err:
            n.add(
                "channel_errors",
                {"channel": 1, "code": err.reply_code, "text": err.reply_text, "trigger": trigger},
            )
        else:
            raise RuntimeError(f"broker did not close the channel for: {trigger}")

    attempt(
        "queue.declare of an existing queue with x-max-length=10",
        lambda ch: declare(ch, q, arguments={"x-max-length": 10}),
    )
    attempt("queue.declare amq.foo", lambda ch: declare(ch, "amq.foo"))

    def bad_ack(ch: Any) -> None:
        ch.basic_ack(999)
        n.inc("acks")
        # A synchronous call surfaces the channel.close; the broker discards this
        # declare because the channel is already closing.
        declare(ch, q, passive=True)

    attempt("basic.ack delivery_tag=999 (never delivered); next passive declare ignored", bad_ack)
    ch1 = conn.channel(channel_number=1)
    n.inc("channels")
    n.add("channel_numbers_opened", ch1.channel_number)
    declare(ch1, q, passive=True)
    ch1.close()
    n.inc("channel_closes")
    ch2.queue_delete(q)
    n.inc("queue_deletes")
    ch2.close()
    n.inc("channel_closes")
    close_091(conn, n)
    return n


@scenario(
    "091-refused-login",
    "0-9-1",
    "pika connects with user guest and a wrong password; RabbitMQ answers start-ok with "
    "connection.close 403 ACCESS_REFUSED and the connection never opens.",
    queues=(),
)
def s_refused_login(ctx: Ctx) -> dict[str, Any]:
    """Authentication failure happens before tune/open, on channel 0."""
    n = Counts()
    try:
        conn = pika.BlockingConnection(
            pika_params(password="wrong-password", name=f"amqpscope {ctx.name}")
        )
    except pika.exceptions.AMQPConnectionError as err:
        n.inc("connections")
        n["connection_opened"] = False
        n["exception"] = type(err).__name__
        detail = str(err.args[0]) if err.args else str(err)
        n["exception_text"] = detail
        if m := re.search(r"\((\d+)\) '(.*)'", detail):
            n.add("connection_errors", {"channel": 0, "code": int(m.group(1)), "text": m.group(2)})
        return n
    conn.close()
    raise RuntimeError("broker accepted a wrong password")


@scenario(
    "091-large-body",
    "0-9-1",
    "Connection tuned to frame_max=4096; one 102400-byte message is published and consumed "
    "(acked), so the body is split into many content-body frames in both directions.",
)
def s_large_body(ctx: Ctx) -> dict[str, Any]:
    """Content bodies spanning many frames and TCP segments must reassemble byte-exact."""
    n = Counts()
    conn = connect_091(ctx, n, frame_max=4096)
    n["negotiated_frame_max"] = conn._impl.params.frame_max  # value pika agreed in tune-ok
    ch = conn.channel()
    n.inc("channels")
    q = ctx.q()
    ch.queue_declare(q)
    n.inc("queue_declares")
    body = random.Random(91).randbytes(100 * 1024)
    ch.basic_publish(
        "",
        q,
        body,
        pika.BasicProperties(content_type="application/octet-stream", message_id="large-1"),
    )
    n.inc("publishes")
    n["body_size"] = len(body)
    n["body_sha256"] = hashlib.sha256(body).hexdigest()
    received: list[bytes] = []

    def on_message(chan: Any, method: Any, _props: Any, data: bytes) -> None:
        n.inc("deliveries")
        received.append(data)
        chan.basic_ack(method.delivery_tag)
        n.inc("acks")

    tag = ch.basic_consume(q, on_message)
    n.inc("consumers")
    pump(conn, lambda: bool(received))
    n["received_body_sha256"] = hashlib.sha256(received[0]).hexdigest()
    ch.basic_cancel(tag)
    n.inc("cancels")
    ch.queue_delete(q)
    n.inc("queue_deletes")
    close_091(conn, n)
    return n


@scenario(
    "091-channels",
    "0-9-1",
    "Eight channels (1-8) on one connection; each declares its own queue and publishes 3 messages, "
    "then each consumes its 3 messages with acks; queues deleted and every channel closed.",
    queues=tuple(f"q{i}" for i in range(1, 9)),
)
def s_channels(ctx: Ctx) -> dict[str, Any]:
    """Frames of many channels interleave on one socket and must be demultiplexed."""
    n = Counts()
    conn = connect_091(ctx, n)
    channels = []
    for i in range(1, 9):
        ch = conn.channel(channel_number=i)
        n.inc("channels")
        ch.queue_declare(ctx.q(f"q{i}"))
        n.inc("queue_declares")
        channels.append(ch)
    for i, ch in enumerate(channels, 1):
        for j in range(3):
            publish_plain(ch, n, ctx.q(f"q{i}"), f"channel {i} message {j}".encode())
    got = [0]
    tags = []

    def on_message(chan: Any, method: Any, _props: Any, _body: bytes) -> None:
        n.inc("deliveries")
        chan.basic_ack(method.delivery_tag)
        n.inc("acks")
        got[0] += 1

    for i, ch in enumerate(channels, 1):
        tags.append(ch.basic_consume(ctx.q(f"q{i}"), on_message))
        n.inc("consumers")
    pump(conn, lambda: got[0] >= 24)
    for i, (ch, tag) in enumerate(zip(channels, tags, strict=True), 1):
        ch.basic_cancel(tag)
        n.inc("cancels")
        ch.queue_delete(ctx.q(f"q{i}"))
        n.inc("queue_deletes")
        ch.close()
        n.inc("channel_closes")
    close_091(conn, n)
    return n


@scenario(
    "091-heartbeats",
    "0-9-1",
    "Connection negotiated with heartbeat=1 s, then left idle for 3.5 s while pika services the "
    "socket, so heartbeat frames flow in both directions; then a queue declare/delete and a clean "
    "close.",
)
def s_heartbeats(ctx: Ctx) -> dict[str, Any]:
    """Heartbeat frames (type 8, channel 0) must be recognised and not confuse frame parsing."""
    n = Counts()
    conn = connect_091(ctx, n, heartbeat=1)
    n["negotiated_heartbeat"] = conn._impl.params.heartbeat
    ch = conn.channel()
    n.inc("channels")
    conn.sleep(3.5)
    q = ctx.q()
    ch.queue_declare(q)
    n.inc("queue_declares")
    ch.queue_delete(q)
    n.inc("queue_deletes")
    checker = conn._impl._heartbeat_checker  # pika's own counters, read before close() drops them
    n["heartbeats_sent_by_client"] = checker._heartbeat_frames_sent
    n["heartbeats_received_by_client"] = checker._heartbeat_frames_received
    close_091(conn, n)
    return n


@scenario(
    "091-rpc",
    "0-9-1",
    "Two connections: an RPC server consuming a request queue (prefetch 1, manual ack) and a "
    "client with an exclusive server-named reply queue (no-ack consumer); 3 requests carry "
    "reply_to and correlation_id and each gets a matching reply.",
    queues=("requests",),
)
def s_rpc(ctx: Ctx) -> dict[str, Any]:
    """Request/reply correlation across connections via reply_to + correlation_id."""
    n = Counts()
    server = connect_091(ctx, n, name=f"amqpscope {ctx.name} server")
    client = connect_091(ctx, n, name=f"amqpscope {ctx.name} client")
    sch = server.channel()
    cch = client.channel()
    n.inc("channels", 2)
    requests = ctx.q("requests")
    sch.queue_declare(requests)
    n.inc("queue_declares")
    sch.basic_qos(prefetch_count=1)

    def on_request(chan: Any, method: Any, props: Any, body: bytes) -> None:
        n.inc("requests_served")
        value = int(body.decode())
        chan.basic_publish(
            "",
            props.reply_to,
            str(value * value).encode(),
            pika.BasicProperties(correlation_id=props.correlation_id),
        )
        n.inc("publishes")
        chan.basic_ack(method.delivery_tag)
        n.inc("acks")

    stag = sch.basic_consume(requests, on_request)
    n.inc("consumers")
    reply_queue = cch.queue_declare("", exclusive=True).method.queue
    n.inc("queue_declares")
    n["reply_queue_server_named"] = reply_queue.startswith("amq.gen-")
    replies: dict[str, str] = {}

    def on_reply(_chan: Any, _method: Any, props: Any, body: bytes) -> None:
        n.inc("replies_received")
        replies[props.correlation_id] = body.decode()

    ctag = cch.basic_consume(reply_queue, on_reply, auto_ack=True)
    n.inc("consumers")
    for i in (3, 4, 5):
        corr = f"req-{i}"
        cch.basic_publish(
            "",
            requests,
            str(i).encode(),
            pika.BasicProperties(reply_to=reply_queue, correlation_id=corr),
        )
        n.inc("publishes")
        n.inc("requests_sent")
        deadline = time.monotonic() + 10
        while corr not in replies:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no reply for {corr}")
            server.process_data_events(time_limit=0.02)
            client.process_data_events(time_limit=0.02)
        if replies[corr] == str(i * i):
            n.inc("correlations_matched")
    cch.basic_cancel(ctag)
    sch.basic_cancel(stag)
    n.inc("cancels", 2)
    sch.queue_delete(requests)
    n.inc("queue_deletes")
    close_091(client, n)
    close_091(server, n)
    return n


@scenario(
    "091-bad-header",
    "0-9-1",
    "Two raw TCP connections to 5672 that are not valid AMQP 0-9-1 openings: an HTTP request and "
    "an AMQP 0-10 protocol header. RabbitMQ answers each with its own AMQP 0-9-1 protocol header "
    "and drops the connection (the client saw a TCP reset both times).",
    queues=(),
)
def s_bad_header(ctx: Ctx) -> dict[str, Any]:
    """Protocol-header negotiation failures are a real thing analyzers see."""
    n = Counts()
    for label, payload in (
        ("http-request", b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"),
        ("amqp-0-10-header", b"AMQP\x01\x01\x00\x0a"),
    ):
        sock = socket.create_connection((BROKER_HOST, BROKER_PORT), timeout=5)
        n.inc("connections")
        sock.sendall(payload)
        data, how = b"", "eof"
        try:
            while chunk := sock.recv(4096):
                data += chunk
        except ConnectionResetError:
            how = "reset"
        sock.close()
        n.add(
            "exchanges",
            {
                "sent": label,
                "sent_bytes": len(payload),
                "received_hex": data.hex(),
                "closed_by_broker_with": how,
            },
        )
        if data.startswith(b"AMQP"):
            n.inc("protocol_header_replies")
    return n


@scenario(
    "091-legacy-headers",
    "0-8/0-9",
    "Two raw TCP connections open with the AMQP 0-8 header (AMQP 1 1 8 0) and the AMQP 0-9 header "
    "(AMQP 1 1 0 9); RabbitMQ still speaks both and answers with a connection.start carrying that "
    "version, after which the client just closes the socket.",
    queues=(),
)
def s_legacy_headers(ctx: Ctx) -> dict[str, Any]:
    """Older dialects must be named as such, not decoded as 0-9-1."""
    n = Counts()
    for label, header in (("0-8", b"AMQP\x01\x01\x08\x00"), ("0-9", b"AMQP\x01\x01\x00\x09")):
        with socket.create_connection((BROKER_HOST, BROKER_PORT), timeout=5) as sock:
            n.inc("connections")
            sock.sendall(header)
            data = b""
            # One whole frame: 7-byte header, payload, frame-end octet.
            while len(data) < 7 or len(data) < 8 + struct.unpack(">I", data[3:7])[0]:
                chunk = sock.recv(4096)
                if not chunk:
                    raise RuntimeError(f"broker closed the {label} connection early")
                data += chunk
            ftype, channel, size = struct.unpack(">BHI", data[:7])
            class_id, method_id, major, minor = struct.unpack(">HHBB", data[7:13])
            n.add(
                "replies",
                {
                    "sent": label,
                    "frame_type": ftype,
                    "channel": channel,
                    "frame_size": size,
                    "class_id": class_id,
                    "method_id": method_id,
                    "version_major": major,
                    "version_minor": minor,
                },
            )
            n.inc("connection_starts_received")
    return n


@scenario(
    "mid-stream",
    "0-9-1",
    "A consumer connection is opened and 3 messages are published/consumed BEFORE tcpdump starts; "
    "then the capture starts and 3 more messages are published, delivered to the already running "
    "consumer and acked, the consumer cancelled, the queue deleted and the connection closed.",
    manual_capture=True,
)
def s_mid_stream(ctx: Ctx) -> dict[str, Any]:
    """The analyzer must resync on a connection whose handshake it never saw."""
    before, n = Counts(), Counts()
    conn = connect_091(ctx, before)
    ch = conn.channel()
    before.inc("channels")
    q = ctx.q()
    ch.queue_declare(q)
    before.inc("queue_declares")
    counter = [before]

    def on_message(chan: Any, method: Any, _props: Any, _body: bytes) -> None:
        counter[0].inc("deliveries")
        chan.basic_ack(method.delivery_tag)
        counter[0].inc("acks")
        counter[0].add("delivery_tags", method.delivery_tag)

    tag = ch.basic_consume(q, on_message)
    before.inc("consumers")
    for i in range(3):
        publish_plain(ch, before, q, f"before capture {i}".encode())
    pump(conn, lambda: before.get("acks", 0) >= 3)
    ctx.capture.start()
    counter[0] = n
    n["connections_established_before_capture"] = 1
    for i in range(3):
        publish_plain(ch, n, q, f"during capture {i}".encode())
    pump(conn, lambda: n.get("acks", 0) >= 3)
    ch.basic_cancel(tag)
    n.inc("cancels")
    ch.queue_delete(q)
    n.inc("queue_deletes")
    close_091(conn, n)
    n["before_capture"] = dict(before)
    return n


@scenario(
    "linux-cooked",
    "0-9-1",
    "3-message publish/consume/ack round trip recorded with `tcpdump -i any` (Linux cooked v2, "
    "SLL2).",
    capture=CaptureSpec(interface="any"),
)
def s_linux_cooked(ctx: Ctx) -> dict[str, Any]:
    """Reader test: LINUX_SLL2 link-layer headers."""
    return basic_round_trip(ctx)


@scenario(
    "linux-cooked-v1",
    "0-9-1",
    "3-message publish/consume/ack round trip recorded with `tcpdump -i any -y LINUX_SLL` "
    "(Linux cooked v1, SLL).",
    capture=CaptureSpec(interface="any", extra=("-y", "LINUX_SLL")),
)
def s_linux_cooked_v1(ctx: Ctx) -> dict[str, Any]:
    """Reader test: LINUX_SLL link-layer headers."""
    return basic_round_trip(ctx)


@scenario(
    "pcapng",
    "0-9-1",
    "3-message publish/consume/ack round trip recorded with dumpcap into a pcapng file.",
    capture=CaptureSpec(tool="dumpcap", ext="pcapng"),
)
def s_pcapng(ctx: Ctx) -> dict[str, Any]:
    """Reader test: pcapng blocks (SHB/IDB/EPB, plus dumpcap's statistics block)."""
    return basic_round_trip(ctx)


@scenario(
    "nanosecond",
    "0-9-1",
    "3-message publish/consume/ack round trip recorded with --time-stamp-precision=nano "
    "(pcap magic a1b23c4d).",
    capture=CaptureSpec(extra=("--time-stamp-precision=nano",)),
)
def s_nanosecond(ctx: Ctx) -> dict[str, Any]:
    """Reader test: nanosecond-resolution classic pcap."""
    return basic_round_trip(ctx)


@scenario(
    "ipv6",
    "0-9-1",
    "3-message publish/consume/ack round trip with pika connected to [::1]:5672, so every packet "
    "is IPv6.",
)
def s_ipv6(ctx: Ctx) -> dict[str, Any]:
    """Reader test: IPv6 headers and addresses in connection keys."""
    return basic_round_trip(ctx, host="::1")


# --------------------------------------------------------------------------
# AMQP 1.0 helpers (Qpid Proton)
# --------------------------------------------------------------------------


def cond_dict(cond: Condition | None) -> dict[str, Any] | None:
    """A Proton error condition as plain JSON."""
    if cond is None:
        return None
    return {"condition": str(cond.name), "description": cond.description}


class _Call:
    """Timer handler that just calls a function (Proton dispatches on_timer_task)."""

    def __init__(self, fn: Callable[[], None]) -> None:
        self.fn = fn

    def on_timer_task(self, _event: Any) -> None:
        self.fn()


class ProtonClient(MessagingHandler):
    """Bookkeeping shared by the AMQP 1.0 scenarios.

    Why: every scenario must report what Proton observed (opens, SASL result,
    outcomes, error conditions) and must never hang, so this base class
    records those events in `self.n`, owns a deadline timer and offers an
    orderly shutdown (detach links, end sessions, close connection).
    """

    url = f"amqp://{BROKER_HOST}:{BROKER_PORT}"

    def __init__(self, ctx: Ctx, timeout: float = 20.0, **kw: Any) -> None:
        kw.setdefault("auto_accept", False)
        super().__init__(**kw)
        self.ctx = ctx
        self.n = Counts()
        self.timeout = timeout
        self.container: Container | None = None
        self.conns: list[Connection] = []
        self.timers: list[Any] = []
        self.failure: str | None = None

    def run(self) -> Counts:
        """Run the reactor to completion and return the counts (raise on timeout)."""
        container = Container(self)
        container.container_id = f"amqpscope-{self.ctx.name}"
        container.run()
        if self.failure:
            raise RuntimeError(f"{self.failure}; observed so far: {json.dumps(self.n)}")
        return self.n

    def begin(self) -> None:
        """Scenario-specific start; subclasses open connections and links here."""
        raise NotImplementedError

    def on_start(self, event: Any) -> None:
        self.container = event.container
        self.later(self.timeout, self._deadline)
        self.begin()

    def later(self, delay: float, fn: Callable[[], None]) -> None:
        """Schedule `fn` on the reactor; cancelled automatically at shutdown."""
        assert self.container is not None
        self.timers.append(self.container.schedule(delay, _Call(fn)))

    def _deadline(self) -> None:
        self.failure = f"scenario did not finish within {self.timeout}s"
        self.shutdown()

    def connect(self, url: str | None = None, **kw: Any) -> Connection:
        """Open a counted client connection (no reconnect: failures must stay failures)."""
        assert self.container is not None
        conn = self.container.connect(url or self.url, reconnect=False, **kw)
        self.conns.append(conn)
        self.n.inc("connections")
        return conn

    def is_client(self, conn: Connection) -> bool:
        """Proton rewraps objects per event, so compare with == rather than `is`."""
        return any(conn == c for c in self.conns)

    def shutdown(self) -> None:
        """Detach open links, end sessions, close connections, cancel timers."""
        for task in self.timers:
            task.cancel()
        self.timers.clear()
        for conn in self.conns:
            if conn.state & Endpoint.LOCAL_CLOSED:
                continue
            link = conn.link_head(Endpoint.LOCAL_ACTIVE)
            while link:
                nxt = link.next(Endpoint.LOCAL_ACTIVE)
                link.close()
                link = nxt
            ssn = conn.session_head(Endpoint.LOCAL_ACTIVE)
            while ssn:
                nxt = ssn.next(Endpoint.LOCAL_ACTIVE)
                ssn.close()
                ssn = nxt
            conn.close()

    def settle_with(
        self,
        dlv: Delivery,
        outcome: str,
        undeliverable: bool = False,
        key: str = "receiver_outcomes",
    ) -> None:
        """Settle an incoming delivery with the given outcome and count it under `key`."""
        if outcome == "accepted":
            dlv.update(Delivery.ACCEPTED)
        elif outcome == "rejected":
            dlv.update(Delivery.REJECTED)
        elif outcome == "released":
            dlv.update(Delivery.RELEASED)
        elif outcome == "modified":
            dlv.local.failed = True
            dlv.local.undeliverable = undeliverable
            dlv.update(Delivery.MODIFIED)
        else:
            raise ValueError(outcome)
        dlv.settle()
        self.n.tally(key, outcome)

    # --- events recorded for every scenario ---------------------------------

    def on_connection_opened(self, event: Any) -> None:
        if not self.is_client(event.connection):
            return
        self.n.inc("connections_opened")
        sasl = event.transport.sasl()
        self.n["sasl_mechanism"] = sasl.mech
        self.n["sasl_outcome"] = SASL_OUTCOMES.get(sasl.outcome, sasl.outcome)
        self.n["remote_container_id"] = event.connection.remote_container
        self.opened(event)

    def opened(self, event: Any) -> None:
        """Hook for scenarios that act once the connection is open."""

    def on_transport_error(self, event: Any) -> None:
        self.n.add("transport_errors", cond_dict(event.transport.condition))
        sasl = event.transport.sasl()
        if sasl.outcome is not None:
            self.n["sasl_outcome"] = SASL_OUTCOMES.get(sasl.outcome, sasl.outcome)
        for task in self.timers:
            task.cancel()
        super().on_transport_error(event)

    def on_connection_error(self, event: Any) -> None:
        self.n.add("connection_errors", cond_dict(event.connection.remote_condition))
        self.shutdown()

    def on_session_error(self, event: Any) -> None:
        self.n.add("session_errors", cond_dict(event.session.remote_condition))
        self.shutdown()

    def on_link_error(self, event: Any) -> None:
        self.n.add(
            "link_errors",
            {"link": event.link.name, **(cond_dict(event.link.remote_condition) or {})},
        )
        self.shutdown()

    def on_accepted(self, event: Any) -> None:
        self.n.tally("sender_outcomes", "accepted")

    def on_rejected(self, event: Any) -> None:
        self.n.tally("sender_outcomes", "rejected")
        if event.delivery.remote.condition:
            self.n.add("rejection_conditions", cond_dict(event.delivery.remote.condition))

    def on_released(self, event: Any) -> None:
        # Proton reports both released and modified here; tell them apart.
        if event.delivery.remote_state == Delivery.MODIFIED:
            self.n.tally("sender_outcomes", "modified")
        else:
            self.n.tally("sender_outcomes", "released")


def queue_address(ctx: Ctx, suffix: str = "q") -> str:
    """RabbitMQ 3.x amqp1_0 address of an existing queue."""
    return f"/amq/queue/{ctx.q(suffix)}"


def text_message(i: int, prefix: str) -> Message:
    """A message with a few properties set, so decoders see more than a bare body."""
    return Message(
        id=f"{prefix}{i}",
        subject="amqpscope",
        content_type="text/plain",
        properties={"index": i},
        body=f"{prefix} message {i}",
    )


class SendThenReceive(ProtonClient):
    """Send N messages on one link, then receive them back on another (same connection)."""

    def __init__(self, ctx: Ctx, count: int, presettled: bool = False, **kw: Any) -> None:
        super().__init__(ctx, **kw)
        self.count = count
        self.presettled = presettled
        self.sent = 0
        self.received = 0
        self.receiver: Receiver | None = None

    def begin(self) -> None:
        self.conn = self.connect()
        opts = AtMostOnce() if self.presettled else None
        self.sender = self.container.create_sender(self.conn, queue_address(self.ctx), options=opts)
        if self.presettled:
            # Nothing to wait for on the sending side, so attach the receiver right away.
            self.receiver = self.container.create_receiver(
                self.conn, queue_address(self.ctx), options=opts
            )

    def on_link_opened(self, event: Any) -> None:
        role = "sender" if event.link.is_sender else "receiver"
        self.n.tally("links_attached", role)
        mode = {
            Link.SND_SETTLED: "settled",
            Link.SND_UNSETTLED: "unsettled",
            Link.SND_MIXED: "mixed",
        }
        self.n[f"{role}_remote_snd_settle_mode"] = mode.get(event.link.remote_snd_settle_mode)

    def on_sendable(self, event: Any) -> None:
        self.n.setdefault("initial_sender_credit", event.sender.credit)
        while event.sender.credit and self.sent < self.count:
            event.sender.send(text_message(self.sent, "m"))
            self.sent += 1
            self.n.inc("transfers_sent")
            if event.sender.snd_settle_mode == Link.SND_SETTLED:
                self.n.inc("sent_presettled")  # Message.send() settles at once on such links

    def on_accepted(self, event: Any) -> None:
        super().on_accepted(event)
        if self.n["sender_outcomes"]["accepted"] == self.count:
            self.receiver = self.container.create_receiver(self.conn, queue_address(self.ctx))

    def on_message(self, event: Any) -> None:
        self.received += 1
        self.n.inc("transfers_received")
        if event.delivery.settled:
            self.n.inc("received_presettled")
            event.delivery.settle()
        else:
            self.settle_with(event.delivery, "accepted")
        if self.received == self.count:
            self.shutdown()


# --------------------------------------------------------------------------
# AMQP 1.0 scenarios
# --------------------------------------------------------------------------


@scenario(
    "10-send-receive",
    "1.0",
    "AMQP 1.0 via RabbitMQ's amqp1_0 plugin: one connection/session, a sender link sends 10 "
    "unsettled messages (each accepted by the broker), then a receiver link with credit 10 "
    "receives all 10 and accepts them; links detached, session ended, connection closed.",
    setup=(("q", {}),),
    queues=(),
)
def s10_send_receive(ctx: Ctx) -> dict[str, Any]:
    """Baseline 1.0 conversation: attach, flow, transfer, disposition, detach."""
    return SendThenReceive(ctx, 10).run()


@scenario(
    "10-presettled",
    "1.0",
    "Sender and receiver links both attached with snd-settle-mode=settled (Proton AtMostOnce): 10 "
    "transfers sent pre-settled, and the broker delivers them pre-settled too (no dispositions).",
    setup=(("q", {}),),
    queues=(),
)
def s10_presettled(ctx: Ctx) -> dict[str, Any]:
    """At-most-once transfers carry settled=true and never get a disposition."""
    return SendThenReceive(ctx, 10, presettled=True).run()


class Outcomes(ProtonClient):
    """Receive six messages and settle them with each outcome (one RabbitMQ 3.10 rejects)."""

    PLAN: ClassVar[dict[str, str]] = {
        "o0": "accepted",
        "o1": "rejected",
        "o2": "released",
        "o3": "accepted",
        "o4": "modified",
        "o5": "accepted",
    }

    def __init__(self, ctx: Ctx) -> None:
        super().__init__(ctx, timeout=25)
        self.sent = 0
        self.first_seen: set[str] = set()
        self.held: Delivery | None = None
        self.modified_sent = False

    def begin(self) -> None:
        self.conn = self.connect()
        self.sender = self.container.create_sender(self.conn, queue_address(self.ctx))

    def on_sendable(self, event: Any) -> None:
        while event.sender.credit and self.sent < len(self.PLAN):
            event.sender.send(text_message(self.sent, "o"))
            self.sent += 1
            self.n.inc("transfers_sent")

    def on_accepted(self, event: Any) -> None:
        super().on_accepted(event)
        if self.n["sender_outcomes"]["accepted"] == len(self.PLAN):
            self.container.create_receiver(self.conn, queue_address(self.ctx))

    def on_message(self, event: Any) -> None:
        mid = event.message.id
        self.n.inc("transfers_received")
        redelivery = mid in self.first_seen
        self.n.add(
            "deliveries",
            {
                "id": mid,
                "delivery_count": event.message.delivery_count,
                "first_acquirer": event.message.first_acquirer,
                "redelivery": redelivery,
            },
        )
        if redelivery:
            self.n.inc("redeliveries")
            self.settle_with(event.delivery, "accepted")
            if mid == "o4":
                self.shutdown()
        else:
            self.first_seen.add(mid)
            if self.PLAN[mid] == "modified":
                self.held = event.delivery  # settled last: 3.10 ends the session on modified
            else:
                self.settle_with(event.delivery, self.PLAN[mid])
            if len(self.first_seen) == len(self.PLAN):
                self.later(1.5, self.settle_held)  # give the released message time to come back
        if mid == "o2" and redelivery:
            self.settle_held()

    def settle_held(self) -> None:
        if self.held is None or self.modified_sent or len(self.first_seen) < len(self.PLAN):
            return
        self.modified_sent = True
        self.settle_with(self.held, "modified")
        self.later(3.0, self.shutdown)  # if the broker neither errors nor redelivers


@scenario(
    "10-outcomes",
    "1.0",
    "Six messages sent and accepted by the broker, then received: o0/o3/o5 accepted, o1 rejected, "
    "o2 released (redelivered and accepted), and finally o4 settled with "
    "modified(delivery-failed=true); RabbitMQ 3.10 does not support modified and ends the session "
    "with an error.",
    setup=(("q", {}),),
    queues=(),
)
def s10_outcomes(ctx: Ctx) -> dict[str, Any]:
    """Every disposition outcome type on the wire, plus the broker's reaction to each."""
    return Outcomes(ctx).run()


class LargeMessage(ProtonClient):
    """One 300 KB message through a connection whose local max-frame-size is 4096."""

    def __init__(self, ctx: Ctx) -> None:
        super().__init__(ctx)
        self.body = random.Random(10).randbytes(300_000)
        self.sent = False

    def begin(self) -> None:
        self.conn = self.connect(max_frame_size=4096)
        self.sender = self.container.create_sender(self.conn, queue_address(self.ctx))

    def opened(self, event: Any) -> None:
        self.n["local_max_frame_size"] = event.transport.max_frame_size
        self.n["remote_max_frame_size"] = event.transport.remote_max_frame_size

    def on_sendable(self, event: Any) -> None:
        if not self.sent:
            self.sent = True
            event.sender.send(
                Message(id="large-1", content_type="application/octet-stream", body=self.body)
            )
            self.n.inc("transfers_sent")
            self.n["body_size"] = len(self.body)
            self.n["body_sha256"] = hashlib.sha256(self.body).hexdigest()

    def on_accepted(self, event: Any) -> None:
        super().on_accepted(event)
        self.container.create_receiver(self.conn, queue_address(self.ctx))

    def on_message(self, event: Any) -> None:
        self.n.inc("transfers_received")
        self.n["received_body_sha256"] = hashlib.sha256(bytes(event.message.body)).hexdigest()
        self.settle_with(event.delivery, "accepted")
        self.shutdown()


@scenario(
    "10-large-message",
    "1.0",
    "Client max-frame-size 4096: a 300000-byte binary message is sent (split by the broker's "
    "larger max-frame-size) and received back split into many 4096-byte transfer frames, then "
    "accepted.",
    setup=(("q", {}),),
    queues=(),
)
def s10_large_message(ctx: Ctx) -> dict[str, Any]:
    """Multi-frame transfers (more=true) must be reassembled per delivery."""
    return LargeMessage(ctx).run()


class SaslOnly(ProtonClient):
    """Open a connection with specific SASL settings and close it again."""

    def __init__(self, ctx: Ctx, **connect_kw: Any) -> None:
        super().__init__(ctx)
        self.connect_kw = connect_kw

    def begin(self) -> None:
        self.connect(**self.connect_kw)

    def opened(self, event: Any) -> None:
        self.shutdown()


@scenario(
    "10-sasl-plain",
    "1.0",
    "SASL PLAIN as guest/guest (Proton allowed_mechs=PLAIN), AMQP open, then close.",
    queues=(),
)
def s10_sasl_plain(ctx: Ctx) -> dict[str, Any]:
    """SASL init carries PLAIN credentials; outcome ok, then the AMQP header follows."""
    return SaslOnly(ctx, allowed_mechs="PLAIN", user=GUEST[0], password=GUEST[1]).run()


@scenario(
    "10-sasl-anonymous",
    "1.0",
    "SASL ANONYMOUS (Proton allowed_mechs=ANONYMOUS; the plugin maps it to its default_user, "
    "guest), AMQP open, then close.",
    queues=(),
)
def s10_sasl_anonymous(ctx: Ctx) -> dict[str, Any]:
    """ANONYMOUS SASL exchange without credentials."""
    return SaslOnly(ctx, allowed_mechs="ANONYMOUS").run()


@scenario(
    "10-sasl-failed",
    "1.0",
    "SASL PLAIN with guest and a wrong password: the broker answers sasl-outcome code auth and the "
    "connection never opens.",
    queues=(),
)
def s10_sasl_failed(ctx: Ctx) -> dict[str, Any]:
    """Failed SASL: no AMQP header after the outcome."""
    n = SaslOnly(ctx, allowed_mechs="PLAIN", user=GUEST[0], password="wrong-password").run()
    n.setdefault("connections_opened", 0)
    return n


class BadAddress(ProtonClient):
    """Two sessions, each attaching a receiver to an address RabbitMQ refuses."""

    TARGETS = ("/amq/queue/amqpscope.10-bad-address.does-not-exist", "/bogus/amqpscope")

    def __init__(self, ctx: Ctx) -> None:
        super().__init__(ctx)
        self.failed = 0

    def begin(self) -> None:
        self.conn = self.connect()
        for i, address in enumerate(self.TARGETS):
            ssn = self.conn.session()
            ssn.open()
            self.n.inc("sessions_begun")
            link = ssn.receiver(f"amqpscope-bad-address-{i}")
            link.source.address = address
            link.open()
            self.n.inc("attaches")
            self.n.add("addresses", address)

    def on_link_opened(self, event: Any) -> None:
        self.n.inc("links_attached_by_broker")

    def _one_failed(self) -> None:
        self.failed += 1
        if self.failed == len(self.TARGETS):
            self.shutdown()

    def on_session_error(self, event: Any) -> None:
        self.n.add("session_errors", cond_dict(event.session.remote_condition))
        event.session.close()
        self._one_failed()

    def on_link_error(self, event: Any) -> None:
        self.n.add(
            "link_errors",
            {"link": event.link.name, **(cond_dict(event.link.remote_condition) or {})},
        )
        event.link.close()
        self._one_failed()


@scenario(
    "10-bad-address",
    "1.0",
    "Two sessions on one connection attach receivers to addresses RabbitMQ refuses: a missing "
    "queue (/amq/queue/...does-not-exist) and an unknown address scheme (/bogus/...); the broker "
    "ends each session with an error.",
    queues=(),
)
def s10_bad_address(ctx: Ctx) -> dict[str, Any]:
    """Attach failures: the error arrives as end (session) rather than detach in RabbitMQ 3.10."""
    return BadAddress(ctx).run()


class TxAttempt(ProtonClient, TransactionHandler):
    """Try to declare a transaction on the broker's coordinator and commit it."""

    def begin(self) -> None:
        self.conn = self.connect()
        self.container.declare_transaction(self.conn, handler=self)
        self.n.inc("coordinator_attaches")
        self.n["transaction_declared"] = False

    def on_transaction_declared(self, event: Any) -> None:
        self.n["transaction_declared"] = True
        event.transaction.commit()

    def on_transaction_committed(self, event: Any) -> None:
        self.n["transaction_committed"] = True
        self.shutdown()

    def on_transaction_declare_failed(self, event: Any) -> None:
        self.n["transaction_declare_failed"] = True
        self.shutdown()


@scenario(
    "10-transaction",
    "1.0",
    "Proton declares a transaction (attach to a coordinator target, then a declare message). "
    "RabbitMQ 3.10 does not support AMQP 1.0 transactions and ends the session with "
    "amqp:not-implemented.",
    queues=(),
)
def s10_transaction(ctx: Ctx) -> dict[str, Any]:
    """Coordinator links and the broker's refusal."""
    return TxAttempt(ctx).run()


class Drain(ProtonClient):
    """Put 3 messages on a queue, then a zero-prefetch receiver issues credit 10 with drain=true."""

    MESSAGES = 3
    CREDIT = 10

    def __init__(self, ctx: Ctx) -> None:
        super().__init__(ctx, prefetch=0)
        self.sent = 0
        self.receiver: Receiver | None = None

    def begin(self) -> None:
        self.conn = self.connect()
        self.sender = self.container.create_sender(self.conn, queue_address(self.ctx))

    def on_sendable(self, event: Any) -> None:
        while event.sender.credit and self.sent < self.MESSAGES:
            event.sender.send(text_message(self.sent, "d"))
            self.sent += 1
            self.n.inc("transfers_sent")

    def on_accepted(self, event: Any) -> None:
        super().on_accepted(event)
        if self.n["sender_outcomes"]["accepted"] == self.MESSAGES:
            self.receiver = self.container.create_receiver(self.conn, queue_address(self.ctx))

    def on_link_opened(self, event: Any) -> None:
        if event.link.is_receiver:
            event.receiver.drain(self.CREDIT)
            self.n["drain_credit_issued"] = self.CREDIT

    def on_link_flow(self, event: Any) -> None:
        link = event.link
        if link.is_receiver and "drain_credit_issued" in self.n:
            self.n.inc("receiver_flow_events")
            if not link.draining() and "drain_completed" not in self.n:
                self.n["drain_completed"] = True
                self.n["credit_drained"] = link.drained()

    def on_message(self, event: Any) -> None:
        self.n.inc("transfers_received")
        self.settle_with(event.delivery, "accepted")
        if self.n["transfers_received"] == self.MESSAGES:
            # RabbitMQ 3.10 sends the drain-completing flow *before* the transfers, so
            # whether Proton reports the drain as finished depends on read batching;
            # give it a moment, then record Proton's view either way.
            self.later(1.0, self.finish)

    def finish(self) -> None:
        assert self.receiver is not None
        self.n.setdefault("drain_completed", False)
        self.n["receiver_draining_at_end"] = bool(self.receiver.draining())
        self.n["receiver_credit_at_end"] = self.receiver.credit
        self.shutdown()


@scenario(
    "10-drain",
    "1.0",
    "Three messages sent to a quorum queue and accepted; a receiver with no prefetch then sends "
    "flow link-credit=10 drain=true; the broker echoes the flow, sends a drain-completing flow "
    "(link-credit 0) and delivers the 3 messages, which are accepted.",
    setup=(("q", {"x-queue-type": "quorum"}),),
    queues=(),
)
def s10_drain(ctx: Ctx) -> dict[str, Any]:
    """Drain mode: the broker must advance delivery-count and echo a flow."""
    return Drain(ctx).run()


@scenario(
    "10-drain-classic",
    "1.0",
    "Same as 10-drain but on a classic queue: RabbitMQ 3.10.8 crashes handling the drain "
    "(function_clause in rabbit_classic_queue send_drained) and ends the session with "
    "amqp:internal-error after delivering only some of the messages.",
    setup=(("q", {}),),
    queues=(),
)
def s10_drain_classic(ctx: Ctx) -> dict[str, Any]:
    """A real broker bug: an internal-error end in the middle of deliveries."""
    return Drain(ctx).run()


class ProtonPeers(ProtonClient):
    """A Proton listener on P2P_PORT and a Proton client in one reactor: the listener's open
    names it, and it stops listening once its connection closed (so the reactor finishes)."""

    url = f"amqp://127.0.0.1:{P2P_PORT}"

    def __init__(self, ctx: Ctx, **kw: Any) -> None:
        super().__init__(ctx, **kw)
        self.acceptor: Any = None

    def listen(self) -> None:
        assert self.container is not None
        self.acceptor = self.container.listen(f"127.0.0.1:{P2P_PORT}")

    def on_connection_opening(self, event: Any) -> None:
        # Dispatched before Proton opens the accepted connection, so the id goes into its open.
        event.connection.container = f"amqpscope-{self.ctx.name}-listener"

    def on_connection_closed(self, event: Any) -> None:
        if not self.is_client(event.connection) and self.acceptor is not None:
            self.acceptor.close()  # last connection gone: let the reactor finish


class PeerToPeer(ProtonPeers):
    """A Proton listener and client in one reactor; the listener settles with mixed outcomes."""

    COUNT = 10
    CYCLE = ("accepted", "rejected", "released", "modified")

    def __init__(self, ctx: Ctx) -> None:
        super().__init__(ctx)
        self.sent = 0
        self.outcomes_seen = 0

    def begin(self) -> None:
        self.listen()
        self.conn = self.connect()
        self.sender = self.container.create_sender(self.conn, "amqpscope/peer-to-peer")

    def on_sendable(self, event: Any) -> None:
        while event.sender.credit and self.sent < self.COUNT:
            event.sender.send(text_message(self.sent, "p"))
            self.sent += 1
            self.n.inc("transfers_sent")

    def on_message(self, event: Any) -> None:
        # Only the listener side receives.
        self.n.inc("listener_transfers_received")
        i = int(event.message.id[1:])
        outcome = self.CYCLE[i % len(self.CYCLE)]
        dlv = event.delivery
        if outcome == "rejected":
            dlv.local.condition = Condition(
                "amqp:precondition-failed", f"amqpscope listener rejects p{i}"
            )
        if outcome == "modified" and i == 7:
            dlv.local.annotations = {"x-opt-amqpscope": "retry-elsewhere"}
        self.settle_with(dlv, outcome, undeliverable=(i == 7), key="listener_outcomes")

    def _count_outcome(self) -> None:
        self.outcomes_seen += 1
        if self.outcomes_seen == self.COUNT:
            self.shutdown()

    def on_accepted(self, event: Any) -> None:
        super().on_accepted(event)
        self._count_outcome()

    def on_rejected(self, event: Any) -> None:
        super().on_rejected(event)
        self._count_outcome()

    def on_released(self, event: Any) -> None:
        super().on_released(event)
        remote = event.delivery.remote
        if event.delivery.remote_state == Delivery.MODIFIED:
            self.n.add(
                "modified_details",
                {
                    "delivery_failed": remote.failed,
                    "undeliverable_here": remote.undeliverable,
                    "message_annotations": remote.annotations,
                },
            )
        self._count_outcome()

    def on_connection_opening(self, event: Any) -> None:
        super().on_connection_opening(event)
        self.n.inc("listener_connections_accepted")


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


# --------------------------------------------------------------------------
# Non-AMQP traffic
# --------------------------------------------------------------------------


class _QuietHTTP(http.server.BaseHTTPRequestHandler):
    """Tiny HTTP/1.1 handler with keep-alive; no logging noise."""

    protocol_version = "HTTP/1.1"

    def _reply(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._reply(f"amqpscope test page {self.path}\n".encode())

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        self._reply(b"got " + str(len(self.rfile.read(length))).encode() + b" bytes\n")

    def log_message(self, fmt: str, *args: Any) -> None:
        pass


def self_signed_cert(tmp: Path) -> tuple[Path, Path] | None:
    """A throwaway localhost certificate (cryptography, else openssl CLI), or None."""
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        if not shutil.which("openssl"):
            return None
        run_cmd(
            [
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                str(key),
                "-out",
                str(cert),
                "-days",
                "2",
                "-subj",
                "/CN=localhost",
            ]
        )
        return cert, key
    pkey = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(pkey.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=2))
        .sign(pkey, hashes.SHA256())
    )
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(
        pkey.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert, key


@contextlib.contextmanager
def tcp_server(
    handle: Callable[[socket.socket], None], wrap: ssl.SSLContext | None = None
) -> Iterator[int]:
    """One-thread TCP server on an ephemeral loopback port; yields the port."""
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(0.2)
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            with contextlib.suppress(OSError):
                conn.settimeout(5)
                if wrap is not None:
                    conn = wrap.wrap_socket(conn, server_side=True)
                with conn:
                    handle(conn)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield srv.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        srv.close()


def echo_handler(conn: socket.socket) -> None:
    """Echo everything until the client half-closes."""
    while data := conn.recv(65536):
        conn.sendall(data)


def stream_frame(key: int, corr: int | None, payload: bytes = b"") -> bytes:
    """A RabbitMQ stream protocol frame: size, key, version 1, [correlation id], payload."""
    body = (
        struct.pack(">HH", key, 1)
        + (struct.pack(">I", corr) if corr is not None else b"")
        + payload
    )
    return struct.pack(">I", len(body)) + body


def stream_str(text: str) -> bytes:
    """Stream protocol string: int16 length + UTF-8 bytes."""
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def read_stream_frame(sock: socket.socket) -> tuple[int, bytes]:
    """Read one stream protocol frame; return (key, bytes after key+version)."""

    def exact(size: int) -> bytes:
        buf = b""
        while len(buf) < size:
            chunk = sock.recv(size - len(buf))
            if not chunk:
                raise ConnectionError("stream server closed the connection")
            buf += chunk
        return buf

    (size,) = struct.unpack(">I", exact(4))
    body = exact(size)
    return struct.unpack(">H", body[:2])[0], body[4:]


def stream_session(n: Counts) -> None:
    """Open and close a RabbitMQ stream protocol session on 5552 (properties, SASL, tune, open).

    Why: it is a binary protocol on a RabbitMQ port that must NOT be mistaken for AMQP.
    """
    with socket.create_connection((BROKER_HOST, STREAM_PORT), timeout=5) as sock:
        n.inc("stream_connections")
        responses = []

        def request(key: int, corr: int, payload: bytes = b"") -> bytes:
            sock.sendall(stream_frame(key, corr, payload))
            n.inc("stream_requests")
            rkey, rest = read_stream_frame(sock)
            code = struct.unpack(">H", rest[4:6])[0]
            responses.append(
                {"request_key": hex(key), "response_key": hex(rkey), "response_code": code}
            )
            return rest[6:]

        props = {"product": "amqpscope recorder", "connection_name": "amqpscope non-amqp"}
        request(
            0x0011,
            1,
            struct.pack(">i", len(props))
            + b"".join(stream_str(k) + stream_str(v) for k, v in props.items()),
        )
        request(0x0012, 2)
        auth = b"\0guest\0guest"
        request(0x0013, 3, stream_str("PLAIN") + struct.pack(">i", len(auth)) + auth)
        tkey, tune = read_stream_frame(sock)  # server-initiated tune (no correlation id)
        n.add("stream_server_frames", {"key": hex(tkey)})
        sock.sendall(stream_frame(0x0014, None, tune[:8]))
        request(0x0015, 4, stream_str("/"))
        request(0x0016, 5, struct.pack(">H", 1) + stream_str("amqpscope done"))
        n["stream_responses"] = responses


@scenario(
    "non-amqp",
    "none",
    "Traffic that is not AMQP: 3 HTTP/1.1 requests over 2 connections to a local http.server, one "
    "TLS 1.3 session (real handshake, self-signed cert) echoing a line, one TCP connection "
    "carrying 4 KiB of random bytes to an echo server, and (if the plugin is on) a RabbitMQ stream "
    "protocol session on 5552 (peer-properties, SASL PLAIN, tune, open, close).",
    queues=(),
    manual_capture=True,
    port=[],
)
def s_non_amqp(ctx: Ctx) -> dict[str, Any]:
    """Negative test: the analyzer must report no AMQP here (and not crash)."""
    n = Counts()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _QuietHTTP)
    http_thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    http_thread.start()
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        stack.callback(httpd.server_close)
        stack.callback(httpd.shutdown)
        http_port = httpd.server_address[1]
        pair = self_signed_cert(Path(tmp))
        tls_port = None
        if pair:
            server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            server_ctx.load_cert_chain(*pair)
            tls_port = stack.enter_context(tcp_server(echo_handler, wrap=server_ctx))
        raw_port = stack.enter_context(tcp_server(echo_handler))
        stream_on = port_open(BROKER_HOST, STREAM_PORT)
        ports = [p for p in (http_port, tls_port, raw_port) if p] + (
            [STREAM_PORT] if stream_on else []
        )
        ctx.port = ports
        ctx.capture.start(bpf="tcp and (" + " or ".join(f"port {p}" for p in ports) + ")")

        for paths in (["/", "/status"], ["POST /submit"]):
            hc = http.client.HTTPConnection("127.0.0.1", http_port, timeout=5)
            n.inc("http_connections")
            for path in paths:
                if path.startswith("POST "):
                    hc.request(
                        "POST",
                        path[5:],
                        body=b"field=value&other=1",
                        headers={"Content-Type": "application/x-www-form-urlencoded"},
                    )
                else:
                    hc.request("GET", path)
                resp = hc.getresponse()
                resp.read()
                n.inc("http_requests")
                n.tally("http_status", str(resp.status))
            hc.close()

        if tls_port:
            client_ctx = ssl.create_default_context()
            client_ctx.check_hostname = False
            client_ctx.verify_mode = ssl.CERT_NONE
            with (
                socket.create_connection(("127.0.0.1", tls_port), timeout=5) as raw,
                client_ctx.wrap_socket(raw, server_hostname="localhost") as tls,
            ):
                n.inc("tls_connections")
                n["tls_version"] = tls.version()
                tls.sendall(b"hello over tls\n")
                n["tls_echo_ok"] = tls.recv(1024) == b"hello over tls\n"
        else:
            n["tls_skipped"] = "no cryptography module or openssl CLI"

        blob = random.Random(4096).randbytes(4096)
        with socket.create_connection(("127.0.0.1", raw_port), timeout=5) as sock:
            n.inc("raw_tcp_connections")
            sock.sendall(blob)
            sock.shutdown(socket.SHUT_WR)
            echoed = b""
            while chunk := sock.recv(65536):
                echoed += chunk
            n["raw_bytes_sent"] = len(blob)
            n["raw_echo_ok"] = echoed == blob

        if stream_on:
            stream_session(n)
        else:
            n["stream_skipped"] = "rabbitmq_stream plugin not listening on 5552"
    n["amqp_connections"] = 0
    return n


# --------------------------------------------------------------------------
# AMQP 1.0 over WebSocket
# --------------------------------------------------------------------------

WS_PORT = 5674
WS_PATH = "/amqp"
WS_FRAGMENT = 64  # the client sends AMQP bytes in frames of at most this size: continuations


class WebSocketBridges:
    """Both ends of an AMQP WebSocket Binding 1.0 connection, in one asyncio loop on a thread.

    Why: Proton's reactor speaks TCP only. Its bytes go to a local TCP port, from there over a
    `websockets` client to ws://127.0.0.1:5674/amqp (subprotocol `amqp`), into a `websockets`
    server that hands the message payloads to RabbitMQ on 5672, and back. Only the WebSocket leg
    is captured. Each end counts what it sent and received, as the library reported it. The
    client opens with a ping and closes the WebSocket when Proton closes its socket, so who
    closes first does not depend on timing.
    """

    def __init__(self) -> None:
        self.n = Counts()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.closed = threading.Event()
        self.servers: list[Any] = []

    def start(self) -> str:
        """Start both bridges; return the URL Proton connects to."""
        self.thread.start()
        port = asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(15)
        return f"amqp://127.0.0.1:{port}"

    def stop(self) -> None:
        """Close the listeners and the loop (the connections have ended by now)."""

        async def close() -> None:
            for server in self.servers:
                server.close()
                await server.wait_closed()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    def _counting(self, base: type, side: str) -> type:
        """A websockets connection class that counts every frame its protocol object sends, by
        opcode: what the library put on the wire, not what the scenario meant to send."""
        n = self.n

        class Counting(base):  # type: ignore[misc, valid-type]
            def __init__(self, protocol: Any, *args: Any, **kw: Any) -> None:
                super().__init__(protocol, *args, **kw)
                send = protocol.send_frame

                def send_frame(frame: Any) -> None:
                    n.tally(f"{side}_frames_sent", frame.opcode.name.lower())
                    send(frame)

                protocol.send_frame = send_frame

        return Counting

    async def _start(self) -> int:
        from websockets.asyncio.server import ServerConnection, serve

        self.servers.append(
            await serve(
                self._server,
                "127.0.0.1",
                WS_PORT,
                subprotocols=["amqp"],
                compression=None,
                ping_interval=None,
                create_connection=self._counting(ServerConnection, "server"),
            )
        )
        tcp = await asyncio.start_server(self._client, "127.0.0.1", 0)
        self.servers.append(tcp)
        return int(tcp.sockets[0].getsockname()[1])

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Proton's connection: its bytes go out as fragmented binary WebSocket messages."""
        from websockets.asyncio.client import ClientConnection, connect

        n = self.n
        async with connect(
            f"ws://127.0.0.1:{WS_PORT}{WS_PATH}",
            subprotocols=["amqp"],
            compression=None,
            ping_interval=None,
            proxy=None,
            create_connection=self._counting(ClientConnection, "client"),
        ) as ws:
            n["client_subprotocol"] = ws.subprotocol
            n["path"] = WS_PATH
            await (await ws.ping(b"amqpscope"))
            n.inc("client_pings_sent")
            n.inc("client_pongs_received")

            async def up() -> None:
                while data := await reader.read(65536):
                    pieces = [data[i : i + WS_FRAGMENT] for i in range(0, len(data), WS_FRAGMENT)]
                    await ws.send(pieces if len(pieces) > 1 else data)
                    n.inc("client_messages_sent")
                    n.inc("client_fragmented_messages", int(len(pieces) > 1))
                    n.inc("amqp_bytes_c2s", len(data))
                await ws.close(1000, "amqp connection closed")

            async def down() -> None:
                async for message in ws:
                    n.inc("client_messages_received")
                    with contextlib.suppress(ConnectionError):  # Proton may have closed first
                        writer.write(message)
                        await writer.drain()
                writer.close()

            try:
                await asyncio.gather(up(), down())
                n["client_close_received"] = {"code": ws.close_code, "reason": ws.close_reason}
            finally:
                self.closed.set()

    async def _server(self, ws: Any) -> None:
        """The broker side: each message's payload to RabbitMQ, each read from it one message."""
        n = self.n
        n["server_subprotocol"] = ws.subprotocol
        n["server_request_path"] = ws.request.path
        reader, writer = await asyncio.open_connection(BROKER_HOST, BROKER_PORT)

        async def up() -> None:
            async for message in ws:
                n.inc("server_messages_received")
                with contextlib.suppress(ConnectionError):  # the broker may have closed first
                    writer.write(message)
                    await writer.drain()
            writer.close()

        async def down() -> None:
            while data := await reader.read(65536):
                await ws.send(data)
                n.inc("server_messages_sent")
                n.inc("amqp_bytes_s2c", len(data))

        await asyncio.gather(up(), down())
        n["server_close_received"] = {"code": ws.close_code, "reason": ws.close_reason}


@scenario(
    "10-websocket",
    "1.0",
    "AMQP 1.0 over WebSocket (OASIS WSB 1.0, in clear): Proton's bytes carried by a `websockets` "
    f"client to ws://127.0.0.1:{WS_PORT}{WS_PATH} (subprotocol amqp; a ping first; AMQP bytes "
    f"in binary messages fragmented into frames of {WS_FRAGMENT} bytes), and by a `websockets` "
    "server to RabbitMQ on 5672. As 10-send-receive: 10 unsettled messages accepted by the "
    "broker, received back and accepted, then close; the client closes the WebSocket with 1000. "
    "Only the WebSocket leg is captured.",
    port=WS_PORT,
    capture=CaptureSpec(bpf=f"tcp port {WS_PORT}"),
    setup=(("q", {}),),
    queues=(),
)
def s10_websocket(ctx: Ctx) -> dict[str, Any]:
    """The AMQP WebSocket binding, as Azure Service Bus offers it on 443 but in clear."""
    if busy_connections({WS_PORT}):  # (no probe connection: it would be captured)
        raise RuntimeError(f"port {WS_PORT} is already in use")
    bridges = WebSocketBridges()
    try:
        client = SendThenReceive(ctx, 10)
        client.url = bridges.start()
        n = client.run()
        if not bridges.closed.wait(10):
            raise RuntimeError(f"the WebSocket did not close: {json.dumps(bridges.n)}")
    finally:
        bridges.stop()
    n["websocket"] = {"library": f"websockets {importlib.metadata.version('websockets')}"}
    n["websocket"].update(bridges.n)
    return n


# --------------------------------------------------------------------------
# TLS: pika and Proton over RabbitMQ's TLS listener, the AMQP 1.0 in-band upgrade
# --------------------------------------------------------------------------

TLS_PORT = 5671
TLS_DIR = Path("/etc/rabbitmq/amqpscope-tls")
RABBITMQ_CONF = Path("/etc/rabbitmq/rabbitmq.conf")
TLS_CONF_MARK = "# amqpscope: TLS listener for the TLS recordings (captures/record.py)"


def ensure_tls_listener() -> None:
    """RabbitMQ's TLS listener on 5671 with a certificate made here; idempotent.

    Why: the TLS scenarios need a broker that speaks TLS, on a fresh machine too. The
    certificate is made once (cryptography, else openssl) and the listener configured in
    rabbitmq.conf, which takes a broker restart; clients do not verify it (the recordings are
    about the bytes, and the key log is what matters).
    """
    if port_open(BROKER_HOST, TLS_PORT):
        return
    TLS_DIR.mkdir(parents=True, exist_ok=True)
    TLS_DIR.chmod(0o755)
    made = self_signed_cert(TLS_DIR)
    if made is None:
        raise RuntimeError("cannot make a certificate: neither cryptography nor openssl")
    for path in made:
        path.chmod(0o644)  # the broker runs as the rabbitmq user; a throwaway test key
    text = RABBITMQ_CONF.read_text() if RABBITMQ_CONF.exists() else ""
    if TLS_CONF_MARK not in text:
        cert, key = made
        text += (
            f"\n{TLS_CONF_MARK}\n"
            f"listeners.ssl.default = {TLS_PORT}\n"
            f"ssl_options.certfile = {cert}\n"
            f"ssl_options.keyfile = {key}\n"
            "ssl_options.verify = verify_none\n"
            "ssl_options.fail_if_no_peer_cert = false\n"
            "ssl_options.versions.1 = tlsv1.3\n"
            "ssl_options.versions.2 = tlsv1.2\n"
        )
        RABBITMQ_CONF.write_text(text)
        RABBITMQ_CONF.chmod(0o644)
    log(f"restarting RabbitMQ for its TLS listener on {TLS_PORT}")
    run_cmd(["rabbitmqctl", "stop"], timeout=120, check=False)
    subprocess.run(
        ["rabbitmq-server", "-detached"],
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        check=True,
        timeout=60,
    )
    wait_for_broker(time.monotonic() + 120)
    deadline = time.monotonic() + 30
    while not port_open(BROKER_HOST, TLS_PORT):
        if time.monotonic() > deadline:
            raise RuntimeError(f"RabbitMQ did not open its TLS listener on {TLS_PORT}")
        time.sleep(1)
    log(f"RabbitMQ is up with TLS on {TLS_PORT}")


def keylog_path(ctx: Ctx) -> Path:
    """The scenario's key log, next to its capture (NAME.keys)."""
    return ctx.capture.path.parent / f"{ctx.name}.keys"


def tls_client_context(ctx: Ctx, version: ssl.TLSVersion | None = None) -> ssl.SSLContext:
    """A client context that writes the scenario's key log (OpenSSL's, through Python's ssl)."""
    path = keylog_path(ctx)
    path.unlink(missing_ok=True)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if version is not None:
        context.minimum_version = context.maximum_version = version
    context.keylog_filename = str(path)
    return context


def tls_facts(sock: ssl.SSLSocket | ssl.SSLObject) -> dict[str, Any]:
    """What the client's TLS library negotiated (ground truth for the TLS layer's info)."""
    cipher = sock.cipher()
    return {"version": sock.version(), "cipher": cipher[0] if cipher else None}


def _send(sock: socket.socket, data: bytes) -> None:
    sock.setblocking(True)
    sock.sendall(data)
    sock.setblocking(False)


def _close_write(sock: socket.socket) -> None:
    """End one direction: a TLS socket sends close_notify (a non-blocking unwrap sends it and
    does not wait for the peer's), a plain one a FIN."""
    with contextlib.suppress(OSError, ssl.SSLError):
        if isinstance(sock, ssl.SSLSocket):
            sock.unwrap()
        else:
            sock.shutdown(socket.SHUT_WR)


def drain_and_close(sock: socket.socket) -> None:
    """Read what the peer still sent (a close_notify, its FIN) before closing: closing with
    unread bytes makes the kernel answer with a reset, which the capture would show."""
    import select

    with contextlib.suppress(OSError):
        while select.select([sock.fileno()], [], [], 0.3)[0]:
            if not os.read(sock.fileno(), 65536):
                break
    with contextlib.suppress(OSError):
        sock.close()


def relay(plain: socket.socket, tls: ssl.SSLSocket, timeout: float = 30.0) -> None:
    """Copy bytes both ways until both ends are done, in one thread (an SSL object must not be
    read and written from two threads at once)."""
    import select

    other = {plain: tls, tls: plain}
    reading = {plain, tls}
    for sock in other:
        sock.setblocking(False)
    deadline = time.monotonic() + timeout
    while reading and time.monotonic() < deadline:
        ready, _, _ = select.select(list(reading), [], [], 1.0)
        for src in ready:
            while True:  # drain: a TLS socket may hold decrypted bytes select cannot see
                try:
                    data = src.recv(65536)
                except (ssl.SSLWantReadError, BlockingIOError):
                    break
                except (OSError, ssl.SSLError):
                    data = b""
                if not data:
                    reading.discard(src)
                    _close_write(other[src])
                    break
                try:
                    _send(other[src], data)
                except (OSError, ssl.SSLError):
                    reading.discard(src)
                    break


class TlsRelay:
    """Plain TCP in on an ephemeral loopback port, TLS out (Python's ssl: OpenSSL writes the key
    log). Proton's reactor cannot log TLS keys, so Proton's bytes go through this relay, the
    way `ssl.MemoryBIO` would carry them. `inband`: the AMQP 1.0 TLS header exchange first.
    `server`: terminate TLS instead (in on `listen_port`, plain out to `target`)."""

    def __init__(
        self,
        target: tuple[str, int],
        context: ssl.SSLContext,
        inband: bool = False,
        server: bool = False,
        listen_port: int = 0,
    ) -> None:
        self.target = target
        self.context = context
        self.inband = inband
        self.server = server
        self.listener = socket.create_server(("127.0.0.1", listen_port))
        self.port = self.listener.getsockname()[1]
        self.n = Counts()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def start(self) -> int:
        self.thread.start()
        return self.port

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.listener.close()

    def _serve(self) -> None:
        try:
            plain, _ = self.listener.accept()
        except OSError:
            return
        header = b"AMQP\x02\x01\x00\x00"
        try:
            if self.server:
                if self.inband:
                    self.n["header_received"] = plain.recv(8, socket.MSG_WAITALL).hex()
                    plain.sendall(header)
                outer = self.context.wrap_socket(plain, server_side=True)
                inner = socket.create_connection(self.target)
            else:
                inner = socket.create_connection(self.target)
                if self.inband:
                    inner.sendall(header)
                    self.n["header_received"] = inner.recv(8, socket.MSG_WAITALL).hex()
                outer = plain
                inner = self.context.wrap_socket(inner, server_hostname="localhost")
                self.n["tls"] = tls_facts(inner)
        except (OSError, ssl.SSLError) as exc:
            self.n["error"] = repr(exc)
            plain.close()
            self.done.set()
            return
        if self.server:
            relay(inner, outer)  # type: ignore[arg-type]
        else:
            relay(outer, inner)  # type: ignore[arg-type]
        for sock in (outer, inner):
            drain_and_close(sock)
        self.done.set()


def s_091_tls(ctx: Ctx, version: ssl.TLSVersion) -> dict[str, Any]:
    """091-publish-consume's conversation over TLS to RabbitMQ's 5671."""
    context = tls_client_context(ctx, version)
    facts: dict[str, Any] = {}
    original = context.wrap_socket

    def wrap(sock: socket.socket, *args: Any, **kw: Any) -> ssl.SSLSocket:
        wrapped = original(sock, *args, **kw)
        handshake = wrapped.do_handshake

        def do_handshake(*hargs: Any, **hkw: Any) -> None:
            handshake(*hargs, **hkw)  # pika calls it until it stops raising WantRead
            facts.update(tls_facts(wrapped))

        wrapped.do_handshake = do_handshake  # type: ignore[method-assign]
        return wrapped

    context.wrap_socket = wrap  # type: ignore[method-assign]
    n = basic_round_trip(
        ctx,
        messages=10,
        port=TLS_PORT,
        ssl_options=pika.SSLOptions(context, "localhost"),
    )
    n["tls"] = facts
    n["keylog"] = keylog_path(ctx).name
    return n


@scenario(
    "091-tls12",
    "0-9-1",
    "091-publish-consume over TLS 1.2: pika (Python's ssl, key log in 091-tls12.keys) to "
    f"RabbitMQ's TLS listener on {TLS_PORT} (a certificate made by record.py); declare, publish "
    "10, consume and ack them, cancel, delete the queue, close.",
    port=TLS_PORT,
    capture=CaptureSpec(bpf=f"tcp port {TLS_PORT}"),
)
def s_091_tls12(ctx: Ctx) -> dict[str, Any]:
    return s_091_tls(ctx, ssl.TLSVersion.TLSv1_2)


@scenario(
    "091-tls13",
    "0-9-1",
    "091-publish-consume over TLS 1.3: pika (Python's ssl, key log in 091-tls13.keys) to "
    f"RabbitMQ's TLS listener on {TLS_PORT}; declare, publish 10, consume and ack them, cancel, "
    "delete the queue, close.",
    port=TLS_PORT,
    capture=CaptureSpec(bpf=f"tcp port {TLS_PORT}"),
)
def s_091_tls13(ctx: Ctx) -> dict[str, Any]:
    return s_091_tls(ctx, ssl.TLSVersion.TLSv1_3)


def embed_secrets(final: Path, out: Path, name: str) -> None:
    """editcap --inject-secrets: the key log goes into the pcapng (a Decryption Secrets Block),
    so the capture decrypts with no option; the separate key log is then removed."""
    keys = out / f"{name}.keys"
    tmp = final.with_name(final.name + ".dsb")
    run_cmd(["editcap", "--inject-secrets", f"tls,{keys}", str(final), str(tmp)])
    os.replace(tmp, final)
    keys.unlink()


@scenario(
    "091-tls13-embedded",
    "0-9-1",
    "As 091-tls13, recorded with dumpcap into pcapng; the key log was then injected into the file "
    "(editcap --inject-secrets tls,KEYS: a Decryption Secrets Block), so it decrypts with no "
    "option given.",
    port=TLS_PORT,
    capture=CaptureSpec(tool="dumpcap", bpf=f"tcp port {TLS_PORT}", ext="pcapng"),
    post=embed_secrets,
)
def s_091_tls13_embedded(ctx: Ctx) -> dict[str, Any]:
    return s_091_tls(ctx, ssl.TLSVersion.TLSv1_3)


@scenario(
    "10-tls",
    "1.0",
    "10-send-receive over TLS 1.3 to RabbitMQ's TLS listener on 5671: Proton's reactor speaks "
    "to a loopback relay that carries its bytes through Python's ssl (OpenSSL, key log in "
    "10-tls.keys; Proton's own SSL cannot log keys). 10 unsettled messages accepted by the "
    "broker, received back and accepted, close. Only the TLS leg is captured.",
    port=TLS_PORT,
    capture=CaptureSpec(bpf=f"tcp port {TLS_PORT}"),
    setup=(("q", {}),),
    queues=(),
)
def s10_tls(ctx: Ctx) -> dict[str, Any]:
    relay = TlsRelay((BROKER_HOST, TLS_PORT), tls_client_context(ctx, ssl.TLSVersion.TLSv1_3))
    try:
        client = SendThenReceive(ctx, 10)
        client.url = f"amqp://127.0.0.1:{relay.start()}"
        n = client.run()
        if not relay.done.wait(10):
            raise RuntimeError(f"the TLS relay did not finish: {json.dumps(relay.n)}")
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
            for relay in (client, server):
                if not relay.done.wait(10):
                    raise RuntimeError(f"a TLS relay did not finish: {json.dumps(relay.n)}")
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


#: what would drive a terminal printed raw: an OSC window title, a colour, a screen clear, a
#: right-to-left override and rich markup (amqpscope must print all of it escaped or literal)
HOSTILE = "\x1b]0;pwned\x07\x1b[31mred\x1b[0m\x1b[2J\u202e[bold red]x[/]"


@scenario(
    "091-hostile-names",
    "0-9-1",
    "Strings that would drive a terminal: a queue whose name holds escape sequences (an OSC "
    "window title, a colour, a screen clear), a right-to-left override and rich markup is "
    "declared; a text/plain message whose body holds them too is published and fetched with "
    "basic.get; a passive declare of a missing queue so named gets channel.close 404, whose reply "
    "text repeats the name; the queue is deleted on a second channel.",
    queues=(HOSTILE, "missing" + HOSTILE),
)
def s_hostile_names(ctx: Ctx) -> dict[str, Any]:
    """Terminal safety: captured strings with escape sequences, from a real broker."""
    n = Counts()
    conn = connect_091(ctx, n)
    ch = conn.channel()
    n.inc("channels")
    q = ctx.q(HOSTILE)
    ch.queue_declare(q)
    n.inc("queue_declares")
    n["queue"] = q
    body = f"body {HOSTILE}".encode()
    publish_plain(ch, n, q, body)
    method, _props, got = ch.basic_get(q, auto_ack=True)
    n.inc("gets")
    if method is None or got != body:
        raise RuntimeError("basic.get did not return the message")
    n.inc("get_ok")
    n["body"] = got.decode()
    missing_then_delete(ctx, conn, ch, n, q, HOSTILE)
    return n


def missing_then_delete(
    ctx: Ctx, conn: pika.BlockingConnection, ch: Any, n: Counts, q: str, name: str
) -> None:
    """The end of a hostile-names scenario: a passive declare of a missing queue named with
    `name` (channel 1 is closed with 404, whose reply text repeats it), `q` deleted on a
    second channel, the connection closed."""
    missing = ctx.q("missing" + name)
    n["missing_queue"] = missing
    try:
        ch.queue_declare(missing, passive=True)
        n.inc("queue_declares")
    except pika.exceptions.ChannelClosedByBroker as err:
        n.inc("queue_declares")
        n.add("channel_errors", {"channel": 1, "code": err.reply_code, "text": err.reply_text})
    else:
        raise RuntimeError("a passive declare of a missing queue succeeded")
    ch2 = conn.channel()
    n.inc("channels")
    ch2.queue_delete(q)
    n.inc("queue_deletes")
    close_091(conn, n)


#: how a killed consumer's process starts: arguments record.py's folder, the queue, a name
KILLED_PROLOGUE = """
import json, sys, time
import pika
sys.path.insert(0, sys.argv[1])
from record import pika_params
q, name = sys.argv[2], sys.argv[3]
n = {"connections": 1, "channels": 1}
conn = pika.BlockingConnection(pika_params(name=name))
ch = conn.channel()
ch.queue_declare(q)
n["queue_declares"] = 1
"""
#: the consumer killed by 091-killed-consumer: a process of its own, so SIGKILL ends it the way
#: an OOM kill or `kill -9` does (the kernel closes its socket; no connection.close is sent)
KILLED_CONSUMER = (
    KILLED_PROLOGUE
    + """
ch.basic_qos(prefetch_count=5)
n["prefetch_count"] = 5
for i in range(20):
    ch.basic_publish("", q, f"work item {i}".encode(),
                     pika.BasicProperties(content_type="text/plain", message_id=f"w{i}"))
n["publishes"] = 20
got = []
ch.basic_consume(q, lambda c, m, p, b: got.append(m.delivery_tag))
n["consumers"] = 1
deadline = time.monotonic() + 15
while len(got) < 5 and time.monotonic() < deadline:
    conn.process_data_events(time_limit=0.05)
conn.process_data_events(time_limit=0.3)  # the broker sends no more: prefetch is reached
n["deliveries"] = len(got)
n["unacked_when_killed"] = len(got)
print(json.dumps(n), flush=True)
time.sleep(60)  # stuck: a consumer that never acks, until it is killed
"""
)


@scenario(
    "091-killed-consumer",
    "0-9-1",
    "A consumer stuck at its prefetch is killed: one pika process declares the queue, sets "
    "basic.qos prefetch_count=5, publishes 20 messages, consumes without ever acking, and once "
    "the 5 deliveries the prefetch allows have arrived it is killed with SIGKILL. No "
    "connection.close is sent: the capture ends with the kernel closing the client's socket and "
    "the broker dropping the connection (its 5 unacked deliveries are requeued).",
)
def s_killed_consumer(ctx: Ctx) -> dict[str, Any]:
    """The client vanishes: TCP ends while the AMQP connection is open."""
    return killed(ctx, KILLED_CONSUMER, deliveries=5)


def killed(ctx: Ctx, script: str, deliveries: int) -> Counts:
    """Run a consumer `script` in a process of its own, wait for its counts (printed once it
    has its `deliveries`), and kill it with SIGKILL: no connection.close is sent."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(HERE), ctx.q(), f"amqpscope {ctx.name}"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line:
            raise RuntimeError("the consumer process ended before it was ready")
        n = Counts(json.loads(line))
        if n["deliveries"] != deliveries:
            raise RuntimeError(
                f"expected {deliveries} deliveries before the kill, got {n['deliveries']}"
            )
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        n["killed_with"] = "SIGKILL"
        n["connection_closes"] = 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    return n


#: the auto-ack consumer killed by 091-killed-autoack-consumer: every message is delivered to
#: it (a worker's in-memory buffer) and it is killed before it handles any
KILLED_AUTOACK_CONSUMER = (
    KILLED_PROLOGUE
    + """
for i in range(20):
    ch.basic_publish("", q, f"order {i}".encode(),
                     pika.BasicProperties(content_type="text/plain", message_id=f"o{i}"))
n["publishes"] = 20
got = []
ch.basic_consume(q, lambda c, m, p, b: got.append(m.delivery_tag), auto_ack=True)
n["consumers"] = 1
deadline = time.monotonic() + 15
while len(got) < 20 and time.monotonic() < deadline:
    conn.process_data_events(time_limit=0.05)
n["deliveries"] = len(got)
n["acks"] = 0
print(json.dumps(n), flush=True)
time.sleep(60)  # buffered, not yet handled, until it is killed
"""
)


@scenario(
    "091-killed-autoack-consumer",
    "0-9-1",
    "An auto-ack consumer is killed: one pika process declares the queue, publishes 20 "
    "messages and consumes them with auto_ack=True (no-ack); the broker delivers all 20 at once "
    "(no prefetch limit applies to no-ack) and forgets each as it sends it; once all 20 are in "
    "the client's memory, before it handles any, the process is killed with SIGKILL. No "
    "connection.close is sent. A second connection then declares the queue passively: it is "
    "empty (messages=0), nothing was requeued, the 20 messages are lost.",
)
def s_killed_autoack_consumer(ctx: Ctx) -> dict[str, Any]:
    """Messages that vanish: delivered with no-ack to a client that dies."""
    n = killed(ctx, KILLED_AUTOACK_CONSUMER, deliveries=20)
    # a second connection, in the capture too: the queue is empty, nothing was requeued
    conn = pika.BlockingConnection(pika_params(name=f"amqpscope {ctx.name} check"))
    left = conn.channel().queue_declare(ctx.q(), passive=True).method.message_count
    conn.close()
    for key in ("connections", "channels", "queue_declares", "connection_closes"):
        n.inc(key)
    n["left_in_queue"] = left
    if left != 0:
        raise RuntimeError(f"expected the queue empty after the kill, it holds {left}")
    return n


# --------------------------------------------------------------------------
# Child process: one scenario, one capture
# --------------------------------------------------------------------------


def run_child(name: str, out: Path, result: Path) -> int:
    """Run one scenario under capture; write expect/capture facts to `result`."""
    sc = SCENARIOS[name]
    part = out / f"{name}.{sc.capture.ext}.part"
    ctx = Ctx(name=name, capture=Capture(sc.capture, part))
    ports = ports_of(sc.port) if sc.port else {BROKER_PORT}
    if sc.needs_broker:
        broker_housekeeping(ctx, sc, declare=True)
    if sc.prepare:
        sc.prepare(ctx)
    if leftovers := wait_quiet(ports | {BROKER_PORT}, 10):
        log(f"  WARNING: connections still open before capture, they may leak into it: {leftovers}")
    try:
        if not sc.manual_capture:
            ctx.capture.start()
        expect = sc.run(ctx)
        if not ctx.capture.started:
            raise RuntimeError("scenario never started its capture")
        time.sleep(0.5)
        capture_ports = ports_of(ctx.port) if ctx.port else ports
        if leftovers := wait_quiet(capture_ports, 5):
            log(f"  WARNING: connections still open when stopping the capture: {leftovers}")
        stats = ctx.capture.stop()
    finally:
        ctx.capture.kill()
        if sc.cleanup is not None:
            sc.cleanup(ctx)
        if sc.needs_broker:
            with contextlib.suppress(Exception):
                broker_housekeeping(ctx, sc, declare=False)
    result.write_text(
        json.dumps(
            {
                "expect": expect,
                "port": ctx.port if ctx.port is not None else sc.port,
                "capture": {
                    "tool": sc.capture.tool,
                    "command": shlex.join(ctx.capture.command),
                    "interface": sc.capture.interface,
                    "filter": ctx.capture.bpf,
                    **stats,
                },
            }
        )
    )
    return 0


# --------------------------------------------------------------------------
# Parent process: orchestration, JSON, sanity checks
# --------------------------------------------------------------------------


def run_one(
    name: str, out: Path, recorded_with: dict[str, Any], timeout: float | None
) -> str | None:
    """Record one scenario in a child process group; return an error string or None."""
    sc = SCENARIOS[name]
    result = out / f".{name}.result.json"
    part = out / f"{name}.{sc.capture.ext}.part"
    result.unlink(missing_ok=True)
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        name,
        "--out",
        str(out),
        "--result",
        str(result),
    ]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, start_new_session=True)
    limit = timeout or sc.timeout
    try:
        rc = proc.wait(limit)
    except subprocess.TimeoutExpired:
        rc = None
    except KeyboardInterrupt:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    try:
        if rc is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            return f"timed out after {limit:.0f}s"
        if rc != 0 or not result.exists():
            return f"scenario process exited with {rc}"
        data = json.loads(result.read_text())
        final = out / f"{name}.{sc.capture.ext}"
        os.replace(part, final)
        final.chmod(0o644)
        if sc.post is not None:
            sc.post(final, out, name)
        doc = {
            "scenario": name,
            "description": sc.description,
            "protocol": sc.protocol,
            "port": data["port"],
            "file": final.name,
            "capture": {
                **data["capture"],
                "command": data["capture"]["command"].replace(str(part), final.name),
                **pcap_file_info(final),
            },
            "expect": data["expect"],
            "recorded_with": recorded_with,
            "recorded_at": dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat(),
        }
        (out / f"{name}.json").write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n")
        (out / f"{name}.json").chmod(0o644)
        return None
    finally:
        result.unlink(missing_ok=True)
        part.unlink(missing_ok=True)


def tshark_check(out: Path, name: str) -> tuple[bool, str]:
    """Independent look with tshark: the file reads cleanly and AMQP shows up where expected."""
    sc = SCENARIOS[name]
    path = out / f"{name}.{sc.capture.ext}"
    cmd = ["tshark", "-n", "-r", str(path), "-Y", "amqp", "-T", "fields", "-e", "frame.number"]
    # 0-9-1 on another broker's port (garagemq's 5674, which has the number of the WebSocket
    # scenario's: never both at once)
    garagemq = sc.protocol == "0-9-1" and sc.port not in (BROKER_PORT, TLS_PORT)
    if sc.port == P2P_PORT or garagemq:
        cmd[1:1] = ["-d", f"tcp.port=={sc.port},amqp"]
    what = "AMQP"
    keys = out / f"{name}.keys"
    if sc.port == TLS_PORT:
        # Wireshark decrypts with the key log (or the secrets in the pcapng). It does not follow
        # the in-band upgrade (10-tls-inband): there it sees the two `AMQP 2 1 0 0` headers.
        what = "TLS"
        cmd[cmd.index("amqp")] = "tls"
        if keys.exists():
            cmd[1:1] = ["-o", f"tls.keylog_file:{keys}"]
    if sc.port == WS_PORT and not garagemq:  # no AMQP inside WebSocket for Wireshark: framing
        what = "WebSocket"
        cmd[cmd.index("amqp")] = "websocket"
        cmd[1:1] = ["-d", f"tcp.port=={WS_PORT},http"]
    proc = subprocess.run(
        cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120
    )
    if proc.returncode != 0 or "cut short" in proc.stderr:
        return False, f"tshark error: {proc.stderr.strip()}"
    frames = len(proc.stdout.split())
    if sc.protocol in ("0-9-1", "1.0") and frames == 0:
        return False, f"tshark found no {what} packets"
    if sc.protocol == "none" and frames:
        return False, f"tshark found {frames} AMQP packets in a non-AMQP capture"
    return True, f"{frames} packets with {what} (tshark)"


def load_scenario_families() -> None:
    """Scenario families beyond this file live in captures/scenarios/, one module each (e.g.
    diagnoses, trace logs). They `import record` and register with `record.scenario`; this module
    is put in sys.modules under that name first, so they share its registry whether it runs as
    the program or is imported. Loaded in name order, after this file's own scenarios."""
    import importlib.util

    sys.modules.setdefault("record", sys.modules[__name__])
    for path in sorted((HERE / "scenarios").glob("*.py")):
        if path.name.startswith("_"):
            continue
        spec = importlib.util.spec_from_file_location(f"record_scenarios.{path.stem}", path)
        if spec is None or spec.loader is None:
            continue
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)


load_scenario_families()


def broker_or_error() -> int:
    """`ensure_broker`, saying what stopped it in one line (as `make test` shows), no traceback."""
    if missing := [t for t in ("rabbitmq-server", "rabbitmq-plugins") if not shutil.which(t)]:
        log(f"cannot start RabbitMQ: no {' or '.join(missing)} (Debian's rabbitmq-server has them)")
        return 1
    try:
        ensure_broker()
    except (RuntimeError, OSError, subprocess.SubprocessError) as err:
        log(f"cannot start RabbitMQ: {err}")
        return 1
    try:
        ensure_garagemq()
    except (RuntimeError, OSError, subprocess.SubprocessError) as err:
        log(f"cannot start garagemq: {err}")
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """CLI entry point (parent orchestration, or --child for one scenario)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="record only these scenarios")
    parser.add_argument(
        "--out", type=Path, default=HERE, help="output directory (default: captures/)"
    )
    parser.add_argument("--list", action="store_true", help="list scenarios and exit")
    parser.add_argument(
        "--ensure-broker",
        action="store_true",
        help="only start/configure RabbitMQ and garagemq, then exit (used by `make broker`)",
    )
    parser.add_argument("--timeout", type=float, help="per-scenario timeout override, seconds")
    parser.add_argument("--no-check", action="store_true", help="skip the tshark sanity check")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    out = args.out.resolve()

    if args.child:
        # The parent's timeout sends SIGTERM; turn it into SystemExit so `finally`
        # blocks stop tcpdump and delete this scenario's queues.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(f"{args.child}: terminated (timeout)"))
        return run_child(args.child, out, args.result)
    if args.ensure_broker:
        return broker_or_error()
    if args.list:
        for sc in SCENARIOS.values():
            print(f"{sc.name:20} {sc.protocol:6} {sc.description}")
        return 0

    names = args.only or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(unknown)} (see --list)")
    tools = {"tcpdump"} | {SCENARIOS[n].capture.tool for n in names}
    if missing := [t for t in sorted(tools) if not shutil.which(t)]:
        log(f"missing capture tools: {missing}")
        return 2
    if os.geteuid() != 0:
        log("WARNING: not root; packet capture will probably fail")
    out.mkdir(parents=True, exist_ok=True)

    started = time.monotonic()
    needs_broker = any(SCENARIOS[n].needs_broker for n in names)
    if needs_broker and broker_or_error():
        return 1
    recorded_with = software_versions(with_broker=needs_broker)
    log(f"software: {json.dumps(recorded_with)}")

    failures: dict[str, str] = {}
    for name in names:
        t0 = time.monotonic()
        log(f"{name}: recording")
        if err := run_one(name, out, recorded_with, args.timeout):
            failures[name] = err
            log(f"{name}: FAILED: {err}")
        else:
            size = (out / f"{name}.{SCENARIOS[name].capture.ext}").stat().st_size
            log(f"{name}: ok ({size} bytes, {time.monotonic() - t0:.1f}s)")

    if not args.no_check and shutil.which("tshark"):
        log("sanity check with tshark:")
        for name in names:
            if name in failures:
                continue
            good, verdict = tshark_check(out, name)
            log(f"  {name:20} {verdict}")
            if not good:
                failures[name] = verdict
    ok = len(names) - len(failures)
    log(f"finished in {time.monotonic() - started:.0f}s; {ok}/{len(names)} scenarios ok")
    for name, err in failures.items():
        log(f"  FAILED {name}: {err}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
