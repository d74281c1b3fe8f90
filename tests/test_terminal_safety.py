"""A capture cannot drive the reader's terminal: control characters and escape sequences in
captured strings are printed escaped, and rich markup in them is printed as it is.

`captures/091-hostile-names.pcap` was recorded from pika and RabbitMQ (`captures/record.py`): a
queue whose name holds an OSC window title, a colour, a screen clear, a right-to-left override
and rich markup, a message body holding the same, and a 404 reply text that repeats the name.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from amqpscope.cli import main
from amqpscope.render.lines import safe

CAPTURE = Path(__file__).resolve().parent.parent / "captures" / "091-hostile-names.pcap"
TRUTH = json.loads(CAPTURE.with_suffix(".json").read_text())["expect"]
#: rich's own colour sequences (SGR), the only escape sequences a coloured output may hold
SGR = re.compile(r"\x1b\[[0-9;]*m")
BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029"


def escaped(text: str) -> str:
    """How the README says a captured string is shown: each control character (C0, DEL, C1) as
    \\xNN, each direction override or separator as \\uNNNN."""
    out = []
    for ch in text:
        code = ord(ch)
        if code < 0x20 or 0x7F <= code <= 0x9F:
            out.append(f"\\x{code:02x}")
        elif ch in BIDI:
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


def run(*args: str) -> str:
    result = CliRunner().invoke(main, [*args, str(CAPTURE)], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return result.stdout + result.stderr


def raw_controls(text: str) -> list[str]:
    """Characters a terminal would act on, other than line ends."""
    return [
        ch
        for ch in text
        if ch != "\n" and (ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F or ch in BIDI)
    ]


def test_the_capture_holds_what_it_should() -> None:
    assert "\x1b]0;pwned\x07" in TRUTH["queue"] and "\u202e" in TRUTH["queue"]
    assert "[bold red]x[/]" in TRUTH["body"]
    assert TRUTH["missing_queue"] in TRUTH["channel_errors"][0]["text"]


OUTPUTS = [
    ("read",),
    ("read", "--body"),
    ("read", "--width", "120"),
    ("read", "--color", "always", "--width", "300"),
    ("read", "--collapse"),
    ("summary",),
    ("summary", "--color", "always", "--width", "300"),
]


@pytest.mark.parametrize("args", OUTPUTS, ids=[" ".join(a) for a in OUTPUTS])
def test_no_control_character_reaches_the_terminal(args: tuple[str, ...]) -> None:
    out = run(*args)
    assert raw_controls(SGR.sub("", out)) == []
    if "--width" not in args:  # (cut lines may end before it)
        assert "[bold red]x[/]" in out  # markup is printed as text, not obeyed


def test_the_queue_name_is_printed_escaped_and_whole() -> None:
    out = run("read")  # not a terminal: lines are not cut
    assert escaped(TRUTH["missing_queue"]) in out  # the 404's reply text, in its finding
    assert escaped(TRUTH["channel_errors"][0]["text"]) in out
    assert f"q={escaped(TRUTH['queue'])[:40]}" in out


def test_the_body_is_printed_escaped() -> None:
    assert escaped(TRUTH["body"]) in run("read", "--body")


def test_the_summary_prints_them_escaped() -> None:
    out = run("summary", "--width", "400")
    assert escaped(TRUTH["channel_errors"][0]["text"]) in out  # the findings list
    assert escaped(TRUTH["queue"])[:30] in out  # the journeys table (its column is cut)


def test_json_keeps_the_strings_exactly() -> None:
    """--json is data, not display: the strings are the captured ones, JSON-escaped."""
    records = [json.loads(line) for line in run("read", "--json").splitlines() if line]
    queues = {r["fields"].get("queue") for r in records if r["name"] == "queue.declare"}
    assert TRUTH["queue"] in queues and TRUTH["missing_queue"] in queues


@pytest.mark.parametrize("code", [*range(0x20), *range(0x7F, 0xA0), *map(ord, BIDI)])
def test_safe_escapes_every_character_a_terminal_acts_on(code: int) -> None:
    text = f"a{chr(code)}b"
    assert safe(text) == escaped(text)
    assert raw_controls(safe(text)) == []


def test_safe_leaves_printable_text_alone() -> None:
    text = "queue ünïcødé → 日本語 [bold]x[/] \\x1b"
    assert safe(text) == text


def test_summary_tables_show_markup_as_text_on_any_console() -> None:
    """The summary's tables hold captured strings as text, not markup, even on a console that
    reads markup (rich's default, as a program using `print_summary` may make): a name holding
    `[/]` once raised MarkupError (found by the fuzzer), and `[bold red]` was swallowed."""
    import io

    from rich.console import Console

    from amqpscope.capture.files import open_capture
    from amqpscope.dissect import Dissector
    from amqpscope.render.summary import print_summary
    from amqpscope.track.tracker import Tracker

    tracker = Tracker()
    with open_capture(CAPTURE) as capture:
        for frame in Dissector().run(capture):
            tracker.feed(frame)
    tracker.finish()
    summary = tracker.summary()
    sink = io.StringIO()
    print_summary(summary, Console(file=sink, width=400, color_system=None))
    assert "[bold red]x[/]" in sink.getvalue()
    # a name that closes a tag it never opened
    text = json.dumps(summary).replace("[bold red]x[/]", "x[/]")
    sink = io.StringIO()
    print_summary(json.loads(text), Console(file=sink, width=400, color_system=None))
    assert "x[/]" in sink.getvalue()
