"""`amqpscope read`."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import click

from amqpscope.capture.pipe import STDIN
from amqpscope.cli.common import (
    Lines,
    display_options,
    fail,
    force_option,
    frame_options,
    guarded,
    load_keylog,
    main,
    make_console,
    no_amqp_lines,
    progress,
    replace_unencodable,
    report_findings,
    retiring,
    selection_words,
    steady_gc,
    uncoloured,
    window_options,
)
from amqpscope.cli.inputs import files_argument, format_option, open_input, shown_name
from amqpscope.cli.inspect import Inspect
from amqpscope.filter import FilterError, Selection
from amqpscope.findings import Finding
from amqpscope.render.lines import frame_ndjson, ndjson_all
from amqpscope.track.tracker import Tracker

if TYPE_CHECKING:
    from amqpscope.codec.frames import Frame


def frame_numbers(value: str | None) -> frozenset[int] | None:
    """--frames 12,48,52 (also ranges: 40-45): the frame numbers, or a usage error."""
    if value is None:
        return None
    numbers: set[int] = set()
    for part in value.split(","):
        first, _, last = part.strip().partition("-")
        try:
            low = int(first)
            high = int(last) if last else low
        except ValueError:
            raise click.BadParameter(f"{part.strip()!r} is not a frame number") from None
        if low < 1 or high < low or high - low > 1_000_000:
            raise click.BadParameter(f"{part.strip()!r} is not a frame number or range")
        numbers.update(range(low, high + 1))
    return frozenset(numbers)


@main.command()
@files_argument
@frame_options
@click.option("--link", "links", multiple=True, metavar="NAME", help="Only this 1.0 link's frames.")
@click.option(
    "--queue", "queues", multiple=True, metavar="Q", help="Only frames concerning queue Q."
)
@window_options
@click.option(
    "--frames",
    "numbers",
    callback=lambda _ctx, _param, value: frame_numbers(value),
    metavar="N,N,...",
    help="Only these frames (a diagnosis's evidence).",
)
@click.option("--around", type=click.IntRange(min=1), metavar="FRAME", help="Frames around FRAME.")
@click.option(
    "--context",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    metavar="N",
    help="With --around: N frames either side.",
)
@click.option(
    "-V",
    "--verbose",
    "tree",
    is_flag=True,
    help="Each frame's detail tree: every field, its bytes.",
)
@click.option("-x", "--hex", "dump", is_flag=True, help="Each frame's bytes as hex and ASCII.")
@click.option(
    "-w",
    "--write",
    "out",
    metavar="OUT",
    help="Write the packets of the selected frames (and their connections' handshakes) to OUT "
    "(pcap, or pcapng for a pcapng input or a .pcapng name; - for standard output). "
    "Passwords in it (SASL, connection.start-ok) are masked unless --show-secrets.",
)
@force_option
@format_option
@display_options
@guarded
def read(
    files: tuple[str, ...],
    as_json: bool,
    show_secrets: bool,
    expression: str | None,
    count: int | None,
    conns: tuple[int, ...],
    channels: tuple[int, ...],
    errors: bool,
    links: tuple[str, ...],
    queues: tuple[str, ...],
    start: float | None,
    stop: float | None,
    numbers: frozenset[int] | None,
    around: int | None,
    context: int,
    collapse: bool,
    body: bool,
    keylog: str | None,
    color: str,
    width: int | None,
    redact_bodies: bool = False,
    tree: bool = False,
    dump: bool = False,
    out: str | None = None,
    fmt: str | None = None,
    force: bool = False,
) -> None:
    """Decode every AMQP frame of a pcap or pcapng FILE (- for standard input), in capture order,
    or read the frames of a frame-trace log (Proton's PN_TRACE_FRM=1 output, gzip'd or not).
    Several FILEs are the pieces of one rotated capture (tcpdump -G/-C, dumpcap's ring buffer),
    read as one in the order of their first packets: connections run on across them.

    \b
    Examples:
      amqpscope read capture.pcap
      amqpscope read capture.pcap --json | jq .name
      tcpdump -i lo -U -w - 'tcp port 5672' | amqpscope read -
      amqpscope read capture.pcap -Y 'name == "transfer" and fields.settled == false'
      amqpscope read capture.pcap --errors --conn 2
      amqpscope read capture.pcap -c 3 -V -x
      amqpscope read big.pcapng --conn 7 -w conn7.pcapng
      amqpscope read capture.pcap --frames 12,48,52 --around 60 --context 3
      amqpscope read cap-*.pcap                  (the files of tcpdump -G 60 -w 'cap-%s.pcap')

    \b
    Display filters (-Y) test the frame record that --json prints:
      paths     name, kind, channel, src, fields.delivery-tag, findings[0].code
      compare   == != < > <= >= contains matches (a regular expression)
      combine   and or not ( ), also && || !
      a path alone is true when present and not empty; comparisons with absent paths are false
    """
    try:
        selection = Selection(expression, conns, channels, errors, start, stop, links, queues)
    except FilterError as exc:
        fail(f"-Y: {exc}", 2)
    # without a selecting option every frame is shown: the selection is not asked per frame
    choosy = bool(expression or conns or channels or errors or links or queues)
    choosy = choosy or start is not None or stop is not None
    wanted = set(numbers or ())
    if around is not None:
        wanted.update(range(max(1, around - context), around + context + 1))
    last_wanted = max(wanted) if wanted else None
    if out is not None:
        from amqpscope.cli.write import write_cut

        # --conn alone cuts its connections whole; anything else chooses frames
        alone = bool(conns) and not (expression or channels or errors or links or queues)
        alone = alone and start is None and stop is None and count is None
        whole = frozenset(conns) if alone else frozenset()
        if len(files) > 1:
            from amqpscope.cli.merging import wanted_inputs
            from amqpscope.merge.kind import VANTAGE
            from amqpscope.sources import input_mode

            if input_mode(files, wanted_inputs()) == VANTAGE:
                fail(
                    "-w cuts one capture (or the pieces of one rotated capture); these files are"
                    " vantage points: cut each one (or --inputs rotated)",
                    2,
                )
        chosen: Callable[[Any, float], bool] = (
            selection.accepts if choosy else lambda _frame, _first: True
        )
        accepts: Callable[[Any, float], bool] = chosen
        if wanted:
            whole = frozenset()

            def accepts_wanted(frame: Frame, first: float) -> bool:
                return frame.number in wanted and chosen(frame, first)

            accepts = accepts_wanted
        write_cut(files, out, accepts, whole, show_secrets, keylog, count, force)
        return
    retire = retiring()  # each connection forgotten once its TCP ended
    tracker = Tracker(retire=retire, stats=False)  # `read` shows no summary
    lines = Lines(0 if files == (STDIN,) else Lines.CHUNK)
    timeline = None
    if not as_json:
        from amqpscope.render.timeline import Timeline

        if width is None and uncoloured(color):  # rich would colour and cut nothing: plain text
            replace_unencodable()
            # from a pipe (a capture still running), each line as its frame arrives
            timeline = Timeline(
                lambda: make_console(color, width),
                collapse,
                body,
                out=sys.stdout,
                flush=not lines.chunk,
                show_secrets=show_secrets,
            )
        else:
            timeline = Timeline(
                make_console(color, width),
                collapse,
                body,
                fit=True if width else None,
                flush=not lines.chunk,  # from a pipe, each line as its frame arrives
                show_secrets=show_secrets,
            )
    shown = 0
    last = 0  # the last frame's number, for a selection that matched none
    ended: list[Finding] = []
    steady_gc()
    with open_input(files, fmt) as source, progress(source.file, not as_json) as bar:
        tracker.source = source.source  # before its first frame: findings say "the log ended"
        if source.log is not None:  # which format it is read as (issue 42), --format or not
            how = "--format" if fmt is not None else "named by its content; --format overrides"
            click.echo(
                f"amqpscope: source: {source.path}: log format {source.fmt} ({how})", err=True
            )
        if (tree or dump) and source.capture is None:
            if source.log is None:  # several inputs merged: no one file's bytes are the timeline's
                fail("-V and -x show one capture's bytes; read one of the inputs (or --json)", 2)
            fail("-V and -x show a captured frame's bytes; a log has none (try --json)", 2)
        first_ts: float | None = None
        frames: Iterator[Frame] = source.frames(
            show_secrets,
            redact_bodies,
            keylog=load_keylog(keylog),
            wrap=bar.wrap if bar is not None and source.capture is not None else None,
            carriers=tree or dump,
            retire=retire,
        )
        inspect = None
        if (tree or dump) and source.dissector is not None:
            inspect = Inspect(source.dissector, tree, dump, show_secrets, timeline, redact_bodies)
            if timeline is not None:
                timeline.collapse = False  # each frame is shown with its detail
        # every frame shown, as its line alone: the loop below, compiled, leaving it none but
        # its end (-V/-x, --frames, --around, -c and the selections need the loop's checks)
        every = not choosy and count is None and inspect is None and not wanted
        if every and timeline is None and lines.chunk:
            ndjson_all(frames, tracker, lines.emit, lines.chunk)  # render.lines
        elif every and timeline is not None:
            # the timeline of every frame: its loop compiled too (render.timeline)
            from amqpscope.render.timeline import timeline_all

            if bar is not None:
                bar.before_draw = timeline.write_pending
            timeline_all(frames, tracker, timeline, bar.wrote if bar is not None else None)
        try:
            for frame in frames:
                last = frame.number
                tracker.feed(frame)  # state findings ride the frame that raised them
                if first_ts is None:
                    first_ts = frame.ts
                    if timeline is not None:
                        timeline.first_ts = first_ts  # times count from the first frame
                continues = inspect is not None and inspect.starts.continues(frame)
                if last_wanted is not None and frame.number not in wanted:
                    if frame.number > last_wanted:
                        break  # every frame asked for is shown
                    continue
                if choosy and not selection.accepts(frame, first_ts):
                    continue
                if timeline is None:
                    if inspect is not None and tree:
                        lines.write(inspect.ndjson(frame, continues))
                    else:
                        lines.write(frame_ndjson(frame))
                else:
                    if bar is not None:
                        bar.wrote()
                    timeline.frame(frame)
                    if inspect is not None:
                        inspect.show(frame, continues)
                shown += 1
                if count is not None and shown >= count:
                    break
            else:  # the whole capture was read: say what was left open at its end
                placed = len(tracker.findings)
                tracker.finish()
                ended = tracker.findings[placed:]
        except BaseException:  # interrupted: the lines made so far go out, whole
            with contextlib.suppress(Exception):
                lines.flush()
                if timeline is not None:
                    timeline.write_pending()
            raise
        if bar is not None:
            bar.clear()
        if timeline is not None:
            timeline.finish()
        lines.flush()
        sys.stdout.flush()  # the timeline before the findings, on a terminal showing both
        report_findings(source.findings + ended)
        held = []
        if not shown and count is None and source.dissector is not None:
            held = no_amqp_lines(source.dissector, shown_name(files))
            for text in held:
                click.echo(f"amqpscope: {text}", err=True)
        if not shown and not held and (choosy or wanted):
            words = selection_words(
                expression, conns, channels, errors, links, queues, start, stop, numbers, around
            )
            past = f"; the last frame is {last}" if wanted and min(wanted) > last else ""
            click.echo(f"amqpscope: no frame matched {words}{past}", err=True)
