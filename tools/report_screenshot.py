"""Make docs/report.png, the README's picture of a report: `amqpscope report` of a bundled
capture, opened in Debian's Chromium by the tests' driver (tests/browser.py), an arrow clicked,
the diagram and its frame's detail taken, then a plot, then the frame list with a display filter
typed into its box, stacked and reduced to a small palette.

    python3 tools/report_screenshot.py [CAPTURE] [-o docs/report.png]
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests import browser  # noqa: E402

WIDTH = 1400
FILTER = 'name == "flow" and fields.link-credit == 0 or findings'


def region(page: browser.Page, selector: str, height: int) -> Image.Image:
    box = page.eval(
        f"(() => {{ const r = document.querySelector('{selector}').getBoundingClientRect();"
        " return [r.top + scrollY, r.height]; })()"
    )
    clip = {"x": 0, "y": box[0], "width": WIDTH, "height": min(box[1], height)}
    return Image.open(io.BytesIO(page.screenshot(full=True, clip=clip))).convert("RGB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("capture", nargs="?", default=str(ROOT / "captures/10-credit-starved.pcap"))
    parser.add_argument("-o", "--output", default=str(ROOT / "docs/report.png"))
    parser.add_argument("-Y", "--filter", default=FILTER, help="Typed into the filter box.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as where:
        page_file = Path(where) / "report.html"
        subprocess.run(
            [sys.executable, "-m", "amqpscope.cli", "report", args.capture, "-o", str(page_file)],
            check=True,
        )
        with browser.Chromium() as chromium:
            page = chromium.page()
            page.open(page_file, width=WIDTH, height=1000)
            page.wait("document.body.dataset.ready === '1'", "the report")
            page.wait("window.amqpscopeReport.plotsDone()", "the plots")
            page.eval("document.querySelectorAll('#sequence g.arrow')[14].scrollIntoView()")
            page.click("#sequence g.arrow:nth-of-type(16) line.shaft")
            page.eval("document.getElementById('diagram-svg').scrollTop = 280")
            page.eval(f"document.getElementById('frames-filter').value = {json.dumps(args.filter)}")
            page.click("#frames-filter-apply")
            parts = [
                region(page, "#overview", 430),
                region(page, "#diagram", 760),
                region(page, "#plot-area", 300),
                region(page, "#frame-list", 330),
            ]
            if page.console_errors:
                raise SystemExit(f"console errors: {page.console_errors}")
    picture = Image.new("RGB", (WIDTH, sum(p.height for p in parts)), "white")
    top = 0
    for part in parts:
        picture.paste(part, (0, top))
        top += part.height
    picture = picture.resize((WIDTH * 3 // 4, picture.height * 3 // 4), Image.Resampling.LANCZOS)
    small = picture.quantize(colors=64, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    small.save(args.output, optimize=True)
    print(f"{args.output}: {small.width}x{small.height}, {Path(args.output).stat().st_size} bytes")


if __name__ == "__main__":
    main()
