"""A frame-trace log compressed with xz or bzip2 reads as its gzip'd copy does (by content, not
name), and damage is reported as gzip's is: a cut-short stream is a finding after the frames
before it, a stream whose start does not decompress is one line and exit 1."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
LOG = CAPTURES / "log-proton-broker.log"
PACKERS: dict[str, Callable[[bytes], bytes]] = {
    "gz": gzip.compress,
    "xz": lzma.compress,
    "bz2": bz2.compress,
}
NAMES = {"gz": "gzip", "xz": "xz", "bz2": "bzip2"}


def amqpscope(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", *args], capture_output=True, timeout=120
    )


def frames(done: subprocess.CompletedProcess[bytes]) -> list[dict]:
    """The records without their `source` (the file name differs)."""
    assert done.returncode == 0, done.stderr
    out = [json.loads(line) for line in done.stdout.splitlines()]
    for record in out:
        record.pop("source", None)
    return out


@pytest.mark.parametrize("kind", ["xz", "bz2"])
def test_compressed_log_reads_as_the_plain_one(tmp_path: Path, kind: str) -> None:
    packed = tmp_path / "proton.data"  # named like nothing: told by content
    packed.write_bytes(PACKERS[kind](LOG.read_bytes()))
    expected = frames(amqpscope("read", str(LOG), "--json"))
    assert expected
    assert frames(amqpscope("read", str(packed), "--json")) == expected
    done = amqpscope("diagnose", str(packed))
    assert done.returncode in (0, 3) and b"Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("kind", ["gz", "xz", "bz2"])
def test_cut_short_compressed_log_is_a_finding(tmp_path: Path, kind: str) -> None:
    """Cut halfway (copied while written): the frames before the cut, and a finding. (Long
    enough that bzip2's first 900 kB block is whole before the cut: nothing comes out of a
    block cut short.)"""
    data = PACKERS[kind](LOG.read_bytes() * (1 + (3 << 20) // LOG.stat().st_size))
    cut = tmp_path / f"cut.log.{kind}"
    cut.write_bytes(data[: len(data) // 2])
    done = amqpscope("read", str(cut), "--json")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(b"\n") > 0
    said = f"log.cut-line: {cut}: the {NAMES[kind]}-compressed log is cut short"
    assert said in done.stderr.decode(), done.stderr


@pytest.mark.parametrize("kind", ["gz", "xz", "bz2"])
def test_damaged_compressed_log_is_one_line_and_exit_1(tmp_path: Path, kind: str) -> None:
    data = bytearray(PACKERS[kind](LOG.read_bytes()))
    data[24:64] = bytes(40)
    bad = tmp_path / f"bad.log.{kind}"
    bad.write_bytes(bytes(data))
    done = amqpscope("read", str(bad), "--json")
    assert (done.returncode, done.stdout) == (1, b""), done.stderr
    err = done.stderr.decode().splitlines()
    assert len(err) == 1 and str(bad) in err[0] and "Traceback" not in err[0], err
    if kind != "gz":  # gzip's is the capture reader's, as before
        assert f"the {NAMES[kind]}-compressed data is damaged" in err[0]


def test_compressed_text_in_no_format_says_it_was_unpacked(tmp_path: Path) -> None:
    notes = tmp_path / "notes.xz"
    notes.write_bytes(lzma.compress(b"hello\nthis is not a frame trace\n"))
    done = amqpscope("read", str(notes))
    assert done.returncode == 1
    err = done.stderr.decode().splitlines()
    assert len(err) == 1 and "(after unxz)" in err[0], err
