"""What one Spark task does, start to end: decode, write Parquet, hand back a few small records.

The job's stages (`spark.py` schedules them; everything here runs on an executor):

1. `decode_files`: each capture file is decoded (`rows.decode_file`) and its rows written by a
   `store.TableWriter` into the run's staging area (`STAGING/RUN/files/FID/`). When the file
   ends its *edge* connections are known (open at the file's start or end: maybe continued in
   another file). Rows of the others are moved to their tables; rows of edge connections are
   split off to `STAGING/RUN/edges/FID/` and their packets pickled to `STAGING/RUN/packets/`.
   The task returns the file's "meta" record and its `stitch.Edge`s: nothing else crosses to
   the driver.
2. On the driver: `stitch.groups` over the edges.
3. `finish`: per file with edges, its edge rows are moved to their tables except those of
   connections that were stitched (`keep_edges`); per stitched connection, its parts' packets
   are decoded and tracked once (`rows.decode_group`) and written straight to the tables
   (`decode_group`). Each returns its rows per table.

Files are named `part-TAG.parquet`: TAG is the capture's id (`file_id`: a hash of its path or
URI), with `-e` for its edge rows, or `gRUN-N` for a stitched connection, so no two tasks write
the same file.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import pickle
import posixpath
import time
from collections.abc import Iterable, Iterator
from typing import Any

from amqpscope.capture.packet import RawPacket
from amqpscope.spark import rows
from amqpscope.spark.stitch import Edge
from amqpscope.spark.store import Output, TableWriter, split
from amqpscope.spark.tables import TABLES

#: the run's scratch folder under `--out` (a leading `_`: Spark and Hive readers skip it)
STAGING = "_amqpscope_staging"


def file_id(capture: str) -> str:
    return hashlib.sha1(capture.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def staging(output: Output, run: str, *parts: str) -> str:
    return output.path(STAGING, run, *parts)


def decode_files(
    items: Iterable[tuple[str, str | None, bytes | None]],
    out: str,
    run: str,
    options: dict[str, Any],
) -> Iterator[tuple[str, Any]]:
    """Stage 1 for `(capture, local path, bytes)` items (one of the last two set): per file its
    "meta" record (rows written per table in `meta["rows"]`) and its "edge" records."""
    output = Output(out)
    for capture, path, data in items:
        with few_collections():
            records = list(_decode_file(output, run, capture, path, data, options))
        yield from records


@contextlib.contextmanager
def few_collections() -> Iterator[None]:
    """The decode makes many small objects and few cycles: the cyclic collector, run as often
    as Python's defaults have it, took a tenth of a task walking the rows held for writing.
    Collections are made rarer (not stopped: memory stays bounded) while a file decodes."""
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], 50_000), before[1], max(before[2], 100))
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _decode_file(
    output: Output,
    run: str,
    capture: str,
    path: str | None,
    data: bytes | None,
    options: dict[str, Any],
) -> Iterator[tuple[str, Any]]:
    started = time.perf_counter()
    fid = file_id(capture)
    staged = staging(output, run, "files", fid)
    writer = TableWriter(output, staged, fid)
    edges: dict[int, Edge] = {}
    meta: dict[str, Any] = {"capture": capture}
    try:
        for kind, value in rows.decode_file(capture, path, data, options):
            if kind in TABLES:
                writer.extend(kind, value)
            elif kind == "meta":
                meta = value
            elif kind == "edge":
                value.fid = fid
                edges[value.conn] = value
            elif kind == "packets":
                _, conn, packets = value
                target = staging(output, run, "packets", f"{fid}-{conn}.pickle")
                _dump(output, target, packets)
                edges[conn].packets = target
    finally:
        writer.close()
    keys = {rows.file_key(capture, conn) for conn in edges}  # their rows' conn_key
    if keys:
        kept, moved = split(
            output, staged, writer.files, output.base, staging(output, run, "edges", fid),
            keys, suffix="-e",
        )  # fmt: skip
        meta["edge_files"] = moved
    else:
        for _, relative in writer.files:
            output.move(posixpath.join(staged, relative), output.path(relative))
        kept = dict(writer.counts)
    output.remove(staged)
    meta["fid"] = fid
    meta["rows"] = kept
    meta["seconds"] = time.perf_counter() - started  # decode and write, in the task
    yield "meta", meta
    for edge in edges.values():
        yield "edge", edge


def _dump(output: Output, target: str, packets: list[RawPacket]) -> None:
    """An edge connection's packets, staged for stage 3, as tuples of plain values: a compiled
    (mypyc) `RawPacket` is a C struct that pickle cannot make again."""
    output.fs.create_dir(posixpath.dirname(target), recursive=True)
    plain = [(p.number, p.ts, p.linktype, p.data, p.wirelen, p.interface) for p in packets]
    with output.fs.open_output_stream(target) as stream:
        stream.write(pickle.dumps(plain, protocol=5))


def _load(output: Output, source: str) -> list[RawPacket]:
    with output.fs.open_input_stream(source) as stream:
        return [RawPacket(*fields) for fields in pickle.loads(stream.read())]


def finish(
    work: Iterable[tuple[str, Any]], out: str, run: str, options: dict[str, Any]
) -> Iterator[dict[str, int]]:
    """Stage 3: ("edges", (fid, edge files, stitched keys)) and ("group", (tag, parts)) items;
    rows written per table, one dict per item."""
    output = Output(out)
    for kind, value in work:
        if kind == "edges":
            yield keep_edges(output, run, *value)
        else:
            tag, parts = value
            yield decode_group(output, tag, parts, options)


def keep_edges(
    output: Output, run: str, fid: str, files: list[tuple[str, str]], stitched: set[str]
) -> dict[str, int]:
    """Move a file's staged edge rows to their tables, but for the stitched connections'."""
    root = staging(output, run, "edges", fid)
    if stitched:
        kept, _ = split(output, root, files, output.base, None, stitched)
        return kept
    counts = dict.fromkeys(TABLES, 0)
    import pyarrow.parquet as pq

    for table, relative in files:
        source = posixpath.join(root, relative)
        with output.fs.open_input_file(source) as stream:
            counts[table] += pq.ParquetFile(stream).metadata.num_rows
        output.move(source, output.path(relative))
    return counts


def decode_group(
    output: Output, tag: str, parts: list[Edge], options: dict[str, Any]
) -> dict[str, int]:
    """One stitched connection: its parts' staged packets decoded and tracked once, its rows
    written to the tables."""
    loaded = [(edge, _load(output, edge.packets)) for edge in parts]
    writer = TableWriter(output, output.base, tag)
    try:
        for kind, value in rows.decode_group(loaded, options):
            if kind in TABLES:
                writer.extend(kind, value)
    finally:
        writer.close()
    return dict(writer.counts)
