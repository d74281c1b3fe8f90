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

# Each pane gets a tmux server of its own (-L): no race with a server that is shutting down after
# the previous test's session, nor with anyone else's tmux.
pytestmark = pytest.mark.skipif(
    TMUX is None, reason="tmux is not installed (make test installs it)"
)


def tmux(session: str, *args: str) -> list[str]:
    assert TMUX is not None
    return [TMUX, "-L", session, *args]


def in_terminal(args: list[str], width: int, height: int = 120) -> tuple[str, str]:
    """Run amqpscope in a tmux pane of `width` columns; return the pane's text, plain and with
    its colour escapes."""
    session = f"amqpscope-{uuid.uuid4().hex[:8]}"
    command = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "amqpscope.cli", *args])
    done = f"__done_{session}__"
    script = f"cd {shlex.quote(str(ROOT))} && {command}; echo {done}; sleep 60"
    subprocess.run(
        tmux(
            session, "new-session", "-d", "-s", session, "-x", str(width), "-y", str(height), script
        ),
        check=True,
        timeout=30,
    )
    try:
        deadline = time.monotonic() + 60
        plain = ""
        while time.monotonic() < deadline:
            plain = subprocess.run(
                tmux(session, "capture-pane", "-p", "-t", session, "-S", "-"),
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            if done in plain:
                break
            time.sleep(0.2)
        coloured = subprocess.run(
            tmux(session, "capture-pane", "-p", "-e", "-t", session, "-S", "-"),
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    finally:
        subprocess.run(tmux(session, "kill-session", "-t", session), check=False, timeout=30)
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


# -- the progress bar: on a terminal for a long file, transient; never piped, never for JSON ------

BAR = "reading big.pcap"


@pytest.fixture(scope="module")
def big_capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """300 copies of a recorded capture (46,200 packets, about 6 MB), made at run time: long
    enough to read that the bar appears (it waits half a second)."""
    from tests.bigcapture import CAPTURES, multiply

    path = tmp_path_factory.mktemp("progress") / "big.pcap"
    multiply(CAPTURES / "091-qos-prefetch.pcap", path, 300)
    return path


def watch_terminal(command: str, width: int = 120, height: int = 40) -> tuple[list[str], str]:
    """Run a shell command line in a tmux pane; return what the pane showed each time it was
    looked at while the command ran, and the pane at the end."""
    session = f"amqpscope-{uuid.uuid4().hex[:8]}"
    done = f"__done_{session}__"
    script = f"cd {shlex.quote(str(ROOT))} && {command}; echo {done}; sleep 120"
    subprocess.run(
        tmux(
            session, "new-session", "-d", "-s", session, "-x", str(width), "-y", str(height), script
        ),
        check=True,
        timeout=30,
    )
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            pane = subprocess.run(
                tmux(session, "capture-pane", "-p", "-t", session, "-S", "-"),
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            seen.append(pane)
            if done in pane:
                break
            time.sleep(0.05)
    finally:
        subprocess.run(tmux(session, "kill-session", "-t", session), check=False, timeout=30)
    assert done in seen[-1], seen[-1][-2000:]
    return seen[:-1], seen[-1].split(done)[0]


def amqpscope_line(*args: str) -> str:
    return " ".join(shlex.quote(a) for a in [sys.executable, "-m", "amqpscope.cli", *args])


def test_progress_bar_on_a_long_file_then_gone(big_capture: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    seen, final = watch_terminal(amqpscope_line("export", str(big_capture), "-o", str(out)), 100)
    bars = [line for pane in seen for line in pane.splitlines() if BAR in line]
    assert bars, "no progress bar while a 6 MB capture was read"
    shares = [int(line.split("%")[0].split()[-1]) for line in bars]
    assert shares == sorted(shares) and all(0 <= s <= 100 for s in shares)
    assert all(len(line.rstrip()) < 100 for line in bars)  # one line, never wrapped
    assert BAR not in final and "%" not in final  # transient: nothing of it left
    assert json.loads(out.read_text())["capture"]["frames"] > 0


def test_no_progress_bar_when_piped_or_for_json(big_capture: Path) -> None:
    big = str(big_capture)
    command = " ; ".join(
        [
            amqpscope_line("summary", "--all", big) + " | tail -n 1",  # stdout piped
            amqpscope_line("read", "--json", "-Y", 'name == "no.such"', big),  # JSON
            amqpscope_line("export", big) + " > /dev/null",  # JSON to stdout (redirected)
        ]
    )
    seen, final = watch_terminal(command, 120)
    assert not any(BAR in pane for pane in seen)
    assert "prefetch-saturated  c300" in final  # the piped summary did run to its end
