"""Every frame record of every bundled capture validates against the published schema."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from amqpscope import schema
from amqpscope.capture.files import open_capture
from amqpscope.dissect import Dissector
from amqpscope.track.tracker import Tracker

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
FILES = sorted(p for p in CAPTURES.iterdir() if p.suffix in (".pcap", ".pcapng"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_frame_records_validate(path: Path) -> None:
    validator = jsonschema.Draft202012Validator(schema.load("frame"))
    tracker = Tracker()
    with open_capture(str(path)) as capture:
        for frame in Dissector().run(capture):
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
