"""`amqpscope export`."""

from __future__ import annotations

import click

from amqpscope.capture.files import open_capture
from amqpscope.cli.common import (
    guarded,
    keylog_option,
    load_keylog,
    main,
    progress,
    redact_bodies_option,
    report_findings,
    steady_gc,
)
from amqpscope.diagnose import Diagnoser
from amqpscope.dissect import Dissector
from amqpscope.track.tracker import Tracker


@main.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=str))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True, allow_dash=True, path_type=str),
    default="-",
    show_default=True,
    help="Where to write it (- for stdout).",
)
@click.option("--ndjson", is_flag=True, help="One record per line instead of one document.")
@click.option("--show-secrets", is_flag=True, help="Include credentials instead of redacting.")
@redact_bodies_option
@keylog_option
@guarded
def export(
    file: str,
    output: str,
    ndjson: bool,
    show_secrets: bool,
    keylog: str | None,
    redact_bodies: bool = False,
) -> None:
    """Everything about FILE as JSON: capture, frames, connections, findings, diagnoses.

    \b
    The document follows `amqpscope schema export`; with --ndjson each line is a record
    with a "record" key (capture, frame, connection, finding, diagnosis, summary).

    \b
    Examples:
      amqpscope export capture.pcap -o capture.json
      amqpscope export capture.pcap --ndjson | jq 'select(.record == "connection")'
    """
    from amqpscope.render.export import ExportWriter, capture_metadata

    dissector = Dissector(show_secrets=show_secrets, redact_bodies=redact_bodies)
    tracker = Tracker()
    steady_gc()
    with (
        open_capture(file) as capture,
        click.open_file(output, "w", encoding="utf-8") as out,
        progress(capture, output != "-") as bar,
    ):
        dissector.context.keylog = load_keylog(keylog)
        writer = ExportWriter(out, capture_metadata(capture, file), ndjson)
        diagnoser = Diagnoser()
        for frame in dissector.run(bar.wrap(capture) if bar else capture):
            tracker.feed(frame)
            diagnoser.feed(frame)
            writer.frame(frame)
        tracker.finish()
        unplaced = [f.to_json() for f in capture.findings + dissector.findings]
        diagnoses = [d.to_json() for d in diagnoser.diagnoses(tracker)]
        writer.close(tracker.summary(), unplaced, diagnoses)
        if bar is not None:
            bar.clear()
        report_findings(capture.findings + dissector.findings)
