"""`read -w OUT`: the packets that carried the selected frames, written as a capture.

Wires the pass: the capture's packets go to the dissector (which notes which packets carried
each frame) and to the cut (`amqpscope.cut`, which decides what to keep), the selection (-Y,
--conn, --errors...) chooses frames, and the writer (`capture.writer`) writes what the cut hands
back, as it comes. One pass; memory bounded by the cut's window, whatever the capture's size.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any, Final

from amqpscope.capture.packet import FIN, RST, SYN, RawPacket
from amqpscope.capture.rotated import open_captures
from amqpscope.capture.writer import MASK, CaptureWriter, Span, format_for, mask_packet
from amqpscope.cli.common import check_output, fail, load_keylog
from amqpscope.codec.amqp091.tree import SECRET_ARGUMENTS
from amqpscope.codec.amqp10.tree import SECRET_FIELDS
from amqpscope.codec.tree import frame_tree
from amqpscope.codec.websocket import WIRE_OPTION, WebSocketLayer, unmask
from amqpscope.cut import Cut
from amqpscope.dissect import Dissector
from amqpscope.outputs import open_new, same_file
from amqpscope.track.tracker import Tracker

__all__ = ["same_file", "write_cut", "write_packets"]  # same_file: the TUI's `w` asks it


@dataclass(frozen=True)
class Written:
    """What a cut holds: packets written, frames selected, packets of long frames lost."""

    packets: int
    frames: int
    lost: int


#: the frames that may carry credentials (their trees flag which bytes: `read -x` blanks them)
SECRET_FRAMES: Final = frozenset(
    {name for name, _ in SECRET_ARGUMENTS} | {name for name, _ in SECRET_FIELDS}
)


#: the bytes before a secret's value: an AMQP 1.0 variable-width constructor's (its code and
#: size), a 0-9-1 long string's (its size); these stay, so that the masked frame still decodes
VALUE_HEADS: Final = {0xA0: 2, 0xA1: 2, 0xA3: 2, 0xB0: 5, 0xB1: 5, 0xB3: 5}
LONGSTR_HEAD: Final = 4


def value_bytes(frame: Any, node: Any) -> tuple[int, int] | None:
    """Where a secret node's value is in the frame (offset, length), its encoding's head left
    out; a node of another encoding is masked whole, as `read -x` blanks it. A PLAIN response's
    password only: its user is no secret (`read`, `summary` show it). None: no secret."""
    if not node.secret:
        return None
    head = 0
    if frame.version == "1.0" and node.offset < len(frame.data):
        head = VALUE_HEADS.get(frame.data[node.offset], 0)
    elif node.type == "longstr":
        head = LONGSTR_HEAD
    if node.length < head:
        head = 0
    start, length = node.offset + head, node.length - head
    value = frame.data[start : start + length]
    if frame.fields.get("mechanism") == "PLAIN" and value.count(b"\0") == 2:
        # `authzid \0 user \0 password`: the user stays, as every output shows it
        password = value.rindex(b"\0") + 1
        return start + password, length - password
    return start, length


def secret_spans(frame: Any, layers: Sequence[Any] = ()) -> dict[int, list[Span]]:
    """Where `frame`'s credentials are, per packet that carried them (`Frame.carriers`).
    `layers`: its connection's (`ConnectionCodec.layers`), when its AMQP is wrapped."""
    secrets = [value_bytes(frame, node) for root in frame_tree(frame) for node in root.walk()]
    secrets = [span for span in secrets if span is not None]
    if layers:
        return websocket_spans(frame, secrets, layers)
    carriers = frame.carriers or ()
    last = len(carriers) - 1
    out: dict[int, list[Span]] = {}
    for i, (packet, offset, length, _) in enumerate(carriers):
        where = "any" if last == 0 else "end" if i == 0 else "start" if i == last else "whole"
        chunk = frame.data[offset : offset + length]
        for start, size in secrets:
            first, stop = max(start, offset), min(start + size, offset + length)
            if first < stop:
                out.setdefault(packet, []).append(Span(chunk, first - offset, stop - first, where))
    return out


def websocket_spans(
    frame: Any, secrets: list[tuple[int, int]], layers: Sequence[Any]
) -> dict[int, list[Span]]:
    """Where `frame`'s credentials are in the packets of a WebSocket connection: the client's
    frames are XOR-masked (RFC 6455), which hides nothing, so the password's bytes are found on
    the wire through the layer's pieces (`WebSocketLayer.wire`) and become MASK under the same
    masking key: the packet stays a valid WebSocket frame of the same length. Inside TLS the
    packets carry ciphertext (nothing to mask); a deflated message has no byte-for-byte place."""
    layer = layers[0].layer if len(layers) == 1 else None
    carriers = frame.carriers or ()
    if not isinstance(layer, WebSocketLayer) or not carriers or not secrets:
        return {}
    origin = carriers[0][3] - carriers[0][1]  # the frame's first byte in the AMQP stream
    out: dict[int, list[Span]] = {}
    for packet, _, length, at in carriers:
        for piece in layer.wire(at, at + length):
            low, high = max(at, piece.start), min(at + length, piece.start + piece.length)
            if low >= high:
                continue
            skip = low - piece.start
            plain = frame.data[low - origin : high - origin]
            chunk = _on_wire(plain, piece.key, piece.phase + skip)
            for start, size in secrets:
                first, stop = max(origin + start, low), min(origin + start + size, high)
                if first < stop:
                    fill = bytes([MASK]) * (stop - first)
                    fill = _on_wire(fill, piece.key, piece.phase + skip + first - low)
                    span = Span(chunk, first - low, stop - first, "tail", fill, piece.tail - skip)
                    out.setdefault(packet, []).append(span)
    return out


def _on_wire(data: bytes, key: bytes | None, phase: int) -> bytes:
    """Payload bytes as a WebSocket frame with masking `key` carries them from byte `phase`."""
    return unmask(data, key, phase) if key is not None else bytes(data)


def write_packets(
    capture: Any,
    sink: IO[bytes],
    fmt: str,
    accepts: Callable[[Any, float | None], bool],
    whole: frozenset[int] = frozenset(),
    show_secrets: bool = False,
    keylog: Any = None,
    count: int | None = None,
) -> Written:
    """The pass: read the open `capture`, write the cut of the frames `accepts` to `sink` in
    `fmt` ("pcap", "pcapng"); `keylog` a loaded key log (`load_keylog`). Raises what reading
    or writing raises; the TUI's `w` calls it too."""
    dissector = Dissector(show_secrets=show_secrets, carriers=True)
    tracker = Tracker()
    cut = Cut(whole, mask=None if show_secrets else mask_packet)
    dissector.context.keylog = keylog
    if not show_secrets:  # where WebSocket payloads were on the wire, to mask credentials there
        dissector.context.options[WIRE_OPTION] = True
    dissector.take_secrets(capture.secrets)
    writer = CaptureWriter(sink, capture, fmt)
    selected = 0
    first_ts: float | None = None

    def packets() -> Iterator[RawPacket]:
        for raw in capture:
            yield raw  # the dissector takes it, and hands on the frames it completed
            segment = dissector.segment
            conn = dissector.conn_of(segment) if segment is not None else None
            flags = segment.flags if segment is not None else 0
            cut.packet(raw, conn, bool(flags & SYN), bool(flags & (FIN | RST)))
            for ready in cut.take():
                writer.write(ready)

    def finish() -> None:
        cut.finish()
        for ready in cut.take():
            writer.write(ready)
        writer.close()

    try:
        for frame in dissector.run(packets()):
            tracker.feed(frame)
            if first_ts is None:
                first_ts = frame.ts
            chosen = (count is None or selected < count) and accepts(frame, first_ts)
            connection = dissector.connections.get(frame.conn)
            layered = connection is not None and bool(connection.codec.layers)
            if not show_secrets and frame.name in SECRET_FRAMES:
                wrapped = connection.codec.layers if connection is not None and layered else ()
                for packet, spans in secret_spans(frame, wrapped).items():
                    cut.secret(packet, spans)
            cut.frame(frame, chosen, layered)
            selected += chosen
    except KeyboardInterrupt:
        # Ctrl-C: the cut of what was read so far, still held in the window, goes out as a
        # readable file (tcpdump -w's is readable after Ctrl-C too), not an empty one
        finish()
        raise
    finish()
    return Written(writer.packets, selected, cut.lost)


def write_cut(
    files: tuple[str, ...],
    out: str,
    accepts: Callable[[Any, float | None], bool],
    whole: frozenset[int],
    show_secrets: bool,
    keylog: str | None,
    count: int | None,
    force: bool = False,
) -> None:
    """Read `files`, write the cut to `out` ("-": standard output); say on stderr what it holds.
    Never over an input, nor over a file already there unless `force` (`amqpscope.outputs`)."""
    check_output("-w", out, (*files, keylog), force)
    with open_captures(files) as capture:
        sink: IO[bytes]
        try:
            sink = sys.stdout.buffer if out == "-" else open_new(out, force)
        except FileExistsError:
            fail(f"-w {out}: that file exists; --force overwrites it", 2)
        except OSError as exc:
            fail(f"-w {out}: {exc.strerror or exc}", 1)
        try:
            fmt = format_for(out, capture.format)
            written = write_packets(
                capture, sink, fmt, accepts, whole, show_secrets, load_keylog(keylog), count
            )
        finally:
            if sink is not sys.stdout.buffer:
                sink.close()
    where = "standard output" if out == "-" else out
    lost = f"; {written.lost} packets of longer frames were no longer held" if written.lost else ""
    print(
        f"{written.packets} packets carrying {written.frames} frames written to {where}{lost}",
        file=sys.stderr,
    )
