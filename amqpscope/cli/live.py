"""`amqpscope live`."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from amqpscope.cli.common import (
    Lines,
    complete_iface,
    display_options,
    fail,
    frame_options,
    guarded,
    load_keylog,
    main,
    make_console,
    report_findings,
    uncoloured,
)
from amqpscope.filter import FilterError, Selection
from amqpscope.render.lines import frame_ndjson


@main.command()
@click.argument("iface", metavar="IFACE", shell_complete=complete_iface)
@click.option(
    "-f",
    "bpf",
    metavar="BPF",
    default="tcp",
    show_default=True,
    help="Capture filter (tcpdump syntax), applied in the kernel.",
)
@click.option(
    "-w",
    "write",
    metavar="OUT.pcap",
    type=click.Path(dir_okay=False, path_type=str),
    help="Also write every captured packet to OUT.pcap (kept on Ctrl-C).",
)
@click.option(
    "--backend",
    type=click.Choice(["tcpdump", "dumpcap", "scapy", "pyshark"]),
    help="How to capture (default: tcpdump, else dumpcap, else scapy; pyshark is slow).",
)
@click.option(
    "--duration",
    type=click.FloatRange(min=0, min_open=True),
    metavar="S",
    help="Stop after S seconds.",
)
@click.option("--summary", "with_summary", is_flag=True, help="Print the summary at the end.")
@click.option(
    "--idle-timeout",
    type=click.FloatRange(min=1),
    default=600.0,
    show_default=True,
    metavar="S",
    help="Forget connections without a packet for S seconds.",
)
@frame_options
@display_options
@guarded
def live(
    iface: str,
    bpf: str,
    write: str | None,
    backend: str | None,
    duration: float | None,
    with_summary: bool,
    idle_timeout: float,
    as_json: bool,
    show_secrets: bool,
    expression: str | None,
    count: int | None,
    conns: tuple[int, ...],
    channels: tuple[int, ...],
    errors: bool,
    collapse: bool,
    body: bool,
    keylog: str | None,
    color: str,
    width: int | None,
    redact_bodies: bool = False,
) -> None:
    """Capture on IFACE and decode AMQP frames as they flow, until Ctrl-C, --duration or -c.

    \b
    Examples:
      amqpscope live lo -f 'tcp port 5672'
      amqpscope live eth0 --json -w session.pcap --duration 60
      amqpscope live lo --errors --summary
    Needs root or CAP_NET_RAW. Kernel and amqpscope drops are reported on stderr at the end.
    """
    import signal
    import time

    from amqpscope.capture.live import LiveCapture, LiveError
    from amqpscope.live_pipeline import LivePipeline

    try:
        selection = Selection(expression, conns, channels, errors, None, None)
    except FilterError as exc:
        fail(f"-Y: {exc}", 2)
    try:
        capture = LiveCapture(iface, bpf, backend, write)
        capture.start()
    except LiveError as exc:
        fail(str(exc), exc.code)
    stopped: list[int] = []

    def on_signal(signum: int, _frame: Any) -> None:
        if stopped:  # a second Ctrl-C: give up at once
            raise KeyboardInterrupt
        stopped.append(signum)
        capture.stop()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        click.echo(f"amqpscope: {capture.describe()}", err=True)
        pipeline = LivePipeline(
            show_secrets, idle_timeout, journeys=with_summary, redact_bodies=redact_bodies
        )
        pipeline.dissector.context.keylog = load_keylog(keylog)  # re-read as the client appends
        out = sys.stdout
        lines = Lines()
        timeline = None
        console = make_console(color, width)
        if not as_json:
            from amqpscope.render.timeline import Timeline

            plain = width is None and uncoloured(color)  # rich would colour and cut nothing
            timeline = Timeline(  # flushed per line: a line shows as its frame arrives
                console,
                collapse,
                body,
                fit=True if width else None,
                out=out if plain else None,
                flush=True,
            )
        shown = 0
        first_ts: float | None = None

        def show(frames: list[Any]) -> bool:
            """Print what the filters accept; True once -c is reached."""
            nonlocal shown, first_ts
            for frame in frames:
                if first_ts is None:
                    first_ts = frame.ts
                if not selection.accepts(frame, first_ts):
                    continue
                if timeline is None:
                    lines.write(frame_ndjson(frame))
                else:
                    timeline.frame(frame)
                shown += 1
                if count is not None and shown >= count:
                    return True
            if frames and timeline is None:
                lines.flush()
            return False

        deadline = time.monotonic() + duration if duration else None
        last_tick = time.monotonic()
        full = False
        for pkt in capture.packets():
            if pkt is not None:
                frames = pipeline.feed(pkt)
                if frames and show(frames):
                    full = True
                    break
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                capture.stop()
            if now - last_tick >= 1.0:
                last_tick = now
                if show(pipeline.tick(time.time())):
                    full = True
                    break
        capture.stop()
        frames = pipeline.finish()
        if not full:
            show(frames)
        if timeline is not None:
            timeline.finish()
        lines.flush()
        if with_summary:
            if as_json:
                out.write(json.dumps({"summary": pipeline.summary()}, ensure_ascii=False) + "\n")
            else:
                from amqpscope.render.summary import print_summary

                print_summary(pipeline.summary(), console)
            out.flush()
    finally:
        stats = capture.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    report_findings(pipeline.findings)
    if pipeline.findings_dropped:
        click.echo(f"amqpscope: ... and {pipeline.findings_dropped} findings not kept", err=True)
    click.echo(f"amqpscope: {stats.line()}", err=True)
    if capture.error:
        fail(f"capture ended: {capture.error}")
