"""The values the capture layer hands on: raw packets from a file or interface, and TCP segments.

Not frozen: one of each is built per packet on the hot path, and a frozen dataclass costs about
twice as much to construct. Treat them as read-only all the same.
"""

from __future__ import annotations

from dataclasses import dataclass

# TCP flag bits, as in the TCP header's flags byte.
FIN = 0x01
SYN = 0x02
RST = 0x04
PSH = 0x08
ACK = 0x10


@dataclass(slots=True)
class RawPacket:
    """One captured packet as the file or interface gave it; `number` is 1-based."""

    number: int
    ts: float
    linktype: int
    data: bytes
    wirelen: int
    interface: int = 0


@dataclass(slots=True)
class Segment:
    """One TCP segment, link and IP layers peeled off. Endpoints are (address text, port)."""

    packet: int
    ts: float
    src: tuple[str, int]
    dst: tuple[str, int]
    seq: int
    ack: int
    flags: int
    payload: bytes
