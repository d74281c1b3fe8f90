"""A connection the capture's end closes is retired after `Dissector.finish` has put its
reported TCP findings (a `tcp.overlap-mismatch`) among the dissector's findings: its row's
findings count says each once, as the file's end would (found by test_spark's every-capture
comparison when the mutated captures it samples moved; no Spark needed here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from amqpscope.spark import rows, tables
from tests.test_mutation import FILES as MUTATED
from tests.test_mutation import mutations

CAPTURES = Path(__file__).resolve().parent.parent / "captures"


def tables_of(path: Path) -> dict[str, list[str]]:
    """Every table of `path` as Spark's job makes it, each row's repr, sorted."""
    out: dict[str, list[str]] = {}
    for kind, part in rows.decode_file(str(path)):
        if kind in tables.TABLES:
            out.setdefault(kind, []).extend(map(repr, part))
    return {kind: sorted(values) for kind, values in out.items()}


def test_a_finding_both_tcp_and_the_dissectors_is_counted_once(
    monkeypatch: Any, tmp_path: Path
) -> None:
    source = CAPTURES / "log-uamqp-broker.pcap"
    assert source in MUTATED
    path = tmp_path / "mutated.pcap"
    path.write_bytes(next(iter(mutations(source)))[1])  # a retransmission with other bytes
    early = tables_of(path)
    assert any("tcp.overlap-mismatch" in r for r in early["findings"])
    monkeypatch.setattr(rows, "_retire", lambda *args: None)
    assert tables_of(path) == early
