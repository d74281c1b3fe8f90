"""Every frame record of every bundled capture validates against the published schema."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from amqpscope import schema
from amqpscope.capture.files import open_capture
from amqpscope.cli import main
from amqpscope.dissect import Dissector
from amqpscope.track.tracker import Tracker
from tests.oracle import keylog_for

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
FILES = sorted(p for p in CAPTURES.iterdir() if p.suffix in (".pcap", ".pcapng"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_frame_records_validate(path: Path) -> None:
    validator = schema.validator("frame")
    tracker = Tracker()
    with open_capture(str(path)) as capture:
        for frame in Dissector(keylog=keylog_for(path)).run(capture):
            tracker.feed(frame)
            record = json.loads(json.dumps(frame.to_json()))  # as --json prints it
            errors = sorted(validator.iter_errors(record), key=str)
            assert not errors, f"frame {frame.number}: {errors[0].message}"


@pytest.mark.parametrize("name", schema.NAMES)
def test_schemas_are_valid_and_printed(name: str) -> None:
    jsonschema.Draft202012Validator.check_schema(schema.load(name))
    printed = subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", "schema", name],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert json.loads(printed)["x-schema-version"] >= 1


def cli(*args: str) -> str:
    """The command run in this process (the documents are what is checked here; the exit codes
    and stderr of a real process are tests/test_cli.py's and tests/test_exits.py's)."""
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, (result.exit_code, result.stderr, result.exception)
    return result.stdout


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_exports_and_summaries_validate(path: Path, tmp_path: Path) -> None:
    out = tmp_path / "export.json"
    cli("export", str(path), "-o", str(out))
    document = json.loads(out.read_text())
    errors = list(schema.validator("export").iter_errors(document))
    assert not errors, errors[0].message
    frames = cli("read", str(path), "--json").splitlines()
    assert len(document["frames"]) == len(frames) == document["capture"]["frames"]
    summary = json.loads(cli("summary", str(path), "--json"))
    errors = list(schema.validator("summary").iter_errors(summary))
    assert not errors, errors[0].message
    assert summary["connections"] == document["connections"]
    diagnosed = json.loads(cli("diagnose", str(path), "--json"))
    errors = list(schema.validator("diagnose").iter_errors(diagnosed))
    assert not errors, errors[0].message
    assert diagnosed["diagnoses"] == document["diagnoses"]


def test_ndjson_export_has_the_same_content() -> None:
    path = CAPTURES / "091-rpc.pcap"
    records = [json.loads(line) for line in cli("export", str(path), "--ndjson").splitlines()]
    kinds = [r["record"] for r in records]
    assert kinds[0] == "capture" and kinds[-1] == "summary"
    assert kinds.count("frame") == len(cli("read", str(path), "--json").splitlines())
    assert kinds.count("connection") == 2


def summary_of(path: Path) -> tuple[dict, str]:
    """`summary --json` of `path`, validated; and what it said on stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", "summary", str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    document = json.loads(done.stdout)
    errors = list(schema.validator("summary").iter_errors(document))
    assert not errors, errors[0].message
    return document, done.stderr


def test_summary_json_holds_the_inputs_own_findings(tmp_path: Path) -> None:
    """What the input itself said (a capture cut short, a log's lines that are no frame) is in
    the document as `input-findings`, shaped as findings are everywhere (the frame schema's),
    and still on stderr; a whole capture has none."""
    assert "input-findings" in schema.load("summary")["properties"]
    source = CAPTURES / "091-rpc.pcap"
    whole, said = summary_of(source)
    assert whole["input-findings"] == [] and said == ""
    data = source.read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[: len(data) - 30])  # the last record cut short
    damaged, said = summary_of(cut)
    (truncated,) = damaged["input-findings"]
    assert truncated["code"] == "capture.truncated" and truncated["severity"] == "warning"
    assert truncated["message"] in said and truncated["packet"] == 94
    assert damaged["connections"][0]["id"] == whole["connections"][0]["id"]
    lines = (CAPTURES / "log-proton-broker.log").read_text().splitlines(keepends=True)
    log = tmp_path / "bad.log"
    noise, garbled = "a line of no frame\n", "[0x1]:0 -> @garbage(1)\n"
    log.write_text("".join([*lines[:3], noise, *lines[3:5], garbled, *lines[5:]]))
    logged, said = summary_of(log)
    codes = [f["code"] for f in logged["input-findings"]]
    assert codes == ["log.bad-line", "log.skipped-lines"]
    assert all(f["message"] in said for f in logged["input-findings"])
