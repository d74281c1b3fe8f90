"""Scaling of `amqpscope spark`: local[1] against local[2] on the same input, and throughput per
core against single-process `amqpscope read --json` over the same files.

The input is made here at run time with run.py's multiply(): FILES files, each COPIES copies of
a recorded capture (every copy a connection of its own).

    python3 bench/spark_scaling.py [--files 8] [--copies 500] [--cores 1 2]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import DEFAULT, multiply


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capture", type=Path, default=DEFAULT)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--copies", type=int, default=500)
    parser.add_argument("--cores", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "in"
        folder.mkdir()
        packets = 0
        for i in range(args.files):
            packets += multiply(args.capture, folder / f"cap{i:03}.pcap", args.copies)
        size = sum(p.stat().st_size for p in folder.iterdir()) / 1e6
        print(f"input: {args.files} files, {packets} packets, {size:.1f} MB")
        start = time.perf_counter()
        for path in sorted(folder.iterdir()):
            subprocess.run(
                [sys.executable, "-m", "amqpscope.cli", "read", "--json", str(path)],
                stdout=subprocess.DEVNULL,
                check=True,
            )
        single = time.perf_counter() - start
        print("| run | cores | wall s | job s | packets/s | per core | vs read |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        print(
            f"| `read --json`, one process per file | 1 | {single:.1f} | {single:.1f} |"
            f" {packets / single:.0f} | {packets / single:.0f} | 1.00 |"
        )
        for cores in args.cores:
            start = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "amqpscope.cli", "spark", str(folder), "--out",
                 str(Path(tmp) / f"out{cores}"), "--master", f"local[{cores}]"],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            wall = time.perf_counter() - start
            job = float(re.findall(r"done in ([0-9.]+) s", done.stderr)[-1])
            rate = packets / job
            print(
                f"| `spark --master local[{cores}]` | {cores} | {wall:.1f} | {job:.1f} |"
                f" {rate:.0f} | {rate / cores:.0f} | {rate / cores / (packets / single):.2f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
