"""The documented spark-submit run (docs/spark.md): the wheel built here and shipped with
`--py-files`, `amqpscope/spark/submit.py` as the driver script, `--master local[2]`; its
tables must be the embedded run's, row for row, on recorded captures and a rotated pair.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from amqpscope.spark import tables
from tests.test_spark import SPLIT, split_pcap

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "captures"
SAMPLE = ("10-outcomes.pcap", "091-channel-errors.pcap", "10-sasl-plain.pcap", "091-tx.pcap")

pyspark = pytest.importorskip("pyspark", reason="needs the spark extra (make install installs it)")
pytestmark = pytest.mark.skipif(
    not (shutil.which("java") or os.environ.get("JAVA_HOME")), reason="Spark needs Java"
)


def build_wheel(target: Path) -> Path:
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(target)]
    if importlib.util.find_spec("hatchling") is not None:
        command.append("--no-build-isolation")
    # pure Python: --py-files ships a zip, and a zip cannot hold importable extension modules
    env = {**os.environ, "AMQPSCOPE_BUILD": "pure"}
    subprocess.run([*command, str(ROOT)], check=True, capture_output=True, timeout=300, env=env)
    (wheel,) = target.glob("amqpscope-*.whl")
    return wheel


def test_spark_submit_with_the_wheel_writes_the_embedded_runs_tables(tmp_path: Path) -> None:
    from pyspark.sql import SparkSession

    from amqpscope.spark import spark as job

    folder = tmp_path / "in"
    folder.mkdir()
    for name in SAMPLE:
        if (CAPTURES / name).exists():
            shutil.copy(CAPTURES / name, folder / name)
    split_pcap(SPLIT, folder / "ring.pcap0", folder / "ring.pcap1")
    wheel = build_wheel(tmp_path / "dist")

    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [str(submit), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
         "--py-files", str(wheel), str(ROOT / "amqpscope" / "spark" / "submit.py"),
         str(folder), "--out", str(tmp_path / "submitted")],
        capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path,
    )  # fmt: skip
    said = done.stdout + done.stderr  # spark-submit merges the driver's stderr into stdout
    assert done.returncode == 0, said[-3000:]
    # the driver imported amqpscope from the shipped wheel, not from this checkout
    where = [line for line in said.splitlines() if line.startswith("amqpscope: 0")]
    assert where and where[0].endswith(wheel.name), said[-3000:]
    assert "stitched 1 connections" in said

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("amqpscope-tests-submit")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    try:
        job.run([str(folder)], str(tmp_path / "embedded"), spark=spark)
        for name in tables.TABLES:
            frames: list[Any] = [
                spark.read.schema(tables.struct_type(name)).parquet(str(tmp_path / run / name))
                for run in ("submitted", "embedded")
            ]
            assert frames[0].count() == frames[1].count(), name
            assert frames[0].exceptAll(frames[1]).count() == 0, name
            assert frames[1].exceptAll(frames[0]).count() == 0, name
        assert frames[0].count() > 0
    finally:
        spark.stop()
