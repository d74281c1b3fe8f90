"""The Spark pipeline (`amqpscope spark`) on local[2]: its tables against the CLI's own sans-IO
decode of the same files, and one connection cut across two rotated files put back together.

Every expectation is computed here with the code the CLI runs (open_capture → Dissector →
Tracker.summary()), never written down as a number, so these stay true as the trackers grow.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from amqpscope import cli
from amqpscope.capture.files import open_capture
from amqpscope.dissect import Dissector
from amqpscope.spark import stitch, tables
from amqpscope.spark.deliveries import DeliveryLog
from amqpscope.track.tracker import Tracker

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
FILES = sorted(p for p in CAPTURES.iterdir() if p.suffix in (".pcap", ".pcapng"))
SPLIT = CAPTURES / "091-publish-consume.pcap"

pyspark = pytest.importorskip("pyspark", reason="needs the spark extra (make install installs it)")
needs_java = pytest.mark.skipif(
    not (shutil.which("java") or os.environ.get("JAVA_HOME")), reason="Spark needs Java"
)


def decode(path: Path) -> tuple[list[Any], dict[str, Any]]:
    """What `read --json` and `summary --json` compute for `path`."""
    dissector, tracker = Dissector(), Tracker()
    frames = []
    with open_capture(path) as capture:
        for frame in dissector.run(capture):
            tracker.feed(frame)
            frames.append(frame)
        tracker.finish()
    return frames, tracker.summary()


@pytest.fixture(scope="module")
def spark() -> Any:
    from amqpscope.spark import spark as job

    session = job.session("local[2]", app="amqpscope-tests")  # as `amqpscope spark` makes it
    yield session
    session.stop()


@pytest.fixture(scope="module")
def out(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    from amqpscope.spark import spark as job

    target = tmp_path_factory.mktemp("tables")
    result = job.run([str(CAPTURES)], str(target), spark=spark)
    return target, result


def table(spark: Any, out: Path, name: str) -> list[dict[str, Any]]:
    frame = spark.read.schema(tables.struct_type(name)).parquet(str(out / name))
    return [r.asDict() for r in frame.collect()]


@needs_java
def test_frames_rows_equal_what_read_json_prints(spark: Any, out: Any) -> None:
    target, result = out
    rows = table(spark, target, "frames")
    per_file = Counter(r["capture"] for r in rows)
    for path in FILES:
        frames, _ = decode(path)
        assert per_file.get(str(path), 0) == len(frames), path.name
    assert result["tables"]["frames"] == len(rows)
    # one file column by column against the frame record
    sample = CAPTURES / "10-outcomes.pcap"
    mine = sorted((r for r in rows if r["capture"] == str(sample)), key=lambda r: r["frame"])
    frames, _ = decode(sample)
    for row, frame in zip(mine, frames, strict=True):
        record = frame.to_json()
        for key in ("frame", "packet", "ts", "conn", "src", "dst", "version", "channel", "kind"):
            assert row[key] == record[key], key
        assert row["dir"] == record["dir"] and row["name"] == record["name"]
        assert json.loads(row["fields"]) == record["fields"]
        assert (json.loads(row["message"]) if row["message"] else None) == record.get("message")
        assert [f["code"] for f in row["findings"]] == [f["code"] for f in record["findings"]]


@needs_java
def test_connections_links_channels_equal_summary(spark: Any, out: Any) -> None:
    target, _ = out
    got = {
        name: Counter(r["capture"] for r in table(spark, target, name))
        for name in ("connections", "links", "channels")
    }
    undecoded = 0
    for path in FILES:
        _, summary = decode(path)
        conns = summary["connections"]
        links = sum(len(s.get("links") or []) for c in conns for s in c.get("sessions") or [])
        channels = sum(len(c.get("channels") or []) for c in conns)
        undecoded += len(summary.get("undecoded") or [])
        expect = len(conns) + len(summary.get("undecoded") or [])
        assert got["connections"].get(str(path), 0) == expect, path.name
        assert got["links"].get(str(path), 0) == links, path.name
        assert got["channels"].get(str(path), 0) == channels, path.name
    rows = table(spark, target, "connections")
    for row in rows:
        assert json.loads(row["summary"])["id"] == row["conn"]
        assert row["conn_key"] == f"{row['capture']}#{row['conn']}" and not row["stitched"]
    # TLS captures read without their key logs: listed, with why and over what
    unread = [r for r in rows if r["version"] is None]
    assert undecoded and len(unread) == undecoded
    for row in unread:
        assert row["error"] == "AMQP not read: tls.no-key", row
        assert json.loads(row["layers"])[0]["name"] == "tls"


@needs_java
def test_deliveries_agree_with_the_trackers_tallies(spark: Any, out: Any) -> None:
    target, _ = out
    outcomes = Counter(
        (r["capture"], r["outcome"]) for r in table(spark, target, "deliveries") if r["outcome"]
    )
    for path in FILES:
        _, summary = decode(path)
        for key, outcome in (("acks", "ack"), ("nacks", "nack"), ("rejects", "reject")):
            counts = [ch.get(key) for c in summary["connections"] for ch in c.get("channels") or []]
            if counts and all(isinstance(n, int) for n in counts):
                assert outcomes.get((str(path), outcome), 0) == sum(counts), (path.name, key)


@needs_java
def test_report_runs_its_queries(spark: Any, out: Any, tmp_path: Path) -> None:
    from amqpscope.spark import report
    from amqpscope.spark import spark as job

    lines: list[str] = []
    report.run(spark, str(out[0]), lines.append)
    for title in report.QUERIES:
        assert f"== {title}" in lines
    assert any("PRECONDITION_FAILED" in line for line in lines)
    assert not any(ch in line for line in lines for ch in "\x1b\x07\x9b")
    # 091-hostile-names.pcap: a queue name with a terminal escape reaches the report visibly
    # (its own tables: among every capture's, its queue need not be in a top ten)
    job.run([str(CAPTURES / "091-hostile-names.pcap")], str(tmp_path / "hostile"), spark=spark)
    lines.clear()
    report.run(spark, str(tmp_path / "hostile"), lines.append)
    assert not any(ch in line for line in lines for ch in "\x1b\x07\x9b")
    assert any("\\x1b]0;" in line for line in lines)


def split_pcap(source: Path, first: Path, second: Path) -> int:
    """Write `source`'s packets into two pcap files, cut at the middle packet; returns the cut."""
    from scapy.utils import RawPcapReader

    reader = RawPcapReader(str(source))
    packets = list(reader)
    cut = len(packets) // 2
    write_pcap(first, packets[:cut], reader.linktype)
    write_pcap(second, packets[cut:], reader.linktype)
    return cut


@needs_java
def test_connection_split_across_rotated_files_is_tracked_once(spark: Any, tmp_path: Path) -> None:
    from amqpscope.spark import spark as job

    ring = tmp_path / "ring"
    ring.mkdir()
    first, second = ring / "cap.pcap0", ring / "cap.pcap1"
    cut = split_pcap(SPLIT, first, second)
    frames, summary = decode(SPLIT)
    # decoded apart, neither half accounts for the whole connection
    halves = [decode(first)[1]["connections"], decode(second)[1]["connections"]]
    assert all(halves[0][0] != c for c in halves[1])
    result = job.run([str(ring)], str(tmp_path / "out"), spark=spark)
    assert result["stitched"] == [[(str(first), 1), (str(second), 1)]]
    conns = table(spark, tmp_path / "out", "connections")
    assert len(conns) == 1 and conns[0]["stitched"]
    assert conns[0]["files"] == [str(first), str(second)]
    assert json.loads(conns[0]["summary"]) == summary["connections"][0]
    rows = table(spark, tmp_path / "out", "frames")
    assert len(rows) == len(frames)
    assert {r["conn_key"] for r in rows} == {f"{first}#1"}
    for row in rows:  # each frame filed under the file and packet that completed it
        whole = row["packet"] + (cut if row["capture"] == str(second) else 0)
        assert whole == frames[row["frame"] - 1].packet
    channels = table(spark, tmp_path / "out", "channels")
    assert len(channels) == len(summary["connections"][0].get("channels") or [])


def write_pcap(path: Path, packets: list[Any], linktype: int = 1) -> None:
    """`packets` ((data, meta) as scapy's RawPcapReader gives them) as a pcap file."""
    header = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, linktype)
    with path.open("wb") as f:
        f.write(header)
        for data, meta in packets:
            f.write(struct.pack("<IIII", meta.sec, meta.usec, len(data), meta.wirelen))
            f.write(data)


def packets_of(name: str) -> list[Any]:
    from scapy.utils import RawPcapReader

    return list(RawPcapReader(str(CAPTURES / name)))


@needs_java
def test_a_file_with_stitched_lone_and_whole_connections(spark: Any, tmp_path: Path) -> None:
    """Rotated files that also hold a whole connection (kept as the file's decode has it) and a
    connection cut at the end with no continuation (a lone edge: kept as the file's decode has
    it, frame and packet numbers included), beside the one stitched across both."""
    from amqpscope.spark import spark as job

    ring = tmp_path / "ring"
    ring.mkdir()
    split, whole = packets_of(SPLIT.name), packets_of("091-tx.pcap")
    cut = packets_of("091-get.pcap")
    half = len(split) // 2
    first, second = ring / "cap.pcap0", ring / "cap.pcap1"
    write_pcap(first, split[:half] + whole)
    write_pcap(second, split[half:] + cut[: len(cut) // 2])
    frames_first, summary_first = decode(first)
    frames_second, summary_second = decode(second)
    _, summary_split = decode(SPLIT)
    whole_conn = next(c["id"] for c in summary_first["connections"] if c["id"] != 1)
    lone_conn = next(c["id"] for c in summary_second["connections"] if c["id"] != 1)

    result = job.run([str(ring)], str(tmp_path / "out"), spark=spark)
    assert result["stitched"] == [[(str(first), 1), (str(second), 1)]]
    conns = {r["conn_key"]: r for r in table(spark, tmp_path / "out", "connections")}
    assert set(conns) == {f"{first}#1", f"{first}#{whole_conn}", f"{second}#{lone_conn}"}
    assert json.loads(conns[f"{first}#1"]["summary"]) == summary_split["connections"][0]
    for path, summary, conn in ((first, summary_first, whole_conn),
                                (second, summary_second, lone_conn)):  # fmt: skip
        row = conns[f"{path}#{conn}"]
        assert not row["stitched"] and row["capture"] == str(path)
        assert json.loads(row["summary"]) == next(
            c for c in summary["connections"] if c["id"] == conn
        )
    rows = table(spark, tmp_path / "out", "frames")
    for path, frames, conn in ((first, frames_first, whole_conn),
                               (second, frames_second, lone_conn)):  # fmt: skip
        mine = sorted((r["frame"], r["packet"]) for r in rows if r["conn_key"] == f"{path}#{conn}")
        assert mine == [(f.number, f.packet) for f in frames if f.conn == conn]
    assert not any(r["conn_key"] == f"{second}#1" for r in rows)
    assert result["tables"]["frames"] == len(rows)
    assert not (tmp_path / "out" / "_amqpscope_staging").exists()


@needs_java
def test_out_as_a_uri_partition_names_and_empty_tables(spark: Any, tmp_path: Path) -> None:
    """`--out` as a file:// URI; a capture name Spark must escape in its partition folder; a
    table with no rows reads back empty; bad `--out` is one line."""
    from amqpscope.spark import spark as job

    folder = tmp_path / "in"
    folder.mkdir()
    name = "a b#1:%=x?.pcap"
    shutil.copy(CAPTURES / "091-channels.pcap", folder / name)
    out = tmp_path / "out"
    job.run([str(folder)], out.as_uri(), spark=spark)
    rows = table(spark, out, "frames")
    assert {r["capture_file"] for r in rows} == {name}
    assert len(rows) == len(decode(CAPTURES / "091-channels.pcap")[0])
    assert table(spark, out, "links") == []  # 0-9-1 only: no links, still a table
    for name in tables.TABLES:
        assert (out / name / "_SUCCESS").exists(), name
    assert not (out / "_amqpscope_staging").exists()
    for bad in ("nosuchscheme://bucket/tables", "s3://"):
        result = CliRunner().invoke(cli.main, ["spark", str(folder), "--out", bad])
        assert result.exit_code == 1, result.output
        lines = result.output.strip().splitlines()
        assert lines[-1].startswith(f"amqpscope: --out {bad}: "), result.output
        assert "Traceback" not in result.output


@needs_java
def test_the_local_jvm_starts_with_the_quick_compiler_only(spark: Any) -> None:
    """`session` asks a local JVM for C1 alone (`AMQPSCOPE_SPARK_JAVA_OPTIONS` by default):
    the option must reach the JVM's command line, not only Spark's configuration."""
    from amqpscope.spark import spark as job

    bean = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    arguments = list(bean.getInputArguments())
    expected = job._java_options().split()
    assert expected and all(option in arguments for option in expected), arguments


def test_a_local_jvm_gets_a_spark_home_without_pyspark_zips(tmp_path: Path) -> None:
    """`daemon.spark_home`: Spark's launcher and jars as installed, and no `python/lib`, so no
    worker Spark starts has pyspark's zips on its path; made once; None for a pyspark that
    ships no zips (not pip's layout). And SPARK_HOME is set only while a local JVM may start."""
    from amqpscope.spark import daemon, spark

    installed = Path(pyspark.__file__).parent
    if not (installed / "python" / "lib" / "pyspark.zip").is_file():
        pytest.skip("this pyspark ships no zips")
    home = daemon.spark_home(str(installed))
    assert home is not None and daemon.spark_home(str(installed)) == home
    assert (Path(home) / "bin" / "spark-submit").is_file()
    assert sorted(p.name for p in (Path(home) / "jars").iterdir()) == sorted(
        p.name for p in (installed / "jars").iterdir()
    )
    assert not (Path(home) / "python").exists()
    assert daemon.spark_home(str(tmp_path)) is None
    # a folder of that name that is not exactly the links (another's, or stale) is not used
    fake = tmp_path / "pyspark"
    (fake / "python" / "lib").mkdir(parents=True)
    (fake / "python" / "lib" / "pyspark.zip").write_bytes(b"")
    (fake / "bin").mkdir()
    made = daemon.spark_home(str(fake))
    assert made is not None and os.readlink(Path(made) / "bin") == str(fake / "bin")
    (Path(made) / "extra").symlink_to(tmp_path)
    assert daemon.spark_home(str(fake)) is None
    shutil.rmtree(made)
    from pyspark import SparkConf

    before = os.environ.pop("SPARK_HOME", None)
    try:
        with spark._local_home(SparkConf().setMaster("local[1]")):
            assert os.environ["SPARK_HOME"] == home
        assert "SPARK_HOME" not in os.environ
        with spark._local_home(SparkConf().setMaster("spark://127.0.0.1:7077")):
            assert "SPARK_HOME" not in os.environ
        os.environ["SPARK_HOME"] = str(installed)  # the user's: left alone
        with spark._local_home(SparkConf().setMaster("local[1]")):
            assert os.environ["SPARK_HOME"] == str(installed)
    finally:
        os.environ.pop("SPARK_HOME", None)
        if before is not None:
            os.environ["SPARK_HOME"] = before


@needs_java
def test_a_local_run_starts_spark_sql_only_when_it_needs_it(tmp_path: Path) -> None:
    """Spark's SQL session took ~2.4 s of a local run's start: a run of local files without
    `--report` makes a SparkContext alone; `--report` (Spark SQL) then gets its session."""
    code = (
        "import sys\n"
        "from pyspark.sql import SparkSession\n"
        "from amqpscope.spark import spark as job\n"
        "done = job.run([sys.argv[1]], sys.argv[2], master='local[1]')\n"
        "print('bare', done['tables']['frames'], SparkSession._instantiatedSession is None)\n"
        "done = job.run([sys.argv[1]], sys.argv[2], master='local[1]', report=True)\n"
        "print('sql', done['tables']['frames'], SparkSession._instantiatedSession is None)\n"
    )
    capture = str(CAPTURES / "091-channel-errors.pcap")
    result = subprocess.run(
        [sys.executable, "-c", code, capture, str(tmp_path / "out")],
        capture_output=True, text=True, cwd="/", check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    said = [line.split() for line in result.stdout.splitlines() if line.startswith(("bare", "sql"))]
    frames = str(len(decode(Path(capture))[0]))
    assert said == [["bare", frames, "True"], ["sql", frames, "False"]]
    assert "PRECONDITION_FAILED" in result.stdout  # the report ran, on Spark SQL


@needs_java
def test_workers_start_from_the_installed_pyspark_with_the_decoder_loaded(spark: Any) -> None:
    """`spark.daemon`: Spark puts its zip of pyspark first on the workers' path, compiled
    afresh at every start; the workers use the installed copy and find amqpscope imported."""

    def where(_: Any) -> tuple[str, bool]:
        import pyspark as worker_pyspark

        return worker_pyspark.__file__, "amqpscope.spark.tasks" in sys.modules

    seen = spark.sparkContext.parallelize(range(2), 2).map(where).collect()
    installed = Path(pyspark.__file__).resolve()
    for file, loaded in seen:
        assert Path(file).resolve() == installed and ".zip" not in file
        assert loaded
    # what the daemon imports must start no thread (it forks): pyarrow waits for the workers
    probe = "import sys, threading, amqpscope.spark.daemon as d; d.preload();"
    probe += "print('pyarrow' in sys.modules, threading.active_count())"
    shown = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert shown.stdout.split() == ["False", "1"]


def test_daemon_moves_only_the_zips_that_copy_the_installed_pyspark(monkeypatch: Any) -> None:
    from amqpscope.spark import daemon

    lib = Path(pyspark.__file__).parent / "python" / "lib"
    shipped = [str(lib / "pyspark.zip"), str(lib / "py4j-src.zip")]
    other = "/elsewhere/pyspark.zip"  # a zip of somebody else's: stays where it is
    path = [*shipped, other, *[p for p in sys.path if not p.endswith(".zip")]]
    monkeypatch.setattr(sys, "path", list(path))
    daemon.prefer_installed()
    moved = sys.path
    assert moved[-2:] == shipped and moved[0] == other
    assert [p for p in moved if p not in shipped] == [p for p in path if p not in shipped]


def test_rows_become_the_same_arrow_batches_in_one_pass_as_column_by_column() -> None:
    """`Layout.batch` reads rows as structs in one pass; a value its column cannot hold (a count
    past 64 bits) sends it to the column-by-column path, which makes that value null."""
    from amqpscope.spark import rows, store

    checked = 0
    for path in FILES:
        by_table: dict[str, list[Any]] = {}
        for kind, value in rows.decode_file(str(path)):
            if kind in tables.TABLES:
                by_table.setdefault(kind, []).extend(value)
        for name, values in by_table.items():
            shape = store.layout(name)
            assert shape.batch(values).equals(shape._by_column(values)), (path.name, name)
            checked += 1
    assert checked >= len(FILES)
    shape = store.layout("frames")
    records = rows.decode_file(str(SPLIT))
    frames = [row for kind, part in records if kind == "frames" for row in part]
    at = [n for n, _ in tables.COLUMNS["frames"]].index("size")
    huge = [*frames[:2], (*frames[2][:at], 1 << 64, *frames[2][at + 1 :]), *frames[3:]]
    made = shape.batch(huge)
    assert made.column("size")[2].as_py() is None
    assert made.column("size").null_count == shape.batch(frames).column("size").null_count + 1
    assert made.column("fields").equals(shape.batch(frames).column("fields"))


def test_values_that_drift_from_their_column_type_become_null_or_text() -> None:
    """A tracker's value of another shape than its column's never fails a row: counts that are
    not finite numbers become null (infinity used to raise), other shapes JSON text."""
    made = dict(zip([n for n, _ in tables.COLUMNS["channels"]], tables.row("channels", {
        "publishes": float("inf"), "acks": float("-inf"), "nacks": float("nan"), "rejects": 3.0,
        "unacked": True, "state": {"open": 1}, "ack_p50_ms": 2, "close_text": b"caf\xc3\xa9",
    }), strict=True))  # fmt: skip
    assert made["publishes"] is None and made["acks"] is None and made["nacks"] is None
    assert made["rejects"] == 3 and type(made["rejects"]) is int
    assert made["unacked"] == 1 and type(made["unacked"]) is int
    assert made["state"] == '{"open":1}' and made["close_text"] == "café"
    assert made["ack_p50_ms"] == 2.0 and type(made["ack_p50_ms"]) is float


@needs_java
def test_a_worker_python_that_cannot_import_amqpscope_is_one_line(tmp_path: Path) -> None:
    """PYSPARK_PYTHON set to a Python without amqpscope (here this one, isolated from its
    site-packages) is named in one line before Spark starts, not a page of executor traces."""
    bare = tmp_path / "bare-python"
    bare.write_text(f'#!/bin/sh\nexec {sys.executable} -I -S "$@"\n')
    bare.chmod(0o755)
    env = {**os.environ, "PYSPARK_PYTHON": str(bare)}
    shown = subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", "spark", str(SPLIT), "--out", str(tmp_path / "o"),
         "--master", "local[1]"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert shown.returncode == 1
    lines = shown.stderr.strip().splitlines()
    assert len(lines) == 1 and f"PYSPARK_PYTHON={bare} cannot run the workers" in lines[0]
    assert "No module named" in lines[0] and "Traceback" not in shown.stderr


def test_frame_rows_come_in_chunks_bounded_in_rows_and_bytes(monkeypatch: Any) -> None:
    """A worker holds at most a chunk of frame rows before the writer takes them: `CHUNK` rows,
    or fewer once their JSON texts reach `CHUNK_BYTES` (a capture of big messages)."""
    from amqpscope.spark import rows

    def chunks() -> list[list[Any]]:
        return [part for kind, part in rows.decode_file(str(SPLIT)) if kind == "frames"]

    whole = chunks()
    names = [n for n, _ in tables.COLUMNS["frames"]]
    at, msg = names.index("fields"), names.index("message")

    def size(row: Any) -> int:
        return len(row[at]) + len(row[msg] or b"")

    monkeypatch.setattr(rows, "CHUNK", 7)
    monkeypatch.setattr(rows, "CHUNK_BYTES", 600)
    small = chunks()
    assert [r for part in small for r in part] == [r for part in whole for r in part]
    assert len(small) > len(whole) and all(len(part) <= 7 for part in small)
    assert all(sum(map(size, part[:-1])) < 600 for part in small)
    assert any(len(part) < 7 and sum(map(size, part)) >= 600 for part in small[:-1])


def test_settled_deliveries_leave_the_log_as_they_settle(monkeypatch: Any) -> None:
    """A long connection's delivery rows must not pile up in a worker: settled rows are handed
    out as they settle (`DeliveryLog.take`, which `rows.decode` drains at `CHUNK` rows), and the
    rows out are the same whichever way they are drained."""
    from amqpscope.spark import rows

    for path in (
        CAPTURES / "091-qos-prefetch.pcap",
        CAPTURES / "10-outcomes.pcap",
        CAPTURES / "091-confirms-return.pcap",
    ):
        frames, _ = decode(path)
        whole = DeliveryLog()
        drained = DeliveryLog()
        taken: list[dict[str, Any]] = []
        for frame in frames:
            whole.feed(frame)
            drained.feed(frame)
            taken += drained.take()
            assert drained.rows == []
        assert taken and all(r["settled"] is not False for r in taken), path
        tail = drained.finish()
        assert all(r["settled"] is False for r in tail)
        key = repr  # rows are dicts of plain values
        assert sorted(map(key, taken + tail)) == sorted(map(key, whole.finish())), path

    def deliveries() -> tuple[list[str], list[Any]]:
        kinds, out = [], []
        for kind, part in rows.decode_file(str(CAPTURES / "091-qos-prefetch.pcap")):
            kinds.append(kind)
            if kind == "deliveries":
                out += part
        return kinds, sorted(out, key=repr)

    kinds, whole_rows = deliveries()
    monkeypatch.setattr(rows, "CHUNK", 3)
    small_kinds, small_rows = deliveries()
    assert small_rows == whole_rows and whole_rows
    # drained while the frames still come, not only at the end
    assert "deliveries" in small_kinds[: max(i for i, k in enumerate(small_kinds) if k == "frames")]
    assert "deliveries" not in kinds[: max(i for i, k in enumerate(kinds) if k == "frames")]


def test_a_connection_that_ends_takes_its_delivery_rows_with_it(
    monkeypatch: Any, tmp_path: Path
) -> None:
    """A capture of many short connections must not hold every connection's delivery rows
    until the file ends: when a connection's TCP ends (its `transport` record), its rows, the
    unsettled ones too, leave the worker; the rows are the same either way."""
    sys.path.insert(0, str(CAPTURES.parent / "bench"))
    from synth import multiply

    from amqpscope.spark import rows

    many = tmp_path / "many.pcap"
    copies = 6
    multiply(CAPTURES / "091-qos-prefetch.pcap", many, copies)

    def decoded() -> tuple[list[tuple[str, int]], list[Any]]:
        seen: list[tuple[str, int]] = []  # (kind, connections whose frames came so far)
        out: list[Any] = []
        conns: set[int] = set()
        at = [n for n, _ in tables.COLUMNS["frames"]].index("conn")
        for kind, part in rows.decode_file(str(many)):
            if kind == "frames":
                conns.update(r[at] for r in part)
            elif kind == "deliveries":
                out += part
            seen.append((kind, len(conns)))
        return seen, sorted(out, key=repr)

    whole_seen, whole = decoded()
    assert len({r[2] for r in whole}) == copies  # conn_key
    assert next(n for kind, n in whole_seen if kind == "deliveries") == copies
    # more than a connection's rows: no connection alone fills a chunk (which `CHUNK` would
    # drain anyway), the rows of two that ended do
    monkeypatch.setattr(rows, "CHUNK", len(whole) // copies + 1)
    seen, drained = decoded()
    assert drained == whole
    assert next(n for kind, n in seen if kind == "deliveries") < copies


def test_connections_retired_at_their_tcp_end_give_the_same_tables(
    monkeypatch: Any, tmp_path: Path
) -> None:
    """A connection whose TCP ends leaves the trackers at once (`rows._retire`): its rows are
    made then, not at the file's end. Every table is the same either way (the findings counts
    of its row included: frame, tracker, codec and TCP findings) on every bundled, damaged and
    mutated capture and on a file of many connections; and such a file is held a connection at
    a time."""
    import tracemalloc

    from amqpscope.spark import rows
    from tests.test_damaged import damage
    from tests.test_mutation import FILES as MUTATED
    from tests.test_mutation import mutations
    from tests.test_spark_rows_retire import tables_of

    sys.path.insert(0, str(CAPTURES.parent / "bench"))
    from synth import multiply

    paths = [*FILES, *(tmp_path / case.file for case in damage.build(tmp_path))]
    for source in MUTATED[::3]:
        for i, (_, data) in enumerate(mutations(source)):
            paths.append(tmp_path / f"{source.stem}-{i}{source.suffix}")
            paths[-1].write_bytes(data)
    many = tmp_path / "many.pcap"
    multiply(CAPTURES / "091-qos-prefetch.pcap", many, 40)
    paths.append(many)

    retire = rows._retire
    retired = 0

    def counting(*args: Any) -> Any:
        nonlocal retired
        done = retire(*args)
        retired += done is not None
        return done

    more = tmp_path / "more.pcap"
    multiply(CAPTURES / "091-qos-prefetch.pcap", more, 240)

    def growth() -> int:
        """What a worker holds at its peak: 240 connections less 40 (bytes)."""
        peaks = []
        for path in (many, more):
            tracemalloc.start()
            for _ in rows.decode_file(str(path)):
                pass
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
        return peaks[1] - peaks[0]

    monkeypatch.setattr(rows, "_retire", counting)
    early = {path: tables_of(path) for path in paths}
    grows_early = growth()
    monkeypatch.setattr(rows, "_retire", lambda *args: None)
    late = {path: tables_of(path) for path in paths}
    grows_late = growth()
    for path in paths:
        assert early[path] == late[path], path.name
    assert retired > 40 + len(FILES) // 2
    assert sum(len(t.get("findings", [])) for t in early.values()) > 50
    assert grows_early < grows_late / 2.5, (grows_early, grows_late)  # 7 KB a connection: 22


def test_frame_findings_leave_as_they_come_and_are_still_counted(monkeypatch: Any) -> None:
    """A hostile capture can have a finding on every frame: a worker hands them out a chunk at
    a time, and every table (the connections' findings counts too) is the same either way."""
    from amqpscope.spark import rows

    def decoded(path: Path) -> tuple[list[str], dict[str, list[str]]]:
        kinds: list[str] = []
        out: dict[str, list[str]] = {}
        for kind, part in rows.decode_file(str(path)):
            kinds.append(kind)
            if kind in tables.TABLES:
                out.setdefault(kind, []).extend(map(repr, part))
        return kinds, {table: sorted(values) for table, values in out.items()}

    early = 0
    for name in ("091-channel-errors.pcap", "091-bad-header.pcap", "10-bad-address.pcap"):
        _, whole = decoded(CAPTURES / name)
        with monkeypatch.context() as patch:
            patch.setattr(rows, "CHUNK", 1)
            small_kinds, small = decoded(CAPTURES / name)
        assert small == whole and whole.get("findings"), name
        last_frames = max(i for i, k in enumerate(small_kinds) if k == "frames")
        early += "findings" in small_kinds[:last_frames]
    assert early  # drained while the frames still came


def _edge(capture: str, order: int, **kw: Any) -> stitch.Edge:
    base = dict(
        conn=1,
        client="10.0.0.1:40000",
        server="10.0.0.2:5672",
        first_ts=100.0 * order,
        last_ts=100.0 * order + 99,
        head_open=order > 0,
        tail_open=True,
    )
    base.update(kw)
    return stitch.Edge(capture, order, **base)  # type: ignore[arg-type]


def test_stitch_chains_continuing_parts_only() -> None:
    a = _edge("a", 0, seqs={"10.0.0.1:40000": [1, 5000]})
    b = _edge("b", 1, seqs={"10.0.0.1:40000": [5000, 9000]}, client="10.0.0.2:5672",
              server="10.0.0.1:40000")  # fmt: skip
    c = _edge("c", 2, tail_open=False)
    assert stitch.groups([c, b, a]) == [[a, b, c]]
    # a sequence number far from where the earlier part stopped: another connection
    far = _edge("b", 1, seqs={"10.0.0.1:40000": [5000 + (1 << 31), 1]})
    assert stitch.groups([a, far]) == []
    # a part that ended in its file (FIN or RST), or a later part that opened with a SYN
    assert stitch.groups([_edge("a", 0, tail_open=False), _edge("b", 1)]) == []
    assert stitch.groups([a, _edge("b", 1, head_open=False)]) == []
    # too long a silence between the files; the same endpoints of another pair
    assert stitch.groups([a, _edge("b", 1, first_ts=1e9)]) == []
    assert stitch.groups([a, _edge("b", 1, client="10.0.0.9:40000")]) == []
    assert stitch.groups([a, _edge("b", 1, amqp=False)]) == [[a, _edge("b", 1, amqp=False)]]
    assert stitch.groups([_edge("a", 0, amqp=False), _edge("b", 1, amqp=False)]) == []


def test_deliveries_log_settles_multiple_and_tag_zero() -> None:
    frames, _ = decode(CAPTURES / "091-qos-prefetch.pcap")
    log = DeliveryLog()
    for frame in frames:
        log.feed(frame)
    rows = log.finish()
    delivered = [r for r in rows if r["kind"] in ("deliver", "get")]
    assert delivered and all(r["settled"] for r in delivered)
    assert all(tables.row("deliveries", r) for r in rows)


def test_missing_java_or_pyspark_is_one_line_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    result = CliRunner().invoke(cli.main, ["spark", str(CAPTURES), "--out", str(tmp_path)])
    assert result.exit_code == 1
    assert "apt-get install default-jre-headless" in result.output
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pyspark" else real(name, *a)
    )
    result = CliRunner().invoke(cli.main, ["spark", str(CAPTURES), "--out", str(tmp_path)])
    assert result.exit_code == 1
    assert "pip install 'amqpscope[spark]'" in result.output


def test_docs_name_every_column() -> None:
    docs = (CAPTURES.parent / "docs" / "spark.md").read_text(encoding="utf-8")
    for name, columns in tables.COLUMNS.items():
        assert f"### `{name}`" in docs, name
        for column, _ in columns:
            assert f"`{column}`" in docs, (name, column)


def test_docs_show_the_report_queries() -> None:
    from amqpscope.spark import report

    docs = (CAPTURES.parent / "docs" / "spark.md").read_text(encoding="utf-8")
    for sql in report.QUERIES.values():
        assert sql.strip() in docs


def _strings(value: Any) -> list[str]:
    """Every string in a row value (JSON text, nested rows and lists)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    if hasattr(value, "asDict"):
        return _strings(value.asDict())
    return []


def _passwords(fields: Any) -> list[Any]:
    if isinstance(fields, dict):
        return [v for k, v in fields.items() if k == "password"] + [
            p for v in fields.values() for p in _passwords(v)
        ]
    if isinstance(fields, list):
        return [p for v in fields for p in _passwords(v)]
    return []


SECRETS = ("10-sasl-plain.pcap", "10-sasl-failed.pcap", "091-refused-login.pcap")


@needs_java
def test_credentials_stay_out_of_the_tables_unless_show_secrets(spark: Any, tmp_path: Path) -> None:
    from amqpscope.spark import spark as job

    folder = tmp_path / "in"
    folder.mkdir()
    truth: dict[str, list[str]] = {}
    for name in (*SECRETS, "091-publish-consume.pcap"):
        shutil.copy(CAPTURES / name, folder / name)
        with open_capture(CAPTURES / name) as capture:
            frames = list(Dissector(show_secrets=True).run(capture))
        truth[name] = [p for f in frames for p in _passwords(f.fields)]
    assert all(truth[name] for name in SECRETS)  # each of them has a password on the wire

    job.run([str(folder)], str(tmp_path / "hidden"), spark=spark, redact_bodies=True)
    job.run([str(folder)], str(tmp_path / "shown"), spark=spark, show_secrets=True)
    for name in tables.TABLES:
        hidden = table(spark, tmp_path / "hidden", name)
        text = [s for r in hidden for s in _strings(r)]
        for secret in {p for ps in truth.values() for p in ps} - {"guest"}:  # guest: the user too
            assert not any(secret in s for s in text), (name, secret)
    for label, expect in (("hidden", lambda p: "<redacted>"), ("shown", lambda p: p)):
        rows = table(spark, tmp_path / label, "frames")
        for name in SECRETS:
            got = [
                p
                for r in rows
                if r["capture"].endswith(name)
                for p in _passwords(json.loads(r["fields"]))
            ]
            assert got == [expect(p) for p in truth[name]], (label, name)
    # --redact-bodies: the messages are what the decoder gives without their bodies
    with open_capture(CAPTURES / "091-publish-consume.pcap") as capture:
        redacted = [f.message for f in Dissector(redact_bodies=True).run(capture)]
    rows = table(spark, tmp_path / "hidden", "frames")
    mine = sorted(
        (r for r in rows if r["capture"].endswith("091-publish-consume.pcap")),
        key=lambda r: r["frame"],
    )
    assert [json.loads(r["message"]) if r["message"] else None for r in mine] == redacted
    assert any(m for m in redacted)


@needs_java
def test_file_uris_and_globs_are_listed_and_read_by_hadoop(spark: Any, tmp_path: Path) -> None:
    from amqpscope.spark import spark as job

    one, two = tmp_path / "one", tmp_path / "two" / "deeper"
    one.mkdir()
    two.mkdir(parents=True)
    shutil.copy(CAPTURES / "10-outcomes.pcap", one / "a.pcap")
    (one / "notes.txt").write_text("not a capture\n")  # in a folder: skipped
    shutil.copy(CAPTURES / "091-channel-errors.pcap", two / "b.pcap")
    shutil.copy(CAPTURES / "091-qos-prefetch.pcap", two / "c.pcapng.skip")
    result = job.run(
        [one.as_uri(), f"file://{tmp_path}/two/*/*.pcap"], str(tmp_path / "out"), spark=spark
    )
    rows = table(spark, tmp_path / "out", "frames")
    per_file = Counter(r["capture"] for r in rows)
    # Hadoop's names for the files: what binaryFile read
    assert set(per_file) == {f"file:{one}/a.pcap", f"file:{two}/b.pcap"}
    assert per_file[f"file:{one}/a.pcap"] == len(decode(CAPTURES / "10-outcomes.pcap")[0])
    assert per_file[f"file:{two}/b.pcap"] == len(decode(CAPTURES / "091-channel-errors.pcap")[0])
    assert result["files"] == 2
    conns = table(spark, tmp_path / "out", "connections")
    assert sorted(r["capture"] for r in conns) == sorted(per_file)


@needs_java
def test_uri_errors_are_one_line(spark: Any, tmp_path: Path) -> None:
    for uri, expect in (
        ("s3a://amqpscope-no-bucket/captures/", "no Hadoop filesystem for scheme 's3a'"),
        (f"file://{tmp_path}/missing/", "no such file or folder"),
        (f"file://{tmp_path}/*.nothing", "no such file or folder"),
    ):
        result = CliRunner().invoke(cli.main, ["spark", uri, "--out", str(tmp_path / "o")])
        assert result.exit_code == 1, result.output
        lines = result.output.strip().splitlines()
        assert lines[-1].startswith("amqpscope: ") and expect in lines[-1], result.output
        assert "Traceback" not in result.output and "at org.apache" not in result.output
