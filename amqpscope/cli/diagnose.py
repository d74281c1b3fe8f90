"""`amqpscope diagnose`: the answer to the question a user came with, and the frames proving it."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click

from amqpscope.capture.pipe import STDIN
from amqpscope.cli.common import (
    display_options,
    guarded,
    keylog_option,
    load_keylog,
    main,
    make_console,
    no_amqp_lines,
    progress,
    replace_unencodable,
    report_findings,
    retiring,
    steady_gc,
    uncoloured,
    window_options,
)
from amqpscope.cli.inputs import files_argument, format_option, open_input, shown_name
from amqpscope.diagnose import Diagnoser, Diagnosis
from amqpscope.diagnose.causes import DUPLICATES_LATER
from amqpscope.diagnose.model import ranked
from amqpscope.track.tracker import ConnTracker, Tracker

if TYPE_CHECKING:
    from amqpscope.codec.frames import Frame


def selected(
    diagnoses: list[Diagnosis],
    conns: tuple[int, ...],
    start: float | None,
    stop: float | None,
    first_ts: float | None,
) -> list[Diagnosis]:
    """The diagnoses of the chosen connections that overlap [start, stop] (relative seconds)."""
    out = []
    for diagnosis in diagnoses:
        if conns and diagnosis.conn not in conns:
            continue
        if diagnosis.start is not None and first_ts is not None:
            begins = diagnosis.start - first_ts
            if stop is not None and begins > stop:
                continue
            if start is not None and begins + diagnosis.duration < start:
                continue
        out.append(diagnosis)
    return out


def evidence_frames(
    files: tuple[str, ...], fmt: str | None, keylog: str | None, wanted: set[int]
) -> dict[int, Frame]:
    """The evidence frames, from a second read of FILE (tracked again, so each carries its
    findings as `read` shows it). Standard input cannot be read twice: nothing then."""
    if not wanted or STDIN in files:
        return {}
    found: dict[int, Frame] = {}
    last = max(wanted)
    retire = retiring()
    with open_input(files, fmt) as source:
        tracker = Tracker(journeys=False, retire=retire, source=source.source)
        for frame in source.frames(keylog=load_keylog(keylog), retire=retire):
            tracker.feed(frame)
            if frame.number in wanted:
                found[frame.number] = frame
            if frame.number >= last:
                break
    return found


def _diagnoses(
    diagnoser: Diagnoser, tracker: Tracker, retired: list[tuple[int, list[Diagnosis]]]
) -> list[Diagnosis]:
    """`Diagnoser.diagnoses`, the retired connections' put back in the order of their first
    frames (the ranking keeps that order among equals)."""
    if not retired:
        return diagnoser.diagnoses(tracker)
    live = [
        (tracker.order[conn], diagnoser.connection(t)) for conn, t in tracker.connections.items()
    ]
    out: list[Diagnosis] = list(diagnoser.kept)
    for _, diagnosed in sorted(retired + live, key=lambda entry: entry[0]):
        out.extend(diagnosed)
    return ranked(out)


@main.command()
@files_argument
@click.option("--json", "as_json", is_flag=True, help='{"diagnoses": [...]} as one document.')
@click.option("--conn", "conns", multiple=True, type=int, metavar="N", help="Only connection N.")
@window_options
@keylog_option
@format_option
@display_options
@guarded
def diagnose(
    files: tuple[str, ...],
    as_json: bool,
    conns: tuple[int, ...],
    start: float | None,
    stop: float | None,
    keylog: str | None,
    color: str,
    width: int | None,
    fmt: str | None = None,
) -> None:
    """What went wrong in a capture (or a frame-trace log), most severe and longest first,
    with the frames that prove it: stalled consumers, credit starvation, closes and their
    causes, unacked or unconfirmed messages, blocked publishers, missed heartbeats, protocol
    violations.

    \b
    Examples:
      amqpscope diagnose capture.pcap
      amqpscope diagnose capture.pcap --json | jq '.diagnoses[] | .title'
      amqpscope read capture.pcap --around 48 --context 5     (look around a diagnosis's frame)
      amqpscope diagnose ring_*.pcapng    (a ring buffer's files, read as one capture)
    """
    diagnoser = Diagnoser()
    # connections whose TCP ended: diagnosed then, their state and evidence dropped; by order
    retired: list[tuple[int, list[Diagnosis]]] = []

    # those that ended with deliveries unacked or unsettled: diagnosed at the end, since the
    # capture may show those messages delivered again later (on another connection)
    waiting: list[tuple[int, ConnTracker]] = []

    def retire(order: int, conn: ConnTracker, _layers: object, _found: int) -> None:
        diagnosed = diagnoser.connection(conn)
        if any(d.code in DUPLICATES_LATER for d in diagnosed):
            waiting.append((order, conn))
            return
        if diagnosed:
            retired.append((order, diagnosed))
        diagnoser.evidence.forget(conn.conn)

    tracker = Tracker(retire=retiring(), on_retire=retire)
    steady_gc()
    with open_input(files, fmt) as source, progress(source.file, not as_json) as bar:
        tracker.source = source.source  # before its first frame: findings say "the log ended"
        wrap = bar.wrap if bar is not None and source.capture is not None else None
        # messages decoded: a redelivery is linked to its earlier delivery by message-id or body
        for frame in source.frames(keylog=load_keylog(keylog), wrap=wrap, retire=tracker.retire):
            tracker.feed(frame)
            diagnoser.feed(frame)
        tracker.finish()
        retired.extend((order, diagnoser.connection(conn)) for order, conn in waiting)
        if bar is not None:
            bar.clear()
        # no time to show (a log without timestamps): diagnoses say where, not when
        first_ts = diagnoser.evidence.first_ts if diagnoser.evidence.timed else None
        found = selected(_diagnoses(diagnoser, tracker, retired), conns, start, stop, first_ts)
        # a capture with no AMQP read (another port's traffic, TLS without its keys) is not one
        # where "nothing looks wrong": say what it held instead, as read and summary do
        others = []
        if not found and source.dissector is not None:
            others = no_amqp_lines(source.dissector, shown_name(files))
        if as_json:
            document = {"diagnoses": [d.to_json() for d in found]}
            sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
            for text in others:
                click.echo(f"amqpscope: {text}", err=True)
        elif others:
            sys.stdout.write("".join(text + "\n" for text in others))
        else:
            from amqpscope.render.diagnoses import write_diagnoses
            from amqpscope.render.timeline import Timeline

            wanted = {number for d in found for number in d.evidence}
            frames = evidence_frames(files, fmt, keylog, wanted)
            if uncoloured(color):
                replace_unencodable()

            def timeline() -> Timeline:
                if width is None and uncoloured(color):
                    return Timeline(lambda: make_console(color, width), out=sys.stdout)
                return Timeline(make_console(color, width), fit=True if width else None)

            what = "this capture" if source.capture is not None else "this log"
            if conns or start is not None or stop is not None:
                what = "what was selected of " + what
            write_diagnoses(found, frames, first_ts, sys.stdout, timeline, what)
        sys.stdout.flush()
        report_findings(source.findings)
