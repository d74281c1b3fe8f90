"""`amqpscope summary`."""

from __future__ import annotations

import json
import sys

import click

from amqpscope.capture.files import open_capture
from amqpscope.cli.common import (
    PIPED_WIDTH,
    display_options,
    guarded,
    keylog_option,
    load_keylog,
    main,
    make_console,
    progress,
    replace_unencodable,
    report_findings,
    steady_gc,
    uncoloured,
)
from amqpscope.dissect import Dissector
from amqpscope.track.tracker import Tracker


@main.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=str))
@click.option("--json", "as_json", is_flag=True, help="The summary as one JSON document.")
@keylog_option
@display_options
@guarded
def summary(file: str, as_json: bool, keylog: str | None, color: str, width: int | None) -> None:
    """Per connection: sessions and links, or channels and consumers, with what went wrong.

    \b
    Examples:
      amqpscope summary capture.pcap
      amqpscope summary capture.pcap --json | jq '.connections[].close'
      zcat capture.pcap.gz | amqpscope summary -
    """
    dissector = Dissector(messages=False)  # the summary needs no message decoded
    tracker = Tracker()
    steady_gc()
    with open_capture(file) as capture, progress(capture, not as_json) as bar:
        dissector.context.keylog = load_keylog(keylog)
        for frame in dissector.run(bar.wrap(capture) if bar else capture):
            tracker.feed(frame)
        tracker.finish()
        result = tracker.summary()
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
            if text is not None:
                sys.stdout.write(text)
            else:
                print_summary(result, make_console(color, width))
        sys.stdout.flush()
        report_findings(capture.findings + dissector.findings)
