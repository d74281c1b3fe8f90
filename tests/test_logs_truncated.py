"""A frame whose log text was cut short (the excerpt ends inside it, or the line was cut) is a
record of what was read: the frame's name and the fields before the cut, `source.truncated`,
beside the `log.cut-line` finding (issue 42), as tshark shows a partial dissection.

The lines are the libraries' own: captures/log-proton-broker.log and log-rhea-broker.log were
recorded from Qpid Proton and rhea; proton-j's, amqpnetlite's and pyamqp's are printed by
tests/made_logs.py's printers (written from each library's formatting code). Each is cut at
every comma of its frame text and a few places between.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from amqpscope import schema
from amqpscope.codec.frames import Frame
from amqpscope.logs.reader import LogReader
from tests.test_logs_unwrap import _lines

FORMATS = ("proton", "rhea", "proton-j", "amqpnetlite", "pyamqp")
#: the frames whose lines are cut (each format's line of each of these, when it has one)
CUT = ("open", "attach", "begin", "sasl-init", "sasl-mechanisms", "flow", "transfer")


def read(fmt: str, lines: list[str]) -> tuple[list[Frame], list[str]]:
    """The records and the codes of the findings of `lines` (the last without its newline,
    as a log cut short ends)."""
    reader = LogReader("log", fmt)
    frames: list[Frame] = []
    for number, line in enumerate(lines, 1):
        frames.extend(reader.feed(line if number == len(lines) else line + "\n", number))
    frames.extend(reader.flush())
    reader.finish()
    return frames, [f.code for f in reader.findings if f.code != "log.truncated-payload"]


def _within(part: Any, whole: Any) -> bool:
    """Whether `part`, a value read from a cut text, is `whole`'s value or its beginning (a
    described value cut inside keeps the fields before the cut)."""
    if isinstance(part, dict) and isinstance(whole, dict):
        return all(k in whole and _within(v, whole[k]) for k, v in part.items())
    return bool(part == whole)


def _cuts(line: str) -> list[int]:
    """Where to cut a frame line: after each comma past its first bracket, and between."""
    start = min(i for i in (line.find("["), line.find("{"), line.find("(")) if i >= 0)
    commas = [i for i, c in enumerate(line) if c == "," and i > start]
    return sorted({*commas, *(c + 3 for c in commas), len(line) - 2})


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_cut_frame_is_a_record_of_what_was_read(fmt: str, tmp_path: Path) -> None:
    lines = _lines(fmt, tmp_path)
    whole, codes = read(fmt, lines)
    assert codes == []
    by_line = {frame.source["line"]: frame for frame in whole if frame.source}
    tried = partial = 0
    for number, frame in by_line.items():
        if frame.name not in CUT or frame.kind == "protocol-header":
            continue
        line = lines[number - 1]
        for cut in _cuts(line):
            got, codes = read(fmt, [*lines[: number - 1], line[:cut]])
            if not codes and frame.name == "transfer":  # cut in the payload: read as it was
                assert [f.code for f in got[-1].findings] == ["log.truncated-payload"]
                continue
            tried += 1
            assert codes == ["log.cut-line"], (line[:cut], codes)
            if len(got) < number:  # cut before the frame's name: nothing to show
                continue
            assert len(got) == number
            last = got[-1]
            assert last.source == {"file": "log", "line": number, "truncated": True}
            assert (last.name, last.channel, last.direction) == (
                frame.name,
                frame.channel,
                frame.direction,
            )
            assert set(last.fields) <= set(frame.fields), line[:cut]
            assert _within(last.fields, frame.fields), line[:cut]
            assert not [f for f in last.findings if f.code == "amqp10.missing-mandatory"]
            partial += 1
            if cut >= len(line) - 2 and len(frame.fields) > 1:
                assert last.fields, line[:cut]  # all but its last characters: fields read
    assert tried >= 10 and partial >= tried * 0.7


def test_the_fields_past_the_cut_are_not_made_up() -> None:
    """A field the cut took is absent, not the spec's default in its place (Proton's open cut
    after its container-id has no max-frame-size, which the decoder would default)."""
    lines = _lines("proton", Path("."))
    open_line = lines[6]
    cut = open_line.index(", hostname")
    got, codes = read("proton", [*lines[:6], open_line[: cut + 5]])
    assert codes == ["log.cut-line"]
    assert got[-1].fields == {"container-id": "amqpscope-log-proton-broker"}


def test_a_cut_line_in_the_middle_is_a_record_and_the_log_goes_on() -> None:
    """A line cut short and followed by a frame of its own (an excerpt that leaves out the rest
    of a line): its record is truncated, the frame after it is read whole."""
    lines = _lines("proton", Path("."))
    attach = lines[8]
    cut = attach.index(", role=") + 1  # just after the comma: the handle before it is whole
    got, codes = read("proton", [*lines[:8], attach[:cut], *lines[9:12]])
    assert codes == ["log.bad-line"]
    names = [(f.name, bool(f.source and f.source.get("truncated"))) for f in got]
    assert names[8] == ("attach", True)
    assert got[8].fields == {
        "name": "amqpscope-log-proton-broker-/amq/queue/amqpscope.log-proton-broker.q",
        "handle": 0,
    }
    assert names[9:] == [("protocol-header", False), ("open", False), ("begin", False)]


def test_a_truncated_record_validates_and_the_timeline_marks_it(tmp_path: Path) -> None:
    lines = _lines("proton", tmp_path)
    attach = lines[8]
    log = tmp_path / "cut.log"
    log.write_text("\n".join(lines[:8]) + "\n" + attach[: attach.index(", snd-settle-mode")])
    assert "truncated" in schema.load("frame")["properties"]["source"]["properties"]
    run = [sys.executable, "-m", "amqpscope.cli", "read", "--json", str(log)]
    printed = subprocess.run(run, capture_output=True, text=True, timeout=120, check=True)
    records = [json.loads(line) for line in printed.stdout.splitlines()]
    validator = schema.validator("frame")
    for record in records:
        assert not sorted(validator.iter_errors(record), key=str)
    assert records[-1]["source"]["truncated"] is True
    assert records[-1]["name"] == "attach"
    assert "log.cut-line" in printed.stderr
    run = [sys.executable, "-m", "amqpscope.cli", "read", str(log)]
    timeline = subprocess.run(run, capture_output=True, text=True, timeout=120, check=True)
    last = timeline.stdout.rstrip().splitlines()[-1]
    assert "attach h0" in last and last.endswith("[truncated]")
    assert "[truncated]" not in timeline.stdout.rstrip().splitlines()[-2]
