"""Which frames of two inputs are the same frame (sans-IO): a connection matched, then aligned.

- Two captures: a TCP connection is the same where its ends are (client and server
  `ip:port`), and its frames are the same bytes each way: each direction's frames are walked
  in step, keyed by kind, name, channel and bytes, re-synchronising on a frame one capture
  missed (a late start, a dropped packet) within `WINDOW` frames.
- A log beside a capture: a log shows no ends and not every frame (pika prints only some it
  received), so its connection is the capture connection where the log's frames, in order,
  are a subsequence of the captured ones of the same version, direction and name,
  with every field the log shows equal to the captured one (container-ids, link names,
  delivery ids and tags, open and SASL fields all are; a channel too, where the log prints
  one: uamqp's does not). A capture connection whose open names another container than the
  log's is never it, whatever else both show (`contradicts`). When several connections take the
  whole log (every connection ends with the same close-ok), the one whose times agree best
  with the log's (the smallest spread of their differences, then the nearest) is taken.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from amqpscope.codec.frames import Frame

#: how far ahead in-step alignment looks for a frame one side missed
WINDOW: Final = 64
#: frames compared at once while both walks agree
CHUNK: Final = 256
#: a connection's opens are among its first frames (after the protocol headers and SASL)
OPENS_WITHIN: Final = 32


#: frames of two inputs that are the same frame: (the first input's, the second's), in step
Paired = tuple[list[Frame], list[Frame]]


@dataclass(slots=True)
class Conn:
    """One input's connection: its frames in the input's order and its ends (captures)."""

    conn: int
    version: str
    client: str = ""
    server: str = ""
    frames: list[Frame] = field(default_factory=list)


def connections(frames: Sequence[Frame]) -> dict[int, Conn]:
    """An input's frames grouped by connection, with each connection's ends."""
    out: dict[int, Conn] = {}
    for frame in frames:
        conn = out.get(frame.conn)
        if conn is None:
            conn = out[frame.conn] = Conn(frame.conn, frame.version)
        if not conn.client and frame.source is None and frame.src:
            c2s = frame.direction == "c2s"
            conn.client, conn.server = (frame.src, frame.dst) if c2s else (frame.dst, frame.src)
        if conn.version in ("", "unknown") and frame.version not in ("", "unknown"):
            conn.version = frame.version
        conn.frames.append(frame)
    return out


def _direction(frames: Sequence[Frame], direction: str) -> list[Frame]:
    return [f for f in frames if f.direction == direction]


def same_bytes(first: Conn, second: Conn) -> Paired:
    """The frames two captures of one TCP connection both hold, paired, each way."""
    a_c2s, a_s2c = _split(first.frames)
    b_c2s, b_s2c = _split(second.frames)
    kept, other = _in_step(a_c2s, b_c2s)
    more_kept, more_other = _in_step(a_s2c, b_s2c)
    kept.extend(more_kept)
    other.extend(more_other)
    return kept, other


def _split(frames: list[Frame]) -> tuple[list[Frame], list[Frame]]:
    """A connection's frames each way, in one pass."""
    c2s: list[Frame] = []
    s2c: list[Frame] = []
    for frame in frames:
        if frame.direction == "c2s":
            c2s.append(frame)
        else:
            s2c.append(frame)
    return c2s, s2c


def _in_step(a: list[Frame], b: list[Frame]) -> Paired:
    """`a`'s and `b`'s frames that are the same, paired (fresh lists, or `a` and `b`)."""
    # a frame's bytes say its kind, channel and name; a record of none (a FIN) its name
    ka: list[object] = [f.data or f.name for f in a]
    kb: list[object] = [f.data or f.name for f in b]
    if ka == kb:  # both captures hold all of it (bench/merge.py: the common case, in C)
        return a, b
    kept: list[Frame] = []
    other: list[Frame] = []
    start = _start(ka, kb)
    if start is None:
        return kept, other
    i, j = start
    while i < len(ka) and j < len(kb):
        # long runs in step compared and paired a chunk at a time, in C (bench/merge.py: a
        # Python step per frame was most of a merge's time)
        if ka[i : i + CHUNK] == kb[j : j + CHUNK]:
            n = min(CHUNK, len(ka) - i, len(kb) - j)
            kept.extend(a[i : i + n])
            other.extend(b[j : j + n])
            i += n
            j += n
            continue
        if ka[i] == kb[j]:
            kept.append(a[i])
            other.append(b[j])
            i += 1
            j += 1
            continue
        ahead_a = _find(ka, kb[j], i + 1, i + WINDOW)
        ahead_b = _find(kb, ka[i], j + 1, j + WINDOW)
        if ahead_a >= 0 and (ahead_b < 0 or ahead_a - i <= ahead_b - j):
            i = ahead_a
        elif ahead_b >= 0:
            j = ahead_b
        else:
            i += 1
            j += 1
    return kept, other


def _start(ka: list[object], kb: list[object]) -> tuple[int, int] | None:
    """Where the two walks start: the first frame of one found in the other (a capture that
    started later begins anywhere in the earlier one), with the next few agreeing too (a
    heartbeat or an empty ack is the same bytes many times); a mid-stream capture's first
    frames may be no frame of the other's at all, so each of its first few is tried."""
    for first, second, flip in ((ka, kb, False), (kb, ka, True)):
        for j in range(min(len(second), 8)):
            run = second[j : j + 4]
            for i in range(len(first)):
                if first[i] == run[0] and first[i : i + len(run)] == run:
                    return (j, i) if flip else (i, j)
    return None


def _find(keys: list[object], key: object, start: int, stop: int) -> int:
    for at in range(start, min(stop, len(keys))):
        if keys[at] == key:
            return at
    return -1


def _agrees(logged: Frame, captured: Frame) -> bool:
    """Whether the log's frame is the captured one, as far as the log shows it: a channel
    the log does not print (uamqp's trace names none: `None`) is not asked."""
    if logged.name != captured.name:
        return False
    if logged.channel is not None and logged.channel != captured.channel:
        return False
    return _within(logged.fields, captured.fields)


def _container_ids(conn: Conn) -> dict[str, object]:
    """Each side's container-id, from the first `open` it sent (1.0; none for 0-9-1)."""
    ids: dict[str, object] = {}
    for frame in conn.frames[:OPENS_WITHIN]:
        if frame.name == "open" and frame.direction not in ids:
            found = frame.fields.get("container-id")
            if found is not None:
                ids[frame.direction] = found
            if len(ids) == 2:
                break
    return ids


def contradicts(log: Conn, capture: Conn) -> bool:
    """Whether the two connections' opens name different containers on the same side: then
    they are not one connection, whatever else (protocol headers, a close) both show."""
    captured = _container_ids(capture)
    return any(
        side in captured and captured[side] != value for side, value in _container_ids(log).items()
    )


def _within(logged: Any, captured: Any) -> bool:
    """The log's value is the captured one, as far as the log shows it: a map's keys the log
    left out (rhea leaves out defaults, in a source's map too) are not asked."""
    if isinstance(logged, dict) and isinstance(captured, dict):
        return all(k in captured and _within(v, captured[k]) for k, v in logged.items())
    if isinstance(logged, list) and isinstance(captured, list):
        return len(logged) == len(captured) and all(
            _within(a, b) for a, b in zip(logged, captured, strict=True)
        )
    return bool(logged == captured)


def logged_in(log: Conn, capture: Conn) -> Paired:
    """(captured, logged) frames paired: the log's frames each way as a subsequence of the
    capture's, greedily (each to the first captured frame after the last one taken that
    agrees)."""
    captured: list[Frame] = []
    logged: list[Frame] = []
    for direction in ("c2s", "s2c"):
        wire = _direction(capture.frames, direction)
        at = 0
        for frame in _direction(log.frames, direction):
            found = at
            while found < len(wire) and not _agrees(frame, wire[found]):
                found += 1
            if found == len(wire):
                continue  # not captured (a gap, or a frame the capture does not hold)
            captured.append(wire[found])
            logged.append(frame)
            at = found + 1
    return captured, logged


def best_capture(log: Conn, candidates: Sequence[Conn]) -> tuple[Conn, Paired]:
    """The capture connection `log` is, and their paired frames (empty when none fits); never
    one whose open names another container than the log's (`contradicts`)."""
    best: tuple[Any, ...] | None = None
    chosen: tuple[Conn, Paired] | None = None
    for capture in candidates:
        if capture.version != log.version or contradicts(log, capture):
            continue
        pairs = logged_in(log, capture)
        if not pairs[0]:
            continue
        diffs = [lf.ts - cf.ts for cf, lf in zip(pairs[0], pairs[1], strict=True)]
        spread = max(diffs) - min(diffs)
        score = (-len(pairs[0]), spread, abs(statistics.median(diffs)))
        if best is None or score < best:
            best, chosen = score, (capture, pairs)
    if chosen is None:
        return log, ([], [])
    return chosen
