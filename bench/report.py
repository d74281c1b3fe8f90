"""Size and time of `amqpscope report` on big captures made at run time (never committed).

Three shapes of about 100,000 frames (`synth.py`): one long 0-9-1 connection (publish, consume
with prefetch 5, ack each), one long AMQP 1.0 connection (send, receive, settle), and 610 copies
of captures/091-qos-prefetch.pcap (short connections). For each: frames, the page's size (the
issue's bound is 5 MB), CPU time (not wall: the machine may be shared) and peak memory of the
whole process (GNU time when installed), how many frames got a row and a detail tree, what their
records kept (the page's own -Y filters them), and the time Chromium takes to open the page and
to filter every frame (`--browser`, headless, over the DevTools protocol as the tests drive it).

    python3 bench/report.py [--messages-091 N] [--messages-10 N] [--copies N] [--keep DIR]

No target is asserted here: the README quotes the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import synth  # noqa: E402  (a sibling script, not a package)

from amqpscope.render.html.pack import unpack  # noqa: E402

GNU_TIME = "/usr/bin/time" if Path("/usr/bin/time").exists() else None
DATA = re.compile(rb'id="report-data">(.*?)</script>', re.S)
FRAMES = re.compile(rb'id="report-frames">(.*?)</script>')


def run(capture: Path, page: Path) -> tuple[float, float | None]:
    """(CPU seconds, peak RSS in MB or None) of `amqpscope report capture -o page`: CPU, not
    wall, time, as the machine may be shared."""
    cmd = [sys.executable, "-m", "amqpscope.cli", "report", str(capture), "-o", str(page)]
    if GNU_TIME:
        cmd = [GNU_TIME, "-f", "%M", *cmd]
    before = os.times()
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    if result.returncode != 0:
        raise SystemExit(f"{capture.name}: {result.stderr.strip()}")
    peak = float(result.stderr.strip().splitlines()[-1]) / 1024 if GNU_TIME else None
    return cpu, peak


def in_browser(page: Path) -> tuple[float, float]:
    """(seconds to open and draw, seconds to filter every frame with a -Y that reads fields)
    in headless Chromium."""
    sys.path.insert(0, str(ROOT))
    from tests import browser

    with browser.Chromium() as chromium:
        tab = chromium.page()
        start = time.perf_counter()
        try:
            tab.open(page)
        except browser.BrowserError:  # no load event in the driver's minute: wait longer
            tab.wait(lambda: tab.loaded, "the page's load event", timeout=600)
        tab.wait("document.body.dataset.ready === '1'", "the page", timeout=600)
        opened = time.perf_counter() - start
        expression = json.dumps('fields.delivery-tag > 10 or name matches "^att"')
        took = tab.eval(
            "(() => { const t = performance.now();"
            f" window.amqpscopeReport.applyFilter({expression});"
            " return (performance.now() - t) / 1000; })()",
            timeout=300,
        )
    return opened, float(took)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages-091", type=int, default=20_000)
    parser.add_argument("--messages-10", type=int, default=50_000)
    parser.add_argument("--copies", type=int, default=610)
    parser.add_argument("--keep", type=Path, help="Keep the captures and pages here.")
    parser.add_argument("--browser", action="store_true", help="Open each page in Chromium.")
    args = parser.parse_args()
    where = args.keep or Path(tempfile.mkdtemp(prefix="amqpscope-report-bench-"))
    where.mkdir(parents=True, exist_ok=True)
    try:
        captures = {
            "0-9-1, one connection": where / "one-091.pcap",
            "1.0, one connection": where / "one-10.pcap",
            f"0-9-1, {args.copies} connections": where / "many-091.pcap",
        }
        paths = list(captures.values())
        synth.build_091(paths[0], args.messages_091)
        synth.build_10(paths[1], args.messages_10)
        synth.multiply(ROOT / "captures" / "091-qos-prefetch.pcap", paths[2], args.copies)
        heads = ("frames", 8), ("rows", 7), ("trees", 6), ("records", 9), ("MB", 6), ("CPU s", 6)
        heads += (("peak MB", 8),) + ((("open s", 7), ("filter s", 8)) if args.browser else ())
        print(f"{'capture':28} " + " ".join(f"{h:>{w}}" for h, w in heads))
        for name, capture in captures.items():
            page = capture.with_suffix(".html")
            cpu, peak = run(capture, page)
            body = page.read_bytes()
            match, frames = DATA.search(body), FRAMES.search(body)
            data = json.loads(match.group(1)) if match else {}
            packed = unpack(frames.group(1).decode()) if frames else {}
            facts = data.get("facts", {})
            line = (
                f"{name:28} {facts.get('frames', 0):>8} {len(packed.get('rows', [])):>7}"
                f" {len(packed.get('details', {})):>6} {facts.get('records', '-'):>9}"
                f" {len(body) / 1e6:>6.2f} {cpu:>6.1f}"
                f" {peak if peak is not None else float('nan'):>8.0f}"
            )
            if args.browser:
                opened, filtered = in_browser(page)
                line += f" {opened:>7.1f} {filtered:>8.2f}"
            print(line)
    finally:
        if args.keep is None:
            shutil.rmtree(where, ignore_errors=True)


if __name__ == "__main__":
    main()
