"""The Spark job: folders of captures in, Parquet tables out (`amqpscope spark`, or spark-submit).

    spark-submit --py-files amqpscope-X-py3-none-any.whl amqpscope/pipeline/spark.py \\
        hdfs:///captures/ --out hdfs:///amqp/tables [--report]

Plan (see docs/spark.md):
1. list the inputs on the driver (files, folders, globs; `scheme://` URIs through Hadoop);
2. per capture file, on the executors: `rows.decode_file` (the CLI's Dissector and Tracker) →
   rows of every table, plus the connections at the file's edges with their packets; cached;
3. on the driver: order the files by their first packet, `stitch.groups` over the edges;
4. per stitched connection: its parts' packets grouped by key, decoded and tracked once
   (`rows.decode_group`); its per-file rows are dropped;
5. write each table as Parquet, partitioned (`tables.PARTITIONS`); `--report` runs the queries
   of `report.QUERIES` over them.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from amqpscope.pipeline import rows, stitch
from amqpscope.pipeline.tables import PARTITIONS, TABLES, TIMES, index, struct_type

INSTALL_PYSPARK = "pip install 'amqpscope[spark]'"
INSTALL_JAVA = "apt-get install default-jre-headless"
URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
GLOB = re.compile(r"[*?\[]")
#: bytes of capture per decode task, when there are enough files to share them out
CHUNK = 64 << 20


class PipelineError(Exception):
    """Bad input or a missing prerequisite: one line for the user."""


def missing() -> str | None:
    """Why the job cannot run here (pyspark or Java missing), or None."""
    import importlib.util

    if importlib.util.find_spec("pyspark") is None:
        return f"pyspark is not installed: {INSTALL_PYSPARK}"
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java or not os.path.exists(java):
        return f"Java is not installed (Spark needs it): {INSTALL_JAVA}, or set JAVA_HOME"
    return None


def list_inputs(inputs: Iterable[str]) -> tuple[list[str], list[str]]:
    """(local capture files, Hadoop URIs). Folders are walked (hidden entries skipped) and keep
    only files that start like a capture; files named outright are all kept (an unreadable one
    becomes a finding)."""
    local: list[str] = []
    remote: list[str] = []
    for item in inputs:
        if item.startswith("file://"):
            item = item[len("file://") :]
        elif URI.match(item):
            remote.append(item)
            continue
        if GLOB.search(item):
            matched = sorted(glob.glob(item, recursive=True))
            if not matched:
                raise PipelineError(f"{item}: no such files")
            for path in matched:
                local.extend(_walk(path) if os.path.isdir(path) else [os.path.abspath(path)])
        elif os.path.isdir(item):
            local.extend(_walk(item))
        elif os.path.exists(item):
            local.append(os.path.abspath(item))
        else:
            raise PipelineError(f"{item}: no such file or folder")
    seen: set[str] = set()
    local = [p for p in local if not (p in seen or seen.add(p))]  # type: ignore[func-returns-value]
    return local, remote


def _walk(folder: str) -> list[str]:
    out = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            path = os.path.join(root, name)
            if name.startswith("."):
                continue
            try:
                with open(path, "rb") as f:
                    head = f.read(4)
            except OSError:
                continue
            if rows.looks_like_capture(head):
                out.append(os.path.abspath(path))
    return out


def session(master: str | None = None, app: str = "amqpscope") -> Any:
    """A SparkSession: `master` if given; under spark-submit, what it set; else local[*]."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app).config("spark.sql.session.timeZone", "UTC")
    if master is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        master = "local[*]"
    if master is not None:
        builder = builder.master(master)
        if master.startswith("local"):
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            builder = builder.config("spark.ui.enabled", "false").config(
                "spark.sql.shuffle.partitions", "8"
            )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _decode_local(batches: Iterator[list[str]]) -> Iterator[rows.Record]:
    for batch in batches:
        for path in batch:
            yield from rows.decode_file(path)


def batches(paths: list[str], slices: int) -> list[list[str]]:
    """`slices` lists of files of about equal bytes: largest first, dealt out in snake order."""
    ordered = sorted(paths, key=lambda p: (-os.path.getsize(p), p))
    out: list[list[str]] = [[] for _ in range(min(slices, len(ordered)))]
    for i, path in enumerate(ordered):
        turn, at = divmod(i, len(out))
        out[at if turn % 2 == 0 else len(out) - 1 - at].append(path)
    return out


def _decode_remote(items: Iterator[tuple[str, bytes]]) -> Iterator[rows.Record]:
    for uri, data in items:
        if rows.looks_like_capture(data[:4]):
            yield from rows.decode_file(uri, data=data)


def run(
    inputs: list[str],
    out: str,
    master: str | None = None,
    partitions: int | None = None,
    report: bool = False,
    spark: Any = None,
    progress: Callable[[str], None] | None = None,
    max_gap: float = stitch.MAX_GAP,
) -> dict[str, Any]:
    """Run the whole job; returns what it did (files, rows per table, stitched connections)."""
    from pyspark import StorageLevel

    say = progress or (lambda text: None)
    started = time.perf_counter()
    local, remote = list_inputs(inputs)
    if not local and not remote:
        raise PipelineError("no capture files in " + " ".join(inputs))
    spark = spark or session(master)
    sc = spark.sparkContext
    started = time.perf_counter()  # the job, not the JVM's start
    total = sum(os.path.getsize(p) for p in local)
    # a task per file costs ~0.1 s: small files share tasks, big ones get one each
    slices = partitions or max(1, min(len(local), max(2 * sc.defaultParallelism, total // CHUNK)))
    say(
        f"{len(local)} capture files ({total / 1e6:.1f} MB)"
        + (f" and {len(remote)} URIs" if remote else "")
        + f" on {sc.master}, {slices} partitions"
    )

    # 1-2: decode every file where it lies (largest first, so the long ones start early)
    parts = []
    if local:
        work = batches(local, slices)
        parts.append(sc.parallelize(work, len(work)).mapPartitions(_decode_local))
    if remote:
        files = sc.binaryFiles(",".join(remote), minPartitions=partitions)
        parts.append(files.mapPartitions(_decode_remote))
    records = parts[0] if len(parts) == 1 else sc.union(parts)
    # frames are most of the bytes: they are read from `records` once, when written; the rest
    # (small tables, edges and their packets) is split off into its own cache in the same pass
    # that collects what the driver needs
    records = records.persist(StorageLevel.MEMORY_AND_DISK)
    rest = records.filter(lambda r: r[0] != "frames").persist(StorageLevel.MEMORY_AND_DISK)
    small = rest.filter(lambda r: r[0] in ("meta", "edge")).collect()
    metas = [value for kind, value in small if kind == "meta"]
    edges = [value for kind, value in small if kind == "edge"]
    packets = sum(m["packets"] for m in metas)
    frames = sum(m["frames"] for m in metas)
    unreadable = [m for m in metas if m.get("error")]
    say(
        f"decoded {len(metas)} files: {packets} packets, {frames} frames"
        f" in {time.perf_counter() - started:.1f} s"
        + (f"; {len(unreadable)} unreadable (see the findings table)" if unreadable else "")
    )

    # 3: stitch connections across files, in time order
    order = {
        m["capture"]: i
        for i, m in enumerate(
            sorted(metas, key=lambda m: (m["first_ts"] is None, m["first_ts"] or 0, m["capture"]))
        )
    }
    for edge in edges:
        edge.order = order.get(edge.capture, 0)
    groups = stitch.groups(edges, max_gap)
    members = {(e.capture, e.conn): (gid, e) for gid, group in enumerate(groups) for e in group}
    if groups:
        say(
            f"stitched {len(groups)} connections across rotated files"
            f" ({sum(len(g) for g in groups)} parts)"
        )
    members_b = sc.broadcast(members)

    # 4: per-file rows, minus the parts of stitched connections; plus the stitched ones
    positions = {t: (index(t)["capture"], index(t)["conn"]) for t in TABLES}

    def kept(record: rows.Record) -> bool:
        kind, value = record
        if kind not in positions:
            return False
        at_capture, at_conn = positions[kind]
        return (value[at_capture], value[at_conn]) not in members_b.value

    stitched = None
    if groups:
        stitched = (
            rest.filter(lambda r: r[0] == "packets" and (r[1][0], r[1][1]) in members_b.value)
            .map(lambda r: members_b.value[(r[1][0], r[1][1])] + (r[1][2],))
            .map(lambda m: (m[0], (m[1], m[2])))
            .groupByKey(max(1, min(len(groups), sc.defaultParallelism)))
            .flatMap(lambda kv: rows.decode_group(kv[1]))
            .persist(StorageLevel.MEMORY_AND_DISK)
        )

    # 5: write (frames first: the pass over `records` that frees it)
    from pyspark.sql.functions import col, timestamp_seconds

    counts: dict[str, int] = {}
    base = out.rstrip("/")
    for table in TABLES:
        counter = sc.accumulator(0)

        def pick(
            record: rows.Record, t: str = table, n: Any = counter, whole: bool = False
        ) -> bool:
            if record[0] != t or not (whole or kept(record)):
                return False
            n.add(1)
            return True

        data = (records if table == "frames" else rest).filter(pick)
        if stitched is not None:
            data = data.union(stitched.filter(lambda r, pick=pick: pick(r, whole=True)))
        frame = spark.createDataFrame(data.map(lambda r: r[1]), struct_type(table), False)
        for name, source in TIMES.get(table, {}).items():  # timestamps made on the JVM side
            frame = frame.withColumn(name, timestamp_seconds(col(source)))
        path = f"{base}/{table}"
        frame.write.mode("overwrite").partitionBy(*PARTITIONS[table]).parquet(path)
        counts[table] = counter.value
        say(f"wrote {table}: {counts[table]} rows → {path}")
        if table == "frames":
            records.unpersist()
    rest.unpersist()
    if stitched is not None:
        stitched.unpersist()
    elapsed = time.perf_counter() - started
    say(f"done in {elapsed:.1f} s ({packets / max(elapsed, 1e-9):.0f} packets/s)")
    result = {
        "files": len(metas),
        "packets": packets,
        "frames": frames,
        "tables": counts,
        "stitched": [[(e.capture, e.conn) for e in g] for g in groups],
        "seconds": elapsed,
    }
    if report:
        from amqpscope.pipeline import report as reports

        reports.run(spark, base, print)
    return result


def main(argv: list[str] | None = None) -> int:
    """spark-submit's entry: the same options as `amqpscope spark`."""
    parser = argparse.ArgumentParser(prog="amqpscope-spark", description=__doc__.splitlines()[0])
    parser.add_argument("inputs", nargs="+", metavar="INPUT")
    parser.add_argument("--out", required=True)
    parser.add_argument("--master")
    parser.add_argument("--partitions", type=int)
    parser.add_argument("--report", action="store_true")
    args = parser.parse_args(argv)
    why = missing()
    if why:
        print(f"amqpscope: {why}", file=sys.stderr)
        return 1
    try:
        run(
            args.inputs,
            args.out,
            args.master,
            args.partitions,
            args.report,
            progress=lambda text: print(f"amqpscope: {text}", file=sys.stderr, flush=True),
        )
    except PipelineError as exc:
        print(f"amqpscope: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
