"""Plain one-line-per-frame output for `amqpscope read` (the rich timeline grows from here)."""

from __future__ import annotations

import json

from amqpscope.codec.frames import Frame

ARROWS = {"c2s": "→", "s2c": "←"}


def frame_line(frame: Frame, first_ts: float) -> str:
    """`  12   0.004512 c1 127.0.0.1:40000 → 127.0.0.1:5672  0-9-1 ch1 basic.publish [finding]`:
    the client always on the left, the arrow pointing the way the frame went."""
    channel = "" if frame.channel is None else f" ch{frame.channel}"
    extra = ""
    if frame.kind == "protocol-header":
        extra = f" {frame.fields.get('protocol', '')}"
    client, server = (frame.dst, frame.src) if frame.direction == "s2c" else (frame.src, frame.dst)
    notes = "".join(f" [{f.code}: {f.message}]" for f in frame.findings)
    return (
        f"{frame.number:6d} {frame.ts - first_ts:10.6f} c{frame.conn} {client} "
        f"{ARROWS.get(frame.direction, '-')} {server}  {frame.version}{channel} "
        f"{frame.name}{extra}{notes}"
    )


def frame_json(frame: Frame) -> str:
    return json.dumps(frame.to_json(), separators=(",", ":"), ensure_ascii=False)
