"""The live spool (`capture.spool`): the decoder follows the tool's files as they grow and rotate,
a full spool discards the oldest unread files and says so, -w keeps everything, nothing is left.

A thread stands in for tcpdump: it writes a real capture's packets as pcap files in the spool's
naming (`spool.pcap`, `spool.pcap1`, ...), in pieces that cut records, closing each file before
it starts the next, as tcpdump -C does. The real tool is in tests/test_live.py.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from amqpscope.capture.files import open_capture
from amqpscope.capture.live import LiveCapture, PcapStream, pcap_header, pcap_record
from amqpscope.capture.packet import RawPacket
from amqpscope.capture.spool import Spool, spool_files

CAPTURES = Path(__file__).resolve().parent.parent / "captures"


def source() -> list[RawPacket]:
    with open_capture(str(CAPTURES / "091-publish-consume.pcap")) as capture:
        return list(capture)


def records(packets: list[RawPacket]) -> list[bytes]:
    return [pcap_record(round(p.ts * 1e6), p.data, p.wirelen) for p in packets]


def write_files(directory: Path, recs: list[bytes], per_file: int, pause: float = 0.0) -> None:
    """As tcpdump -C does: header, records (cut into pieces), close, then the next file."""
    for n, start in enumerate(range(0, len(recs), per_file)):
        name = directory / ("spool.pcap" + (str(n) if n else ""))
        with name.open("wb") as fh:
            fh.write(pcap_header(1))
            data = b"".join(recs[start : start + per_file])
            for cut in range(0, len(data), 97):  # flushes that end inside records
                fh.write(data[cut : cut + 97])
                fh.flush()
                if pause:
                    time.sleep(pause)


def as_tuples(packets: list[RawPacket]) -> list[tuple[float, bytes]]:
    return [(p.ts, p.data) for p in packets]


def test_the_reader_follows_files_as_they_grow_and_rotate(tmp_path: Path) -> None:
    packets = source()
    spool_dir = tmp_path / "spool"
    spool_dir.mkdir()
    writer = threading.Thread(
        target=write_files, args=(spool_dir, records(packets), 7, 0.0005), daemon=True
    )
    written = tmp_path / "w.pcap"
    spool = Spool(str(spool_dir), 10_000_000, writer.is_alive, PcapStream, str(written))
    writer.start()
    got: list[RawPacket] = []
    for pkt in spool.packets(0.05):
        if pkt is not None:
            got.append(pkt)
    spool.finish()
    assert len(spool_files(str(spool_dir))) <= 1 + len(packets) // 7
    assert as_tuples(got) == as_tuples(packets)
    assert [p.number for p in got] == list(range(1, len(packets) + 1))
    assert spool.discarded_packets == 0 and not spool.findings and spool.error is None
    with open_capture(str(written)) as back:
        assert as_tuples(list(back)) == as_tuples(packets)


def test_a_full_spool_discards_the_oldest_unread_files_and_says_so(tmp_path: Path) -> None:
    packets = source()
    recs = records(packets)
    spool_dir = tmp_path / "spool"
    spool_dir.mkdir()
    write_files(spool_dir, recs, 5)  # the tool ran ahead: every file written, none read
    total = sum(len(r) for r in recs)
    written = tmp_path / "w.pcap"
    spool = Spool(str(spool_dir), total // 3, lambda: False, PcapStream, str(written))
    spool.keep()
    # behind by more than the bound before it acted, and no more than the bound after
    assert spool.max_lag.bytes > total // 3 >= spool.lag().bytes > 0
    got = [p for p in spool.packets(0.05) if p is not None]
    spool.finish()
    (found,) = spool.findings
    assert found.code == "capture.spool-overrun"
    assert f"{spool.discarded_packets} packets" in found.message
    assert spool.discarded_packets > 0
    assert len(got) + spool.discarded_packets == len(packets)
    # what was read keeps its number in the capture: the discarded files leave a gap
    assert [(p.number, p.ts, p.data) for p in got] == [
        (n, p.ts, p.data) for n, p in enumerate(packets, 1) if n in {q.number for q in got}
    ]
    assert got[-1].number == len(packets)
    with open_capture(str(written)) as back:  # -w has them all
        assert as_tuples(list(back)) == as_tuples(packets)


def tools_writing(directory: str) -> list[int]:
    """Processes whose command line names `directory` (the tool writing the spool)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if directory.encode() in args:
            found.append(int(pid))
    return found


def test_close_leaves_no_spool_and_no_tool(tmp_path: Path) -> None:
    capture = LiveCapture("lo", "tcp port 9", "tcpdump", spool_dir=str(tmp_path))
    capture.start()
    directory = capture.directory
    assert directory is not None and os.path.isdir(directory)
    assert tools_writing(directory)
    capture.stop()
    assert [p for p in capture.packets(0.05) if p is not None] == []
    stats = capture.close()
    assert not os.path.exists(directory) and not tools_writing(directory)
    assert stats.tool_captured == stats.decoded == 0
    assert os.listdir(tmp_path) == []


def test_a_killed_live_takes_its_tool_along_and_the_next_removes_its_spool(
    tmp_path: Path,
) -> None:
    import signal
    import subprocess
    import sys

    def start() -> tuple[subprocess.Popen[bytes], str]:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "amqpscope.cli", "live", "lo", "-f", "tcp port 9"),
                *("--spool-dir", str(tmp_path), "--json"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert proc.stderr is not None
        line = proc.stderr.readline().decode()
        assert "capturing on" in line, line
        return proc, line.rsplit(" in ", 1)[1].strip()

    proc, directory = start()
    tool = tools_writing(directory)
    assert tool
    proc.kill()  # SIGKILL: nothing of ours runs, the kernel ends the tool (PR_SET_PDEATHSIG)
    proc.wait(10)
    deadline = time.monotonic() + 10
    while tools_writing(directory) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not tools_writing(directory)
    assert os.path.isdir(directory)  # left behind: no one could remove it
    again, _ = start()
    assert not os.path.exists(directory)  # the next live removed the dead one's spool
    again.send_signal(signal.SIGINT)
    assert again.wait(20) == 0
    assert os.listdir(tmp_path) == []


def _ping_pong(port: int, rounds: int) -> None:
    """A TCP connection on lo whose client sends 40 bytes and waits for them back, `rounds`
    times: two packets a round at least (nothing for TCP to coalesce)."""
    import socket

    server = socket.create_server(("127.0.0.1", port))
    peer = socket.create_connection(("127.0.0.1", port))
    conn, _ = server.accept()

    def echo() -> None:
        while data := conn.recv(65536):
            conn.sendall(data)

    echoer = threading.Thread(target=echo)
    echoer.start()
    for _ in range(rounds):
        peer.sendall(b"x" * 40)
        got = b""
        while len(got) < 40:
            got += peer.recv(40 - len(got))
    peer.close()
    echoer.join(30)
    conn.close()
    server.close()


def test_tcpdump_holds_a_burst_while_starved_and_hands_over_the_last_packets(
    tmp_path: Path,
) -> None:
    """tcpdump's ring (no --immediate-mode: packed TPACKET_V3 blocks) holds thousands of
    packets while tcpdump gets no CPU (SIGSTOP); the immediate mode's ring, a 64 KiB slot a
    packet on lo, held about a thousand. And the packets of the last moment before a stop are
    handed over and spooled, not lost in a block not yet full."""
    import signal
    import socket

    with socket.socket() as probe:  # a free port
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    capture = LiveCapture("lo", f"tcp port {port}", "tcpdump", spool_dir=str(tmp_path))
    capture.start()
    assert capture.backend is not None
    command = capture.backend.command()  # type: ignore[attr-defined]
    assert "--immediate-mode" not in command and "-B" in command
    tool = capture.backend.proc  # type: ignore[attr-defined]
    os.kill(tool.pid, signal.SIGSTOP)
    try:
        _ping_pong(port, 3_000)
    finally:
        os.kill(tool.pid, signal.SIGCONT)
    time.sleep(0.5)
    last = time.time()
    _ping_pong(port, 1)  # the last moment: stopped at once
    capture.stop()
    got = [p for p in capture.packets(0.05) if p is not None]
    stats = capture.close()
    assert stats.kernel_drops == 0
    assert len(got) == stats.decoded == stats.tool_captured
    assert len(got) > 6_000  # enough to overflow the old ring
    assert any(p.ts >= last and b"x" * 40 in p.data for p in got)  # the last round, spooled
