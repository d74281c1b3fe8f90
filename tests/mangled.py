"""Reading mangled log lines in the tests: which lines became frames and which findings, and
`amqpscope read`'s output under each warning filter (a line must read the same whatever -W
says)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from amqpscope.logs.reader import LogReader


def read(fmt: str, lines: list[str]) -> tuple[list[int], dict[int, str]]:
    """The lines read as frames, and the lines findings name (with their codes)."""
    reader = LogReader("mangled.log", fmt)
    frames = [
        r.source["line"] for n, line in enumerate(lines, 1) for r in reader.feed(line + "\n", n)
    ]
    frames += [r.source["line"] for r in reader.flush()]
    reader.finish()
    named = {}
    for found in reader.findings:
        m = re.match(r"mangled\.log:(\d+): ", found.message)
        if m is not None:
            named[int(m.group(1))] = found.code
    return frames, named


def read_under_each_w(log: Path) -> list[tuple[str, str]]:
    """`amqpscope read LOG`'s (stdout, stderr) under `-W default` and `-W error`, each run
    checked to exit 0 and to print no warning."""
    outputs = []
    for flag in ("default", "error"):
        done = subprocess.run(
            [sys.executable, "-W", flag, "-m", "amqpscope.cli", "read", str(log)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert "Warning" not in done.stderr, done.stderr
        outputs.append((done.stdout, done.stderr))
    return outputs
