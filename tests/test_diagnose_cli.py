"""`amqpscope diagnose` as a user runs it: the report, stdin, the selections, bad and damaged
input; and `read --frames` / `read --around`, which show a diagnosis's evidence."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from amqpscope.cli import main

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
STALLED = CAPTURES / "091-stalled-consumer.pcap"
ERRORS = CAPTURES / "091-channel-errors.pcap"


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", *args],
        input=stdin,
        capture_output=True,
        timeout=120,
    )


def diagnoses(*args: str) -> list[dict[str, Any]]:
    result = CliRunner().invoke(main, ["diagnose", *args, "--json"])
    assert result.exit_code == 0, result.output
    found: list[dict[str, Any]] = json.loads(result.stdout)["diagnoses"]
    return found


def read_json(*args: str) -> list[dict[str, Any]]:
    result = CliRunner().invoke(main, ["read", *args, "--json"])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_report_shows_each_diagnosis_with_its_evidence_as_read_shows_it() -> None:
    result = run("diagnose", str(ERRORS))
    assert result.returncode == 0, result.stderr
    report = result.stdout.decode()
    for diagnosis in diagnoses(str(ERRORS)):
        assert diagnosis["title"] in report
        frames = ",".join(map(str, diagnosis["evidence"]))
        shown = run("read", str(ERRORS), "--frames", frames).stdout.decode().splitlines()
        timeline = [line for line in shown if not line.startswith("c")]  # not the legend
        assert len(timeline) == len(diagnosis["evidence"])
        for line in timeline:
            assert line in report


def test_from_standard_input_the_same_diagnoses() -> None:
    result = run("diagnose", "-", "--json", stdin=STALLED.read_bytes())
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["diagnoses"] == diagnoses(str(STALLED))
    plain = run("diagnose", "-", stdin=STALLED.read_bytes())
    assert plain.returncode == 0 and b"consumer.stalled" in plain.stdout


def test_selections_by_connection_and_time() -> None:
    (stall,) = diagnoses(str(STALLED))
    assert diagnoses(str(STALLED), "--conn", "2") == []
    assert diagnoses(str(STALLED), "--conn", "1") == [stall]
    first = read_json(str(STALLED), "--frames", "1")[0]["ts"]
    begins = stall["start"] - first
    assert diagnoses(str(STALLED), "--to", str(begins - 0.01)) == []
    assert diagnoses(str(STALLED), "--from", str(begins + stall["duration"] + 0.01)) == []
    assert diagnoses(str(STALLED), "--from", str(begins + 1), "--to", str(begins + 2)) == [stall]


def test_no_diagnosis_said_in_words() -> None:
    """Of what was diagnosed: a capture, a log, or a selection of either."""
    result = run("diagnose", str(CAPTURES / "091-publish-consume.pcap"))
    assert result.returncode == 0
    assert result.stdout.decode().startswith("No diagnosis: nothing in this capture ")
    log = run("diagnose", str(CAPTURES / "log-rhea-broker.log"))
    assert log.returncode == 0
    assert log.stdout.decode().startswith("No diagnosis: nothing in this log ")
    some = run("diagnose", str(STALLED), "--conn", "2")
    assert some.stdout.decode().startswith("No diagnosis: nothing in what was selected of ")


def test_a_capture_with_no_amqp_read_says_so_not_that_nothing_looks_wrong() -> None:
    """Another port's traffic, or TLS without its keys: what it held, as read says it (on
    stderr with --json, whose document stays the empty list)."""
    for name in ("non-amqp.pcap", "091-tls12.pcap"):
        path = CAPTURES / name
        said = run("read", str(path)).stderr.decode().replace("amqpscope: ", "")
        assert said.startswith(f"no AMQP in {path}: ")
        result = run("diagnose", str(path))
        assert result.returncode == 0
        assert result.stdout.decode() == said
        as_json = run("diagnose", str(path), "--json")
        assert json.loads(as_json.stdout) == {"diagnoses": []}
        assert f"amqpscope: no AMQP in {path}: " in as_json.stderr.decode()
    keyed = run(
        "diagnose", str(CAPTURES / "091-tls12.pcap"), "--keylog", str(CAPTURES / "091-tls12.keys")
    )
    assert keyed.stdout.decode().startswith("No diagnosis: nothing in this capture ")


def test_unreadable_input_is_one_line_and_exit_1(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"this is not a capture at all")
    for path in (junk, tmp_path / "missing.pcap"):
        result = run("diagnose", str(path))
        assert result.returncode == 1
        assert result.stdout == b""
        assert len(result.stderr.decode().strip().splitlines()) == 1
        assert b"Traceback" not in result.stderr


def test_damaged_capture_gives_what_the_intact_part_supports(tmp_path: Path) -> None:
    data = STALLED.read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[: len(data) * 2 // 3])  # ends inside the stall
    result = run("diagnose", str(cut), "--json")
    assert result.returncode == 0, result.stderr
    assert b"Traceback" not in result.stderr
    found = json.loads(result.stdout)["diagnoses"]
    codes = {d["code"] for d in found}
    assert "consumer.stalled" in codes or "delivery.unacked-at-end" in codes
    flipped = bytearray(data)
    for at in range(200, len(flipped), 97):  # damage inside frames, not just the end
        flipped[at] ^= 0x5A
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(bytes(flipped))
    result = run("diagnose", str(bad))
    assert result.returncode in (0, 1) and b"Traceback" not in result.stderr


def test_read_frames_and_around() -> None:
    assert [r["frame"] for r in read_json(str(STALLED), "--frames", "3,7,5")] == [3, 5, 7]
    assert [r["frame"] for r in read_json(str(STALLED), "--frames", "2-4")] == [2, 3, 4]
    around = read_json(str(STALLED), "--around", "10", "--context", "2")
    assert [r["frame"] for r in around] == [8, 9, 10, 11, 12]
    both = read_json(str(STALLED), "--frames", "1", "--around", "10", "--context", "0")
    assert [r["frame"] for r in both] == [1, 10]
    for bad in ("x", "0", "5-3", ""):
        result = run("read", str(STALLED), "--frames", bad)
        assert result.returncode == 2, bad


def test_hostile_names_reach_the_terminal_escaped() -> None:
    for name in ("091-hostile-names.pcap", "091-html-names.pcap"):
        result = run("diagnose", str(CAPTURES / name))
        assert result.returncode == 0, result.stderr
        assert b"\x1b" not in result.stdout and b"\x07" not in result.stdout
        assert "\u202e".encode() not in result.stdout
        assert b"\\x1b" in result.stdout or b"\\u202e" in result.stdout  # shown, not acted on


def test_the_schema_lists_every_diagnosis_code() -> None:
    from amqpscope import schema
    from amqpscope.diagnose.causes import CODES

    item = schema.load("diagnose")["$defs"]["diagnosis"]["properties"]
    assert item["code"]["enum"] == sorted(CODES)
