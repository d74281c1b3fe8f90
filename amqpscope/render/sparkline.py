"""Sparklines of the summary's time series (`series` in `amqpscope summary --json`).

A series is `{"start", "bucket-seconds"}` plus per bucket `max` (a level: credit, unsettled or
unacked deliveries) or `counts` (a rate: deliveries, publishes). The rows of one table are drawn
on one time axis, so a link's credit and its deliveries (or one channel's publishes and
another's deliveries) line up. Each cell covers an equal share of the table's span: a level
shows the highest value of the buckets the cell overlaps; a rate the events of the buckets whose
middle falls in it (prorated by overlap when buckets are wider than cells). Outside a series'
own span a cell is blank. Each line is scaled to its own highest value; a rate cell with any
event shows at least the lowest glyph.
"""

from __future__ import annotations

import math
from typing import Any

BLOCKS = "▁▂▃▄▅▆▇█"
#: the same eight steps for a console that cannot encode the blocks
ASCII = "_.:-=+*#"
#: cells per sparkline
WIDTH = 16

Series = dict[str, Any]


def glyphs(encoding: str) -> str:
    """BLOCKS if `encoding` can encode them, else ASCII."""
    try:
        BLOCKS.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return ASCII
    return BLOCKS


def span(series: list[Series | None]) -> tuple[float, float] | None:
    """(start, end) in epoch seconds covering every series given; None if all are empty."""
    start = end = None
    for s in series:
        if not s:
            continue
        first = float(s["start"])
        last = first + len(_values(s)) * float(s["bucket-seconds"])
        start = first if start is None else min(start, first)
        end = last if end is None else max(end, last)
    if start is None or end is None:
        return None
    return start, end


def resample(
    series: Series, axis: tuple[float, float], cells: int = WIDTH, low: bool = False
) -> list[float | None]:
    """The series on `cells` equal cells of `axis`; None where the series has no data. A level
    shows its highest value per cell, or with `low` its lowest."""
    start, end = axis
    step = (end - start) / cells
    values = series["min"] if low and "min" in series else _values(series)
    first, width = float(series["start"]), float(series["bucket-seconds"])
    rate = "counts" in series
    out: list[float | None] = [None] * cells
    if step <= 0.0:  # everything at one instant
        out[0] = float(sum(values) if rate else min(values) if low else max(values))
        return out
    fine = width <= step  # a bucket fits in a cell: it goes whole to the cell of its middle
    for k, value in enumerate(values):
        lo = first + k * width
        hi = lo + width
        if fine and rate:
            if value:
                c = max(0, min(cells - 1, int((lo + width / 2 - start) / step)))
                out[c] = (out[c] or 0.0) + value
            continue
        c0 = max(0, min(cells - 1, int((lo - start) / step)))
        c1 = max(0, min(cells - 1, math.ceil((hi - start) / step) - 1))
        for c in range(c0, c1 + 1):
            a = start + c * step
            overlap = min(hi, a + step) - max(lo, a)
            if overlap <= 0.0 and c0 != c1:
                continue
            current = out[c]
            if rate:
                share = value * (overlap / width if c0 != c1 else 1.0)
                out[c] = share if current is None else current + share
            elif current is None or (value < current if low else value > current):
                out[c] = float(value)
    return out


def draw(cells: list[float | None], rate: bool, steps: str = BLOCKS) -> str:
    """One glyph per cell, scaled to the line's highest value (blank: no data)."""
    top = max((v for v in cells if v is not None), default=None)
    if top is None:
        return ""
    last = len(steps) - 1
    out = []
    for v in cells:
        if v is None or (rate and v <= 0.0):
            out.append(" ")
        elif top <= 0.0:
            out.append(steps[0])
        elif rate:  # any event shows
            out.append(steps[max(0, min(last, math.ceil(v / top * len(steps)) - 1))])
        else:
            out.append(steps[max(0, min(last, round(v / top * last)))])
    return "".join(out)


def sparkline(
    series: Series | None,
    axis: tuple[float, float] | None,
    steps: str = BLOCKS,
    low: bool = False,
) -> str:
    """A series as a sparkline on `axis` ("" when it has no data)."""
    if not series or axis is None:
        return ""
    return draw(resample(series, axis, low=low), "counts" in series, steps)


def _values(series: Series) -> list[int]:
    return series.get("counts") or series.get("max") or []
