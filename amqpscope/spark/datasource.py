"""`spark.read.format("amqp")` and `spark.readStream.format("amqp")`: the tables of `amqpscope
spark` as DataFrames, with pyspark's Python Data Source API (`pyspark.sql.datasource`).

    from amqpscope.spark.datasource import AmqpDataSource
    spark.dataSource.register(AmqpDataSource)
    frames = spark.read.format("amqp").option("table", "frames").load("ring/cap-*.pcap")

The rows are made by the code `amqpscope spark` runs (`rows.decode_file` for a file,
`rows.decode_group` for a connection stitched across rotated files), with the same columns
(`tables.COLUMNS`) and the same values, timestamps included. What differs is the planning: the
partitions must be known before any task runs, so each file is first scanned for the connections
at its edges (`plan.scan`, TCP only, on the driver's planning worker), and the stitched
connections are planned from that (`plan.tasks`). A single file needs no scan.

Options: `table` (frames, connections, links, channels, deliveries, findings; default frames),
`keylog` (a TLS key log file, read where the plan is made), `redactBodies`, `showSecrets`
(`true`/`false`), `maxGap` (seconds between the parts of one connection, default 3600),
`pushFilters` (filters on the file skip files: `AmqpFilteringReader`); for a
stream also `settleSeconds` (the newest file counts as complete once unchanged this long,
default 120; any file is once a newer one exists) and `maxFilesPerTrigger`. A stream takes
every new file whatever its name, and `trigger(availableNow=True)` ends with a batch read's rows.

Inputs: capture files and frame-trace logs (`rows.decode_file` tells them apart by content; a
log is planned alone, never stitched), local or behind URIs (`remote`: listed in the planning
worker, fetched where a task runs, since these Python workers have no JVM for Hadoop). A schema
of fewer columns (`.schema(...)`) is the only column pruning a Python source can be told of:
`projection`.

Importing this module needs pyspark; `amqpscope.spark.spark.session` registers the source on
the sessions it makes (`register`).
"""

from __future__ import annotations

import importlib
import json
import logging
import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.types import StructType

try:  # pyspark 4.2 and later: a `trigger(availableNow=True)` query tells the source it is one
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
except ImportError:  # earlier: Spark runs such a query to the offset of its start, nothing flushed

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """What pyspark 4.2 calls to start a `trigger(availableNow=True)` query (not before)."""


from amqpscope.spark import inputs
from amqpscope.spark.stitch import MAX_GAP
from amqpscope.spark.tables import COLUMNS, TABLES, ddl, index

#: rows per Arrow batch handed to Spark
BATCH = int(os.environ.get("AMQPSCOPE_SOURCE_BATCH", "8192"))
#: tables none of whose columns comes from a message's sections: read with messages followed
#: and counted, not decoded (as `summary` reads them; ~3 times faster on the bundled captures).
#: Not `connections`: damage inside a message is a finding, and its row counts findings.
#: (Python data sources are not told which columns a query selects: the table is the pruning.)
BODY_FREE = frozenset(("links", "channels"))
SETTLE = 120.0

log = logging.getLogger(__name__)


class _Later:
    """A module imported when first used. Spark imports this one in every Python process that
    looks data sources up or makes one (`create_data_source`, `lookup_data_sources`), which need
    only the class and its schema; the decoder (`rows`, `plan`) is for the processes that plan
    and read."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)


if TYPE_CHECKING:
    from amqpscope.spark import plan, rows
else:
    plan = _Later("amqpscope.spark.plan")
    rows = _Later("amqpscope.spark.rows")


class AmqpDataSource(DataSource):
    """Capture files as one of the pipeline's tables (option `table`)."""

    @classmethod
    def name(cls) -> str:
        return "amqp"

    def schema(self) -> str:
        return ddl(_table(self.options))

    def reader(self, schema: StructType) -> DataSourceReader:
        if _flag(self.options, "pushFilters"):
            return AmqpFilteringReader(self.options, projection(self.options, schema))
        return AmqpReader(self.options, projection(self.options, schema))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return AmqpStreamReader(self.options, projection(self.options, schema))


def register(spark: Any) -> None:
    """Make `format("amqp")` known to `spark` (a SparkSession)."""
    spark.dataSource.register(AmqpDataSource)


def _table(options: Any) -> str:
    table = str(options.get("table", "frames")).lower()
    if table not in TABLES:
        raise ValueError(f"amqp: option table: {table!r} is not one of {', '.join(TABLES)}")
    return table


def _flag(options: Any, name: str) -> bool:
    value = str(options.get(name, "false")).strip().lower()
    if value not in ("true", "false", "1", "0", "yes", "no"):
        raise ValueError(f"amqp: option {name}: {value!r} is not true or false")
    return value in ("true", "1", "yes")


def _number(options: Any, name: str, default: float) -> float:
    value = options.get(name)
    if value is None:
        return default
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"amqp: option {name}: {value!r} is not a number") from None


def _paths(options: Any) -> list[str]:
    """What `load(...)` was given: one path, or a list (Spark passes it as JSON in `paths`)."""
    given: list[str] = []
    if options.get("paths"):
        value = options["paths"]
        given += json.loads(value) if value.startswith("[") else [value]
    if options.get("path"):
        given.append(options["path"])
    if not given:
        raise ValueError("amqp: no input: load(PATH) with capture files, folders or globs")
    return [p[len("file://") :] if p.startswith("file://") else p for p in given]


def projection(options: Any, schema: StructType) -> list[str] | None:
    """The columns a schema given with `.schema(...)` selects (a subset of the table's, in any
    order, each of its type), or None for the whole table. Spark tells a Python data source no
    query's columns, so a schema of fewer columns is how a reader asks for fewer: only those
    are built and handed to the JVM (taking rows from Arrow was a third of a query's CPU)."""
    table = _table(options)
    kinds = dict(COLUMNS[table])
    names = [f.name for f in schema.fields]
    if names == [name for name, _ in COLUMNS[table]]:
        return None
    for f in schema.fields:
        if f.name not in kinds:
            raise ValueError(f"amqp: schema: {table} has no column {f.name!r}")
        # Spark's own names (`long` is `bigint`): parsing DDL here would need a JVM
        kind = kinds[f.name].replace("long", "bigint")
        if f.dataType.simpleString() != kind:
            raise ValueError(
                f"amqp: schema: {table}.{f.name} is {kind}, not {f.dataType.simpleString()}"
            )
    return names


def decoder_options(
    options: Any, table: str = "frames", columns: list[str] | None = None
) -> dict[str, Any]:
    """The `Dissector` keywords of the source's options (as the CLI's flags give them), for
    reading `table`."""
    from amqpscope.spark.inputs import PipelineError, dissector_options

    try:
        out = dissector_options(
            _flag(options, "showSecrets"), _flag(options, "redactBodies"), options.get("keylog")
        )
    except PipelineError as exc:
        raise ValueError(f"amqp: option {str(exc).lstrip('-')}") from None
    if table in BODY_FREE or (
        table == "frames"
        and columns is not None
        and not {"message", "findings", "fields"} & set(columns)
    ):  # no column shows a message (a body frame's fields, damage found inside one)
        out["messages"] = False
    return out


class AmqpReader(DataSourceReader):
    """A batch read: one partition per file (its own decode) and per stitched connection."""

    def __init__(self, options: Any, columns: list[str] | None = None) -> None:
        self.table = _table(options)
        self.inputs = _paths(options)
        self.max_gap = _number(options, "maxGap", MAX_GAP)
        self.columns = columns
        self.options = decoder_options(options, self.table, columns)

    def partitions(self) -> Sequence[InputPartition]:
        from amqpscope.spark.inputs import PipelineError, list_inputs

        try:
            local, uris = list_inputs(self.inputs)
        except PipelineError as exc:
            raise ValueError(f"amqp: {exc}") from None
        files = local + remote_files(uris)
        if not files:
            raise ValueError("amqp: no capture files or trace logs in " + " ".join(self.inputs))
        if len(files) == 1:  # nothing to stitch
            tasks: list[plan.Task] = [plan.FileTask(files[0], files[0])]
        else:
            tasks = plan.tasks([plan.scan(path) for path in files], self.max_gap)
        return [InputPartition(task) for task in tasks if self.wanted(task)]

    def wanted(self, task: plan.Task) -> bool:
        """Whether `task` may make rows the query keeps (all of them, but with pushed filters)."""
        return True

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_task(partition.value, self.table, self.options, self.columns)


def remote_files(uris: list[str]) -> list[str]:
    """The files behind URIs (`remote.list_files`): those named outright, and of a folder's or
    a glob's those that start like a capture or are named like a log."""
    from amqpscope.spark import remote

    out: list[str] = []
    for uri in uris:
        for found, named in remote.list_files(uri):
            if (
                named
                or inputs.looks_like_log(found)
                or inputs.looks_like_capture(remote.head(found))
            ):
                out.append(found)
    return list(dict.fromkeys(out))


#: the columns whose pushed filters skip files: every row of a file's task has its `capture`;
#: a stitched connection's rows each have one of its parts'
_FILE_COLUMNS = {("capture",): lambda path: path, ("capture_file",): os.path.basename}


class AmqpFilteringReader(AmqpReader):
    """An `AmqpReader` that takes filters on `capture` and `capture_file` (=, IN, LIKE 'a%',
    '%a', '%a%') to leave out the files no row of which they keep. Spark still applies every
    filter to the rows (all are handed back): the plan is made over all the files first, so a
    connection stitched across files stays one. Chosen with `option("pushFilters", "true")`
    since Spark fails a reader with `pushFilters` unless `spark.sql.python.filterPushdown.enabled`
    is set (`spark.spark.session` sets it)."""

    def __init__(self, options: Any, columns: list[str] | None = None) -> None:
        super().__init__(options, columns)
        self.filters: list[Any] = []

    def pushFilters(self, filters: list[Any]) -> Iterator[Any]:
        from pyspark.sql.datasource import (
            EqualTo,
            In,
            StringContains,
            StringEndsWith,
            StringStartsWith,
        )

        kinds = (EqualTo, In, StringStartsWith, StringEndsWith, StringContains)
        for found in filters:
            if isinstance(found, kinds) and found.attribute in _FILE_COLUMNS:
                self.filters.append(found)
            yield found

    def wanted(self, task: plan.Task) -> bool:
        if isinstance(task, plan.GroupTask):
            files = [part.edge.capture for part in task.parts]
        else:
            files = [task.capture]
        return all(any(_keeps(f, path) for path in files) for f in self.filters)


def _keeps(found: Any, path: str) -> bool:
    value = _FILE_COLUMNS[found.attribute](path)
    kind = type(found).__name__
    if kind == "EqualTo":
        return bool(value == found.value)
    if kind == "In":
        return value in found.value
    if kind == "StringStartsWith":
        return bool(value.startswith(found.value))
    if kind == "StringEndsWith":
        return bool(value.endswith(found.value))
    return found.value in value  # StringContains


def read_task(
    task: plan.Task, table: str, options: dict[str, Any], columns: list[str] | None = None
) -> Iterator[Any]:
    """The rows of `table` that one task makes, as Arrow batches (of `columns` only, if set)."""
    from amqpscope.spark.store import layout
    from amqpscope.spark.tasks import few_collections

    shape = layout(table)
    make = shape.whole if columns is None else shape.only(columns)
    pending: list[tuple[Any, ...]] = []
    with few_collections():
        for values in _rows(task, table, options):
            pending.extend(values)
            if len(pending) >= BATCH:
                yield make(pending)
                pending = []
        if pending:
            yield make(pending)


def _rows(task: plan.Task, table: str, options: dict[str, Any]) -> Iterator[list[tuple[Any, ...]]]:
    if isinstance(task, plan.GroupTask):
        loaded = [(part.edge, plan.part_packets(part)) for part in task.parts]
        for kind, value in rows.decode_group(loaded, options, frozenset((table,))):
            if kind == table:
                yield value
        return
    if task.unread:
        if table == "findings":
            yield [_note_row(task.capture, *note) for note in task.notes]
        return
    at = index(table)["conn_key"]
    without = {rows.file_key(task.capture, conn) for conn in task.without}
    only = None if task.only is None else {rows.file_key(task.capture, c) for c in task.only}
    # a URI's file is fetched there (`remote`); one that cannot be is a finding, as a local
    # file that cannot be read
    found = rows.decode_file(
        task.capture, task.path, options=options, tables=frozenset((table,)), edges=False
    )
    for kind, value in found:
        if kind != table:
            continue
        if only is not None:
            value = [r for r in value if r[at] in only]
        elif without:
            value = [r for r in value if r[at] not in without]
        if value:
            yield value
    if table == "findings" and task.notes:
        yield [_note_row(task.capture, *note) for note in task.notes]


def _moved(taken: float | None, now: float | None) -> bool:
    """Whether a file's modification time moved since it was taken (not when either is not
    known; within a microsecond, as its offset's JSON keeps it)."""
    return taken is not None and now is not None and abs(now - taken) > 1e-6


def _changed(mtime: float | None) -> plan.Note:
    """The finding of a file that changed after the stream read it."""
    import time

    when = "?" if mtime is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(mtime))
    text = (
        f"this file was modified (at {when}) after the stream had read it: a stream reads each "
        "file once, so what it holds now is not read (a rotation that reuses names, as "
        "tcpdump -C -W, or a writer that paused longer than settleSeconds, does this)"
    )
    return plan.CHANGED, None, mtime, text


def _note_row(
    capture: str, code: str, conn: int | None, ts: float | None, text: str
) -> tuple[Any, ...]:
    """A finding row of the plan's own: about one of `capture`'s connections (`plan.LATE`), or
    about the file (`plan.CHANGED`)."""
    from amqpscope.spark.tables import row

    values = {
        "capture": capture,
        "date": rows.day(ts),
        "conn_key": None if conn is None else rows.file_key(capture, conn),
        "conn": conn,
        "code": code,
        "severity": "warning",
        "message": text,
        "origin": "capture",
    }
    return row("findings", values)


def _starts_like_capture(path: str) -> bool:
    """A capture by its first bytes, or a trace log by its name and lines (as a batch read's
    folder walk keeps them; behind a URI by its name, as a batch read's listing does)."""
    from amqpscope.spark import remote
    from amqpscope.spark.inputs import _is_log

    if remote.scheme(path) is not None:
        return inputs.looks_like_log(path) or inputs.looks_like_capture(remote.head(path))
    try:
        with open(path, "rb") as f:
            if inputs.looks_like_capture(f.read(4)):
                return True
    except OSError:
        return False
    return _is_log(path, os.path.basename(path))


class AmqpStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A folder that rotating captures (`tcpdump -G/-C`, dumpcap's ring buffer) fill, or that
    captures from several hosts are dropped into.

    The offset is the names of the files taken with their modification times (every new file
    is taken, whatever its name, as Spark's own file source does; one modified after it was
    read is a finding, not read again), the carried chains (`plan.Carry`: connections open at
    the end of the newest file, which a later file may continue, and the connections decoded
    last, which a file taken later may belong with) and whether the batch that ended there
    flushed them (`trigger(availableNow=True)`'s last). Files are placed by their packets'
    times, not their names (`plan.stream_tasks`). All of it is checkpointed by Spark with the
    offset, so a restarted query plans the same batches again: no frame lost, none repeated. A
    file is taken once a file modified after it exists, or when it has not changed for
    `settleSeconds`."""

    def __init__(self, options: Any, columns: list[str] | None = None) -> None:
        self.table = _table(options)
        self.columns = columns
        from amqpscope.spark import remote

        folders = _paths(options)
        if len(folders) != 1:
            raise ValueError("amqp: a stream reads one folder: readStream.load(FOLDER)")
        if remote.scheme(folders[0]) is not None:  # a folder pyarrow lists (s3, gs, hdfs, ...)
            self.folder = folders[0].rstrip("/")
            remote.folder_entries(self.folder)  # RemoteError (a ValueError): one line, now
        elif os.path.isdir(folders[0]):
            self.folder = os.path.abspath(folders[0])
        else:
            raise ValueError("amqp: a stream reads one folder: readStream.load(FOLDER)")
        self.max_gap = _number(options, "maxGap", MAX_GAP)
        self.settle = _number(options, "settleSeconds", SETTLE)
        most = options.get("maxFilesPerTrigger")
        self.most = int(most) if most else None
        self.options = decoder_options(options, self.table, columns)
        self._scans: dict[tuple[str, int, int], plan.Scan] = {}
        self._listed: dict[str, tuple[float, int]] = {}  # a URI folder's files: (mtime, size)
        #: `trigger(availableNow=True)`: the names of the files complete at the query's start
        self._target: set[str] | None = None

    def initialOffset(self) -> dict[str, Any]:
        return {"taken": {}, "carry": plan.Carry().to_json()}

    def _name(self, path: str) -> str:
        """A file's name in the offset: its path in the folder."""
        return path[len(self.folder) + 1 :] if path.startswith(self.folder + "/") else path

    def _path(self, name: str) -> str:
        """The file of a name in the offset (a listing's path kept whole where it was not in
        the folder's own form)."""
        whole = name.startswith("/") or inputs.URI.match(name) is not None
        return name if whole else f"{self.folder}/{name}"

    def _taken(self, offset: dict[str, Any]) -> dict[str, float | None]:
        """The files an offset had taken: name -> modification time when taken (None where not
        known: an offset of an amqpscope that took files in name order, every file up to its
        `last`)."""
        taken = offset.get("taken")
        if isinstance(taken, dict):
            return dict(taken)
        if taken is not None:
            return dict.fromkeys(taken)
        last = offset.get("last")
        if last is None:
            return {}
        key = plan.natural(last)
        listed = plan.folder_files(self.folder)
        return {self._name(path): None for path, _ in listed if plan.natural(path) <= key}

    def _new(
        self, taken: dict[str, float | None]
    ) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
        """The complete files not taken yet, by modification time (then name): each one a file
        was modified after, and the newest once unchanged for `settleSeconds`; and the complete
        files taken that changed since (path, mtime). As a batch read walks a folder: what does
        not start like a capture is not one (one that does is read in full, so a damaged one is
        still a finding, not skipped); a file too new to have its header yet is taken in a later
        batch."""
        import time

        listed = list(plan.folder_files(self.folder))
        new = [f for f in listed if self._name(f[0]) not in taken and _starts_like_capture(f[0])]
        old = [f for f in listed if self._name(f[0]) in taken]
        # the newest capture, taken or not (the folder's other files do not count)
        latest = max((m for _, m in old + new), default=0.0)
        now = time.time()

        def complete(mtime: float) -> bool:
            return mtime < latest or now - mtime >= self.settle

        found = sorted((f for f in new if complete(f[1])), key=lambda f: (f[1], plan.natural(f[0])))
        changed = [
            (path, mtime)
            for path, mtime in old
            if _moved(taken[self._name(path)], mtime) and complete(mtime)
        ]
        return found, changed

    def _scan(self, path: str) -> plan.Scan:
        from amqpscope.spark import remote

        try:
            if remote.scheme(path) is None:
                stat = os.stat(path)
                key = (path, stat.st_size, stat.st_mtime_ns)
            else:  # a URI's scan fetches the file: kept while its listing is unchanged
                mtime, size = self._listed[path]  # as `_plan` listed it
                key = (path, size, int(mtime * 1e9))
        except (OSError, KeyError, ValueError):
            return plan.scan(path)
        found = self._scans.get(key)
        if found is None:
            found = self._scans[key] = plan.scan(path)
        return found

    def _plan(
        self, carry: plan.Carry, files: list[str], flush: bool
    ) -> tuple[list[plan.Task], plan.Carry]:
        from amqpscope.spark import remote

        if remote.scheme(self.folder) is not None:  # listed once a plan, not once a file
            self._listed = {u: (m, n) for u, m, n in remote.folder_entries(self.folder)}
        scans = [self._scan(path) for path in files]
        return plan.stream_tasks(carry, scans, self.max_gap, flush=flush)

    def prepareForTriggerAvailableNow(self) -> None:
        """`trigger(availableNow=True)`: the files complete now are the query's; its last batch
        flushes what it carries, so it ends with the rows of a batch read of those files."""
        self._target = {self._name(path) for path, _ in self._new({})[0]}

    def latestOffset(self, start: dict[str, Any], limit: Any = None) -> dict[str, Any]:
        taken = self._taken(start)
        files, changed = self._new(taken)
        if self._target is not None:
            files = [f for f in files if self._name(f[0]) in self._target]
        pending = len(files)
        if self.most:
            files = files[: self.most]
        carry = plan.Carry.from_json(start.get("carry"))
        flush = self._target is not None and len(files) == pending
        if not files and not changed and not (flush and carry.chains):
            return start
        _, after = self._plan(carry, [path for path, _ in files], flush)
        if None in taken.values():  # an older offset's: the times as they are now
            now = {self._name(path): mtime for path, mtime in plan.folder_files(self.folder)}
            taken = {n: now.get(n) if t is None else t for n, t in taken.items()}
        taken.update((self._name(path), mtime) for path, mtime in files + changed)
        names = sorted(taken, key=plan.natural)
        return {
            "taken": {name: taken[name] for name in names},
            "carry": after.to_json(),
            "flush": flush,
        }

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        before, now = self._taken(start), self._taken(end)
        names = sorted(now.keys() - before.keys(), key=plan.natural)
        changed = [n for n, t in now.items() if n in before and _moved(before[n], t)]
        flush = bool(end.get("flush"))
        carry = plan.Carry.from_json(start.get("carry"))
        if not names and not changed and not (flush and carry.chains):
            return []
        tasks, _ = self._plan(carry, [self._path(name) for name in names], flush)
        for name in sorted(changed, key=plan.natural):
            path = self._path(name)
            tasks.append(plan.FileTask(path, path, notes=(_changed(now[name]),), unread=True))
        for task in tasks:  # a file too late to be stitched, or changed: a log line beside its row
            if isinstance(task, plan.FileTask):
                for _, _, _, text in task.notes:
                    log.warning("amqp: %s: %s", task.capture, text)
        return [InputPartition(task) for task in tasks]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_task(partition.value, self.table, self.options, self.columns)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: the files stay where the capture wrote them."""


__all__ = ["AmqpDataSource", "AmqpFilteringReader", "AmqpReader", "AmqpStreamReader", "register"]
