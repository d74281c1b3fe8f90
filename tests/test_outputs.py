"""Every command that writes a file keeps one rule (`amqpscope.writing.outputs`): never over one
of its inputs (the same file, through symbolic or hard links; not even with --force), and never
over a file already there unless --force. A device (/dev/null) is written, not replaced. Issue
40, 1."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from amqpscope.cli import main
from amqpscope.writing.outputs import refusal

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
CAPTURE = "091-get.pcap"
LOG = "log-pika-broker.log"


def copy(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    target.write_bytes((CAPTURES / name).read_bytes())
    return target


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stderr


#: (a command writing OUT, given its INPUT): each writer of the CLI, and the option it takes
WRITERS = {
    "export": lambda src, out: ["export", src, "-o", out],
    "export --ndjson": lambda src, out: ["export", src, "--ndjson", "-o", out],
    "report": lambda src, out: ["report", src, "-o", out],
    "read -w": lambda src, out: ["read", src, "-w", out],
}


@pytest.mark.parametrize("writer", list(WRITERS))
@pytest.mark.parametrize("through", ["itself", "symlink", "hardlink"])
def test_no_writer_writes_over_its_input(tmp_path: Path, writer: str, through: str) -> None:
    """`export v.pcap -o v.pcap` replaced the capture with JSON, exit 0; now exit 2, the input
    untouched, whichever name reaches it, and --force does not change that."""
    source = copy(tmp_path, CAPTURE)
    before = source.read_bytes()
    out = source
    if through != "itself":
        out = tmp_path / "other-name.pcap"
        if through == "symlink":
            out.symlink_to(source)
        else:
            os.link(source, out)
    for force in ([], ["--force"]):
        code, err = run(*WRITERS[writer](str(source), str(out)), *force)
        assert code == 2, (writer, through, force, err)
        assert "that is the input being read" in err and len(err.splitlines()) == 1
        assert source.read_bytes() == before


def test_a_log_is_not_overwritten_by_its_export(tmp_path: Path) -> None:
    source = copy(tmp_path, LOG)
    before = source.read_bytes()
    code, err = run("export", str(source), "--ndjson", "-o", str(source))
    assert code == 2 and "input being read" in err
    assert source.read_bytes() == before


def test_the_key_log_is_an_input_too(tmp_path: Path) -> None:
    keys = tmp_path / "keys.log"
    keys.write_text("CLIENT_RANDOM 00 00\n")
    code, err = run("export", str(CAPTURES / CAPTURE), "--keylog", str(keys), "-o", str(keys))
    assert code == 2 and "input being read" in err
    assert keys.read_text() == "CLIENT_RANDOM 00 00\n"


@pytest.mark.parametrize("writer", list(WRITERS))
def test_an_existing_file_is_overwritten_only_with_force(tmp_path: Path, writer: str) -> None:
    out = tmp_path / "mine.txt"
    out.write_text("my notes\n")
    code, err = run(*WRITERS[writer](str(CAPTURES / CAPTURE), str(out)))
    assert code == 2, err
    assert "exists; --force overwrites it" in err and len(err.splitlines()) == 1
    assert out.read_text() == "my notes\n"
    if writer == "report":
        pytest.importorskip("bokeh")
    code, err = run(*WRITERS[writer](str(CAPTURES / CAPTURE), str(out)), "--force")
    assert code == 0, err
    assert out.read_bytes() != b"my notes\n" and out.stat().st_size > 100


def test_live_w_keeps_the_rule_before_it_captures(tmp_path: Path) -> None:
    """Refused before any capture starts (no root, no interface needed for the refusal)."""
    out = tmp_path / "session.pcap"
    out.write_text("my notes\n")
    code, err = run("live", "lo", "-w", str(out))
    assert code == 2 and "exists; --force overwrites it" in err
    assert out.read_text() == "my notes\n"
    keys = tmp_path / "keys.log"
    keys.write_text("CLIENT_RANDOM 00 00\n")
    code, err = run("live", "lo", "--keylog", str(keys), "-w", str(keys), "--force")
    assert code == 2 and "input being read" in err


def test_a_device_is_written_and_a_new_file_made(tmp_path: Path) -> None:
    code, err = run("export", str(CAPTURES / CAPTURE), "-o", os.devnull)
    assert code == 0, err
    new = tmp_path / "new.json"
    code, err = run("export", str(CAPTURES / CAPTURE), "-o", str(new))
    assert code == 0, err
    assert new.stat().st_size > 100


def test_the_rule_in_words(tmp_path: Path) -> None:
    """`refusal`, the helper the TUI's `w` can share: None when the path may be written."""
    source = copy(tmp_path, CAPTURE)
    assert refusal(str(tmp_path / "new.pcap"), [str(source)]) is None
    assert refusal("-", [str(source)]) is None
    assert refusal(str(source), ["-", None, str(source)], force=True) is not None
    assert refusal(str(source), []) == "that file exists; --force overwrites it"
    assert refusal(str(source), [], force=True) is None
