"""Several FILEs as vantage points: the CLI's side of `amqpscope.merge` (open, say, hand on).

`--inputs auto|rotated|vantage` says what several FILEs are (auto: told by their times,
`merge.kind`), `--offset B=+0.18` sets an input's clock offset. Both are kept in click's
context by `merge_options` (the commands' signatures do not change), and `open_input` asks
`wanted_mode` when given several files. A merged input reads every file whole, merges their
records (`merge.timeline`) and says each input's offset on stderr.
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

import click

from amqpscope.capture.files import CaptureError, CaptureReader
from amqpscope.capture.textlog import head_of, is_capture, open_stream
from amqpscope.merge.kind import AUTO, MODES, VANTAGE, Span, tell

if TYPE_CHECKING:
    from amqpscope.cli.inputs import Input
    from amqpscope.codec.frames import Frame
    from amqpscope.findings import Finding
    from amqpscope.merge.timeline import Merged

_MODE: Final = "amqpscope.inputs"
_OFFSETS: Final = "amqpscope.offsets"
#: `NAME=SECONDS`, the seconds signed or not
_OFFSET: Final = re.compile(r"^(?P<name>[^=]+)=(?P<seconds>[+-]?(\d+(\.\d*)?|\.\d+))$")


def _keep(key: str) -> Callable[[click.Context, Any, Any], Any]:
    def callback(ctx: click.Context, _param: Any, value: Any) -> Any:
        ctx.meta[key] = value
        return value

    return callback


def merge_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--inputs and --offset, kept in click's context (no parameter of the command)."""
    fn = click.option(
        "--offset",
        "offsets",
        multiple=True,
        metavar="INPUT=SECONDS",
        expose_value=False,
        callback=_keep(_OFFSETS),
        help="With several FILEs as vantage points: INPUT's clock is SECONDS ahead (INPUT: its"
        " letter, A for the first FILE, or its path); the estimate is not used.",
    )(fn)
    return click.option(
        "--inputs",
        type=click.Choice(MODES),
        default=AUTO,
        show_default=True,
        expose_value=False,
        callback=_keep(_MODE),
        help="Several FILEs are the pieces of one rotated capture (read one after the other) or"
        " vantage points of the same traffic (captures from several hosts, logs: merged into"
        " one timeline, each frame once, clocks aligned); auto tells by whether their times"
        " overlap.",
    )(fn)


def _meta(key: str, default: Any) -> Any:
    ctx = click.get_current_context(silent=True)
    return ctx.meta.get(key, default) if ctx is not None else default


def letter(n: int) -> str:
    """The n-th input's name: A, B, ... Z, then I27, I28..."""
    return chr(ord("A") + n) if n < 26 else f"I{n + 1}"


def given_offsets(paths: Sequence[str]) -> dict[str, float]:
    """--offset's values by input letter; a usage error (exit 2) for a name no input has."""
    out: dict[str, float] = {}
    for text in _meta(_OFFSETS, ()):
        m = _OFFSET.match(text.strip())
        if m is None:
            raise click.BadParameter(f"{text!r}: not INPUT=SECONDS", param_hint="'--offset'")
        name = m.group("name").strip()
        found = [
            letter(n)
            for n, path in enumerate(paths)
            if name in (letter(n), path, os.path.basename(path))
        ]
        if len(found) != 1:
            names = ", ".join(f"{letter(n)} ({p})" for n, p in enumerate(paths))
            raise click.BadParameter(
                f"{name!r} names no single input (the inputs: {names})", param_hint="'--offset'"
            )
        out[found[0]] = float(m.group("seconds"))
    return out


def wanted_mode(paths: Sequence[str]) -> str:
    """ "rotated" or "vantage" for several `paths`: --inputs, else told by their times."""
    mode = _meta(_MODE, AUTO)
    if mode != AUTO:
        return str(mode)
    return tell(_spans(paths))


def _is_capture(path: str) -> bool:
    """Whether `path` holds a capture (its magic), not text; CaptureError when unreadable."""
    stream = open_stream(path)
    try:
        head, _ = head_of(stream, path)
    finally:
        with contextlib.suppress(OSError, ValueError):
            stream.close()
    return is_capture(head)


def _spans(paths: Sequence[str]) -> list[Span]:
    """What `merge.kind` needs of the files: which are logs, each capture's first and last
    packet times, and whether it holds a TCP segment another begins with (its packets read,
    not dissected: the beginnings first, then each whole, or until one holds a packet
    another begins with)."""
    from amqpscope.capture.linklayer import SegmentDecoder
    from amqpscope.merge.kind import BEGINNING, segment_key

    captures = [_is_capture(path) for path in paths]
    beginnings: list[set[tuple[object, ...]]] = []
    for path, capture in zip(paths, captures, strict=True):
        keys: set[tuple[object, ...]] = set()
        if capture:
            decoder = SegmentDecoder()
            with CaptureReader(path) as reader:
                for packet in reader:
                    segment = decoder.decode(packet)
                    if segment is not None and segment.payload:
                        keys.add(
                            segment_key(segment.src, segment.dst, segment.seq, len(segment.payload))
                        )
                        if len(keys) >= BEGINNING:
                            break
        beginnings.append(keys)
    spans = []
    for n, (path, capture) in enumerate(zip(paths, captures, strict=True)):
        if not capture:
            spans.append(Span(True, None, None))
            continue
        others: set[tuple[object, ...]] = set()
        for m, keys in enumerate(beginnings):
            if m != n:
                others |= keys
        first: float | None = None
        last: float | None = None
        shares = False
        decoder = SegmentDecoder()
        with CaptureReader(path) as reader:
            for packet in reader:
                if first is None:
                    first = packet.ts
                last = packet.ts
                if shares or not others:
                    continue
                segment = decoder.decode(packet)
                if segment is not None and segment.payload:
                    key = segment_key(segment.src, segment.dst, segment.seq, len(segment.payload))
                    shares = key in others
                    if shares:  # vantage points whatever their times: no need to read on
                        return [*spans, Span(False, first, last, shares)]
        spans.append(Span(False, first, last, shares))
    return spans


class _Files:
    """The files read, for a progress bar: the first's name, all their positions."""

    def __init__(self, inputs: Sequence[Input]) -> None:
        self.inputs = inputs
        self.path = inputs[0].path

    def position(self) -> tuple[int, int]:
        done = total = 0
        for each in self.inputs:
            here, size = each.file.position()
            done += here
            total += size
        return done, total


class MergedInput:
    """Several inputs as one (an `Input` to the commands): `frames()` reads them all and
    gives the merged timeline; `capture`, `log` and `dissector` are None (no one file's
    bytes or packets are the timeline's: -V, -x and -w read one capture)."""

    capture = None
    log = None
    dissector = None
    reader = None

    def __init__(self, paths: Sequence[str], inputs: Sequence[Input], given: dict[str, float]):
        self.paths = paths
        self.inputs = inputs
        self.given = given
        self.path = paths[0]
        self.fmt = next((i.fmt for i in inputs if i.fmt), "")
        self.merged: Merged | None = None

    @property
    def source(self) -> str:
        return "capture" if any(i.capture is not None for i in self.inputs) else "log"

    @property
    def file(self) -> _Files:
        return _Files(self.inputs)

    def frames(
        self,
        show_secrets: bool = False,
        redact_bodies: bool = False,
        messages: bool = True,
        keylog: Any = None,
        wrap: Callable[[Any], Any] | None = None,
        carriers: bool = False,
        retire: bool = False,
    ) -> Iterator[Frame]:
        from amqpscope.merge.timeline import CAPTURE, LOG, Part, merge

        parts = []
        for n, each in enumerate(self.inputs):
            records = list(
                each.frames(show_secrets, redact_bodies, messages, keylog=keylog, retire=retire)
            )
            kind = CAPTURE if each.capture is not None else LOG
            parts.append(Part(letter(n), each.path, kind, records))
            # kept to the end: out of every later collection (`steady_gc`'s freeze), or each
            # full one walks them all again (bench/merge.py, compiled: pairing 100k frames took
            # 0.11 s of collections for 0.01 s of work)
            gc.freeze()
        merged = self.merged = merge(parts, self.given)
        return iter(merged.frames)

    @property
    def findings(self) -> list[Finding]:
        """Every input's, each saying which input it is about."""
        import dataclasses

        from amqpscope.findings import finding

        out: list[Finding] = []
        if self.merged is not None:  # each input's clock, first
            out.extend(
                finding("merge.clock-offset", line) for line in said(self.merged, self.inputs)
            )
        for n, each in enumerate(self.inputs):
            name = f"input {letter(n)} ({os.path.basename(each.path)})"
            out.extend(
                dataclasses.replace(f, message=f"{name}: {f.message}") for f in each.findings
            )
        return out


def said(merged: Merged, inputs: Sequence[Input]) -> list[str]:
    """One line per input: its clock offset (estimate and bound) and its connections
    matched."""
    lines = []
    for n, each in enumerate(inputs):
        name = letter(n)
        offset = merged.offsets[name]
        matched = [m for m in merged.matches if m.input == name]
        text = f"input {name} ({os.path.basename(each.path)}): {offset.text()}"
        if name in merged.dated:
            text += f"; dated from input {letter(0)} (+{merged.dated[name] / 86400:.0f} days)"
        if matched:
            by = "ends" if matched[0].how == "ends" else "content"
            many = "s" if len(matched) > 1 else ""
            text += f"; {len(matched)} connection{many} matched by {by}"
        lines.append(text)
    return lines


@contextlib.contextmanager
def open_merged(paths: Sequence[str], fmt: str | None) -> Iterator[MergedInput]:
    """The inputs at `paths`, open, as one (`fmt` for those that are not captures)."""
    from amqpscope.cli.inputs import open_input

    given = given_offsets(paths)
    with contextlib.ExitStack() as stack:
        inputs = []
        for path in paths:
            capture = _is_capture(path)
            wanted = None if fmt is None or capture else fmt
            try:
                inputs.append(stack.enter_context(open_input(path, wanted)))
            except CaptureError as exc:
                if capture:
                    raise
                # text that is no log: said as when several files had to be captures
                text = str(exc).replace("not a pcap or pcapng file,", "text, not a capture file,")
                raise CaptureError(text) from None
        yield MergedInput(paths, inputs, given)


__all__ = ["VANTAGE", "CaptureError", "MergedInput", "merge_options", "open_merged", "wanted_mode"]
