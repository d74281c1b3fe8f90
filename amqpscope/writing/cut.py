"""Which packets a cut keeps (`read -w`): those that carried the selected frames, and what a
reader needs to make sense of them, decided in one pass with bounded memory (sans-IO).

Fed each packet after the dissector has seen it (with the connection the stream layer put it
in and whether it opens TCP) and each frame it made (with whether the frame is selected), the
cut hands back, in `ready`, the packets to write, in capture order. A frame says which packets
carried its bytes (`Frame.carriers`, from the stream layer), and it completes in a packet that
came after them: packets wait in a window of recent packets (`window` bytes) until no frame
still to complete can need them. A frame longer than the window loses its first packets from
the cut (counted in `lost`).

What a selected connection needs besides its selected frames: its TCP handshake (SYN, SYN-ACK)
and its opening frames (protocol headers, SASL, 0-9-1 connection.start to open-ok, 1.0 open),
so that Wireshark and amqpscope read the cut from its start. They are kept per connection
(`HANDSHAKE` packets at most, for the `CONNECTIONS` most recent connections) until it is
selected or closed; when a connection is selected after they left the window, they are written
then, ahead of later packets of other connections (each connection's own packets stay in order).
Its FIN and RST packets carry no frame but say how it ended: a selected connection's are kept
(those still in the window when it is selected, and every later one), so that the cut reads back
with the same end and no reset or gap the capture did not have.
A connection inside TLS or WebSocket is cut whole from its selection on, or from when its TLS
begins (1.0's in-band TLS, after a chosen protocol header): its records cannot be read with
some missing. So is every connection of `whole` (`--conn N` alone).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any, Final

#: packets kept per connection for its handshake and opening frames
HANDSHAKE: Final = 32
#: connections whose handshake is kept at once (the oldest are forgotten first)
CONNECTIONS: Final = 4096
#: bytes of recent packets held back until the frames they may carry complete
WINDOW: Final = 64 * 1024 * 1024
OPENING: Final = frozenset(
    {
        "protocol-header",
        "connection.start",
        "connection.start-ok",
        "connection.secure",
        "connection.secure-ok",
        "connection.tune",
        "connection.tune-ok",
        "connection.open",
        "connection.open-ok",
        "open",
    }
)


class Cut:
    """The packet bookkeeping of one `read -w` pass."""

    def __init__(
        self,
        whole: frozenset[int] = frozenset(),
        window: int = WINDOW,
        mask: Callable[[Any, list[Any]], Any] | None = None,
    ) -> None:
        self.mask = mask  # masks a packet's secrets (`capture.writer.mask_packet`)
        self.secrets: dict[int, list[Any]] = {}  # packet number in the window -> its secrets
        self.whole = set(whole)  # connections cut whole (and those inside a layer, once chosen)
        self.window_limit = window
        self.window: deque[tuple[Any, int | None]] = deque()  # (raw packet, connection)
        self.window_bytes = 0
        self.wanted: set[int] = set()  # packet numbers in the window to write
        self.opening: set[int] = set()  # packet numbers in the window that open a connection
        self.ending: set[int] = set()  # packet numbers in the window that end one (FIN, RST)
        self.kept: OrderedDict[int, list[Any]] = OrderedDict()  # connection -> handshake
        self.selected: set[int] = set()
        self.layered: set[int] = set()
        self.ready: list[Any] = []
        self.lost = 0  # packets of selected frames that had left the window
        self.oldest = 0  # number of the oldest packet still in the window

    def packet(self, raw: Any, conn: int | None, opens: bool, ends: bool = False) -> None:
        """A packet the dissector has taken (after the frames it completed: `frame` may have
        named it already); `conn`: its connection; `opens`: a SYN; `ends`: a FIN or RST."""
        self.window.append((raw, conn))
        self.window_bytes += len(raw.data)
        if self.oldest == 0:
            self.oldest = raw.number
        number = raw.number
        if conn is not None:
            if conn in self.whole:
                self.wanted.add(number)
            elif opens:
                self.opening.add(number)
            elif ends:
                self.ending.add(number)
            if conn in self.selected and (number in self.opening or ends):
                # an opening frame of a chosen connection ends here, or the connection does
                self.wanted.add(number)
        while self.window_bytes > self.window_limit and len(self.window) > 1:
            self._evict()

    def frame(self, frame: Any, selected: bool, layered: bool = False) -> None:
        """A frame the dissector made: whether it is selected; whether its connection is inside
        TLS or WebSocket."""
        carriers = frame.carriers or ((frame.packet, 0, 0, 0),)
        if layered and frame.conn not in self.layered:
            self.layered.add(frame.conn)
            if frame.conn in self.selected:  # chosen before its TLS began (1.0's in-band TLS)
                self._whole(frame.conn)
        if frame.name in OPENING or frame.kind == "sasl" or frame.kind == "layer":
            self.opening.update(p for p, *_ in carriers)
        if not selected:
            return
        conn = frame.conn
        if conn not in self.selected:
            self.selected.add(conn)
            self.ready.extend(self.kept.pop(conn, ()))  # its handshake, gone from the window
            if conn in self.layered:
                self._whole(conn)
            ends = self.ending
            for raw, owner in self.window:
                number = raw.number
                if owner == conn and (number in self.opening or number in ends):
                    self.wanted.add(number)
        for packet, *_ in carriers:
            if packet < self.oldest:
                self.lost += 1
            else:
                self.wanted.add(packet)

    def _whole(self, conn: int) -> None:
        """Cut `conn` whole from now on, and what of it the window still holds."""
        self.whole.add(conn)
        for raw, owner in self.window:
            if owner == conn:
                self.wanted.add(raw.number)

    def secret(self, packet: int, spans: list[Any]) -> None:
        """Packet `packet` (in the window, or the one to come in next) carried credentials
        (`spans`, for `mask`): it leaves the window masked, written or not."""
        if self.mask is not None and packet >= self.oldest:
            self.secrets.setdefault(packet, []).extend(spans)

    def closed(self, conn: int) -> None:
        """A connection ended: its handshake need not wait any longer."""
        self.kept.pop(conn, None)

    def finish(self) -> None:
        """The end of the input: what is left in the window goes out."""
        while self.window:
            self._evict()

    def _evict(self) -> None:
        raw, conn = self.window.popleft()
        self.window_bytes -= len(raw.data)
        self.oldest = self.window[0][0].number if self.window else 0
        number = raw.number
        spans = self.secrets.pop(number, None)
        if spans and self.mask is not None:
            raw = self.mask(raw, spans)
        if number in self.wanted or (conn is not None and conn in self.whole):
            self.wanted.discard(number)
            self.ready.append(raw)
        elif conn is not None and number in self.opening and conn not in self.selected:
            kept = self.kept.setdefault(conn, [])
            self.kept.move_to_end(conn)
            if len(kept) < HANDSHAKE:
                kept.append(raw)
            if len(self.kept) > CONNECTIONS:
                self.kept.popitem(last=False)
        self.opening.discard(number)
        self.ending.discard(number)

    def take(self) -> list[Any]:
        """The packets to write now, in order; the list is emptied."""
        out, self.ready = self.ready, []
        return out
