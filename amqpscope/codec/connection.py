"""Per-connection framing: two byte streams in, named frames out, in the order bytes arrive.

Rules, one direction at a time (`Framer`):

- A direction seen from its first byte starts in HEADER: an 8-byte "AMQP" protocol header names
  the version (and for 1.0 the layer: SASL, AMQP or TLS). A 0-9-1 server sends no header: its
  first bytes are frames of the version the client announced. A client whose first bytes are not
  a header is not speaking AMQP, and the connection is left alone (OPAQUE).
- FRAMES: split by the version's size field. At every frame boundary a new protocol header may
  appear (1.0 after SASL; a 0-9-1 server refusing a version). A size field that cannot be right,
  or a 0-9-1 frame that does not end in 0xCE, sends the direction to HUNT.
- HUNT (no header seen: mid-stream capture, after lost bytes or damage): look for the first
  offset where a header or consecutive strict frames start (see `detect.claim`). The skipped bytes
  are reported once the stream is found again. A direction with nothing AMQP-like in its first
  `HUNT_BUDGET` bytes, and no evidence from the other direction, is given up as not AMQP.
- OPAQUE: 0-10, undecryptable, or not AMQP: bytes are dropped (named once by a finding).
- LAYERED: the direction's bytes are wrapped (TLS, WebSocket: see `codec/layers.py`). In HEADER,
  bytes that are no protocol header are offered to the layer detectors (the other direction joins
  a layer already pushed at its level; after `AMQP 2 1 0 0` TLS must follow); from then on every
  byte goes through the layer, whose inner bytes feed a fresh framer (`inner`) that starts again
  in HEADER. Layers stack: TLS, then WebSocket. Each layer is reported once as a `layer` record
  (its info and findings) before the first frame it carries, or when it has a finding first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from amqpscope.codec import detect, layers
from amqpscope.codec import frames as k
from amqpscope.codec.amqp091 import frames as frames091
from amqpscope.codec.amqp091.decoder import Decoder as Decoder091
from amqpscope.codec.amqp10 import frames as frames10
from amqpscope.codec.amqp10.decoder import Decoder as Decoder10
from amqpscope.findings import Finding, finding
from amqpscope.stream.events import C2S, S2C
from amqpscope.stream.tcp import WELL_KNOWN_PORTS

HEADER: Final = "header"
FRAMES: Final = "frames"
HUNT: Final = "hunt"
OPAQUE: Final = "opaque"
LAYERED: Final = "layered"
#: the kind of the record that reports a layer (TLS, WebSocket) in the frame stream
LAYER_KIND: Final = "layer"

#: bytes a direction of unknown version may be searched before it is given up as not AMQP
HUNT_BUDGET: Final = 256 * 1024
#: first bytes kept of each direction of a connection not (yet) known to be AMQP
HEAD_BYTES: Final = 16
#: bytes kept while a frame is incomplete or a hunt waits for more; beyond it, damage is assumed
MAX_BUFFER: Final = 64 * 1024 * 1024
UNKNOWN_VERSIONS: Final = ("0-9-1", "1.0")
#: findings on a frame that mean framing has lost the boundaries: hunt for the next one
_RESYNC: Final = frozenset(("amqp.bad-frame-end", "amqp.bad-frame"))
#: the protocol header's first byte ("A")
_MAGIC_FIRST: Final = detect.MAGIC[0]


class Framer:
    """One direction of one connection: its buffer, its state, the version it speaks."""

    __slots__ = (
        "base",
        "buf",
        "decoder",
        "direction",
        "expect",
        "headerless",
        "hunted",
        "inner",
        "layer",
        "level",
        "marks",
        "pending",
        "sasl",
        "skipped",
        "state",
        "version",
    )

    def __init__(self, direction: str, from_start: bool) -> None:
        self.direction = direction
        self.state = HEADER if from_start else HUNT
        self.version: str | None = None
        self.sasl = False
        self.buf = bytearray()
        self.hunted = 0  # bytes searched in vain while the version was unknown
        self.skipped = 0  # bytes dropped since the last good frame (reported when found again)
        self.pending: list[Finding] = []  # findings waiting for the next frame of this direction
        # which packet brought which bytes: (stream offset just past its bytes, packet, ts), so
        # a frame is reported with the packet that completed it even when framing lagged behind
        self.base = 0  # stream offset of buf[0]
        #: (a list, not a deque: compiled, appending to it and reading it are native; it holds
        #: a mark or two but while a frame spans packets)
        self.marks: list[tuple[int, int, float]] = []
        self.decoder: Decoder10 | Decoder091 | None = None  # made when the version is known
        self.level = 0  # layers under this framer (0: straight on TCP)
        self.layer: layers.Layer | None = None  # LAYERED: the layer its bytes go through
        self.inner: Framer | None = None  # LAYERED: the framer of the layer's inner bytes
        self.expect = ""  # a layer that must follow (after `AMQP 2 1 0 0`: "tls")
        self.headerless = False  # began without its protocol header: hunting frames by shape

    def arrived(self, data: bytes, packet: int, ts: float) -> None:
        self.buf += data
        self.marks.append((self.base + len(self.buf), packet, ts))

    def completed_by(self, end: int) -> tuple[int, float]:
        """The packet (and its time) that brought the byte before buffer offset `end`."""
        offset = self.base + end
        for mark_end, packet, ts in self.marks:
            if mark_end >= offset:
                return packet, ts
        return self.marks[-1][1:] if self.marks else (0, 0.0)

    def carried(self, start: int, end: int) -> list[tuple[int, int, int, int]]:
        """Which packets brought buffer offsets `start` to `end` (a frame's bytes): (packet,
        offset from `start`, length, stream offset) for each, from the marks."""
        first, last = self.base + start, self.base + end
        out: list[tuple[int, int, int, int]] = []
        begin = -1  # where the oldest mark's bytes began is before anything still buffered
        for mark_end, packet, _ in self.marks:
            low = first if begin < first else begin
            high = last if mark_end > last else mark_end
            if high > low:
                out.append((packet, low - first, high - low, low))
            begin = mark_end
        return out

    def consume(self, count: int) -> None:
        """Drop `count` bytes from the front of the buffer (and the marks they no longer need)."""
        del self.buf[:count]
        self.advance(count)

    def advance(self, count: int) -> None:
        """The stream's offset moves on by `count` framed bytes (taken from the buffer, or
        framed straight from a packet); the marks before it are no longer needed."""
        base = self.base = self.base + count
        marks = self.marks
        n = len(marks)
        gone = 0
        while gone < n - 1 and marks[gone][0] <= base:
            gone += 1
        if gone == 1:  # the usual: the packet before this one's (no slice made)
            del marks[0]
        elif gone:
            del marks[:gone]


@dataclass(slots=True)
class LayerSlot:
    """A layer on the stack: its level, and whether its `layer` record has been handed on."""

    layer: layers.Layer
    level: int
    reported: bool = False
    size: int = 0  # outer bytes it has taken in, both directions


class ConnectionCodec:
    """Frames both directions of one TCP connection and decodes their fields. `from_start`: the
    handshake was seen, so each direction's first byte is the start of the protocol.
    `show_secrets`: decode credentials (SASL responses, start-ok) instead of redacting them.
    `context`: what layers need (key logs for TLS). `redact_bodies`: message bodies are
    counted, never kept or shown. `server_port`: where the client connected, which says
    whether an undecrypted TLS connection may be AMQP (`layers.AMQP_TLS_PORTS`)."""

    def __init__(
        self,
        from_start: bool,
        show_secrets: bool = False,
        context: layers.LayerContext | None = None,
        messages: bool = True,
        redact_bodies: bool = False,
        server_port: int | None = None,
    ) -> None:
        self.show_secrets = show_secrets
        self.server_port = server_port
        self.redact_bodies = redact_bodies
        # False: 1.0 messages are not decoded (see amqp10.Decoder), 0-9-1 bodies not rendered
        self.messages = messages
        self.context = context or layers.LayerContext(show_secrets=show_secrets)
        self.framers = {C2S: Framer(C2S, from_start), S2C: Framer(S2C, from_start)}
        self.layers: list[LayerSlot] = []  # the stack, outermost first
        self.version: str | None = None
        self.is_amqp = False
        self.first_header_dir: str | None = None
        self.findings: list[Finding] = []  # findings no frame carries (reported at the end)
        # `tcp.gap` notes not yet on a frame: they ride the connection's next frame of either
        # direction, so a tracker knows of the loss before the peer's answer to what was lost
        # (an ack of deliveries the capture lost), not when the lossy direction next frames
        self.gap_notes: list[Finding] = []
        self.carriers = False  # note on each frame which packets carried it (`Frame.carriers`)
        # the first bytes of each direction until AMQP is found: what a connection that is not
        # AMQP was (`census`: HTTP, TLS, RabbitMQ streams...)
        self.head: dict[str, bytes] = {}

    # -- events from the stream layer -------------------------------------------------------
    def data(
        self, direction: str, data: bytes | bytearray | memoryview, packet: int, ts: float = 0.0
    ) -> list[k.Frame]:
        """Bytes of `direction` (any bytes-like; the stream layer hands on `bytes`)."""
        framer = self.framers[direction]
        if not self.is_amqp:
            head = self.head.get(direction, b"")
            if len(head) < HEAD_BYTES:
                self.head[direction] = head + bytes(data[: HEAD_BYTES - len(head)])
        if framer.state == OPAQUE:
            return []
        if not isinstance(data, bytes):
            data = bytes(data)
        out: list[k.Frame] = []
        self._through(framer, data, packet, ts, out)
        return out

    def _through(
        self, framer: Framer, data: bytes, packet: int, ts: float, out: list[k.Frame]
    ) -> None:
        """Bytes at `framer`'s level: down through its layers to the framer that frames them."""
        while framer.state == LAYERED and framer.inner is not None:
            slot = self.layers[framer.level]
            slot.size += len(data)
            try:
                data = slot.layer.data(framer.direction, data)
            except Exception as exc:  # a layer bug must not cost the rest of the capture
                slot.layer.findings.append(
                    finding("amqp.decode-error", f"{slot.layer.name}: {type(exc).__name__}: {exc}")
                )
                framer.state = OPAQUE
                data = b""
            self._drain(slot, framer, packet, ts, out)
            if not data or framer.state == OPAQUE:
                return
            framer = framer.inner
        if framer.state == OPAQUE:
            return
        if framer.state == FRAMES and not framer.buf:
            self._straight(framer, data, packet, ts, out)
            return
        framer.arrived(data, packet, ts)
        self._run(framer, packet, out, final=False)

    def _straight(
        self, framer: Framer, data: bytes, packet: int, ts: float, out: list[k.Frame]
    ) -> None:
        """FRAMES with nothing buffered, the usual case (a packet starts at a frame boundary):
        the whole frames are cut from `data` itself, not from a copy in the buffer (a frame that
        is the whole packet is not copied at all), and only what is left goes to the buffer;
        then as `_run` would go on."""
        framer.marks.append((framer.base + len(data), packet, ts))
        pos = self._frames(framer, data, 0, packet, out, ts, True)
        if pos < len(data):
            framer.buf += memoryview(data)[pos:]
        framer.advance(pos)
        if framer.state != FRAMES or len(framer.buf) > MAX_BUFFER:
            self._run(framer, packet, out, final=False)

    def top(self, direction: str) -> Framer:
        """The innermost framer of `direction` (the one that frames AMQP)."""
        framer = self.framers[direction]
        while framer.inner is not None:
            framer = framer.inner
        return framer

    def note(self, note: Finding) -> None:
        """A finding of the stream layer that rides the connection's next frame (of either
        direction), as a gap's does: bytes acknowledged but not seen."""
        self.gap_notes.append(note)

    def gap(self, direction: str, missing: int, note: Finding | None = None) -> None:
        """Bytes were lost: whatever frame was in progress is gone; find the next boundary. The
        `note` (the stream layer's finding) rides on the next frame of this direction."""
        framer = self.framers[direction]
        while framer.state == LAYERED and framer.inner is not None:
            # bytes under a layer are lost: a layer that can resynchronise says so with `gap`
            lost = getattr(framer.layer, "gap", None)
            if lost is None:
                framer.state = OPAQUE
                if note is not None:
                    self.findings.append(note)
                return
            lost(direction, missing)
            framer, missing = framer.inner, 0
        if framer.state == OPAQUE:
            return
        if note is not None:
            self.gap_notes.append(note)
        if framer.decoder is not None:
            framer.decoder.gap()
        framer.skipped += len(framer.buf) + missing
        framer.consume(len(framer.buf))
        framer.base += missing
        if framer.state != HUNT:
            framer.state = HUNT

    def end(self, packet: int) -> list[k.Frame]:
        """The capture (or connection) ended: salvage a last hunt, report what was left over."""
        out: list[k.Frame] = []
        chain = []
        for top in self.framers.values():
            framer: Framer | None = top
            while framer is not None:
                chain.append(framer)
                framer = framer.inner
        for framer in chain:
            if framer.state == HUNT and framer.buf:
                self._run(framer, packet, out, final=True)
            if framer.buf and framer.state in (FRAMES, HEADER, HUNT) and self.is_amqp:
                self.findings.append(
                    finding(
                        "amqp.incomplete-frame",
                        f"{framer.direction} ended inside a frame, {len(framer.buf)} bytes kept",
                        packet,
                    )
                )
            framer.consume(len(framer.buf))
            if framer.decoder is not None:
                self.findings.extend(framer.decoder.end())
            self.findings.extend(framer.pending)
            framer.pending.clear()
        self.findings.extend(self.gap_notes)
        self.gap_notes.clear()
        for slot in self.layers:
            finish = getattr(slot.layer, "end", None)  # optional: what the end left unfinished
            if finish is not None:
                finish()
            if slot.reported:
                self.findings.extend(slot.layer.findings)
                slot.layer.findings.clear()
            elif self._claimed(slot) and (slot.layer.findings or not self._refused(slot)):
                self._report_layer(slot, C2S, packet, self._last_ts(), out)
        return out

    # -- layers ------------------------------------------------------------------------------
    def _layer(self, framer: Framer, buf: bytearray, pos: int, final: bool) -> str:
        """At a direction's first bytes (HEADER, no protocol header): push a layer or join the
        one the other direction pushed at this level. Says MATCH (pushed: the caller hands the
        bytes from `pos` on), MORE (wait for bytes) or NO."""
        level = framer.level
        head = bytes(buf[pos : pos + 4096])
        if len(self.layers) > level:  # the other direction went first: this one follows it
            slot = self.layers[level]
        else:
            if framer.expect:
                found = layers.detector(framer.expect)
                said = layers.MATCH if found is not None else layers.NO
            else:
                said, found = layers.detect(framer.direction, head)
            if said == layers.MORE and not final:
                return layers.MORE
            if said != layers.MATCH or found is None:
                return layers.NO
            slot = LayerSlot(found.make(self.context), level)
            self.layers.append(slot)
        framer.state = LAYERED
        framer.layer = slot.layer
        inner = Framer(framer.direction, True)
        inner.level = level + 1
        framer.inner = inner
        return layers.MATCH

    def _drain(self, slot: LayerSlot, framer: Framer, packet: int, ts: float, out: list) -> None:
        """Hand on what a layer found: on its record if not reported yet, else on the next frame
        of this direction."""
        if not slot.layer.findings:
            return
        if not slot.reported:
            if self._claimed(slot):
                self._report_layer(slot, framer.direction, packet, ts, out)
            else:
                slot.layer.findings.clear()
            return
        target = framer.inner if framer.inner is not None else framer
        target.pending.extend(slot.layer.findings)
        slot.layer.findings.clear()

    def _report_layer(
        self, slot: LayerSlot, direction: str, packet: int, ts: float, out: list
    ) -> None:
        """The `layer` record: which layer, what it knows (version, suite, ...), its findings."""
        layer = slot.layer
        frame = k.Frame("unknown", LAYER_KIND, layer.name, None, b"")
        try:
            frame.fields = dict(layer.info())
        except Exception as exc:  # a layer bug must not cost the rest of the capture
            frame.fields = {}
            layer.findings.append(finding("amqp.decode-error", f"{layer.name}: {exc}"))
        frame.fields.setdefault("size", slot.size)
        frame.findings = list(layer.findings)
        layer.findings.clear()
        frame.direction = direction
        frame.packet, frame.ts = packet, ts
        slot.reported = True
        out.append(frame)

    def _claimed(self, slot: LayerSlot) -> bool:
        """Whether a layer that carried no AMQP frame (no key, damage) is reported: when AMQP was
        seen (the in-band TLS header), on an AMQP port, when the client asked for AMQP by ALPN,
        or named a server that speaks AMQP (Azure Service Bus on 443). Other HTTPS on 443 is not
        AMQP's to report."""
        if self.is_amqp or slot.level > 0:
            return True
        if self.server_port in layers.AMQP_TLS_PORTS:
            return True
        try:
            info = slot.layer.info()
        except Exception:
            return False
        if str(info.get("sni") or "").lower().endswith(layers.AMQP_TLS_HOST_SUFFIXES):
            return True
        return "amqp" in (info.get("alpn-offered") or []) or info.get("alpn") == "amqp"

    def _refused(self, slot: LayerSlot) -> bool:
        """The layer's inner bytes turned out not to be AMQP (HTTPS decrypted, say)."""
        for top in self.framers.values():
            framer: Framer | None = top
            while framer is not None and framer.level <= slot.level:
                framer = framer.inner
            if framer is not None and framer.state == OPAQUE and framer.version is None:
                return True
        return False

    def _last_ts(self) -> float:
        latest = 0.0
        for top in self.framers.values():
            framer: Framer | None = top
            while framer is not None:
                if framer.marks:
                    latest = max(latest, framer.marks[-1][2])
                framer = framer.inner
        return latest

    # -- the per-direction state machine -------------------------------------------------------
    def _run(self, framer: Framer, packet: int, out: list[k.Frame], final: bool) -> None:
        buf = framer.buf
        pos = 0
        while True:
            state = framer.state
            if state == FRAMES:
                pos = self._frames(framer, buf, pos, packet, out)
                if framer.state == FRAMES:
                    break  # the next frame is not complete yet
            elif state == HEADER:
                if len(buf) - pos < 8:
                    if len(buf) == pos:
                        break
                    if detect.MAGIC.startswith(bytes(buf[pos : pos + 4])) and not final:
                        break
                if framer.expect or buf[pos : pos + 4] != detect.MAGIC:
                    said = self._layer(framer, buf, pos, final)
                    if said == layers.MORE:
                        break
                    if said == layers.MATCH:
                        rest = bytes(buf[pos:])
                        packet, ts = framer.completed_by(len(buf))
                        framer.consume(len(buf))
                        self._through(framer, rest, packet, ts, out)
                        return
                    if framer.expect:
                        framer.state = OPAQUE
                        break
                    if not self._headerless(framer):
                        framer.state = OPAQUE
                        break
                    continue
                raw = bytes(buf[pos : pos + 8])
                pos += 8
                self._emit(framer, self._header_frame(framer, raw), pos, out)
            elif state == HUNT:
                known = framer.version or self._other(framer).version
                versions: tuple[str, ...] = (known,) if known else UNKNOWN_VERSIONS
                versions = tuple("0-9-1" if v in detect.FRAMED_LIKE_091 else v for v in versions)
                needed = detect.FRAMES_TO_CLAIM_KNOWN if known else detect.FRAMES_TO_CLAIM
                claim = detect.claim(
                    memoryview(buf)[pos:], versions, needed, final, framer.headerless
                )
                framer.skipped += claim.offset
                if not known:
                    framer.hunted += claim.offset
                pos += claim.offset
                if claim.status == "found":
                    if framer.skipped and self.is_amqp:
                        framer.pending.append(
                            finding(
                                "amqp.resync",
                                f"skipped {framer.skipped} bytes to the next frame boundary",
                                packet,
                            )
                        )
                    framer.skipped = 0
                    if framer.headerless:
                        framer.headerless = False
                        # a 0-9-1 server sends no header: only its client can miss one
                        if framer.direction == C2S or claim.version not in detect.FRAMED_LIKE_091:
                            framer.pending.append(self._missing_header(framer, claim.version))
                    if buf[pos : pos + 4] == detect.MAGIC:
                        framer.state = HEADER
                    else:
                        if framer.version is None or framer.version not in (
                            detect.FRAMED_LIKE_091 if claim.version == "0-9-1" else ("1.0",)
                        ):
                            framer.version = claim.version
                        self._found(framer.version)
                        framer.state = FRAMES
                    continue
                if not known and framer.hunted > HUNT_BUDGET:
                    framer.state = OPAQUE
                if claim.status == "none" or framer.state == OPAQUE:
                    framer.skipped += len(buf) - pos if framer.state == OPAQUE else 0
                    pos = len(buf)
                break
            else:  # OPAQUE
                pos = len(buf)
                break
        framer.consume(pos)
        if len(buf) > MAX_BUFFER:
            self._damaged(framer, packet, f"{len(buf)} bytes buffered without a frame boundary")
            framer.skipped += len(buf) - 1
            framer.consume(len(buf))

    def _headerless(self, framer: Framer) -> bool:
        """A direction whose first bytes are not a header: a 0-9-1 server answering a client's
        header speaks frames at once. A direction whose header is missing (the other side sent
        one, or the connection is to an AMQP port) is read by frame shape, as a capture that
        starts mid-connection is, and said so when its frames are found. Anything else is not
        AMQP."""
        other = self._other(framer).version
        if framer.direction == S2C and other in detect.FRAMED_LIKE_091 and framer.version is None:
            framer.version = other
            framer.state = FRAMES
            return True
        if framer.version is not None:  # after a header, anything but frames is damage
            framer.state = HUNT
            return True
        if other is not None or self.server_port in WELL_KNOWN_PORTS:
            framer.headerless = True
            framer.state = HUNT
            return True
        return False

    def _missing_header(self, framer: Framer, version: str | None) -> Finding:
        other = self._other(framer)
        said = "the other side sent one" if other.version else "neither side sent one"
        who = "client" if framer.direction == C2S else "server"
        return finding(
            "amqp.missing-header",
            f"the {who} ({framer.direction}) began without its protocol header ({said});"
            f" its frames are read by their shape as AMQP {version}",
        )

    def _header_frame(self, framer: Framer, raw: bytes) -> k.Frame:
        header = detect.PROTOCOL_HEADERS.get(raw[4:8])
        version = header.version if header else "unknown"
        frame = k.Frame(version, k.PROTOCOL_HEADER, k.PROTOCOL_HEADER, None, raw)
        frame.fields = {
            "protocol": detect.header_name(raw),
            "protocol-id": raw[4],
            "major": raw[5],
            "minor": raw[6],
            "revision": raw[7],
        }
        if self.first_header_dir is None:
            self.first_header_dir = framer.direction
        other = self._other(framer).version
        if header is None:
            frame.findings.append(
                finding("amqp.unsupported-version", f"unknown protocol header {raw[4:8].hex()}")
            )
            framer.state = OPAQUE
            return frame
        if other is not None and other != version:
            frame.findings.append(
                finding("amqp.version-mismatch", f"this side offers {version}, the other {other}")
            )
        framer.version = version
        self._found(version)
        if header.layer == "tls":
            frame.findings.append(finding("amqp.tls", "TLS follows this header"))
            framer.expect = "tls"  # the next bytes are TLS (HEADER pushes the layer)
        elif version == "0-10":
            frame.findings.append(
                finding("amqp.unsupported-version", "AMQP 0-10 is named, not decoded")
            )
            framer.state = OPAQUE
        else:
            if version in ("0-8", "0-9"):
                tables = "0-8" if version == "0-8" else "0-9-1"
                note = f"AMQP {version}: read with {tables} tables"
                frame.findings.append(finding("amqp.unsupported-version", note))
            framer.sasl = header.layer == "sasl"
            framer.state = FRAMES
        return frame

    def _frames(
        self,
        framer: Framer,
        buf: bytes | bytearray,
        pos: int,
        packet: int,
        out: list[k.Frame],
        ts: float = 0.0,
        straight: bool = False,
    ) -> int:
        """FRAMES, the hot loop: split, name and decode the complete frames from `pos` on. Returns
        where it stopped; the state is still FRAMES when the next frame is not complete.
        `straight`: `buf` is the bytes of `packet` (at `ts`) alone, nothing buffered before them,
        so every frame found is completed by it (no search of the marks per frame)."""
        magic = detect.MAGIC
        # called by name, not through a variable: compiled, that is a direct C call
        is10 = framer.version == "1.0"
        have = len(buf)
        while pos < have:
            if is10:  # a frame's first byte is its size's highest: "A" only past 1 GB
                header = buf[pos] == _MAGIC_FIRST and buf.startswith(magic, pos)
                length = 0 if header else frames10.frame_length(buf, pos)
            else:  # a protocol header is looked for only where the first byte is its first
                length = frames091.frame_length(buf, pos)
                header = length == frames091.MAYBE_HEADER and buf.startswith(magic, pos)
                if length == frames091.MAYBE_HEADER and not header:
                    length = frames091.frame_length(buf, pos, True)
            if header:
                framer.state = HEADER
                return pos
            if length <= 0 or have - pos < length:
                if length > MAX_BUFFER:
                    self._damaged(framer, packet, f"frame size {length} is beyond belief")
                    return pos + 1
                if length < 0:
                    self._damaged(framer, packet, "frame header with an impossible size")
                    return pos + 1
                return pos
            end = pos + length  # from a packet's bytes (the usual case) sliced natively, compiled
            data = buf[pos:end] if isinstance(buf, bytes) else bytes(buf[pos:end])
            frame = self._frame(framer, data)
            pos += length
            if straight:
                self._emit(framer, frame, pos, out, packet, ts)
            else:
                self._emit(framer, frame, pos, out)
            if frame.findings and any(f.code in _RESYNC for f in frame.findings):
                framer.state = HUNT
                return pos
        return pos

    def _frame(self, framer: Framer, data: bytes) -> k.Frame:
        version = framer.version or "0-9-1"
        if version == "1.0":
            frame = frames10.make_frame(data)
        else:
            frame = frames091.make_frame(data, version)
        decoder = framer.decoder
        if decoder is None or decoder.version != version:
            if version == "1.0":
                decoder = Decoder10(self.show_secrets, self.messages, self.redact_bodies)
            else:
                decoder = Decoder091(version, self.show_secrets, self.redact_bodies, self.messages)
            if self.first_header_dir is None:  # joined mid-stream: as after a gap
                decoder.gap()
            framer.decoder = decoder
        try:
            if isinstance(decoder, Decoder10):  # narrowed: compiled, a direct C call
                decoder.decode(frame)
            else:
                decoder.decode(frame)
        except Exception as exc:  # a decoder bug must not cost the rest of the capture
            frame.findings.append(
                finding("amqp.decode-error", f"{frame.name}: {type(exc).__name__}: {exc}")
            )
        return frame

    def _emit(
        self,
        framer: Framer,
        frame: k.Frame,
        end: int,
        out: list[k.Frame],
        packet: int = -1,
        ts: float = 0.0,
    ) -> None:
        """Hand on `frame`, which ended at buffer offset `end`: completed by `packet` (at `ts`)
        when the caller knows it, else by the packet the marks say."""
        frame.direction = framer.direction
        if packet >= 0:
            frame.packet = packet
            frame.ts = ts
        else:
            frame.packet, frame.ts = framer.completed_by(end)
        if self.carriers:
            frame.carriers = framer.carried(end - len(frame.data), end)
        if framer.level:
            for slot in self.layers[: framer.level]:
                if not slot.reported:  # the layers a frame came through are named before it
                    self._report_layer(slot, framer.direction, frame.packet, frame.ts, out)
        if framer.pending:
            frame.findings[:0] = framer.pending
            framer.pending = []
        if self.gap_notes:
            frame.findings[:0] = self.gap_notes
            self.gap_notes = []
        out.append(frame)

    def _damaged(self, framer: Framer, packet: int, why: str) -> None:
        """The bytes at the boundary are not a frame: note it and hunt from the next byte (the
        caller steps past this one)."""
        framer.pending.append(finding("amqp.bad-frame", why, packet))
        framer.skipped += 1
        framer.state = HUNT

    def _found(self, version: str) -> None:
        self.is_amqp = True
        if self.version is None:
            self.version = version

    def _other(self, framer: Framer) -> Framer:
        return self.top(S2C if framer.direction == C2S else C2S)
