"""A sampler's samples as OpenMetrics text with timestamps (what `promtool tsdb
create-blocks-from openmetrics` loads): each family's samples together, each series' in time
order, `# EOF` last. A series gets a sample when its value changed since its last one, at least
every `REPEAT_MS` while it did not (so that a query within Prometheus's 5-minute lookback finds
it), and at the end. Times are written in whole milliseconds (Prometheus keeps no finer), each
series' last state within a millisecond at that millisecond."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from amqpscope.metrics.families import BUCKETS, FAMILIES
from amqpscope.metrics.sampler import Labels, Snapshot, label_names

REPEAT_MS: Final = 60_000


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(names: tuple[str, ...], labels: Labels, extra: str = "") -> str:
    parts = [f'{name}="{_escape(value)}"' for name, value in zip(names, labels, strict=True)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


def _number(value: float) -> str:
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _ms(ts: float) -> int:
    return int(ts * 1000)


def _ts(ms: int) -> str:
    return f"{ms // 1000}.{ms % 1000:03d}"


def _series(
    samples: list[tuple[float, Snapshot]], name: str
) -> dict[Labels, list[tuple[int, Any]]]:
    """Each series' samples: the changed ones, the repeats, and the last."""
    out: dict[Labels, list[tuple[int, Any]]] = {}
    last_at = len(samples) - 1
    for at, (seconds, snapshot) in enumerate(samples):
        ts = _ms(seconds)
        for labels, value in snapshot.get(name, {}).items():
            kept = out.setdefault(labels, [])
            if kept and ts <= kept[-1][0]:  # no later time than its last: that one holds it
                kept[-1] = (kept[-1][0], value)
                continue
            if not kept or kept[-1][1] != value or ts - kept[-1][0] >= REPEAT_MS or at == last_at:
                kept.append((ts, value))
    return out


def lines(
    samples: list[tuple[float, Snapshot]], conn_labels: bool = False, timed: bool = True
) -> Iterator[str]:
    """`timed` False (a log whose lines have no time): the last sample only, without
    timestamps, and no family of seconds (every duration would read 0)."""
    if not timed:
        samples = samples[-1:]
    for family in FAMILIES:
        if not timed and "seconds" in family.name:
            continue
        names = label_names(family, conn_labels)
        series = _series(samples, family.name)
        base = family.exported
        yield f"# TYPE {base} {family.kind}"
        if base.endswith("_seconds"):
            yield f"# UNIT {base} seconds"
        yield f"# HELP {base} {_escape(family.help)}"
        for labels in sorted(series):
            for ms, value in series[labels]:
                ts = f" {_ts(ms)}" if timed else ""
                if family.kind == "histogram":
                    buckets, count, total = value
                    bounds = [repr(float(b)) for b in BUCKETS] + ["+Inf"]
                    for bound, n in zip(bounds, buckets, strict=True):
                        le = _labels(names, labels, 'le="' + bound + '"')
                        yield f"{base}_bucket{le} {n}{ts}"
                    yield f"{base}_count{_labels(names, labels)} {count}{ts}"
                    yield f"{base}_sum{_labels(names, labels)} {_number(total)}{ts}"
                elif family.kind == "counter":
                    yield f"{base}_total{_labels(names, labels)} {_number(value)}{ts}"
                else:
                    yield f"{base}{_labels(names, labels)} {_number(value)}{ts}"
    yield "# EOF"
