"""Tried as a person would: the timeline and summary in a real terminal (tmux) at 80 and 200
columns, the pane captured and read back."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TMUX = shutil.which("tmux")

pytestmark = pytest.mark.skipif(
    TMUX is None, reason="tmux is not installed (make test installs it)"
)


def in_terminal(args: list[str], width: int, height: int = 120) -> tuple[str, str]:
    """Run amqpscope in a tmux pane of `width` columns; return the pane's text, plain and with
    its colour escapes."""
    session = f"amqpscope-{uuid.uuid4().hex[:8]}"
    command = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "amqpscope.cli", *args])
    done = f"__done_{session}__"
    script = f"cd {shlex.quote(str(ROOT))} && {command}; echo {done}; sleep 60"
    assert TMUX is not None
    subprocess.run(
        [TMUX, "new-session", "-d", "-s", session, "-x", str(width), "-y", str(height), script],
        check=True,
        timeout=30,
    )
    try:
        deadline = time.monotonic() + 60
        plain = ""
        while time.monotonic() < deadline:
            plain = subprocess.run(
                [TMUX, "capture-pane", "-p", "-t", session, "-S", "-"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            if done in plain:
                break
            time.sleep(0.2)
        coloured = subprocess.run(
            [TMUX, "capture-pane", "-p", "-e", "-t", session, "-S", "-"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    finally:
        subprocess.run([TMUX, "kill-session", "-t", session], check=False, timeout=30)
    assert done in plain, plain[-2000:]
    return plain.split(done)[0], coloured


@pytest.mark.parametrize("width", [80, 200])
def test_timeline_fits_the_terminal_and_is_coloured(width: int) -> None:
    plain, coloured = in_terminal(["read", "captures/091-channel-errors.pcap"], width)
    lines = [line for line in plain.splitlines() if line.strip()]
    assert lines[0].startswith("c1  127.0.0.1:")  # the legend
    assert all(len(line) <= width for line in lines)
    errors = json.loads((ROOT / "captures/091-channel-errors.json").read_text())["expect"]
    refused = [line for line in lines if "← ch1   channel.close 4" in line]
    assert len(refused) == len(errors["channel_errors"])
    assert "\x1b[" in coloured  # a terminal gets colour
    if width == 80:
        assert any(line.endswith("…") for line in lines)  # long lines cut, not wrapped


@pytest.mark.parametrize("width", [80, 200])
def test_summary_fits_the_terminal(width: int) -> None:
    plain, _ = in_terminal(["summary", "captures/10-peer-to-peer.pcap"], width)
    lines = [line for line in plain.splitlines() if line.strip()]
    assert all(len(line) <= width for line in lines)
    assert any("AMQP 1.0" in line for line in lines)
    assert any("findings (3)" in line for line in lines)


def test_no_colour_when_asked() -> None:
    _, coloured = in_terminal(["read", "--color", "never", "captures/091-get.pcap"], 120)
    body = coloured.split("__done_")[0]
    assert "\x1b[1m" not in body and "\x1b[31m" not in body
