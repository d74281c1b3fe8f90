"""Live capture: packets from a network interface, as `RawPacket`s, while they flow.

This is the only module besides `files.py` that does I/O below the CLI. A capture thread runs one
backend and hands packets to the decoding thread through a bounded queue (`PacketQueue`); when
the decoder falls behind and the queue is full, packets are dropped there and counted
("backend drops"), never buffered without limit. The kernel's own drops are reported as the
backend can tell them.

Backends (`--backend`, chosen automatically in this order when not given):

* ``tcpdump``: ``tcpdump -U -B 65536 -C MB -w SPOOL`` into the spool (`capture.spool`), read
  behind it. The fastest: libpcap's ring buffer and BPF in the kernel, no per-packet Python
  beyond the parser. Kernel drops from tcpdump's statistics at exit. Not `--immediate-mode`: see
  `TOOL_HANDOVER`.
* ``dumpcap``: the same with ``dumpcap -P`` (Wireshark's capture engine; pcap, not pcapng).
* ``scapy``: a PF_PACKET socket from scapy (`L2ListenSocket`) with the BPF filter attached in the
  kernel, read as raw bytes (no per-packet dissection). Kernel drops from PACKET_STATISTICS.
* ``pyshark``: tshark through pyshark with the raw bytes of every packet (``include_raw``). Slow:
  tshark dissects every packet and pyshark parses its JSON, only for the bytes to be decoded
  again here; an option for machines where only tshark may capture. Kernel drops are unknown.

`-w` writes every captured packet (before the queue, so also what the decoder had to drop) as
pcap, flushed as it goes; reading it back gives the same frames as the live run when nothing was
dropped. Decoding them is not this module's: `amqpscope.live_pipeline` (beside `dissect.py`)
keeps the decoding state bounded over hours.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any, Final

from amqpscope.capture.packet import RawPacket
from amqpscope.capture.spool import (
    FILES,
    SPOOL_MB,
    Lag,
    PcapStream,
    Spool,
    make_directory,
)
from amqpscope.capture.spool import (
    PcapStreamError as PcapStreamError,  # re-exported: the parser was here
)
from amqpscope.capture.writer import PcapToPcapng, format_for
from amqpscope.findings import Finding

BACKENDS = ("tcpdump", "dumpcap", "scapy", "pyshark")
#: what is captured when no -f is given: AMQP is found on any TCP port
DEFAULT_FILTER = "tcp"
#: the capture tools' kernel buffer (libpcap -B), KiB: lo's 64 KiB packets fill small rings fast
RING_KIB = 65536
#: tcpdump runs without `--immediate-mode`, which makes libpcap use a TPACKET_V2 ring: a slot
#: per packet, each as large as the interface's MTU (lo: 64 KiB), so 64 MiB held some hundreds
#: of packets: tcpdump stopped 3 s under the bench's load (`bench/live.py --stall 3`) dropped
#: 2,765-4,513 packets with it, 0-5,599 with it and -B 262144, 0 without it (three rounds
#: each). Without it, TPACKET_V3 packs packets into blocks, but hands a block over only when it
#: is full or after tcpdump's timeout (1 s): stopping waits this long before tcpdump's SIGINT,
#: else a quiet link's last packets are lost (uncounted as drops)
TOOL_HANDOVER = 1.25
#: dumpcap's libpcap the same, with dumpcap's own timeout (250 ms): stopped at once, the packets
#: of the last quarter second were lost (all five publishes of a short run stopped right after)
DUMPCAP_HANDOVER = 0.6
#: after a stop, how long scapy's socket and pyshark's tshark may go on handing over the packets
#: they captured before it (a flood would never end)
DRAIN_SECONDS: Final = 5.0
#: the queue between the capture thread and the decoder
QUEUE_PACKETS = 100_000
QUEUE_BYTES = 128 * 1024 * 1024
#: largest packet the scapy backend reads (lo's MTU is 64 KiB; GRO/TSO can make bigger ones)
RECV_SIZE = 262_144

_SETCAP = "setcap cap_net_raw,cap_net_admin=eip"
_SOL_PACKET = 263
_PACKET_STATISTICS = 6
_PACKET_OUTGOING = 4
_ARPHRD_LOOPBACK = 772


class LiveError(Exception):
    """Capture cannot start or failed: one line for a human, and the exit code (2: bad usage)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


# -- interfaces, filters, backends -------------------------------------------------------------


def interfaces() -> list[str]:
    """The names of the machine's network interfaces."""
    with contextlib.suppress(OSError):
        return sorted(os.listdir("/sys/class/net"))
    try:
        from scapy.interfaces import get_if_list

        return sorted(get_if_list())
    except Exception:
        return []


def check_interface(iface: str, backend: str) -> None:
    known = interfaces()
    if iface == "any" and backend in ("tcpdump", "dumpcap", "pyshark"):
        return
    if iface not in known:
        listed = ", ".join(known) or "none found"
        if iface == "any":
            raise LiveError(
                f"the {backend} backend cannot capture on 'any' (interfaces: {listed})", 2
            )
        raise LiveError(f"no interface named {iface!r} (interfaces: {listed})", 2)


def _arphrd(iface: str) -> int | None:
    try:
        with open(f"/sys/class/net/{iface}/type") as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return None


def interface_linktype(iface: str) -> int:
    """The libpcap link type (DLT) packets of `iface` carry; Ethernet when it cannot be told."""
    if iface == "any":
        return 113  # Linux cooked capture
    hw = _arphrd(iface)
    if hw is None:
        return 1
    from scapy.data import ARPHRD_TO_DLT

    return ARPHRD_TO_DLT.get(hw, 1)


def check_filter(bpf: str, linktype: int = 1) -> None:
    """Compile `bpf` for `linktype` with libpcap (no privileges needed): LiveError(2) with the
    compiler's message when it is wrong. Without libpcap, `tcpdump -d` is asked; without either,
    the capture tool reports it when it starts."""
    try:
        import ctypes

        from scapy.arch.common import bpf_program
        from scapy.libs.winpcapy import pcap_close, pcap_compile, pcap_geterr, pcap_open_dead
    except Exception:
        tcpdump = shutil.which("tcpdump")
        if tcpdump is None:
            return
        try:
            done = subprocess.run(
                [tcpdump, "-d", bpf], capture_output=True, text=True, timeout=10, check=False
            )
        except (OSError, subprocess.SubprocessError):
            return
        if done.returncode != 0:
            lines = [ln for ln in done.stderr.splitlines() if not ln.startswith("Warning")]
            why = (lines[-1] if lines else "rejected").removeprefix("tcpdump: ")
            raise LiveError(f"bad capture filter {bpf!r}: {why}", 2) from None
        return
    handle = pcap_open_dead(101 if linktype == 12 else linktype, 262144)
    program = bpf_program()
    try:
        if pcap_compile(handle, ctypes.byref(program), bpf.encode(), 1, -1) == -1:
            why = bytes(pcap_geterr(handle)).split(b"\0")[0].decode(errors="replace")
            raise LiveError(f"bad capture filter {bpf!r}: {why}", 2)
        from scapy.libs.winpcapy import pcap_freecode

        pcap_freecode(ctypes.byref(program))
    finally:
        pcap_close(handle)


def _pyshark_available() -> bool:
    try:
        import pyshark  # noqa: F401
    except Exception:
        return False
    return shutil.which("tshark") is not None


def choose_backend(
    requested: str | None,
    which: Callable[[str], str | None] = shutil.which,
    pyshark_ok: Callable[[], bool] = _pyshark_available,
) -> str:
    """The backend to use: `requested` if it can run here, else tcpdump, dumpcap, scapy."""
    if requested is None:
        for tool in ("tcpdump", "dumpcap"):
            if which(tool):
                return tool
        return "scapy"
    if requested not in BACKENDS:
        raise LiveError(f"unknown backend {requested!r} (one of {', '.join(BACKENDS)})", 2)
    if requested in ("tcpdump", "dumpcap") and not which(requested):
        raise LiveError(f"--backend {requested}: {requested} is not installed (not on PATH)", 2)
    if requested == "pyshark" and not pyshark_ok():
        raise LiveError("--backend pyshark: needs the pyshark module and tshark on PATH", 2)
    return requested


def permission_hint(iface: str, program: str) -> str:
    return (
        f"no permission to capture on {iface}: run as root, or give {program} CAP_NET_RAW, "
        f"e.g. sudo {_SETCAP} {program}"
    )


def interpreter() -> str:
    return os.path.realpath(sys.executable)


def classify_stderr(tool: str, iface: str, text: str, program: str) -> LiveError:
    """A capture tool exited at start: why, as one line (permission, interface, filter)."""
    low = text.lower()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if "permission" in low or "operation not permitted" in low:
        return LiveError(permission_hint(iface, program))
    if "no such device" in low or "there is no device named" in low:
        known = ", ".join(interfaces()) or "none found"
        return LiveError(f"no interface named {iface!r} (interfaces: {known})", 2)
    m = re.search(r"\((can't parse filter expression[^)]*)\)", text) or re.search(
        r"(can't parse filter expression.*|syntax error.*)", text
    )
    if m or "invalid capture filter" in low:
        why = m.group(1) if m else (lines[0] if lines else "rejected")
        return LiveError(f"bad capture filter: {why.removeprefix(tool + ': ')}", 2)
    last = lines[-1] if lines else "no message"
    return LiveError(f"{tool} failed: {last}")


# -- the pcap stream (its parser is the spool's: `capture.spool.PcapStream`) ---------------------


def pcap_header(linktype: int, snaplen: int = 262144) -> bytes:
    """The header of a microsecond pcap file in this machine's byte order."""
    return struct.pack("=IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, snaplen, linktype)


def pcap_record(usec: int, data: bytes, wirelen: int) -> bytes:
    sec, frac = divmod(usec, 1_000_000)
    return struct.pack("=IIII", sec, frac, len(data), wirelen) + data


# -- the queue between capture and decoding ------------------------------------------------------


class PacketQueue:
    """Bounded by packets and bytes; `put` never blocks (a full queue drops and counts)."""

    def __init__(self, max_packets: int = QUEUE_PACKETS, max_bytes: int = QUEUE_BYTES) -> None:
        self.max_packets = max_packets
        self.max_bytes = max_bytes
        self._items: deque[RawPacket] = deque()
        self._bytes = 0
        self._cond = threading.Condition()
        self._closed = False
        self.dropped = 0
        self.high_water = 0

    def put(self, pkt: RawPacket) -> bool:
        size = len(pkt.data)
        with self._cond:
            if len(self._items) >= self.max_packets or self._bytes + size > self.max_bytes:
                self.dropped += 1
                return False
            self._items.append(pkt)
            self._bytes += size
            if len(self._items) > self.high_water:
                self.high_water = len(self._items)
            self._cond.notify()
            return True

    def close(self) -> None:
        """No more packets will come: `get` returns None once the queue is empty."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed

    def get(self, timeout: float) -> RawPacket | None:
        """The next packet, or None after `timeout` (or when closed and empty)."""
        with self._cond:
            if not self._items and not self._closed:
                self._cond.wait(timeout)
            if not self._items:
                return None
            pkt = self._items.popleft()
            self._bytes -= len(pkt.data)
            return pkt

    def get_nowait(self) -> RawPacket | None:
        with self._cond:
            if not self._items:
                return None
            pkt = self._items.popleft()
            self._bytes -= len(pkt.data)
            return pkt

    def __len__(self) -> int:
        return len(self._items)


# -- backends ------------------------------------------------------------------------------------


class Backend:
    """Runs in the capture thread: `run(emit, write)` until `stop()` (or the source ends).

    `emit(RawPacket)` takes each packet; `write(bytes)` the pcap bytes for -w (the header first).
    """

    name = ""
    kernel_drops: int | None = None  # None: the backend cannot tell

    def __init__(self, iface: str, bpf: str) -> None:
        self.iface = iface
        self.bpf = bpf
        self.linktype = interface_linktype(iface)
        self.error: str | None = None  # why capture ended early, if it did

    def start(self) -> None:
        """Open the capture (raises LiveError); packets are read by `run`."""

    def run(self, emit: Callable[[RawPacket], None], write: Callable[[bytes], None]) -> None:
        raise NotImplementedError

    def wait_ready(self, timeout: float) -> None:
        """Return once packets are being captured (for backends that start in `run`)."""

    def stop(self) -> None:
        """Ask `run` to return soon (from another thread or a signal handler)."""

    def close(self) -> None:
        """Release everything (idempotent); kernel drops are known after it."""


class ToolBackend(Backend):
    """tcpdump or dumpcap writing pcap files into the spool directory (`capture.spool`), in its
    own session (so Ctrl-C reaches us only), killed with us if we die (PR_SET_PDEATHSIG)."""

    def __init__(self, iface: str, bpf: str, tool: str, directory: str, file_bytes: int) -> None:
        super().__init__(iface, bpf)
        self.name = tool
        self.program = shutil.which(tool) or tool
        self.directory = directory
        self.file_bytes = file_bytes
        self.proc: subprocess.Popen[bytes] | None = None
        self.lines: list[str] = []
        self._ready = threading.Event()
        self._reader: threading.Thread | None = None
        self.listening = False  # the tool said it is capturing
        self.captured: int | None = None  # the packets the tool says it captured (at exit)
        #: when the tool is to be interrupted, once asked to stop (`TOOL_HANDOVER`)
        self.interrupt_at: float | None = None
        self.interrupted = False

    def command(self) -> list[str]:
        path = os.path.join(self.directory, "spool.pcap")
        if self.name == "tcpdump":
            return [
                *(self.program, "-i", self.iface, "-n", "-s", "0", "-U", "-B", str(RING_KIB)),
                # a new file every C MB (never a ring: the spool's keeper bounds it, counting
                # what it discards); no change of user, which could not write the spool
                *("-C", str(max(self.file_bytes // 1_000_000, 1)), "-Z", _user()),
                *("-w", path, self.bpf),
            ]
        return [
            *(self.program, "-i", self.iface, "-P", "-q", "-s", "262144"),
            *("-B", str(max(RING_KIB // 1024, 1)), "-f", self.bpf),
            *("-b", f"filesize:{max(self.file_bytes // 1000, 1)}", "-w", path),
        ]

    def _read_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        marker = b"listening on" if self.name == "tcpdump" else b"Capturing on"
        for raw in self.proc.stderr:
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))
            if marker in raw:
                self.listening = True
                self._ready.set()
        self._ready.set()  # exited

    def start(self) -> None:
        try:
            self.proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,
                preexec_fn=_die_with_parent(),
            )
        except OSError as exc:
            raise LiveError(f"cannot run {self.name}: {exc}") from None
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()
        if not self._ready.wait(15):
            self.close()
            raise LiveError(f"{self.name} did not start capturing within 15 s")
        if not self.listening or not self._alive_after_ready():
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(5)
            self.close()
            raise classify_stderr(self.name, self.iface, "\n".join(self.lines), self.program)

    def _alive_after_ready(self) -> bool:
        # dumpcap prints "Capturing on" before it checks the filter: give it a moment to fail
        assert self.proc is not None
        if self.name == "dumpcap":
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(0.3)
        return self.proc.poll() is None

    def running(self) -> bool:
        """Whether the tool still runs (the spool's reader asks, often: it also interrupts
        the tool once the stop's wait is over)."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return False
        at = self.interrupt_at
        if at is not None and not self.interrupted and time.monotonic() >= at:
            self.interrupted = True
            with contextlib.suppress(OSError):
                proc.send_signal(signal.SIGINT)  # flushes its file, prints its statistics
        return True

    def stop(self) -> None:
        """Interrupt the tool once its last block is handed over (`TOOL_HANDOVER`,
        `DUMPCAP_HANDOVER`); safe from a signal handler: it only notes when."""
        if self.interrupt_at is None:
            if not self.listening:
                wait = 0.0
            else:
                wait = TOOL_HANDOVER if self.name == "tcpdump" else DUMPCAP_HANDOVER
            self.interrupt_at = time.monotonic() + wait
        self.running()

    def close(self) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            self.stop()
            assert self.interrupt_at is not None
            time.sleep(max(self.interrupt_at - time.monotonic(), 0.0))
            self.running()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if self._reader is not None:
            self._reader.join(5)
        if proc.stderr is not None:
            with contextlib.suppress(OSError):
                proc.stderr.close()
        self.proc = None
        text = "\n".join(self.lines)
        self.kernel_drops = self._drops(text)
        m = re.search(r"(\d+) packets? captured", text) or re.search(
            r"Packets captured: (\d+)", text
        )
        self.captured = int(m.group(1)) if m else None

    def _drops(self, text: str) -> int | None:
        if self.name == "tcpdump":
            m = re.search(r"(\d+) packets? dropped by kernel", text)
            extra = re.search(r"(\d+) packets? dropped by interface", text)
            if m:
                return int(m.group(1)) + (int(extra.group(1)) if extra else 0)
            return None
        m = re.search(r"received/dropped on interface '[^']*': \d+/(\d+)", text)
        return int(m.group(1)) if m else None


def _user() -> str:
    """This process's user name (tcpdump -Z: keep writing as who we are)."""
    import pwd

    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return "root"


def _die_with_parent() -> Callable[[], None] | None:
    """A preexec_fn asking Linux to end the child with SIGTERM when we die (even by SIGKILL)."""
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def preexec() -> None:
        prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG

    return preexec


class ScapyBackend(Backend):
    """scapy's PF_PACKET listening socket with the BPF filter in the kernel; raw bytes only."""

    name = "scapy"

    def __init__(self, iface: str, bpf: str) -> None:
        super().__init__(iface, bpf)
        self.sock: Any = None
        self._stop = threading.Event()
        self.kernel_drops = 0
        # on loopback every packet is seen going out and coming in: keep one (as libpcap does)
        self.skip_outgoing = _arphrd(iface) == _ARPHRD_LOOPBACK

    def start(self) -> None:
        try:
            from scapy.arch.linux import L2ListenSocket
        except Exception as exc:
            raise LiveError(f"the scapy backend needs Linux packet sockets: {exc}") from None
        # scapy warns that it cannot guess a dissector for lo: no matter, it dissects nothing here
        quiet = logging.getLogger("scapy.runtime")
        level = quiet.level
        quiet.setLevel(logging.ERROR)
        try:
            self.sock = L2ListenSocket(iface=self.iface, filter=self.bpf)
        except PermissionError:
            raise LiveError(permission_hint(self.iface, interpreter())) from None
        except OSError as exc:
            if exc.errno in (1, 13):
                raise LiveError(permission_hint(self.iface, interpreter())) from None
            raise LiveError(f"cannot capture on {self.iface}: {exc.strerror or exc}") from None
        except Exception as exc:  # scapy: "Cannot set filter: ..."
            raise LiveError(f"bad capture filter {self.bpf!r}: {exc}", 2) from None
        finally:
            quiet.setLevel(level)

    def _stats(self) -> None:
        if self.sock is None:
            return
        with contextlib.suppress(OSError, AttributeError, struct.error):
            raw = self.sock.ins.getsockopt(_SOL_PACKET, _PACKET_STATISTICS, 8)
            _packets, drops = struct.unpack("II", raw)  # reading resets the kernel's counters
            self.kernel_drops = (self.kernel_drops or 0) + drops

    def run(self, emit: Callable[[RawPacket], None], write: Callable[[bytes], None]) -> None:
        sock = self.sock
        ins = sock.ins
        linktype = 101 if self.linktype == 12 else self.linktype
        write(pcap_header(linktype))
        recv = sock._recv_raw  # bytes, sockaddr_ll and the kernel's timestamp; no dissection
        skip_outgoing = self.skip_outgoing
        last_stats = time.monotonic()
        drain_until = None  # once stopped: what the socket still holds is read, for a while
        while True:
            if drain_until is None and self._stop.is_set():
                drain_until = time.monotonic() + DRAIN_SECONDS
            try:
                ready, _, _ = select.select([ins], [], [], 0.2 if drain_until is None else 0)
            except (OSError, ValueError):
                break
            if not ready:
                if drain_until is not None:
                    break
                continue
            if drain_until is not None and time.monotonic() > drain_until:
                break
            try:
                data, sa_ll, ts = recv(ins, RECV_SIZE)
            except OSError as exc:
                self.error = f"reading from {self.iface}: {exc}"
                break
            if skip_outgoing and sa_ll[2] == _PACKET_OUTGOING:
                continue
            if ts is None:
                ts = time.time()
            usec = round(ts * 1_000_000)
            write(pcap_record(usec, data, len(data)))
            emit(RawPacket(0, usec / 1_000_000, linktype, data, len(data)))
            now = time.monotonic()
            if now - last_stats > 1.0:
                last_stats = now
                self._stats()

    def stop(self) -> None:
        self._stop.set()

    def close(self) -> None:
        self._stop.set()
        if self.sock is not None:
            self._stats()
            with contextlib.suppress(Exception):
                self.sock.close()
            self.sock = None


class _SaysCapturing(logging.Handler):
    """Sets an event when pyshark logs its dumpcap's "Capturing on" line."""

    def __init__(self, ready: threading.Event) -> None:
        super().__init__(logging.DEBUG)
        self.ready = ready

    def emit(self, record: logging.LogRecord) -> None:
        if str(record.msg).startswith("Capturing on"):
            self.ready.set()


class PysharkBackend(Backend):
    """tshark through pyshark, raw bytes included. Slow (tshark dissects every packet and pyshark
    parses its JSON); kernel drops are not reported."""

    name = "pyshark"

    def __init__(self, iface: str, bpf: str) -> None:
        super().__init__(iface, bpf)
        self.capture: Any = None
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._drain_until = 0.0

    def start(self) -> None:
        check_filter(self.bpf, self.linktype)

    def run(self, emit: Callable[[RawPacket], None], write: Callable[[bytes], None]) -> None:
        import asyncio

        import pyshark

        linktype = 101 if self.linktype == 12 else self.linktype
        write(pcap_header(linktype))
        asyncio.set_event_loop(asyncio.new_event_loop())
        self.capture = pyshark.LiveCapture(
            interface=self.iface, bpf_filter=self.bpf, use_json=True, include_raw=True
        )
        # pyshark logs its capture children's stderr lines at debug level, to a logger of the
        # capture's own: dumpcap's "Capturing on ..." says packets are now being captured
        self.capture._log.setLevel(logging.DEBUG)
        self.capture._log.addHandler(_SaysCapturing(self._ready))
        try:
            for pkt in self.capture.sniff_continuously():
                # stopped: tshark (ended by `stop`) still hands over what it had captured, up to
                # its end or DRAIN_SECONDS; breaking at once lost every packet it held back
                if self._stop.is_set() and time.monotonic() > self._drain_until:
                    break
                data = pkt.get_raw_packet()
                sec, _, frac = str(pkt.sniff_timestamp).partition(".")
                usec = int(sec) * 1_000_000 + int((frac + "000000")[:6])
                wirelen = int(getattr(pkt, "length", len(data)) or len(data))
                write(pcap_record(usec, data, wirelen))
                emit(RawPacket(0, usec / 1_000_000, linktype, data, wirelen))
        except Exception as exc:
            if not self._stop.is_set():
                self.error = f"pyshark: {type(exc).__name__}: {exc}"
        finally:
            with contextlib.suppress(Exception):
                self.capture.close()

    def wait_ready(self, timeout: float) -> None:
        # dumpcap starts inside run(); its "Capturing on" line sets _ready (a fixed pause after
        # tshark started lost the first packets on a loaded machine)
        end = time.monotonic() + timeout
        while time.monotonic() < end and not self._stop.is_set() and self.error is None:
            if self._ready.wait(0.05):
                return

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._drain_until = time.monotonic() + DUMPCAP_HANDOVER + DRAIN_SECONDS
        self._stop.set()
        capture = self.capture
        if capture is not None:
            # sniff_continuously waits for tshark's next packet: end the capture so it returns.
            # pyshark pipes a dumpcap into a tshark: ending dumpcap (once it has handed its
            # last block over) ends tshark's input, so tshark writes out what it had and exits
            # (ending tshark lost that); the rest after DRAIN_SECONDS
            pids = [proc.pid for proc in list(getattr(capture, "_running_processes", ()))]
            dumpcaps = [pid for pid in pids if _command(pid) == "dumpcap"]
            if not dumpcaps:
                _terminate(pids)
                return
            for wait, which in (
                (DUMPCAP_HANDOVER, dumpcaps),
                (DUMPCAP_HANDOVER + DRAIN_SECONDS, pids),
            ):
                timer = threading.Timer(wait, _terminate, (which,))
                timer.daemon = True
                timer.start()


def _command(pid: int) -> str:
    """The program a process runs (Linux's /proc; "" where it cannot be told)."""
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def _terminate(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)


def make_backend(name: str, iface: str, bpf: str, directory: str = "", size: int = 0) -> Backend:
    if name in ("tcpdump", "dumpcap"):
        return ToolBackend(iface, bpf, name, directory, max(size // FILES, 1_000_000))
    if name == "scapy":
        return ScapyBackend(iface, bpf)
    if name == "pyshark":
        return PysharkBackend(iface, bpf)
    raise LiveError(f"unknown backend {name!r}", 2)


# -- the capture: the tool and its spool, or a backend thread and a queue; -w ----------------------


def pcapng_for(path: str | None) -> PcapToPcapng | None:
    """-w's converter when its name asks for pcapng (`read -w`'s rule, `format_for`): the
    backends and tools hand over pcap."""
    if path is None or format_for(path, "pcap") != "pcapng":
        return None
    return PcapToPcapng()


@dataclass
class CaptureStats:
    captured: int = 0
    kernel_drops: int | None = None
    backend_drops: int = 0  # not decoded: the queue was full, or discarded from a full spool
    queue_high_water: int = 0
    written: int = 0  # bytes written to -w
    tool_captured: int | None = None  # what tcpdump/dumpcap said it captured, at its exit
    decoded: int = 0  # packets handed to the decoder
    spool_bytes: int = 0  # the spool's bound (0: no spool)
    lag: Lag | None = None  # the decoder at most this far behind (with a spool)
    discarded_bytes: int = 0

    def line(self) -> str:
        kernel = "unknown" if self.kernel_drops is None else str(self.kernel_drops)
        why = "spool full" if self.spool_bytes else "decoder behind"
        text = (
            f"{self.captured} packets captured, {kernel} dropped by the kernel, "
            f"{self.backend_drops} dropped by amqpscope ({why})"
        )
        if self.lag is not None:
            text += f"; the decoder was at most {self.lag.text()} behind"
        return text

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "captured": self.captured,
            "decoded": self.decoded,
            "kernel_drops": self.kernel_drops,
            "amqpscope_drops": self.backend_drops,
        }
        if self.tool_captured is not None:
            out["tool_captured"] = self.tool_captured
        if self.spool_bytes:
            out["spool"] = {"bytes": self.spool_bytes, "discarded_bytes": self.discarded_bytes}
        if self.lag is not None:
            out["max_lag"] = self.lag.to_json()
        if self.written:
            out["written_bytes"] = self.written
        return out


class LiveCapture:
    """One capture. tcpdump and dumpcap write into a bounded spool of files (`capture.spool`)
    that `packets()` reads behind them, so decoding never holds capture back; scapy and pyshark
    run in a thread of their own and hand packets over through a bounded queue. -w on the side.

    `start()` raises LiveError when the capture cannot begin; `packets()` yields packets, or None
    when none came for `poll` seconds (a chance for housekeeping), and ends once `stop()` was
    called (or the backend ended) and everything captured has been yielded. `close()` always.
    """

    def __init__(
        self,
        iface: str,
        bpf: str = DEFAULT_FILTER,
        backend: str | None = None,
        write: str | None = None,
        queue: PacketQueue | None = None,
        spool_bytes: int = SPOOL_MB * 1_000_000,
        spool_dir: str | None = None,
    ) -> None:
        self.iface = iface
        self.bpf = bpf
        self.backend_name = choose_backend(backend)
        self.write_path = write
        self.queue = queue or PacketQueue()
        self.backend: Backend | None = None
        self.stats = CaptureStats()
        self.spool_bytes = spool_bytes
        self.spool_parent = spool_dir
        self.directory: str | None = None
        self.spool: Spool | None = None
        self._thread: threading.Thread | None = None
        self._out: IO[bytes] | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()

    @property
    def spooled(self) -> bool:
        return self.backend_name in ("tcpdump", "dumpcap")

    def start(self) -> None:
        check_interface(self.iface, self.backend_name)
        check_filter(self.bpf, interface_linktype(self.iface))
        if self.spooled:
            self._start_spooled()
            return
        if self.write_path is not None:
            try:
                self._out = open(self.write_path, "wb")  # noqa: SIM115 (closed in close())
            except OSError as exc:
                raise LiveError(f"cannot write {self.write_path}: {exc.strerror or exc}") from None
        backend = make_backend(self.backend_name, self.iface, self.bpf)
        try:
            backend.start()
        except BaseException:
            self._close_out()
            raise
        self.backend = backend
        self._thread = threading.Thread(target=self._run, name="amqpscope-capture", daemon=True)
        self._thread.start()
        backend.wait_ready(15)

    def _start_spooled(self) -> None:
        try:
            self.directory = make_directory(self.spool_parent)
        except OSError as exc:
            where = self.spool_parent or "the temporary directory"
            raise LiveError(f"cannot make the spool in {where}: {exc.strerror or exc}") from None
        try:
            backend = make_backend(
                self.backend_name, self.iface, self.bpf, self.directory, self.spool_bytes
            )
            assert isinstance(backend, ToolBackend)
            try:
                spool = Spool(
                    self.directory, self.spool_bytes, backend.running, PcapStream, self.write_path
                )
            except OSError as exc:
                raise LiveError(f"cannot write {self.write_path}: {exc.strerror or exc}") from None
            self.spool = spool
            backend.start()
            self.backend = backend
        except BaseException:
            self._remove_spool()
            raise

    def describe(self) -> str:
        text = f"capturing on {self.iface} with {self.backend_name} (filter: {self.bpf})"
        if self.spool is not None:
            text += f" into a spool of {self.spool_bytes / 1e6:.0f} MB in {self.directory}"
        return text

    def lag(self) -> Lag | None:
        """How far the decoder is behind the capture (None: no spool)."""
        return self.spool.lag() if self.spool is not None else None

    def take_findings(self) -> list[Finding]:
        """Findings of the capture itself (a full spool) since the last call."""
        if self.spool is None or not self.spool.findings:
            return []
        taken = list(self.spool.findings)
        del self.spool.findings[: len(taken)]
        return taken

    # capture thread
    def _run(self) -> None:
        assert self.backend is not None
        stats = self.stats
        put = self.queue.put

        def emit(pkt: RawPacket) -> None:
            stats.captured += 1
            pkt.number = stats.captured
            put(pkt)

        convert = pcapng_for(self.write_path)

        def write(data: bytes) -> None:
            out = self._out
            if out is not None:
                try:
                    out.write(convert.feed(data) if convert is not None else data)
                    out.flush()
                    stats.written += len(data)
                except (OSError, ValueError) as exc:
                    self.backend.error = f"writing {self.write_path}: {exc}"  # type: ignore[union-attr]
                    self._out = None

        try:
            self.backend.run(emit, write)
        except Exception as exc:  # never a traceback from the capture thread
            self.backend.error = f"{self.backend_name}: {type(exc).__name__}: {exc}"
        finally:
            self.queue.close()

    def stop(self) -> None:
        """Stop capturing (safe from a signal handler): what was captured is still yielded."""
        self._stopping.set()
        if self.backend is not None:
            self.backend.stop()

    @property
    def error(self) -> str | None:
        if self.spool is not None and self.spool.error:
            return self.spool.error
        return self.backend.error if self.backend is not None else None

    def packets(self, poll: float = 0.2) -> Iterator[RawPacket | None]:
        if self.spool is not None:
            decoded = 0
            for pkt in self.spool.packets(poll):
                if pkt is not None:
                    decoded += 1
                    self.stats.decoded = decoded
                yield pkt
            return
        queue = self.queue
        while True:
            pkt = queue.get(poll)
            if pkt is not None:
                self.stats.decoded += 1
                yield pkt
            elif queue.closed and not len(queue):
                return
            else:
                yield None

    def close(self) -> CaptureStats:
        """Stop and release everything (idempotent; the spool and the tool are gone after it);
        the statistics are final after it."""
        with self._lock:
            self._stopping.set()
            backend = self.backend
            if backend is not None:
                backend.stop()
                backend.close()
            if self._thread is not None:
                self._thread.join(10)
                self._thread = None
            self._close_out()
            stats = self.stats
            if backend is not None:
                stats.kernel_drops = backend.kernel_drops
            spool = self.spool
            if spool is not None:
                spool.finish()
                stats.captured = spool.number
                stats.backend_drops = spool.discarded_packets
                stats.discarded_bytes = spool.discarded_bytes
                stats.written = spool.written
                stats.spool_bytes = self.spool_bytes
                stats.lag = spool.max_lag
                if isinstance(backend, ToolBackend):
                    stats.tool_captured = backend.captured
            else:
                stats.backend_drops = self.queue.dropped
                stats.queue_high_water = self.queue.high_water
            self._remove_spool()
            return stats

    def _remove_spool(self) -> None:
        if self.spool is not None:
            self.spool.finish()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def _close_out(self) -> None:
        if self._out is not None:
            with contextlib.suppress(OSError):
                self._out.close()
            self._out = None
