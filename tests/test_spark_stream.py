"""`spark.readStream.format("amqp")` over a folder that captures from several hosts are dropped
into, and files that come out of their capture order (issue 39, items 13 and 14): every new file
is taken whatever its name, files are placed by their packets' times, a file that comes too late
to be stitched is a finding row and a log line, and `trigger(availableNow=True)` ends with the
rows of a batch read of the same files, connections open at the newest file's end included.

The planning tests drive the stream reader as Spark does (`initialOffset`, `latestOffset`,
`partitions`, `read`, a new reader for each batch as after a restart) without a JVM; the others
run the streams on local[2] and compare their sinks with `spark.read.format("amqp")`.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from amqpscope.spark import tables
from tests.test_spark import CAPTURES, SPLIT, needs_java, packets_of, write_pcap
from tests.test_spark_datasource import arrive, canonical, rotated, source, spark

pytest.importorskip(
    "pyspark.sql.datasource", reason="needs pyspark 4 (the spark extra; make install installs it)"
)

__all__ = ["spark"]  # the session fixture, shared with test_spark_datasource

#: the issue's names: the third sorts first (numbers as numbers, 10 < 091), and comes last
HOSTS = (
    ("host091_acks.pcap", "091-ack-nack-reject.pcap"),
    ("host091_basic.pcap", "091-publish-consume.pcap"),
    ("host10_peer.pcap", "10-peer-to-peer.pcap"),
)


def thirds(folder: Path) -> list[Path]:
    """One recorded connection (091-publish-consume: pika against RabbitMQ) rotated into three
    files, `cap-1` to `cap-3` in capture order: the middle one open at both its ends."""
    folder.mkdir()
    packets = packets_of(SPLIT.name)
    cut = len(packets) // 3
    out = []
    for i, piece in enumerate((packets[:cut], packets[cut : 2 * cut], packets[2 * cut :]), 1):
        write_pcap(folder / f"cap-{i}.pcap", piece)
        out.append(folder / f"cap-{i}.pcap")
    return out


def reader_rows(reader: Any, partitions: Any) -> list[dict[str, Any]]:
    """The rows the reader's tasks make, as Spark's Python worker takes them (Arrow batches)."""
    out: list[dict[str, Any]] = []
    for partition in partitions:
        for batch in reader.read(partition):
            out += batch.to_pylist()
    return out


def fed_one_by_one(folder: Path, arrivals: list[Path], table: str) -> list[dict[str, Any]]:
    """A stream of `table` fed `arrivals` one at a time, a batch after each (a new reader each
    time, from the offset the last one ended at, as a restarted query plans)."""
    from amqpscope.spark.datasource import AmqpStreamReader

    options = {"path": str(folder), "settleSeconds": "0", "table": table}
    offset = None
    out: list[dict[str, Any]] = []
    for path in arrivals:
        arrive(path, folder)
        reader = AmqpStreamReader(options)
        start = offset or reader.initialOffset()
        offset = json.loads(json.dumps(reader.latestOffset(start, None)))  # as checkpointed
        out += reader_rows(reader, reader.partitions(start, offset))
    return out


def batch_rows(folder: Path | list[Path], table: str) -> list[dict[str, Any]]:
    from amqpscope.spark.datasource import AmqpReader

    if isinstance(folder, list):
        reader = AmqpReader({"paths": json.dumps([str(p) for p in folder]), "table": table})
    else:
        reader = AmqpReader({"path": str(folder), "table": table})
    return reader_rows(reader, reader.partitions())


def key(row: dict[str, Any]) -> str:
    return json.dumps(row, sort_keys=True, default=str)


def test_rotated_files_that_come_out_of_order_are_placed_by_their_times(tmp_path: Path) -> None:
    """The middle third of a connection comes first, then the first third (whose name sorts
    before the file already taken), then the last: the stream takes each, chains them by their
    packets' times and TCP sequence numbers, and makes the batch read's rows: one connection,
    stitched from the three files, every frame once."""
    first, second, third = thirds(tmp_path / "ring")
    live = tmp_path / "live"
    live.mkdir()
    for table in ("connections", "frames"):
        shutil.rmtree(live)
        live.mkdir()
        got = fed_one_by_one(live, [second, first, third], table)
        batch = batch_rows(live, table)
        assert got and Counter(map(key, got)) == Counter(map(key, batch)), table
    (conn,) = batch_rows(live, "connections")
    assert conn["files"] == [str(live / p.name) for p in (first, second, third)]


def test_a_file_too_late_to_be_stitched_is_a_finding_and_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The last third comes before the middle one: the first and last are stitched (with the
    middle's bytes missing) and their rows made. The middle third, taken then, cannot join a
    connection whose rows are out: its frames are its own file's (not lost), with a
    `capture.late-part` finding row that names the files it belongs with, and a log line."""
    first, second, third = thirds(tmp_path / "ring")
    live = tmp_path / "live"
    live.mkdir()
    caplog.set_level(logging.WARNING, logger="amqpscope.spark.datasource")
    found = fed_one_by_one(live, [first, third, second], "findings")
    late = [r for r in found if r["code"] == "capture.late-part"]
    assert [(r["capture"], r["conn_key"], r["severity"]) for r in late] == [
        (str(live / "cap-2.pcap"), f"{live / 'cap-2.pcap'}#1", "warning")
    ]
    assert "cap-1.pcap, cap-3.pcap" in late[0]["message"] and late[0]["date"]
    logged = [r.getMessage() for r in caplog.records if "cap-2.pcap" in r.getMessage()]
    assert len(logged) == 1 and late[0]["message"] in logged[0]
    for path in (first, third, second):  # again, for the frames: none of the middle's lost
        (live / path.name).unlink()
    frames = fed_one_by_one(live, [first, third, second], "frames")
    middle = [r for r in frames if r["capture"] == str(live / "cap-2.pcap")]
    assert middle and {r["conn_key"] for r in middle} == {f"{live / 'cap-2.pcap'}#1"}
    assert len(frames) == len(batch_rows(live, "frames"))


def test_available_now_takes_the_files_of_its_start_and_carries_nothing(tmp_path: Path) -> None:
    """Planning of `trigger(availableNow=True)` (`prepareForTriggerAvailableNow`, then offsets
    until one comes back unchanged): the files complete at its start, not one that comes
    after; its last offset carries nothing, so its rows are the batch read's of those files,
    the connection open at the newest one's end included. A stream run otherwise carries that
    connection (its rows wait for a later file)."""
    from amqpscope.spark.datasource import AmqpStreamReader

    first, second = rotated(tmp_path / "ring")
    options = {"path": str(tmp_path / "ring"), "settleSeconds": "0", "table": "connections"}
    reader = AmqpStreamReader(options)
    reader.prepareForTriggerAvailableNow()
    shutil.copy(CAPTURES / "091-tx.pcap", tmp_path / "ring" / "later.pcap")  # after the start
    start = reader.initialOffset()
    end = reader.latestOffset(start, None)
    assert list(end["taken"]) == ["cap-1.pcap", "cap-2.pcap"] and end["flush"]
    assert not end["carry"]["chains"] and reader.latestOffset(end, None) == end
    got = reader_rows(reader, reader.partitions(start, end))
    batch = batch_rows([first, second], "connections")
    assert Counter(map(key, got)) == Counter(map(key, batch))
    assert str(second) in {r["capture"] for r in got}  # the one open at the end of cap-2
    carried = AmqpStreamReader(options).latestOffset(start, None)
    assert [len(chain) for chain in carried["carry"]["chains"]] == [1]


def test_a_file_changed_after_it_was_read_is_a_finding_and_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A ring that reuses names (`tcpdump -C -W`) writes a file the stream has read again: a
    stream reads each file once, so the file's new content is not read, and it is not passed
    over in silence either: a `capture.changed-after-read` finding row and a log line, once."""
    import os
    import time

    from amqpscope.spark.datasource import AmqpStreamReader

    live = tmp_path / "live"
    live.mkdir()
    arrive(CAPTURES / "091-tx.pcap", live)
    os.utime(live / "091-tx.pcap", (time.time() - 60, time.time() - 60))
    options = {"path": str(live), "settleSeconds": "0", "table": "findings"}
    reader = AmqpStreamReader(options)
    start = reader.initialOffset()
    first = json.loads(json.dumps(reader.latestOffset(start, None)))
    assert not any(
        r["code"] == "capture.changed-after-read"
        for r in reader_rows(reader, reader.partitions(start, first))
    )
    assert reader.latestOffset(first, None) == first  # nothing new, nothing changed
    shutil.copyfile(CAPTURES / "091-get.pcap", live / "091-tx.pcap")  # the name written again
    caplog.set_level(logging.WARNING, logger="amqpscope.spark.datasource")
    reader = AmqpStreamReader(options)  # as after a restart
    second = json.loads(json.dumps(reader.latestOffset(first, None)))
    assert second != first and list(second["taken"]) == ["091-tx.pcap"]
    found = reader_rows(reader, reader.partitions(first, second))
    assert [(r["capture"], r["code"], r["severity"], r["conn_key"]) for r in found] == [
        (str(live / "091-tx.pcap"), "capture.changed-after-read", "warning", None)
    ]
    assert "not read" in found[0]["message"] and found[0]["date"]
    logged = [r.getMessage() for r in caplog.records if "091-tx.pcap" in r.getMessage()]
    assert len(logged) == 1 and found[0]["message"] in logged[0]
    assert reader.latestOffset(second, None) == second  # said once
    frames = AmqpStreamReader({**options, "table": "frames"})
    assert reader_rows(frames, frames.partitions(first, second)) == []  # not read again


def stream_sink(spark: Any, checkpoints: Path, table: str) -> list[str]:
    names = [n for n, _ in tables.COLUMNS[table]]
    sink = spark.read.schema(tables.struct_type(table)).parquet(str(checkpoints / f"sink-{table}"))
    return canonical(sink.select(*names).collect(), table)


def run_stream(spark: Any, folder: Path, checkpoints: Path, table: str, **options: Any) -> None:
    """A stream of `table` over `folder` into a Parquet sink (a checkpoint of its own), run until
    caught up (`processAllAvailable`) or, with `availableNow`, until it ends by itself."""
    available_now = options.pop("availableNow", False)
    reader = (
        spark.readStream.format("amqp")
        .option("table", table)
        .option("settleSeconds", "0")
        .option("maxGap", "60")
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    writer = (
        reader.load(str(folder))
        .writeStream.format("parquet")
        .option("path", str(checkpoints / f"sink-{table}"))
        .option("checkpointLocation", str(checkpoints / f"checkpoint-{table}"))
    )
    if available_now:
        query = writer.trigger(availableNow=True).start()
        try:
            assert query.awaitTermination(300), f"{table}: availableNow did not end"
        finally:
            query.stop()
        return
    query = writer.start()
    try:
        query.processAllAvailable()
    finally:
        query.stop()


def same_files(rows: list[str], folder: Path) -> list[str]:
    return sorted(text.replace(str(folder), "DIR") for text in rows)


@needs_java
def test_a_stream_takes_every_new_file_whatever_its_name(spark: Any, tmp_path: Path) -> None:
    """Captures of three hosts dropped one at a time into the stream's folder, the last named
    so that it sorts before the two taken already: each is taken when it comes (a restarted
    query after each), and the sinks have the rows of a batch read of the three."""
    hosts = tmp_path / "hosts"
    hosts.mkdir()
    for name, recorded in HOSTS:
        shutil.copy(CAPTURES / recorded, hosts / name)
    live = tmp_path / "live"
    live.mkdir()
    checkpoints = tmp_path / "stream"
    names = ("frames", "connections", "findings")
    for name, _ in HOSTS:
        arrive(hosts / name, live)
        for table in names:
            run_stream(spark, live, checkpoints, table)
    for table in names:
        got = same_files(stream_sink(spark, checkpoints, table), live)
        batch = same_files(canonical(source(spark, table, str(hosts)), table), hosts)
        assert Counter(got) == Counter(batch), table
    conns = [
        json.loads(text)
        for text in same_files(stream_sink(spark, checkpoints, "connections"), live)
    ]
    assert sorted({c["capture"] for c in conns}) == [f"DIR/{name}" for name, _ in sorted(HOSTS)]


@needs_java
def test_available_now_ends_with_the_batch_rows(spark: Any, tmp_path: Path) -> None:
    """`trigger(availableNow=True)`, a file a batch (`maxFilesPerTrigger` 1): the query ends by
    itself with the rows of a batch read of the folder, the connection still open at the end of
    the newest file included (what a stream carries, flushed by its last batch); run again with
    nothing new, it adds no row."""
    ring = tmp_path / "ring"
    rotated(ring)
    checkpoints = tmp_path / "stream"
    names = ("frames", "connections", "deliveries", "findings")  # (no finding in these files)
    for _ in range(2):
        for table in names:
            run_stream(spark, ring, checkpoints, table, availableNow=True, maxFilesPerTrigger="1")
        for table in names:
            got = stream_sink(spark, checkpoints, table)
            batch = canonical(source(spark, table, str(ring)), table)
            assert (got or table == "findings") and Counter(got) == Counter(batch), table
    conns = [json.loads(t) for t in stream_sink(spark, checkpoints, "connections")]
    cut = [c for c in conns if c["capture"] == str(ring / "cap-2.pcap")]  # open at its end
    assert cut and all(c["frames"] for c in cut)
