"""The amqpscope command line run as a user runs it (a child process of this python), for the
tests that read its output whole."""

from __future__ import annotations

import subprocess
import sys


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """`amqpscope ARGS`, which must exit 0 (else its stderr is the failure's message)."""
    done = subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done
