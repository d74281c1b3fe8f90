"""`live --metrics`: the sampler's latest sample served on /metrics by the official
prometheus_client (text format, or OpenMetrics when the scraper asks for it). The only module
that imports prometheus_client, and only when called: `read` and the rest never pay for it.

The scrape runs in the server's thread and reads `Sampler.latest`, a snapshot the decoding
thread replaces whole (about once a second), so the two share no state that changes under
either; `Exposition` renders each new snapshot ahead of the scrape, so that one answers in
milliseconds however many series it holds."""

from __future__ import annotations

import gzip
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from amqpscope.metrics.families import BUCKETS, FAMILIES
from amqpscope.metrics.sampler import Sampler, label_names


class SnapshotCollector:
    """A prometheus_client collector of the families as the sampler last read them."""

    def __init__(self, sampler: Sampler) -> None:
        self.sampler = sampler

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        latest = self.sampler.latest
        snapshot = latest[1] if latest is not None else {}
        bounds = [repr(float(b)) for b in BUCKETS] + ["+Inf"]
        for family in FAMILIES:
            labels = list(label_names(family, self.sampler.conn_labels))
            values = snapshot.get(family.name, {})
            unit = "seconds" if family.exported.endswith("_seconds") else ""
            if family.kind == "histogram":
                histogram = HistogramMetricFamily(
                    family.exported, family.help, labels=labels, unit=unit
                )
                for key, (buckets, _count, total) in sorted(values.items()):
                    histogram.add_metric(list(key), list(zip(bounds, buckets, strict=True)), total)
                yield histogram
                continue
            metric: Any
            if family.kind == "counter":
                metric = CounterMetricFamily(family.exported, family.help, labels=labels, unit=unit)
            else:
                metric = GaugeMetricFamily(family.exported, family.help, labels=labels, unit=unit)
            for key, value in sorted(values.items()):
                metric.add_metric(list(key), value)
            yield metric


def registry(sampler: Sampler) -> Any:
    """A registry holding only the families (no process or Python collectors)."""
    from prometheus_client import CollectorRegistry

    out = CollectorRegistry(auto_describe=False)
    out.register(SnapshotCollector(sampler))  # type: ignore[arg-type]
    return out


def parse_address(text: str) -> tuple[str, int]:
    """`[HOST:]PORT` -> (host, port); host 0.0.0.0 when not given. ValueError if not one."""
    host, _, port = text.rpartition(":")
    # no host (`--metrics 9464`): every interface, as exporters listen
    host = host.strip("[]") or "0.0.0.0"
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r} is not [HOST:]PORT")
    return host, int(port)


class Exposition:
    """The exposition of the sampler's latest sample, rendered ahead of the scrape.

    prometheus_client renders ~10,000 series in tens of milliseconds of CPU, more while the
    decoder holds the interpreter: a scrape that renders would wait that long. So a thread of
    its own renders the latest sample (with prometheus_client's own encoder for the format the
    scraper asked for, and gzipped when it asked for gzip) shortly before the scrape is due, as
    the scraper's own interval predicts it, and a scrape sends the bytes ready: the sample they
    hold is at most `LEAD` seconds older than the latest. Nothing is rendered for a format not
    scraped in the last `KEEP_WARM` seconds, and a sample is rendered once; the first scrape of a
    format renders while it waits."""

    KEEP_WARM = 300.0
    LEAD = 1.5  # seconds before the next scrape is due

    def __init__(self, sampler: Sampler) -> None:
        self.sampler = sampler
        self.registry = registry(sampler)
        self.lock = threading.Lock()
        #: content type -> the prepared answer
        self.ready: dict[str, _Answer] = {}
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._render_ahead, daemon=True)
        self.thread.start()

    def _render(self, answer: _Answer) -> None:
        latest = self.sampler.latest
        ready = answer.output
        if latest is answer.sample and ready is not None:
            if answer.gzip and answer.packed is None:
                packed = gzip.compress(ready, 5)
                with self.lock:
                    if answer.output is ready:
                        answer.packed = packed
            return
        output = answer.encoder(self.registry)
        zipped = gzip.compress(output, 5) if answer.gzip else None
        with self.lock:
            answer.sample, answer.output, answer.packed = latest, output, zipped

    def _render_ahead(self) -> None:
        while not self.stopped.wait(0.1):
            now = time.monotonic()
            with self.lock:
                due = [a for a in self.ready.values() if a.due(now, self.KEEP_WARM, self.LEAD)]
            for answer in due:
                if answer.sample is not self.sampler.latest:
                    self._render(answer)

    def app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        """The WSGI application: /metrics (and /) in the format the Accept header asks for,
        gzip when accepted, as prometheus_client's own application serves it."""
        from prometheus_client.exposition import choose_encoder, gzip_accepted

        if environ.get("PATH_INFO", "/") not in ("/", "/metrics"):
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found: /metrics\n"]
        encoder, content_type = choose_encoder(environ.get("HTTP_ACCEPT", ""))
        zipped = gzip_accepted(environ.get("HTTP_ACCEPT_ENCODING", ""))
        now = time.monotonic()
        with self.lock:
            answer = self.ready.get(content_type)
            if answer is None:
                answer = self.ready[content_type] = _Answer(encoder)
            answer.asked(now, zipped)
            output, packed = answer.output, answer.packed
        if output is None or (zipped and packed is None):
            self._render(answer)
            with self.lock:
                output, packed = answer.output, answer.packed
        headers = [("Content-Type", content_type)]
        if zipped and packed is not None:
            output = packed
            headers.append(("Content-Encoding", "gzip"))
        start_response("200 OK", headers)
        return [output or b""]


class _Answer:
    """One format's prepared answer, and when its scraper comes."""

    def __init__(self, encoder: Callable[[Any], bytes]) -> None:
        self.encoder = encoder
        self.sample: Any = None  # the sampler's `latest` it holds
        self.output: bytes | None = None
        self.packed: bytes | None = None
        self.gzip = False
        self.last: float | None = None  # when it was last scraped
        self.interval: float | None = None  # between its last two scrapes

    def asked(self, now: float, zipped: bool) -> None:
        if self.last is not None:
            self.interval = now - self.last
        self.last, self.gzip = now, zipped

    def due(self, now: float, keep_warm: float, lead: float) -> bool:
        """Whether to render now: the next scrape is expected within `lead` seconds."""
        if self.last is None or now - self.last > keep_warm:
            return False
        if self.interval is None:
            return True
        return now >= self.last + self.interval - min(lead, self.interval / 2)


class _Quiet(WSGIRequestHandler):
    """No access log on stderr (the timeline owns the terminal)."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve(sampler: Sampler, address: str) -> Any:
    """Start serving /metrics on `address` ([HOST:]PORT) in a daemon thread; returns the
    server (`shutdown()` stops it). OSError when the port cannot be bound."""
    from prometheus_client.exposition import ThreadingWSGIServer

    host, port = parse_address(address)
    exposition = Exposition(sampler)

    class Server(ThreadingWSGIServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    server = make_server(host, port, exposition.app, Server, handler_class=_Quiet)
    shutdown = server.shutdown

    def stop() -> None:
        exposition.stopped.set()
        shutdown()

    server.shutdown = stop  # type: ignore[method-assign]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
