"""The `amqp` data source (`spark.read.format("amqp")`, `spark.readStream.format("amqp")`) on
local[2]: its rows against the Parquet tables `amqpscope spark` writes for the same files (which
tests/test_spark.py holds to `read --json` and `summary --json`), on every bundled capture and on
rotated files that cut a connection in two; the stream fed those files one at a time, with a
restart from its checkpoint between them, against the batch read of them all.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from amqpscope.spark import tables
from tests.test_spark import CAPTURES, SPLIT, decode, needs_java, packets_of, write_pcap

pytest.importorskip(
    "pyspark.sql.datasource", reason="needs pyspark 4 (the spark extra; make install installs it)"
)


@pytest.fixture(scope="module")
def spark() -> Any:
    from amqpscope.spark import spark as job

    session = job.session("local[2]", app="amqpscope-datasource-tests")
    yield session
    session.stop()


def plain(value: Any) -> Any:
    """A row's value with Spark's `Row`s as dicts and JSON texts parsed (key order aside)."""
    if hasattr(value, "asDict"):
        return {k: plain(v) for k, v in value.asDict().items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def canonical(rows: list[Any], table: str) -> list[str]:
    out = []
    for row in rows:
        values = plain(row)
        for name in ("fields", "message", "summary", "layers"):
            if isinstance(values.get(name), str) and (name != "message" or table == "frames"):
                values[name] = json.loads(values[name])
        out.append(json.dumps(values, sort_keys=True, default=str))
    return sorted(out)


def source(spark: Any, table: str, paths: Any, **options: str) -> list[Any]:
    reader = spark.read.format("amqp").option("table", table)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load(paths).collect()


def parquet(spark: Any, out: Path, table: str) -> list[Any]:
    names = [name for name, _ in tables.COLUMNS[table]]
    frame = spark.read.schema(tables.struct_type(table)).parquet(str(out / table))
    return frame.select(*names).collect()


@pytest.fixture(scope="module")
def job_tables(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from amqpscope.spark import spark as job

    target = tmp_path_factory.mktemp("tables")
    job.run([str(CAPTURES)], str(target), spark=spark)
    return target


@needs_java
@pytest.mark.parametrize("table", tables.TABLES)
def test_every_table_of_every_capture_equals_the_jobs(
    spark: Any, job_tables: Path, table: str
) -> None:
    mine = source(spark, table, str(CAPTURES))
    theirs = parquet(spark, job_tables, table)
    assert mine and len(mine) == len(theirs)
    assert canonical(mine, table) == canonical(theirs, table)


@needs_java
def test_the_schema_is_the_tables(spark: Any) -> None:
    for table in tables.TABLES:
        got = spark.read.format("amqp").option("table", table).load(str(SPLIT)).schema
        assert got == tables.struct_type(table), table


@needs_java
def test_frames_of_one_file_are_what_read_json_prints(spark: Any) -> None:
    sample = CAPTURES / "10-outcomes.pcap"
    rows = sorted(source(spark, "frames", str(sample)), key=lambda r: r["frame"])
    frames, _ = decode(sample)
    assert len(rows) == len(frames)
    for row, frame in zip(rows, frames, strict=True):
        record = frame.to_json()
        for key in ("frame", "packet", "ts", "conn", "src", "dst", "version", "channel", "kind"):
            assert row[key] == record[key], key
        assert json.loads(row["fields"]) == record["fields"]
        assert row["time"].timestamp() == pytest.approx(record["ts"], abs=1e-6)


def rotated(folder: Path) -> tuple[Path, Path]:
    """Two rotated files: one connection cut across them, a whole one in the first, one cut at
    the end of the second with no continuation."""
    folder.mkdir()
    split, whole = packets_of(SPLIT.name), packets_of("091-tx.pcap")
    cut = packets_of("091-get.pcap")
    half = len(split) // 2
    first, second = folder / "cap-1.pcap", folder / "cap-2.pcap"
    write_pcap(first, split[:half] + whole)
    write_pcap(second, split[half:] + cut[: len(cut) // 2])
    return first, second


@needs_java
def test_rotated_files_are_stitched_as_the_job_stitches_them(spark: Any, tmp_path: Path) -> None:
    from amqpscope.spark import spark as job

    first, second = rotated(tmp_path / "ring")
    job.run([str(tmp_path / "ring")], str(tmp_path / "out"), spark=spark)
    for table in tables.TABLES:
        mine = source(spark, table, str(tmp_path / "ring" / "cap-*.pcap"))
        assert canonical(mine, table) == canonical(parquet(spark, tmp_path / "out", table), table)
    conns = {r["conn_key"]: r for r in source(spark, "connections", [str(first), str(second)])}
    _, whole = decode(SPLIT)
    assert json.loads(conns[f"{first}#1"]["summary"]) == whole["connections"][0]
    assert conns[f"{first}#1"]["files"] == [str(first), str(second)]


@needs_java
def test_options_secrets_bodies_and_bad_values(spark: Any) -> None:
    plain_login = CAPTURES / "10-sasl-plain.pcap"
    hidden = " ".join(r["fields"] for r in source(spark, "frames", str(plain_login)))
    shown = " ".join(
        r["fields"] for r in source(spark, "frames", str(plain_login), showSecrets="true")
    )
    assert "<redacted>" in hidden and "<redacted>" not in shown
    tls = CAPTURES / "10-tls.pcap"
    unread = source(spark, "connections", str(tls))
    read = source(spark, "connections", str(tls), keylog=str(CAPTURES / "10-tls.keys"))
    assert [r["version"] for r in unread] == [None] and read[0]["version"] == "1.0"
    with pytest.raises(Exception, match="option table"):
        source(spark, "nope", str(tls))


# -- the stream ----------------------------------------------------------------------------------
def stream_rows(spark: Any, folder: Path, checkpoints: Path, names: tuple[str, ...]) -> None:
    """Run a stream of each table over what `folder` holds now, into a Parquet sink and a
    checkpoint of its own; each stops when caught up (one after the other: the streaming source
    runners of queries started at once timed out connecting to a loaded JVM)."""
    for table in names:
        query = (
            spark.readStream.format("amqp")
            .option("table", table)
            .option("settleSeconds", "0")
            .option("maxGap", "60")
            .load(str(folder))
            .writeStream.format("parquet")
            .option("path", str(checkpoints / f"sink-{table}"))
            .option("checkpointLocation", str(checkpoints / f"checkpoint-{table}"))
            .queryName(f"amqp_{table}")
            .start()
        )
        try:
            query.processAllAvailable()
        finally:
            query.stop()


def arrive(source_file: Path, folder: Path) -> None:
    """A file appears as a rotation makes it: written aside, then renamed into the folder."""
    hidden = folder / f".{source_file.name}"
    shutil.copyfile(source_file, hidden)
    os.replace(hidden, folder / source_file.name)


@needs_java
def test_a_stream_fed_file_by_file_and_restarted_gives_the_batch_rows(
    spark: Any, tmp_path: Path
) -> None:
    """Every table: a stream fed the rotated files one at a time, restarted from its checkpoint
    after each (the connection cut across the first two is carried over the restart), has the
    rows of the batch read of all the files, none lost or repeated."""
    first, second = rotated(tmp_path / "ring")
    # the third file is a capture of its own, far later than the cut connection's end: the
    # connection cut at the end of the second file times out instead of waiting for ever
    third = tmp_path / "ring" / "cap-3.pcap"
    late = packets_of("10-outcomes.pcap")
    shift = max(0, int(packets_of("091-get.pcap")[-1][1].sec) + 3600 - int(late[0][1].sec))
    write_pcap(third, [(data, meta._replace(sec=meta.sec + shift)) for data, meta in late])

    live = tmp_path / "live"
    live.mkdir()
    checkpoints = tmp_path / "stream"
    for path in (first, second):
        arrive(path, live)
        stream_rows(spark, live, checkpoints, tables.TABLES)  # new queries each time: a restart
    arrive(third, live)
    stream_rows(spark, live, checkpoints, tables.TABLES)
    for table in tables.TABLES:
        batch = canonical(source(spark, table, str(tmp_path / "ring")), table)
        sink = spark.read.schema(tables.struct_type(table)).parquet(
            str(checkpoints / f"sink-{table}")
        )
        got = canonical(sink.select(*[n for n, _ in tables.COLUMNS[table]]).collect(), table)
        # the same files, read from two folders
        batch = [text.replace(str(tmp_path / "ring"), "DIR") for text in batch]
        got = [text.replace(str(live), "DIR") for text in got]
        assert got and Counter(got) == Counter(batch), table
        if table == "connections":  # the cut one, once, from both files
            files = [json.loads(text)["files"] for text in got]
            assert files.count(["DIR/cap-1.pcap", "DIR/cap-2.pcap"]) == 1


def test_a_stream_plan_carries_open_connections_and_times_them_out(tmp_path: Path) -> None:
    """Pure planning (no Spark): a connection open at the end of the newest file is carried, not
    decoded; the next file continues it; a carried connection no file continues within
    `max_gap` is decoded alone."""
    from amqpscope.spark import plan

    first, second = rotated(tmp_path / "ring")
    tasks, carry = plan.stream_tasks(plan.Carry(), [plan.scan(str(first))])
    assert [type(t).__name__ for t in tasks] == ["FileTask"]
    assert tasks[0].without == {1} and [len(c) for c in carry.chains] == [1]
    carry = plan.Carry.from_json(json.loads(json.dumps(carry.to_json())))  # as Spark keeps it
    tasks, carry = plan.stream_tasks(carry, [plan.scan(str(second))])
    groups = [t for t in tasks if isinstance(t, plan.GroupTask)]
    assert len(groups) == 1
    assert [p.edge.capture for p in groups[0].parts] == [str(first), str(second)]
    lone = list(carry.chains)
    assert len(lone) == 1 and lone[0][0].edge.capture == str(second)
    later = time.time()  # a file hours on: the carried connection never came back
    scan = plan.Scan(str(tmp_path / "later.pcap"), str(tmp_path / "later.pcap"), later)
    tasks, carry = plan.stream_tasks(carry, [scan], max_gap=60)
    assert not carry.chains
    alone = [t for t in tasks if isinstance(t, plan.FileTask) and t.only]
    conn = lone[0][0].edge.conn
    assert [(t.capture, set(t.only or ())) for t in alone] == [(str(second), {conn})]


@needs_java
def test_pushed_filters_on_the_file_leave_other_files_out(spark: Any, tmp_path: Path) -> None:
    """With `pushFilters` (and the session's `spark.sql.python.filterPushdown.enabled`, which
    `spark.spark.session` sets), a filter on `capture_file` plans no task for the files it
    cannot keep, a stitched connection's task kept when one of its parts is in a kept file; the
    rows are those of the same filter without pushdown."""
    rotated(tmp_path / "ring")
    shutil.copy(CAPTURES / "091-tx.pcap", tmp_path / "ring" / "other.pcap")
    ring = str(tmp_path / "ring")
    keep = "capture_file = 'cap-2.pcap' or capture_file = 'other.pcap'"
    one = "capture_file in ('cap-2.pcap')"
    plain_read = spark.read.format("amqp").option("table", "frames").load(ring)
    pushed = spark.read.format("amqp").option("table", "frames").option("pushFilters", "true")
    assert plain_read.where(one).rdd.getNumPartitions() == 4  # three files, one stitched
    assert pushed.load(ring).where(one).rdd.getNumPartitions() == 2  # cap-2, the stitched one
    for where in (one, keep, "capture_file like 'cap-%'"):
        mine = pushed.load(ring).where(where).collect()
        assert canonical(mine, "frames") == canonical(plain_read.where(where).collect(), "frames")
    stitched = pushed.load(ring).where("capture_file = 'cap-2.pcap' and stitched").collect()
    assert stitched and {r["capture_file"] for r in stitched} == {"cap-2.pcap"}


def test_a_stream_takes_every_capture_and_waits_for_the_newest(tmp_path: Path) -> None:
    """Every capture is taken whatever its name, oldest modified first; what is not a capture
    is left alone, and the file modified last is taken only once it has settled (no JVM
    needed: the offsets are the reader's own)."""
    from amqpscope.spark.datasource import AmqpStreamReader

    folder = tmp_path / "caps"
    folder.mkdir()
    now = time.time()
    for age, name in ((30, "cap.pcap2"), (10, "cap.pcap10"), (20, "cap.pcap9")):
        shutil.copy(CAPTURES / "091-tx.pcap", folder / name)
        os.utime(folder / name, (now - age, now - age))
    (folder / "notes.txt").write_text("not a capture")
    (folder / ".cap.pcap11").write_bytes((CAPTURES / "091-tx.pcap").read_bytes())  # half written
    waiting = AmqpStreamReader({"path": str(folder), "settleSeconds": "3600"})
    start = waiting.initialOffset()
    end = waiting.latestOffset(start, None)
    assert list(end["taken"]) == ["cap.pcap2", "cap.pcap9"]  # cap.pcap10, the newest, still written
    settled = AmqpStreamReader({"path": str(folder), "settleSeconds": "0"})
    end = settled.latestOffset(start, None)
    assert list(end["taken"]) == ["cap.pcap2", "cap.pcap9", "cap.pcap10"]
    taken = [p.value.capture for p in settled.partitions(start, end)]
    assert taken == [str(folder / n) for n in ("cap.pcap2", "cap.pcap9", "cap.pcap10")]
    assert settled.latestOffset(end, None) == end  # nothing new
    assert settled.partitions(end, end) == []
    one = AmqpStreamReader({"path": str(folder), "settleSeconds": "0", "maxFilesPerTrigger": "1"})
    first = one.latestOffset(start, None)
    assert list(first["taken"]) == ["cap.pcap2"]
    assert list(one.latestOffset(first, None)["taken"]) == ["cap.pcap2", "cap.pcap9"]
    # an offset checkpointed by an amqpscope that took files in name order: all up to `last`
    old = {"last": str(folder / "cap.pcap9"), "carry": end["carry"]}
    assert list(settled.latestOffset(old, None)["taken"]) == list(end["taken"])
    shutil.copy(CAPTURES / "091-tx.pcap", folder / "cap.pcap1")  # sorts first, comes last
    assert list(settled.latestOffset(end, None)["taken"]) == ["cap.pcap1", *end["taken"]]


@needs_java
def test_a_session_of_its_own_finds_the_source_with_no_register_call(tmp_path: Path) -> None:
    """Spark's own lookup of `pyspark_*` modules finds `pyspark_amqpscope.DefaultSource`: a
    plain SparkSession, made without amqpscope's help, reads `format("amqp")`."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from pyspark.sql import SparkSession\n"
        "spark = (SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false')"
        ".getOrCreate())\n"
        "print('rows', spark.read.format('amqp').option('table', 'connections')"
        ".load(sys.argv[1]).count())\n"
        "spark.stop()\n"
    )
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": root, "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, "-c", code, str(SPLIT)],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    _, summary = decode(SPLIT)
    assert f"rows {len(summary['connections'])}" in done.stdout.splitlines()


@needs_java
def test_the_job_takes_a_keylog_as_the_data_source_does(spark: Any, tmp_path: Path) -> None:
    """`amqpscope spark --keylog` decrypts as `keylog` does for the source: one reading of the
    key log (`spark.dissector_options`) for both; a key log that cannot be read is one line."""
    from click.testing import CliRunner

    from amqpscope import cli
    from amqpscope.spark import spark as job

    tls, keys = CAPTURES / "10-tls.pcap", CAPTURES / "10-tls.keys"
    job.run([str(tls)], str(tmp_path / "out"), spark=spark, keylog=str(keys))
    rows = parquet(spark, tmp_path / "out", "connections")
    assert [r["version"] for r in rows] == ["1.0"]
    same = source(spark, "connections", str(tls), keylog=str(keys))
    assert canonical(same, "connections") == canonical(rows, "connections")
    result = CliRunner().invoke(
        cli.main, ["spark", str(tls), "--out", str(tmp_path / "x"), "--keylog", str(tmp_path)]
    )
    # a folder: an input that cannot be read, in one line (exit 1)
    assert result.exit_code == 1 and "--keylog" in result.output
    assert len(result.output.splitlines()) == 1
    with pytest.raises(job.PipelineError, match="--keylog"):
        job.dissector_options(keylog=str(tmp_path / "missing.keys"))


# -- trace logs ----------------------------------------------------------------------------------
LOGS = sorted(CAPTURES.glob("log-*.log"))


def cli_json(*args: str) -> list[Any]:
    """What the CLI prints with --json (`read`: a record a line; `summary`: one document)."""
    from click.testing import CliRunner

    from amqpscope import cli

    result = CliRunner().invoke(cli.main, [*args, "--json"])
    assert result.exit_code == 0, result.output
    if args[0] == "summary":
        return [json.loads(result.stdout)]
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def log_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recorded logs, one gzip'd, beside a text file and a log of something else (which a
    folder's walk leaves out)."""
    import gzip

    folder = tmp_path_factory.mktemp("logs")
    for path in LOGS:
        if "rhea" in path.name:
            (folder / f"{path.name}.gz").write_bytes(gzip.compress(path.read_bytes()))
        else:
            shutil.copy(path, folder / path.name)
    (folder / "notes.txt").write_text("not a log\n")
    (folder / "app.log").write_text("2026-11-26 INFO started\n" * 50)
    return folder


@needs_java
def test_trace_logs_give_the_rows_read_and_summary_print(spark: Any, log_folder: Path) -> None:
    """A folder of .log / .log.gz files: frames as `read --json` prints them (`line` for the
    packet, no endpoints or size, `ts` null where the line had none), connections as `summary
    --json` has them, the skipped lines a finding; `amqpscope spark` writes the same tables."""
    from amqpscope.spark import spark as job

    frames = source(spark, "frames", str(log_folder))
    by_file: dict[str, list[Any]] = {}
    for r in frames:
        by_file.setdefault(r["capture_file"], []).append(r)
    assert sorted(by_file) == sorted(
        f"{p.name}.gz" if "rhea" in p.name else p.name for p in LOGS
    )  # neither notes.txt nor app.log
    conns = source(spark, "connections", str(log_folder))
    found = source(spark, "findings", str(log_folder))
    for name, got in by_file.items():
        path = str(log_folder / name)
        records = cli_json("read", path)
        got.sort(key=lambda r: r["frame"])
        assert len(got) == len(records), name
        for row, record in zip(got, records, strict=True):
            assert row["line"] == record["source"]["line"] and row["capture"] == path
            assert row["packet"] is None and row["src"] is None and row["size"] is None
            for key in ("frame", "ts", "conn", "dir", "version", "channel", "kind", "name"):
                assert row[key] == record[key], (name, key)
            assert json.loads(row["fields"]) == record["fields"]
            assert (json.loads(row["message"]) if row["message"] else None) == record.get("message")
            assert [f["code"] for f in row["findings"]] == [f["code"] for f in record["findings"]]
            if record["ts"] is None:
                assert row["time"] is None and row["date"] == tables.UNDATED
        (summary,) = cli_json("summary", path)
        mine = sorted(
            (json.loads(r["summary"]) for r in conns if r["capture"] == path),
            key=lambda c: c["id"],
        )
        assert mine == summary["connections"], name
        codes = Counter(f["code"] for f in found if f["capture"] == path)
        expect = Counter(f["code"] for r in records for f in r["findings"])
        expect.update(f["code"] for f in summary["findings"] if f.get("frame") is None)
        said = subprocess.run(  # the lines that are no frame, as read says on stderr
            [sys.executable, "-m", "amqpscope.cli", "read", "--json", path],
            capture_output=True,
            text=True,
            timeout=120,
        ).stderr
        expect["log.skipped-lines"] += said.count("log.skipped-lines:")
        expect += Counter()  # no zero counts
        assert codes == expect, name
    job.run([str(log_folder)], str(log_folder.parent / "log-tables"), spark=spark)
    for table in tables.TABLES:
        mine = source(spark, table, str(log_folder))
        theirs = parquet(spark, log_folder.parent / "log-tables", table)
        assert canonical(mine, table) == canonical(theirs, table), table


# -- URIs ----------------------------------------------------------------------------------------
@pytest.fixture()
def http_folder(tmp_path: Path) -> Any:
    """A real HTTP server (the standard library's) serving a folder, on a free port."""
    import functools
    import http.server
    import threading

    folder = tmp_path / "served"
    folder.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield folder, f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_a_stream_over_a_uri_lists_its_folder_with_pyarrow(
    tmp_path: Path, http_folder: Any
) -> None:
    """`readStream.load(URI)`: the folder is listed with pyarrow's filesystems
    (`remote.listing`: the files directly in it, hidden names skipped, with mtime and size),
    here on pyarrow's local filesystem, the one this machine has: no S3, GCS or HDFS service
    here, so a stream over one of those is not run. HTTP lists no folders: one line."""
    import pyarrow.fs as pafs

    from amqpscope.spark import remote
    from amqpscope.spark.datasource import AmqpStreamReader

    folder = tmp_path / "caps"
    (folder / "sub").mkdir(parents=True)
    for name in ("cap.pcap1", "cap.pcap2", "sub/cap.pcap3", "_cap.pcap4", ".cap.pcap5"):
        shutil.copy(CAPTURES / "091-tx.pcap", folder / name)
    found = remote.listing(pafs.LocalFileSystem(), str(folder))
    assert sorted(Path(path).name for path, _, _ in found) == ["cap.pcap1", "cap.pcap2"]
    for path, mtime, size in found:
        assert size == os.path.getsize(path) and abs(mtime - os.path.getmtime(path)) < 1e-3
    with pytest.raises(remote.RemoteError, match="no such folder"):
        remote.listing(pafs.LocalFileSystem(), str(folder / "cap.pcap1"))
    _, base = http_folder
    with pytest.raises(ValueError, match="HTTP lists no folders"):
        AmqpStreamReader({"path": f"{base}/caps/"})
    with pytest.raises(ValueError, match="not viewfs://"):
        AmqpStreamReader({"path": "viewfs://cluster/caps"})


@needs_java
def test_http_uris_are_read_and_stitched_as_local_files(spark: Any, http_folder: Any) -> None:
    """`load("http://...")`: the Python workers fetch each file (no JVM there); rotated files
    are scanned and stitched as local ones are, and `amqpscope spark` of the same URIs (whose
    Hadoop http filesystem Spark's binaryFile cannot list) writes the same tables. A URI that
    cannot be fetched is a finding; a scheme the workers cannot read is one line."""
    from amqpscope.spark import spark as job

    folder, base = http_folder
    first, second = rotated(folder / "ring")
    urls = [f"{base}/ring/{p.name}" for p in (first, second)]
    job.run(urls, str(folder.parent / "out"), spark=spark)
    for table in tables.TABLES:
        mine = source(spark, table, urls)
        local = source(spark, table, [str(first), str(second)])
        assert canonical(mine, table) == canonical(
            parquet(spark, folder.parent / "out", table), table
        )
        here = [t.replace(str(folder), base) for t in canonical(local, table)]
        assert canonical(mine, table) == sorted(here), table
    conns = source(spark, "connections", urls)
    assert [r["files"] for r in conns if r["stitched"]] == [urls]
    missing = source(spark, "findings", [f"{base}/nope.pcap"])
    assert [(r["code"], "404" in r["message"]) for r in missing] == [("capture.unreadable", True)]
    with pytest.raises(Exception, match=r"amqp: viewfs://cluster/caps: .* not viewfs://"):
        source(spark, "frames", "viewfs://cluster/caps")


@needs_java
def test_a_schema_of_fewer_columns_reads_those_columns(spark: Any) -> None:
    """`.schema(...)` naming some of a table's columns (Spark tells a Python source no query's
    columns): those alone are built, in the schema's order, equal to the whole table's; a
    frames projection with none of `fields`, `message`, `findings` reads without decoding
    messages."""
    kinds = dict(tables.COLUMNS["frames"])
    files = [str(CAPTURES / n) for n in ("091-publish-consume.pcap", "10-outcomes.pcap")]
    files += [str(CAPTURES / "091-large-body.pcap"), str(CAPTURES / "log-proton-broker.log")]

    def reader() -> Any:  # a new one each time: `.schema` sets it on the reader
        return spark.read.format("amqp").option("table", "frames")

    for names in (
        ["name", "time", "conn_key", "frame", "capture", "fields"],
        ["dir", "size", "kind", "channel", "frame", "line", "conn_key"],  # messages not decoded
    ):
        got = reader().schema(", ".join(f"{n} {kinds[n]}" for n in names)).load(files)
        assert got.columns == names
        whole = reader().load(files).select(*names)
        assert sorted(map(repr, got.collect())) == sorted(map(repr, whole.collect()))
    sample = str(CAPTURES / "10-outcomes.pcap")
    one = reader().schema("time timestamp").load(sample).collect()
    assert sorted(one) == sorted(reader().load(sample).select("time").collect())
    with pytest.raises(Exception, match="amqp: schema: frames has no column 'nope'"):
        reader().schema("nope string").load(str(SPLIT)).collect()
    with pytest.raises(Exception, match=r"amqp: schema: frames\.name is string, not bigint"):
        reader().schema("name long").load(str(SPLIT)).collect()
