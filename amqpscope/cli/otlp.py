"""`--otlp ENDPOINT` of `export` and `live`: spans and metrics of the frames, sent over OTLP
(`metrics/spans.py` builds the spans, `metrics/instruments.py` the metrics, `metrics/otlp.py`
sends them). Here only the reading of the input and the errors' exit codes."""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Final

import click

from amqpscope.cli.common import fail, load_keylog, report_findings
from amqpscope.cli.inputs import open_input, shown_name

#: spans sent in one export while an input is read
BATCH: Final = 512
#: live: seconds between two exports of the metrics; batches waiting for the sender
LIVE_METRICS_EVERY: Final = 10.0
LIVE_QUEUE: Final = 64


def _exporter(endpoint: str, name: str) -> Any:
    from amqpscope.metrics.otlp import NEEDS, Exporter, OtlpError, parse_endpoint

    try:
        parse_endpoint(endpoint)
    except ValueError as exc:
        fail(f"--otlp: {exc}", 2)
    try:
        return Exporter(endpoint, name)
    except OtlpError as exc:
        fail(str(exc) if str(exc) == NEEDS else f"--otlp: {exc}")


def export_otlp(files: tuple[str, ...], endpoint: str, fmt: str | None, keylog: str | None) -> None:
    """`export FILE --otlp ENDPOINT`: every message's spans, the error spans and the metrics'
    samples (one a second of capture time) of the input, at the input's times."""
    from amqpscope.metrics.instruments import instruments
    from amqpscope.metrics.otlp import OtlpError
    from amqpscope.metrics.sampler import Sampler
    from amqpscope.metrics.spans import SpanBuilder
    from amqpscope.track.tracker import Tracker

    name = shown_name(files)
    exporter = _exporter(endpoint, name)

    def retired(order: int, conn: Any, layers: Any, found: int) -> None:
        builder.retire(conn)  # first: the sampler forgets the connection's evidence
        sampler.retire(conn)

    tracker = Tracker(retire=True, on_retire=retired)
    sampler = Sampler(tracker=tracker)
    # one diagnoser: the sampler feeds it (diagnoses by code), the builder reads its evidence
    builder = SpanBuilder(seed=name, diagnoser=sampler.diagnoser)
    try:
        with open_input(files, fmt) as source:
            tracker.source = source.source
            for frame in source.frames(messages=True, keylog=load_keylog(keylog), retire=True):
                sampler.feed(frame)
                builder.feed(frame)
                if len(builder.pending) >= BATCH:
                    exporter.spans(builder.take())
            sampler.finish()
            builder.finish(list(tracker.connections.values()))
            exporter.spans(builder.take())
            timed = sampler.last_ts is not None
            if not timed and exporter.sent_spans:
                click.echo(
                    "amqpscope: the frames have no times: the spans are at time 0 (1970), with no"
                    " durations, and the metrics are the totals",
                    err=True,
                )
            start = sampler.samples[0][0] if sampler.samples else 0.0
            exporter.metrics(instruments(sampler.samples, last_only=not timed), start)
            click.echo(
                f"amqpscope: {exporter.sent_spans} spans and {exporter.sent_points} metric points"
                f" sent to {exporter.endpoint}",
                err=True,
            )
            report_findings(source.findings)
    except OtlpError as exc:
        fail(f"--otlp: {exc}")
    finally:
        exporter.shutdown()


class LiveOtlp:
    """`live --otlp`: spans built as the frames are decoded, sent by a thread of their own (a
    slow or absent endpoint never holds up the capture: past `LIVE_QUEUE` waiting batches,
    the newest are dropped and counted); the metrics' latest sample every
    `LIVE_METRICS_EVERY` seconds."""

    def __init__(self, pipeline: Any, endpoint: str, sampler: Any = None) -> None:
        from amqpscope.metrics.sampler import Sampler
        from amqpscope.metrics.spans import SpanBuilder

        self.exporter = _exporter(endpoint, "live")
        self.builder = SpanBuilder(seed=f"live {id(self)}")
        self.own_sampler = sampler is None
        if sampler is None:
            sampler = Sampler(tracker=pipeline.tracker)
            sampler.keep = False
        self.sampler = sampler
        previous = pipeline.on_evict

        def evicted(conn: Any) -> None:
            self.builder.retire(conn)
            if previous is not None:
                previous(conn)
            elif self.own_sampler:
                self.sampler.retire(conn)

        pipeline.on_evict = evicted
        self.pipeline = pipeline
        self.queue: queue.Queue[tuple[str, Any] | None] = queue.Queue(LIVE_QUEUE)
        self.dropped = 0
        self.errors: list[str] = []
        self.last_metrics = 0.0
        self.thread = threading.Thread(target=self._send, name="amqpscope-otlp", daemon=True)
        self.thread.start()
        click.echo(f"amqpscope: spans and metrics to {self.exporter.endpoint} (OTLP)", err=True)

    def observe(self, frames: list[Any]) -> None:
        for frame in frames:
            if self.own_sampler:
                self.sampler.observe(frame)
            self.builder.feed(frame)

    def tick(self, now: float, final: bool = False) -> None:
        """Hand what was built to the sender: the spans, and the metrics when due."""
        self._put(("spans", self.builder.take()))
        if final or now - self.last_metrics >= LIVE_METRICS_EVERY:
            self.last_metrics = now
            at = now if not final else None
            if self.own_sampler:
                self.sampler.sample(at)
            if self.sampler.latest is not None:
                self._put(("metrics", self.sampler.latest))

    def _put(self, item: tuple[str, Any]) -> None:
        if item[0] == "spans" and not item[1]:
            return
        try:
            self.queue.put_nowait(item)
        except queue.Full:
            self.dropped += len(item[1]) if item[0] == "spans" else 0

    def _send(self) -> None:
        from amqpscope.metrics.instruments import instruments
        from amqpscope.metrics.otlp import OtlpError

        start: float | None = None
        while (item := self.queue.get()) is not None:
            what, data = item
            try:
                if what == "spans":
                    self.exporter.spans(data)
                else:
                    start = data[0] if start is None else start
                    self.exporter.metrics(instruments([data]), start)
            except OtlpError as exc:
                if len(self.errors) < 10:
                    self.errors.append(str(exc))

    def close(self) -> None:
        """The capture ended: the last spans (the connections' errors too) and metrics sent,
        waiting at most twice an export's timeout for an endpoint that does not answer."""
        from amqpscope.metrics.otlp import TIMEOUT

        self.builder.finish(list(self.pipeline.tracker.connections.values()))
        self.tick(0.0, final=True)
        deadline = time.monotonic() + 2 * TIMEOUT
        while time.monotonic() < deadline:
            try:
                self.queue.put(None, timeout=0.1)
                break
            except queue.Full:
                continue
        self.thread.join(max(0.0, deadline - time.monotonic()))
        if self.thread.is_alive():  # a daemon: it ends with the process
            self.errors.append(
                f"gave up on {self.queue.qsize()} more batches: the endpoint did not answer"
            )
        else:
            self.exporter.shutdown()
        for error in self.errors:
            click.echo(f"amqpscope: --otlp: {error}", err=True)
        dropped = f", {self.dropped} dropped (the endpoint was too slow)" if self.dropped else ""
        click.echo(
            f"amqpscope: {self.exporter.sent_spans} spans sent to {self.exporter.endpoint}"
            f"{dropped}",
            err=True,
        )
