"""A log whose first frame comes late, and a library's log with no frame at all.

pika's DEBUG log of a BlockingConnection prints thousands of lines of its I/O loop before the
first frame it prints, so the format cannot be told from the first `SAMPLE` lines. The
recorded log (captures/log-pika-broker.log) is made so by repeating its own lines from before
its first frame: it must read as the same frames, its lines numbered on. Cut before its first
frame it is a pika log without a frame: one line saying so, exit 1. Text with no frame is
looked through up to `REACH` characters, never to its end.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from amqpscope.cli import main
from amqpscope.logs.detect import REACH, SAMPLE, sniff

LOG = Path(__file__).resolve().parent.parent / "captures" / "log-pika-broker.log"


def records(path: Path) -> list[dict[str, Any]]:
    result = CliRunner().invoke(main, ["read", str(path), "--json"])
    assert result.exit_code == 0, result.output
    return [r for r in map(json.loads, result.stdout.splitlines()) if "frame" in r]


def split() -> tuple[list[str], list[str]]:
    """The recorded log's lines before its first frame, and the rest."""
    lines = LOG.read_text().splitlines(keepends=True)
    first = next(n for n, line in enumerate(lines) if "<METHOD([" in line)
    return lines[:first], lines[first:]


def test_frames_after_the_first_sample_of_lines_are_found(tmp_path: Path) -> None:
    before, rest = split()
    repeats = SAMPLE // len(before) + 2
    late = tmp_path / "late.log"
    late.write_text("".join(before * repeats + rest))
    shifted = len(before) * (repeats - 1)
    original = records(LOG)
    assert original and len(before) * repeats > SAMPLE
    got = records(late)
    assert [r["source"]["line"] - shifted for r in got] == [r["source"]["line"] for r in original]
    keys = ("name", "channel", "dir", "fields")
    assert [[r.get(k) for k in keys] for r in got] == [[r.get(k) for k in keys] for r in original]


def test_a_pika_log_without_a_frame_says_so(tmp_path: Path) -> None:
    before, _ = split()
    empty = tmp_path / "publisher.log"
    empty.write_text("".join(before * 10))
    result = CliRunner().invoke(main, ["summary", str(empty)])
    assert result.exit_code == 1
    (line,) = result.output.splitlines()
    assert line.startswith(f"amqpscope: {empty}: a pika log, but no frame in it")
    assert "Traceback" not in result.output


def test_text_without_frames_is_looked_through_only_so_far() -> None:
    line = "2026-11-26 06:51:38,549 INFO app.worker still waiting for the next job\n"
    endless = itertools.repeat(line)
    fmt, kept, _library = sniff(endless)
    assert fmt is None
    assert REACH <= len(kept) * len(line) <= REACH + SAMPLE * len(line)


def test_one_frame_among_pikas_own_lines_is_a_pika_log(tmp_path: Path) -> None:
    """pika's logger names around one frame confirm it as a second frame would; the same frame
    line alone among other text is not enough in a text this long."""
    before, rest = split()
    one = tmp_path / "one.log"
    one.write_text("".join(before + rest[:1]))
    (record,) = records(one)
    assert record["name"] == records(LOG)[0]["name"]
    other = tmp_path / "other.log"
    other.write_text("".join(line.replace("pika.", "app.") for line in before + rest[:1]))
    result = CliRunner().invoke(main, ["read", str(other)])
    assert result.exit_code == 1 and "not a pcap or pcapng file" in result.output
