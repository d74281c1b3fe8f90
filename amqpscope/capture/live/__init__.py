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
dropped. Decoding them is not this module's: `amqpscope.live_decode` (beside `dissect.py`)
keeps the decoding state bounded over hours.

One module per backend (`tools`: tcpdump and dumpcap; `scapy_socket`; `pyshark_tshark`), the
checks before a capture starts (`checks`), the queue (`queue`) and the capture that runs them
(`capture`); the names below are the package's, as they were when this was one module.
"""

from __future__ import annotations

from amqpscope.capture.live.backend import (
    DRAIN_SECONDS,
    DUMPCAP_HANDOVER,
    Backend,
    pcap_header,
    pcap_record,
)
from amqpscope.capture.live.capture import CaptureStats, LiveCapture, make_backend, pcapng_for
from amqpscope.capture.live.checks import (
    BACKENDS,
    DEFAULT_FILTER,
    LiveError,
    _pyshark_available,
    check_filter,
    check_interface,
    choose_backend,
    classify_stderr,
    interface_linktype,
    interfaces,
    interpreter,
    permission_hint,
)
from amqpscope.capture.live.pyshark_tshark import PysharkBackend
from amqpscope.capture.live.queue import QUEUE_BYTES, QUEUE_PACKETS, PacketQueue
from amqpscope.capture.live.scapy_socket import RECV_SIZE, ScapyBackend
from amqpscope.capture.live.tools import RING_KIB, TOOL_HANDOVER, ToolBackend
from amqpscope.capture.spool import PcapStream, PcapStreamError

__all__ = [
    "BACKENDS",
    "DEFAULT_FILTER",
    "DRAIN_SECONDS",
    "DUMPCAP_HANDOVER",
    "QUEUE_BYTES",
    "QUEUE_PACKETS",
    "RECV_SIZE",
    "RING_KIB",
    "TOOL_HANDOVER",
    "Backend",
    "CaptureStats",
    "LiveCapture",
    "LiveError",
    "PacketQueue",
    "PcapStream",
    "PcapStreamError",
    "PysharkBackend",
    "ScapyBackend",
    "ToolBackend",
    "_pyshark_available",
    "check_filter",
    "check_interface",
    "choose_backend",
    "classify_stderr",
    "interface_linktype",
    "interfaces",
    "interpreter",
    "make_backend",
    "pcap_header",
    "pcap_record",
    "pcapng_for",
    "permission_hint",
]
