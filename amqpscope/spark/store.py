"""Parquet written by the workers themselves (pyarrow), laid out as Spark's partitioned writes
are: `TABLE/date=D/capture_file=F/part-TAG.parquet`, partition values escaped as Spark escapes
them, partition columns in the folder names only. Spark (or anything that reads Hive-style
partitioned Parquet) reads the tables back; no row crosses into the JVM.

Why not Spark's writer: handing every row to the JVM (Arrow batches, conversion, a cache) cost
as much again as the decode; pyarrow writes the same rows in a tenth of the time.

`Output` opens the filesystem of `--out` (a local folder, or a URI pyarrow's filesystems read:
`file://`, `hdfs://` with libhdfs, `s3://` (`s3a://` is read as `s3://`), `gs://`, `abfs://`).
`TableWriter` takes row tuples (`tables.COLUMNS` order) and writes one file per table and
partition, a row group at a time, so a task holds at most `ROWS` rows of each open partition.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from operator import itemgetter
from typing import Any

from amqpscope.spark.tables import COLUMNS, PARTITIONS, TABLES, TIMES, frame_text_bytes

#: rows of one table and partition buffered before a row group is written, or about this many
#: bytes of JSON text (frames with big messages)
ROWS = 16384
BYTES = 8 << 20
#: Parquet's codec: LZ4 (LZ4_RAW) writes faster than snappy and smaller here; Spark 3.5 reads it
COMPRESSION = "lz4"
#: string columns that hold JSON text (never dictionary-encoded)
JSON_COLUMNS = frozenset(("fields", "message", "summary", "layers"))
#: the folder name of a null partition value (Hive's, which Spark reads back as null)
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
#: characters Spark escapes in partition folder names (`ExternalCatalogUtils.escapePathName`)
_ESCAPE = re.compile("[\"#%'*/:=?\\\\\x7f{\\[\\]^\x00-\x1f]")
URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")

_SIMPLE = {
    "string": "string",
    "long": "int64",
    "int": "int32",
    "double": "float64",
    "boolean": "bool_",
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
    """The Arrow type of the Spark SQL type name `kind` (what Spark reads back as that type)."""
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


def escape(value: Any) -> str:
    """A partition value as its folder name has it (`key=<this>`)."""
    if value is None or value == "":
        return NULL_PARTITION
    return _ESCAPE.sub(lambda m: f"%{ord(m.group()):02X}", str(value))


class Layout:
    """One table's columns as the files hold them: data columns (partition columns are in the
    folder names), with timestamps made from their seconds column."""

    def __init__(self, table: str) -> None:
        import pyarrow as pa

        names = [name for name, _ in COLUMNS[table]]
        self.table = table
        #: a row's partition: one value, or a tuple of them (`folder` takes either)
        self.partition = itemgetter(*[names.index(name) for name in PARTITIONS[table]])
        times = TIMES.get(table, {})
        self.columns: list[tuple[int, str, Any, int | None]] = []  # (at, name, type, seconds at)
        for at, (name, kind) in enumerate(COLUMNS[table]):
            if name in PARTITIONS[table]:
                continue
            seconds = names.index(times[name]) if name in times else None
            self.columns.append((at, name, arrow_type(kind), seconds))
        self.schema = pa.schema([pa.field(name, kind) for _, name, kind, _ in self.columns])
        #: a whole row as Arrow reads a tuple: every column, the partitions' too, in row order
        self.row_type = pa.struct(
            [pa.field(name, arrow_type(kind)) for name, kind in COLUMNS[table]]
        )
        #: every column (partitions too) in row order, timestamps filled: what the data source
        #: hands Spark (`whole`)
        self.whole_schema = pa.schema(
            [pa.field(name, arrow_type(kind)) for name, kind in COLUMNS[table]]
        )
        self.whole_columns = [
            (at, arrow_type(kind), names.index(times[name]) if name in times else None)
            for at, (name, kind) in enumerate(COLUMNS[table])
        ]
        #: dictionary-encoded: the strings that repeat (endpoints, names, codes), not the JSON
        #: texts or numbers, whose dictionaries only cost time (a third of the write)
        self.dictionary = [
            name
            for name, kind in COLUMNS[table]
            if kind == "string" and name not in JSON_COLUMNS and name not in PARTITIONS[table]
        ]

    def folder(self, partition: Any) -> str:
        """The table's folder for a row's `partition` (what `self.partition` gives)."""
        names = PARTITIONS[self.table]
        values = partition if len(names) > 1 else (partition,)
        parts = [f"{name}={escape(v)}" for name, v in zip(names, values, strict=True)]
        return posixpath.join(self.table, *parts)

    def writer(self, output: Output, path: str, schema: Any = None) -> Any:
        """A Parquet writer of this table's rows at `path` (made with its folders)."""
        import pyarrow.parquet as pq

        output.fs.create_dir(posixpath.dirname(path), recursive=True)
        return pq.ParquetWriter(
            path,
            self.schema if schema is None else schema,
            filesystem=output.fs,
            use_dictionary=self.dictionary,
            compression=COMPRESSION,
        )

    def batch(self, rows: list[tuple[Any, ...]]) -> Any:
        import pyarrow as pa

        # the rows read by Arrow in one pass, as structs (a third faster than a list per
        # column); a value out of its column's type fails that, and the columns go one by one
        try:
            whole = pa.array(rows, type=self.row_type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
            return self._by_column(rows)
        arrays = [
            whole.field(at) if seconds is None else _timestamps(whole.field(seconds), kind)
            for at, _, kind, seconds in self.columns
        ]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def whole(self, rows: list[tuple[Any, ...]]) -> Any:
        """The rows as one Arrow batch of every column in `COLUMNS` order (partition columns
        included), timestamps made from their seconds as the Parquet files have them."""
        import pyarrow as pa

        try:
            whole = pa.array(rows, type=self.row_type)
            arrays = [whole.field(at) for at, _, _ in self.whole_columns]
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
            arrays = [_column(list(map(itemgetter(at), rows)), kind) for at, kind, _ in
                      self.whole_columns]  # fmt: skip
        for at, kind, seconds in self.whole_columns:
            if seconds is not None:
                arrays[at] = _timestamps(arrays[seconds].cast(pa.float64()), kind)
        return pa.RecordBatch.from_arrays(arrays, schema=self.whole_schema)

    def only(self, names: list[str]) -> Callable[[list[tuple[Any, ...]]], Any]:
        """What makes a batch of these columns alone (in this order) from whole rows: only
        their values are read by Arrow (a timestamp's from its seconds column)."""
        import pyarrow as pa

        at = {name: i for i, (name, _) in enumerate(COLUMNS[self.table])}
        kinds = dict(COLUMNS[self.table])
        times = TIMES.get(self.table, {})
        needed = list(dict.fromkeys(times.get(n, n) for n in names))  # seconds for a time
        positions = [at[n] for n in needed]
        row_type = pa.struct([pa.field(n, arrow_type(kinds[n])) for n in needed])
        schema = pa.schema([pa.field(n, arrow_type(kinds[n])) for n in names])
        pick = itemgetter(*positions)

        def make(rows: list[tuple[Any, ...]]) -> Any:
            try:
                if len(positions) == 1:
                    got = {needed[0]: pa.array(list(map(pick, rows)), type=row_type.field(0).type)}
                else:
                    whole = pa.array(list(map(pick, rows)), type=row_type)
                    got = {n: whole.field(i) for i, n in enumerate(needed)}
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
                got = {
                    n: _column(list(map(itemgetter(at[n]), rows)), arrow_type(kinds[n]))
                    for n in needed
                }
            arrays = [
                _timestamps(got[times[n]].cast(pa.float64()), arrow_type(kinds[n]))
                if n in times
                else got[n]
                for n in names
            ]
            return pa.RecordBatch.from_arrays(arrays, schema=schema)

        return make

    def _by_column(self, rows: list[tuple[Any, ...]]) -> Any:
        import pyarrow as pa

        # a column at a time (`zip(*rows)` makes an iterator per row, which the cyclic
        # collector then walks: in a worker holding many rows it cost twice as much)
        arrays = []
        for at, _, kind, seconds in self.columns:
            if seconds is not None:
                values = pa.array(list(map(itemgetter(seconds), rows)), pa.float64())
                arrays.append(_timestamps(values, kind))
            else:
                arrays.append(_column(list(map(itemgetter(at), rows)), kind))
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def _timestamps(seconds: Any, kind: Any) -> Any:
    """Timestamps (microseconds) from an Arrow array of seconds."""
    import pyarrow as pa
    import pyarrow.compute as pc

    micros = pc.round(pc.multiply(seconds, 1e6))
    return micros.cast(pa.int64()).cast(kind)


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


_LAYOUTS: dict[str, Layout] = {}


def layout(table: str) -> Layout:
    found = _LAYOUTS.get(table)
    if found is None:
        found = _LAYOUTS[table] = Layout(table)
    return found


class Output:
    """Where the tables go: a pyarrow filesystem and the base path on it. Made from the same
    string on the driver and on every worker (filesystems are not shipped)."""

    def __init__(self, out: str) -> None:
        import pyarrow.fs as pafs

        if URI.match(out):
            uri = "s3://" + out[len("s3a://") :] if out.startswith("s3a://") else out
            self.fs, base = pafs.FileSystem.from_uri(uri)
        else:  # absolute: the workers' working folder need not be the driver's
            import os

            self.fs, base = pafs.LocalFileSystem(), os.path.abspath(out)
            out = base
        self.uri = out  # what the workers open again, and Spark reads the tables from
        self.base = base.rstrip("/")
        if not self.base:
            raise ValueError("no folder to write to")

    def path(self, *parts: str) -> str:
        return posixpath.join(self.base, *parts)

    def move(self, src: str, dst: str) -> None:
        self.fs.create_dir(posixpath.dirname(dst), recursive=True)
        self.fs.move(src, dst)

    def remove(self, path: str) -> None:
        import pyarrow.fs as pafs

        info = self.fs.get_file_info(path)
        if info.type == pafs.FileType.Directory:
            self.fs.delete_dir(path)
        elif info.type == pafs.FileType.File:
            self.fs.delete_file(path)

    def remove_if_empty(self, path: str) -> None:
        import pyarrow.fs as pafs

        try:
            if not self.fs.get_file_info(pafs.FileSelector(path)):
                self.fs.delete_dir(path)
        except OSError:  # gone already, or not ours to list
            pass

    def exists(self, path: str) -> bool:
        import pyarrow.fs as pafs

        return self.fs.get_file_info(path).type != pafs.FileType.NotFound

    def touch(self, path: str) -> None:
        self.fs.create_dir(posixpath.dirname(path), recursive=True)
        with self.fs.open_output_stream(path):
            pass


class TableWriter:
    """Rows of any table in (`extend`), Parquet out under `root` (a path on `output`): one file per
    table and partition, `part-TAG.parquet`. `close` says what it wrote (paths relative to
    `root`) and how many rows per table."""

    def __init__(self, output: Output, root: str, tag: str) -> None:
        self.output = output
        self.root = root
        self.tag = tag
        self.counts = dict.fromkeys(TABLES, 0)
        self.files: list[tuple[str, str]] = []  # (table, path relative to root)
        self._pending: dict[tuple[str, Any], list[tuple[Any, ...]]] = {}
        self._sizes: dict[tuple[str, Any], int] = {}
        self._writers: dict[tuple[str, Any], Any] = {}

    def extend(self, table: str, rows: list[tuple[Any, ...]]) -> None:
        """Rows of `table` in, written a row group at a time per partition."""
        if not rows:
            return
        part = (_LAYOUTS.get(table) or layout(table)).partition
        keys = list(map(part, rows))
        if keys.count(keys[0]) == len(keys):  # nearly always: one file, one day
            self._take((table, keys[0]), rows)
            return
        grouped: dict[Any, list[tuple[Any, ...]]] = {}
        for key, values in zip(keys, rows, strict=True):
            grouped.setdefault(key, []).append(values)
        for key, kept in grouped.items():
            self._take((table, key), kept)

    def _take(self, key: tuple[str, Any], rows: list[tuple[Any, ...]]) -> None:
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[key] = []
            self._sizes[key] = 0
        pending.extend(rows)
        if key[0] == "frames":  # the only rows that may carry big text (messages)
            size = 64 * len(rows) + sum(map(frame_text_bytes, rows))
            size = self._sizes[key] = self._sizes[key] + size
            if size >= BYTES:
                self._flush(key)
                return
        if len(pending) >= ROWS:
            self._flush(key)

    def _flush(self, key: tuple[str, Any]) -> None:
        rows = self._pending.pop(key, None)
        self._sizes.pop(key, None)
        if not rows:
            return
        table, partition = key
        shape = layout(table)
        writer = self._writers.get(key)
        if writer is None:
            relative = posixpath.join(shape.folder(partition), f"part-{self.tag}.parquet")
            writer = self._writers[key] = shape.writer(
                self.output, posixpath.join(self.root, relative)
            )
            self.files.append((table, relative))
        writer.write_batch(shape.batch(rows))
        self.counts[table] += len(rows)

    def close(self) -> dict[str, int]:
        for key in list(self._pending):
            self._flush(key)
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()
        return self.counts


def split(
    output: Output,
    root: str,
    files: list[tuple[str, str]],
    keep_root: str,
    out_root: str | None,
    keys: set[str],
    suffix: str = "",
) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Move the Parquet `files` (relative to `root`) to `keep_root`, except the rows whose
    `conn_key` is in `keys`: those go to `out_root` (same relative paths, `suffix` added to the
    file name) or, with no `out_root`, nowhere. Returns rows kept per table, and the files
    written under `out_root`. A row group at a time: bounded memory."""
    import pyarrow as pa

    kept = dict.fromkeys(TABLES, 0)
    moved: list[tuple[str, str]] = []
    wanted = pa.array(sorted(keys), pa.string())
    for table, relative in files:
        src = posixpath.join(root, relative)
        with output.fs.open_input_file(src) as stream:
            _split_one(stream, table, relative, output, keep_root, out_root, wanted, suffix,
                       kept, moved)  # fmt: skip
        output.fs.delete_file(src)
    return kept, moved


def _split_one(
    stream: Any,
    table: str,
    relative: str,
    output: Output,
    keep_root: str,
    out_root: str | None,
    wanted: Any,
    suffix: str,
    kept: dict[str, int],
    moved: list[tuple[str, str]],
) -> None:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    shape = layout(table)
    source = pq.ParquetFile(stream)
    writers: dict[bool, Any] = {}
    try:
        for group in range(source.num_row_groups):
            batch = source.read_row_group(group)
            mask = pc.fill_null(pc.is_in(batch.column("conn_key"), value_set=wanted), False)
            for out, part in ((True, batch.filter(mask)), (False, batch.filter(pc.invert(mask)))):
                if part.num_rows == 0 or (out and out_root is None):
                    continue
                writer = writers.get(out)
                if writer is None:
                    if out:
                        assert out_root is not None
                        named = _suffixed(relative, suffix)
                        path = posixpath.join(out_root, named)
                        moved.append((table, named))
                    else:
                        path = posixpath.join(keep_root, relative)
                    writer = writers[out] = shape.writer(output, path, source.schema_arrow)
                writer.write_table(part)
                if not out:
                    kept[table] += part.num_rows
    finally:
        for writer in writers.values():
            writer.close()


def _suffixed(relative: str, suffix: str) -> str:
    stem, dot, ext = relative.rpartition(".")
    return f"{stem}{suffix}{dot}{ext}" if dot else relative + suffix
