"""Time amqpscope against tshark on the same big captures, in one run, and report ratios.

The captures are synthesised here at run time (never committed) from recorded conversations
(`synth.py`): one long 0-9-1 connection that publishes and consumes `--messages-091` messages,
and one long AMQP 1.0 connection that sends and receives `--messages-10` messages (two transfers
each). On each capture, side by side:

    amqpscope read --json FILE     against   tshark -r FILE -T json -J amqp   (full decode)
    amqpscope summary FILE         against   tshark -r FILE -Y amqp           (one line a frame)
    amqpscope read FILE, piped     against   tshark -r FILE -Y amqp           (the timeline)
    amqpscope read FILE, terminal  against   tshark -r FILE -Y amqp           (rich, colour, cut
                                                                              to the pty's width)

with wall time (median of `--repeat` runs) and peak memory (the child's maximum RSS). The runs
are interleaved: in each round every amqpscope command runs right after the tshark command it is
compared with, and a ratio is the median of those pairs' ratios (a shared machine's load then
moves both sides of a ratio). The last column checks that `summary` streams: its peak memory on a
capture of half the length.

What runs is the build a user has (`--builds installed`, the default): this interpreter's
installed amqpscope (`make install`: compiled with mypyc where a C compiler was found), run from
outside the source tree with no PYTHONPATH; the table names which build that is. `pure` runs
the working tree's sources, `compiled` the working tree compiled by `tools/compiled.py` (into
build/compiled unless it is current).

    python3 bench/run.py [--messages-091 N] [--messages-10 N] [--repeat K] [--keep DIR]
                         [--builds installed,pure,compiled] [--width COLUMNS] [--compiled-dir DIR]
"""

from __future__ import annotations

import argparse
import fcntl
import os
import platform
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tools"))
import compiled  # noqa: E402  (tools/compiled.py)
import synth  # noqa: E402  (a sibling script, not a package)

GNU_TIME = shutil.which("time") if Path("/usr/bin/time").exists() else None


@dataclass(frozen=True)
class Build:
    """One amqpscope to time: the command that starts it and the environment it runs in."""

    name: str
    command: list[str]
    env: dict[str, str]

    def label(self) -> str:
        """The table's build column: which build `installed` turned out to be."""
        if self.name != "installed":
            return self.name
        return f"installed ({'compiled' if 'compiled' in self.version() else 'pure'})"

    def version(self) -> str:
        said = subprocess.run(
            [*self.command, "--version"], capture_output=True, text=True, env=self.env, cwd="/"
        )
        return said.stdout.strip() or said.stderr.strip()


def _without_pythonpath(**extra: str) -> dict[str, str]:
    """This environment without PYTHONPATH, then `extra` (`pure`'s own PYTHONPATH: popped
    after it was set, `pure` ran the installed build)."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return {**env, **extra}


def make_build(name: str, compiled_dir: Path = compiled.DEFAULT) -> Build:
    """`installed`: this interpreter's amqpscope as installed (not this tree's sources);
    `pure`: this tree's sources; `compiled`: this tree compiled by tools/compiled.py (into
    `compiled_dir`)."""
    if name == "installed":
        return Build(name, [sys.executable, "-m", "amqpscope.cli"], _without_pythonpath())
    if name == "pure":
        env = _without_pythonpath(PYTHONPATH=str(ROOT))
        return Build(name, [sys.executable, "-m", "amqpscope.cli"], env)
    if name == "compiled":
        try:
            return Build(name, [str(compiled.install(compiled_dir))], _without_pythonpath())
        except compiled.BuildError as exc:
            raise SystemExit(f"run.py: the compiled build failed: {exc}") from None
    raise SystemExit(f"run.py: --builds: {name!r} is not installed, pure or compiled")


def _drain(fd: int) -> None:
    """Read a pty's output until its last writer is gone, as a terminal would."""
    try:
        while os.read(fd, 1 << 16):
            pass
    except OSError:  # EIO: the child closed the pty
        pass


def _terminal(width: int) -> tuple[int, int]:
    """A pty of `width` columns: (the side the child writes to, the side read here)."""
    reader, writer = os.openpty()
    fcntl.ioctl(writer, termios.TIOCSWINSZ, struct.pack("HHHH", 50, width, 0, 0))
    return writer, reader


def run_once(
    cmd: list[str], env: dict[str, str] | None = None, width: int = 0
) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS in MB) of one run of `cmd`, its output to /dev/null
    (piped: not a terminal), or to a terminal `width` columns wide.

    The peak comes from GNU time (`time -f %M`) when installed: a child of this process would
    inherit this process's own high-water mark through fork and exec, which would hide a
    smaller one; GNU time's is a megabyte. Without it, wait4's number is an upper bound."""
    with tempfile.NamedTemporaryFile("r") as report:
        wrapped = [GNU_TIME, "-f", "%U %S %M", "-o", report.name, *cmd] if GNU_TIME else cmd
        drain = None
        if width:
            stdout, reader = _terminal(width)
            drain = threading.Thread(target=_drain, args=(reader,), daemon=True)
            env = {**(env or os.environ), "TERM": "xterm-256color"}
            env.pop("NO_COLOR", None)
            env.pop("COLUMNS", None)
        else:
            stdout = subprocess.DEVNULL
        start = time.perf_counter()
        child = subprocess.Popen(
            wrapped, stdout=stdout, stderr=subprocess.DEVNULL, env=env, cwd="/"
        )
        if drain is not None:
            os.close(stdout)
            drain.start()
        _, status, usage = os.wait4(child.pid, 0)
        if drain is not None:
            drain.join()
            os.close(reader)
        wall = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{' '.join(cmd)}: exit status {os.waitstatus_to_exitcode(status)}")
        if GNU_TIME:
            user, system, peak = report.read().split()[-3:]
            return wall, float(user) + float(system), int(peak) / 1024
        return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024  # KiB on Linux


def summarise(runs: list[tuple[float, float, float]]) -> tuple[float, float, float]:
    """(median wall seconds, median CPU seconds, peak RSS in MB of the largest run) of runs."""
    return (
        statistics.median(r[0] for r in runs),
        statistics.median(r[1] for r in runs),
        max(r[2] for r in runs),
    )


def measure(
    cmd: list[str], repeat: int, env: dict[str, str] | None = None, width: int = 0
) -> tuple[float, float, float]:
    """`summarise` of `repeat` runs of `cmd` (see `run_once`)."""
    return summarise([run_once(cmd, env, width) for _ in range(repeat)])


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


#: (run name, what the row says, tshark's run it is compared with)
COMMANDS = (
    ("read", "`read --json` vs `-T json -J amqp`", "tshark-json"),
    ("summary", "`summary` vs `-Y amqp`", "tshark-line"),
    ("timeline", "`read` piped vs `-Y amqp`", "tshark-line"),
    ("terminal", "`read` on a terminal vs `-Y amqp`", "tshark-line"),
)


def bench(
    label: str,
    build: Callable[[Path, int], int],
    messages: int,
    tmp: Path,
    repeat: int,
    tshark: str | None,
    builds: list[Build],
    width: int,
) -> list[str]:
    """Build the capture for one version, run every command on it; the table's rows."""
    big, half = tmp / f"{label}.pcap", tmp / f"{label}-half.pcap"
    packets = build(big, messages)
    build(half, messages // 2)
    # interleaved: in each of `repeat` rounds every amqpscope run comes right after a run of the
    # tshark command it is compared with, and a ratio is the median of those pairs' ratios, so a
    # change in the machine's load moves both sides of a ratio
    runs: list[tuple[str, str | None, list[str], dict[str, str] | None, int]] = []
    for me in builds:
        cmd = me.command
        runs += [
            (f"read {me.name}", "tshark-json", [*cmd, "read", "--json", str(big)], me.env, 0),
            (f"summary {me.name}", "tshark-line", [*cmd, "summary", str(big)], me.env, 0),
            (f"summary-half {me.name}", None, [*cmd, "summary", str(half)], me.env, 0),
            (f"timeline {me.name}", "tshark-line", [*cmd, "read", str(big)], me.env, 0),
            (f"terminal {me.name}", "tshark-line", [*cmd, "read", str(big)], me.env, width),
        ]
    theirs_cmd = {
        "tshark-json": [tshark or "", "-r", str(big), "-T", "json", "-J", "amqp"],
        "tshark-line": [tshark or "", "-r", str(big), "-Y", "amqp"],
    }
    tshark_env = _without_pythonpath()
    samples: dict[str, list[tuple[float, float, float]]] = {}
    ratios: dict[str, list[tuple[float, float]]] = {}
    for _ in range(repeat):
        for name, theirs, cmd, env, cols in runs:
            if tshark and theirs:
                t = run_once(theirs_cmd[theirs], tshark_env)
                samples.setdefault(theirs, []).append(t)
            mine = run_once(cmd, env, cols)
            samples.setdefault(name, []).append(mine)
            if tshark and theirs:
                ratios.setdefault(name, []).append((mine[0] / t[0], mine[1] / t[1]))
    got = {name: summarise(taken) for name, taken in samples.items()}
    size = big.stat().st_size / 1e6
    print(f"{label}: {messages} messages, {packets} packets, {size:.1f} MB", file=sys.stderr)
    rows = []
    for command, what, theirs in COMMANDS:
        for me in builds:
            wall, cpu, peak = got[f"{command} {me.name}"]
            row = f"| {label} | {what} | {me.label()} | {wall:.2f} s ({cpu:.2f}) | {peak:.0f} MB |"
            if theirs in got:
                t_wall, t_cpu, t_peak = got[theirs]
                paired = ratios[f"{command} {me.name}"]
                ratio = statistics.median(r[0] for r in paired)
                cpu_ratio = statistics.median(r[1] for r in paired)
                row += (
                    f" {t_wall:.2f} s ({t_cpu:.2f}) | {t_peak:.0f} MB | **{ratio:.2f}**"
                    f" ({cpu_ratio:.2f}) | {peak / t_peak:.2f} |"
                )
            else:
                row += " - | - | - | - |"
            half_peak = got[f"summary-half {me.name}"][2]
            row += f" {half_peak:.0f} MB |" if command == "summary" else " |"
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages-091", type=int, default=138_200, metavar="N")
    parser.add_argument("--messages-10", type=int, default=52_500, metavar="N")
    parser.add_argument("--repeat", type=int, default=1, metavar="K")
    parser.add_argument("--no-tshark", action="store_true", help="time amqpscope only")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="keep the captures in DIR")
    parser.add_argument(
        "--builds",
        default="installed",
        help="amqpscope builds to time: installed (the default), pure, compiled",
    )
    parser.add_argument(
        "--width", type=int, default=160, metavar="COLUMNS", help="the terminal's width"
    )
    parser.add_argument(
        "--compiled-dir",
        type=Path,
        default=compiled.DEFAULT,
        metavar="DIR",
        help="where tools/compiled.py keeps the compiled build (default build/compiled)",
    )
    args = parser.parse_args(argv)
    tshark = None if args.no_tshark else shutil.which("tshark")
    builds = [make_build(name, args.compiled_dir) for name in args.builds.split(",")]
    print(f"machine: {machine()}")
    for me in builds:
        print(f"{me.name}: {me.version()} ({' '.join(me.command)})")
    if tshark:
        print(f"against: {tshark_version(tshark)}")
    print(f"terminal: a pty of {args.width} columns")
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
                rows = bench(label, build, messages, tmp, args.repeat, tshark, builds, args.width)
                for row in rows:
                    print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
