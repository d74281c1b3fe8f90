"""The Parquet tables of `amqpscope spark`: every column, its type and its order, in one place.

Rows are built on the executors as plain tuples in `COLUMNS[table]` order (pure Python: no
pyspark import here at module level), and `struct_type(table)` turns the same list into the
Spark `StructType` the job writes with. `docs/spark.md` documents these tables; a test checks
that the documentation names every column.

Conventions: names in snake_case; `capture` is the capture file's path or URI as given (for a
connection stitched across files, the file it started in), `date` the UTC day (`YYYY-MM-DD`)
the partition column, `conn_key` the connection's key across the whole run (`capture#conn`),
`summary` the tracker's JSON for that entry as `amqpscope summary --json` has it (so nothing the
trackers add is lost while the flat columns stay stable).
"""

from __future__ import annotations

import json
import math
from typing import Any

#: the `date` of a row with no time (a log line without a timestamp, a file that is no capture):
#: a partition value, never null, because a table whose rows are all in Hive's null partition
#: (`date=__HIVE_DEFAULT_PARTITION__`) is one pyarrow cannot read (it infers a partition's type
#: from its non-null folder names); DuckDB and Spark read this as the text it is
UNDATED = "undated"

FINDING = "struct<code:string,severity:string,message:string,packet:long,conn:long,frame:long>"

#: table -> [(column, type)]; types are Spark SQL type names
COLUMNS: dict[str, list[tuple[str, str]]] = {
    "frames": [
        ("capture", "string"),
        ("capture_file", "string"),  # basename of capture: a partition column
        ("date", "string"),
        ("conn_key", "string"),
        ("stitched", "boolean"),
        ("frame", "long"),
        ("packet", "long"),
        ("line", "long"),  # a trace log's line (its frames have no packet)
        ("ts", "double"),
        ("time", "timestamp"),
        ("conn", "long"),
        ("src", "string"),
        ("dst", "string"),
        ("dir", "string"),
        ("version", "string"),
        ("channel", "int"),
        ("kind", "string"),
        ("name", "string"),
        ("size", "long"),
        ("fields", "string"),  # JSON
        ("message", "string"),  # JSON or null
        ("findings", f"array<{FINDING}>"),
    ],
    "connections": [
        ("capture", "string"),
        ("date", "string"),
        ("conn_key", "string"),
        ("conn", "long"),
        ("version", "string"),
        ("client", "string"),
        ("server", "string"),
        ("first_ts", "double"),
        ("last_ts", "double"),
        ("start_time", "timestamp"),
        ("frames", "long"),
        ("stitched", "boolean"),
        ("files", "array<string>"),
        ("sessions", "int"),
        ("links", "int"),
        ("channels", "int"),
        ("error", "string"),  # 1.0 close condition, 0-9-1 "code text" of a non-200 close
        ("layers", "string"),  # JSON: what the AMQP travels in (TLS, WebSocket) or null
        ("findings", "long"),
        ("summary", "string"),  # JSON
    ],
    "links": [
        ("capture", "string"),
        ("date", "string"),
        ("conn_key", "string"),
        ("conn", "long"),
        ("session", "int"),  # the client's channel of the session
        ("name", "string"),
        ("handle", "long"),
        ("remote_handle", "long"),
        ("role", "string"),
        ("source", "string"),
        ("target", "string"),
        ("snd_settle_mode", "string"),
        ("rcv_settle_mode", "string"),
        ("state", "string"),
        ("deliveries", "long"),
        ("presettled", "long"),
        ("settled", "long"),
        ("unsettled", "long"),
        ("accepted", "long"),
        ("rejected", "long"),
        ("released", "long"),
        ("modified", "long"),
        ("credit_issued", "long"),
        ("starvation_episodes", "long"),
        ("starvation_s", "double"),
        ("latency_count", "long"),
        ("latency_p50_ms", "double"),
        ("latency_p99_ms", "double"),
        ("latency_max_ms", "double"),
        ("error_condition", "string"),
        ("error_description", "string"),
        ("summary", "string"),
    ],
    "channels": [
        ("capture", "string"),
        ("date", "string"),
        ("conn_key", "string"),
        ("conn", "long"),
        ("channel", "int"),
        ("use", "int"),
        ("state", "string"),
        ("publishes", "long"),
        ("deliveries", "long"),
        ("acks", "long"),
        ("nacks", "long"),
        ("rejects", "long"),
        ("requeued", "long"),
        ("redelivered", "long"),
        ("unacked", "long"),
        ("max_unacked", "long"),
        ("confirms_acked", "long"),
        ("confirms_nacked", "long"),
        ("confirms_pending", "long"),
        ("returns", "long"),
        ("tx_commits", "long"),
        ("tx_rollbacks", "long"),
        ("consumers", "int"),
        ("prefetch_count", "long"),
        ("ack_p50_ms", "double"),
        ("ack_p99_ms", "double"),
        ("confirm_p50_ms", "double"),
        ("confirm_p99_ms", "double"),
        ("close_code", "long"),
        ("close_text", "string"),
        ("close_method", "string"),
        ("summary", "string"),
    ],
    "deliveries": [
        ("capture", "string"),
        ("date", "string"),
        ("conn_key", "string"),
        ("conn", "long"),
        ("version", "string"),
        ("kind", "string"),  # transfer (1.0), publish, deliver, get (0-9-1)
        ("dir", "string"),
        ("channel", "int"),  # 1.0: the session's client channel; 0-9-1: the channel
        ("link", "string"),  # 1.0: the link's name
        ("handle", "long"),
        ("delivery_id", "long"),  # 1.0 delivery-id; 0-9-1 delivery-tag or confirm sequence
        ("tag", "string"),  # 1.0 delivery-tag (hex)
        ("frame", "long"),
        ("ts", "double"),
        ("size", "long"),  # 1.0: transfer frames' bytes; 0-9-1: body-size
        ("queue", "string"),
        ("exchange", "string"),
        ("routing_key", "string"),
        ("message_id", "string"),
        ("redelivered", "boolean"),
        ("outcome", "string"),
        ("requeue", "boolean"),
        ("settled", "boolean"),
        ("settled_ts", "double"),
        ("latency_ms", "double"),
    ],
    "findings": [
        ("capture", "string"),
        ("date", "string"),
        ("conn_key", "string"),
        ("conn", "long"),
        ("frame", "long"),
        ("packet", "long"),
        ("code", "string"),
        ("severity", "string"),
        ("message", "string"),
        ("origin", "string"),  # frame, tracker, capture
    ],
}

#: how each table is partitioned on disk
PARTITIONS: dict[str, list[str]] = {
    "frames": ["date", "capture_file"],
    "connections": ["date"],
    "links": ["date"],
    "channels": ["date"],
    "deliveries": ["date"],
    "findings": ["date"],
}

TABLES = tuple(COLUMNS)

#: timestamp columns the job fills from a seconds column (rows leave them null)
TIMES: dict[str, dict[str, str]] = {
    "frames": {"time": "ts"},
    "connections": {"start_time": "first_ts"},
}


def index(table: str) -> dict[str, int]:
    """column -> position in the row tuple."""
    return {name: i for i, (name, _) in enumerate(COLUMNS[table])}


def _coerce(value: Any, kind: str) -> Any:
    """`value` as a column of type `kind` wants it: shapes that drift (a tracker's count that
    becomes an object) never fail a write; they turn to null, or to JSON text in a string."""
    if value is None:
        return None
    if kind == "string":
        if isinstance(value, str):
            return value
        if isinstance(value, bytes):  # JSON text as orjson writes it (rows._json)
            return value.decode("utf-8", "replace")
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    if kind in ("long", "int"):
        if isinstance(value, int) or (isinstance(value, float) and math.isfinite(value)):
            return int(value)
        return None  # NaN, infinity, other shapes
    if kind == "double":
        return float(value) if isinstance(value, int | float) else None
    if kind == "boolean":
        return bool(value)
    return value


#: the Python type a column's values already have when they need no coercion
_PYTHON = {"string": str, "long": int, "int": int, "double": float, "boolean": bool}
_SPECS = {
    table: [(name, kind, _PYTHON.get(kind)) for name, kind in columns]
    for table, columns in COLUMNS.items()
}


def row(table: str, values: dict[str, Any]) -> tuple[Any, ...]:
    """The row tuple for `values` (missing columns are null), each value of its column's type."""
    get = values.get
    out = []
    for name, kind, python in _SPECS[table]:
        value = get(name)
        # most values already have their column's type: only the others are coerced
        out.append(value if value is None or type(value) is python else _coerce(value, kind))
    return tuple(out)


_FRAME_FIELDS = [name for name, _ in COLUMNS["frames"]].index("fields")
_FRAME_MESSAGE = [name for name, _ in COLUMNS["frames"]].index("message")


def frame_text_bytes(values: tuple[Any, ...]) -> int:
    """The bytes of a `frames` row's JSON texts (fields, message): the part of a row that can be
    big, so what bounds how many rows a worker holds."""
    message = values[_FRAME_MESSAGE]
    return len(values[_FRAME_FIELDS]) + (len(message) if message is not None else 0)


def ddl(table: str) -> str:
    """The schema of `table` as Spark's DDL text (what a Python data source's `schema()` returns:
    it runs where no JVM is at hand to parse types)."""
    return ", ".join(f"`{name}` {kind}" for name, kind in COLUMNS[table])


def struct_type(table: str) -> Any:
    """The Spark schema of `table` (imports pyspark: call it on the driver only)."""
    from pyspark.sql.types import StructField, StructType, _parse_datatype_string

    fields = [
        StructField(name, _parse_datatype_string(kind), True) for name, kind in COLUMNS[table]
    ]
    return StructType(fields)
