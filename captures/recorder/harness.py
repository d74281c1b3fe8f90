"""The recording harness: the registry of scenarios (`scenario`, `SCENARIOS`), what a scenario
gets (`Ctx`) and counts (`Counts`), its capture (`Capture`: tcpdump or dumpcap known to be
capturing) and the ports and connections it waits on."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent  # captures/


BROKER_HOST = "127.0.0.1"


BROKER_PORT = 5672


STREAM_PORT = 5552


P2P_PORT = 5673


#: garagemq (a Go 0-9-1 broker, Debian's `garagemq`) listens here, beside RabbitMQ on 5672
GARAGEMQ_PORT = int(os.environ.get("AMQPSCOPE_GARAGEMQ_PORT", "5674"))  # another: a private one


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


def npm_modules(spec: str, folder: str) -> Path:
    """node_modules holding `spec` (NAME@VERSION), installed from npm once into the temporary
    `folder` (outside the repository: only recording needs it); RuntimeError when node or npm
    is missing, so the scenario says what it needs."""
    name = spec.rsplit("@", 1)[0]
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"{tool} is not on PATH ({name} scenarios need Node.js and npm)")
    prefix = Path(tempfile.gettempdir()) / folder
    if not (prefix / "node_modules" / name / "package.json").exists():
        prefix.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(prefix), spec],
            check=True,
            timeout=300,
            stdout=subprocess.DEVNULL,
        )
    return prefix / "node_modules"


def rhea_client(
    spec: str, folder: str, script: Path, args: list[str], stderr: Any = subprocess.PIPE, **env: str
) -> dict[str, Any]:
    """Run a rhea client script under node to its end, rhea `spec` from npm_modules(spec, folder)
    on NODE_PATH and `env` added: what it printed last (one JSON line), with the "rhea" version."""
    modules = npm_modules(spec, folder)
    done = subprocess.run(
        ["node", str(script), *args],
        env=dict(os.environ, NODE_PATH=str(modules), **env),
        stdout=subprocess.PIPE,
        stderr=stderr,
        timeout=60,
        check=False,
    )
    lines = done.stdout.decode().strip().splitlines()
    if done.returncode != 0 or not lines:
        said = f": {done.stderr[-400:]!r}" if done.stderr else ""
        raise RuntimeError(f"{script.name} exited with {done.returncode}{said}")
    counts: dict[str, Any] = json.loads(lines[-1])
    counts["rhea"] = json.loads((modules / "rhea" / "package.json").read_text())["version"]
    return counts


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


def own_broker(port: int, prepare: Callable[[Ctx], None], **kw: Any) -> dict[str, Any]:
    """The settings of a scenario recorded against a broker other than the recorder's RabbitMQ:
    its port captured, nothing declared beforehand, no RabbitMQ needed, `prepare` (which starts
    that broker) run before the capture; `kw` further settings."""
    return {
        "port": port,
        "capture": CaptureSpec(bpf=f"tcp port {port}"),
        "queues": (),
        "needs_broker": False,
        "prepare": prepare,
        **kw,
    }


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


WS_PORT = 5675  # 5674 is garagemq's; captures/10-websocket.pcap was recorded on 5674 before


WS_PATH = "/amqp"


WS_FRAGMENT = 64  # the client sends AMQP bytes in frames of at most this size: continuations
