"""What every backend is (`Backend`), and the pcap bytes the in-process backends write for -w."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Final

from amqpscope.capture.live.checks import interface_linktype
from amqpscope.capture.packet import RawPacket

#: dumpcap's libpcap hands a block over after dumpcap's own timeout (250 ms; see
#: `tools.TOOL_HANDOVER` for tcpdump's): stopped at once, the packets
#: of the last quarter second were lost (all five publishes of a short run stopped right after)
DUMPCAP_HANDOVER = 0.6
#: after a stop, how long scapy's socket and pyshark's tshark may go on handing over the packets
#: they captured before it (a flood would never end)
DRAIN_SECONDS: Final = 5.0


def pcap_header(linktype: int, snaplen: int = 262144) -> bytes:
    """The header of a microsecond pcap file in this machine's byte order."""
    return struct.pack("=IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, snaplen, linktype)


def pcap_record(usec: int, data: bytes, wirelen: int) -> bytes:
    sec, frac = divmod(usec, 1_000_000)
    return struct.pack("=IIII", sec, frac, len(data), wirelen) + data


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
