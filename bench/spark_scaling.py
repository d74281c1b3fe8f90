"""Scaling of `amqpscope spark`: local[1] against local[2] on the same input, and throughput per
core against single-process `amqpscope read --json` over the same files, measured in one run.

The input is made here at run time: FILES files, each COPIES copies of a recorded capture, every
copy a connection of its own (client port moved, timestamps after the previous copy's).

Two measures, because a shared machine makes wall clocks lie:
- per core (wall): packets / job seconds / cores. The job's seconds are from `amqpscope spark`'s
  own "done in" line (the JVM's start excluded); `read --json` is one process per file, in turn.
- per CPU second: packets / CPU seconds used by every process of the run (the JVM, the Python
  workers, the driver; sampled from /proc, so start-up is included), against read's.
And, as the ceiling for local[N] (N > 1): `read --json` in N chains of processes at once, per
core against one alone: what the machine itself loses when N cores work at once. `read` as it
runs by default (the timeline, piped) is a row too: the same decode, a different output.

The `amqp` data source (`spark.read.format("amqp")`) is a row too: the `frames` table of the same
folder read into Spark's `noop` sink (every row handed to the JVM, nothing written), timed from
the query's start (the JVM's start excluded, as for the job); its CPU seconds are the query's
too (the JVM's start excluded, unlike the job's row).

Each data source run is a session of its own with two queries: the first pays what a session
pays once (Spark's Python planning workers start, the JVM's classes load and its JIT is cold),
the second is what a session's later queries cost; both ratios are printed, against a
`read --json` of the same files run just before (a row of its own), and a last line gives them
side by side. A third adds the session's start to the first query (the JVM's, Spark's
lookup of data sources, the driver's imports: Spark's costs, mostly, which every session
pays once whatever it reads), as a script that starts Spark for one read pays it.
`--spark-zips` adds the same runs as before `spark.daemon.spark_home`
(SPARK_HOME set to pyspark's own folder, so Spark's planning workers import pyspark from its
zips): the baseline of that change, alternated with the new runs. `--cds` adds runs with a class
data sharing archive of Spark's classes (`-XX:SharedArchiveFile`, made by a run of its own
first, not measured): what docs/spark.md's recipe saves. `--java-options=OPTS` (repeatable)
adds runs whose JVM has these options instead of `-XX:TieredStopAtLevel=1`. `--baseline
TREE` adds the same runs with another source tree's code (PYTHONPATH=TREE, e.g. `git archive`
of the commit before a change), alternated with this tree's: a change measured against what it
changes, in one run; `--baseline-build DIR` does so for a compiled build (`python3
tools/compiled.py DIR` in a checkout of that commit: its interpreter runs the session and its
workers). `--floor` adds runs of a data source that decodes nothing (`floor_source.py`): it hands
Spark the `amqp` source's own batches of the same files, written before the session, so its
queries cost what Spark's Python data source path costs for these rows (the worker passing the
batches on, the JVM copying every value into its rows): the part no Python data source avoids.
The last lines then say what that leaves a later query at best.

Each data source run has a temporary folder of its own (TMPDIR), so its first query scans the
files (`plan.scan`) as a session's first query over new files does, whatever an earlier run kept.

`--build compiled` runs both sides on the mypyc-compiled build (`tools/compiled.py`), the Spark
workers included (local mode starts them with the driver's interpreter).

    python3 bench/spark_scaling.py [--files 8] [--copies 500] [--cores 1 2] [--build pure]
        [--source-only] [--spark-zips] [--cds] [--baseline TREE] [--baseline-build DIR]
        [--floor] [--java-options=OPTS]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from synth import multiply  # bench/ is the script's folder

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import compiled  # tools/compiled.py

#: the projection row's columns: what a query of who sent what when selects
PROJECTION = "capture_file,conn_key,frame,time,dir,channel,name"
BENCH = Path(__file__).resolve().parent
DEFAULT = BENCH.parent / "captures" / "091-qos-prefetch.pcap"
TICK = os.sysconf("SC_CLK_TCK")


def _cpu(pid: int) -> dict[int, float]:
    """CPU seconds of `pid` and every process below it, by pid."""
    out: dict[int, float] = {}
    stack = [pid]
    while stack:
        at = stack.pop()
        try:
            with open(f"/proc/{at}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[at] = (int(fields[11]) + int(fields[12])) / TICK
            for task in os.listdir(f"/proc/{at}/task"):
                with open(f"/proc/{at}/task/{task}/children") as f:
                    stack.extend(int(child) for child in f.read().split())
        except (OSError, ValueError, IndexError):
            continue
    return out


def run_spark(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the whole process tree, stderr) of one spark run."""
    seen: dict[int, float] = {}
    start = time.perf_counter()
    child = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd="/",  # not the source tree, which `-m` would put first on the path
        env={**os.environ, **(env or {})},
    )
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            for pid, seconds in _cpu(child.pid).items():
                seen[pid] = max(seen.get(pid, 0.0), seconds)
            done.wait(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = child.communicate()
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(command)}: exit status {child.returncode}\n{err[-2000:]}")
    return wall, sum(seen.values()), err


def run_single(python: str, paths: list[Path], options: list[str]) -> tuple[float, float]:
    """(wall, CPU seconds) of `read OPTIONS` over `paths`, one process per file, in turn."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    for path in paths:
        subprocess.run(
            [python, "-m", "amqpscope.cli", "read", *options, str(path)],
            stdout=subprocess.DEVNULL,
            check=True,
            cwd="/",
        )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def run_reads(python: str, paths: list[Path], chains: int) -> float:
    """Wall seconds of `read --json` over `paths`, dealt out to `chains` processes at a time."""

    def chain(mine: list[Path]) -> None:
        for path in mine:
            subprocess.run(
                [python, "-m", "amqpscope.cli", "read", "--json", str(path)],
                stdout=subprocess.DEVNULL,
                check=True,
                cwd="/",
            )

    workers = [threading.Thread(target=chain, args=(paths[i::chains],)) for i in range(chains)]
    start = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return time.perf_counter() - start


#: a driver that reads the frames table with the data source into the noop sink; says the query's
#: seconds and the CPU seconds its process tree (the driver, the JVM, the Python workers) spent
#: while the query ran (sampled from /proc, as `run_spark` does for a whole run)
DATASOURCE = """
import os, sys, threading, time
from amqpscope.spark import spark as job
folder, master, columns, source = (sys.argv[1:] + ["amqp"])[:4]
TICK = os.sysconf("SC_CLK_TCK")

def tree():
    out, stack = {}, [os.getpid()]
    while stack:
        at = stack.pop()
        try:
            with open(f"/proc/{at}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[at] = (int(fields[11]) + int(fields[12])) / TICK
            for task in os.listdir(f"/proc/{at}/task"):
                with open(f"/proc/{at}/task/{task}/children") as f:
                    stack.extend(int(child) for child in f.read().split())
        except (OSError, ValueError, IndexError):
            continue
    return out

spent = [0.0]  # this sampler's own CPU: the measuring is not the query's cost


def sample(stop, seen):
    while not stop.is_set():
        began = time.thread_time()
        for pid, seconds in tree().items():
            seen[pid] = max(seen.get(pid, 0.0), seconds)
        spent[0] += time.thread_time() - began
        stop.wait(0.1)


# the session's start: the JVM's, Spark's lookup of data sources, this driver's imports (what
# the query rows leave out; the CPU of this interpreter's own start, before this line, too)
seen, stop = {}, threading.Event()
sampler = threading.Thread(target=sample, args=(stop, seen), daemon=True)
start = time.perf_counter()
sampler.start()
spark = job.session(master)
stop.set()
sampler.join()
for pid, seconds in tree().items():
    seen[pid] = max(seen.get(pid, 0.0), seconds)
wall = time.perf_counter() - start
print(f"session in {wall:.3f} s, {sum(seen.values()) - spent[0]:.3f} CPU s", file=sys.stderr)
if source == "floor":
    from floor_source import FloorSource  # bench/, on the workers' path too (PYTHONPATH)

    spark.dataSource.register(FloorSource)


def query():
    base = tree()
    seen = dict(base)
    spent[0] = 0.0
    stop = threading.Event()
    sampler = threading.Thread(target=sample, args=(stop, seen), daemon=True)
    start = time.perf_counter()
    sampler.start()
    if source == "floor":  # precomputed batches, no decode: Spark's share alone (`--floor`)
        reader = spark.read.format("amqpfloor").option("columns", columns)
    else:
        reader = spark.read.format("amqp").option("table", "frames")
        if columns:  # a projection: the schema of the columns a query selects
            from amqpscope.spark import tables
            kinds = dict(tables.COLUMNS["frames"])
            reader = reader.schema(", ".join(f"`{c}` {kinds[c]}" for c in columns.split(",")))
    reader.load(folder).write.format("noop").mode("overwrite").save()
    wall = time.perf_counter() - start
    stop.set()
    sampler.join()
    for pid, seconds in tree().items():
        seen[pid] = max(seen.get(pid, 0.0), seconds)
    cpu = sum(seen.values()) - sum(base.get(pid, 0.0) for pid in seen) - spent[0]
    print(f"query in {wall:.3f} s, {cpu:.3f} CPU s", file=sys.stderr)


query()  # the session's first: Spark's Python planning daemons start, the JIT is cold
query()  # again, as a session's later queries run
spark.stop()
"""


def make_archive(python: str, folder: Path, archive: Path) -> None:
    """A class data sharing archive of the classes a data source session loads: one session
    with `-XX:ArchiveClassesAtExit`, which the JVM writes as it exits (after its driver has)."""
    options = f"-XX:TieredStopAtLevel=1 -XX:ArchiveClassesAtExit={archive}"
    run_spark(
        [python, "-c", DATASOURCE, str(folder), "local[1]", ""],
        {"AMQPSCOPE_SPARK_JAVA_OPTIONS": options},
    )
    limit = time.monotonic() + 600
    while time.monotonic() < limit:  # the JVM goes on after its driver, dumping
        dumping = subprocess.run(
            ["pgrep", "-f", f"ArchiveClassesAtExit={archive}"], capture_output=True, text=True
        )
        if not dumping.stdout.strip():
            break
        time.sleep(1)
    if not archive.exists():
        raise SystemExit(f"{archive}: the JVM wrote no archive")


def source_runs(args: argparse.Namespace, tmp: Path) -> list[tuple[str, dict[str, str], str]]:
    """(label, environment, source) of each kind of data source run: as shipped, the baselines,
    and the floor (`floor_source`: precomputed batches of the same rows)."""
    import pyspark

    runs: list[tuple[str, dict[str, str], str]] = [("", {}, "amqp")]
    if args.spark_zips:
        runs.append((" (Spark's zips)", {"SPARK_HOME": os.path.dirname(pyspark.__file__)}, "amqp"))
    if args.cds:
        archive = tmp / "spark.jsa"
        options = f"-XX:TieredStopAtLevel=1 -XX:SharedArchiveFile={archive}"
        runs.append((" (CDS)", {"AMQPSCOPE_SPARK_JAVA_OPTIONS": options}, "amqp"))
    if args.baseline:
        runs.append(
            (" (baseline tree)", {"PYTHONPATH": str(Path(args.baseline).resolve())}, "amqp")
        )
    for options in args.java_options or []:
        runs.append((f" (JVM: {options})", {"AMQPSCOPE_SPARK_JAVA_OPTIONS": options}, "amqp"))
    if args.baseline_build:  # another compiled build's interpreter (its workers too)
        python = str(Path(args.baseline_build).resolve() / "bin" / "python")
        runs.append((" (baseline build)", {"AMQPSCOPE_BENCH_PYTHON": python}, "amqp"))
    if args.floor:  # the workers import `floor_source` from bench/
        path = os.pathsep.join(p for p in (str(BENCH), os.environ.get("PYTHONPATH")) if p)
        runs.append((" (floor: its batches precomputed, no decode)", {"PYTHONPATH": path}, "floor"))
    return runs


def write_floor(python: str, folder: Path, out: Path) -> None:
    """The `amqp` source's batches of `folder`'s frames, as its tasks make them, into `out`."""
    from floor_source import WRITE

    out.mkdir()
    scans = out.parent / "floor-scans"  # its scans kept apart from the measured runs'
    scans.mkdir()
    env = {**os.environ, "TMPDIR": str(scans)}
    subprocess.run([python, "-c", WRITE, str(folder), str(out)], check=True, cwd="/", env=env)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capture", type=Path, default=DEFAULT)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--copies", type=int, default=500)
    parser.add_argument("--cores", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--build", choices=["pure", "compiled"], default="pure")
    parser.add_argument(
        "--source-only", action="store_true", help="read --json and the data source rows only"
    )
    parser.add_argument(
        "--columns",
        default=PROJECTION,
        help="the data source's projected row: these frames columns (comma-separated;"
        " empty: no projected run)",
    )
    parser.add_argument(
        "--spark-zips",
        action="store_true",
        help="also the data source as before: its planning workers import pyspark's zips",
    )
    parser.add_argument(
        "--cds", action="store_true", help="also the data source with a CDS archive of Spark"
    )
    parser.add_argument(
        "--baseline", help="also the data source with this source tree's code, alternated"
    )
    parser.add_argument(
        "--baseline-build",
        help="also the data source run by this compiled build (tools/compiled.py DIR), alternated",
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also a data source that hands Spark the same batches precomputed (Spark's share)",
    )
    parser.add_argument(
        "--java-options",
        action="append",
        help="also the data source with these options of its JVM (AMQPSCOPE_SPARK_JAVA_OPTIONS)",
    )
    args = parser.parse_args()
    python = sys.executable
    if args.build == "compiled":
        python = str(compiled.install().parent / "python")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "in"
        folder.mkdir()
        packets = 0
        for i in range(args.files):
            packets += multiply(args.capture, folder / f"cap{i:03}.pcap", args.copies)
        size = sum(p.stat().st_size for p in folder.iterdir()) / 1e6
        print(
            f"input: {args.files} files, {packets} packets, {size:.1f} MB;"
            f" {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()},"
            f" load average {os.getloadavg()[0]:.1f} at the start; {args.build} build"
        )
        single, read_cpu = run_single(python, sorted(folder.iterdir()), ["--json"])
        read_rate, read_per_cpu = packets / single, packets / read_cpu
        print(
            "| run | cores | wall s | job s | packets/s | per core | vs read"
            " | CPU s | per CPU s | vs read |"
        )
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        print(
            f"| `read --json`, one process per file | 1 | {single:.1f} | {single:.1f} |"
            f" {read_rate:.0f} | {read_rate:.0f} | 1.00 | {read_cpu:.1f} | {read_per_cpu:.0f} |"
            " 1.00 |"
        )
        # `read` as it runs by default: the timeline (piped, so plain text)
        if not args.source_only:
            wall, cpu = run_single(python, sorted(folder.iterdir()), [])
            rate = packets / wall
            print(
                f"| `read` (the timeline), one process per file | 1 | {wall:.1f} | {wall:.1f} |"
                f" {rate:.0f} | {rate:.0f} | {rate / read_rate:.2f} | {cpu:.1f} |"
                f" {packets / cpu:.0f} | {packets / cpu / read_per_cpu:.2f} |"
            )
        for cores in (c for c in args.cores if c > 1 and not args.source_only):
            # the machine's own scaling: `cores` chains of `read --json` at once (shared caches
            # and memory bandwidth, a VM's neighbours); Spark on as many cores cannot beat it
            wall = run_reads(python, sorted(folder.iterdir()), cores)
            rate = packets / wall
            print(
                f"| `read --json`, {cores} processes at once | {cores} | {wall:.1f} | {wall:.1f} |"
                f" {rate:.0f} | {rate / cores:.0f} | {rate / cores / read_rate:.2f} | | | |"
            )
        for cores in [] if args.source_only else args.cores:
            wall, cpu, err = run_spark(
                [python, "-m", "amqpscope.cli", "spark", str(folder), "--out",
                 str(Path(tmp) / f"out{cores}"), "--master", f"local[{cores}]"]
            )  # fmt: skip
            job = float(re.findall(r"done in ([0-9.]+) s", err)[-1])
            rate = packets / job
            print(
                f"| `spark --master local[{cores}]` | {cores} | {wall:.1f} | {job:.1f} |"
                f" {rate:.0f} | {rate / cores:.0f} | {rate / cores / read_rate:.2f} |"
                f" {cpu:.1f} | {packets / cpu:.0f} | {packets / cpu / read_per_cpu:.2f} |"
            )
        runs = source_runs(args, Path(tmp))
        if args.cds:
            make_archive(python, folder, Path(tmp) / "spark.jsa")
        if args.floor:
            write_floor(python, folder, Path(tmp) / "floor")
        ratios: list[str] = []
        for cores, columns, (label, env, source) in [
            (c, p, r) for c in args.cores for p in dict.fromkeys(("", args.columns)) for r in runs
        ]:  # the kinds of run alternate: the machine's load falls on each alike
            # and each has a baseline of its own, just before it: a shared machine's load
            # moves more in the minutes a run takes than between a run and the next
            base, base_cpu = run_single(python, sorted(folder.iterdir()), ["--json"])
            read_rate, read_per_cpu = packets / base, packets / base_cpu
            print(
                f"| `read --json` again, the next rows' baseline | 1 | {base:.1f} | {base:.1f} |"
                f" {read_rate:.0f} | {read_rate:.0f} | 1.00 | {base_cpu:.1f} |"
                f" {read_per_cpu:.0f} | 1.00 |"
            )
            fresh = Path(tempfile.mkdtemp(dir=tmp))  # no scan kept by an earlier run
            read_from = Path(tmp) / "floor" if source == "floor" else folder
            runner = env.get("AMQPSCOPE_BENCH_PYTHON", python)
            wall, _, err = run_spark(
                [runner, "-c", DATASOURCE, str(read_from), f"local[{cores}]", columns, source],
                {**env, "TMPDIR": str(fresh)},
            )
            found = re.findall(r"query in ([0-9.]+) s, ([0-9.]+) CPU s", err)
            session_s, session_cpu = map(
                float, re.findall(r"session in ([0-9.]+) s, ([0-9.]+)", err)[0]
            )
            what = f"{len(columns.split(','))} columns" if columns else "frames"
            fmt = "amqpfloor" if source == "floor" else "amqp"
            said = []
            for which, (query, cpu) in zip(("first", "again"), found, strict=True):
                query_s, cpu_s = float(query), float(cpu)
                rate = packets / query_s
                print(
                    f"| `read.format('{fmt}')` {what}, local[{cores}]{label}, {which} query"
                    f" (CPU: the query's) | {cores} | {wall:.1f} | {query_s:.1f} | {rate:.0f} |"
                    f" {rate / cores:.0f} | {rate / cores / read_rate:.2f} | {cpu_s:.1f} |"
                    f" {packets / cpu_s:.0f} | {packets / cpu_s / read_per_cpu:.2f} |"
                )
                said.append(f"{packets / cpu_s / read_per_cpu:.2f}")
            # and the first query with the session's start (the JVM's mostly): what one
            # `spark.read` costs a script that starts Spark for it
            query_s, cpu_s = session_s + float(found[0][0]), session_cpu + float(found[0][1])
            rate = packets / query_s
            print(
                f"| `read.format('{fmt}')` {what}, local[{cores}]{label}, first query with the"
                f" session's start | {cores} | {wall:.1f} | {query_s:.1f} | {rate:.0f} |"
                f" {rate / cores:.0f} | {rate / cores / read_rate:.2f} | {cpu_s:.1f} |"
                f" {packets / cpu_s:.0f} | {packets / cpu_s / read_per_cpu:.2f} |"
            )
            said.append(f"{packets / cpu_s / read_per_cpu:.2f} with the session's start")
            ratios.append(f"{what}, local[{cores}]{label}: {' / '.join(said)}")
            if source == "floor":  # Spark's share of a later query, and what it leaves
                spark_cpu = float(found[1][1])
                ratios.append(
                    f"  Spark's share of a later query: {spark_cpu:.2f} CPU s,"
                    f" {spark_cpu / base_cpu:.2f} of `read --json`'s {base_cpu:.2f}; a later"
                    " query whose decode, rows and batches cost no more than `read --json`"
                    f" is at most {base_cpu / (base_cpu + spark_cpu):.2f}"
                )
        if ratios:
            print(
                "per CPU second of `read --json`, first query / later queries / first query"
                " with the session's start:"
            )
            for line in ratios:
                print(f"  {line}")
        print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
