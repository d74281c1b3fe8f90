"""`amqpscope read -`: a capture on standard input, as `tcpdump -r -` and `tshark -r -` take it.
The same output as from the file (pcap, pcapng with its key log block, gzip), findings with the
same offsets (a pipe cannot tell(); it counts), frames printed as they arrive (a capture still
being written: `tcpdump -U -w - | amqpscope read -`), and one line for what is not a capture."""

from __future__ import annotations

import gzip
import os
import select
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
CLI = [sys.executable, "-m", "amqpscope.cli"]


def run(args: list[str], data: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*CLI, *args], input=data, capture_output=True, timeout=120)


@pytest.mark.parametrize(
    "name", ["091-ack-nack-reject.pcap", "091-tls13-embedded.pcapng", "10-drain.pcap"]
)
def test_stdin_reads_as_the_file_does(name: str) -> None:
    path = CAPTURES / name
    for args in (["read", "--json"], ["summary", "--json"]):
        piped = run([*args, "-"], path.read_bytes())
        direct = run([*args, str(path)])
        assert piped.returncode == direct.returncode == 0
        assert piped.stdout == direct.stdout and piped.stdout.count(b"\n") > 10
        assert piped.stderr.replace(b"-: ", b"") == direct.stderr.replace(f"{path}: ".encode(), b"")
    zipped = run(["read", "--json", "-"], gzip.compress(path.read_bytes()))
    assert zipped.stdout == run(["read", "--json", str(path)]).stdout


def test_a_cut_pcapng_gives_the_same_offsets(tmp_path: Path) -> None:
    data = (CAPTURES / "091-tls13-embedded.pcapng").read_bytes()
    cut = tmp_path / "cut.pcapng"
    cut.write_bytes(data[: len(data) * 2 // 3 + 5])
    piped, direct = (
        run(["read", "--json", "-"], cut.read_bytes()),
        run(["read", "--json", str(cut)]),
    )
    assert piped.stdout == direct.stdout
    assert b"offset" in direct.stderr
    assert piped.stderr.replace(b"-: ", b"") == direct.stderr.replace(f"{cut}: ".encode(), b"")


def test_frames_come_out_while_the_capture_is_still_being_written() -> None:
    data = (CAPTURES / "091-ack-nack-reject.pcap").read_bytes()
    head, pos, packets = data[:24], 24, []
    while pos < len(data):
        caplen = struct.unpack_from("<I", data, pos + 8)[0]
        packets.append(data[pos : pos + 16 + caplen])
        pos += 16 + caplen
    child = subprocess.Popen(
        [*CLI, "read", "--json", "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        child.stdin.write(head + b"".join(packets[: len(packets) // 2]))
        child.stdin.flush()
        deadline = time.monotonic() + 60
        ready: list = []
        while not ready and time.monotonic() < deadline:  # the writer has not finished
            ready = select.select([child.stdout], [], [], 1)[0]
        assert ready, "no frame printed before the input ended"
        assert child.stdout.readline().startswith(b'{"frame":1,')
    finally:
        child.stdin.close()
        child.wait(timeout=60)
    assert child.returncode == 0


@pytest.mark.parametrize(
    ("data", "says"),
    [(b"junk\n", "not a pcap or pcapng file"), (b"", "the file is empty")],
)
def test_what_is_not_a_capture_is_one_line(data: bytes, says: str) -> None:
    result = run(["read", "-"], data)
    assert result.returncode == 1
    assert result.stderr.decode().splitlines() == [f"amqpscope: -: {says}"] or (
        result.stderr.decode().startswith(f"amqpscope: -: {says}")
        and result.stderr.count(b"\n") == 1
    )


def test_damaged_captures_read_from_a_pipe_as_from_the_file(tmp_path: Path) -> None:
    """Every case of the damaged corpus (`tools/damage.py`): the same frames and the same
    findings (truncated or damaged, at the same offsets) whether the file or a pipe is read."""
    from tests.test_damaged import damage  # tools/damage.py, loaded there

    cases = damage.build(tmp_path)
    assert len(cases) > 10
    for case in cases:
        path = tmp_path / case.file
        piped = run(["read", "--json", "-"], path.read_bytes())
        direct = run(["read", "--json", str(path)])
        assert (piped.returncode, piped.stdout) == (direct.returncode, direct.stdout), case.name
        said = piped.stderr.replace(b"-: ", b"")
        assert said == direct.stderr.replace(f"{path}: ".encode(), b""), case.name


@pytest.mark.parametrize(
    "name", ["091-ack-nack-reject.pcap", "091-tls13-embedded.pcapng", "log-proton-broker.log"]
)
def test_a_fifo_reads_as_the_file_does(tmp_path: Path, name: str) -> None:
    """A named pipe (`mkfifo`, `<(zcat cap.pcap.gz)`) cannot seek either: a whole pcap read from
    one is not "damaged" at its end, and a pcapng's blocks are read, not refused at the first."""
    path = CAPTURES / name
    for data in (path.read_bytes(), path.read_bytes()[: path.stat().st_size * 2 // 3]):
        cut = tmp_path / name
        cut.write_bytes(data)
        fifo = tmp_path / "fifo"
        fifo.unlink(missing_ok=True)
        os.mkfifo(fifo)
        writer = threading.Thread(target=fifo.write_bytes, args=(data,))
        writer.start()
        try:
            piped = run(["read", "--json", str(fifo)])
        finally:
            writer.join(timeout=60)
        direct = run(["read", "--json", str(cut)])
        assert direct.stdout.count(b"\n") > 10
        # a log's records name their file
        out = piped.stdout.replace(str(fifo).encode(), str(cut).encode())
        assert (piped.returncode, out) == (direct.returncode, direct.stdout)
        assert piped.stderr.replace(str(fifo).encode(), str(cut).encode()) == direct.stderr
