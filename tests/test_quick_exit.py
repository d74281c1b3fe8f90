"""Run as the program, `read`, `summary`, `export` and `schema` end the process without the
interpreter's teardown (`cli.common.Program`), and say all they said before: every byte of stdout
and stderr, and the exit status. In-process callers (tests) keep the ordinary SystemExit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from amqpscope.cli import main

ROOT = Path(__file__).resolve().parent.parent
CAPTURE = str(ROOT / "captures" / "091-publish-consume.pcap")

#: the CLI as `python -m amqpscope.cli` runs it, with an atexit hook that says when teardown ran
PROGRAM = (
    "import atexit, runpy, sys\n"
    "atexit.register(lambda: print('teardown', file=sys.stderr))\n"
    "sys.argv = ['amqpscope', *sys.argv[1:]]\n"
    "runpy.run_module('amqpscope.cli', run_name='__main__')\n"
)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROGRAM, *args], capture_output=True, text=True, cwd="/"
    )


def test_a_command_that_ends_quickly_says_everything() -> None:
    for args in (["read", "--json", CAPTURE], ["summary", CAPTURE], ["schema", "frame"]):
        result = run(*args)
        expected = CliRunner().invoke(main, args)
        assert result.returncode == expected.exit_code == 0
        assert result.stdout == expected.stdout
        assert "teardown" not in result.stderr  # ended without it


def test_failures_keep_their_status_and_line() -> None:
    missing = run("summary", "/nonexistent.pcap")
    assert missing.returncode == 1
    assert missing.stderr.startswith("amqpscope: ") and "teardown" not in missing.stderr
    usage = run("summary")
    assert usage.returncode == 2 and "Usage:" in usage.stderr


def test_other_commands_and_in_process_callers_tear_down_as_before() -> None:
    assert run("--help").stderr == "teardown\n"
    code = (
        "import sys\n"
        "from amqpscope.cli import main\n"
        "try:\n"
        "    main(['schema', 'frame'])\n"
        "except SystemExit as exc:\n"
        "    print('exit', exc.code, file=sys.stderr)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stderr == "exit 0\n"
