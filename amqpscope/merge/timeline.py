"""Several vantage points' frame records in, one timeline out (sans-IO).

`merge(parts)` takes each input's records (a capture's, a log's), in its own order and on its
own clock, and gives one list ordered by corrected time in which each frame is once:

1. the reference is the first capture given (the first input when all are logs); its clock
   is the timeline's;
2. a dateless log (times of day only, placed on 1970-01-01 by `logs.lines.Clock`) gets the
   date of the reference: the day that puts its first time nearest the reference's first;
3. each other capture, in the order given: its connections are matched to those already
   placed by their ends and aligned frame by frame (`align.same_bytes`); its clock offset is
   estimated from the aligned pairs (`clocks.between_captures`) unless given, and taken off
   its times; then each log: its connections matched to a capture's by content
   (`align.best_capture`), its offset from those pairs (`clocks.from_client_log`);
4. a frame two inputs hold is kept once, the first placed, with `seen` naming every input that
   holds it and its time there (packet or line); a frame only one holds is kept with its
   corrected time. Connections are numbered anew in the order they first appear.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Final

from amqpscope.codec.frames import Frame
from amqpscope.merge import align, clocks
from amqpscope.merge.clocks import Offset

CAPTURE: Final = "capture"
LOG: Final = "log"
#: a log's times below this (two days from the epoch) had no date (`logs.lines.Clock`)
DATELESS: Final = 2 * 86_400.0
DAY: Final = 86_400.0


@dataclass(slots=True)
class Part:
    """One input: its name on the command line (`A`, `B`...), file, kind and records."""

    name: str
    path: str
    kind: str
    frames: list[Frame]


@dataclass(slots=True)
class Match:
    """A connection of `input` found to be connection `into` of the timeline (an earlier
    input's `into_conn`), by `how` ("ends", "content"), with `pairs` frames in both."""

    input: str
    conn: int
    into: str
    into_conn: int
    how: str
    pairs: int


@dataclass(slots=True)
class Merged:
    """The timeline (`frames`), each input's clock offset, and the connections matched."""

    frames: list[Frame]
    offsets: dict[str, Offset]
    matches: list[Match] = field(default_factory=list)
    dated: dict[str, float] = field(default_factory=dict)  # a dateless log: the days added


def merge(parts: Sequence[Part], given: Mapping[str, float] | None = None) -> Merged:
    """One timeline of `parts` (see the module's docstring); `given`: offsets set by the user,
    by input name, in seconds."""
    given = given or {}
    ref = next((p for p in parts if p.kind == CAPTURE), parts[0])
    offsets: dict[str, Offset] = {}
    merged = Merged([], offsets)
    placed: list[tuple[Part, align.Conn]] = []  # the timeline's connections, first placed
    by_ends: dict[tuple[str, str], tuple[Part, align.Conn]] = {}
    _shift(ref, given.get(ref.name, 0.0))
    offsets[ref.name] = _given_or(given, ref.name, Offset(0.0, 0.0, clocks.REFERENCE))
    for conn in align.connections(ref.frames).values():
        placed.append((ref, conn))
        if ref.kind == CAPTURE:
            by_ends[(conn.client, conn.server)] = (ref, conn)
    ordered = [p for p in parts if p is not ref and p.kind == CAPTURE]
    ordered += [p for p in parts if p is not ref and p.kind != CAPTURE]
    for part in ordered:
        if part.kind == LOG:
            _date(part, ref, merged)
        conns = align.connections(part.frames)
        found: list[tuple[align.Conn, Part, align.Conn, align.Paired]] = []
        c2s: list[float] = []
        s2c: list[float] = []
        for conn in conns.values():
            if part.kind == CAPTURE:
                other = by_ends.get((conn.client, conn.server))
                if other is None:
                    continue
                pairs = align.same_bytes(other[1], conn)
                into = other
            else:
                captured = [(p, c) for p, c in placed if p.kind == CAPTURE]
                target, pairs = align.best_capture(conn, [c for _, c in captured])
                into = next(((p, c) for p, c in captured if c is target), (part, conn))
            if not pairs[0]:
                continue
            found.append((conn, into[0], into[1], pairs))
            for kept, other_frame in zip(pairs[0], pairs[1], strict=True):
                if not other_frame.ts or not kept.ts:
                    continue  # a log line without a time (Proton's trace has none) bounds nothing
                diff = other_frame.ts - kept.ts
                (c2s if kept.direction == "c2s" else s2c).append(diff)
        if part.kind == CAPTURE:
            estimate = clocks.between_captures(c2s, s2c)
        else:
            times = [f.ts for f in part.frames if f.ts]
            estimate = clocks.from_client_log(c2s, s2c, clocks.resolution_of(times))
            if not times:
                estimate = Offset(0.0, math.inf, clocks.UNTIMED)
        offset = _given_or(given, part.name, estimate)
        offsets[part.name] = offset
        matched: set[int] = set()
        for conn, into_part, into_conn, pairs in found:
            matched.add(conn.conn)
            how = "ends" if part.kind == CAPTURE else "content"
            merged.matches.append(
                Match(part.name, conn.conn, into_part.name, into_conn.conn, how, len(pairs[0]))
            )
            into_offset = offsets[into_part.name].seconds
            for kept, other_frame in zip(pairs[0], pairs[1], strict=True):
                seen = kept.seen
                if seen is None:
                    seen = kept.seen = [_entry(into_part, kept, into_offset)]
                seen.append(_entry(part, other_frame, 0.0))  # not yet shifted: its own clock
                other_frame.seen = _DROPPED  # the kept frame stands for it
        _note(part, 0.0)  # the frames only this input holds, before their times move
        _shift(part, offset.seconds)
        for conn, _into_part, into_conn, pairs in found:
            if part.kind == LOG:
                _untimed_after(conn.frames, {id(o): k for k, o in zip(*pairs, strict=True)})
            # the frames only this input holds join the connection they are part of
            into_conn.frames.extend(f for f in conn.frames if f.seen is not _DROPPED)
        for conn in conns.values():
            if conn.conn in matched:
                continue
            placed.append((part, conn))
            if part.kind == CAPTURE:
                by_ends.setdefault((conn.client, conn.server), (part, conn))
    _note(ref, offsets[ref.name].seconds)
    merged.frames = _timeline([ref, *ordered], placed)
    return merged


def _timeline(parts: list[Part], placed: list[tuple[Part, align.Conn]]) -> list[Frame]:
    """Every kept frame (a dropped one's `seen` is `_DROPPED`) by corrected time, each input's
    frames in its own order (merged, not sorted: a capture whose times step back keeps each
    connection's frames in order; at equal times the earlier input's first), numbered from
    1, connections numbered in the order they first appear."""
    for index, (_part, conn) in enumerate(placed):
        for frame in conn.frames:
            frame.conn = index  # which placed connection, until numbered below
    streams = [[f for f in part.frames if f.seen is not _DROPPED] for part in parts]
    streams = [stream for stream in streams if stream]
    if not streams:
        return []
    frames = streams[0] if len(streams) == 1 else list(heapq.merge(*streams, key=_TIME))
    numbers: dict[int, int] = {}
    for number, frame in enumerate(frames, 1):
        new = numbers.get(frame.conn)
        if new is None:
            new = numbers[frame.conn] = len(numbers) + 1
        frame.number = number
        frame.conn = new
    return frames


def _untimed_after(frames: list[Frame], keep: dict[int, Frame]) -> None:
    """A log's frames without a time that no capture holds, placed just after the frame
    logged before them (its captured time, when a capture holds it): not all at the start."""
    last = 0.0
    for frame in frames:
        kept = keep.get(id(frame))
        if kept is not None:
            last = kept.ts
        elif frame.ts:
            last = frame.ts
        else:
            frame.ts = last


#: what the timeline is merged by (a C getter, not a Python function called per frame)
_TIME: Final = attrgetter("ts")


#: the `seen` of a frame another input's frame stands for (never shown)
_DROPPED: Final[list[tuple[str, str, str, int, float | None]]] = []


def _entry(part: Part, frame: Frame, offset: float) -> tuple[str, str, str, int, float | None]:
    """Where `part` holds `frame` and when on its own clock (`offset`: what was taken off its
    time already); a compact tuple that `Frame.to_json` spells out."""
    if part.kind == LOG:
        line = frame.source.get("line", 0) if frame.source is not None else 0
        return (part.name, part.path, "line", line, frame.ts + offset if frame.ts else None)
    return (part.name, part.path, "packet", frame.packet, frame.ts + offset)


def _note(part: Part, offset: float) -> None:
    """`seen` of the frames no other input's frame was paired with: this input alone."""
    for frame in part.frames:
        if frame.seen is None:
            frame.seen = [_entry(part, frame, offset)]


def _shift(part: Part, seconds: float) -> None:
    """The input's times on the reference clock."""
    if seconds:
        for frame in part.frames:
            if frame.ts:
                frame.ts -= seconds


def _given_or(given: Mapping[str, float], name: str, otherwise: Offset) -> Offset:
    if name in given:
        return Offset(given[name], 0.0, clocks.GIVEN)
    return otherwise


def _date(part: Part, ref: Part, merged: Merged) -> None:
    """A dateless log on the reference's day (the day that brings their first times
    nearest), before its `seen` times are taken, so that they are comparable."""
    times = [f.ts for f in part.frames if f.ts]
    ref_times = [f.ts for f in ref.frames if f.ts]
    if not times or not ref_times or max(times) >= DATELESS or ref_times[0] < DATELESS:
        return
    days = round((ref_times[0] - times[0]) / DAY)
    if not days:
        return
    merged.dated[part.name] = days * DAY
    for frame in part.frames:
        if frame.ts:
            frame.ts += days * DAY
