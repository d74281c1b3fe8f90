"""`amqpscope spark`."""

from __future__ import annotations

import click

from amqpscope.cli.common import (
    check_keylog,
    complete_dirs,
    complete_files,
    fail,
    guarded,
    keylog_option,
    main,
    redact_bodies_option,
)


@main.command()
@click.argument(
    "inputs", nargs=-1, required=True, metavar="INPUT...", shell_complete=complete_files
)
@click.option(
    "--out",
    required=True,
    metavar="DIR",
    shell_complete=complete_dirs,
    help="Where the Parquet tables go (any URI).",
)
@click.option("--master", metavar="URL", help="Spark master (default: local[*]; spark-submit's).")
@click.option("--partitions", type=click.IntRange(min=1), help="Decode tasks (default: by size).")
@click.option("--report", is_flag=True, help="Then print cross-capture aggregates.")
@click.option("--show-secrets", is_flag=True, help="Keep credentials (default: redacted).")
@redact_bodies_option
@keylog_option
@guarded
def spark(
    inputs: tuple[str, ...],
    out: str,
    master: str | None,
    partitions: int | None,
    report: bool,
    show_secrets: bool = False,
    redact_bodies: bool = False,
    keylog: str | None = None,
) -> None:
    """Decode folders of captures on Spark into Parquet tables (frames, deliveries, links,
    channels, connections, findings); connections cut by file rotation are stitched.

    \b
    Examples:
      amqpscope spark captures/ --out tables/
      amqpscope spark 'ring/cap.pcap*' --out tables/ --master local[4] --report
      amqpscope spark hdfs:///captures/2024-05-01/ --out hdfs:///amqp/ --master yarn
    See docs/spark.md (needs the [spark] extra and Java).
    """
    check_keylog(keylog)
    from amqpscope.spark import spark as job  # pyspark only when this command runs

    why = job.missing()
    if why:
        fail(why)
    try:
        job.run(
            list(inputs),
            out,
            master,
            partitions,
            report,
            progress=lambda text: click.echo(f"amqpscope: {text}", err=True),
            show_secrets=show_secrets,
            redact_bodies=redact_bodies,
            keylog=keylog,
        )
    except job.PipelineError as exc:
        fail(str(exc))
