"""Spark looks for Python data sources in top-level modules named `pyspark_*` that hold a
`DefaultSource` (`pyspark/sql/worker/lookup_data_sources.py`): installing amqpscope with this
module makes `spark.read.format("amqp")` work with no `spark.dataSource.register` call."""

from amqpscope.spark.datasource import AmqpDataSource as DefaultSource

__all__ = ["DefaultSource"]
