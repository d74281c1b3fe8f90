"""`amqpscope metrics`: a capture's (or a trace log's) Prometheus families as OpenMetrics with
timestamps, for `promtool tsdb create-blocks-from openmetrics`."""

from __future__ import annotations

import sys

import click

from amqpscope.cli.common import (
    guarded,
    keylog_option,
    load_keylog,
    main,
    metrics_options,
    report_findings,
)
from amqpscope.cli.inputs import files_argument, format_option, open_input


@main.command()
@files_argument
@click.option(
    "--interval",
    type=click.FloatRange(min=0.000001),
    default=1.0,
    show_default=True,
    metavar="SECONDS",
    help="At most one sample per series per this much capture time (plus the last).",
)
@metrics_options
@keylog_option
@format_option
@guarded
def metrics(
    files: tuple[str, ...],
    interval: float,
    metrics_max_names: int,
    metrics_labels: tuple[str, ...],
    keylog: str | None,
    fmt: str | None = None,
) -> None:
    """The capture's metrics (the families `live --metrics` serves) as OpenMetrics with
    timestamps: load them into Prometheus after the fact.

    \b
    Examples:
      amqpscope metrics capture.pcap > capture.om
      promtool tsdb create-blocks-from openmetrics capture.om ./data
      amqpscope metrics client.log        (a frame-trace log)
    """
    from amqpscope.metrics.openmetrics import lines
    from amqpscope.metrics.sampler import Sampler

    conn_labels = "conn" in metrics_labels
    chosen = None
    if "-" not in files:  # a file can be read twice: its busiest names, then the metrics
        first = Sampler(interval=float("inf"), max_names=sys.maxsize)
        with open_input(files, fmt) as source:
            first.tracker.source = source.source
            for frame in source.frames(messages=True, keylog=load_keylog(keylog), retire=True):
                first.feed(frame)
            first.finish()
        chosen = first.busiest(metrics_max_names)
    sampler = Sampler(
        interval=interval, max_names=metrics_max_names, conn_labels=conn_labels, chosen=chosen
    )
    with open_input(files, fmt) as source:
        sampler.tracker.source = source.source
        for frame in source.frames(messages=True, keylog=load_keylog(keylog), retire=True):
            sampler.feed(frame)
        sampler.finish()
        # a log's lines may have no time (Proton's PN_TRACE_FRM): then ts is 0.0 on every frame
        timed = sampler.last_ts is not None
        if not timed:
            click.echo(
                "amqpscope: the frames have no times: the totals are written once, without"
                " timestamps, and no durations",
                err=True,
            )
        write = sys.stdout.write
        for line in lines(sampler.samples, conn_labels, timed):
            write(line + "\n")
        sys.stdout.flush()
        report_findings(source.findings)
