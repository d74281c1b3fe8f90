"""`amqpscope export`."""

from __future__ import annotations

import click

from amqpscope.cli.common import (
    check_output,
    force_option,
    guarded,
    keylog_option,
    load_keylog,
    main,
    open_output,
    progress,
    redact_bodies_option,
    report_findings,
    steady_gc,
)
from amqpscope.cli.inputs import files_argument, format_option, open_input, shown_name
from amqpscope.diagnose import Diagnoser
from amqpscope.track.tracker import Tracker


@main.command()
@files_argument
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True, allow_dash=True, path_type=str),
    default="-",
    show_default=True,
    help="Where to write it (- for stdout).",
)
@force_option
@click.option("--ndjson", is_flag=True, help="One record per line instead of one document.")
@click.option(
    "--mermaid",
    is_flag=True,
    help="Instead: Markdown with a Mermaid sequenceDiagram per connection (GitHub renders it).",
)
@click.option(
    "--plantuml",
    is_flag=True,
    help="Instead: PlantUML, a sequence diagram per connection (`plantuml FILE` draws them).",
)
@click.option("--show-secrets", is_flag=True, help="Include credentials instead of redacting.")
@click.option(
    "--otlp",
    metavar="ENDPOINT",
    help="Instead: send the messages' spans, the error spans and the metrics over OTLP to "
    "ENDPOINT (HOST:PORT or grpc://HOST:PORT for gRPC, http://HOST:PORT for HTTP), at the "
    "capture's times (docs/guide/metrics.md).",
)
@redact_bodies_option
@keylog_option
@format_option
@guarded
def export(
    files: tuple[str, ...],
    output: str,
    ndjson: bool,
    show_secrets: bool,
    keylog: str | None,
    redact_bodies: bool = False,
    fmt: str | None = None,
    force: bool = False,
    mermaid: bool = False,
    plantuml: bool = False,
    otlp: str | None = None,
) -> None:
    """Everything about FILE (a capture or a frame-trace log) as JSON: capture, frames,
    connections, findings, diagnoses.

    \b
    The document follows `amqpscope schema export`; with --ndjson each line is a record
    with a "record" key (capture, frame, connection, finding, diagnosis, summary),
    following `amqpscope schema export-ndjson`.

    \b
    Examples:
      amqpscope export capture.pcap -o capture.json
      amqpscope export capture.pcap --ndjson | jq 'select(.record == "connection")'
      amqpscope export capture.pcap --mermaid -o diagrams.md   (paste into an issue)
      amqpscope export capture.pcap --plantuml -o diagrams.puml
      amqpscope export capture.pcap --otlp 127.0.0.1:4317      (spans to a collector)
    """
    if sum((mermaid, plantuml, ndjson)) > 1:
        raise click.UsageError("--mermaid, --plantuml and --ndjson: choose one")
    if otlp is not None:
        if mermaid or plantuml or ndjson:
            raise click.UsageError(
                "--otlp sends instead of writing: not with --mermaid, --plantuml or --ndjson"
            )
        from amqpscope.cli.otlp import export_otlp

        export_otlp(files, otlp, fmt, keylog)
        return
    check_output("-o", output, (*files, keylog), force)
    if mermaid or plantuml:
        _diagrams(files, output, force, show_secrets, redact_bodies, keylog, fmt, plantuml)
        return
    from amqpscope.render.export import ExportWriter, capture_metadata

    tracker = Tracker()
    steady_gc()
    with (
        open_input(files, fmt) as source,
        open_output(output, force) as out,
        progress(source.file, output != "-") as bar,
    ):
        tracker.source = source.source  # before its first frame: findings say "the log ended"
        if source.capture is not None:
            metadata = capture_metadata(source.capture, shown_name(files))
        else:
            compressed = source.log.compressed if source.log is not None else False
            metadata = {"file": files[0], "format": "log", "log-format": source.fmt}
            metadata["compressed"] = compressed
        writer = ExportWriter(out, metadata, ndjson)
        diagnoser = Diagnoser()
        wrap = bar.wrap if bar is not None and source.capture is not None else None
        for frame in source.frames(
            show_secrets, redact_bodies, keylog=load_keylog(keylog), wrap=wrap
        ):
            tracker.feed(frame)
            diagnoser.feed(frame)
            writer.frame(frame)
        tracker.finish()
        unplaced = [f.to_json() for f in source.findings]
        diagnoses = [d.to_json() for d in diagnoser.diagnoses(tracker)]
        writer.close(tracker.summary(), unplaced, diagnoses)
        if bar is not None:
            bar.clear()
        report_findings(source.findings)


def _diagrams(
    files: tuple[str, ...],
    output: str,
    force: bool,
    show_secrets: bool,
    redact_bodies: bool,
    keylog: str | None,
    fmt: str | None,
    plantuml: bool = False,
) -> None:
    """`export --mermaid` (Markdown) or `--plantuml`: each connection's frames as a sequence
    diagram."""
    from amqpscope.render import mermaid as mermaid_diagrams
    from amqpscope.render import plantuml as plantuml_diagrams
    from amqpscope.render.sequence import ConnectionDiagrams

    module = plantuml_diagrams if plantuml else mermaid_diagrams
    diagrams = ConnectionDiagrams(module.GRAMMAR)
    with open_input(files, fmt) as source, open_output(output, force) as out:
        for frame in source.frames(show_secrets, redact_bodies, keylog=load_keylog(keylog)):
            diagrams.feed(frame)
        out.write(diagrams.text())
        report_findings(source.findings)
