"""`amqpscope live`."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from amqpscope.cli.common import (
    PIPED_WIDTH,
    Lines,
    check_output,
    complete_iface,
    display_options,
    fail,
    force_option,
    frame_options,
    guarded,
    load_keylog,
    main,
    make_console,
    metrics_options,
    report_findings,
    uncoloured,
)
from amqpscope.filter import FilterError, Selection
from amqpscope.render.lines import frame_ndjson, safe

#: --json: written at least this often (seconds) while packets keep coming
FLUSH_EVERY = 0.1


class Behind:
    """The status line while the decoder is behind the capture: on stderr, every few seconds
    while it is more than a second behind, and once when it has caught up."""

    EVERY = 5.0
    BEHIND = 1.0

    def __init__(self, capture: Any) -> None:
        self.capture = capture
        self.said = 0.0
        self.behind = False

    def check(self, now: float) -> None:
        lag = self.capture.lag()
        if lag is None:
            return
        if lag.seconds >= self.BEHIND:
            if not self.behind or now - self.said >= self.EVERY:
                click.echo(f"amqpscope: the decoder is {lag.text()} behind the capture", err=True)
                self.said = now
            self.behind = True
        elif self.behind and lag.seconds < self.BEHIND / 2:
            click.echo("amqpscope: the decoder has caught up with the capture", err=True)
            self.behind = False


def _print_summary(result: dict[str, Any], console: Any, color: str, width: int | None) -> None:
    """--summary's tables as `summary FILE` prints them: piped, at their natural width (not
    cut to rich's 80 columns), as plain text when nothing is styled."""
    from amqpscope.render.summary import print_summary, summary_text

    if width is None and not sys.stdout.isatty():
        width = PIPED_WIDTH
        console = make_console(color, width)
    if width is not None and uncoloured(color):
        encoding = (getattr(sys.stdout, "encoding", None) or "utf-8").lower()
        text = summary_text(result, width, encoding)
        if text is not None:
            sys.stdout.write(text)
            return
    print_summary(result, console)


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
    help="Also write every captured packet to OUT.pcap (kept on Ctrl-C); pcapng for a .pcapng "
    "name, as read -w.",
)
@force_option
@click.option(
    "--backend",
    type=click.Choice(["tcpdump", "dumpcap", "scapy", "pyshark"]),
    help="How to capture (default: tcpdump, else dumpcap, else scapy; pyshark is slow).",
)
@click.option(
    "--spool-size",
    type=click.IntRange(min=8),
    default=256,
    show_default=True,
    metavar="MB",
    help="tcpdump/dumpcap write to a spool of files the decoder reads behind them; past MB "
    "unread, the oldest are discarded (and reported).",
)
@click.option(
    "--spool-dir",
    type=click.Path(file_okay=False, path_type=str),
    metavar="DIR",
    help="Where the spool goes (default: the temporary directory, $TMPDIR).",
)
@click.option(
    "--duration",
    type=click.FloatRange(min=0, min_open=True),
    metavar="S",
    help="Stop after S seconds.",
)
@click.option("--summary", "with_summary", is_flag=True, help="Print the summary at the end.")
@click.option(
    "--diagnose",
    "with_diagnose",
    is_flag=True,
    help="Report stalls as they happen and when they end, and the diagnoses at the end.",
)
@click.option(
    "--idle-timeout",
    type=click.FloatRange(min=1),
    default=600.0,
    show_default=True,
    metavar="S",
    help="Forget connections without a packet for S seconds.",
)
@click.option(
    "--metrics",
    "metrics_address",
    metavar="[HOST:]PORT",
    help="Serve the metrics (docs/metrics.md) on http://HOST:PORT/metrics while decoding "
    "(prometheus_client: text, or OpenMetrics when asked; HOST: every interface if not given).",
)
@metrics_options
@click.option(
    "--otlp",
    "otlp_endpoint",
    metavar="ENDPOINT",
    help="Send the messages' spans, the error spans and the metrics over OTLP to ENDPOINT "
    "(HOST:PORT for gRPC, http://HOST:PORT for HTTP) while decoding (docs/guide/metrics.md).",
)
@click.option("--quiet", is_flag=True, help="Print no frames (with --metrics: serve only).")
@frame_options
@display_options
@guarded
def live(
    iface: str,
    bpf: str,
    write: str | None,
    backend: str | None,
    spool_size: int,
    spool_dir: str | None,
    duration: float | None,
    with_summary: bool,
    with_diagnose: bool,
    idle_timeout: float,
    metrics_address: str | None,
    metrics_max_names: int,
    metrics_labels: tuple[str, ...],
    otlp_endpoint: str | None,
    quiet: bool,
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
    force: bool = False,
) -> None:
    """Capture on IFACE and decode AMQP frames as they flow, until Ctrl-C, --duration or -c.

    \b
    Examples:
      amqpscope live lo -f 'tcp port 5672'
      amqpscope live eth0 --json -w session.pcap --duration 60
      amqpscope live lo --errors --summary
      amqpscope live lo -f 'tcp port 5672' --diagnose --errors
      amqpscope live eth0 -f 'udp port 4789'   (mirrored traffic in VXLAN, e.g. AWS's)
    Ctrl-C (or SIGTERM) ends it as --duration does: what was captured is decoded, reported
    and written, exit 0; a second Ctrl-C gives up at once, exit 130.
    Needs root or CAP_NET_RAW. Kernel and amqpscope drops are reported on stderr at the end
    (with --json also as a last {"capture": ...} record), and how far behind the decoder was.
    --json's lines follow `amqpscope schema live`.
    """
    import signal
    import time

    from amqpscope.capture.live import LiveCapture, LiveError
    from amqpscope.live_decode import LiveDecoder

    try:
        selection = Selection(expression, conns, channels, errors, None, None)
    except FilterError as exc:
        fail(f"-Y: {exc}", 2)
    if write is not None:
        check_output("-w", write, (keylog,), force)
    if metrics_address is not None:
        from amqpscope.metrics.serve import parse_address

        try:
            parse_address(metrics_address)
        except ValueError as exc:
            fail(f"--metrics: {exc}", 2)
    if otlp_endpoint is not None:  # before the capture starts, as --metrics
        from amqpscope.metrics.otlp import parse_endpoint

        try:
            parse_endpoint(otlp_endpoint)
        except ValueError as exc:
            fail(f"--otlp: {exc}", 2)
    try:
        capture = LiveCapture(
            iface, bpf, backend, write, spool_bytes=spool_size * 1_000_000, spool_dir=spool_dir
        )
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
        diagnoser = watch = None
        if with_diagnose:
            from amqpscope.diagnose import Diagnoser, Watch

            diagnoser, watch = Diagnoser(), Watch()
        pipeline = LiveDecoder(
            show_secrets,
            idle_timeout,
            # the journeys feed --summary and the time-in-broker and RPC histograms
            journeys=with_summary or metrics_address is not None,
            redact_bodies=redact_bodies,
            diagnoser=diagnoser,
            watch=watch,
        )
        pipeline.dissector.context.keylog = load_keylog(keylog)  # re-read as the client appends
        sampler = server = None
        if metrics_address is not None:
            sampler, server = _serve_metrics(
                pipeline, metrics_address, metrics_max_names, "conn" in metrics_labels
            )
        otlp = None
        if otlp_endpoint is not None:
            from amqpscope.cli.otlp import LiveOtlp

            otlp = LiveOtlp(pipeline, otlp_endpoint, sampler)
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
            if sampler is not None:
                for frame in frames:
                    sampler.observe(frame)
            if otlp is not None:
                otlp.observe(frames)
            if quiet:
                return False
            for frame in frames:
                if first_ts is None:
                    first_ts = frame.ts
                    if timeline is not None:  # times from the capture's first frame, as `read`
                        timeline.first_ts = first_ts
                if not selection.accepts(frame, first_ts):
                    continue
                if timeline is None:
                    lines.write(frame_ndjson(frame))
                else:
                    timeline.frame(frame)
                shown += 1
                if count is not None and shown >= count:
                    return True
            return False

        def noticed(now: float) -> None:
            """--diagnose: a stall that has lasted long enough, or has just ended."""
            if watch is None:
                return
            events, pipeline.watched = pipeline.watched, []  # of connections just forgotten
            for event, diagnosis in events + watch.check(pipeline.tracker, now):
                lines.flush()  # the frames before it first
                if as_json:
                    record = {"diagnosis": event, **diagnosis.to_json()}
                    out.write(json.dumps(record, ensure_ascii=False) + "\n")
                else:
                    out.write(f"DIAGNOSIS {event}: {safe(diagnosis.title)}\n")
                out.flush()

        behind = Behind(capture)
        deadline = time.monotonic() + duration if duration else None
        tick_every = 0.25 if watch is not None else 1.0  # a stall shows within a quarter second
        last_tick = time.monotonic()
        full = False
        flushed = time.monotonic()
        for pkt in capture.packets():
            if pkt is not None:
                frames = pipeline.feed(pkt)
                if frames and show(frames):
                    full = True
                    break
                if frames:
                    noticed(frames[-1].ts)
            now = time.monotonic()
            # NDJSON in big writes while packets pour in; at once when the capture pauses
            if pkt is None or now - flushed >= FLUSH_EVERY:
                lines.flush()
                flushed = now
            if deadline is not None and now >= deadline:
                capture.stop()
            if now - last_tick >= tick_every:
                last_tick = now
                behind.check(now)
                pipeline.add_findings(capture.take_findings())
                wall = time.time()
                ticked = pipeline.tick(wall)
                if sampler is not None:
                    sampler.sample(wall)
                if otlp is not None:
                    otlp.tick(wall)
                if show(ticked):
                    full = True
                    break
                noticed(wall)
        capture.stop()
        pipeline.add_findings(capture.take_findings())
        frames = pipeline.finish()
        if not full:
            show(frames)
        if sampler is not None:
            sampler.sample()
        if otlp is not None:
            otlp.close()
        if timeline is not None:
            timeline.finish()
        lines.flush()
        if diagnoser is not None:
            noticed(time.time())
            found = diagnoser.diagnoses(pipeline.tracker)
            if as_json:
                out.write(json.dumps({"diagnoses": [d.to_json() for d in found]}) + "\n")
            else:
                from amqpscope.render.diagnoses import write_diagnoses
                from amqpscope.render.timeline import Timeline

                write_diagnoses(found, {}, first_ts, out, lambda: Timeline(console))
            out.flush()
        if with_summary:
            if as_json:
                out.write(json.dumps({"summary": pipeline.summary()}, ensure_ascii=False) + "\n")
            else:
                _print_summary(pipeline.summary(), console, color, width)
            out.flush()
    finally:
        if server is not None:
            server.shutdown()
        stats = capture.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    pipeline.add_findings(capture.take_findings())
    if as_json:
        out.write(json.dumps({"capture": stats.to_json()}) + "\n")
        out.flush()
    report_findings(pipeline.findings)
    if pipeline.findings_dropped:
        click.echo(f"amqpscope: ... and {pipeline.findings_dropped} findings not kept", err=True)
    click.echo(f"amqpscope: {stats.line()}", err=True)
    if capture.error:
        fail(f"capture ended: {capture.error}")


def _serve_metrics(
    pipeline: Any, address: str, max_names: int, conn_labels: bool
) -> tuple[Any, Any]:
    """`--metrics`: a sampler of the pipeline's tracker, served on `address`; exits with one
    line when prometheus_client is missing or the port cannot be had."""
    from amqpscope.metrics.sampler import Sampler

    sampler = Sampler(max_names=max_names, tracker=pipeline.tracker, conn_labels=conn_labels)
    sampler.keep = False  # the latest sample only: a scrape reads now, not the past
    pipeline.on_evict = sampler.retire
    try:
        from amqpscope.metrics.serve import serve

        server = serve(sampler, address)
    except ImportError:
        fail("--metrics needs prometheus_client: pip install 'amqpscope[metrics]'")
    except OSError as exc:
        fail(f"--metrics {address}: {exc.strerror or exc}")
    sampler.sample(0.0)
    click.echo(f"amqpscope: metrics on http://{address}/metrics", err=True)
    return sampler, server
