"""The report's plots as Chromium draws them (BokehJS's own views, read in the page): one bucket
width for every plot, from the capture's whole span (not 30 us beside 0.125 s); an interval
with no latency sample is a gap in the mean's line, not a line across it; legends beside the
data, never over it; titles that fit their plot; axes in plain numbers (no `1.200e+5`). On real
captures of both protocols. And a log without timestamps: line numbers where times would be,
and no plots, with the reason on the page.
"""

from __future__ import annotations

import math
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from tests import browser
from tests.test_report import data_of
from tests.test_report_browser import CAPTURES, make, opened

pytestmark = pytest.mark.skipif(not browser.available(), reason="needs Debian's chromium")


@pytest.fixture(scope="module")
def chromium() -> browser.Chromium:
    with browser.Chromium() as running:
        yield running


PLOTTED = ["091-ack-nack-reject.pcap", "091-publish-consume.pcap", "10-credit-starved.pcap"]

#: every figure as drawn: its title and the room it has, its frame, legends, tick labels,
#: the quads' widths (rates) and the lines' points (NaN as null: a break in the line)
FIGURES = """
(() => {
  const roots = Object.values(Bokeh.index).filter(v => v.model.type === "Column");
  const ctx = document.createElement("canvas").getContext("2d");
  const box = b => ({left: b.left, top: b.top, right: b.right, bottom: b.bottom});
  return roots[0].child_views.map(fig => {
    const views = [...fig.renderer_views.values()];
    const title = fig.model.title;
    ctx.font = `${title.text_font_style} ${title.text_font_size} ${title.text_font}`;
    const glyphs = views.filter(v => v.model.type === "GlyphRenderer");
    const data = type => glyphs.filter(v => v.model.glyph.type === type)
      .map(v => v.model.data_source.data);
    return {
      title: title.text,
      title_width: ctx.measureText(title.text).width,
      title_room: views.find(v => v.model === title).bbox.width,
      frame: box(fig.frame.bbox),
      legends: views.filter(v => v.model.type === "Legend").map(v => box(v.bbox)),
      labels: views.filter(v => v.model.type === "LinearAxis").map(
        v => v.model.formatter.doFormat([...v.tick_coords.major[v.dimension]], {loc: 0})),
      quads: data("Quad").map(d => Array.from(d.left, (l, i) => d.right[i] - l)),
      lines: data("Line").map(d => [Array.from(d.x), Array.from(d.y, y => isNaN(y) ? null : y)]),
    };
  });
})()
"""


def figures(chromium: browser.Chromium, tmp_path: Path, capture: str) -> tuple[dict, list]:
    page_file = make(tmp_path, CAPTURES / capture)
    page = opened(chromium, page_file)
    drawn = page.eval(FIGURES)
    assert page.console_errors == []
    return data_of(page_file.read_bytes()), drawn


def overlaps(a: dict[str, float], b: dict[str, float]) -> bool:
    return (
        a["left"] < b["right"]
        and b["left"] < a["right"]
        and a["top"] < b["bottom"]
        and (b["top"] < a["bottom"])
    )


@pytest.mark.parametrize("capture", PLOTTED)
def test_plots_share_one_width_leave_gaps_and_keep_legends_titles_and_numbers_readable(
    tmp_path: Path,
    chromium: browser.Chromium,
    capture: str,
) -> None:
    data, drawn = figures(chromium, tmp_path, capture)
    span = data["facts"]["duration"]
    assert drawn, "no figure drawn"
    rates = [f for f in drawn if ": rates" in f["title"]]
    latency = [f for f in drawn if "latency" in f["title"] and "histogram" not in f["title"]]
    assert rates and latency, [f["title"] for f in drawn]
    wrong: list[Any] = []  # every property broken, to see them all at once
    # one width for every rate plotted, from the whole capture's span: tens of intervals
    widths = {round(w, 12) for f in rates for quads in f["quads"] for w in quads}
    if len(widths) != 1:
        wrong.append(("bucket widths", sorted(widths)))
    width = max(widths)
    if not 8 <= span / width <= 2 * 40:
        wrong.append(("intervals over the span", span, width))
    for fig in latency:  # the mean's line unbroken only between neighbouring intervals
        for xs, ys in fig["lines"]:
            for (x0, y0), (x1, y1) in pairwise(zip(xs, ys, strict=True)):
                if y0 is not None and y1 is not None and not math.isclose(x1 - x0, width):
                    wrong.append(("line across a gap", fig["title"], x0, x1))
    for fig in drawn:
        for legend in fig["legends"]:
            if overlaps(legend, fig["frame"]):
                wrong.append(("legend over the data", fig["title"], legend, fig["frame"]))
        if fig["title_width"] > fig["title_room"]:
            wrong.append(("title cut", fig["title"], fig["title_width"], fig["title_room"]))
        for labels in fig["labels"]:
            if not labels or any("e+" in t or "e-" in t for t in labels):
                wrong.append(("axis labels", fig["title"], labels))
    assert any(f["legends"] for f in drawn)
    assert wrong == []


def test_a_log_without_timestamps_shows_lines_and_says_why_no_plots(
    tmp_path: Path,
    chromium: browser.Chromium,
) -> None:
    page_file = make(tmp_path, CAPTURES / "log-proton-starved.log")
    data = data_of(page_file.read_bytes())
    page = opened(chromium, page_file)
    assert page.eval("document.body.dataset.plots || '0'") == "0"
    said = page.eval("document.getElementById('plot-area').textContent")
    assert "the log has no timestamps" in said
    facts = page.eval("document.getElementById('facts').textContent")
    assert "Duration (s)" not in facts and "not known" in facts
    first = data["rows"][0]
    cells = page.eval(
        "[...document.querySelectorAll('#frames tbody tr')[0].children].map(c => c.textContent)"
    )
    assert cells[:2] == [str(first[0]), f"L{first[1]}"]
    assert page.eval("document.getElementById('frames-when').textContent") == "line"
    assert page.console_errors == []
