"""Traffic recorded now, from the broker `make test` started: framed as its scenario says.

The bundled captures were recorded once; this records a few scenarios again in this run (real
RabbitMQ, pika, Proton, tcpdump), so the suite also proves itself on traffic nobody has seen.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.oracle import TSHARK, tshark_frames, visible_to_wireshark
from tests.test_ground_truth import check_counts, scenario

RECORDER = Path(__file__).resolve().parent.parent / "captures" / "record.py"
FRESH = (
    "091-ack-nack-reject",
    "091-confirms-return",
    "10-outcomes",
    "10-peer-to-peer",
    "091-tls12",  # decrypted with the key log the recording wrote beside it
)

pytestmark = pytest.mark.broker


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fresh")
    result = subprocess.run(
        [sys.executable, str(RECORDER), "--no-check", "--out", str(out), "--only", *FRESH],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return out


@pytest.mark.parametrize("name", FRESH)
def test_fresh_capture_matches_its_ground_truth(recorded: Path, name: str) -> None:
    meta, frames = scenario(recorded / f"{name}.json")
    assert check_counts(meta, frames) >= 2


@pytest.mark.skipif(TSHARK is None, reason="tshark is not installed (make test installs it)")
@pytest.mark.parametrize("name", FRESH)
def test_fresh_capture_matches_wireshark(recorded: Path, name: str) -> None:
    meta, frames = scenario(recorded / f"{name}.json")
    decode_as = (5673,) if meta["port"] == 5673 else ()
    theirs = tshark_frames(str(recorded / meta["file"]), decode_as)
    mine = [(f.packet, f.name) for f in visible_to_wireshark(frames)]
    assert theirs and set(theirs) <= set(mine)
    assert {n for n in set(mine) - set(theirs)} <= {(p, "protocol-header") for p, _ in mine}
