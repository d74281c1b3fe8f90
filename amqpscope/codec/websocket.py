"""AMQP over WebSocket: the HTTP upgrade and RFC 6455 frames, unwrapped into the AMQP stream.

The OASIS AMQP WebSocket Binding 1.0 carries an AMQP 1.0 connection (protocol headers, SASL and
frames, as over TCP) in the payloads of binary WebSocket messages, after an HTTP/1.1 upgrade that
agrees on the subprotocol `amqp`. AMQP frames may span WebSocket messages and a message may hold
several AMQP frames, so the layer hands on the concatenated payloads as one byte stream and leaves
the framing to the AMQP codec.

Rules, one direction at a time (`_Side`), sans-IO:

- HANDSHAKE: the client's upgrade request, the server's response, read up to the blank line
  (`MAX_HANDSHAKE` bytes at most). A response other than 101 is a refusal: both directions stop
  (OPAQUE). A 101 without `Sec-WebSocket-Protocol: amqp`, or with a wrong Sec-WebSocket-Accept, is
  reported and the frames are still unwrapped (what they carry is for the AMQP codec to judge).
- FRAMES: a header (2 to 14 bytes, the only bytes buffered besides a control frame's payload of at
  most 125) and then the payload, unmasked and handed on as it arrives: a declared length is
  never trusted beyond the bytes present and never allocated. Binary and continuation payloads
  join the AMQP stream (inflated when permessage-deflate was agreed); close, ping and pong are
  counted and reported; reserved opcodes are skipped with a finding.
- RESYNC: after lost bytes, frames have no marker to find the next one by: the bytes are searched
  for three frame headers that chain (within `RESYNC_BUDGET`), and framing resumes at the first.
- OPAQUE: after a refusal, a length beyond any bound (the next frame boundary cannot be known),
  a lost segment under permessage-deflate with context takeover, or a search that found
  nothing: bytes are dropped.

Damage and oddities become findings in `findings`, never exceptions.
"""

from __future__ import annotations

import zlib
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from amqpscope.codec import layers
from amqpscope.findings import Finding, finding

C2S = "c2s"
S2C = "s2c"

#: the subprotocol the AMQP WebSocket Binding registers (WSB 1.0, section 2.1)
SUBPROTOCOL = "amqp"
#: appended to Sec-WebSocket-Key before hashing into Sec-WebSocket-Accept (RFC 6455, 1.3)
ACCEPT_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

#: opcode -> name (RFC 6455, 5.2 and 11.8); any other opcode is reserved
OPCODES: dict[int, str] = {
    0x0: "continuation",
    0x1: "text",
    0x2: "binary",
    0x8: "close",
    0x9: "ping",
    0xA: "pong",
}
CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
#: opcodes with this bit set are control frames: never fragmented, payload at most 125 bytes
CONTROL_BIT = 0x8
MAX_CONTROL_PAYLOAD = 125

#: close status code -> name (RFC 6455, 7.4.1 and the IANA registry)
CLOSE_CODES: dict[int, str] = {
    1000: "normal closure",
    1001: "going away",
    1002: "protocol error",
    1003: "unsupported data",
    1005: "no status received",
    1006: "abnormal closure",
    1007: "invalid frame payload data",
    1008: "policy violation",
    1009: "message too big",
    1010: "mandatory extension",
    1011: "internal error",
    1012: "service restart",
    1013: "try again later",
    1014: "bad gateway",
    1015: "TLS handshake",
}
#: codes that name a local condition and must never be sent in a close frame (RFC 6455, 7.4.1)
CLOSE_CODES_NOT_SENT = frozenset({1005, 1006, 1015})
#: codes that close a connection in good order
CLOSE_CODES_CLEAN = frozenset({1000, 1001})

#: bytes an upgrade request or response may take before it is called damaged
MAX_HANDSHAKE = 16 * 1024
#: the largest frame payload believed: an AMQP frame is at most 4 GiB and one WebSocket frame
#: carrying more than that is damage (the boundary of the next frame can no longer be known)
MAX_FRAME_PAYLOAD = 1 << 32
#: bytes one call may inflate (a permessage-deflate payload expands at most about 1000:1)
MAX_INFLATE = 64 * 1024 * 1024
#: findings of one code per direction; more are counted in `info()["suppressed"]`
MAX_FINDINGS_PER_CODE = 20
#: the tail permessage-deflate strips from every message and the receiver puts back (RFC 7692)
DEFLATE_TAIL = b"\x00\x00\xff\xff"
_HEADER_END = b"\r\n\r\n"

HANDSHAKE = "handshake"
FRAMES = "frames"
RESYNC = "resync"
OPAQUE = "opaque"

#: after lost bytes: header after header that must chain, each payload whole, before a frame
#: boundary is believed (a frame header has no marker; three in a row do not happen by chance)
RESYNC_FRAMES = 3
#: bytes searched for such a chain before the direction is given up
RESYNC_BUDGET = 4 * 1024 * 1024
#: opcodes a frame found by that search may have (AMQP travels in binary frames)
RESYNC_OPCODES = frozenset({CONTINUATION, BINARY, CLOSE, PING, PONG})

#: the client payload pieces `WebSocketLayer.wire` keeps (the newest): enough for an opening
#: frame that carries credentials, which completes in the call whose bytes end it
WIRE_PIECES = 4096
#: the option (`LayerContext.options`) that asks for them: `read -w` masking credentials
WIRE_OPTION = "websocket-wire"

# where a frame's payload goes
_STREAM, _CONTROL, _SKIP = "stream", "control", "skip"


def accept_key(key: str) -> str:
    """Sec-WebSocket-Accept for a Sec-WebSocket-Key (RFC 6455, 4.2.2)."""
    import base64  # here, with hashlib: every capture loads this module, few hold a handshake
    import hashlib

    digest = hashlib.sha1(key.strip().encode("ascii", "replace") + ACCEPT_GUID).digest()
    return base64.b64encode(digest).decode("ascii")


def unmask(data: bytes | bytearray | memoryview, key: bytes, phase: int = 0) -> bytes:
    """XOR `data` with the 4-byte masking `key`, starting at byte `phase` of the key (a payload
    unmasked in pieces continues where the last piece stopped). Whole-int XOR: no Python loop."""
    size = len(data)
    if size == 0:
        return b""
    phase %= 4
    rotated = key[phase:] + key[:phase]
    pad = (rotated * (size // 4 + 1))[:size]
    value = int.from_bytes(data, "big") ^ int.from_bytes(pad, "big")
    return value.to_bytes(size, "big")


def detect(data: bytes | bytearray) -> bool | None:
    """Whether a client's first bytes are a WebSocket upgrade request: True or False, or None
    while they could still become one (an HTTP request whose headers have not all arrived)."""
    head = bytes(data[:MAX_HANDSHAKE])
    if not head:
        return None
    if not head.startswith(b"GET "):
        return None if b"GET ".startswith(head) else False
    end = head.find(_HEADER_END)
    if end < 0:
        return None if len(head) < MAX_HANDSHAKE else False
    headers = _headers(head[:end].decode("latin-1").split("\r\n")[1:])
    return "websocket" in _tokens(headers.get("upgrade", ""))


def _headers(lines: list[str]) -> dict[str, str]:
    """HTTP header lines into a dict by lower-cased name (repeats joined with ", ")."""
    out: dict[str, str] = {}
    for line in lines:
        name, sep, value = line.partition(":")
        if not sep:
            continue
        name = name.strip().lower()
        value = value.strip()
        out[name] = f"{out[name]}, {value}" if name in out else value
    return out


def _tokens(value: str) -> list[str]:
    """A comma-separated header value as lower-case tokens."""
    return [t.strip().lower() for t in value.split(",") if t.strip()]


def _redact_query(target: str) -> str:
    """The request target with query values hidden: tokens travel there (`?sig=`, `?token=`)."""
    path, sep, query = target.partition("?")
    if not sep:
        return target
    from urllib.parse import quote, unquote

    names = [unquote(part.partition("=")[0]) for part in query.split("&") if part]
    return path + "?" + "&".join(f"{quote(n)}=<redacted>" for n in names)


@dataclass(frozen=True, slots=True)
class Piece:
    """Client payload bytes of one WebSocket frame as one `data()` call took them: where they are
    in the AMQP stream (`start`, `length`), the frame's masking key (None: not masked) and its
    position at the first byte (`phase`), and how many bytes before the end of that call's bytes
    they begin (`tail`: a packet's payload ends where the call's bytes end). What `read -w`
    needs to mask a password on the wire: the stream's bytes are not the packets'."""

    start: int
    length: int
    key: bytes | None
    phase: int
    tail: int


@dataclass(slots=True)
class _Side:
    """One direction: its state, the frame in progress, the message in progress, its counts."""

    direction: str
    state: str = HANDSHAKE
    buf: bytearray = field(default_factory=bytearray)  # a handshake or a frame header, partial
    # the frame whose payload is arriving
    opcode: int = 0
    fin: bool = True
    mask: bytes | None = None
    remaining: int = 0  # payload bytes still to come
    phase: int = 0  # payload bytes seen so far (the mask's position)
    sink: str = _STREAM
    in_payload: bool = False
    control: bytearray = field(default_factory=bytearray)
    # the fragmented message in progress (its first frame's opcode), and whether it is deflated
    message: int | None = None
    deflated: bool = False
    inflater: Any = None
    # counts
    frames: int = 0
    messages: int = 0
    payload: int = 0  # bytes handed on to the AMQP stream
    pings: int = 0
    pongs: int = 0
    close: dict[str, Any] | None = None
    dropped: int = 0


class WebSocketLayer:
    """AMQP over WebSocket for one TCP connection: `data()` takes the bytes of one direction as
    they arrive and returns the AMQP bytes they complete. `show_secrets`: keep query strings of
    the request target as they were (they may carry tokens). `log`: a list to append every
    frame header to, as (direction, opcode, fin, masked, payload length): for tests and tools,
    off by default so that memory stays bounded. `wire`: keep where the client's latest payload
    bytes were on the wire (`wire()`), for `read -w` to mask credentials."""

    name = "websocket"

    def __init__(
        self,
        show_secrets: bool = False,
        log: list[tuple[str, int, bool, bool, int]] | None = None,
        wire: bool = False,
    ) -> None:
        self.show_secrets = show_secrets
        self.log = log
        self.pieces: deque[Piece] | None = deque(maxlen=WIRE_PIECES) if wire else None
        self.findings: list[Finding] = []
        self.sides = {C2S: _Side(C2S), S2C: _Side(S2C)}
        self.request: dict[str, Any] = {}
        self.response: dict[str, Any] = {}
        self.key: str | None = None
        self.subprotocol: str | None = None
        self.deflate: dict[str, bool] | None = None  # permessage-deflate, when agreed
        self._noted: dict[tuple[str, str], int] = {}
        self.suppressed = 0

    # -- the Layer interface -----------------------------------------------------------------
    def data(self, direction: str, data: bytes) -> bytes:
        side = self.sides[direction]
        if side.state == OPAQUE:
            side.dropped += len(data)
            return b""
        out = bytearray()
        if side.state == HANDSHAKE:
            side.buf += data
            end = side.buf.find(_HEADER_END)
            if end < 0:
                if len(side.buf) > MAX_HANDSHAKE:
                    what = "request" if direction == C2S else "response"
                    self._note(
                        side,
                        "websocket.bad-handshake",
                        f"no end of the HTTP {what} headers in {len(side.buf)} bytes",
                    )
                    self._give_up(side, len(side.buf))
                return b""
            head = bytes(side.buf[:end])
            rest = bytes(side.buf[end + 4 :])
            side.buf.clear()
            if direction == C2S:
                self._request(head)
            else:
                self._response(head)
            if side.state == OPAQUE:
                side.dropped += len(rest)
                return b""
            side.state = FRAMES
            data = rest
        if side.state == RESYNC:
            data = self._resync(side, data)
        if side.state == FRAMES:
            self._frames(side, data, out)
        return bytes(out)

    def _resync(self, side: _Side, data: bytes) -> bytes:
        """Search the bytes since a gap for a frame boundary; return the bytes from it on (the
        direction is back in FRAMES), or nothing while the search goes on."""
        side.buf += data
        buf = side.buf
        offset = 0
        while offset < len(buf):
            said = self._chain(side, buf, offset)
            if said == "found":
                rest = bytes(buf[offset:])
                side.dropped += offset
                buf.clear()
                side.state = FRAMES
                if rest[0] & 0x0F == CONTINUATION:
                    side.message = BINARY  # the message began before the gap
                return rest
            if said == "more":
                break
            offset += 1
        side.dropped += offset
        del buf[:offset]
        if len(buf) > RESYNC_BUDGET:
            self._note(
                side,
                "websocket.lost",
                f"no WebSocket frame boundary in {len(buf)} bytes: the rest is not read",
            )
            self._give_up(side, len(buf))
        return b""

    def _chain(self, side: _Side, buf: bytearray, offset: int) -> str:
        """Whether `RESYNC_FRAMES` strict frame headers chain from `offset`: "found", "no", or
        "more" (all so far check out and the buffer ends before the last one)."""
        pos = offset
        for _ in range(RESYNC_FRAMES):
            avail = len(buf) - pos
            if avail < 2:
                return "more"
            b0, b1 = buf[pos], buf[pos + 1]
            fin, opcode, masked, length = b0 & 0x80, b0 & 0x0F, b1 & 0x80, b1 & 0x7F
            if b0 & 0x70 or opcode not in RESYNC_OPCODES or bool(masked) != (side.direction == C2S):
                return "no"
            if opcode & CONTROL_BIT and (not fin or length > MAX_CONTROL_PAYLOAD):
                return "no"
            size = 2 + (2 if length == 126 else 8 if length == 127 else 0) + (4 if masked else 0)
            if avail < size:
                return "more"
            if length == 126:
                length = int.from_bytes(buf[pos + 2 : pos + 4], "big")
                if length < 126:
                    return "no"
            elif length == 127:
                length = int.from_bytes(buf[pos + 2 : pos + 10], "big")
                if length < 65536 or length > MAX_FRAME_PAYLOAD:
                    return "no"
            if offset + RESYNC_BUDGET < pos + size + length:
                return "no"
            pos += size + length
        return "found" if pos <= len(buf) else "more"

    def gap(self, direction: str, missing: int) -> None:
        """Bytes were lost: the frame in progress is gone. Frames have no marker, so the next
        boundary is searched for as `RESYNC_FRAMES` headers that chain (RESYNC). Deflated
        messages whose inflater keeps its window across messages cannot be picked up again."""
        side = self.sides[direction]
        if side.state == OPAQUE:
            return
        if side.state == HANDSHAKE or (self.deflate and not self.deflate[direction]):
            self._note(side, "websocket.lost", f"{missing} bytes lost: the WebSocket is gone")
            self._give_up(side, 0)
            return
        self._note(
            side, "websocket.lost", f"{missing} bytes lost: looking for the next WebSocket frame"
        )
        side.state = RESYNC
        side.buf.clear()
        side.control.clear()
        side.in_payload = False
        side.message = None
        side.deflated = False
        side.inflater = None

    def end(self) -> None:
        """The connection ended: say what was left inside a frame or a handshake."""
        for side in self.sides.values():
            if side.state == FRAMES and (side.in_payload or side.buf):
                if side.in_payload:
                    why = f"{side.remaining} payload bytes of a {self._opname(side.opcode)} frame"
                else:
                    why = f"{len(side.buf)} bytes of a frame header"
                self._note(side, "websocket.incomplete-frame", f"{side.direction} ended: {why}")
            elif side.state == HANDSHAKE and side.buf:
                what = "request" if side.direction == C2S else "response"
                self._note(
                    side, "websocket.incomplete-frame", f"ended inside the HTTP upgrade {what}"
                )

    def info(self) -> dict[str, Any]:
        """What the timeline and the JSON say about the WebSocket under the AMQP connection: the
        upgrade's facts (known before the first AMQP frame, when the codec reports the layer) and
        the close frames seen so far."""
        out: dict[str, Any] = {
            "subprotocol": self.subprotocol,
            "path": self.request.get("path"),
            "host": self.request.get("host"),
        }
        if self.request.get("offered") is not None:
            out["offered"] = self.request["offered"]
        if self.request.get("origin"):
            out["origin"] = self.request["origin"]
        if self.response:
            out["status"] = self.response["status"]
            if self.response["status"] != 101:
                out["reason"] = self.response["reason"]
        if self.deflate is not None:
            out["extensions"] = "permessage-deflate"
        closes = {d: s.close for d, s in self.sides.items() if s.close is not None}
        out["close"] = closes or None
        if self.suppressed:
            out["suppressed"] = self.suppressed
        return out

    def counts(self) -> dict[str, dict[str, int]]:
        """WebSocket frames, data messages, AMQP bytes handed on, pings and pongs, by direction
        (so far: the codec asks `info()` before the first AMQP frame, these grow after it)."""
        keys = ("frames", "messages", "payload", "pings", "pongs")
        return {key: {d: getattr(s, key) for d, s in self.sides.items()} for key in keys}

    def wire(self, start: int, end: int) -> list[Piece]:
        """The kept client pieces (`wire=True`) with bytes `start` to `end` of the AMQP stream
        (offsets as the AMQP framer counts them): where those bytes were on the wire, and under
        which masking key. A deflated message's bytes have no place on the wire: none."""
        pieces = self.pieces or ()
        return [p for p in pieces if p.start < end and start < p.start + p.length]

    # -- the handshake -------------------------------------------------------------------------
    def _request(self, head: bytes) -> None:
        side = self.sides[C2S]
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        headers = _headers(lines[1:])
        target = parts[1] if len(parts) == 3 else ""
        self.request = {
            "method": parts[0],
            "path": target if self.show_secrets else _redact_query(target),
            "host": headers.get("host"),
            "origin": headers.get("origin"),
            "offered": [p.strip() for p in headers.get("sec-websocket-protocol", "").split(",")]
            if "sec-websocket-protocol" in headers
            else None,
        }
        problems = []
        if len(parts) != 3 or parts[0] != "GET" or not parts[2].startswith("HTTP/1."):
            problems.append(f"request line {lines[0][:80]!r}")
        if "websocket" not in _tokens(headers.get("upgrade", "")):
            problems.append("no Upgrade: websocket")
        if "upgrade" not in _tokens(headers.get("connection", "")):
            problems.append("no Connection: Upgrade")
        if headers.get("sec-websocket-version", "").strip() != "13":
            problems.append(f"Sec-WebSocket-Version {headers.get('sec-websocket-version')!r}")
        self.key = headers.get("sec-websocket-key")
        if self.key is None:
            problems.append("no Sec-WebSocket-Key")
        if problems:
            self._note(side, "websocket.bad-handshake", "upgrade request: " + "; ".join(problems))
        offered = [p.lower() for p in self.request["offered"] or []]
        if SUBPROTOCOL not in offered:
            self._note(
                side,
                "websocket.subprotocol",
                f"the client does not offer the {SUBPROTOCOL!r} subprotocol "
                f"(offered: {', '.join(self.request['offered'] or []) or 'none'})",
            )

    def _response(self, head: bytes) -> None:
        side = self.sides[S2C]
        lines = head.decode("latin-1").split("\r\n")
        status_line = lines[0].split(" ", 2)
        headers = _headers(lines[1:])
        try:
            status = int(status_line[1]) if status_line[0].startswith("HTTP/") else -1
        except (IndexError, ValueError):
            status = -1
        reason = status_line[2] if len(status_line) > 2 else ""
        self.response = {"status": status, "reason": reason}
        if status != 101:
            if status < 0:
                message = f"the server answered the upgrade with {lines[0][:80]!r}"
                self._note(side, "websocket.bad-handshake", message)
            else:
                message = f"the server refused the upgrade: {status} {reason}".rstrip()
                self._note(side, "websocket.refused", message)
            for other in self.sides.values():
                self._give_up(other, 0)
            return
        problems = []
        if "websocket" not in _tokens(headers.get("upgrade", "")):
            problems.append("no Upgrade: websocket")
        accept = headers.get("sec-websocket-accept")
        if self.key is not None and accept != accept_key(self.key):
            problems.append(f"Sec-WebSocket-Accept {accept!r} does not match the key")
        if problems:
            self._note(side, "websocket.bad-handshake", "101 response: " + "; ".join(problems))
        chosen = headers.get("sec-websocket-protocol")
        self.subprotocol = chosen.strip() if chosen else None
        if self.subprotocol is None or self.subprotocol.lower() != SUBPROTOCOL:
            said = repr(self.subprotocol) if self.subprotocol else "no subprotocol"
            self._note(
                side,
                "websocket.subprotocol",
                f"the server agreed to {said}, not {SUBPROTOCOL!r}: the peers may not both "
                "speak AMQP",
            )
        self._extensions(headers.get("sec-websocket-extensions", ""))

    def _extensions(self, value: str) -> None:
        """permessage-deflate (RFC 7692) is the one extension read; any other agreed extension
        may change the payload, so it is named in a finding."""
        for ext in (e.strip() for e in value.split(",") if e.strip()):
            name, *params = (p.strip().lower() for p in ext.split(";"))
            if name == "permessage-deflate":
                keys = {p.partition("=")[0].strip() for p in params}
                self.deflate = {
                    C2S: "client_no_context_takeover" in keys,
                    S2C: "server_no_context_takeover" in keys,
                }
            else:
                self._note(
                    self.sides[S2C],
                    "websocket.reserved-bits",
                    f"extension {name!r} agreed: payloads may not be read right",
                )

    # -- frames ------------------------------------------------------------------------------
    def _frames(self, side: _Side, data: bytes, out: bytearray) -> None:
        if side.buf:
            side.buf += data
            data = bytes(side.buf)
            side.buf.clear()
        view = memoryview(data)
        pos = 0
        size = len(data)
        while pos < size and side.state == FRAMES:
            if side.in_payload:
                take = min(side.remaining, size - pos)
                if self.pieces is not None and take:
                    self._piece(side, take, size - pos)
                chunk: bytes | memoryview = view[pos : pos + take]
                if side.mask is not None:
                    chunk = unmask(chunk, side.mask, side.phase)
                pos += take
                side.phase += take
                side.remaining -= take
                self._payload(side, chunk, out)
                if side.remaining == 0:
                    self._frame_done(side, out)
                continue
            used = self._header(side, view, pos)
            if used == 0:
                side.buf += view[pos:]
                break
            pos += used
            if side.remaining == 0 and side.in_payload:
                self._frame_done(side, out)
        if side.state == OPAQUE:
            side.dropped += size - pos

    def _piece(self, side: _Side, take: int, tail: int) -> None:
        """Keep where `take` payload bytes of a client frame, `tail` bytes before the end of
        this call's bytes, were on the wire (`wire()`): those the AMQP stream gets as they are."""
        pieces = self.pieces
        if pieces is not None and side.direction == C2S and side.sink == _STREAM:
            if side.deflated:
                return  # inflated bytes have no place on the wire
            pieces.append(Piece(side.payload, take, side.mask, side.phase, tail))

    def _header(self, side: _Side, view: memoryview, pos: int) -> int:
        """Read the frame header at `pos`: its length in bytes, 0 if it is not all there."""
        avail = len(view) - pos
        if avail < 2:
            return 0
        b0, b1 = view[pos], view[pos + 1]
        fin, rsv, opcode = bool(b0 & 0x80), b0 & 0x70, b0 & 0x0F
        masked, length = bool(b1 & 0x80), b1 & 0x7F
        need = 2 + (2 if length == 126 else 8 if length == 127 else 0) + (4 if masked else 0)
        if avail < need:
            return 0
        at = pos + 2
        if length == 126:
            length = int.from_bytes(view[at : at + 2], "big")
            at += 2
            if length < 126:
                self._note(side, "websocket.bad-length", f"16-bit length {length} (not minimal)")
        elif length == 127:
            length = int.from_bytes(view[at : at + 8], "big")
            at += 8
            if length >> 63 or length > MAX_FRAME_PAYLOAD:
                self._note(
                    side,
                    "websocket.bad-length",
                    f"a {self._opname(opcode)} frame declares {length} payload bytes: "
                    "beyond belief, the rest of this direction is not read",
                )
                self._give_up(side, 0)
                return need
            if length < 65536:
                self._note(side, "websocket.bad-length", f"64-bit length {length} (not minimal)")
        side.mask = bytes(view[at : at + 4]) if masked else None
        side.fin, side.opcode, side.remaining, side.phase = fin, opcode, length, 0
        side.in_payload = True
        side.frames += 1
        if self.log is not None:
            self.log.append((side.direction, opcode, fin, masked, length))
        self._check(side, fin, rsv, opcode, masked, length)
        return need

    def _check(
        self, side: _Side, fin: bool, rsv: int, opcode: int, masked: bool, length: int
    ) -> None:
        """Judge a frame header and choose where its payload goes."""
        if side.close is not None:
            self._note(
                side, "websocket.frame-after-close", f"a {self._opname(opcode)} frame after close"
            )
        if side.direction == C2S and not masked:
            self._note(side, "websocket.masking", f"client frame {side.frames} is not masked")
        elif side.direction == S2C and masked:
            self._note(side, "websocket.masking", f"server frame {side.frames} is masked")
        if opcode not in OPCODES:
            self._note(
                side, "websocket.bad-opcode", f"reserved opcode {opcode:#x}, {length} bytes skipped"
            )
            side.sink = _SKIP
            return
        compressed = False
        if rsv:
            deflate_first = rsv == 0x40 and self.deflate is not None and opcode in (TEXT, BINARY)
            if deflate_first:
                compressed = True
            else:
                self._note(
                    side,
                    "websocket.reserved-bits",
                    f"RSV bits {rsv >> 4:03b} on a {OPCODES[opcode]} frame with no extension "
                    "that allows them",
                )
        if opcode & CONTROL_BIT:
            if not fin or length > MAX_CONTROL_PAYLOAD:
                why = "fragmented" if not fin else f"{length} bytes long (at most 125)"
                self._note(side, "websocket.bad-control", f"{OPCODES[opcode]} frame {why}")
                side.sink = _SKIP
            else:
                side.sink = _CONTROL
                side.control.clear()
            return
        if opcode == CONTINUATION:
            if side.message is None:
                self._note(
                    side, "websocket.bad-fragment", "a continuation frame with no message begun"
                )
                side.message = BINARY
        else:
            if side.message is not None:
                self._note(
                    side,
                    "websocket.bad-fragment",
                    f"a {OPCODES[opcode]} frame inside an unfinished fragmented message",
                )
                self._message_done(side, bytearray())
            if opcode == TEXT:
                self._note(
                    side,
                    "websocket.text-frame",
                    "a text frame: the AMQP binding carries AMQP in binary frames only "
                    "(its payload is read as AMQP all the same)",
                )
            side.message = opcode
            side.deflated = compressed
            if compressed and side.inflater is None:
                side.inflater = zlib.decompressobj(-15)
        side.sink = _STREAM

    def _payload(self, side: _Side, chunk: bytes | memoryview, out: bytearray) -> None:
        if side.sink == _STREAM:
            if side.deflated:
                self._inflate(side, chunk, out)
            else:
                out += chunk
                side.payload += len(chunk)
        elif side.sink == _CONTROL:
            side.control += chunk

    def _inflate(self, side: _Side, chunk: bytes | memoryview, out: bytearray) -> None:
        try:
            raw = side.inflater.decompress(chunk, MAX_INFLATE)
        except zlib.error as exc:
            self._note(side, "websocket.deflate-error", f"permessage-deflate: {exc}")
            self._give_up(side, 0)
            return
        if side.inflater.unconsumed_tail:
            self._note(
                side, "websocket.deflate-error", f"a message inflates beyond {MAX_INFLATE} bytes"
            )
            self._give_up(side, 0)
            return
        out += raw
        side.payload += len(raw)

    def _frame_done(self, side: _Side, out: bytearray) -> None:
        side.in_payload = False
        opcode = side.opcode
        if side.sink == _CONTROL:
            self._control(side, opcode, bytes(side.control))
            side.control.clear()
        elif side.sink == _STREAM and side.fin:
            self._message_done(side, out)

    def _message_done(self, side: _Side, out: bytearray) -> None:
        if side.deflated and side.state != OPAQUE:
            self._inflate(side, DEFLATE_TAIL, out)
            if self.deflate and self.deflate[side.direction]:
                side.inflater = None  # no context takeover: each message starts afresh
        side.messages += 1
        side.message = None
        side.deflated = False

    def _control(self, side: _Side, opcode: int, payload: bytes) -> None:
        if opcode == PING:
            side.pings += 1
        elif opcode == PONG:
            side.pongs += 1
        elif opcode == CLOSE:
            self._close(side, payload)

    def _close(self, side: _Side, payload: bytes) -> None:
        if len(payload) == 1:
            self._note(side, "websocket.bad-control", "close frame with a 1-byte payload")
            side.close = {"code": None, "reason": ""}
            return
        if not payload:
            side.close = {"code": None, "reason": ""}  # 1005: no status code was sent
            return
        code = int.from_bytes(payload[:2], "big")
        try:
            reason = payload[2:].decode("utf-8")
        except UnicodeDecodeError:
            reason = payload[2:].decode("utf-8", "replace")
            self._note(side, "websocket.bad-control", "close reason is not valid UTF-8")
        side.close = {"code": code, "reason": reason}
        name = CLOSE_CODES.get(code)
        if name is not None:
            side.close["name"] = name
        who = "client" if side.direction == C2S else "server"
        if code < 1000 or code in CLOSE_CODES_NOT_SENT or 1016 <= code < 3000:
            self._note(side, "websocket.bad-control", f"close code {code} may not be sent")
        elif code not in CLOSE_CODES_CLEAN:
            text = f"{code} {name or ''} {reason}".replace("  ", " ").strip()
            self._note(side, "websocket.close-error", f"the {who} closed the WebSocket: {text}")

    # -- helpers -------------------------------------------------------------------------------
    def _give_up(self, side: _Side, dropped: int) -> None:
        side.state = OPAQUE
        side.dropped += dropped
        side.buf.clear()
        side.control.clear()
        side.in_payload = False
        side.inflater = None

    def _note(self, side: _Side, code: str, message: str) -> None:
        key = (side.direction, code)
        count = self._noted.get(key, 0) + 1
        self._noted[key] = count
        if count > MAX_FINDINGS_PER_CODE:
            self.suppressed += 1
            return
        self.findings.append(finding(code, f"websocket {side.direction}: {message}"))

    @staticmethod
    def _opname(opcode: int) -> str:
        return OPCODES.get(opcode, f"opcode {opcode:#x}")


def _match(direction: str, head: bytes) -> str:
    """The layer detector: a client whose first bytes are a WebSocket upgrade request."""
    if direction != C2S:
        return layers.NO
    said = detect(head)
    if said is None:
        return layers.MORE
    return layers.MATCH if said else layers.NO


def _make(context: layers.LayerContext) -> WebSocketLayer:
    wire = bool(context.options.get(WIRE_OPTION))
    return WebSocketLayer(show_secrets=context.show_secrets, wire=wire)


layers.register(layers.Detector(WebSocketLayer.name, _match, _make))
