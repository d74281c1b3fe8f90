"""`amqpscope report`: one self-contained HTML file of a capture or frame-trace log."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import click

from amqpscope.cli.common import (
    check_output,
    fail,
    force_option,
    guarded,
    keylog_option,
    load_keylog,
    main,
    redact_bodies_option,
    report_findings,
    selection_words,
    steady_gc,
    window_options,
)
from amqpscope.cli.inputs import files_argument, format_option, open_input, shown_name
from amqpscope.cli.inspect import Inspect
from amqpscope.diagnose import Diagnoser
from amqpscope.filter import FilterError, Selection, compile_filter
from amqpscope.render.tree import tree_json

if TYPE_CHECKING:
    from amqpscope.codec.frames import Frame


@main.command()
@files_argument
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False, allow_dash=True, path_type=str),
    help="The HTML file to write (- for standard output).",
)
@force_option
@click.option(
    "--show-secrets",
    is_flag=True,
    help="Put credentials (SASL responses, connection.start-ok) in the report, not redacted.",
)
@redact_bodies_option
@click.option(
    "-Y", "--filter", "expression", metavar="EXPR", help="Display filter for the frame list."
)
@click.option("--conn", "conns", type=int, multiple=True, help="Only connection N (repeatable).")
@click.option("--channel", "channels", type=int, multiple=True, help="Only channel N (repeatable).")
@click.option("--link", "links", multiple=True, metavar="NAME", help="Only this 1.0 link's frames.")
@click.option("--queue", "queues", multiple=True, metavar="NAME", help="Only this queue's frames.")
@window_options
@keylog_option
@format_option
@guarded
def report(
    files: tuple[str, ...],
    output: str,
    show_secrets: bool,
    redact_bodies: bool,
    expression: str | None,
    conns: tuple[int, ...],
    channels: tuple[int, ...],
    links: tuple[str, ...],
    queues: tuple[str, ...],
    start: float | None,
    stop: float | None,
    keylog: str | None,
    fmt: str | None = None,
    force: bool = False,
) -> None:
    """Write one HTML file of a capture or frame-trace log FILE (- for standard input): overview
    and diagnoses, a
    sequence diagram per connection, plots per link or channel, searchable tables. It opens
    from disk and fetches nothing; credentials stay out unless --show-secrets.

    \b
    Examples:
      amqpscope report capture.pcap -o report.html
      amqpscope report capture.pcap -o report.html -Y 'findings' --redact-bodies
      amqpscope report capture.pcap -o report.html --conn 2 --from 10 --to 20
      PN_TRACE_FRM=1 ./app 2> trace.log; amqpscope report trace.log -o report.html
    """
    from amqpscope.render.html import report_data
    from amqpscope.render.html.page import ReportError, bokeh_js, render_page
    from amqpscope.writing.outputs import open_new

    check_output("-o", output, (*files, keylog), force)  # before a long read, not after it

    try:
        bokeh_js()  # before reading a capture that may take a while: is the extra installed?
    except ReportError as exc:
        fail(str(exc), 1)
    try:
        predicate = compile_filter(expression) if expression else None
        scope = Selection(None, conns, channels, False, start, stop, links, queues)
    except FilterError as exc:
        fail(f"-Y: {exc}", 2)
    scoped = bool(conns or channels or links or queues or start is not None or stop is not None)
    facts = {
        "file": os.path.basename(shown_name(files)) if files != ("-",) else "standard input",
        "filter": expression,
        "show-secrets": show_secrets,
        "redact-bodies": redact_bodies,
    }
    steady_gc()
    with open_input(files, fmt) as source:
        frames = source.frames(
            show_secrets, redact_bodies, keylog=load_keylog(keylog), carriers=True
        )
        tree = None
        if source.dissector is not None:  # a capture: each kept frame's -V tree
            inspect = Inspect(source.dissector, True, False, show_secrets, None, redact_bodies)

            def tree(frame: Frame, continues: bool) -> list[dict[str, Any]]:
                return tree_json(inspect.nodes(frame, continues)[0], show_secrets)

        diagnoser = Diagnoser()

        def tracked(frames: Iterator[Frame]) -> Iterator[Frame]:
            """The frames on to the report; each to the diagnoser once the report's tracker
            has placed its findings on it (when the next frame is asked for)."""
            for frame in frames:
                yield frame
                diagnoser.feed(frame)

        data = report_data(
            tracked(frames),
            facts,
            accepts=predicate,
            loose=lambda: source.findings,
            keeps=scope.accepts if scoped else None,
            diagnose=lambda tracker: [d.to_json() for d in diagnoser.diagnoses(tracker)],
            tree=tree,
        )
        if source.dissector is not None:
            data["facts"]["packets"] = source.dissector.packets
        else:
            data["facts"]["log-format"] = source.fmt
        findings = source.findings
    try:
        page = render_page(data)
    except ReportError as exc:
        fail(str(exc), 1)
    try:
        if output == "-":  # as export -o - and read -w -, not a file named "-"
            sys.stdout.buffer.write(page)
            sys.stdout.flush()
        else:
            with open_new(output, force) as out:
                out.write(page)
    except FileExistsError:
        fail(f"-o {output}: that file exists; --force overwrites it", 2)
    except OSError as exc:
        fail(f"cannot write {output}: {exc.strerror or exc}", 1)
    report_findings(findings)
    if (scoped or predicate is not None) and not data["facts"].get("matched"):
        words = selection_words(expression, conns, channels, False, links, queues, start, stop)
        frames = data["facts"].get("frames", 0)
        said = f"amqpscope: no frame matched {words} (of {frames} read): the report lists none"
        click.echo(said, err=True)
