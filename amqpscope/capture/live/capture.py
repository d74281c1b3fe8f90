"""One live capture (`LiveCapture`): the tool and its spool, or a backend thread and a queue;
-w on the side; its statistics."""

from __future__ import annotations

import contextlib
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from amqpscope.capture.live.backend import Backend
from amqpscope.capture.live.checks import (
    DEFAULT_FILTER,
    LiveError,
    check_filter,
    check_interface,
    choose_backend,
    interface_linktype,
)
from amqpscope.capture.live.pyshark_tshark import PysharkBackend
from amqpscope.capture.live.queue import PacketQueue
from amqpscope.capture.live.scapy_socket import ScapyBackend
from amqpscope.capture.live.tools import ToolBackend
from amqpscope.capture.packet import RawPacket
from amqpscope.capture.spool import FILES, SPOOL_MB, Lag, PcapStream, Spool, make_directory
from amqpscope.capture.writer import PcapToPcapng, format_for
from amqpscope.findings import Finding


def make_backend(name: str, iface: str, bpf: str, directory: str = "", size: int = 0) -> Backend:
    if name in ("tcpdump", "dumpcap"):
        return ToolBackend(iface, bpf, name, directory, max(size // FILES, 1_000_000))
    if name == "scapy":
        return ScapyBackend(iface, bpf)
    if name == "pyshark":
        return PysharkBackend(iface, bpf)
    raise LiveError(f"unknown backend {name!r}", 2)


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
