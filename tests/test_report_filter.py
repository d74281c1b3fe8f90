"""The report's own display filter (filter.js) against amqpscope's (filter.py), in Debian's
Chromium over the DevTools protocol: the same frames match and the same errors are said, column
and all, for hundreds of filters (every operator, every kind of value, Python's regular
expressions valid and not) over the records of bundled captures of both versions, a log, and
records made to be awkward (integers past 2**53, NaN, NUL and __proto__ keys, astral and
bidi characters). The filter box then lists what `read -Y` would, and says an error as the TUI
does (the text, a caret under the column, the message).
"""

from __future__ import annotations

import json
import math
import random
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from amqpscope.cli import main
from amqpscope.filter import FilterError, compile_filter
from tests import browser
from tests.oracle import missing

pytestmark = pytest.mark.skipif(not browser.available(), reason=missing("Debian's chromium"))

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "captures"
SOURCES = [
    "091-qos-prefetch.pcap",
    "091-channel-errors.pcap",
    "091-html-names.pcap",
    "10-send-receive.pcap",
    "log-proton-broker.log",
]

#: hand-written: every operator and keyword, paths of every shape, and each error filter.py says
FILTERS = [
    'name == "transfer"',
    'name != "transfer"',
    "frame < 10",
    "frame <= 10 and frame > 3",
    "frame >= 40 || frame == 1",
    "ts > 0",
    "ts < 1",
    "size >= 100",
    "channel == null",
    "channel != null",
    "channel",
    "!channel",
    "not not channel",
    "findings",
    "not findings",
    "findings[0].code",
    'findings[0].code contains "."',
    'findings[-1].severity == "error"',
    "findings[99]",
    "findings[-99]",
    "fields.handle == 0",
    "fields.handle == 0.0",
    "fields.handle == false",
    "fields.settled == false",
    "fields.settled == 0",
    "fields.settled != true",
    "fields.settled < 1",
    "fields.delivery-id >= 2",
    "fields.reply-code >= 400",
    "fields.reply-code > 300 && fields.reply-text",
    'fields.reply-text contains "NOT_FOUND"',
    'fields.reply-text matches "^NOT_[A-Z]+ - "',
    "fields.properties",
    'fields.properties contains "message-id"',
    'fields.properties contains "nothing"',
    'fields.mechanisms contains "PLAIN"',
    "fields.capabilities",
    'fields.arguments contains "x-max-priority"',
    "message",
    "message.body",
    'message.body.text contains "1"',
    'message.properties.message-id matches "[0-9]$"',
    "message.sections[0]",
    'src contains ":5672"',
    'dst matches ":5672$"',
    'dir == "c2s"',
    'dir > "c2s"',
    'dir <= "c2s"',
    'version == "1.0"',
    'version == "0-9-1"',
    'kind == "method" and (name == "basic.ack" or name == "basic.deliver")',
    '(kind == "method") and not (channel == 0)',
    "source.line > 10",
    'source.file contains "log"',
    'name == "x" or name == "y" or name == "open"',
    'name == "open" and name == "close"',
    "name == 'open'",
    'name == "op\\"en"',
    "name == 'it\\'s'",
    'name contains ""',
    "name < 5",
    'frame < "5"',
    "frame == 1e0",
    "frame == 1.5e1",
    "frame == -1",
    "frame > -0",
    "frame < 99999999999999999999",
    "frame == 9007199254740993",
    "fields.handle contains 0",
    "findings contains 0",
    # errors: the tokenizer, the grammar, the values
    "",
    "   ",
    "name ==",
    "name == ",
    "== 1",
    "name = 1",
    "name @ 1",
    "(name",
    "(name == 1",
    "name)",
    "name == 1)",
    "fields.",
    "fields.1",
    "fields[",
    "fields[1",
    "fields[x]",
    "fields[1.5]",
    "fields[1e2]",
    "fields[-1]x",
    "a and",
    "or a",
    "not",
    "!",
    "and",
    "true",
    "null == null",
    'name == "x" b',
    'name == "x" b == 1',
    '"string"',
    "5",
    "-",
    "-x",
    "5abc",
    "name == bogus",
    "name == and",
    "name matches 5",
    "name matches true",
    "name contains",
    "'unterminated",
    '"unterminated',
    "fields.-x",
    'name == "a" &',
    "name == 'a' | b",
    "name ~ 1",
    "name\t==\t1 ==",
    "name == 1 # comment",
    "na\u00efve == 1",
    "\u00e9 == 1",
    "name == \u0661\u0662",
    "frame == \u0661",
    "frame[\u0661]",
    "x == 1 and \u202e",
    "x == 1 and \U0001f600",
    "name ==\u00a0",
    "\u3000name == 1 and",
    "x\x1f== 1",
    "name == 'a\"b' ==",
    'name == "a\'b" ==',
    "name == 'a\\\\' ==",
    # nesting is bounded (the parsers recurse): 100 levels parse, 101 are an error
    "(" * 100 + "frame" + ")" * 100,
    "(" * 101 + "frame" + ")" * 101,
    "not " * 101 + "frame",
    "(" * 3000 + "frame",
    'name matches "a{4294967296}"',
    'name matches "a{1,4294967295}"',
]

#: patterns for `matches`: Python's syntax, valid (what they match) and not (what re says)
PATTERNS = [
    "^conn",
    "ion$",
    "\\.",
    "(?i)BASIC",
    "(?i:BASIC)\\.",
    "[a-c]+\\.",
    "\\d+",
    "\\D",
    "\\w+-\\w+",
    "\\W",
    "\\bopen\\b",
    "\\Bpen",
    "a(?=c)",
    "(?<=c)h",
    "(?<!x)y",
    "(?<=[a-z]{2})e",
    "(?:ab)+",
    "(a)\\1",
    "(.)\\1",
    "(?P<n>s)(?P=n)",
    "s*+e",
    "(?>a+)c",
    "\\Aconn",
    "ok\\Z",
    "[^a-z.-]",
    "(?x) c o n n  # a comment",
    "(?s).",
    "(?m)^b",
    "\\s",
    "\\S+\\s\\S+",
    "[\\w.]+-",
    "\\u0061",
    "\\x61",
    "\\U00000061",
    "\\141",
    "\\0",
    "(?a)\\w+",
    "\u00e9",
    ".{3,5}",
    ".{2,}?",
    "a{,3}",
    "a{",
    "a{1",
    "x{}",
    "[]a]",
    "[a-]",
    "[\\d-]",
    "[^]]",
    "a|",
    "|",
    "",
    "(?#note)open",
    "(?-i:a)",
    "(?i)(?-i:A)",
    "<script>",
    # invalid
    "(",
    ")",
    "a)",
    "[a",
    "[z-a]",
    "[\\d-z]",
    "a**",
    "a+*",
    "*a",
    "^*",
    "\\b+",
    "(?P<1>x)",
    "(?P<a>x)(?P<a>y)",
    "(?P=n)",
    "(?P<n>a(?P=n))",
    "(?P",
    "(?Px)",
    "(?P<n",
    "(?P<>x)",
    "(?<x)",
    "(?",
    "(?z)",
    "(?i",
    "(?i-",
    "(?-",
    "(?i-i:a)",
    "(?L)a",
    "(?au)a",
    "(?-a:x)",
    "(?t:a)",
    "a(?i)b",
    "\\",
    "a\\",
    "\\x4",
    "\\xZ",
    "\\u12",
    "\\U0011ffff",
    "\\8",
    "\\1",
    "(a)\\2",
    "(a\\1)",
    "\\777",
    "[\\777]",
    "\\q",
    "[\\q]",
    "[\\A]",
    "[\\b]",
    "\\N",
    "(?<=a+)b",
    "(?<=a|bc)d",
    "(?<=(a)\\1)b",
    "a{3,2}",
    "x(?#comment",
    "(?x)a b (",
    "a\nb(",
    "a\nb\nc[",
]


def literal(value: Any) -> str | None:
    """`value` as a filter's value, or None when the filter language has none for it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else None
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return None


def paths(value: Any, prefix: str = "", depth: int = 0) -> list[tuple[str, Any]]:
    """(path, value) of every node of a record, to 5 levels."""
    out = []
    if isinstance(value, dict) and depth < 5:
        for key, child in value.items():
            if re.fullmatch(r"[A-Za-z_$][\w$]*(?:-[\w$]+)*", key, re.ASCII):
                path = f"{prefix}.{key}" if prefix else key
                out.append((path, child))
                out.extend(paths(child, path, depth + 1))
    elif isinstance(value, list) and depth < 5:
        for i, child in enumerate(value[:3]):
            path = f"{prefix}[{i}]"
            out.append((path, child))
            out.extend(paths(child, path, depth + 1))
    return out


def generated(records: list[dict[str, Any]], seed: str) -> list[str]:
    """Filters from what the records hold: each path alone and against one of its values (and
    its neighbours) with every operator, string values also by substring and pattern."""
    rng = random.Random(seed)
    seen: dict[str, list[Any]] = {}
    for record in records:
        for path, value in paths(record):
            seen.setdefault(path, []).append(value)
    out = []
    for path in sorted(seen):
        value = rng.choice(seen[path])
        out.append(path)
        text = literal(value)
        if text is None:
            out.append(f'{path} contains "{rng.choice(["a", "1", "x-", "name"])}"')
            continue
        for op in ("==", "!=", "<", ">=") if rng.random() < 0.5 else ("!=", ">", "<=", "=="):
            out.append(f"{path} {op} {text}")
        if isinstance(value, str) and value:
            cut = rng.randrange(len(value))
            out.append(f"{path} contains {literal(value[cut : cut + 3])}")
            out.append(f"{path} matches {literal(re.escape(value[cut : cut + 4]))}")
        elif isinstance(value, int | float) and not isinstance(value, bool):
            out.append(f"{path} > {text} or {path} < {literal(value / 2)}")
    return out


#: pieces of filters, well and badly formed, for random ones
PIECES = [
    "name",
    "fields.handle",
    "fields.reply-code",
    "findings",
    "frame",
    "x[0]",
    "a.b-c",
    "==",
    "!=",
    "<",
    ">=",
    "contains",
    "matches",
    "and",
    "or",
    "not",
    "&&",
    "||",
    "!",
    "(",
    ")",
    "[",
    "]",
    ".",
    "1",
    "-2",
    "3.5",
    "1e3",
    '"x"',
    "'y'",
    '"a\\"b"',
    "true",
    "null",
    "false",
    "=",
    "-",
    "@",
    "'",
    '"',
    "\u00e9",
    "\u202e",
    " ",
    "\t",
    "1x",
    "_",
    "$v",
]


def random_filters(seed: str, count: int) -> list[str]:
    """Sequences of pieces: mostly errors, some valid, each error's column somewhere else."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        pieces = [rng.choice(PIECES) for _ in range(rng.randrange(1, 8))]
        out.append("".join(p + rng.choice(["", " ", " "]) for p in pieces))
    return out


def python(expression: str, records: list[dict[str, Any]]) -> list[int] | str:
    try:
        predicate = compile_filter(expression)
    except FilterError as exc:
        return str(exc)
    return [r["frame"] for r in records if predicate(r)]


def read_json(source: str) -> list[dict[str, Any]]:
    result = CliRunner().invoke(
        main, ["read", "--json", str(CAPTURES / source)], catch_exceptions=False
    )
    assert result.exit_code == 0
    return [json.loads(line) for line in result.stdout.splitlines()]


def make(tmp_path: Path, source: str, *args: str) -> Path:
    out = tmp_path / f"{Path(source).stem}.html"
    result = CliRunner().invoke(
        main, ["report", str(CAPTURES / source), "-o", str(out), *args], catch_exceptions=False
    )
    assert result.exit_code == 0, result.stderr
    return out


@pytest.fixture(scope="module")
def chromium() -> browser.Chromium:
    with browser.Chromium() as running:
        yield running


def opened(chromium: browser.Chromium, page_file: Path) -> browser.Page:
    page = chromium.page()
    page.open(page_file)
    page.wait("document.body.dataset.ready === '1'", "the report to draw itself")
    return page


def in_page(page: browser.Page, expressions: list[str]) -> list[list[int] | str]:
    return page.eval(
        f"{json.dumps(expressions)}.map(e => window.amqpscopeReport.filterMatches(e))",
        timeout=120,
    )


#: the records as JSON, with what JSON has no word for spelt out
RECORDS_AS_JSON = """JSON.stringify(window.amqpscopeReport.records(), (k, v) =>
    typeof v === 'bigint' ? 'bigint ' + v
    : typeof v === 'number' && !isFinite(v) ? 'float ' + v : v)"""


@pytest.mark.parametrize("source", SOURCES)
def test_same_frames_and_errors_as_the_command_line(
    tmp_path: Path, chromium: browser.Chromium, source: str
) -> None:
    records = read_json(source)
    page = opened(chromium, make(tmp_path, source))
    # the page holds every frame's record, as read --json has it
    assert json.loads(page.eval(RECORDS_AS_JSON)) == records
    expressions = FILTERS + generated(records, source) + random_filters(source, 300)
    fields = ["name", "src", "fields.reply-text", "message.body.text", "fields.address"]
    expressions += [
        f"{fields[i % len(fields)]} matches {literal(p)}" for i, p in enumerate(PATTERNS)
    ]
    wanted = [python(e, records) for e in expressions]
    got = in_page(page, expressions)
    differ = [(e, w, g) for e, w, g in zip(expressions, wanted, got, strict=True) if w != g]
    assert differ == []
    # not a vacuous run: frames matched, others not, and errors said
    assert sum(1 for w in wanted if isinstance(w, list) and 0 < len(w) < len(records)) > 50
    assert sum(1 for w in wanted if isinstance(w, str)) > 100
    assert page.console_errors == []


#: values a capture rarely holds, each in a record of its own
AWKWARD: list[Any] = [
    2**53 + 1,
    -(2**63),
    2**64 - 1,
    2**53,
    9007199254740993.0,
    float("nan"),
    float("inf"),
    float("-inf"),
    -0.0,
    0.1,
    1e300,
    True,
    False,
    None,
    0,
    "",
    [],
    {},
    [True, 1.0, None, "1"],
    {"\x00": 1, "\x00x": 2, "__proto__": 3, "constructor": 4, "1": 5},
    "\U0001f600 astral",
    "\ufb01 ligature \uffff",
    "\u202e bidi \u2066",
    "line\nbreak\r\u2028",
    "\x00\x1b nul esc",
    "\u0661\u0662 arabic digits",
    "caf\u00e9",
    "CAF\u00c9",
    "a" * 3000,
]


def test_awkward_values_pack_and_filter_as_in_python(
    tmp_path: Path, chromium: browser.Chromium
) -> None:
    from amqpscope.capture.files import open_capture
    from amqpscope.dissect import Dissector
    from amqpscope.render.html import report_data
    from amqpscope.render.html.page import render_page

    with open_capture(str(CAPTURES / "091-qos-prefetch.pcap")) as capture:
        data = report_data(Dissector().run(capture), {"file": "awkward"})
    count = len(data["rows"])
    records = []
    for i in range(count):
        value = AWKWARD[i % len(AWKWARD)]
        record = {"frame": data["rows"][i][0], "fields": {"v": value, "list": [value]}}
        if i % 3 == 0:
            record["fields"]["more"] = {"v": value}  # a dict in one record, absent in others
        records.append(record)
    data["records"] = records
    page_file = tmp_path / "awkward.html"
    page_file.write_bytes(render_page(data))
    page = opened(chromium, page_file)
    literals = [
        "9007199254740993",
        "9007199254740992",
        "-9223372036854775808",
        "18446744073709551615",
        "9007199254740993.0",
        "0",
        "-0",
        "0.1",
        "1e300",
        "1e999",
        "true",
        "false",
        "null",
        '""',
        '"1"',
        '"\U0001f600 astral"',
        '"\ufb01"',
        '"caf\u00e9"',
        '"\u202e"',
        '"\x00"',
        '"\\u0661"',
        '"__proto__"',
        '"constructor"',
        '"\x00x"',
        "\u0661\u0662",
    ]
    expressions = ["fields.v", "not fields.v", "fields.more.v", "fields.list[0]", "fields.list[-1]"]
    for text in literals:
        for op in ("==", "!=", "<", "<=", ">", ">=", "contains"):
            expressions += [f"fields.v {op} {text}", f"fields.list {op} {text}"]
        expressions.append(f"fields.v.__proto__ == 3 or fields.v.constructor == {text}")
    for pattern in ("\\d", "^\\w+$", "\U0001f600", "\\s", "(?i)caf\u00c9", "\\x00", "^$", "\\bl"):
        expressions.append(f"fields.v matches {literal(pattern)}")
    wanted = [python(e, records) for e in expressions]
    got = in_page(page, expressions)
    differ = [(e, w, g) for e, w, g in zip(expressions, wanted, got, strict=True) if w != g]
    assert differ == []
    assert page.console_errors == []


def test_the_filter_box_lists_and_says_as_the_command_line(
    tmp_path: Path, chromium: browser.Chromium
) -> None:
    """Built with -Y: the list opens on its matches (applied when the report was made); a new
    filter typed in lists what read -Y does; a bad one is said as the TUI says it."""
    source = "091-channel-errors.pcap"
    records = read_json(source)
    built = 'kind == "method" and channel > 0'
    page = opened(chromium, make(tmp_path, source, "-Y", built))
    assert page.eval("document.getElementById('frames-filter').value") == built
    assert page.eval("window.amqpscopeReport.shownFrames()") == python(built, records)
    typed = "fields.reply-code >= 400 or findings"
    page.eval(f"document.getElementById('frames-filter').value = {json.dumps(typed)}")
    page.eval("document.getElementById('frames-filter').focus()")
    page.key("Enter", "Enter", 13)
    wanted = python(typed, records)
    assert isinstance(wanted, list) and 0 < len(wanted) < len(records)
    assert page.eval("window.amqpscopeReport.shownFrames()") == wanted
    listed = page.eval(
        "[...document.querySelectorAll('#frames tbody tr')].map(r => +r.dataset.frame)"
    )
    assert listed == wanted[:200]
    status = page.eval("document.getElementById('frames-filter-status').textContent")
    assert status.startswith(f"{len(wanted)} of {len(records)} frames match")
    bad = 'name == "x" and (fields.reply-code >'
    page.eval(f"document.getElementById('frames-filter').value = {json.dumps(bad)}")
    page.click("#frames-filter-apply")
    said = page.eval("document.getElementById('frames-filter-error').innerText")
    with pytest.raises(FilterError) as exc:
        compile_filter(bad)
    assert said == f"{bad}\n{' ' * (exc.value.column - 1)}^\n-Y: {exc.value}"
    assert page.eval("window.amqpscopeReport.shownFrames()") == wanted  # the list stays
    page.click("#frames-filter-clear")
    assert len(page.eval("window.amqpscopeReport.shownFrames()")) == len(records)
    assert page.console_errors == []
