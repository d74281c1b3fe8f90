"""`live` says what `read` and `summary` say of the same packets (issue 40, items 4 and 5): times
from the capture's first frame whatever the selection shows, the summary's tables at their
natural width when piped, and -w's format as its name says it (pcapng for a .pcapng name, as
`read -w`). pika talks to the RabbitMQ `make test` started while `live` captures on lo."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.test_live import ROOT, LiveProcess


def amqpscope(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def publish(queue: str, count: int = 5) -> None:
    """A connection of its own: declare `queue`, publish `count` messages to it, close."""
    import pika

    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", 5672))
    try:
        ch = conn.channel()
        ch.queue_declare(queue, exclusive=True)
        time.sleep(0.2)  # the publishes well after the connection's first frame
        for i in range(count):
            ch.basic_publish("", queue, f"message {i}".encode())
    finally:
        conn.close()


def live_run(tmp_path: Path, *args: str) -> tuple[LiveProcess, Path]:
    """`live lo -w out.pcap ARGS` while pika publishes to a queue of this run's own (its name in
    `tmp_path/queue`), stopped with SIGINT once pika closed and the capture caught up."""
    written = tmp_path / "out.pcap"
    queue = f"amqpscope-agrees-{uuid.uuid4().hex[:8]}"
    (tmp_path / "queue").write_text(queue)
    proc = LiveProcess(tmp_path, "lo", "-f", "tcp port 5672", "-w", str(written), *args)
    try:
        publish(queue)
        time.sleep(1.5)
        code = proc.stop(signal.SIGINT)
    finally:
        proc.stop(signal.SIGKILL)
    assert code == 0, proc.stderr()
    return proc, written


@pytest.mark.broker
def test_live_times_count_from_the_captures_first_frame_as_read(tmp_path: Path) -> None:
    """`live -Y` printed each time from the first frame it *showed* (0.000000 for the first
    publish); `read` of its -w file counts from the capture's first frame (the README's rule).
    The same selection now prints the same lines, times included."""
    queue_filter = 'fields.routing-key matches "^amqpscope-agrees-"'
    proc, written = live_run(tmp_path, "-Y", queue_filter, "--color", "never")
    shown = [line for line in proc.out.read_text().splitlines() if "basic.publish" in line]
    queue = (tmp_path / "queue").read_text()
    shown = [line for line in shown if queue in line]
    assert len(shown) == 5, proc.out.read_text()
    again = amqpscope("read", str(written), "-Y", queue_filter, "--color", "never")
    assert shown == [line for line in again.splitlines() if queue in line]
    first_time = float(shown[0].split()[1])
    assert first_time > 0.1, shown[0]  # the connection's opening came first


@pytest.mark.broker
def test_live_summary_piped_is_the_summary_of_its_capture(tmp_path: Path) -> None:
    """`live --summary | cat` cut the header and the channel table to 80 columns (rich's width
    for what is no terminal); `summary FILE | cat` does not. No frame shown (-Y matches none):
    what live printed is its summary alone, the same text as `summary` of its -w file."""
    proc, written = live_run(tmp_path, "--summary", "--color", "never", "-Y", 'name == "none"')
    text = proc.out.read_text()
    queue = (tmp_path / "queue").read_text()
    assert queue in amqpscope("read", str(written))  # the run's own connection is in it
    summary = amqpscope("summary", str(written), "--color", "never")
    assert max(len(line) for line in summary.splitlines()) > 80, summary  # wider than rich's 80
    assert text == summary


@pytest.mark.broker
def test_live_json_records_validate_against_the_live_schema(tmp_path: Path) -> None:
    """Every line of `live --json --diagnose --summary` (frames, the diagnoses at the end, the
    summary, the capture's statistics) validates against `amqpscope schema live`; a stall's
    `diagnosis` records are validated in tests/test_diagnose_live.py (issue 40, item 10)."""
    from amqpscope import schema

    proc, _ = live_run(tmp_path, "--json", "--diagnose", "--summary")
    records = [json.loads(line) for line in proc.out.read_text().splitlines()]
    validator = schema.validator("live")
    for number, record in enumerate(records, 1):
        errors = sorted(validator.iter_errors(record), key=str)
        assert not errors, f"line {number}: {errors[0].message[:400]}"
    kinds = [next(iter(r)) if len(r) == 1 else "frame" for r in records]
    assert kinds[-3:] == ["diagnoses", "summary", "capture"] and "frame" in kinds


@pytest.mark.broker
@pytest.mark.parametrize("backend", ["tcpdump", "scapy"])
def test_live_w_pcapng_writes_pcapng_as_read_w(tmp_path: Path, backend: str) -> None:
    """`read -w out.pcapng` writes pcapng for that name; `live -w out.pcapng` wrote pcap in it.
    Now pcapng, from the spool (tcpdump) and from a backend thread (scapy): its Section Header
    first, and read back it gives the frames live showed."""
    written = tmp_path / "out.pcapng"
    proc = LiveProcess(
        tmp_path, "lo", "--backend", backend, "-f", "tcp port 5672", "--json", "-w", str(written)
    )
    try:
        publish(f"amqpscope-agrees-{uuid.uuid4().hex[:8]}")
        time.sleep(1.5)
        code = proc.stop(signal.SIGINT)
    finally:
        proc.stop(signal.SIGKILL)
    assert code == 0, proc.stderr()
    assert written.read_bytes()[:4] == b"\x0a\x0d\x0d\x0a"  # pcapng's Section Header Block
    shown = [line for line in proc.out.read_text().splitlines() if '"frame"' in line]
    back = amqpscope("read", str(written), "--json").splitlines()
    assert len(shown) >= 5 * 3 and back == shown


@pytest.mark.parametrize("name", ["091-publish-consume.pcap", "nanosecond.pcap", "ipv6.pcap"])
def test_pcap_converted_in_any_pieces_reads_back_as_the_same_packets(
    tmp_path: Path, name: str
) -> None:
    """The converter behind `live -w NAME.pcapng`, fed a pcap in pieces as a tool writes it:
    every packet back with its exact time (micro- and nanosecond), bytes and length on the
    wire, and its link type."""
    from amqpscope.capture.files import open_capture
    from amqpscope.capture.writer import PcapToPcapng

    raw = (ROOT / "captures" / name).read_bytes()
    converter = PcapToPcapng()
    out = tmp_path / "out.pcapng"
    with out.open("wb") as fh:
        for start in range(0, len(raw), 7):
            fh.write(converter.feed(raw[start : start + 7]))

    def packets(path: Path) -> list[tuple]:
        with open_capture(str(path)) as capture:
            return [(p.ts, p.data, p.wirelen, p.linktype) for p in capture]

    assert packets(out) == packets(ROOT / "captures" / name)
    with open_capture(str(out)) as capture:
        assert capture.format == "pcapng"
