"""`log.lost-line` doubts the frames just after a log line that did not parse (up to the first
frame after it in each direction), not every later one: a rule broken far after the damage is
the peer's again, at its full severity."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from amqpscope.cli import main

LOG = Path(__file__).resolve().parent.parent / "captures" / "log-proton-broker.log"


def run(command: str, path: Path) -> list[dict[str, Any]]:
    result = CliRunner().invoke(main, [command, str(path), "--json"])
    assert result.exit_code == 0, result.output
    text = result.stdout
    return (
        [json.loads(text)] if command == "diagnose" else [json.loads(x) for x in text.splitlines()]
    )


def violations(path: Path) -> dict[int, dict[str, Any]]:
    """The `spec.violation` diagnoses by the frame that broke the rule."""
    out = {}
    for d in run("diagnose", path)[0]["diagnoses"]:
        if d["code"] == "spec.violation" and "begin" in d["title"]:
            out[max(d["evidence"])] = d
    return out


def test_a_violation_far_after_a_bad_line_has_its_full_severity(tmp_path: Path) -> None:
    """The server's open (line 11) does not parse: its begin just after looks sent before any
    open (doubted, info). A second begin on the same channel, twenty lines on, after both
    sides have sent frames since the damage, is the server's bug: a warning, as in the log
    with no damage."""
    lines = LOG.read_text().splitlines(keepends=True)
    assert "<- @open(16)" in lines[10] and "<- @begin(17)" in lines[11]
    again = [*lines[:33], lines[11], *lines[33:]]  # a begin on channel 0 again, late
    whole = tmp_path / "again.log"
    whole.write_text("".join(again))
    # damaged before the performative's name: no frame is left of it (damaged after its name,
    # the line is the frame's truncated record, issue 42)
    again[10] = again[10][:34] + "@@@]]]\n"
    damaged = tmp_path / "damaged.log"
    damaged.write_text("".join(again))

    (late_whole,) = [d for n, d in violations(whole).items() if n > 20]
    assert late_whole["severity"] == "warning"
    found = violations(damaged)
    early = [d for n, d in found.items() if n < 20]
    late = [d for n, d in found.items() if n > 20]
    assert len(early) == 1 and early[0]["severity"] == "info"
    assert "or the log lost a frame" in early[0]["title"]
    assert len(late) == 1 and late[0]["severity"] == "warning", late
    assert "log lost" not in late[0]["title"] and "line 11" not in late[0]["explanation"]
    # the read marks the first frame after the damage in each direction, and no other
    marked = [
        (r["source"]["line"], r["dir"])
        for r in run("read", damaged)
        if any(f["code"] == "log.lost-line" for f in r["findings"])
    ]
    assert marked == [(12, "s2c"), (15, "c2s")]
