"""`amqpscope live`: the pcap stream parser, backends, bounded state, errors, and real captures.

The broker tests capture on `lo` while pika and Proton talk to the RabbitMQ `make test` started.
Other tests may use lo:5672 too, so only this test's own connections are compared (by client
endpoint or connection name). Every subprocess is stopped in a `finally`, also on failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from amqpscope.capture import live
from amqpscope.capture.files import open_capture
from amqpscope.capture.live import (
    LiveError,
    PacketQueue,
    PcapStream,
    PcapStreamError,
    check_filter,
    choose_backend,
    classify_stderr,
    pcap_header,
    pcap_record,
)
from amqpscope.capture.packet import RawPacket
from amqpscope.dissect import Dissector
from amqpscope.live_decode import LiveDecoder
from amqpscope.render.lines import frame_ndjson
from amqpscope.track.tracker import Tracker
from tests.test_ground_truth import check_counts

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "captures"
RECORDER = CAPTURES / "record.py"


def packets_of(path: Path) -> list[RawPacket]:
    with open_capture(str(path)) as capture:
        return list(capture)


def amqpscope(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


# -- the pcap stream parser ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["091-publish-consume.pcap", "nanosecond.pcap", "ipv6.pcap"])
def test_pcap_stream_in_any_chunks_equals_the_file_reader(name: str) -> None:
    raw = (CAPTURES / name).read_bytes()
    expected = packets_of(CAPTURES / name)
    rng = random.Random(name)
    for sizes in ([1], [7, 13, 1], [16], [4096], [len(raw)]):
        parser = PcapStream()
        got: list[RawPacket] = []
        pos = 0
        while pos < len(raw):
            size = sizes[0] if len(sizes) == 1 else rng.choice(sizes)
            got += parser.feed(raw[pos : pos + size])
            pos += size
        assert parser.pending == 0
        assert [(p.ts, p.linktype, p.data, p.wirelen) for p in got] == [
            (p.ts, p.linktype, p.data, p.wirelen) for p in expected
        ]


def test_pcap_stream_either_byte_order() -> None:
    records = [(1_700_000_000_123_456, b"\x01" * 60, 60), (1_700_000_001_000_001, b"\x02" * 9, 99)]
    for endian in ("<", ">"):
        import struct

        head = struct.pack(endian + "IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
        body = b"".join(
            struct.pack(endian + "IIII", us // 10**6, us % 10**6, len(d), w) + d
            for us, d, w in records
        )
        got = PcapStream().feed(head + body)
        assert [(p.ts, p.data, p.wirelen) for p in got] == [
            (us / 10**6, d, w) for us, d, w in records
        ]


def test_pcap_stream_refuses_pcapng_and_damage() -> None:
    with pytest.raises(PcapStreamError, match="pcapng"):
        PcapStream().feed((CAPTURES / "pcapng.pcapng").read_bytes()[:64])
    with pytest.raises(PcapStreamError, match="not a pcap"):
        PcapStream().feed(b"GET / HTTP/1.1\r\n" * 4)
    damaged = pcap_header(1) + b"\0" * 8 + (1 << 30).to_bytes(4, sys.byteorder) + b"\0" * 4
    with pytest.raises(PcapStreamError, match="damaged"):
        PcapStream().feed(damaged)


def test_written_pcap_reads_back_exactly(tmp_path: Path) -> None:
    packets = packets_of(CAPTURES / "091-publish-consume.pcap")
    out = tmp_path / "w.pcap"
    with out.open("wb") as fh:
        fh.write(pcap_header(1))
        for p in packets:
            fh.write(pcap_record(round(p.ts * 1_000_000), p.data, p.wirelen))
    back = packets_of(out)
    assert [(p.ts, p.data, p.wirelen, p.linktype) for p in back] == [
        (p.ts, p.data, p.wirelen, p.linktype) for p in packets
    ]


# -- queue, backend choice, errors ---------------------------------------------------------------


def test_queue_is_bounded_by_packets_and_bytes() -> None:
    q = PacketQueue(max_packets=3, max_bytes=1000)
    pkt = lambda n, size=10: RawPacket(n, 0.0, 1, b"x" * size, size)  # noqa: E731
    assert all(q.put(pkt(i)) for i in range(3))
    assert not q.put(pkt(4)) and q.dropped == 1
    assert q.get(0.01).number == 0
    assert not q.put(pkt(5, 995))  # would exceed the bytes
    assert q.put(pkt(6, 900)) and q.dropped == 2 and len(q) == 3
    q.close()
    assert [q.get(0.01).number for _ in range(3)] == [1, 2, 6]
    assert q.get(0.01) is None and q.closed


def test_backend_choice() -> None:
    def only(*tools: str):
        return lambda name: f"/usr/bin/{name}" if name in tools else None

    assert choose_backend(None, only("tcpdump", "dumpcap")) == "tcpdump"
    assert choose_backend(None, only("dumpcap")) == "dumpcap"
    assert choose_backend(None, only()) == "scapy"
    assert choose_backend("scapy", only("tcpdump")) == "scapy"
    assert choose_backend("dumpcap", only("dumpcap")) == "dumpcap"
    assert choose_backend("pyshark", only(), pyshark_ok=lambda: True) == "pyshark"
    for requested, which, ok in (("tcpdump", only("dumpcap"), True), ("pyshark", only(), False)):
        with pytest.raises(LiveError) as err:
            choose_backend(requested, which, pyshark_ok=lambda ok=ok: ok)
        assert err.value.code == 2 and "--backend" in str(err.value)
    with pytest.raises(LiveError):
        choose_backend("wireshark", only())


def test_capture_tool_messages_become_one_line() -> None:
    perm = classify_stderr(
        "tcpdump",
        "lo",
        "tcpdump: lo: You don't have permission to perform this capture on that device\n"
        "(socket: Operation not permitted)\n",
        "/usr/bin/tcpdump",
    )
    assert perm.code == 1 and "root" in str(perm) and "CAP_NET_RAW" in str(perm)
    assert "setcap cap_net_raw,cap_net_admin=eip /usr/bin/tcpdump" in str(perm)
    dev = classify_stderr("dumpcap", "eth9", 'dumpcap: There is no device named "eth9".\n', "")
    assert dev.code == 2 and "eth9" in str(dev) and "lo" in str(dev)
    bad = classify_stderr(
        "dumpcap",
        "lo",
        "Capturing on 'Loopback: lo'\ndumpcap: Invalid capture filter \"tcp port\" for interface "
        "'lo'.\n\nThat string isn't a valid capture filter (can't parse filter expression: "
        "syntax error).\n",
        "",
    )
    assert bad.code == 2
    assert str(bad) == "bad capture filter: can't parse filter expression: syntax error"
    other = classify_stderr("tcpdump", "lo", "tcpdump: something else broke\n", "")
    assert other.code == 1 and "something else broke" in str(other)


def test_filters_are_checked_by_libpcap() -> None:
    check_filter("tcp port 5672 and host 127.0.0.1", 1)
    with pytest.raises(LiveError) as err:
        check_filter("tcp port", 1)
    assert err.value.code == 2 and "syntax error" in str(err.value)
    with pytest.raises(LiveError, match="port 99999"):
        check_filter("tcp port 99999", 1)


def test_cli_unknown_interface_lists_the_real_ones() -> None:
    result = amqpscope("live", "nosuch0", "--duration", "1")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr
    assert "nosuch0" in lines[0] and "lo" in lines[0]
    for name in live.interfaces():
        assert name in lines[0]


@pytest.mark.parametrize("backend", ["scapy", None])
def test_cli_bad_filter_gives_the_compilers_message(backend: str | None) -> None:
    args = ["live", "lo", "-f", "tcp port", "--duration", "1"]
    if backend:
        args += ["--backend", backend]
    result = amqpscope(*args)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "amqpscope: bad capture filter 'tcp port': can't parse filter expression: syntax error"
    ]


def test_cli_bad_display_filter_and_unwritable_output() -> None:
    result = amqpscope("live", "lo", "-Y", "name ==")
    assert result.returncode == 2 and result.stderr.startswith("amqpscope: -Y:")
    result = amqpscope("live", "lo", "-w", "/nonexistent/dir/x.pcap", "--duration", "1")
    assert result.returncode == 1 and "cannot write /nonexistent/dir/x.pcap" in result.stderr


# -- bounded state: eviction and idle expiry -----------------------------------------------------


def test_closed_connections_are_evicted_with_the_same_frames() -> None:
    packets = packets_of(CAPTURES / "091-channels.pcap")
    again = packets_of(CAPTURES / "091-channels.pcap")
    expected = [frame_ndjson(f) for f in Dissector().run(again)]
    d = Dissector()
    got: list[bytes] = []
    evicted = []
    for p in packets:
        got += [frame_ndjson(f) for f in d.feed(p)]
        evicted += d.evict_closed()
    got += [frame_ndjson(f) for f in d.finish()]
    assert got == expected
    assert evicted and all(c.closed for c in evicted)
    assert d.connections == {} and d.tcp.open_connections == 0


def test_idle_connections_expire_like_the_end_of_a_capture() -> None:
    packets = packets_of(CAPTURES / "10-send-receive.pcap")
    half = packets[: len(packets) // 2]  # the connection is still open here
    ended = Dissector()
    expected = [frame_ndjson(f) for f in ended.run(half)]
    d = Dissector()
    got = []
    for p in half:
        got += [frame_ndjson(f) for f in d.feed(p)]
    last = half[-1].ts
    assert d.expire_idle(last + 5, 10) == [] and d.tcp.open_connections == 1
    got += [frame_ndjson(f) for f in d.expire_idle(last + 11, 10)]
    # the same frames, and then how the connection ended: idle, nobody sent a FIN or RST (the end
    # of a capture writes no such record: the connection did not end)
    assert got[:-1] == expected
    idle = json.loads(got[-1])
    assert (idle["kind"], idle["name"], idle["fields"]) == (
        "transport",
        "idle",
        {"event": "idle", "by": None},
    )
    (conn,) = d.evict_closed()
    assert conn.closed == "idle" and d.connections == {} and d.tcp.open_connections == 0
    # a later segment of that pair opens a new connection (no tombstone hides it)
    d.feed(packets[len(packets) // 2])
    assert d.tcp.open_connections == 1 and max(d.connections) == 2


def test_live_pipeline_matches_read_and_keeps_summaries_of_evicted_connections() -> None:
    first = packets_of(CAPTURES / "091-channels.pcap")
    second = packets_of(CAPTURES / "10-send-receive.pcap")
    shift = first[-1].ts + 100 - second[0].ts
    packets = first + [
        RawPacket(len(first) + p.number, p.ts + shift, p.linktype, p.data, p.wirelen)
        for p in second
    ]
    expected = [frame_ndjson(f) for f in Dissector().run(iter(packets))]
    pipe = LiveDecoder(idle=30)
    got = []
    for p in packets:
        got += [frame_ndjson(f) for f in pipe.feed(p)]
        got += [frame_ndjson(f) for f in pipe.tick(p.ts)]
    got += [frame_ndjson(f) for f in pipe.finish()]
    assert got == expected
    assert pipe.evicted >= 1 and pipe.open_connections <= 1
    ids = sorted({json.loads(line)["conn"] for line in expected})
    assert [c["id"] for c in pipe.summary()["connections"]] == ids


# -- on the wire (root, broker on localhost) -------------------------------------------------------


class LiveProcess:
    """`amqpscope live` in the background; stdout to a file; always stopped by `stop()`."""

    def __init__(self, tmp: Path, *args: str) -> None:
        self.out = tmp / "live.ndjson"
        self.err = tmp / "live.err"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "amqpscope.cli", "live", *args],
            stdout=self.out.open("wb"),
            stderr=self.err.open("wb"),
            cwd=ROOT,
        )
        deadline = time.monotonic() + 30
        while "capturing on" not in self.stderr():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"amqpscope live did not start: {self.stderr()}")
            time.sleep(0.05)
        time.sleep(0.5)

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    def rss_kib(self) -> int:
        with open(f"/proc/{self.proc.pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def stop(self, sig: int = signal.SIGINT) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def records(self) -> list[dict[str, Any]]:
        with self.out.open() as fh:
            return [json.loads(line) for line in fh]

    def frames(self) -> list[dict[str, Any]]:
        return [r for r in self.records() if "frame" in r]

    def stats(self) -> dict[str, Any]:
        """The last record: the capture's statistics."""
        last = self.records()[-1]
        assert set(last) == {"capture"}, last
        return last["capture"]


def drops(stderr: str) -> tuple[int, int, int]:
    import re

    m = re.search(
        r"(\d+) packets captured, (\d+) dropped by the kernel, (\d+) dropped by amqpscope", stderr
    )
    assert m, stderr
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def comparable(frame: dict[str, Any]) -> tuple:
    return (
        frame["dir"],
        frame["channel"],
        frame["kind"],
        frame["name"],
        frame["size"],
        json.dumps(frame["fields"], sort_keys=True),
        json.dumps(frame.get("message"), sort_keys=True),
    )


def client_of(frame: dict[str, Any]) -> str:
    return frame["src"] if frame["dir"] == "c2s" else frame["dst"]


def read_json(path: Path) -> list[dict[str, Any]]:
    result = amqpscope("read", str(path), "--json", timeout=300)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.mark.broker
def test_live_sees_what_the_scenarios_did_and_what_tcpdump_recorded(tmp_path: Path) -> None:
    written = tmp_path / "live.pcap"
    proc = LiveProcess(tmp_path, "lo", "-f", "tcp port 5672", "--json", "-w", str(written))
    try:
        rec = subprocess.run(
            [
                *(sys.executable, str(RECORDER), "--no-check", "--out", str(tmp_path / "rec")),
                *("--only", "091-publish-consume", "10-send-receive"),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        time.sleep(0.5)
    finally:
        code = proc.stop(signal.SIGINT)  # Ctrl-C: the -w file and the last frames are kept
    assert rec.returncode == 0, rec.stderr[-3000:]
    assert code == 0, proc.stderr()
    assert "Traceback" not in proc.stderr()
    captured, kernel, backend = drops(proc.stderr())
    assert captured > 0 and kernel == 0 and backend == 0
    mine = proc.frames()
    # -w read back gives exactly the frames printed live
    assert [json.dumps(f) for f in read_json(written)] == [json.dumps(f) for f in mine]
    for name in ("091-publish-consume", "10-send-receive"):
        meta = json.loads((tmp_path / "rec" / f"{name}.json").read_text())
        theirs = read_json(tmp_path / "rec" / meta["file"])
        clients = {client_of(f) for f in theirs}
        assert clients
        seen = [f for f in mine if client_of(f) in clients]
        # the same frames as the parallel tcpdump recording, connection by connection
        for client in clients:
            assert [comparable(f) for f in seen if client_of(f) == client] == [
                comparable(f) for f in theirs if client_of(f) == client
            ], f"{name}: {client}"
        # and what the scenario's client library counted
        conns = {client: i for i, client in enumerate(sorted(clients), 1)}
        frames = [
            SimpleNamespace(name=f["name"], direction=f["dir"], conn=conns[client_of(f)])
            for f in seen
        ]
        assert check_counts(meta, frames) >= 2


def soak_load(seconds: float, rate: float, name: str) -> dict[str, Any]:
    """Publish `rate` messages/s to an exclusive queue and consume them (pika, one connection)."""
    import pika

    params = pika.ConnectionParameters(
        "127.0.0.1", 5672, client_properties={"connection_name": name}
    )
    conn = pika.BlockingConnection(params)
    try:
        pub = conn.channel()
        sub = conn.channel()
        queue = pub.queue_declare("", exclusive=True).method.queue
        got = [0]

        def on_message(*_: Any) -> None:
            got[0] += 1

        sub.basic_consume(queue, on_message, auto_ack=True)
        sent = 0
        body = b"soak " * 20
        start = time.monotonic()
        while (now := time.monotonic()) - start < seconds:
            while sent < int((now - start) * rate):
                pub.basic_publish("", queue, body)
                sent += 1
            conn.process_data_events(0.002)
        elapsed = time.monotonic() - start
        deadline = time.monotonic() + 15
        while got[0] < sent and time.monotonic() < deadline:
            conn.process_data_events(0.05)
    finally:
        with contextlib.suppress(Exception):
            conn.close()
    return {"published": sent, "delivered": got[0], "seconds": elapsed}


SOAK_SECONDS = float(os.environ.get("AMQPSCOPE_SOAK_SECONDS", "15"))
SOAK_RATE = float(os.environ.get("AMQPSCOPE_SOAK_RATE", "2000"))  # messages/s, 6 frames each


def tshark_packets(path: Path) -> int:
    done = subprocess.run(
        ["tshark", "-r", str(path), "-T", "fields", "-e", "frame.number"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return len(done.stdout.splitlines())


@pytest.mark.broker
@pytest.mark.tshark
def test_soak_decodes_every_packet_captured_with_flat_memory(tmp_path: Path) -> None:
    """Load for a while: every packet tcpdump says it captured is decoded (the spool lets the
    decoder fall behind without the capture losing any), as many as tshark reads from -w; how
    far behind the decoder was, the rate and the memory are reported. Kernel drops, the rate
    reached and memory growth are not asserted: on a loaded machine they are the machine's
    (bench/live.py measures them against their targets: --min-rate, --max-rss-growth)."""
    name = f"amqpscope-soak-{os.getpid()}"
    written = tmp_path / "soak.pcap"
    proc = LiveProcess(tmp_path, "lo", "-f", "tcp port 5672", "--json", "-w", str(written))
    rss: list[tuple[float, int]] = []
    try:
        import threading

        result: dict[str, Any] = {}
        worker = threading.Thread(
            target=lambda: result.update(soak_load(SOAK_SECONDS, SOAK_RATE, name)), daemon=True
        )
        start = time.monotonic()
        worker.start()
        while worker.is_alive():
            rss.append((time.monotonic() - start, proc.rss_kib()))
            worker.join(1.0)
        code = proc.stop(signal.SIGTERM)  # the tool stops; what it spooled is still decoded
    finally:
        proc.stop(signal.SIGKILL)
    assert code == 0, proc.stderr()
    assert "Traceback" not in proc.stderr()
    stats = proc.stats()
    print(f"soak capture: {stats}")
    assert stats["tool_captured"] == stats["decoded"] == stats["captured"] > 0, stats
    assert stats["amqpscope_drops"] == 0 and stats["spool"]["discarded_bytes"] == 0, stats
    assert set(stats["max_lag"]) == {"bytes", "packets", "seconds"}
    assert "the decoder was at most" in proc.stderr()
    assert tshark_packets(written) == stats["decoded"]
    assert result["published"] == result["delivered"] > 0
    # this test's connection: the one whose start-ok carries its connection name
    frames: Counter[tuple[str, str]] = Counter()
    ours = None
    for f in proc.frames():
        if f["name"] == "connection.start-ok" and name in json.dumps(f["fields"]):
            ours = f["conn"]
        if f["conn"] == ours:
            frames[(f["name"], f["dir"])] += 1
    assert frames[("basic.publish", "c2s")] == result["published"]
    assert frames[("basic.deliver", "s2c")] == result["delivered"]
    total = sum(frames.values())
    early = max(k for t, k in rss if t <= SOAK_SECONDS / 3)
    late = max(k for t, k in rss)
    report = (
        f"soak: {total} frames in {result['seconds']:.1f} s = {total / result['seconds']:.0f} "
        f"frames/s, RSS {early} KiB at {SOAK_SECONDS / 3:.0f} s, {late} KiB at the end, "
        f"kernel drops {stats['kernel_drops']}, decoder behind by at most {stats['max_lag']}"
    )
    print(report)


REPLAY = ROOT / "bench" / "replay_load.py"


def test_replayed_load_every_frame_decoded_and_counted(tmp_path: Path) -> None:
    """Faster than pika makes it here: bench/replay_load.py plays a consumer connection over
    loopback TCP (no broker; pika encodes every frame) at thousands of messages a second. Every
    packet tcpdump captured is decoded, none discarded from the spool, and when the kernel
    dropped none, every publish, deliver and ack the load wrote is a frame, tags in order."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = LiveProcess(tmp_path, "lo", "-f", f"tcp port {port}", "--json")
    load = ("--port", str(port), "--seconds", "4", "--rate", "4000")
    try:
        done = subprocess.run(
            [sys.executable, str(REPLAY), *load],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        sent = int(done.stdout.split()[2])
        time.sleep(1.5)
        code = proc.stop(signal.SIGINT)
    finally:
        proc.stop(signal.SIGKILL)
    assert code == 0, proc.stderr()
    assert "Traceback" not in proc.stderr()
    stats = proc.stats()
    assert stats["tool_captured"] == stats["decoded"] == stats["captured"] > sent, stats
    assert stats["amqpscope_drops"] == 0 and stats["spool"]["discarded_bytes"] == 0, stats
    names: Counter[str] = Counter()
    acked: list[int] = []
    with proc.out.open() as fh:
        for line in fh:
            if '"basic.ack"' in line:
                acked.append(json.loads(line)["fields"]["delivery-tag"])
            elif '"frame"' in line:
                names[json.loads(line)["name"]] += 1
    print(f"replay: {sent} messages, {stats}")
    assert sent > 0  # how many a second: bench/live.py --load replay
    if stats["kernel_drops"] == 0:
        assert names["basic.publish"] == names["basic.deliver"] == len(acked) == sent, names
        assert acked == list(range(1, sent + 1))
        assert names["connection.close-ok"] == 1
    else:  # the machine's, not amqpscope's: what was captured was still decoded (above)
        assert names["basic.publish"] <= sent and len(acked) <= sent


def short_run(tmp_path: Path, backend: str, get: bool, wait: float) -> tuple[LiveProcess, int, str]:
    """`live --backend BACKEND -w out.pcap` while pika publishes five messages to a queue of its
    own (and gets them back, `get`), stopped with SIGTERM `wait` seconds after pika closed: the
    process, its exit status and the queue's name."""
    if backend == "pyshark" and not live._pyshark_available():
        pytest.skip(reason="pyshark or tshark is not installed")
    written = tmp_path / "out.pcap"
    proc = LiveProcess(
        tmp_path, "lo", "--backend", backend, "-f", "tcp port 5672", "--json", "-w", str(written)
    )
    try:
        assert f"with {backend}" in proc.stderr()
        import pika

        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", 5672))
        try:
            ch = conn.channel()
            queue = ch.queue_declare("", exclusive=True).method.queue
            for i in range(5):
                ch.basic_publish("", queue, f"message {i}".encode())
            while get and ch.basic_get(queue, auto_ack=True)[0] is not None:
                pass
        finally:
            conn.close()
        time.sleep(wait)
        code = proc.stop(signal.SIGTERM)
    finally:
        proc.stop(signal.SIGKILL)
    return proc, code, queue


@pytest.mark.broker
@pytest.mark.parametrize("backend", ["scapy", "dumpcap", "pyshark"])
def test_every_backend_reads_back_what_it_showed(tmp_path: Path, backend: str) -> None:
    proc, code, _ = short_run(tmp_path, backend, get=True, wait=1.5)
    assert code == 0, proc.stderr()
    mine = proc.frames()
    assert Counter(f["name"] for f in mine)["basic.publish"] >= 5
    written = read_json(tmp_path / "out.pcap")
    assert [json.dumps(f) for f in written] == [json.dumps(f) for f in mine]


@pytest.mark.broker
@pytest.mark.parametrize("backend", ["tcpdump", "dumpcap", "scapy", "pyshark"])
def test_a_stop_right_after_the_traffic_still_shows_it(tmp_path: Path, backend: str) -> None:
    """Stopped the moment a short run ends, every backend still decodes and writes what it had
    captured: libpcap hands a block over at its timeout (tcpdump 1 s, dumpcap 250 ms), scapy's
    socket holds packets not read yet, pyshark's tshark hands them over about a second late.
    dumpcap, scapy and pyshark used to stop at once and lose them (pyshark and dumpcap all)."""
    proc, code, queue = short_run(tmp_path, backend, get=False, wait=0.0)
    assert code == 0, proc.stderr()
    # this connection's frames (other tests' clients may use the broker meanwhile)
    mine = [f for f in proc.frames() if f.get("fields", {}).get("routing-key") == queue]
    assert len(mine) == 5 and {f["name"] for f in mine} == {"basic.publish"}, mine
    conn_id = mine[0]["conn"]
    shown = [f for f in proc.frames() if f["conn"] == conn_id]
    assert "connection.close-ok" in [f["name"] for f in shown], shown[-3:]
    assert [f for f in read_json(tmp_path / "out.pcap") if f["conn"] == conn_id] == shown


def test_live_keeps_undecoded_connections_it_evicted() -> None:
    """A TLS connection without its key ends and is evicted: the summary still lists it as
    `undecoded`, as `summary` of the same capture does."""
    capture = CAPTURES / "091-tls13.pcap"
    tracker = Tracker()
    with open_capture(capture) as packets:
        for frame in Dissector().run(packets):
            tracker.feed(frame)
    tracker.finish()
    expected = tracker.summary()["undecoded"]
    pipe = LiveDecoder(idle=30)
    for p in packets_of(capture):
        pipe.feed(p)
        pipe.tick(p.ts)
    pipe.tick(packets_of(capture)[-1].ts + 3600)  # past the idle timeout: closed and evicted
    pipe.finish()
    assert pipe.evicted >= 1 and pipe.open_connections == 0
    assert pipe.summary()["undecoded"] == expected
