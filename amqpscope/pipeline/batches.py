"""Table rows to Arrow record batches on the executors: how the decode hands its output to the JVM.

Rows leave the decode as plain tuples (`tables.COLUMNS` order). Building a Spark `Row` per frame
and pickling it across to the JVM cost more than the decode itself; instead the decode runs in
`DataFrame.mapInArrow` and `pack` turns a task's records into *union* batches: one struct column
per table (a batch fills only its own table's), plus `kind`, `whole` and `blob` (the pickled
records the driver needs: a file's "meta", its "edge" connections and their "packets"). The JVM
converts the columns, caches the result, and writes each table's Parquet from it, the frames
table while the decode is still running.

Timestamp columns (`tables.TIMES`) are not packed: the JVM makes them from their seconds column.
pyarrow is imported when a function runs (the executors of the `[spark]` extra have it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from amqpscope.pipeline.tables import COLUMNS, TABLES, TIMES

#: a batch holds at most this many rows of one table, or about this many bytes of text
ROWS = 8192
BYTES = 4 << 20

_SIMPLE = {
    "string": "string",
    "long": "int64",
    "int": "int32",
    "double": "float64",
    "boolean": "bool_",
    "timestamp": "timestamp",
}


def _split(text: str) -> list[str]:
    """Split `a:T,b:U` at the commas that are not inside `<...>`."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return out


def arrow_type(kind: str) -> Any:
    """The Arrow type Spark maps the Spark SQL type name `kind` to."""
    import pyarrow as pa

    kind = kind.strip()
    nested = re.fullmatch(r"(array|struct)<(.*)>", kind)
    if nested is None:
        if kind == "timestamp":
            return pa.timestamp("us", tz="UTC")
        return getattr(pa, _SIMPLE[kind])()
    if nested.group(1) == "array":
        return pa.list_(pa.field("element", arrow_type(nested.group(2))))
    fields = []
    for part in _split(nested.group(2)):
        name, _, sub = part.partition(":")
        fields.append(pa.field(name.strip(), arrow_type(sub)))
    return pa.struct(fields)


def packed_columns(table: str) -> list[tuple[int, str, str]]:
    """(position in the row tuple, column, type) of the columns a blob carries."""
    times = TIMES.get(table, {})
    return [(i, name, kind) for i, (name, kind) in enumerate(COLUMNS[table]) if name not in times]


_SCHEMAS: dict[str, Any] = {}


def arrow_schema(table: str) -> Any:
    schema = _SCHEMAS.get(table)
    if schema is None:
        import pyarrow as pa

        schema = _SCHEMAS[table] = pa.schema(
            [pa.field(name, arrow_type(kind)) for _, name, kind in packed_columns(table)]
        )
    return schema


def _column(values: list[Any], kind: Any) -> Any:
    import pyarrow as pa

    try:
        return pa.array(values, type=kind)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
        # one value out of its type's range (a 64-bit count past int64) must not lose the file
        out = []
        for value in values:
            try:
                pa.array([value], type=kind)
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
                value = None
            out.append(value)
        return pa.array(out, type=kind)


#: the columns of the union batches the decode hands to the JVM (`union_schema`): `kind` (a
#: table, or "meta" / "edge" / "packets"), `whole` (rows of a stitched connection's decode),
#: `blob` (a pickled non-table record), then one struct column per table
HEAD = (("kind", "string"), ("whole", "boolean"), ("blob", "binary"))

_UNION: list[Any] = []


def union_schema() -> Any:
    """The Arrow schema of a union batch (only the rows' own table's struct is non-null)."""
    if not _UNION:
        import pyarrow as pa

        fields = [pa.field(name, arrow_type(kind) if kind != "binary" else pa.binary())
                  for name, kind in HEAD]  # fmt: skip
        fields += [pa.field(table, pa.struct(list(arrow_schema(table)))) for table in TABLES]
        _UNION.append(pa.schema(fields))
    return _UNION[0]


def union_spark_type() -> str:
    """The same as a Spark DDL string (for `mapInArrow`)."""
    parts = [f"{name} {kind}" for name, kind in HEAD]
    for table in TABLES:
        inner = ",".join(f"{name}:{kind}" for _, name, kind in packed_columns(table))
        parts.append(f"{table} struct<{inner}>")
    return ", ".join(parts)


def _table_batch(table: str, rows: list[tuple[Any, ...]], whole: bool) -> Any:
    import pyarrow as pa

    schema = union_schema()
    n = len(rows)
    columns = list(zip(*rows, strict=True))
    inner = arrow_schema(table)
    struct = pa.StructArray.from_arrays(
        [
            _column(list(columns[at]), field.type)
            for (at, _, _), field in zip(packed_columns(table), inner, strict=True)
        ],
        fields=list(inner),
    )
    arrays = [pa.array([table] * n, pa.string()), pa.array([whole] * n), pa.nulls(n, pa.binary())]
    arrays += [struct if t == table else pa.nulls(n, schema.field(t).type) for t in TABLES]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _blob_batch(records: list[tuple[str, Any]], whole: bool) -> Any:
    import pickle

    import pyarrow as pa

    schema = union_schema()
    n = len(records)
    arrays = [
        pa.array([kind for kind, _ in records], pa.string()),
        pa.array([whole] * n),
        pa.array([pickle.dumps(value, protocol=5) for _, value in records], pa.binary()),
    ]
    arrays += [pa.nulls(n, schema.field(t).type) for t in TABLES]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def pack(records: Iterable[tuple[str, Any]], whole: bool = False) -> Iterator[Any]:
    """The records of one task in (`(table, row tuple)`, or another kind and its value), Arrow
    union batches out: a table's rows every `ROWS` rows or ~`BYTES` bytes of text."""
    pending: dict[str, list[tuple[Any, ...]]] = {table: [] for table in TABLES}
    sizes = dict.fromkeys(TABLES, 0)
    fields_at, message_at = (
        [name for name, _ in COLUMNS["frames"]].index(name) for name in ("fields", "message")
    )
    others: list[tuple[str, Any]] = []
    for kind, value in records:
        rows = pending.get(kind)
        if rows is None:
            others.append((kind, value))
            if kind == "packets" or len(others) >= 256:
                yield _blob_batch(others, whole)
                others = []
            continue
        rows.append(value)
        if kind == "frames":
            message = value[message_at]
            sizes[kind] += 64 + len(value[fields_at]) + (len(message) if message else 0)
        else:
            sizes[kind] += 256
        if len(rows) >= ROWS or sizes[kind] >= BYTES:
            yield _table_batch(kind, rows, whole)
            pending[kind] = []
            sizes[kind] = 0
    for table, rows in pending.items():
        if rows:
            yield _table_batch(table, rows, whole)
    if others:
        yield _blob_batch(others, whole)


def to_blob(batches: Iterable[Any]) -> bytes:
    """Union batches as one Arrow IPC stream (to cross a Python RDD into a DataFrame)."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, union_schema()) as writer:
        for batch in batches:
            writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def from_blobs(batches: Iterator[Any]) -> Iterator[Any]:
    """The `mapInArrow` function that turns rows of IPC blobs (`to_blob`) back into batches."""
    import pyarrow as pa

    for batch in batches:
        for blob in batch.column(0):
            yield from pa.ipc.open_stream(blob.as_buffer())


def loads(blob: bytes) -> Any:
    import pickle

    return pickle.loads(blob)
