"""How long `amqpscope tui` takes to open a big capture, against `amqpscope read --json` on it.

The capture is made at run time (`synth.multiply` of 091-qos-prefetch, 165 records a copy; the
default 6,098 copies make 1,006,170 records). `read --json FILE > /dev/null` is timed, then the
TUI in a tmux pane: until its first screen of frames shows (reading goes on in a thread), until
the whole capture is read (the status line stops saying "reading"), and how long End takes to
show the last frame once it is read. The issue's target: the first screen within 2x of
`read --json`'s time.

    python3 bench/tui_open.py [--copies N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
import synth  # noqa: E402  (a sibling script, not a package)

from amqpscope.capture.files import open_capture  # noqa: E402
from amqpscope.dissect import Dissector  # noqa: E402
from tests.tuiterm import Pane  # noqa: E402

SOURCE = ROOT / "captures" / "091-qos-prefetch.pcap"


def records_in(path: Path) -> int:
    """The records amqpscope reads in `path` (its frames and TCP ends): what the TUI counts."""
    with open_capture(str(path)) as capture:
        return sum(1 for _ in Dissector().run(capture))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=6098)
    parser.add_argument("--keep", type=Path, help="Keep the capture in this directory.")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        where = args.keep or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        big = where / "tui-open.pcap"
        synth.multiply(SOURCE, big, args.copies)
        frames = args.copies * records_in(SOURCE)
        start = time.monotonic()
        subprocess.run(
            [sys.executable, "-m", "amqpscope.cli", "read", "--json", str(big)],
            stdout=subprocess.DEVNULL,
            check=True,
            cwd=ROOT,
        )
        read_json = time.monotonic() - start
        first_row = re.compile(r"(?:^|│)\s*1\s+0\.000000 c1 ", re.MULTILINE)
        pane = Pane([str(big)], 120, 40)
        try:
            first = pane.wait(lambda s: bool(first_row.search(s)), 600)
            loaded = pane.wait(
                lambda s: f"{frames:,} frames" in s and "reading" not in s, 3600, every=0.5
            )
            pressed = time.monotonic()
            pane.press("End", lambda s: f"row {frames:,}" in s, 120)
            end = time.monotonic() - pressed
            pane.keys("q")
        finally:
            pane.close()
    result = {
        "frames": frames,
        "read_json_s": round(read_json, 2),
        "tui_first_screen_s": round(first, 2),
        "tui_all_read_s": round(loaded, 2),
        "tui_end_key_s": round(end, 2),
        "first_screen_vs_read_json": round(first / read_json, 3),
        "all_read_vs_read_json": round(loaded / read_json, 3),
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
