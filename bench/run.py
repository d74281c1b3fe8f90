"""Time amqpscope against tshark on the same big captures, in one run, and report ratios.

The captures are synthesised here at run time (never committed) from recorded conversations
(`synth.py`): one long 0-9-1 connection that publishes and consumes `--messages-091` messages,
and one long AMQP 1.0 connection that sends and receives `--messages-10` messages (two transfers
each). On each capture, side by side:

    amqpscope read --json FILE    against   tshark -r FILE -T json -J amqp    (full decode)
    amqpscope summary FILE        against   tshark -r FILE -Y amqp            (one line a frame)

with wall time (median of `--repeat` runs) and peak memory (the child's maximum RSS). The last
column checks that `summary` streams: its peak memory on a capture of half the length.

Each amqpscope command runs in both builds: `pure` (this interpreter's amqpscope, as the editable
install has it) and `compiled` (the hot path compiled with mypyc, built by `tools/compiled.py`
into build/compiled unless it is current).

    python3 bench/run.py [--messages-091 N] [--messages-10 N] [--repeat K] [--keep DIR]
                         [--builds pure,compiled]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tools"))
import compiled  # noqa: E402  (tools/compiled.py)
import synth  # noqa: E402  (a sibling script, not a package)

GNU_TIME = shutil.which("time") if Path("/usr/bin/time").exists() else None


def measure(cmd: list[str], repeat: int) -> tuple[float, float, float]:
    """(median wall seconds, median CPU seconds, peak RSS in MB of the largest run) of `cmd`.

    The peak comes from GNU time (`time -f %M`) when installed: a child of this process would
    inherit this process's own high-water mark through fork and exec, which would hide a
    smaller one; GNU time's is a megabyte. Without it, wait4's number is an upper bound."""
    walls, cpus, peaks = [], [], []
    for _ in range(repeat):
        with tempfile.NamedTemporaryFile("r") as report:
            wrapped = [GNU_TIME, "-f", "%U %S %M", "-o", report.name, *cmd] if GNU_TIME else cmd
            start = time.perf_counter()
            child = subprocess.Popen(wrapped, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            _, status, usage = os.wait4(child.pid, 0)
            walls.append(time.perf_counter() - start)
            if os.waitstatus_to_exitcode(status) != 0:
                raise SystemExit(
                    f"{' '.join(cmd)}: exit status {os.waitstatus_to_exitcode(status)}"
                )
            if GNU_TIME:
                user, system, peak = report.read().split()[-3:]
                cpus.append(float(user) + float(system))
                peaks.append(int(peak) / 1024)
            else:
                cpus.append(usage.ru_utime + usage.ru_stime)
                peaks.append(usage.ru_maxrss / 1024)  # KiB on Linux
    return statistics.median(walls), statistics.median(cpus), max(peaks)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def tshark_version(tshark: str) -> str:
    out = subprocess.run([tshark, "--version"], capture_output=True, text=True).stdout
    return out.splitlines()[0] if out else "tshark"


def bench(
    label: str,
    build: Callable[[Path, int], int],
    messages: int,
    tmp: Path,
    repeat: int,
    tshark: str | None,
    builds: dict[str, list[str]],
) -> list[str]:
    """Build the capture for one version, run every command on it; the table's rows."""
    big, half = tmp / f"{label}.pcap", tmp / f"{label}-half.pcap"
    packets = build(big, messages)
    build(half, messages // 2)
    runs: dict[str, list[str]] = {}
    for name, me in builds.items():
        runs[f"read {name}"] = [*me, "read", "--json", str(big)]
        runs[f"summary {name}"] = [*me, "summary", str(big)]
        runs[f"summary-half {name}"] = [*me, "summary", str(half)]
    if tshark:
        runs["tshark-json"] = [tshark, "-r", str(big), "-T", "json", "-J", "amqp"]
        runs["tshark-line"] = [tshark, "-r", str(big), "-Y", "amqp"]
    got = {name: measure(cmd, repeat) for name, cmd in runs.items()}
    size = big.stat().st_size / 1e6
    print(f"{label}: {messages} messages, {packets} packets, {size:.1f} MB", file=sys.stderr)
    rows = []
    for command, theirs, what in (
        ("read", "tshark-json", "`read --json` vs `-T json -J amqp`"),
        ("summary", "tshark-line", "`summary` vs `-Y amqp`"),
    ):
        for name in builds:
            ours = f"{command} {name}"
            wall, cpu, peak = got[ours]
            row = f"| {label} | {what} | {name} | {wall:.2f} s ({cpu:.2f}) | {peak:.0f} MB |"
            if theirs in got:
                t_wall, t_cpu, t_peak = got[theirs]
                row += (
                    f" {t_wall:.2f} s ({t_cpu:.2f}) | {t_peak:.0f} MB | **{wall / t_wall:.2f}**"
                    f" ({cpu / t_cpu:.2f}) | {peak / t_peak:.2f} |"
                )
            else:
                row += " - | - | - | - |"
            row += f" {got[f'summary-half {name}'][2]:.0f} MB |" if command == "summary" else " |"
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages-091", type=int, default=100_000, metavar="N")
    parser.add_argument("--messages-10", type=int, default=25_000, metavar="N")
    parser.add_argument("--repeat", type=int, default=1, metavar="K")
    parser.add_argument("--no-tshark", action="store_true", help="time amqpscope only")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="keep the captures in DIR")
    parser.add_argument(
        "--builds", default="pure,compiled", help="amqpscope builds to time: pure, compiled"
    )
    args = parser.parse_args(argv)
    tshark = None if args.no_tshark else shutil.which("tshark")
    builds: dict[str, list[str]] = {}
    for name in args.builds.split(","):
        if name == "pure":
            builds[name] = [sys.executable, "-m", "amqpscope.cli"]
        elif name == "compiled":
            try:
                builds[name] = [str(compiled.install())]
            except compiled.BuildError as exc:
                raise SystemExit(f"run.py: the compiled build failed: {exc}") from None
        else:
            parser.error(f"--builds: {name!r} is not pure or compiled")
    print(f"machine: {machine()}")
    if tshark:
        print(f"against: {tshark_version(tshark)}")
    print()
    print(
        "| capture | amqpscope vs tshark | build | amqpscope s (CPU s) | peak | tshark s (CPU s)"
        " | peak | time ratio (CPU) | memory ratio | `summary` peak, half the messages |"
    )
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep or Path(scratch)
        tmp.mkdir(parents=True, exist_ok=True)
        for label, build, messages in (
            ("0-9-1", synth.build_091, args.messages_091),
            ("1.0", synth.build_10, args.messages_10),
        ):
            if messages > 0:
                for row in bench(label, build, messages, tmp, args.repeat, tshark, builds):
                    print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
