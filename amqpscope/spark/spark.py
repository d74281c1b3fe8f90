"""The Spark job: folders of captures in, Parquet tables out (`amqpscope spark`, or spark-submit).

    spark-submit --py-files amqpscope-X-py3-none-any.whl amqpscope/spark/submit.py \\
        hdfs:///captures/ --out hdfs:///amqp/tables [--report]

Plan (see docs/spark.md and `tasks.py`):
1. list the inputs on the driver (local files, folders, globs; URIs, `file://` too, with
   Hadoop's FileSystem, read on the executors by Spark's `binaryFile` source);
2. per capture file, on the executors (`tasks.decode_files`): the CLI's Dissector and Tracker,
   the rows of every table written as Parquet by the worker itself (`store.TableWriter`, with
   pyarrow); only each file's "meta" record and its edge connections come back;
3. on the driver: order the files by their first packet, `stitch.groups` over the edges;
4. on the executors (`tasks.finish`): each file's edge rows kept but for the stitched
   connections', and each stitched connection decoded and tracked once from its parts'
   packets (`rows.decode_group`); `--report` runs the queries of `report.QUERIES` over the
   tables.

Spark schedules the tasks and reads remote inputs; no row passes through the JVM.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from amqpscope.spark import remote as remotes
from amqpscope.spark import rows, stitch, tasks
from amqpscope.spark.inputs import (  # noqa: F401  (also this module's names, as before)
    GLOB,
    URI,
    PipelineError,
    _is_log,
    _walk,
    dissector_options,
    list_inputs,
)
from amqpscope.spark.store import Output, layout
from amqpscope.spark.tables import TABLES

INSTALL_PYSPARK = "pip install 'amqpscope[spark]'"
INSTALL_JAVA = "apt-get install default-jre-headless"
#: bytes of capture per decode task, when there are enough files to share them out
CHUNK = 64 << 20


def missing() -> str | None:
    """Why the job cannot run here (pyspark, pyarrow or Java missing), or None."""
    import importlib.util

    for module in ("pyspark", "pyarrow"):  # pyarrow: the workers write the tables
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed: {INSTALL_PYSPARK}"
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java or not os.path.exists(java):
        return f"Java is not installed (Spark needs it): {INSTALL_JAVA}, or set JAVA_HOME"
    return None


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


def fetched_scheme(uri: str) -> bool:
    """A URI the executors fetch themselves (`spark.remote`), not through Hadoop."""
    return remotes.scheme(uri) in remotes.HTTP


def session(master: str | None = None, app: str = "amqpscope") -> Any:
    """A SparkSession: `master` if given; under spark-submit, what it set; else local[*]; with
    the `amqp` data source registered."""
    from pyspark.sql import SparkSession

    conf = _conf(master, app)
    with _local_home(conf):
        spark = SparkSession.builder.config(conf=conf).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    with contextlib.suppress(ImportError):  # pyspark before 4 has no Python data sources
        from amqpscope.spark.datasource import register

        register(spark)  # `format("amqp")`, also when pyspark_amqpscope is not on the path
    return spark


def context(master: str | None = None, app: str = "amqpscope") -> Any:
    """A SparkContext alone, as `session` would make it, for a run that needs no Spark SQL (no
    Hadoop URI to read, no `--report`): starting the SQL session too took ~2.4 s more of a
    local run's start. (`_sql` makes the session later, should it be needed after all.)"""
    from pyspark import SparkContext

    conf = _conf(master, app)
    with _local_home(conf):
        sc = SparkContext.getOrCreate(conf)
    sc.setLogLevel("ERROR")
    return sc


def _conf(master: str | None, app: str) -> Any:
    from pyspark import SparkConf

    conf = SparkConf().setAppName(app).set("spark.sql.session.timeZone", "UTC")
    if master is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        master = "local[*]"
    if master is not None:
        conf.setMaster(master)
        if master.startswith("local"):
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            _check_worker_python(os.environ["PYSPARK_PYTHON"])
            conf.set("spark.ui.enabled", "false")
            conf.set("spark.sql.shuffle.partitions", "8")
            conf.set("spark.driver.memory", os.environ.get("AMQPSCOPE_SPARK_MEMORY", "2g"))
            # a local JVM lives for one run and mostly schedules (the workers decode and
            # write): with the C1 compiler alone it starts ~3 s sooner on 2 cores and runs
            # its first job ~0.5 s sooner (see docs/spark.md; "" for the JVM's default)
            conf.set("spark.driver.defaultJavaOptions", _java_options())
            # the workers' Python starts faster (see `daemon`); local only: on a cluster
            # the executors' Python may not have amqpscope until --py-files ships it
            conf.set("spark.python.daemon.module", "amqpscope.spark.daemon")
    # the amqp data source's `pushFilters` option (Spark fails a reader that pushes filters
    # without it; a source that does not push is not affected)
    conf.set("spark.sql.python.filterPushdown.enabled", "true")
    return conf


@contextlib.contextmanager
def _local_home(conf: Any) -> Iterator[None]:
    """SPARK_HOME, while a local JVM may be started, a Spark home without pyspark's zips
    (`daemon.spark_home`): the Python workers Spark starts with its own daemon (a data source's
    planners) then import the installed pyspark, bytecode cached, not the zip's compiled afresh.
    Not when SPARK_HOME is set (the user's Spark) or the JVM is not ours to start."""
    master = conf.get("spark.master") or ""
    if (
        not master.startswith("local")
        or "SPARK_HOME" in os.environ
        or "PYSPARK_GATEWAY_PORT" in os.environ
    ):
        yield
        return
    import pyspark

    from amqpscope.spark.daemon import spark_home

    home = spark_home(os.path.dirname(pyspark.__file__))
    if home is None:
        yield
        return
    os.environ["SPARK_HOME"] = home  # read by pyspark's launcher and by the JVM it starts
    try:
        yield
    finally:
        os.environ.pop("SPARK_HOME", None)


def _sql(spark: Any) -> Any:
    """The SparkSession of `spark` (a session, or a SparkContext: its session made now)."""
    if hasattr(spark, "sparkContext"):
        return spark
    from pyspark.sql import SparkSession

    return SparkSession(spark)


def _context(spark: Any) -> Any:
    return getattr(spark, "sparkContext", spark)


def _java_options() -> str:
    return os.environ.get("AMQPSCOPE_SPARK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1")


def _check_worker_python(python: str) -> None:
    """A PYSPARK_PYTHON of the user's that cannot import amqpscope would fail every task with
    Spark's stack traces: one line instead, before the JVM starts. (This interpreter can.)"""
    if python == sys.executable:
        return
    import subprocess

    probe = "import amqpscope.spark.tasks, pyarrow"
    try:
        done = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PipelineError(f"PYSPARK_PYTHON={python}: cannot run it ({exc})") from None
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        raise PipelineError(
            f"PYSPARK_PYTHON={python} cannot run the workers"
            f" ({lines[-1] if lines else f'exit status {done.returncode}'}):"
            f" install amqpscope[spark] for it, or unset PYSPARK_PYTHON"
        )


def _decode_remote(
    named: frozenset[str], out: str, run: str, options: dict[str, Any]
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """Over Spark's `binaryFile` rows (path, content): stage 1 of `tasks`."""

    def go(inputs: Iterator[Any]) -> Iterator[Any]:
        def items() -> Iterator[tuple[str, str | None, bytes | None]]:
            for row in inputs:
                uri, data = row[0], bytes(row[1])
                if uri in named or rows.looks_like_capture(data[:4]) or rows.looks_like_log(uri):
                    yield uri, None, data

        yield from tasks.decode_files(items(), out, run, options)

    return go


def batches(paths: list[str], slices: int) -> list[list[str]]:
    """`slices` lists of files of about equal bytes: largest first, dealt out in snake order."""
    ordered = sorted(paths, key=lambda p: (-os.path.getsize(p), p))
    out: list[list[str]] = [[] for _ in range(min(slices, len(ordered)))]
    for i, path in enumerate(ordered):
        turn, at = divmod(i, len(out))
        out[at if turn % 2 == 0 else len(out) - 1 - at].append(path)
    return out


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
    keylog: str | None = None,
) -> dict[str, Any]:
    """Run the whole job; returns what it did (files, rows per table, stitched connections).
    `spark`: a SparkSession or SparkContext to run on (default: made here, with Spark SQL only
    if Hadoop URIs or `report` need it)."""
    say = progress or (lambda text: None)
    options = dissector_options(show_secrets, redact_bodies, keylog)
    local, remote = list_inputs(inputs)
    output = _output(out)
    if spark is None:  # Spark SQL only when something needs it
        spark = session(master) if remote or report else context(master)
    try:
        return _run(spark, local, remote, inputs, output, partitions, report, say, max_gap, options)
    finally:
        _context(spark).setJobDescription(None)


def _output(out: str) -> Output:
    """`--out` opened (with pyarrow's filesystems), or one line saying why it cannot be."""
    try:
        output = Output(out)
        output.fs.create_dir(output.base, recursive=True)
        return output
    except Exception as exc:  # pyarrow: ArrowInvalid, ArrowNotImplementedError, OSError
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise PipelineError(f"--out {out}: {text}") from None


def _run(
    spark: Any,
    local: list[str],
    remote: list[str],
    inputs: list[str],
    output: Output,
    partitions: int | None,
    report: bool,
    say: Callable[[str], None],
    max_gap: float,
    options: dict[str, Any],
) -> dict[str, Any]:
    import uuid

    sc = _context(spark)
    started = time.perf_counter()  # the job, not the JVM's start
    # http(s): Hadoop's filesystem for it cannot list, so binaryFile cannot read it; the
    # executors fetch each named file with `spark.remote`, as the data source's do
    fetch = [uri for uri in remote if fetched_scheme(uri)]
    try:
        fetched = [found for uri in fetch for found, _ in remotes.list_files(uri)]
    except remotes.RemoteError as exc:
        raise PipelineError(str(exc).removeprefix("amqp: ")) from None
    remote = [uri for uri in remote if uri not in fetch]
    listed = hadoop_files(sc, remote) if remote else []
    if not local and not listed and not fetched:
        raise PipelineError("no capture files in " + " ".join(inputs))
    total = sum(os.path.getsize(p) for p in local) + sum(size for _, size, _ in listed)
    files = len(local) + len(listed) + len(fetched)
    # a task per file costs ~0.1 s: small files share tasks, big ones get one each
    slices = partitions or max(1, min(files, max(2 * sc.defaultParallelism, total // CHUNK)))
    say(f"{files} capture files ({total / 1e6:.1f} MB) on {sc.master}, {slices} decode tasks")
    try:  # overwrite, as Spark's writers do: the tables' folders go first
        for table in TABLES:
            output.remove(output.path(table))
    except Exception as exc:  # pyarrow's errors are OSError or ArrowInvalid
        raise PipelineError(f"--out {output.uri}: {exc}") from None
    run_id = uuid.uuid4().hex[:12]
    out = output.uri

    # 1: decode every file where it lies (largest first, so the long ones start early); the
    # workers write the rows themselves, only the files' meta and edge records come back
    sc.setJobDescription("amqpscope: decode, write the tables")
    small: list[tuple[str, Any]] = []
    if local:
        work = batches(local, max(1, slices * len(local) // files))
        small += (
            sc.parallelize(work, len(work))
            .mapPartitions(
                lambda lists: tasks.decode_files(
                    ((path, path, None) for paths in lists for path in paths), out, run_id, options
                )
            )
            .collect()
        )
    if listed:
        named = frozenset(path for path, _, outright in listed if outright)
        content = _sql(spark).read.format("binaryFile").load([path for path, _, _ in listed])
        small += (
            content.select("path", "content")
            .rdd.mapPartitions(_decode_remote(named, out, run_id, options))
            .collect()
        )
    if fetched:
        small += (
            sc.parallelize(fetched, max(1, min(len(fetched), slices)))
            .mapPartitions(
                lambda uris: tasks.decode_files(((u, u, None) for u in uris), out, run_id, options)
            )
            .collect()
        )
    metas = [value for kind, value in small if kind == "meta"]
    edges = [value for kind, value in small if kind == "edge"]
    counts = dict.fromkeys(TABLES, 0)
    for meta in metas:
        for table, n in (meta.get("rows") or {}).items():
            counts[table] += n
    packets = sum(m["packets"] for m in metas)
    frames = sum(m["frames"] for m in metas)
    unreadable = [m for m in metas if m.get("error")]
    busy = sum(m.get("seconds", 0.0) for m in metas)
    say(
        f"decoded {len(metas)} files: {packets} packets, {frames} frames"
        f" in {time.perf_counter() - started:.1f} s ({busy:.1f} s in the tasks' decode and write)"
        + (f"; {len(unreadable)} unreadable (see the findings table)" if unreadable else "")
    )

    # 2: stitch connections across files, in time order
    order = {
        m["capture"]: i
        for i, m in enumerate(
            sorted(metas, key=lambda m: (m["first_ts"] is None, m["first_ts"] or 0, m["capture"]))
        )
    }
    for edge in edges:
        edge.order = order.get(edge.capture, 0)
    groups = stitch.groups(edges, max_gap)
    stitched_keys: dict[str, set[str]] = {}
    for group in groups:
        for e in group:
            stitched_keys.setdefault(e.fid, set()).add(rows.file_key(e.capture, e.conn))
    if groups:
        say(
            f"stitched {len(groups)} connections across rotated files"
            f" ({sum(len(g) for g in groups)} parts)"
        )

    # 3: the edge rows of each file, but the stitched connections'; each stitched connection
    # decoded and tracked once from its parts' packets
    work3: list[tuple[str, Any]] = [
        ("edges", (m["fid"], m["edge_files"], stitched_keys.get(m["fid"], set())))
        for m in metas
        if m.get("edge_files")
    ]
    work3 += [("group", (f"g{run_id}-{i}", group)) for i, group in enumerate(groups)]
    if work3:
        sc.setJobDescription("amqpscope: edge connections, stitched connections")
        done = (
            sc.parallelize(work3, max(1, min(len(work3), 2 * sc.defaultParallelism)))
            .mapPartitions(lambda items: tasks.finish(items, out, run_id, options))
            .collect()
        )
        for written in done:
            for table, n in written.items():
                counts[table] += n
    output.remove(output.path(tasks.STAGING, run_id))
    output.remove_if_empty(output.path(tasks.STAGING))  # another run may be using it
    _seal(output)
    elapsed = time.perf_counter() - started
    for table in TABLES:
        say(f"wrote {table} → {output.path(table)}")
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
        from amqpscope.spark import report as reports

        reports.run(_sql(spark), output.uri, print)
    return result


def _seal(output: Output) -> None:
    """Each table's folder gets Spark's `_SUCCESS` marker; a table with no rows gets one empty
    Parquet file with its schema, so it reads back as an empty table."""
    import pyarrow.parquet as pq

    for table in TABLES:
        folder = output.path(table)
        if not output.exists(folder):
            output.fs.create_dir(folder, recursive=True)
            with output.fs.open_output_stream(f"{folder}/part-empty.parquet") as stream:
                pq.write_table(layout(table).schema.empty_table(), stream)
        output.touch(f"{folder}/_SUCCESS")


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
    parser.add_argument("--keylog")
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
            keylog=args.keylog,
        )
    except PipelineError as exc:
        print(f"amqpscope: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
