"""`amqpscope spark`'s tables as others open them: pyarrow (`parquet.read_table`), DuckDB
(`read_parquet` with Hive partitioning) and Spark with no schema given all read every table, and
all read the same rows. The hard case is a row with no time (a file that is no capture, a Proton
log without timestamps): in Hive's null partition alone, `date=__HIVE_DEFAULT_PARTITION__`,
pyarrow cannot tell the partition's type and refuses the whole table.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from amqpscope.spark import tables

CAPTURES = Path(__file__).resolve().parent.parent / "captures"

pyspark = pytest.importorskip("pyspark", reason="needs the spark extra")
# the spark extra brings these too: missing beside pyspark, the test fails rather than skips
import duckdb  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

needs_java = pytest.mark.skipif(
    not (shutil.which("java") or os.environ.get("JAVA_HOME")), reason="Spark needs Java"
)


@pytest.fixture(scope="module")
def spark() -> Any:
    from amqpscope.spark import spark as job

    session = job.session("local[2]", app="amqpscope-readers")
    yield session
    session.stop()


def rows_by_reader(spark: Any, table: Path) -> dict[str, Counter[tuple[str, str]]]:
    """(capture, date) of every row of `table`, as each reader reads it."""
    arrow = pq.read_table(table).to_pylist()
    found = list(table.rglob("*.parquet"))
    assert found, table  # an empty table has a file too (DuckDB refuses an empty glob)
    rel = duckdb.sql(
        f"select * from read_parquet('{table}/**/*.parquet', hive_partitioning = true,"
        " union_by_name = true)"
    )
    duck = [dict(zip(rel.columns, r, strict=True)) for r in rel.fetchall()]
    sparked = [r.asDict() for r in spark.read.parquet(str(table)).collect()]

    def pairs(rows: list[dict[str, Any]]) -> Counter[tuple[str, str]]:
        return Counter((str(r.get("capture")), str(r.get("date"))) for r in rows)

    return {"pyarrow": pairs(arrow), "duckdb": pairs(duck), "spark": pairs(sparked)}


@needs_java
@pytest.mark.parametrize(
    "inputs",
    [
        ["junk.pcap"],  # the only row: the finding that the file is no capture, with no date
        ["junk.pcap", "log-proton-starved.log", "091-publish-consume.pcap"],  # with and without
    ],
    ids=["undated-only", "dated-and-undated"],
)
def test_every_table_opens_in_pyarrow_duckdb_and_spark_alike(
    spark: Any, tmp_path: Path, inputs: list[str]
) -> None:
    from amqpscope.spark import spark as job

    folder = tmp_path / "in"
    folder.mkdir()
    for name in inputs:
        if name == "junk.pcap":
            (folder / name).write_text("not a capture at all\n")
        else:
            shutil.copy(CAPTURES / name, folder / name)
    out = tmp_path / "out"
    job.run([str(folder / name) for name in inputs], str(out), spark=spark)
    undated = {str(folder / n) for n in inputs if n == "junk.pcap" or n.endswith(".log")}
    seen = Counter[str]()
    for name in tables.TABLES:
        read = rows_by_reader(spark, out / name)
        assert read["pyarrow"] == read["duckdb"] == read["spark"], name
        for (capture, date), count in read["pyarrow"].items():
            seen[capture] += count
            # a row without time says so in every reader, and is not in Hive's null partition
            assert (date == tables.UNDATED) == (capture in undated), (name, capture, date)
        assert not list((out / name).glob("*__HIVE_DEFAULT_PARTITION__*")), name
    assert set(seen) == {str(folder / n) for n in inputs}  # every input has rows somewhere
