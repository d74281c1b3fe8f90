"""The Prometheus families as OpenTelemetry instruments (sans-IO): a sampler's samples in,
`Instrument`s out, for `metrics/otlp.py` to send as OTLP metrics.

One table: `families.FAMILIES` names, types, labels and helps them; this module only says how
each kind is an OTLP point. A counter is a cumulative monotonic sum, a gauge a gauge, a
histogram an explicit-bucket histogram with `families.BUCKETS` as its bounds (OTLP counts each
bucket apart, Prometheus cumulatively); all cumulative since the input's first sample. Names are
the exported family names without a counter's `_total` (a collector's Prometheus exporter adds
it back), units `s` for the `_seconds` families and `By` for bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from amqpscope.metrics.families import BUCKETS, FAMILIES, Family
from amqpscope.metrics.sampler import Snapshot, label_names

#: OTLP's kinds, by the families' kinds
KINDS: Final = {"counter": "sum", "gauge": "gauge", "histogram": "histogram"}


@dataclass(frozen=True, slots=True)
class Point:
    """One value of one series at one time (seconds of capture time). A histogram's value is
    (per-bucket counts, count, sum)."""

    attributes: dict[str, str]
    ts: float
    value: Any


@dataclass(slots=True)
class Instrument:
    name: str
    kind: str  # "sum", "gauge" or "histogram"
    unit: str
    description: str
    points: list[Point] = field(default_factory=list)


def unit(family: Family) -> str:
    if family.exported.endswith("_seconds"):
        return "s"
    if family.exported.endswith("_bytes"):
        return "By"
    return "1"


def _per_bucket(cumulative: tuple[int, ...]) -> tuple[int, ...]:
    """Prometheus's cumulative bucket counts as OTLP's counts per bucket."""
    out, before = [], 0
    for count in cumulative:
        out.append(count - before)
        before = count
    return tuple(out)


def instruments(
    samples: list[tuple[float, Snapshot]], conn_labels: bool = False, last_only: bool = False
) -> list[Instrument]:
    """Every family with a series, each series' value at each sample (`last_only`: at the
    last sample only, for an input without times or a live export of now)."""
    if last_only:
        samples = samples[-1:]
    out = []
    for family in FAMILIES:
        names = label_names(family, conn_labels)
        instrument = Instrument(family.exported, KINDS[family.kind], unit(family), family.help)
        for ts, snapshot in samples:
            for labels, value in sorted(snapshot.get(family.name, {}).items()):
                attributes = dict(zip(names, labels, strict=True))
                if family.kind == "histogram":
                    buckets, count, total = value
                    value = (_per_bucket(tuple(buckets)), count, total)
                instrument.points.append(Point(attributes, ts, value))
        if instrument.points:
            out.append(instrument)
    return out


#: the histograms' bounds, as OTLP's explicit bounds
BOUNDS: Final = tuple(float(b) for b in BUCKETS)
