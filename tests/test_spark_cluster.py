"""A real Spark cluster: a standalone master and two workers started from the installed pyspark
(`spark-class org.apache.spark.deploy.master.Master` / `...deploy.worker.Worker`, each its own
JVM on 127.0.0.1, one core and 1 GB each), so the tasks run in executors that are not the
driver. On it, `amqpscope spark --master spark://...` and the `amqp` data source must give the
tables they give on local[2]; and one query goes through a Spark Connect server (the installed
pyspark's `SparkConnectServer`, on loopback) running on the same cluster.

The drivers run as subprocesses (one SparkContext per process); executors import amqpscope from
this checkout through PYTHONPATH, as a node with amqpscope installed would.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from amqpscope.spark import tables
from tests.test_spark import SPLIT, needs_java, split_pcap
from tests.test_spark_datasource import canonical

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "captures"
SAMPLE = ("10-outcomes.pcap", "091-channel-errors.pcap", "10-sasl-plain.pcap", "091-tx.pcap")

pyspark = pytest.importorskip(
    "pyspark.sql.datasource", reason="needs pyspark 4 (the spark extra; make install installs it)"
)
SPARK_HOME = Path(
    pytest.importorskip(
        "pyspark", reason="needs the spark extra (make install installs it)"
    ).__file__
).parent
pytestmark = needs_java


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def environment() -> dict[str, str]:
    return {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": str(ROOT),
        "SPARK_DAEMON_MEMORY": "256m",
        # daemons that live for a test session: the quick compiler starts them sooner
        "SPARK_DAEMON_JAVA_OPTS": "-XX:TieredStopAtLevel=1",
    }


def wait_for(log: Path, text: str, process: subprocess.Popen[bytes], seconds: float) -> None:
    limit = time.monotonic() + seconds
    while time.monotonic() < limit:
        if log.exists() and text in log.read_text(errors="replace"):
            return
        if process.poll() is not None:
            break
        time.sleep(0.2)
    raise RuntimeError(f"{log.name}: no {text!r}:\n{log.read_text(errors='replace')[-3000:]}")


class Cluster:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(
        self, name: str, *command: str, ready: str, seconds: float = 90, memory: str = "256m"
    ) -> None:
        log = self.folder / f"{name}.log"
        env = {**environment(), "SPARK_DAEMON_MEMORY": memory}
        with log.open("wb") as out:
            process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=self.folder
            )
        self.processes.append(process)
        wait_for(log, ready, process, seconds)

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A master and two workers, each one core and 1 GB (an executor's default memory)."""
    folder = tmp_path_factory.mktemp("cluster")
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    running = Cluster(folder)
    try:
        running.start(
            "master", spark_class, "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1", "--port", str(running.port), "--webui-port", str(free_port()),
            ready="I have been elected leader",
        )  # fmt: skip
        for n in (1, 2):
            work = folder / f"work-{n}"
            work.mkdir()
            running.start(
                f"worker-{n}", spark_class, "org.apache.spark.deploy.worker.Worker",
                "--host", "127.0.0.1", "--cores", "1", "--memory", "1g",
                "--webui-port", str(free_port()), "--work-dir", str(work), running.url,
                ready="Successfully registered with master",
            )  # fmt: skip
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A few recorded captures and a rotated pair that cuts one connection in two."""
    folder = tmp_path_factory.mktemp("inputs")
    for name in SAMPLE:
        shutil.copy(CAPTURES / name, folder / name)
    split_pcap(SPLIT, folder / "ring.pcap0", folder / "ring.pcap1")
    return folder


def run_driver(code: str, *args: str, timeout: float = 300) -> str:
    """The driver's stdout; a driver still running after `timeout` seconds fails the test in
    one line (its own JVM ends with it: pyspark's gateway exits when its driver's pipe closes)."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, *args],
            capture_output=True, text=True, timeout=timeout, env=environment(),
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        said = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else ""
        pytest.fail(
            f"the driver did not finish in {timeout:.0f} s (load average"
            f" {os.getloadavg()[0]:.1f}); its last words: {said[-600:]!r}",
            pytrace=False,
        )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return done.stdout


#: a driver on the cluster: tables read with the data source, written as Parquet (each
#: `NAME=TABLE=PATH` to OUT/NAME/TABLE); and how many executors the application had (the
#: driver's own counts as one)
DATASOURCE_DRIVER = """
import json, sys
from pyspark.sql import SparkSession
from amqpscope.spark.datasource import AmqpDataSource
master, out, *reads = sys.argv[1:]
spark = (SparkSession.builder.master(master).appName("amqpscope-datasource-cluster")
         .config("spark.ui.enabled", "false").config("spark.sql.session.timeZone", "UTC")
         .getOrCreate())
spark.dataSource.register(AmqpDataSource)
for read in reads:
    name, table, path = read.split("=", 2)
    frame = spark.read.format("amqp").option("table", table).load(path)
    frame.write.parquet(f"{out}/{name}/{table}")
sc = spark.sparkContext
print(json.dumps({"executors": sc._jsc.sc().getExecutorMemoryStatus().size()}))
spark.stop()
"""
#: the data source driver's seconds: a JVM for the driver, one on each worker for the
#: application's executors, the planning workers, five small queries (at load average 19 on
#: 2 cores: about 200 s)
SOURCE_TIMEOUT = 420.0
#: what the data source reads on the cluster: each table is a decode of its own (the job test
#: has all); and a trace log alone, read by the executors as a capture is
SOURCE_READS = (("captures", "frames"), ("captures", "connections"), ("log", "frames"))


@pytest.fixture(scope="module")
def source_tables(
    cluster: Cluster, inputs: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path, dict[str, Any]]:
    """One application on the cluster reads the inputs and a small trace log (44 lines) with
    the data source: (its tables, the log, what the driver said)."""
    out = tmp_path_factory.mktemp("source-tables")
    log = tmp_path_factory.mktemp("log") / "log-rhea-broker.log"
    shutil.copy(CAPTURES / log.name, log)
    paths = {"captures": inputs, "log": log}
    reads = [f"{name}={table}={paths[name]}" for name, table in SOURCE_READS]
    said = run_driver(DATASOURCE_DRIVER, cluster.url, str(out), *reads, timeout=SOURCE_TIMEOUT)
    return out, log, json.loads(said.strip().splitlines()[-1])


def parquet_rows(spark: Any, folder: Path, table: str) -> list[str]:
    names = [name for name, _ in tables.COLUMNS[table]]
    frame = spark.read.schema(tables.struct_type(table)).parquet(str(folder / table))
    return canonical(frame.select(*names).collect(), table)


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory, inputs: Path) -> Iterator[tuple[Any, Path]]:
    """The local[2] session and `amqpscope spark`'s tables of `inputs` made on it."""
    from amqpscope.spark import spark as job

    spark = job.session("local[2]", app="amqpscope-cluster-tests")
    target = tmp_path_factory.mktemp("local-tables")
    job.run([str(inputs)], str(target), spark=spark)
    yield spark, target
    spark.stop()


def test_the_job_on_the_cluster_writes_the_local_tables(
    cluster: Cluster, inputs: Path, local: tuple[Any, Path], tmp_path: Path
) -> None:
    spark, expected = local
    done = subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", "spark", str(inputs), "--out", str(tmp_path),
         "--master", cluster.url],
        capture_output=True, text=True, timeout=300, env=environment(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    assert f"on {cluster.url}" in done.stderr and "stitched 1 connections" in done.stderr
    for table in tables.TABLES:
        assert parquet_rows(spark, tmp_path, table) == parquet_rows(spark, expected, table), table


def test_the_data_source_on_the_cluster_gives_the_local_tables(
    source_tables: tuple[Path, Path, dict[str, Any]], local: tuple[Any, Path]
) -> None:
    spark, expected = local
    out, _, said = source_tables
    # the driver and the two workers' executors: the tasks did not run in the driver
    assert said["executors"] == 3, said
    for name, table in SOURCE_READS:
        if name == "captures":
            got = parquet_rows(spark, out / name, table)
            assert got == parquet_rows(spark, expected, table), table


def test_a_trace_log_through_the_data_source_on_the_cluster(
    source_tables: tuple[Path, Path, dict[str, Any]], local: tuple[Any, Path]
) -> None:
    """A log is read by the executors as a capture is: the same rows as on local[2]."""
    spark, _ = local
    out, log, _ = source_tables
    want = spark.read.format("amqp").option("table", "frames").load(str(log)).collect()
    assert want and all(row["line"] for row in want)  # the log's frames, each with its line
    assert parquet_rows(spark, out / "log", "frames") == canonical(want, "frames")


CONNECT_CLIENT = """
import json, sys
from pyspark.sql import SparkSession
from amqpscope.spark.datasource import AmqpDataSource
url, inputs = sys.argv[1:]
spark = SparkSession.builder.remote(url).getOrCreate()
spark.dataSource.register(AmqpDataSource)
rows = (spark.read.format("amqp").option("table", "connections").load(inputs)
        .orderBy("conn_key").collect())
print(json.dumps([r.asDict() for r in rows], default=str))
spark.stop()
"""


def test_a_query_through_spark_connect_on_the_cluster(
    cluster: Cluster, inputs: Path, local: tuple[Any, Path]
) -> None:
    pytest.importorskip(
        "grpc", reason="Spark Connect needs grpc (the connect extra; make install installs it)"
    )
    spark, expected = local
    port = free_port()
    submit = str(SPARK_HOME / "bin" / "spark-submit")
    cluster.start(
        "connect", submit, "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--master", cluster.url, "--name", "amqpscope-connect",
        "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf", f"spark.connect.grpc.binding.port={port}",
        "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.session.timeZone=UTC",
        ready="Spark Connect server started", seconds=120, memory="1g",  # its driver's heap
    )  # fmt: skip
    try:
        out = run_driver(CONNECT_CLIENT, f"sc://127.0.0.1:{port}", str(inputs))
    finally:
        connect = cluster.processes.pop()
        connect.terminate()
        connect.wait(timeout=60)
    got = json.loads(out.strip().splitlines()[-1])
    want = spark.read.parquet(str(expected / "connections")).orderBy("conn_key").collect()
    assert [r["conn_key"] for r in got] == [r["conn_key"] for r in want]
    for mine, theirs in zip(got, want, strict=True):
        assert json.loads(mine["summary"]) == json.loads(theirs["summary"])
        assert mine["frames"] == theirs["frames"] and mine["files"] == theirs["files"]
