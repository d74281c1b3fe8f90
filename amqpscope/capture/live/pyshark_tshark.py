"""The pyshark backend: tshark through pyshark, the raw bytes of every packet included."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from amqpscope.capture.live.backend import (
    DRAIN_SECONDS,
    DUMPCAP_HANDOVER,
    Backend,
    pcap_header,
    pcap_record,
)
from amqpscope.capture.live.checks import check_filter
from amqpscope.capture.packet import RawPacket


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
