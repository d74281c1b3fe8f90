"""`live --metrics`: the sampler's latest sample served on /metrics by the official
prometheus_client (text format, or OpenMetrics when the scraper asks for it). The only module
that imports prometheus_client, and only when called: `read` and the rest never pay for it.

The scrape runs in the server's thread and reads `Sampler.latest`, a snapshot the decoding
thread replaces whole (about once a second), so the two share no state that changes under
either."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

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


def serve(sampler: Sampler, address: str) -> Any:
    """Start serving /metrics on `address` ([HOST:]PORT) in a daemon thread; returns the
    server (`shutdown()` stops it). OSError when the port cannot be bound."""
    from prometheus_client import start_http_server

    host, port = parse_address(address)
    server, _thread = start_http_server(port, addr=host, registry=registry(sampler))
    return server
