"""What TCP reassembly reports: a connection opened, ordered data, a gap, bytes acknowledged
but not seen, one side's FIN, a close.

`conn` numbers connections 1, 2, 3... in the order their first segment appears. `direction` is
"c2s" (client to server) or "s2c". Every event names the packet that caused it, so a frame can be
reported in the order of the packet that completed it; bytes after a hole declared missing name
the packets that brought them (earlier than the one that settled the hole).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

C2S: Final = "c2s"
S2C: Final = "s2c"


@dataclass(slots=True)
class StreamOpen:
    """A new connection. `role_from` says how client and server were told apart: "syn" (the
    handshake was seen) or "guess" (mid-stream: the well-known or lower port is the server)."""

    conn: int
    client: tuple[str, int]
    server: tuple[str, int]
    role_from: str
    packet: int
    ts: float


@dataclass(slots=True, init=False)
class StreamData:
    """Bytes that continue `direction` of `conn` in order, made available by `packet`.
    (`__init__` written out: see `capture.packet`.)"""

    conn: int
    direction: str
    data: bytes
    packet: int
    ts: float

    def __init__(self, conn: int, direction: str, data: bytes, packet: int, ts: float) -> None:
        self.conn = conn
        self.direction = direction
        self.data = data
        self.packet = packet
        self.ts = ts


@dataclass(slots=True)
class StreamGap:
    """`missing` bytes of `direction` were never captured; data after it follows in order."""

    conn: int
    direction: str
    missing: int
    packet: int
    ts: float


@dataclass(slots=True)
class StreamUnseen:
    """The peer acknowledged `unseen` bytes of `direction` beyond what was captured, with nothing
    after them yet: most likely lost (a kernel drop), possibly captured out of order still to
    come. Not a gap (no byte is declared missing, so late data is still taken): a warning that
    what the peer answers next may answer bytes not seen."""

    conn: int
    direction: str
    unseen: int
    packet: int
    ts: float


@dataclass(slots=True)
class StreamFin:
    """`direction` of `conn` ended with a FIN, sent in `packet` at `ts`: reported once every byte
    before it was delivered or declared missing, so it follows the data it ends. Who sent the
    first FIN is who ended the TCP stream first (the peer may still send, as a client that wakes
    and publishes into a socket the broker has left). `last`: the peer's FIN came before, so
    this one closes the connection (its `StreamClose` follows)."""

    conn: int
    direction: str
    packet: int
    ts: float
    last: bool = False


@dataclass(slots=True)
class StreamClose:
    """The connection ended: `how` is "fin" (both sides or one), "rst", "eof" (capture ended), or
    "idle" (no packet for too long: `TcpReassembler.expire_idle`). `by` is the direction that
    ended it: for "rst" the sender of the reset, otherwise the sender of the first FIN (None when
    no FIN was seen); `fin_by` is the sender of the first FIN whatever the end (a FIN then the
    peer's reset: a client killed with data still in flight)."""

    conn: int
    how: str
    packet: int
    ts: float
    by: str | None = None
    fin_by: str | None = None


StreamEvent = StreamOpen | StreamData | StreamGap | StreamUnseen | StreamFin | StreamClose
