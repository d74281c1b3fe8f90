"""The values the capture layer hands on: raw packets from a file or interface, and TCP segments.

Not frozen: one of each is built per packet on the hot path, and a frozen dataclass costs about
twice as much to construct. Treat them as read-only all the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

# TCP flag bits, as in the TCP header's flags byte.
FIN: Final = 0x01
SYN: Final = 0x02
RST: Final = 0x04
PSH: Final = 0x08
ACK: Final = 0x10
#: not a TCP flag: the snap length cut this segment's payload (`Segment.cut` bytes are missing
#: at its end); set above the flags byte, it sends the segment down reassembly's slow path
CUT: Final = 0x1000


# The hot records' __init__ is written out (init=False): under mypyc a dataclass's generated
# __init__ stays interpreted Python, about 8% of a compiled `summary` for these four classes.


@dataclass(slots=True, init=False)
class RawPacket:
    """One captured packet as the file or interface gave it; `number` is 1-based."""

    number: int
    ts: float
    linktype: int
    data: bytes
    wirelen: int
    interface: int

    def __init__(
        self, number: int, ts: float, linktype: int, data: bytes, wirelen: int, interface: int = 0
    ) -> None:
        self.number = number
        self.ts = ts
        self.linktype = linktype
        self.data = data
        self.wirelen = wirelen
        self.interface = interface


@dataclass(slots=True, init=False)
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
    cut: int  # payload bytes the snap length cut off its end (with the CUT flag)

    def __init__(
        self,
        packet: int,
        ts: float,
        src: tuple[str, int],
        dst: tuple[str, int],
        seq: int,
        ack: int,
        flags: int,
        payload: bytes,
        cut: int = 0,
    ) -> None:
        self.packet = packet
        self.ts = ts
        self.src = src
        self.dst = dst
        self.seq = seq
        self.ack = ack
        self.flags = flags
        self.payload = payload
        self.cut = cut
