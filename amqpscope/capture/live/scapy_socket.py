"""The scapy backend: a PF_PACKET socket with the BPF filter in the kernel, read as raw bytes."""

from __future__ import annotations

import contextlib
import logging
import select
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

from amqpscope.capture.live.backend import DRAIN_SECONDS, Backend, pcap_header, pcap_record
from amqpscope.capture.live.checks import LiveError, _arphrd, interpreter, permission_hint
from amqpscope.capture.packet import RawPacket

#: largest packet the scapy backend reads (lo's MTU is 64 KiB; GRO/TSO can make bigger ones)
RECV_SIZE = 262_144

_SOL_PACKET = 263
_PACKET_STATISTICS = 6
_PACKET_OUTGOING = 4
_ARPHRD_LOOPBACK = 772


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
