"""`amqpscope schema NAME` prints a self-contained schema: what it refers to in the other
schemas is bundled into its `$defs`, so `check-jsonschema` validates offline (no resolver, no
network), where the schema as shipped (which refers to the frame schema by its `$id` URL)
cannot be used."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from amqpscope import schema
from tests.oracle import missing

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
CHECK = shutil.which("check-jsonschema")
needs_check = pytest.mark.skipif(CHECK is None, reason=missing("check-jsonschema (the dev extra)"))


def cli(*args: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout


def refs(node: object) -> list[str]:
    if isinstance(node, dict):
        return [v for k, v in node.items() if k == "$ref"] + [
            r for v in node.values() for r in refs(v)
        ]
    if isinstance(node, list):
        return [r for v in node for r in refs(v)]
    return []


@pytest.mark.parametrize("name", schema.NAMES)
def test_printed_schemas_refer_only_inside_themselves(name: str) -> None:
    printed = json.loads(cli("schema", name))
    assert all(ref.startswith("#/") for ref in refs(printed)), name
    # every local reference resolves to a node of the document
    for ref in refs(printed):
        node: object = printed
        for part in ref[2:].split("/"):
            assert isinstance(node, dict) and part in node, ref
            node = node[part]


def check(schema_file: Path, instance: Path) -> subprocess.CompletedProcess[str]:
    assert CHECK is not None
    return subprocess.run(
        [CHECK, "--schemafile", str(schema_file), str(instance)],
        capture_output=True,
        text=True,
        timeout=120,
    )


@needs_check
def test_check_jsonschema_validates_offline_with_the_printed_schemas(tmp_path: Path) -> None:
    capture = str(CAPTURES / "091-rpc.pcap")
    summary = tmp_path / "summary.json"
    summary.write_text(cli("summary", capture, "--json"))
    export = tmp_path / "export.json"
    cli("export", capture, "-o", str(export))
    frame = tmp_path / "frame.json"
    frame.write_text(cli("read", capture, "--json", "-V", "-c", "3").splitlines()[2])
    for name, instance in (("summary", summary), ("export", export), ("frame", frame)):
        printed = tmp_path / f"{name}.schema.json"
        printed.write_text(cli("schema", name))
        result = check(printed, instance)
        assert result.returncode == 0, (name, result.stdout, result.stderr)
    # the shipped summary schema refers to the frame schema by a URL nobody serves
    shipped = Path(schema.__file__).with_name("summary.schema.json")
    assert check(shipped, summary).returncode != 0


@needs_check
def test_a_wrong_record_still_fails_against_the_printed_schema(tmp_path: Path) -> None:
    summary = json.loads(cli("summary", str(CAPTURES / "091-rpc.pcap"), "--json"))
    summary["findings"] = [{"code": "Not A Code", "severity": "fatal", "message": 1}]
    instance = tmp_path / "summary.json"
    instance.write_text(json.dumps(summary))
    printed = tmp_path / "summary.schema.json"
    printed.write_text(cli("schema", "summary"))
    assert check(printed, instance).returncode == 1
