"""Every JSON record the tool writes has a published schema (issue 40, item 10): `export --ndjson`'s
records (`amqpscope schema export-ndjson`) validate for every bundled capture and log, and the
diagnosis records of the record schemas carry the diagnose schema's own fields. `live --json`'s
records (`amqpscope schema live`) are validated where live runs: tests/test_live_agrees.py and
tests/test_diagnose_live.py (a stall's `diagnosis` records)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from amqpscope import schema
from amqpscope.cli import main

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
INPUTS = sorted(p for p in CAPTURES.iterdir() if p.suffix in (".pcap", ".pcapng", ".log"))


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: p.name)
def test_ndjson_export_records_validate(path: Path) -> None:
    result = CliRunner().invoke(main, ["export", str(path), "--ndjson"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    validator = schema.validator("export-ndjson")
    kinds = []
    for number, line in enumerate(result.stdout.splitlines(), 1):
        record = json.loads(line)
        errors = sorted(validator.iter_errors(record), key=str)
        assert not errors, f"line {number} ({record.get('record')}): {errors[0].message[:400]}"
        kinds.append(record["record"])
    assert kinds[0] == "capture" and kinds[-1] == "summary"


def test_every_ndjson_record_kind_has_its_definition() -> None:
    """A record kind export writes that the schema leaves out would fail `oneOf`; and one the
    schema names that is never written is a promise nobody keeps."""
    published = schema.load("export-ndjson")
    names = {ref["$ref"].rsplit("/", 1)[1] for ref in published["oneOf"]}
    assert names == {"capture", "frame", "connection", "finding", "diagnosis", "summary"}
    for name in names:  # each definition pins its record's kind
        definition = published["$defs"][name]
        parts = [definition, *definition.get("allOf", [])]
        consts = [
            p["properties"]["record"]["const"] for p in parts if "record" in p.get("properties", {})
        ]
        assert consts == [name]


@pytest.mark.parametrize(("name", "key"), [("export-ndjson", "record"), ("live", "diagnosis")])
def test_diagnosis_records_hold_the_diagnose_schemas_fields(name: str, key: str) -> None:
    """The diagnose schema admits no other key, so a record of a diagnosis lists its fields by
    reference: the same names, the same required ones, and its own key."""
    diagnosis = schema.load("diagnose")["$defs"]["diagnosis"]
    record = schema.load(name)["$defs"]["diagnosis"]
    assert set(record["properties"]) == {*diagnosis["properties"], key}
    assert set(record["required"]) == {*diagnosis["required"], key}
    assert record["additionalProperties"] is False
