"""The Spark job: folders of captures in, Parquet tables out (`amqpscope spark`, or spark-submit).

    spark-submit --py-files amqpscope-X-py3-none-any.whl amqpscope/pipeline/submit.py \\
        hdfs:///captures/ --out hdfs:///amqp/tables [--report]

Plan (see docs/spark.md):
1. list the inputs on the driver (local files, folders, globs; URIs, `file://` too, with
   Hadoop's FileSystem, read on the executors by Spark's `binaryFile` source);
2. per capture file, on the executors, in `mapInArrow`: `rows.decode_file` (the CLI's Dissector
   and Tracker) → rows of every table as Arrow batches (`batches.pack`), plus the connections
   at the file's edges with their packets; cached by the JVM, which writes the frames table
   from the same pass;
3. on the driver: order the files by their first packet, `stitch.groups` over the edges;
4. per stitched connection: its parts' packets grouped by key, decoded and tracked once
   (`rows.decode_group`); its per-file rows are dropped (the frames partitions of the files it
   touches are written again);
5. write the other tables as Parquet, partitioned (`tables.PARTITIONS`); `--report` runs the
   queries of `report.QUERIES` over them.
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
from amqpscope.pipeline.batches import from_blobs, loads, pack, to_blob, union_spark_type
from amqpscope.pipeline.tables import COLUMNS, PARTITIONS, TABLES, TIMES

INSTALL_PYSPARK = "pip install 'amqpscope[spark]'"
INSTALL_JAVA = "apt-get install default-jre-headless"
URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
GLOB = re.compile(r"[*?\[]")
#: bytes of capture per decode task, when there are enough files to share them out
CHUNK = 64 << 20


class PipelineError(Exception):
    """Bad input or a missing prerequisite: one line for the user."""


def missing() -> str | None:
    """Why the job cannot run here (pyspark, pyarrow, pandas or Java missing), or None."""
    import importlib.util

    for module in ("pyspark", "pyarrow", "pandas"):  # mapInArrow needs the last two
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed: {INSTALL_PYSPARK}"
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java or not os.path.exists(java):
        return f"Java is not installed (Spark needs it): {INSTALL_JAVA}, or set JAVA_HOME"
    return None


def list_inputs(inputs: Iterable[str]) -> tuple[list[str], list[str]]:
    """(local capture files, Hadoop URIs). Local folders are walked (hidden entries skipped) and
    keep only files that start like a capture; files named outright are all kept (an unreadable
    one becomes a finding). URIs (`file://` too) are listed later, by Hadoop (`hadoop_files`)."""
    local: list[str] = []
    remote: list[str] = []
    for item in inputs:
        if URI.match(item):
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


def _java_error(exc: Exception) -> tuple[str, str]:
    """(Java class's simple name, message) of a Py4J error, or ('', text)."""
    java = getattr(exc, "java_exception", None)
    if java is None:
        return "", str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    try:
        return str(java.getClass().getSimpleName()), str(java.getMessage() or "")
    except Exception:
        return "", str(exc).splitlines()[0]


def hadoop_files(sc: Any, uris: list[str]) -> list[tuple[str, int, bool]]:
    """Each URI listed with Hadoop's FileSystem (globs and folders, walked; names starting with
    `.` or `_` skipped): `(path as Hadoop names it, bytes, named outright)`.

    A scheme with no filesystem on the classpath, or nothing there, is one `PipelineError` line.
    """
    jvm = sc._jvm
    conf = sc._jsc.hadoopConfiguration()
    out: list[tuple[str, int, bool]] = []
    for uri in uris:
        try:
            path = jvm.org.apache.hadoop.fs.Path(uri)
            fs = path.getFileSystem(conf)
            statuses = fs.globStatus(path)
            if not statuses:
                raise PipelineError(f"{uri}: no such file or folder")
            for status in statuses:
                if not status.isDirectory():
                    out.append((status.getPath().toString(), status.getLen(), True))
                    continue
                files = fs.listFiles(status.getPath(), True)
                while files.hasNext():
                    found = files.next()
                    name = found.getPath().toString()
                    relative = name[len(status.getPath().toString()) :]
                    if any(part[:1] in (".", "_") for part in relative.split("/") if part):
                        continue
                    out.append((name, found.getLen(), False))
        except PipelineError:
            raise
        except Exception as exc:  # Py4JJavaError: say it in one line
            kind, message = _java_error(exc)
            scheme = uri.split(":", 1)[0]
            if (
                kind == "UnsupportedFileSystemException"
                or "No FileSystem for scheme" in message
                or ("ClassNotFoundException" in message and "FileSystem" in message)
            ):
                version = str(jvm.org.apache.hadoop.util.VersionInfo.getVersion())
                extra = (
                    f"; for s3a: --packages org.apache.hadoop:hadoop-aws:{version}"
                    if scheme in ("s3a", "s3", "s3n")
                    else ""
                )
                raise PipelineError(
                    f"{uri}: no Hadoop filesystem for scheme '{scheme}' on Spark's classpath"
                    f" (add its jar with --packages or --jars{extra})"
                ) from None
            if kind == "FileNotFoundException":
                raise PipelineError(f"{uri}: no such file or folder") from None
            raise PipelineError(f"{uri}: {kind + ': ' if kind else ''}{message}") from None
    seen: set[str] = set()
    return [f for f in out if not (f[0] in seen or seen.add(f[0]))]  # type: ignore[func-returns-value]


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
            builder = (
                builder.config("spark.ui.enabled", "false")
                .config("spark.sql.shuffle.partitions", "8")
                .config("spark.driver.memory", os.environ.get("AMQPSCOPE_SPARK_MEMORY", "2g"))
            )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _decode_local(options: dict[str, Any]) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """`mapInArrow` over rows of `paths` (the files of one task): the files' union batches."""

    def run(inputs: Iterator[Any]) -> Iterator[Any]:
        def records() -> Iterator[rows.Record]:
            for batch in inputs:
                for paths in batch.column(0).to_pylist():
                    for path in paths:
                        yield from rows.decode_file(path, options=options)

        yield from pack(records())

    return run


def _decode_remote(
    named: frozenset[str], options: dict[str, Any]
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """`mapInArrow` over Spark's `binaryFile` rows (path, content): the files' union batches."""

    def run(inputs: Iterator[Any]) -> Iterator[Any]:
        def records() -> Iterator[rows.Record]:
            for batch in inputs:
                paths = batch.column("path").to_pylist()
                contents = batch.column("content")
                for i, uri in enumerate(paths):
                    data = contents[i].as_py()
                    if uri in named or rows.looks_like_capture(data[:4]):
                        yield from rows.decode_file(uri, data=data, options=options)

        yield from pack(records())

    return run


def _decode_groups(
    groups: Iterator[tuple[int, Iterable[Any]]], options: dict[str, Any]
) -> Iterator[tuple[bytes]]:
    """The stitched connections of one task, decoded; out as IPC blobs of union batches."""

    def records() -> Iterator[rows.Record]:
        for _, parts in groups:
            yield from rows.decode_group(parts, options)

    pending: list[Any] = []
    for batch in pack(records(), whole=True):
        pending.append(batch)
        if len(pending) >= 16:
            yield (to_blob(pending),)
            pending = []
    if pending:
        yield (to_blob(pending),)


def batches(paths: list[str], slices: int) -> list[list[str]]:
    """`slices` lists of files of about equal bytes: largest first, dealt out in snake order."""
    ordered = sorted(paths, key=lambda p: (-os.path.getsize(p), p))
    out: list[list[str]] = [[] for _ in range(min(slices, len(ordered)))]
    for i, path in enumerate(ordered):
        turn, at = divmod(i, len(out))
        out[at if turn % 2 == 0 else len(out) - 1 - at].append(path)
    return out


def dissector_options(show_secrets: bool = False, redact_bodies: bool = False) -> dict[str, Any]:
    """The `Dissector` keywords the executors decode with (the CLI's `--show-secrets`,
    `--redact-bodies`)."""
    options: dict[str, Any] = {}
    if show_secrets:
        options["show_secrets"] = True
    if redact_bodies:
        import inspect

        from amqpscope.dissect import Dissector

        if "redact_bodies" not in inspect.signature(Dissector).parameters:
            raise PipelineError("--redact-bodies: this amqpscope's decoder cannot drop bodies yet")
        options["redact_bodies"] = True
    return options


#: session settings for the job: Arrow input batches of one row (a task's file list, a whole
#: file's bytes, an IPC blob: never near Arrow's 2 GiB); dynamic-partition writes with a writer
#: per partition instead of a sort first, so the frames are written while the decode runs
SETTINGS = {
    "spark.sql.execution.arrow.maxRecordsPerBatch": "1",
    "spark.sql.optimizer.plannedWrite.enabled": "false",
    "spark.sql.maxConcurrentOutputFileWriters": "64",
    "spark.sql.inMemoryColumnarStorage.compressed": "false",  # cached once, read a few times
}


def _select(data: Any, table: str) -> Any:
    """`table`'s columns (timestamps made from their seconds column) out of union rows."""
    from pyspark.sql.functions import col, timestamp_seconds

    times = TIMES.get(table, {})
    return data.select(
        *[
            timestamp_seconds(col(f"{table}.{times[name]}")).alias(name)
            if name in times
            else col(f"{table}.{name}").alias(name)
            for name, _ in COLUMNS[table]
        ]
    )


def run(
    inputs: list[str],
    out: str,
    master: str | None = None,
    partitions: int | None = None,
    report: bool = False,
    spark: Any = None,
    progress: Callable[[str], None] | None = None,
    max_gap: float = stitch.MAX_GAP,
    show_secrets: bool = False,
    redact_bodies: bool = False,
) -> dict[str, Any]:
    """Run the whole job; returns what it did (files, rows per table, stitched connections)."""
    say = progress or (lambda text: None)
    options = dissector_options(show_secrets, redact_bodies)
    local, remote = list_inputs(inputs)
    spark = spark or session(master)
    sc = spark.sparkContext
    before = {key: spark.conf.get(key, None) for key in SETTINGS}
    for key, value in SETTINGS.items():
        spark.conf.set(key, value)
    try:
        return _run(spark, local, remote, inputs, out, partitions, report, say, max_gap, options)
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
        sc.setJobDescription(None)


def _run(
    spark: Any,
    local: list[str],
    remote: list[str],
    inputs: list[str],
    out: str,
    partitions: int | None,
    report: bool,
    say: Callable[[str], None],
    max_gap: float,
    options: dict[str, Any],
) -> dict[str, Any]:
    from pyspark import StorageLevel
    from pyspark.sql.functions import col

    sc = spark.sparkContext
    started = time.perf_counter()  # the job, not the JVM's start
    listed = hadoop_files(sc, remote) if remote else []
    if not local and not listed:
        raise PipelineError("no capture files in " + " ".join(inputs))
    total = sum(os.path.getsize(p) for p in local) + sum(size for _, size, _ in listed)
    files = len(local) + len(listed)
    # a task per file costs ~0.1 s: small files share tasks, big ones get one each
    slices = partitions or max(1, min(files, max(2 * sc.defaultParallelism, total // CHUNK)))
    say(f"{files} capture files ({total / 1e6:.1f} MB) on {sc.master}, {slices} decode tasks")

    # 1-2: decode every file where it lies (largest first, so the long ones start early), in
    # `mapInArrow`: the rows of all tables come back as Arrow union batches, cached by the JVM
    union = union_spark_type()
    parts = []
    if local:
        work = batches(local, max(1, slices * len(local) // files))
        tasks = spark.createDataFrame(
            sc.parallelize([(w,) for w in work], len(work)), "paths array<string>"
        )
        parts.append(tasks.mapInArrow(_decode_local(options), union))
    if listed:
        named = frozenset(path for path, _, outright in listed if outright)
        content = spark.read.format("binaryFile").load([path for path, _, _ in listed])
        parts.append(
            content.select("path", "content").mapInArrow(_decode_remote(named, options), union)
        )
    decoded = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    decoded = decoded.persist(StorageLevel.MEMORY_AND_DISK)
    base = out.rstrip("/")

    # the frames are written in the same pass as the decode (the cache fills as it runs); the
    # frames of connections that turn out to be stitched across files are replaced at the end
    counts: dict[str, int] = {}
    sc.setJobDescription("amqpscope: decode, write frames")
    frames_path = f"{base}/frames"
    _select(decoded.where(col("kind") == "frames"), "frames").write.mode("overwrite").partitionBy(
        *PARTITIONS["frames"]
    ).parquet(frames_path)
    small = [
        (r["kind"], loads(r["blob"]))
        for r in decoded.where(col("kind").isin("meta", "edge")).select("kind", "blob").collect()
    ]
    metas = [value for kind, value in small if kind == "meta"]
    edges = [value for kind, value in small if kind == "edge"]
    packets = sum(m["packets"] for m in metas)
    frames = sum(m["frames"] for m in metas)
    unreadable = [m for m in metas if m.get("error")]
    say(
        f"decoded {len(metas)} files: {packets} packets, {frames} frames"
        f" in {time.perf_counter() - started:.1f} s; wrote frames → {frames_path}"
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
    dropped = sorted(f"{capture}#{conn}" for capture, conn in members)

    # 4: each stitched connection decoded once, from its parts' packets
    stitched = None
    if groups:
        say(
            f"stitched {len(groups)} connections across rotated files"
            f" ({sum(len(g) for g in groups)} parts)"
        )
        members_b = sc.broadcast(members)
        sc.setJobDescription("amqpscope: stitched connections")
        held = decoded.where(col("kind") == "packets").select("blob").rdd
        stitched_rdd = (
            held.map(lambda r: loads(r[0]))
            .filter(lambda p: (p[0], p[1]) in members_b.value)
            .map(
                lambda p: (
                    members_b.value[(p[0], p[1])][0],
                    (members_b.value[(p[0], p[1])][1], p[2]),
                )
            )
            .groupByKey(max(1, min(len(groups), sc.defaultParallelism)))
            .mapPartitions(lambda kvs: _decode_groups(kvs, options))
        )
        stitched = (
            spark.createDataFrame(stitched_rdd, "blob binary")
            .mapInArrow(from_blobs, union)
            .persist(StorageLevel.MEMORY_AND_DISK)
        )

    # 5: the other tables, without the per-file rows of stitched connections' parts
    for table in TABLES:
        rows_of = decoded.where(col("kind") == table)
        if dropped:
            rows_of = rows_of.where(
                ~col(f"{table}.conn_key").isin(dropped) | col(f"{table}.conn_key").isNull()
            )
        if stitched is not None:
            rows_of = rows_of.unionByName(stitched.where(col("kind") == table))
        data = _select(rows_of, table)
        path = f"{base}/{table}"
        if table == "frames":
            if stitched is None:
                continue
            sc.setJobDescription("amqpscope: frames of stitched connections")
            _fix_frames(spark, data, groups, frames_path, base)
            say(f"rewrote the frames of {len(groups)} stitched connections → {frames_path}")
            continue
        sc.setJobDescription(f"amqpscope: write {table}")
        data.write.mode("overwrite").partitionBy(*PARTITIONS[table]).parquet(path)
        say(f"wrote {table} → {path}")
    # rows per table, in one pass over the cache: what was written
    from pyspark.sql.functions import coalesce

    key = coalesce(*[col(f"{table}.conn_key") for table in TABLES])
    kept = decoded.where(col("kind").isin(*TABLES))
    if dropped:
        kept = kept.where(~key.isin(dropped) | key.isNull())
    if stitched is not None:
        kept = kept.unionByName(stitched.where(col("kind").isin(*TABLES)))
    sc.setJobDescription("amqpscope: count rows")
    counted = {r["kind"]: r["count"] for r in kept.groupBy("kind").count().collect()}
    counts.update({table: counted.get(table, 0) for table in TABLES})
    decoded.unpersist()
    if stitched is not None:
        stitched.unpersist()
    elapsed = time.perf_counter() - started
    say(
        f"done in {elapsed:.1f} s ({packets / max(elapsed, 1e-9):.0f} packets/s): "
        + ", ".join(f"{table} {n}" for table, n in counts.items())
    )
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


def _fix_frames(
    spark: Any, data: Any, groups: list[list[Any]], frames_path: str, base: str
) -> None:
    """Put the frames of connections stitched across files right: the frames table's partitions
    of the files they touch are deleted and written again, from the cache (their per-file rows
    without the stitched parts' rows, and the stitched decode's)."""
    from pyspark.sql.functions import col

    names = sorted(
        {os.path.basename(e.capture.rstrip("/")) or e.capture for g in groups for e in g}
    )
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    escape = jvm.org.apache.spark.sql.catalyst.catalog.ExternalCatalogUtils.escapePathName
    for name in names:
        pattern = re.sub(r"([\\*?\[\]{}])", r"\\\1", str(escape(name)))
        path = jvm.org.apache.hadoop.fs.Path(f"{frames_path}/date=*/capture_file={pattern}")
        fs = path.getFileSystem(conf)
        for status in fs.globStatus(path) or []:
            fs.delete(status.getPath(), True)
    fixed = data.where(col("capture_file").isin(names))
    fixed.write.mode("append").partitionBy(*PARTITIONS["frames"]).parquet(frames_path)


def main(argv: list[str] | None = None) -> int:
    """spark-submit's entry: the same options as `amqpscope spark`."""
    parser = argparse.ArgumentParser(prog="amqpscope-spark", description=__doc__.splitlines()[0])
    parser.add_argument("inputs", nargs="+", metavar="INPUT")
    parser.add_argument("--out", required=True)
    parser.add_argument("--master")
    parser.add_argument("--partitions", type=int)
    parser.add_argument("--report", action="store_true")
    parser.add_argument("--show-secrets", action="store_true")
    parser.add_argument("--redact-bodies", action="store_true")
    args = parser.parse_args(argv)
    why = missing()
    if why:
        print(f"amqpscope: {why}", file=sys.stderr)
        return 1
    import amqpscope

    where = os.path.dirname(os.path.dirname(amqpscope.__file__))
    print(f"amqpscope: {amqpscope.__version__} from {where}", file=sys.stderr, flush=True)
    try:
        run(
            args.inputs,
            args.out,
            args.master,
            args.partitions,
            args.report,
            progress=lambda text: print(f"amqpscope: {text}", file=sys.stderr, flush=True),
            show_secrets=args.show_secrets,
            redact_bodies=args.redact_bodies,
        )
    except PipelineError as exc:
        print(f"amqpscope: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
