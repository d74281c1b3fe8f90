"""The write pass: the packets that carried the selected frames, written as a capture.

The capture's packets go to the dissector (which notes which packets carried each frame) and to
the cut (`writing.cut`, which decides what to keep), a selection (`accepts`) chooses frames, and
the writer (`capture.writer`) writes what the cut hands back, as it comes, credentials masked
(`writing.masking`). One pass; memory bounded by the cut's window, whatever the capture's size.
`read -w` (cli/write.py) and the TUI's `w` both run it; nothing here prints or exits.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any

from amqpscope.capture.packet import FIN, RST, SYN, RawPacket
from amqpscope.capture.writer import CaptureWriter, mask_packet
from amqpscope.codec.websocket import WIRE_OPTION
from amqpscope.dissect import Dissector
from amqpscope.track.tracker import Tracker
from amqpscope.writing.cut import Cut
from amqpscope.writing.masking import SECRET_FRAMES, secret_spans


@dataclass(frozen=True)
class Written:
    """What a cut holds: packets written, frames selected, packets of long frames lost."""

    packets: int
    frames: int
    lost: int


def write_packets(
    capture: Any,
    sink: IO[bytes],
    fmt: str,
    accepts: Callable[[Any, float], bool],
    whole: frozenset[int] = frozenset(),
    show_secrets: bool = False,
    keylog: Any = None,
    count: int | None = None,
) -> Written:
    """The pass: read the open `capture`, write the cut of the frames `accepts` to `sink` in
    `fmt` ("pcap", "pcapng"); `keylog` a loaded key log (`sources.load_keylog`). Raises what reading
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


def write_new_file(
    sources: Sequence[str],
    out: str,
    accepts: Callable[[Any, float], bool],
    show_secrets: bool = False,
    keylog: Any = None,
    overwrite: bool = False,
) -> Written:
    """Write the cut of capture `sources` (the files of one rotated capture, or one) to `out`
    as a file that is whole or not there: written to a new file beside it (created here, never
    one that was there), then moved onto it. An `out` that exists is replaced only when
    `overwrite`; FileExistsError (naming the file) when it was there, or appeared meanwhile."""
    from amqpscope.capture.writer import format_for
    from amqpscope.sources import open_captures

    if not overwrite and os.path.lexists(out):
        raise FileExistsError(errno.EEXIST, f"{out} exists; nothing was replaced", out)
    part = f"{out}.{os.getpid()}.part"
    try:
        with open_captures(sources) as capture, open(part, "xb") as sink:
            fmt = format_for(out, capture.format)
            written = write_packets(
                capture, sink, fmt, accepts, show_secrets=show_secrets, keylog=keylog
            )
        if overwrite:
            os.replace(part, out)
        else:
            _place(part, out)
    except FileExistsError as exc:  # the part's name, or `out` that appeared meanwhile
        there = exc.filename or out
        raise FileExistsError(
            errno.EEXIST, f"{there} exists; nothing was replaced", there
        ) from None
    finally:
        if os.path.exists(part):
            os.unlink(part)
    return written


def _place(part: str, out: str) -> None:
    """Move `part` to `out` unless a file is there: a hard link fails if one is (where the
    file system has no links, checked just before instead)."""
    try:
        os.link(part, out)
    except FileExistsError:
        raise
    except OSError:
        if os.path.lexists(out):
            raise FileExistsError(errno.EEXIST, "exists", out) from None
        os.replace(part, out)
