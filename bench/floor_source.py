"""The floor of `bench/spark_scaling.py --floor`: a Python data source that decodes nothing. It
hands Spark Arrow batches made before the session started (the `amqp` source's own batches of
the same files, written as Arrow IPC streams, one per task), so what a query of it costs is what
Spark's Python data source path costs for those rows and that schema: the worker passing the
batches on, the JVM reading them and copying every value into its rows. No Python data source
can hand Spark these rows for less; the `amqp` source pays that and its decode.

    spark.dataSource.register(FloorSource)
    spark.read.format("amqpfloor").option("columns", "name,size").load(FOLDER_OF_ARROW_FILES)
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType


class FloorSource(DataSource):
    """Precomputed `frames` batches (option `columns`: these only, as a schema of fewer columns
    asks the `amqp` source for)."""

    @classmethod
    def name(cls) -> str:
        return "amqpfloor"

    def schema(self) -> str:
        from amqpscope.spark.tables import COLUMNS

        kinds = dict(COLUMNS["frames"])
        names = _columns(self.options) or list(kinds)
        return ", ".join(f"`{name}` {kinds[name]}" for name in names)

    def reader(self, schema: StructType) -> DataSourceReader:
        return FloorReader(self.options)


class FloorReader(DataSourceReader):
    def __init__(self, options: Any) -> None:
        self.folder = options["path"]
        self.columns = _columns(options)

    def partitions(self) -> Sequence[InputPartition]:
        found = sorted(glob.glob(os.path.join(self.folder, "*.arrow")))
        return [InputPartition(path) for path in found]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        import pyarrow as pa

        with pa.memory_map(partition.value) as source:
            for batch in pa.ipc.open_stream(source):
                yield batch if self.columns is None else batch.select(self.columns)


def _columns(options: Any) -> list[str] | None:
    value = options.get("columns")
    return value.split(",") if value else None


#: run by the build's interpreter: the `amqp` source's batches of FOLDER's frames, as its tasks
#: make them, into OUT (one Arrow IPC stream per task)
WRITE = """
import sys
import pyarrow as pa
from amqpscope.spark.datasource import AmqpReader
folder, out = sys.argv[1:]
reader = AmqpReader({"table": "frames", "path": folder})
for i, part in enumerate(reader.partitions()):
    with pa.OSFile(f"{out}/task{i:05}.arrow", "wb") as f:
        writer = None
        for batch in reader.read(part):
            writer = writer or pa.ipc.new_stream(f, batch.schema)
            writer.write_batch(batch)
        if writer is not None:
            writer.close()
"""
