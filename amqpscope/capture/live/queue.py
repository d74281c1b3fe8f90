"""The bounded queue between the capture thread and the decoder (scapy and pyshark; tcpdump and
dumpcap hand over through the spool instead)."""

from __future__ import annotations

import threading
from collections import deque

from amqpscope.capture.packet import RawPacket

#: the queue between the capture thread and the decoder
QUEUE_PACKETS = 100_000
QUEUE_BYTES = 128 * 1024 * 1024


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

    def __len__(self) -> int:
        return len(self._items)
