"""`amqpscope live --diagnose` against the real broker: a consumer that stops acking at its
prefetch is reported while it is stalled (before the client acks again) and once more when it
acks, with the stall's length as the client measured it.

Runs under the broker lock (captures on `lo`, which the other recordings share), with its own
queue name.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.test_live import LiveProcess

QUEUE = "amqpscope.test-diagnose-live.q"
PREFETCH = 2
STALL = 3.0


LOCK = "/tmp/amqpscope-broker.lock"


def _ancestors() -> set[int]:
    """This process and every process above it."""
    out, pid = set(), os.getpid()
    while pid > 1 and pid not in out:
        out.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as fh:
                pid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


def held_above(path: str) -> bool:
    """True when a process above this one holds the flock on `path` (`flock LOCK pytest ...`):
    taking it again here, on another open file, would wait for ever."""
    inode = os.stat(path).st_ino
    try:
        with open("/proc/locks") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return False
    ancestors = _ancestors()
    for line in lines:
        cols = line.split()
        if "->" in cols or len(cols) < 6 or cols[1] != "FLOCK":
            continue  # a waiter, or another kind of lock
        if cols[5].rsplit(":", 1)[-1] == str(inode) and int(cols[4]) in ancestors:
            return True
    return False


@pytest.fixture
def broker_lock() -> Iterator[None]:
    with open(LOCK, "a") as lock:
        if held_above(LOCK):  # run under `flock LOCK pytest ...`: already ours
            yield
            return
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def test_the_lock_held_by_a_parent_is_seen() -> None:
    """`flock LOCK sh -c 'pytest'`: the fixture must not wait for its own caller's lock (it did,
    and a run of the live tests under the lock hung for ever)."""
    probe = f"import sys; sys.path.insert(0, {str(Path(__file__).parent.parent)!r});" + (
        f" from tests.test_diagnose_live import held_above; print(held_above({LOCK!r}))"
    )
    with tempfile.TemporaryDirectory() as tmp:
        private = str(Path(tmp) / "lock")
        Path(private).touch()
        inner = [sys.executable, "-c", probe.replace(repr(LOCK), repr(private))]
        held = subprocess.run(["flock", private, *inner], capture_output=True, text=True)
        free = subprocess.run(inner, capture_output=True, text=True)
    assert held.stdout.strip() == "True", held.stderr
    assert free.stdout.strip() == "False", free.stderr


def stalls(proc: LiveProcess) -> list[dict[str, Any]]:
    records = [json.loads(line) for line in proc.out.read_text().splitlines() if line]
    return [
        r
        for r in records
        if r.get("code") == "consumer.stalled" and r.get("queue") == QUEUE and "diagnosis" in r
    ]


@pytest.mark.broker
def test_a_stall_is_reported_while_it_happens_and_when_it_ends(
    tmp_path: Path, broker_lock: None
) -> None:
    pika = pytest.importorskip(
        "pika", reason="pika comes with the dev extra (make install installs it)"
    )
    proc = LiveProcess(tmp_path, "lo", "-f", "tcp port 5672", "--json", "--diagnose")
    try:
        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", 5672))
        ch = conn.channel()
        ch.queue_delete(QUEUE)
        ch.queue_declare(QUEUE)
        ch.basic_qos(prefetch_count=PREFETCH)
        for i in range(PREFETCH + 2):
            ch.basic_publish("", QUEUE, f"m{i}".encode())
        held: list[int] = []
        arrived: list[float] = []

        def on_message(_ch: Any, method: Any, _props: Any, _body: bytes) -> None:
            held.append(method.delivery_tag)
            arrived.append(time.time())

        ch.basic_consume(QUEUE, on_message)
        deadline = time.monotonic() + 15
        while len(held) < PREFETCH and time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.05)
        assert len(held) == PREFETCH
        began = arrived[-1]  # the delivery that filled the prefetch window
        while time.time() < began + STALL:
            conn.process_data_events(time_limit=0.05)
        during = stalls(proc)  # read before the client acks: the stall is still on
        acked = time.time()
        ch.basic_ack(held[-1], multiple=True)
        deadline = time.monotonic() + 15
        while len(held) < PREFETCH + 2 and time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.05)
        ch.basic_ack(held[-1], multiple=True)
        ch.queue_delete(QUEUE)
        conn.close()
        deadline = time.monotonic() + 10
        while len(stalls(proc)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        proc.stop()
    assert [r["diagnosis"] for r in during] == ["began"]
    (report,) = during
    assert report["ongoing"] is True and report["duration"] >= 1.0
    assert stalls(proc)[0] == report
    ended = stalls(proc)[1]
    assert ended["diagnosis"] == "ended" and not ended["ongoing"]
    records = [json.loads(line) for line in proc.out.read_text().splitlines() if line]
    # when, by the capture's clock (the client's would add how late a loaded machine ran it):
    # from the delivery that filled the window (the client's tag PREFETCH) to its ack of it
    frames = {r["frame"]: r for r in records if "frame" in r and r.get("conn") == report["conn"]}
    filled, ack = ended["evidence"][-2:]  # (the last ack before it: none here)
    assert frames[filled]["name"] == "basic.deliver"
    assert frames[filled]["fields"]["delivery-tag"] == held[PREFETCH - 1] == PREFETCH
    assert frames[filled]["fields"]["routing-key"] == QUEUE
    assert frames[ack]["name"] == "basic.ack" and frames[ack]["dir"] == "c2s"
    assert frames[ack]["fields"]["delivery-tag"] == PREFETCH
    assert report["start"] == ended["start"] == pytest.approx(frames[filled]["ts"], abs=1e-3)
    wire = frames[ack]["ts"] - frames[filled]["ts"]
    assert ended["duration"] == pytest.approx(wire, abs=1e-3)
    assert wire >= STALL and began < acked  # the client held it that long, by its own clock
    final = [r for r in records if "diagnoses" in r][-1]
    assert set(records[-1]) == {"capture"}  # the capture's statistics come last
    from amqpscope import schema

    validator = schema.validator("live")  # every record, the stall's `diagnosis` ones too
    assert not [e.message for r in records for e in validator.iter_errors(r)][:1]
    assert any(d["code"] == "consumer.stalled" and d["queue"] == QUEUE for d in final["diagnoses"])
