"""Run `amqpscope tui` in a real terminal (a tmux pane of its own server) and watch the screen:
what the tmux test and `bench/tui_open.py` share."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TMUX = shutil.which("tmux")
#: what the shell prints once the command has ended: its exit code and the terminal's modes
DONE = "__tui_done__"


class Pane:
    """`amqpscope tui ARGS` in a `width`x`height` tmux pane; after it exits the shell prints
    its exit code and whether the line discipline is back to cooked mode (icanon, echo)."""

    def __init__(self, args: list[str], width: int = 120, height: int = 40, env: str = "") -> None:
        assert TMUX is not None
        self.session = f"amqpscope-tui-{uuid.uuid4().hex[:8]}"
        command = " ".join(
            shlex.quote(a) for a in [sys.executable, "-m", "amqpscope.cli", "tui", *args]
        )
        script = (
            f"cd {shlex.quote(str(ROOT))} && {env} {command}; echo {DONE} rc=$?; "
            "stty -a | tr ' ' '\\n' | grep -E -x -- '-?(icanon|echo)' | tr '\\n' ' '; "
            f"echo; echo {DONE}end; sleep 600"
        )
        self.started = time.monotonic()
        subprocess.run(
            [
                TMUX,
                "-L",
                self.session,
                "new-session",
                "-d",
                "-s",
                self.session,
                "-x",
                str(width),
                "-y",
                str(height),
                script,
            ],
            check=True,
            timeout=30,
        )

    def text(self) -> str:
        assert TMUX is not None
        return subprocess.run(
            [TMUX, "-L", self.session, "capture-pane", "-p", "-t", self.session],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout

    def alternate_screen(self) -> bool:
        assert TMUX is not None
        out = subprocess.run(
            [TMUX, "-L", self.session, "display", "-p", "-t", self.session, "#{alternate_on}"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout
        return out.strip() == "1"

    def keys(self, *keys: str) -> None:
        assert TMUX is not None
        subprocess.run(
            [TMUX, "-L", self.session, "send-keys", "-t", self.session, *keys],
            check=True,
            timeout=30,
        )

    def wait(self, seen: Callable[[str], bool], timeout: float, every: float = 0.1) -> float:
        """Seconds from the start until `seen(screen)`; raises TimeoutError with the screen."""
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.text()
            if seen(screen):
                return time.monotonic() - self.started
            time.sleep(every)
        raise TimeoutError(f"not seen within {timeout}s; the screen:\n{screen}")

    def press(self, key: str, seen: Callable[[str], bool], timeout: float = 30) -> None:
        """Send `key` until `seen(screen)`: a key sent while the app still sets the terminal
        up (its first queries and replies) can be lost, as a person's would be."""
        deadline = time.monotonic() + timeout
        while True:
            self.keys(key)
            try:
                self.wait(seen, min(5.0, max(deadline - time.monotonic(), 0.1)))
                return
            except TimeoutError:
                if time.monotonic() >= deadline:
                    raise

    def close(self) -> None:
        assert TMUX is not None
        subprocess.run([TMUX, "-L", self.session, "kill-server"], check=False, timeout=30)
