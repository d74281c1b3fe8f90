"""The thin part that touches the network: `spans.SpanData` and `instruments.Instrument` as the
OpenTelemetry SDK's span and metric data, sent by the official OTLP exporters.

No tracer or meter provider: the spans already happened (their ids and capture times are the
builder's), so they are handed to the exporter as `ReadableSpan`s, and the metrics as one
`MetricsData` of the sampler's points. ENDPOINT: `http://HOST:PORT` or `https://...` is
OTLP/HTTP (protobuf; `/v1/traces` and `/v1/metrics` are appended), `HOST:PORT` or
`grpc://HOST:PORT` is OTLP/gRPC without TLS.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any, Final
from urllib.parse import urlsplit

from amqpscope import __version__
from amqpscope.metrics.instruments import BOUNDS, Instrument
from amqpscope.metrics.spans import CLIENT, CONSUMER, PRODUCER, SpanData

#: seconds an export may take (the exporters retry within it) before it is given up
TIMEOUT: Final = 10.0
NEEDS: Final = (
    "--otlp needs the OpenTelemetry SDK and OTLP exporters: pip install 'amqpscope[otel]'"
)


class OtlpError(Exception):
    """An endpoint that cannot be used, a missing package, or an export that failed."""


def parse_endpoint(text: str) -> tuple[str, str]:
    """("grpc", "host:port") or ("http", "http://host:port"); ValueError says what is wrong."""
    if "://" not in text:
        text = "grpc://" + text
    parts = urlsplit(text)
    if parts.scheme not in ("grpc", "http", "https"):
        raise ValueError(f"{text!r}: the scheme must be http, https or grpc")
    try:
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"{text!r}: {exc}") from None
    if not parts.hostname or port is None:
        raise ValueError(f"{text!r}: give HOST:PORT (e.g. 127.0.0.1:4317)")
    if parts.scheme == "grpc":
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        return "grpc", f"{host}:{port}"
    return "http", text.rstrip("/")


def _ns(seconds: float) -> int:
    return round(seconds * 1_000_000_000)


class Exporter:
    """Sends spans and metrics to one OTLP endpoint; `input_name` goes into the resource."""

    def __init__(self, endpoint: str, input_name: str = "", timeout: float = TIMEOUT) -> None:
        try:
            self.protocol, self.endpoint = parse_endpoint(endpoint)
        except ValueError as exc:
            raise OtlpError(str(exc)) from None
        # the exporters log each retry and failure: amqpscope says it once, in one line
        logging.getLogger("opentelemetry.exporter.otlp").setLevel(logging.CRITICAL)
        try:
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.util.instrumentation import InstrumentationScope

            if self.protocol == "grpc":
                from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
                    OTLPMetricExporter,
                )
                from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
                    OTLPSpanExporter,
                )

                self._spans: Any = OTLPSpanExporter(
                    endpoint=self.endpoint, insecure=True, timeout=timeout
                )
                self._metrics: Any = OTLPMetricExporter(
                    endpoint=self.endpoint, insecure=True, timeout=timeout
                )
            else:
                from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
                    OTLPMetricExporter as HttpMetricExporter,
                )
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                    OTLPSpanExporter as HttpSpanExporter,
                )

                self._spans = HttpSpanExporter(
                    endpoint=self.endpoint + "/v1/traces", timeout=timeout
                )
                self._metrics = HttpMetricExporter(
                    endpoint=self.endpoint + "/v1/metrics", timeout=timeout
                )
        except ImportError:
            raise OtlpError(NEEDS) from None
        attributes: dict[str, Any] = {"service.name": "amqpscope", "service.version": __version__}
        if input_name:
            attributes["amqpscope.input"] = input_name
        self.resource = Resource.create(attributes)
        self.scope = InstrumentationScope("amqpscope", __version__)
        self.sent_spans = 0
        self.sent_points = 0

    def spans(self, spans: Sequence[SpanData]) -> None:
        """Export these spans (nothing when empty); OtlpError when the endpoint refused them."""
        if not spans:
            return
        from opentelemetry.sdk.trace.export import SpanExportResult

        result = self._spans.export([self._readable(span) for span in spans])
        if result != SpanExportResult.SUCCESS:
            raise OtlpError(f"{self.endpoint}: the OTLP endpoint did not take {len(spans)} spans")
        self.sent_spans += len(spans)

    def _readable(self, span: SpanData) -> Any:
        from opentelemetry.sdk.trace import Event, ReadableSpan
        from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags
        from opentelemetry.trace.span import TraceState

        kinds = {
            PRODUCER: SpanKind.PRODUCER,
            CONSUMER: SpanKind.CONSUMER,
            CLIENT: SpanKind.CLIENT,
        }
        flags = TraceFlags(TraceFlags.SAMPLED if span.sampled else TraceFlags.DEFAULT)
        state = TraceState.from_header([span.tracestate]) if span.tracestate else TraceState()
        context = SpanContext(span.trace_id, span.span_id, False, flags, state)
        parent = None
        if span.parent_id is not None:
            parent = SpanContext(span.trace_id, span.parent_id, span.remote_parent, flags, state)
        status = Status(StatusCode.ERROR, span.error) if span.error is not None else Status()
        events = [Event(e.name, dict(e.attributes), _ns(e.ts)) for e in span.events]
        return ReadableSpan(
            span.name,
            context=context,
            parent=parent,
            resource=self.resource,
            attributes=dict(span.attributes),
            events=events,
            kind=kinds.get(span.kind, SpanKind.INTERNAL),
            status=status,
            start_time=_ns(span.start),
            end_time=_ns(span.end),
            instrumentation_scope=self.scope,
        )

    def metrics(self, instruments: Sequence[Instrument], start: float) -> None:
        """Export the instruments' points, cumulative from `start` (capture time)."""
        if not instruments:
            return
        from opentelemetry.sdk.metrics.export import (
            AggregationTemporality,
            Gauge,
            Histogram,
            HistogramDataPoint,
            Metric,
            MetricExportResult,
            MetricsData,
            NumberDataPoint,
            ResourceMetrics,
            ScopeMetrics,
            Sum,
        )

        cumulative = AggregationTemporality.CUMULATIVE
        metrics = []
        points = 0
        for instrument in instruments:
            data: Any
            if instrument.kind == "histogram":
                data = Histogram(
                    [
                        HistogramDataPoint(
                            p.attributes,
                            _ns(start),
                            _ns(p.ts),
                            count=p.value[1],
                            sum=p.value[2],
                            bucket_counts=list(p.value[0]),
                            explicit_bounds=list(BOUNDS),
                            min=math.nan,  # not kept: the buckets say where they lie
                            max=math.nan,
                        )
                        for p in instrument.points
                    ],
                    cumulative,
                )
            else:
                numbers = [
                    NumberDataPoint(p.attributes, _ns(start), _ns(p.ts), p.value)
                    for p in instrument.points
                ]
                data = (
                    Sum(numbers, cumulative, True) if instrument.kind == "sum" else Gauge(numbers)
                )
            points += len(instrument.points)
            metrics.append(Metric(instrument.name, instrument.description, instrument.unit, data))
        scope = ScopeMetrics(self.scope, metrics, "")
        result = self._metrics.export(MetricsData([ResourceMetrics(self.resource, [scope], "")]))
        if result != MetricExportResult.SUCCESS:
            raise OtlpError(f"{self.endpoint}: the OTLP endpoint did not take the metrics")
        self.sent_points += points

    def shutdown(self) -> None:
        self._spans.shutdown()
        self._metrics.shutdown()
