"""Publisher confirms in a capture that starts after confirm.select (a late start, one piece of
a rotated capture read alone).

The broker numbers a channel's publishes from its confirm.select; a capture that did not see it
does not know which publish a confirm names. The recorded capture (pika, RabbitMQ; every publish
confirmed, captures/091-slow-confirm.json) is cut at every point after confirm.select: no cut
may report a publish as unconfirmed or pending (the old tracker numbered the publishes it saw
from 1 and found the broker's later numbers unmatched), and the confirms it counts are ones
the broker sent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from amqpscope.cli import main
from tests.crafted import CAPTURES, drop

SOURCE = CAPTURES / "091-slow-confirm.pcap"
RECORDED = json.loads((CAPTURES / "091-slow-confirm.json").read_text())
TRUTH = RECORDED["expect"]


def run(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.output))


def confirming_channel(summary: dict[str, Any]) -> dict[str, Any]:
    (channel,) = [
        ch for c in summary["connections"] for ch in c["channels"] if ch["confirms"]["selected"]
    ]
    return dict(channel)


def first_publish_packet() -> int:
    """The packet of the first publish after confirm.select (the cuts start after it)."""
    result = CliRunner().invoke(main, ["read", str(SOURCE), "--json"])
    records = [json.loads(line) for line in result.output.splitlines()]
    select = next(r["frame"] for r in records if r.get("name") == "confirm.select-ok")
    return int(
        next(
            r["packet"]
            for r in records
            if r.get("name") == "basic.publish" and r["frame"] > select and r["channel"] == 1
        )
    )


def test_the_whole_capture_matches_every_confirm() -> None:
    confirms = confirming_channel(run("summary", str(SOURCE)))["confirms"]
    assert (confirms["acked"], confirms["pending"]) == (TRUTH["confirms_acked"], 0)


def test_a_capture_cut_after_confirm_select_leaves_nothing_unconfirmed(tmp_path: Path) -> None:
    for cut in range(first_publish_packet() + 1, RECORDED["capture"]["packets_captured"] - 10, 7):
        piece = drop(SOURCE, tmp_path / f"from-{cut}.pcap", lambda raw, cut=cut: raw.number >= cut)
        summary = run("summary", str(piece))
        channel = confirming_channel(summary)
        assert not channel["from-start"]
        confirms = channel["confirms"]
        assert confirms["pending"] is None, cut
        assert 0 < confirms["acked"] <= TRUTH["confirms_acked"], cut
        codes = {f["code"] for f in summary["findings"]}
        assert "amqp091.unconfirmed-at-end" not in codes, cut
        diagnoses = run("diagnose", str(piece))["diagnoses"]
        assert "publish.unconfirmed" not in {d["code"] for d in diagnoses}, cut
