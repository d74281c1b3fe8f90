"""Azure's pyamqp lines mangled (a backslash put in where a line was cut and joined): pyamqp's
reprs never hold an escape Python's compiler only warns of (`\\d`, an octal past 0o377), so such
a line is a `log.bad-line` finding, silently and whatever the warning filters say. Before,
`ast.parse` read `\\d` leniently as a backslash and a `d` (and printed a SyntaxWarning from
Python 3.12), and under `-W error` made the same line a finding: the output depended on `-W`.

The lines are tests/corpus/logs/46-pyamqp-plain.log's with one backslash put in."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from amqpscope.logs import pyamqp
from tests.mangled import read, read_under_each_w

ROOT = Path(__file__).resolve().parent.parent
PLAIN = (ROOT / "tests" / "corpus" / "logs" / "46-pyamqp-plain.log").read_text().splitlines()


def _once(line: str, old: str, new: str) -> str:
    assert line.count(old) == 1, (old, line)
    return line.replace(old, new)


#: (why, the line): each has an escape no repr has
MANGLED = [
    ("a backslash before a letter", _once(PLAIN[0], "ns1.servicebus", "ns1\\d.servicebus")),
    ("an octal escape past 0o377", _once(PLAIN[0], "ns1.servicebus", "ns1\\777.servicebus")),
]


def test_the_unmangled_lines_are_frames() -> None:
    """The oracle's own check: before mangling, each line is a frame."""
    assert read(pyamqp.NAME, PLAIN[:3])[0] == [1, 2, 3]


@pytest.mark.parametrize("why, line", MANGLED, ids=[m[0] for m in MANGLED])
def test_a_mangled_line_is_a_finding_and_no_warning(why: str, line: str) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frames, named = read(pyamqp.NAME, [line, PLAIN[1], PLAIN[2]])
    assert [str(w.message) for w in caught] == []
    assert frames == [2, 3], why
    assert named == {1: "log.bad-line"}, why


def test_the_output_is_the_same_whatever_minus_w_says(tmp_path: Path) -> None:
    log = tmp_path / "mangled.log"
    log.write_text("\n".join([*(line for _, line in MANGLED), *PLAIN[1:3]]) + "\n")
    outputs = read_under_each_w(log)
    assert outputs[0] == outputs[1]
    assert outputs[0][1].count("log.bad-line") == len(MANGLED)
