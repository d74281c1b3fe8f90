"""The tcpdump and dumpcap backends: the tool writes pcap files into the spool
(`capture.spool`), which is read behind it."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable

from amqpscope.capture.live.backend import DUMPCAP_HANDOVER, Backend
from amqpscope.capture.live.checks import LiveError, classify_stderr

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
