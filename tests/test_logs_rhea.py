"""rhea's frame trace (`DEBUG=rhea:frames`) against the capture of the same run.

rhea prints only what is truthy (its `toJSON`), nested described values as bare lists, and
payloads cut after 50 bytes, so a rhea log shows less than the wire. The rule tested: every
field a record has equals the captured frame's; a captured field the record lacks was falsy
(what rhea leaves out) or is named by a `log.not-shown` finding on the record.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
from hypothesis import given, settings

from amqpscope.capture.files import open_capture
from amqpscope.codec.frames import TRANSPORT, Frame
from amqpscope.dissect import Dissector
from amqpscope.findings import Finding
from amqpscope.logs.detect import detect
from amqpscope.logs.reader import LogReader, records_from_log
from amqpscope.track.tracker import Tracker

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
NAME = "log-rhea-broker"


def captured() -> list[Frame]:
    with open_capture(str(CAPTURES / f"{NAME}.pcap")) as capture:
        return [f for f in Dissector().run(capture) if f.kind != TRANSPORT]


def logged() -> tuple[list[Frame], list[Finding]]:
    found: list[Finding] = []
    with open(CAPTURES / f"{NAME}.log", encoding="utf-8") as log:
        frames = list(records_from_log(log, f"{NAME}.log", fmt="rhea", findings=found))
    return frames, found


def falsy(value: Any) -> bool:
    return value in (0, False, None, "", [], {})


def test_detected_by_content() -> None:
    lines = (CAPTURES / f"{NAME}.log").read_text().splitlines(keepends=True)
    assert detect(lines) == "rhea"
    assert detect((CAPTURES / "log-proton-broker.log").read_text().splitlines()) == "proton"


def test_frame_for_frame_what_rhea_shows() -> None:
    wire = captured()
    frames, found = logged()
    assert found == []
    assert len({f.conn for f in frames}) == 1
    compared = 0
    for direction in ("c2s", "s2c"):
        mine = [f for f in frames if f.direction == direction]
        theirs = [f for f in wire if f.direction == direction]
        # rhea stops logging when its client exits: RabbitMQ's late detach after close is
        # on the wire only
        assert len(mine) <= len(theirs) and len(theirs) - len(mine) <= 1
        for log_frame, wire_frame in zip(mine, theirs, strict=False):
            assert (log_frame.name, log_frame.kind, log_frame.channel) == (
                wire_frame.name,
                wire_frame.kind,
                wire_frame.channel,
            )
            not_shown = {
                f.message.split(": ")[0].split(" ", 1)[1]
                for f in log_frame.findings
                if f.code == "log.not-shown"
            }
            for key, value in log_frame.fields.items():
                if key in not_shown:
                    continue
                expected = wire_frame.fields.get(key)
                if isinstance(value, dict) and isinstance(expected, dict):  # source, target
                    nested = {k for k in not_shown if k.startswith(f"{key}.")}
                    for inner, inner_value in expected.items():
                        if f"{key}.{inner}" in nested:
                            continue
                        assert value.get(inner) == inner_value or (
                            inner not in value and falsy(inner_value)
                        ), (log_frame.source, key, inner)
                    continue
                assert value == expected, (log_frame.source, key)
            for key, value in wire_frame.fields.items():
                if key not in log_frame.fields:
                    assert falsy(value) or key in not_shown, (log_frame.source, key, value)
            compared += 1
    assert compared == len(frames)
    states = [f for f in frames if f.name == "disposition"]
    assert states and all(any(x.code == "log.not-shown" for x in f.findings) for f in states), (
        "a disposition's outcome type is not in rhea's log"
    )


def test_summary_links_and_deliveries() -> None:
    """Links and delivery counts agree with the capture and with what rhea counted; outcomes
    are not in rhea's log (the finding says so), so none are claimed."""
    truth = json.loads((CAPTURES / f"{NAME}.json").read_text())["expect"]
    frames, _ = logged()
    tracker = Tracker()
    for frame in frames:
        tracker.feed(frame)
    tracker.finish()
    links = [
        link for c in tracker.summary()["connections"] for s in c["sessions"] for link in s["links"]
    ]
    by_role = {link["role"]: link for link in links}
    assert by_role["sender"]["deliveries"] == truth["transfers_sent"]
    assert by_role["receiver"]["deliveries"] == truth["transfers_received"]
    assert by_role["sender"]["target"] == by_role["receiver"]["source"]
    for link in links:
        assert not any(link["outcomes"].values())


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from((CAPTURES / f"{NAME}.log").read_text().splitlines(keepends=True)),
    st.integers(0, 300),
    st.integers(0, 30),
    st.text(max_size=6),
)
def test_mangled_lines_never_raise(line: str, at: int, cut: int, junk: str) -> None:
    reader = LogReader("mangled.log", fmt="rhea")
    frames = reader.feed(line[:at] + junk + line[at + cut :], 3)
    frames += reader.flush()  # a line whose text ends unfinished waits for the next: none comes
    reader.finish()
    # a line's own findings (`log.no-time` is the log's: a prefix the damage left time-like)
    of_lines = [f for f in reader.findings if f.code.startswith("log.") and f.code != "log.no-time"]
    # a frame cut short is a truncated record beside its finding (issue 42), not a line's one
    whole = [f for f in frames if not (f.source or {}).get("truncated")]
    assert len(whole) + len(of_lines) + reader.skipped + reader.ends == 1
    assert len(frames) == len(whole) or of_lines


_BUFFER_PIECES = st.sampled_from(
    [
        *(" 00", " ff", " 5", " AB", " aB", "  00", " 0g", " ... ", "6", "12", "\u0663", "x"),
        *("\u00b2", " \t0", " 0\t", " \t\t", "\t00", " 0 ", " \u0663\u0663"),
    ]
)
_BUFFER_ENDS = st.sampled_from(["", " more bytes", " more byte", " more", " ... 6 more bytes"])


@settings(max_examples=1500, deadline=None)
@given(
    st.tuples(
        st.sampled_from(["<Buffer", "<Buf", ""]),
        st.lists(_BUFFER_PIECES, max_size=6).map("".join),
        _BUFFER_ENDS,
        st.sampled_from([">", ""]),
    ).map("".join)
)
def test_a_payload_is_read_as_its_pattern_reads_it(tail: str) -> None:
    """`rhea._buffer` finds what `rhea._BUFFER.fullmatch` does."""
    from amqpscope.logs import rhea

    m = rhea._BUFFER.fullmatch(tail)
    wanted = None if m is None else (bytes.fromhex(m.group(1)), int(m.group(2) or 0))
    assert rhea._buffer(tail) == wanted


_JUNK = st.sampled_from(["", "x", " ", "[", "]", ":", "\n", "\r", "\u0663", " -> ", "rhea:frames"])
#: `rhea:frames [connection-1]:0 -> `, right or a little wrong
_TRACED = st.tuples(
    st.sampled_from(["rhea:frames [", "rhea:frames", "rhea:frames  ["]),
    st.sampled_from(["connection-1", "", "c]", "c\n", "\u0663"]),
    st.sampled_from(["]", "]:", "]:0", "]:12", "]:\u0663", "]:1x", ""]),
    st.sampled_from([" -> ", " <- ", " ->", "  -> ", " => ", " -< "]),
).map("".join)
_LINE_PIECES = st.one_of(_TRACED, _TRACED, _JUNK, st.sampled_from(["open#10 {}", "2026-11-26 "]))


@settings(max_examples=1000, deadline=None)
@given(st.lists(_LINE_PIECES, max_size=6).map("".join))
def test_a_line_is_split_as_its_pattern_splits_it(line: str) -> None:
    """`rhea._split` finds what `rhea._LINE.search` does."""
    from amqpscope.logs import rhea

    m = rhea._LINE.search(line)
    wanted = None
    if m is not None:
        channel = None if m.group("ch") is None else int(m.group("ch"))
        wanted = (m.start(), m.group("conn"), channel, m.group("dir"), m.start("rest"))
    assert rhea._split(line) == wanted


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.sampled_from(["0", "1", "07", "255", "256", "999", "1000", "", "\u0663", "-1", " 1"]),
        max_size=4,
    ).map(",".join)
)
def test_a_tag_is_read_as_its_pattern_reads_it(text: str) -> None:
    """`rhea._bytes` reads what `rhea._BYTES.fullmatch` does, bytes past 255 refused."""
    from amqpscope.logs import rhea

    numbers = [int(item) for item in text.split(",")] if rhea._BYTES.fullmatch(text) else None
    wanted = bytes(numbers) if numbers is not None and max(numbers) <= 255 else None
    assert rhea._bytes(text) == wanted


def test_performatives_are_named_as_their_pattern_reads_them() -> None:
    """Each `name#code` `rhea._PERFORMATIVES` knows is what `rhea._PERFORMATIVE` reads as
    that composite; a line read by either is the same."""
    from amqpscope.codec.amqp10 import spec
    from amqpscope.logs import rhea

    for token, code in rhea._PERFORMATIVES.items():
        m = rhea._PERFORMATIVE.match(token + " {}")
        assert m is not None and m.end() == len(token) + 1
        assert int(m.group(2), 16) == code
        assert spec.COMPOSITES[code].name == m.group(1).replace("_", "-")


def test_a_trace_copied_from_a_terminal() -> None:
    """On a terminal the `debug` package writes no ISO time: each line starts with the
    logger's name in colour and ends with the time since the line before (`+3ms`, `+2s`).
    Such a trace, through the file reader that drops the colours, reads as the recorded one
    does, frame for frame, without times (those deltas are rounded: not read)."""
    import io
    import re

    from amqpscope.capture.textlog import LogFile

    lines = (CAPTURES / f"{NAME}.log").read_text().splitlines()
    units = ["ms", "s", "m", "h", "d"]
    shown = []
    for i, line in enumerate(lines):
        rest = re.sub(r"^\S+ rhea:frames ", "", line)
        shown.append(f"  \x1b[36;1mrhea:frames \x1b[0m{rest} \x1b[36m+{i}{units[i % 5]}\x1b[0m\n")
    terminal = "".join(shown).encode()
    with LogFile("tty.log", io.BufferedReader(io.BytesIO(terminal)), False) as log:
        text = list(log)
    assert detect(text) == "rhea"
    found: list[Finding] = []
    frames = list(records_from_log(text, "tty.log", fmt="rhea", findings=found))
    expected, expected_found = logged()
    assert [(f.name, f.direction, f.fields) for f in frames] == [
        (f.name, f.direction, f.fields) for f in expected
    ]
    assert all(f.ts == 0.0 for f in frames)
    assert [f.code for f in found] == [f.code for f in expected_found]
