"""pika's log lines mangled (a backslash lost where a line was cut and joined, an escape cut in
the middle): what Python's compiler would only warn of (`\\d`, an octal past 0o377) is never in
a repr pika printed, so such a line is a `log.bad-line` finding, silently and the same whatever
the warning filters are. Before, `ast.literal_eval` printed a DeprecationWarning (a
SyntaxWarning from Python 3.12) on stderr and read the text as if the backslash were doubled,
and under `-W error` made the same line a finding: the output depended on `-W`.

The mangled lines are the recorded ones (tests/corpus/logs/23-pika-plain.log from
captures/log-pika-broker.log, captures/log-pika-closed.log) with one backslash put in or taken
out, and a frame printed by pika 1.4's own `repr` of a Connection.Start whose table holds a
backslash, halved the same way."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import pika.frame as pf
import pika.spec as ps
import pytest
from hypothesis import given
from hypothesis import strategies as st

from amqpscope.logs import pika as pika_log
from tests.mangled import read, read_under_each_w

ROOT = Path(__file__).resolve().parent.parent
PLAIN = (ROOT / "tests" / "corpus" / "logs" / "23-pika-plain.log").read_text().splitlines()
CLOSED = (ROOT / "captures" / "log-pika-closed.log").read_text().splitlines()
REMOTE_CLOSE = next(line for line in CLOSED if "Received remote Channel.Close" in line)
PREFIX = "2026-11-26 06:51:38,560 DEBUG pika.channel Discarding frame "
#: pika's repr of a received Connection.Start whose server_properties hold `a\d` (the table's
#: string escaped three times over: in the table's repr, the method's list, the frame's list)
START = PREFIX + repr(pf.Method(0, ps.Connection.Start(server_properties={"p": "a\\d"})))


def _once(line: str, old: str, new: str) -> str:
    assert line.count(old) == 1, (old, line)
    return line.replace(old, new)


#: (why, the line): each has an escape no repr has, or one cut short
MANGLED = [
    ("a backslash before a letter", _once(PLAIN[0], "ctag1.1161", "ctag1.\\d161")),
    ("an octal escape past 0o377", _once(PLAIN[0], "ctag1.1161", "ctag1.\\777")),
    ("an escape cut in the middle", _once(PLAIN[0], "8e21e'", "8e\\x2'")),
    ("a reply text's invalid escape", _once(REMOTE_CLOSE, "unknown delivery", "unknown\\q")),
    ("a table's escape halved", _once(START, "\\" * 8 + "d", "\\" * 4 + "d")),
]


def test_the_unmangled_lines_are_frames() -> None:
    """The oracle's own check: before mangling, each line is a frame."""
    assert read(pika_log.NAME, [PLAIN[0], REMOTE_CLOSE, START])[0] == [1, 2, 3]


@pytest.mark.parametrize("why, line", MANGLED, ids=[m[0] for m in MANGLED])
def test_a_mangled_line_is_a_finding_and_no_warning(why: str, line: str) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frames, named = read(pika_log.NAME, [PLAIN[1], line, PLAIN[3]])
    assert [str(w.message) for w in caught] == []
    assert frames == [1, 3], why
    assert named == {2: "log.bad-line"}, why


def test_the_output_is_the_same_whatever_minus_w_says(tmp_path: Path) -> None:
    log = tmp_path / "mangled.log"
    log.write_text("\n".join([PLAIN[1], *(line for _, line in MANGLED), PLAIN[3]]) + "\n")
    outputs = read_under_each_w(log)
    assert outputs[0] == outputs[1]
    assert outputs[0][1].count("log.bad-line") == len(MANGLED)


@given(st.text(st.characters(blacklist_categories=("Cs",))))
def test_a_repr_is_read_as_python_reads_it(value: str) -> None:
    """`_unescaped` is literal_eval's answer on every str repr (pika's items and reply texts)."""
    quoted = repr(value)
    assert pika_log._unescaped(quoted[1:-1]) == ast.literal_eval(quoted) == value


@pytest.mark.parametrize(
    "inner, value",
    [("\\N{BULLET}", "\u2022"), ("\\\n", ""), ("\\101\\0", "A\0"), ("\\U0001f600", "\U0001f600")],
)
def test_escapes_a_repr_never_makes_are_read_as_python_reads_them(inner: str, value: str) -> None:
    assert pika_log._unescaped(inner) == ast.literal_eval(f"'{inner}'") == value
