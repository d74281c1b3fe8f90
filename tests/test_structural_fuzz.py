"""The structure-aware mutation fuzzer (`tools/fuzz.py`), a short deterministic run, and every
input it ever failed on (`tests/regressions/`), through the dissector, the tracker, the NDJSON
and timeline renderers and the summary in this process. The long run is `make fuzz`.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from amqpscope.capture.files import open_capture
from amqpscope.dissect import Dissector
from tests.scripts import load_tool

ROOT = Path(__file__).resolve().parent.parent
REGRESSIONS = sorted((ROOT / "tests" / "regressions").glob("*.pcap*"))


fuzz = load_tool("fuzz")


@pytest.fixture(scope="module")
def seeds() -> list[Any]:
    return fuzz.seeds()


@pytest.mark.parametrize("path", REGRESSIONS, ids=[p.name for p in REGRESSIONS])
def test_every_kept_failure_now_runs(path: Path) -> None:
    assert fuzz.run_one(path) > 0


def test_a_short_run_fails_nothing() -> None:
    done, failures = fuzz.fuzz(count=120, seed=28)
    assert done == 120
    assert failures == [], "\n".join(f"{f.index} {f.what}: {f.error}" for f in failures)


def test_mutants_are_deterministic(seeds: list[Any]) -> None:
    for index in (0, 7, 99):
        assert fuzz.mutant(seeds, 5, index)[1] == fuzz.mutant(seeds, 5, index)[1]


def test_structural_mutants_reach_the_field_checks(seeds: list[Any], tmp_path: Path) -> None:
    """The fuzzer is no byte shuffler: its 1.0 mutants make well-framed performatives whose
    fields have the wrong types (the decoder says so), and 0-9-1 ones damage tables."""
    codes: Counter[str] = Counter()
    rng = random.Random(28)
    ones = [s for s in seeds if s.path.name in ("10-send-receive.pcap", "091-publish-consume.pcap")]
    for n in range(60):
        data = fuzz.structural(rng, ones[n % 2])
        if data is None:
            continue
        path = tmp_path / f"{n}.pcap"
        path.write_bytes(data)
        with open_capture(path) as capture:
            for frame in Dissector().run(capture):
                codes.update(f.code for f in frame.findings)
    assert codes["amqp10.bad-field-type"] >= 3, codes
    assert any(c.startswith("amqp091.") for c in codes), codes


def test_a_written_capture_reads_back_as_its_frames(seeds: list[Any], tmp_path: Path) -> None:
    (seed,) = [s for s in seeds if s.path.name == "10-send-receive.pcap"]
    (conv,) = seed.conversations
    path = tmp_path / "written.pcap"
    path.write_bytes(fuzz.write_pcap(conv.frames))
    with open_capture(path) as capture:
        frames = [f for f in Dissector().run(capture) if f.data]
    assert [(f.direction == "c2s", bytes(f.data)) for f in frames] == conv.frames
    assert not [f for frame in frames for f in frame.findings if f.severity == "error"]


@pytest.mark.parametrize(
    ("name", "layer"),
    [("10-websocket.pcap", "websocket."), ("091-tls12.pcap", "tls."), ("10-tls.pcap", "tls.")],
)
def test_layer_mutants_damage_tls_records_and_websocket_frames(
    seeds: list[Any], tmp_path: Path, name: str, layer: str
) -> None:
    (seed,) = [s for s in seeds if s.path.name == name]
    rng = random.Random(28)
    codes: Counter[str] = Counter()
    for n in range(12):
        path = tmp_path / f"{n}.pcap"
        path.write_bytes(fuzz.layered(rng, seed))
        dissector = Dissector()
        keys = seed.path.with_suffix(".keys")
        if keys.exists():
            dissector.context.keylog = fuzz.load_keylog(keys)
        with open_capture(path) as capture:
            for frame in dissector.run(capture):
                codes.update(f.code for f in frame.findings)
        codes.update(f.code for f in dissector.findings)
        assert fuzz.run_one(path, keys if keys.exists() else None, seed.links, seed.queues) >= 0
    assert sum(n for c, n in codes.items() if c.startswith(layer)) >= 3, codes
    assert not codes["link.malformed"], codes  # the damage is in the layer, not below it


@pytest.mark.parametrize("path", REGRESSIONS, ids=[p.name for p in REGRESSIONS])
def test_kept_failures_from_the_command_line(path: Path) -> None:
    """Each ended in "internal error" once; now every command finishes and `read` prints every
    frame the dissector finds, those after the damage included."""
    from click.testing import CliRunner

    from amqpscope.cli import main

    with open_capture(path) as capture:
        frames = sum(1 for _ in Dissector().run(capture))
    runner = CliRunner()
    commands = (
        ["read", "--json"],
        ["read", "--color", "never"],
        ["read", "-V", "-x"],
        ["summary"],
        ["export"],
        ["diagnose"],
        ["diagnose", "--json"],
    )
    for command in commands:
        result = runner.invoke(main, [*command, str(path)], catch_exceptions=False)
        assert result.exit_code == 0 and "internal error" not in result.stderr, result.stderr
        if command == ["read", "--json"]:
            assert len(result.stdout.splitlines()) == frames
