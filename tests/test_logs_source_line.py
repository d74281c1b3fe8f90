"""`amqpscope read LOG` names the format it reads the log as, and whether its content named it
or `--format` did (issue 42): a `source:` line on standard error, standard output left to the
frames."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus" / "logs"


def read(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", "read", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_format_named_by_the_content() -> None:
    for path, fmt in (
        (ROOT / "captures" / "log-uamqp-broker.log", "uamqp"),
        (CORPUS / "43-goamqp-session.log", "go-amqp"),
        (CORPUS / "02-proton-docker.log", "proton"),
    ):
        done = read(str(path), "--json")
        assert done.returncode == 0, done.stderr
        said = f"amqpscope: source: {path}: log format {fmt}"
        assert done.stderr.splitlines()[0] == f"{said} (named by its content; --format overrides)"
        assert "source:" not in done.stdout


def test_the_format_given() -> None:
    path = ROOT / "captures" / "log-proton-broker.log"
    done = read(str(path), "--format", "router")
    assert done.returncode == 0, done.stderr
    assert f"amqpscope: source: {path}: log format router (--format)" in done.stderr.splitlines()
