"""Rate of reading frame-trace logs: log lines a second through `summary` and `read --json`.

The log is made at run time (never committed) from the recorded Proton trace
captures/log-proton-broker.log: its handshake and attach, then `--messages` transfers built on
the trace's own transfer line (delivery ids and tags counted up, the payload as recorded), each
answered by the broker's disposition as the trace has it, a flow every 1,000 to keep credit, and
the trace's detach and close; plus `--noise` unrelated lines per frame line (a chatty
application log around the trace). The tracker must find it clean, or the numbers would be of
error paths.

    python3 bench/logs.py [--messages N] [--noise K] [--repeat R] [--keep DIR]

Prints lines per second (median of R runs, whole process: start-up included) for `summary` and
`read --json` of the plain log, and in-process (LogReader and Tracker, no start-up, no output).
No target is asserted here: the README quotes the numbers.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RECORDED = ROOT / "captures" / "log-proton-broker.log"


def synthesize(path: Path, messages: int, noise: int = 0) -> int:
    """Write the log; return its line count."""
    lines = RECORDED.read_text().splitlines()
    first_transfer = next(i for i, line in enumerate(lines) if "-> @transfer" in line)
    head = lines[:first_transfer]
    transfer = lines[first_transfer]
    disposition = next(line for line in lines if "<- @disposition" in line)
    flow = next(line for line in lines if "<- @flow" in line)
    close = [line for line in lines if "-> @close" in line or "<- @close" in line]
    detach = next(line for line in lines if "-> @detach" in line and "handle=0x0" in line)
    chatter = "2026-01-31 12:00:00,123 INFO app.worker: processed order 12345 in 3 ms"
    out = [*head]
    for i in range(messages):
        out.append(
            re.sub(
                r"delivery-id=0x[0-9a-f]+, delivery-tag=b\"[^\"]*\"",
                f'delivery-id=0x{i:x}, delivery-tag=b"{i}"',
                transfer,
            )
        )
        out.extend([chatter] * noise)
        out.append(
            re.sub(
                r"first=0x[0-9a-f]+(, last=0x[0-9a-f]+)?",
                f"first=0x{i:x}",
                disposition.replace("state=@accepted(36) []", "state=@accepted(36) []"),
            )
        )
        if i % 1000 == 999:
            out.append(re.sub(r"delivery-count=0x[0-9a-f]+", f"delivery-count=0x{i + 1:x}", flow))
    out.extend([detach, *close])
    path.write_text("\n".join(out) + "\n")
    return len(out)


def run(cmd: list[str], repeat: int) -> float:
    walls = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        walls.append(time.perf_counter() - start)
    return statistics.median(walls)


def in_process(path: Path, repeat: int) -> float:
    sys.path.insert(0, str(ROOT))
    from amqpscope.logs.reader import LogReader
    from amqpscope.track.tracker import Tracker

    walls = []
    for _ in range(repeat):
        start = time.perf_counter()
        reader, tracker = LogReader(path.name, messages=False), Tracker(journeys=False)
        with open(path, encoding="utf-8") as log:
            for number, line in enumerate(log, 1):
                for frame in reader.feed(line, number):
                    tracker.feed(frame)
        for frame in reader.flush():
            tracker.feed(frame)
        tracker.finish()
        walls.append(time.perf_counter() - start)
        assert not reader.findings, reader.findings[:3]
        bad = [f for f in tracker.findings if f.severity != "info"]
        assert not bad, bad[:3]
    return statistics.median(walls)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--noise", type=int, default=0, help="unrelated lines per transfer")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="write the log here and keep it")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"proton-{args.messages}.log"
        count = synthesize(path, args.messages, args.noise)
        cli = [sys.executable, "-m", "amqpscope.cli"]
        rows = [
            ("in-process (LogReader + Tracker)", in_process(path, args.repeat)),
            ("amqpscope summary", run([*cli, "summary", str(path)], args.repeat)),
            ("amqpscope read --json", run([*cli, "read", str(path), "--json"], args.repeat)),
        ]
        print(f"log: {count:,} lines, {path.stat().st_size / 1e6:.1f} MB, {args.messages:,} msgs")
        print(f"{'what':<36} {'seconds':>8} {'lines/s':>10}")
        for what, seconds in rows:
            print(f"{what:<36} {seconds:8.2f} {count / seconds:10,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
