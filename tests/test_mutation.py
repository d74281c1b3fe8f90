"""Mutation test: every capture in `captures/`, damaged (bit flips, truncations, inflated length
fields, spliced garbage), read by the command line: each run ends with exit 0, or exit 1 and one
line of error, never a traceback, within a time and a memory bound.

Many runs go in-process, through the same code as the command (click's runner calls `main`);
a sample runs `amqpscope` as a subprocess with a timeout and an address-space limit, so a hang
or a runaway allocation fails the test instead of the machine.
"""

from __future__ import annotations

import random
import resource
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from amqpscope.cli import main

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
FILES = sorted(p for p in CAPTURES.iterdir() if p.suffix in (".pcap", ".pcapng"))
#: the commands a mutated file is read with, in turn
COMMANDS = (["read", "--json"], ["read", "--width", "100"], ["summary"], ["export", "--ndjson"])
#: bounds of a subprocess run
TIMEOUT = 120
ADDRESS_SPACE = 1 << 30  # 1 GiB: an interpreter with amqpscope loaded needs a fraction of it


# -- records: where the packets of a file are, to aim damage at them --------------------------
def records(raw: bytes) -> tuple[str, list[tuple[int, int]]]:
    """("pcap" or "pcapng", [(offset of a record's length field, offset of its data)])."""
    if raw[:4] == b"\x0a\x0d\x0d\x0a":
        endian = "<" if raw[8:12] == b"\x4d\x3c\x2b\x1a" else ">"
        out = []
        pos = 0
        while pos + 12 <= len(raw):
            btype, length = struct.unpack_from(endian + "II", raw, pos)
            if length < 12:
                break
            if btype in (3, 6):
                out.append((pos + 4, pos + (28 if btype == 6 else 12)))
            pos += length
        return "pcapng", out
    endian = "<" if raw[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    out = []
    pos = 24
    while pos + 16 <= len(raw):
        caplen = struct.unpack_from(endian + "I", raw, pos + 8)[0]
        out.append((pos + 8, pos + 16))
        pos += 16 + caplen
    return "pcap", out


def mutations(path: Path) -> list[tuple[str, bytes]]:
    """The damaged versions of one capture, the same on every run."""
    raw = path.read_bytes()
    rng = random.Random(path.name)
    kind, recs = records(raw)
    out = []

    flipped = bytearray(raw)
    for _ in range(12):  # anywhere, headers included
        flipped[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
    out.append(("bit flips", bytes(flipped)))

    flipped = bytearray(raw)
    for _ in range(24):  # in packet data, where the decoders see them
        _, data = rng.choice(recs)
        at = min(data + rng.randrange(40, 400), len(raw) - 1)
        flipped[at] ^= 1 << rng.randrange(8)
    out.append(("bit flips in packets", bytes(flipped)))

    out.append(("truncated", raw[: rng.randrange(24, len(raw))]))

    inflated = bytearray(raw)
    length_at, _ = rng.choice(recs)
    struct.pack_into("<I", inflated, length_at, 0xFFFFFF00 - rng.randrange(256))
    out.append((f"{kind} record length inflated", bytes(inflated)))

    inflated = bytearray(raw)
    for _ in range(6):  # 32-bit fields in packets: IP lengths, TCP numbers, AMQP sizes
        _, data = rng.choice(recs)
        at = min(data + rng.randrange(14, 200), len(raw) - 4)
        struct.pack_into(">I", inflated, at, 0xFFFFFFF0 - rng.randrange(1 << 20))
    out.append(("packet fields inflated", bytes(inflated)))

    if kind == "pcap":  # garbage inside a record, its lengths fixed up: it reaches TCP and AMQP
        length_at, data = rng.choice(recs[len(recs) // 3 :])
        garbage = rng.randbytes(rng.randrange(1, 300))
        at = data + rng.randrange(54, 120)
        spliced = bytearray(raw[:at] + garbage + raw[at:])
        for field in (length_at, length_at + 4):
            old = struct.unpack_from("<I", spliced, field)[0]
            struct.pack_into("<I", spliced, field, old + len(garbage))
        out.append(("garbage spliced into a packet", bytes(spliced)))
    else:  # garbage between blocks
        at = recs[len(recs) // 2][0] - 4
        out.append(("garbage between blocks", raw[:at] + rng.randbytes(77) + raw[at:]))
    return out


def check(code: int, stdout: str, stderr: str, what: str) -> None:
    assert "Traceback" not in stderr and "Traceback" not in stdout, what
    # a decoder that raised is caught by framing and named: that too is a bug here
    assert "amqp.decode-error" not in stdout + stderr, (what, stderr[-500:])
    assert code in (0, 1), (what, code, stderr[-500:])
    if code == 1:
        lines = stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("amqpscope: "), (what, stderr)
    for line in stderr.splitlines():
        assert line.startswith("amqpscope: "), (what, line)


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_mutated_captures_in_process(path: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    for n, (what, data) in enumerate(mutations(path)):
        damaged = tmp_path / f"{n}{path.suffix}"
        damaged.write_bytes(data)
        command = COMMANDS[(n + len(path.name)) % len(COMMANDS)]
        result = runner.invoke(main, [*command, str(damaged)], catch_exceptions=True)
        crashed = result.exception if not isinstance(result.exception, SystemExit) else None
        assert crashed is None, f"{path.name}, {what}: {crashed!r}"
        check(result.exit_code, result.stdout, result.stderr, f"{path.name}, {what}")


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


#: the subprocess sample: (capture, mutation index), spread over formats and kinds of damage
SAMPLE = [
    ("091-large-body.pcap", 1),
    ("10-large-message.pcap", 4),
    ("10-large-message.pcap", 3),
    ("pcapng.pcapng", 3),
    ("pcapng.pcapng", 5),
    ("091-publish-consume.pcap", 5),
    ("10-send-receive.pcap", 0),
    ("nanosecond.pcap", 2),
]


@pytest.mark.parametrize(("name", "index"), SAMPLE)
def test_mutated_captures_as_a_subprocess(name: str, index: int, tmp_path: Path) -> None:
    """The real command, with a timeout and a 1 GiB address-space limit."""
    what, data = mutations(CAPTURES / name)[index]
    damaged = tmp_path / f"damaged{Path(name).suffix}"
    damaged.write_bytes(data)
    command = ["read"] if index % 2 else ["export"]
    proc = subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", *command, str(damaged)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        preexec_fn=_limits,
    )
    check(proc.returncode, proc.stdout, proc.stderr, f"{name}, {what}, {command}")


def test_a_huge_declared_size_costs_nothing(tmp_path: Path) -> None:
    """A pcapng block and a pcap record that claim gigabytes, under the address-space limit:
    one finding each, exit 0."""
    for name in ("pcapng.pcapng", "091-get.pcap"):
        raw = bytearray((CAPTURES / name).read_bytes())
        _, recs = records(bytes(raw))
        struct.pack_into("<I", raw, recs[3][0], 0xFFFFFFF0)
        damaged = tmp_path / name
        damaged.write_bytes(bytes(raw))
        proc = subprocess.run(
            [sys.executable, "-m", "amqpscope.cli", "read", "--json", str(damaged)],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            preexec_fn=_limits,
        )
        check(proc.returncode, proc.stdout, proc.stderr, name)
        assert proc.returncode == 0
        assert "capture.truncated" in proc.stderr or "capture.damaged" in proc.stderr
