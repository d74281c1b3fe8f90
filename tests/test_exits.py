"""Errors and exits as the help says them (issue 40, item 8): an input that cannot be read, a
capture or a --keylog, is one line and exit 1 (a file without read permission was click's
four-line usage error and exit 2, a missing --keylog too); a selection that matches nothing says
so on stderr (it printed nothing, exit 0, as a capture without AMQP would look)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from amqpscope.capture.files import open_capture
from amqpscope.cli import main
from amqpscope.dissect import Dissector

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
CAPTURE = str(CAPTURES / "091-get.pcap")
COMMANDS = ["read", "summary", "export", "diagnose"]


def records_in(path: str) -> int:
    """The records (frames and TCP ends) amqpscope reads in `path`, as the decoder counts them."""
    with open_capture(path) as capture:
        return sum(1 for _ in Dissector().run(capture))


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A folder anyone may enter (pytest's tmp_path is under a folder only its owner may: a
    file in it could not even be looked at, which is not the case tested)."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="amqpscope-exits-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def unprivileged() -> Iterator[None]:
    """Without root's power to read any file (root: this process as nobody, its saved user id
    still root to come back; the modules a run needs loaded before)."""
    if os.geteuid() != 0:
        yield
        return
    import click._textwrap  # noqa: F401 (click's usage error imports it as it prints)

    for command in COMMANDS:
        run(command, CAPTURE)
    os.setresgid(65534, 65534, 0)
    os.setresuid(65534, 65534, 0)
    try:
        yield
    finally:
        os.setresuid(0, 0, 0)
        os.setresgid(0, 0, 0)


@pytest.mark.parametrize("command", COMMANDS)
def test_a_file_without_read_permission_is_one_line_and_exit_1(
    command: str, open_dir: Path
) -> None:
    locked = open_dir / "locked.pcap"
    locked.write_bytes(Path(CAPTURE).read_bytes())
    locked.chmod(0)
    with unprivileged():
        code, _, err = run(command, str(locked))
    assert (code, err) == (1, f"amqpscope: {locked}: permission denied\n")


@pytest.mark.parametrize("command", COMMANDS)
def test_a_keylog_that_cannot_be_read_is_one_line_and_exit_1(
    command: str, tmp_path: Path, open_dir: Path
) -> None:
    missing = tmp_path / "keys.log"
    code, _, err = run(command, CAPTURE, "--keylog", str(missing))
    assert (code, err) == (1, f"amqpscope: --keylog {missing}: no such file\n")
    code, _, err = run(command, CAPTURE, "--keylog", str(tmp_path))
    assert code == 1 and err.startswith(f"amqpscope: --keylog {tmp_path}: ")
    assert len(err.splitlines()) == 1
    locked = open_dir / "locked.log"
    locked.write_text("CLIENT_RANDOM 00 00\n")
    locked.chmod(0)
    capture = open_dir / "capture.pcap"  # one the unprivileged user may read, wherever the tree is
    capture.write_bytes(Path(CAPTURE).read_bytes())
    capture.chmod(0o644)
    with unprivileged():
        code, _, err = run(command, str(capture), "--keylog", str(locked))
    assert code == 1 and err.startswith(f"amqpscope: --keylog {locked}: ")
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--conn", "99"], "no frame matched --conn 99\n"),
        (
            ["--around", "9999"],
            f"no frame matched --around 9999; the last frame is {records_in(CAPTURE)}\n",
        ),
        (["--json", "-Y", 'name == "nope"'], "no frame matched -Y 'name == \"nope\"'\n"),
    ],
)
def test_a_read_selection_that_matched_nothing_says_so(args: list[str], said: str) -> None:
    code, out, err = run("read", CAPTURE, *args)
    assert (code, out, err) == (0, "", f"amqpscope: {said}")


def test_a_read_selection_that_matched_says_nothing() -> None:
    code, out, err = run("read", CAPTURE, "--conn", "1", "--around", "30", "--context", "1")
    assert code == 0 and len(out.splitlines()) == 4 and err == ""  # its header and 3 frames


def test_a_report_of_nothing_matched_says_so(tmp_path: Path) -> None:
    pytest.importorskip("bokeh")
    out = tmp_path / "report.html"
    code, _, err = run("report", CAPTURE, "-o", str(out), "--conn", "99")
    assert code == 0 and out.stat().st_size > 1000
    read = records_in(CAPTURE)
    assert err == f"amqpscope: no frame matched --conn 99 (of {read} read): the report lists none\n"
    code, _, err = run("report", CAPTURE, "-o", str(out), "--conn", "1", "--force")
    assert (code, err) == (0, "")


def test_the_help_says_what_live_does_on_ctrl_c() -> None:
    """live ends on Ctrl-C with 0 (tests/test_live_agrees.py runs it); the group's help
    promised 130 for every command, live's own said nothing."""
    _, top, _ = run("--help")
    assert "(live: Ctrl-C is how it ends, 0;" in " ".join(top.split())
    _, own, _ = run("live", "--help")
    assert "exit 0; a second Ctrl-C gives up at once, exit 130" in " ".join(own.split())
