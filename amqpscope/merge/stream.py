"""Captures of several vantage points merged as they are read, in bounded memory (sans-IO).

`timeline.merge` holds every input's records whole before the first frame is given (about
1.2 KB a frame: two 100k-frame captures peaked at 215 MB where one read streams in 30 MB,
docs/performance.md). Here only a window is held:

1. the first `HEAD` records of each input are read; from them connections are matched by their
   ends and aligned (`align.same_bytes`), and each input's clock offset estimated with its
   bound (`clocks.between_captures`), as `timeline.merge` does on whole inputs;
2. then the inputs' streams, on the reference clock, are interleaved by time
   (`heapq.merge`: at equal times the earlier input's first, as `timeline.merge`), and each
   frame is paired with the same frame of another input in step, per connection and
   direction (its bytes; a frame one input missed is passed over within `align.WINDOW`);
   a frame two inputs hold is kept once (the earlier input's), with every input's time of it
   in `seen`;
3. a kept frame is given once every other input has shown its copy, or once the timeline is
   `window` seconds past it (no copy will come); so what is held is the frames of the last
   `window` seconds that some input has not shown yet.

A connection first seen after the head is matched by its ends when it appears. Times two
inputs disagree on by more than half the window after the offset is taken off (a clock that
steps or drifts) would pair frames after one was given: in the head that merges the inputs
whole (`timeline.merge`); later the window grows without end (the rest held, as a whole
merge holds it); both said in `notices`. Frame-trace logs are merged whole
(`timeline.merge`): a log's connection is matched by its whole content.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Final

from amqpscope.codec.frames import Frame
from amqpscope.merge import align, clocks
from amqpscope.merge.clocks import Offset
from amqpscope.merge.timeline import CAPTURE, Match, Merged, Part, merge

#: records of each input read before the first frame is given: what the offsets and the first
#: matches are estimated from
HEAD: Final = 4096
#: at most this many records of each input are read to find frames two inputs both hold
HEAD_MOST: Final = 16 * HEAD
#: seconds a kept frame waits for the other inputs' copies (on the reference clock)
WINDOW: Final = 2.0

#: what the inputs are interleaved by (a C getter)
_TIME: Final = attrgetter("ts")

Entry = tuple[str, str, str, int, float | None]


@dataclass(slots=True)
class Stream:
    """One input as it is read: its name (`A`, `B`...), file, kind and records, in order."""

    name: str
    path: str
    kind: str
    frames: Iterator[Frame]


class _Group:
    """One connection of the timeline: which input's connection is it, each input's frames
    not yet paired with it (by input and direction), and how many each paired."""

    __slots__ = ("ends", "lost", "members", "number", "paired", "pairs", "waiting")

    def __init__(self, ends: tuple[str, str]) -> None:
        self.ends = ends
        self.members: dict[int, int] = {}  # input -> its connection number
        self.number = 0  # in the timeline, given with its first frame
        self.pairs: dict[int, int] = {}
        self.waiting: dict[tuple[int, str], deque[_Held]] = {}
        self.lost: dict[int, float] = {}  # input -> the time of the last frame given without it
        self.paired: dict[int, float] = {}  # input -> the time of its first frame paired


class _Held:
    """A kept frame in the window: which input's it is, how many copies were paired with it,
    and where it stands in the window (`seq`: a kept frame another input's replaces moves to
    the replacing frame's place)."""

    __slots__ = ("copies", "frame", "given", "group", "input", "seq")

    def __init__(self, frame: Frame, group: _Group, input: int, seq: int) -> None:
        self.frame = frame
        self.group = group
        self.input = input
        self.seq = seq
        self.copies = 0
        self.given = False


@dataclass(slots=True)
class Streaming:
    """The merge of `inputs` as it is read (`frames()`, once); `merged` holds the offsets from
    the head on and the matches once read; `peak` the most frames held at once."""

    inputs: Sequence[Stream]
    given: Mapping[str, float] = field(default_factory=dict)
    head: int = HEAD
    window: float = WINDOW
    merged: Merged = field(default_factory=lambda: Merged([], {}))
    notices: list[str] = field(default_factory=list)
    peak: int = 0
    #: seconds two copies of a frame may be apart and still pair at once (set from the head)
    tolerance: float = 0.001
    whole: bool = False  # merged by `timeline.merge` (a log among the inputs, or said why)
    _groups: list[_Group] = field(default_factory=list)
    _by_conn: dict[tuple[int, int], _Group] = field(default_factory=dict)
    _by_ends: dict[tuple[str, str], list[_Group]] = field(default_factory=dict)
    _index: dict[str, int] = field(default_factory=dict)
    _numbered: int = 0
    _given: int = 0

    def frames(self) -> Iterator[Frame]:
        """The timeline: each frame once, by corrected time, numbered from 1."""
        if any(each.kind != CAPTURE for each in self.inputs) or len(self.inputs) < 2:
            return self._whole([list(each.frames) for each in self.inputs])
        heads = [list(itertools.islice(each.frames, self.head)) for each in self.inputs]
        spread = self._estimate(heads)
        read = self.head
        # an input none of whose head is in another's (it began later): the heads read on
        while self._unknown() and read < HEAD_MOST and not self._read_all(heads, read):
            for head, each in zip(heads, self.inputs, strict=True):
                head.extend(itertools.islice(each.frames, read))
            read *= 2
            spread = self._estimate(heads)
        if self._unknown() and not self._read_all(heads, read):  # (read whole: none in common)
            self.notices.append(
                f"no frame of input {self._unknown()} is in another input's first {read}:"
                " the inputs were merged whole (held in memory)"
            )
            return self._whole(
                [[*head, *each.frames] for head, each in zip(heads, self.inputs, strict=True)]
            )
        self.tolerance = max(self.tolerance, 2 * spread)
        if spread > self.window / 2:
            self.notices.append(
                f"frames seen in two inputs are up to {spread:.3f} s apart after their clock"
                f" offsets are taken off, beyond half the merge window ({self.window:g} s):"
                " the inputs were merged whole (held in memory)"
            )
            return self._whole(
                [[*head, *each.frames] for head, each in zip(heads, self.inputs, strict=True)]
            )
        return self._stream(heads)

    # -- whole ---------------------------------------------------------------------------------
    def _whole(self, records: list[list[Frame]]) -> Iterator[Frame]:
        self.whole = True
        parts = [
            Part(each.name, each.path, each.kind, frames)
            for each, frames in zip(self.inputs, records, strict=True)
        ]
        self.merged = merge(parts, self.given)
        self.peak = sum(len(frames) for frames in records)
        return iter(self.merged.frames)

    # -- the head: offsets -------------------------------------------------------------------
    def _estimate(self, heads: list[list[Frame]]) -> float:
        """Each input's offset from its head (as `timeline.merge` estimates it from the whole
        input); the largest difference of a pair's times left once the offsets are off."""
        offsets = self.merged.offsets
        ref = self.inputs[0].name
        offsets[ref] = self._given_or(ref, Offset(0.0, 0.0, clocks.REFERENCE))
        by_ends: dict[tuple[str, str], tuple[str, align.Conn]] = {}
        for conn in align.connections(heads[0]).values():
            by_ends[(conn.client, conn.server)] = (ref, conn)
        spread = 0.0
        for each, head in zip(self.inputs[1:], heads[1:], strict=True):
            c2s: list[float] = []
            s2c: list[float] = []
            conns = align.connections(head).values()
            for conn in conns:
                other = by_ends.get((conn.client, conn.server))
                if other is None:
                    continue
                into, into_conn = other
                kept, copies = align.same_bytes(into_conn, conn)
                into_offset = offsets[into].seconds
                for k, c in zip(kept, copies, strict=True):
                    diff = c.ts - (k.ts - into_offset)
                    (c2s if k.direction == "c2s" else s2c).append(diff)
            offset = offsets[each.name] = self._given_or(
                each.name, clocks.between_captures(c2s, s2c)
            )
            for diff in itertools.chain(c2s, s2c):
                spread = max(spread, abs(diff - offset.seconds))
            for conn in conns:
                by_ends.setdefault((conn.client, conn.server), (each.name, conn))
        return spread

    @staticmethod
    def _read_all(heads: list[list[Frame]], read: int) -> bool:
        """Whether every input was read to its end in heads of `read` records."""
        return all(len(head) < read for head in heads)

    def _unknown(self) -> str:
        """The first input whose offset the heads do not tell (none: "")."""
        for name, offset in self.merged.offsets.items():
            if offset.how == clocks.UNKNOWN:
                return name
        return ""

    def _given_or(self, name: str, otherwise: Offset) -> Offset:
        if name in self.given:
            return Offset(self.given[name], 0.0, clocks.GIVEN)
        return otherwise

    # -- the stream ------------------------------------------------------------------------------
    def _corrected(self, n: int, head: list[Frame]) -> Iterator[Frame]:
        """Input `n`'s records on the reference clock, each with its own `seen` entry."""
        each = self.inputs[n]
        name, path = each.name, each.path
        offset = self.merged.offsets[name].seconds
        for frame in itertools.chain(head, each.frames):
            frame.seen = [(name, path, "packet", frame.packet, frame.ts)]
            frame.ts -= offset
            yield frame

    def _stream(self, heads: list[list[Frame]]) -> Iterator[Frame]:
        inputs = len(self.inputs)
        self._index = {each.name: n for n, each in enumerate(self.inputs)}
        streams = [self._corrected(n, head) for n, head in enumerate(heads)]
        window: deque[tuple[_Held, int]] = deque()
        others = inputs - 1
        now = -math.inf
        seq = 0
        for frame in heapq.merge(*streams, key=_TIME):
            seen = frame.seen
            assert seen is not None
            n = self._index[seen[0][0]]
            if frame.ts > now:
                now = frame.ts
            group = self._group(n, frame)
            seq += 1
            held = self._pair(n, frame, group, seq)
            if held is not None:
                window.append((held, held.seq))
                if len(window) > self.peak:
                    self.peak = len(window)
            # what can be given: the oldest kept frames every input has shown, or too old
            horizon = now - self.window
            while window:
                first, at = window[0]
                if at != first.seq:  # moved: replaced by an earlier input's copy
                    window.popleft()
                    continue
                if first.copies < others and first.frame.ts >= horizon:
                    break
                window.popleft()
                yield self._give(first)
        while window:
            first, at = window.popleft()
            if at == first.seq:
                yield self._give(first)
        self._matches()

    def _group(self, n: int, frame: Frame) -> _Group:
        """The timeline connection of input `n`'s `frame`: its own connection's, or the first
        of another input's with the same ends that this input has not joined yet."""
        group = self._by_conn.get((n, frame.conn))
        if group is not None:
            return group
        if frame.src:
            c2s = frame.direction == "c2s"
            ends = (frame.src, frame.dst) if c2s else (frame.dst, frame.src)
        else:
            ends = ("", "")
        found = None
        if ends[0]:
            for candidate in self._by_ends.get(ends, ()):
                if n not in candidate.members:
                    found = candidate
                    break
        if found is None:
            found = _Group(ends)
            self._groups.append(found)
            if ends[0]:
                self._by_ends.setdefault(ends, []).append(found)
        found.members[n] = frame.conn
        self._by_conn[(n, frame.conn)] = found
        return found

    def _pair(self, n: int, frame: Frame, group: _Group, seq: int) -> _Held | None:
        """`frame` paired with the same frame another input holds (None: dropped, the kept one
        holds its `seen`), or kept (its `_Held`, waiting for the others' copies). In step: the
        first kept frame of the same bytes not given yet, or, when its time is farther than
        `tolerance` from this one's (the same bytes again: a publish, a heartbeat; or this
        input began later, after frames that wait for it), the nearest in time within half
        the window; those before it are frames this input does not hold."""
        direction = frame.direction
        key: object = frame.data or frame.name
        waiting = group.waiting.get((n, direction))
        if waiting:
            while waiting and waiting[0].given:  # no copy can join a frame given
                waiting.popleft()
            best = -1
            nearest = self.window / 2  # farther: not this frame's copy (or a clock stepped)
            for at, kept in enumerate(waiting):
                if not kept.given and (kept.frame.data or kept.frame.name) == key:
                    gap = abs(frame.ts - kept.frame.ts)
                    if gap <= nearest:
                        best, nearest = at, gap
                    if gap <= self.tolerance:
                        break
            if best >= 0:
                for _ in range(best):  # frames this input does not hold
                    waiting.popleft()
                return self._paired(n, frame, waiting.popleft(), group, seq)
        if len(group.members) > 1 and group.lost.get(n, -math.inf) >= frame.ts - 3 * self.window:
            self._late(n, frame)
        held = _Held(frame, group, n, seq)
        for other in range(len(self.inputs)):
            if other == n:
                continue
            queue = group.waiting.get((other, direction))
            if queue is None:
                queue = group.waiting[(other, direction)] = deque()
            while queue and queue[0].given:
                queue.popleft()
            queue.append(held)
        return held

    def _paired(self, n: int, frame: Frame, kept: _Held, group: _Group, seq: int) -> _Held | None:
        seen = kept.frame.seen
        copy = frame.seen
        assert seen is not None and copy is not None
        seen.append(copy[0])
        kept.copies += 1
        later = max(n, kept.input)
        group.pairs[later] = group.pairs.get(later, 0) + 1
        group.paired.setdefault(n, kept.frame.ts)
        group.paired.setdefault(kept.input, kept.frame.ts)
        apart = abs(frame.ts - kept.frame.ts)
        if apart > self.window / 2 and not math.isinf(self.window):
            self._grow(n, frame, apart)
        if n > kept.input:
            return None
        # an earlier input's copy is the one kept (as `timeline.merge` keeps it), at its time
        index = self._index
        seen.sort(key=lambda entry: index[entry[0]])
        frame.seen = seen
        kept.frame = frame
        kept.input = n
        kept.seq = seq
        return kept

    def _grow(self, n: int, frame: Frame, apart: float) -> None:
        self.notices.append(
            f"input {self.inputs[n].name}: a frame it holds (its packet {frame.packet}) is"
            f" {apart:.3f} s from another input's copy after the clock offsets are taken off,"
            f" beyond half the merge window ({self.window:g} s): its clock stepped or drifted;"
            " from there the inputs are merged whole (held in memory)"
        )
        self.window = math.inf

    def _late(self, n: int, frame: Frame) -> None:
        """A frame no other input's copy waits for, on a connection whose frames were given
        without this input's copy a moment ago: both sides unpaired at once, as when this
        input's clock stepped further than the window (its copies came after the frames
        were given)."""
        if math.isinf(self.window):
            return
        self.notices.append(
            f"input {self.inputs[n].name}: its packet {frame.packet} pairs with no frame of"
            f" the other inputs while they gave frames of the same connection without its copy"
            f" (the merge window, {self.window:g} s, was too short: its clock stepped?); frames"
            " of the seconds before may be shown twice; from there the inputs are merged whole"
            " (held in memory)"
        )
        self.window = math.inf

    def _give(self, held: _Held) -> Frame:
        held.given = True
        frame = held.frame
        group = held.group
        if held.copies < len(group.members) - 1:  # a member input's copy never came
            seen = frame.seen
            assert seen is not None
            shown = {self._index[entry[0]] for entry in seen}
            for member in group.members:
                # after its first copy paired: not the frames before its capture began
                if member not in shown and group.paired.get(member, math.inf) < frame.ts:
                    group.lost[member] = frame.ts
        if not group.number:
            self._numbered += 1
            group.number = self._numbered
        self._given += 1
        frame.number = self._given
        frame.conn = group.number
        return frame

    def _matches(self) -> None:
        """The connections matched, as `timeline.merge` lists them (those with a frame paired)."""
        for group in self._groups:
            members = sorted(group.members.items())
            if len(members) < 2:
                continue
            into, into_conn = members[0]
            for n, conn in members[1:]:
                pairs = group.pairs.get(n, 0)
                if pairs:
                    name = self.inputs[n].name
                    into_name = self.inputs[into].name
                    match = Match(name, conn, into_name, into_conn, "ends", pairs)
                    self.merged.matches.append(match)

    def unmatched(self) -> dict[str, int]:
        """By input (not the reference): its connections no other input's were matched with."""
        out: dict[str, int] = {}
        for group in self._groups:
            if len(group.members) == 1:
                [(n, _conn)] = group.members.items()
                if n:
                    name = self.inputs[n].name
                    out[name] = out.get(name, 0) + 1
        return out
