"""`amqpscope summary`."""

from __future__ import annotations

import json
import sys

import click

from amqpscope.cli.common import (
    PIPED_WIDTH,
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
    steady_gc,
    uncoloured,
)
from amqpscope.cli.inputs import format_option, open_input
from amqpscope.track.tracker import Tracker


@main.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=str))
@click.option("--json", "as_json", is_flag=True, help="The summary as one JSON document.")
@keylog_option
@format_option
@display_options
@guarded
def summary(
    file: str,
    as_json: bool,
    keylog: str | None,
    color: str,
    width: int | None,
    fmt: str | None = None,
) -> None:
    """Per connection: sessions and links, or channels and consumers, with what went wrong.

    \b
    Examples:
      amqpscope summary capture.pcap
      amqpscope summary capture.pcap --json | jq '.connections[].close'
      zcat capture.pcap.gz | amqpscope summary -
      amqpscope summary client.log        (a frame-trace log)
    """
    tracker = Tracker()
    steady_gc()
    with open_input(file, fmt) as source, progress(source.file, not as_json) as bar:
        wrap = bar.wrap if bar is not None and source.capture is not None else None
        # the summary needs no message decoded
        for frame in source.frames(messages=False, keylog=load_keylog(keylog), wrap=wrap):
            tracker.feed(frame)
        tracker.finish()
        result = tracker.summary()
        others = []
        if source.dissector is not None and not result.get("undecoded"):
            others = no_amqp_lines(source.dissector, file)
        if bar is not None:
            bar.clear()
        if as_json:
            sys.stdout.write(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
        else:
            if width is None and not sys.stdout.isatty():
                width = PIPED_WIDTH  # piped: tables at their natural width, nothing cut
            from amqpscope.render.summary import print_summary, summary_text

            text = None
            if width is not None and uncoloured(color):  # rich would style nothing
                replace_unencodable()
                encoding = (getattr(sys.stdout, "encoding", None) or "utf-8").lower()
                text = summary_text(result, width, encoding)
            if others:  # instead of a bare "no findings": what the capture held
                sys.stdout.write("".join(line + "\n" for line in others))
            elif text is not None:
                sys.stdout.write(text)
            else:
                print_summary(result, make_console(color, width))
        sys.stdout.flush()
        report_findings(source.findings)
