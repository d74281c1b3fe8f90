"""Proton frame traces (`PN_TRACE_FRM=1`) read as frame records, against the capture of the run.

The logs and pcaps under captures/ were recorded together (captures/scenarios/logs.py): the
same conversation seen by Proton's tracer and by tcpdump. The capture's decode is the oracle:
every record the log gives must equal the captured frame it stands for (name, channel,
direction, fields, message), and the summary of both must agree on links, deliveries and
outcomes; the ground truth JSON (what the Proton client counted) checks both.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from amqpscope.capture.files import open_capture
from amqpscope.codec.frames import TRANSPORT, Frame
from amqpscope.dissect import Dissector
from amqpscope.findings import Finding
from amqpscope.logs.reader import LogReader, records_from_log
from amqpscope.track.tracker import Tracker

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
RECORDED = ("log-proton-broker", "log-proton-p2p")


def captured(name: str, messages: bool = True) -> list[Frame]:
    with open_capture(str(CAPTURES / f"{name}.pcap")) as capture:
        return list(Dissector(messages=messages).run(capture))


def logged(name: str, messages: bool = True) -> tuple[list[Frame], list[Finding]]:
    found: list[Finding] = []
    with open(CAPTURES / f"{name}.log", encoding="utf-8", newline="") as log:
        frames = list(records_from_log(log, f"{name}.log", messages=messages, findings=found))
    return frames, found


def shape(frame: Frame) -> tuple[Any, ...]:
    return (frame.name, frame.kind, frame.channel, frame.direction, frame.fields, frame.message)


@pytest.mark.parametrize("name", RECORDED)
def test_frame_for_frame(name: str) -> None:
    """Each logged connection, direction by direction, is the captured conversation."""
    wire = [f for f in captured(name) if f.kind != TRANSPORT]
    frames, found = logged(name)
    assert found == []
    assert frames, "the log gave no records"
    conns = sorted({f.conn for f in frames})
    # the broker run logs one transport; peer to peer logs both ends of one TCP connection
    assert len(conns) == (2 if name == "log-proton-p2p" else 1)
    for conn in conns:
        for direction in ("c2s", "s2c"):
            mine = [shape(f) for f in frames if f.conn == conn and f.direction == direction]
            theirs = [shape(f) for f in wire if f.direction == direction]
            assert mine == theirs, (conn, direction)
    assert any(f.message for f in frames), "transfers' payloads decode to messages"
    # sources are the lines, in order; the log has no time
    lines = [f.source["line"] for f in frames if f.source]
    assert lines == sorted(lines) and len(lines) == len(frames)
    assert all(f.ts == 0.0 and f.data == b"" for f in frames)


def _links(summary: dict[str, Any]) -> list[dict[str, Any]]:
    keep = (
        "name",
        "handle",
        "remote-handle",
        "role",
        "source",
        "target",
        "snd-settle-mode",
        "rcv-settle-mode",
        "state",
        "deliveries",
        "presettled",
        "settled",
        "unsettled",
        "aborted",
        "outcomes",
        "rejections",
    )
    return [
        {key: link.get(key) for key in keep}
        for connection in summary["connections"]
        for session in connection["sessions"]
        for link in session["links"]
    ]


def _connection_facts(summary: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {key: c.get(key) for key in ("version", "state", "headers", "sasl", "open", "close")}
        for c in summary["connections"]
    ]


def _summary(frames: list[Frame]) -> dict[str, Any]:
    tracker = Tracker()
    for frame in frames:
        tracker.feed(frame)
    tracker.finish()
    return tracker.summary()


@pytest.mark.parametrize("name", RECORDED)
def test_summary_agrees(name: str) -> None:
    """`summary` of the log and of the capture: the same links, deliveries and outcomes."""
    wire = _summary(captured(name, messages=False))
    frames, _ = logged(name, messages=False)
    for conn in sorted({f.conn for f in frames}):
        mine = _summary([f for f in frames if f.conn == conn])
        assert _links(mine) == _links(wire)
        facts = _connection_facts(mine)
        expected = _connection_facts(wire)
        for fact in (facts, expected):  # how TCP ended is the capture's to know
            for entry in fact:
                entry["state"] = entry["state"] if entry["state"] != "open" else "closed"
        assert facts == expected


def test_ground_truth_broker() -> None:
    """What the Proton client counted, from the log alone."""
    truth = json.loads((CAPTURES / "log-proton-broker.json").read_text())["expect"]
    frames, _ = logged("log-proton-broker", messages=False)
    links = {link["role"]: link for link in _links(_summary(frames))}
    assert links["sender"]["deliveries"] == truth["transfers_sent"]
    assert links["receiver"]["deliveries"] == truth["transfers_received"]
    outcomes = {k: v for k, v in links["sender"]["outcomes"].items() if v}
    assert outcomes == truth["sender_outcomes"]
    given = {k: v for k, v in links["receiver"]["outcomes"].items() if v}
    assert given == truth["receiver_outcomes"]
    # the PLAIN password the trace shows is redacted, as on the wire
    init = next(f for f in frames if f.name == "sasl-init")
    assert init.fields["initial-response"]["password"] == "<redacted>"


def test_ground_truth_p2p() -> None:
    truth = json.loads((CAPTURES / "log-proton-p2p.json").read_text())["expect"]
    frames, _ = logged("log-proton-p2p", messages=False)
    client = min(f.conn for f in frames)
    links = _links(_summary([f for f in frames if f.conn == client]))
    sender = next(link for link in links if link["role"] == "sender")
    assert sender["deliveries"] == truth["transfers_sent"]
    assert {k: v for k, v in sender["outcomes"].items() if v} == truth["sender_outcomes"]


def _lines(name: str) -> list[str]:
    return (CAPTURES / f"{name}.log").read_text().splitlines(keepends=True)


def test_damaged_lines_are_findings() -> None:
    """A frame line that does not parse is a finding with its line number; the rest is read."""
    lines = _lines("log-proton-broker")
    good, _ = logged("log-proton-broker")
    at = next(i for i, line in enumerate(lines) if "@attach" in line)
    lines[at] = lines[at].replace("handle=0x0,", "handle=0x0,, ,")
    reader = LogReader("damaged.log")
    frames = [f for n, line in enumerate(lines, 1) for f in reader.feed(line, n)]
    assert len(frames) == len(good) - 1
    assert [f.code for f in reader.findings] == ["log.bad-line"]
    assert reader.findings[0].message.startswith(f"damaged.log:{at + 1}: ")


def test_unrelated_lines_counted_and_last_line_cut() -> None:
    lines = _lines("log-proton-broker")
    noise = ["INFO starting the client\n", "  * a pasted comment -> with an arrow\n", "\n"]
    cut = lines[12][: len(lines[12]) // 2]  # the last line, cut while it was written
    reader = LogReader("noisy.log")
    mixed = [*noise, *lines[:12], *noise, cut]
    frames = [f for n, line in enumerate(mixed, 1) for f in reader.feed(line, n)]
    good, _ = logged("log-proton-broker")
    # the cut line's frame is a record of what it showed, marked truncated (issue 42)
    *whole, last = frames
    assert [shape(f) for f in whole] == [shape(f) for f in good[:12]]
    assert (last.name, last.source) == (
        good[12].name,
        {"file": "noisy.log", "line": len(mixed), "truncated": True},
    )
    assert reader.skipped == 2 * len(noise)
    assert [f.code for f in reader.findings] == ["log.cut-line"]
    assert f"noisy.log:{len(mixed)}:" in reader.findings[0].message


def test_prefixes_and_timestamps() -> None:
    """Whatever a logger puts before the trace (a timestamp, a thread, ` * `) is prefix; a
    timestamp there becomes the record's time."""
    lines = _lines("log-proton-p2p")
    good, _ = logged("log-proton-p2p")
    prefixed = [
        f"2026-01-31 12:00:{i % 60:02d}.250000 +0100 [thread-7] DEBUG proton: {line}"
        if i % 2
        else f" * {line}"
        for i, line in enumerate(lines)
    ]
    frames = list(records_from_log(prefixed, "prefixed.log"))
    assert [shape(f) for f in frames] == [shape(f) for f in good]
    stamped = [f for f in frames if f.source and f.source["line"] % 2 == 0]
    assert stamped and all(f.ts > 0 for f in stamped)
    first = next(f for f in frames if f.source and f.source["line"] == 2)
    assert first.ts == pytest.approx(1769857201.25)  # 2026-01-31T11:00:01.25Z


BROKER_LINES = (CAPTURES / "log-proton-broker.log").read_text().splitlines(keepends=True)


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(BROKER_LINES),
    st.integers(0, 400),
    st.integers(0, 40),
    st.text(max_size=8),
)
def test_mangled_lines_never_raise(line: str, at: int, cut: int, junk: str) -> None:
    """Any damage to a real line: a record or a finding, never an exception."""
    mangled = line[:at] + junk + line[at + cut :]
    reader = LogReader("mangled.log")
    frames = reader.feed(mangled, 7)
    frames += reader.flush()  # a line whose text ends unfinished waits for the next: none comes
    reader.finish()
    # a line's own findings (`log.no-time` is the log's: a prefix the damage left time-like)
    of_lines = [f for f in reader.findings if f.code.startswith("log.") and f.code != "log.no-time"]
    # a frame cut short is a truncated record beside its finding (issue 42), not a line's one
    whole = [f for f in frames if not (f.source or {}).get("truncated")]
    assert len(whole) + len(of_lines) + reader.skipped + reader.ends == 1
    assert len(frames) == len(whole) or of_lines
    for found in of_lines:
        assert found.code in ("log.bad-line", "log.cut-line")
        assert found.message.startswith("mangled.log:7: ")


def test_connections_followed_are_bounded() -> None:
    """A log naming ever more connections (a router's of days) keeps at most MAX_CONNECTIONS."""
    from amqpscope.logs import reader as reader_module

    reader = LogReader("many.log")
    opened = '[0x{:x}]: AMQP:FRAME:0 -> @open(16) [container-id="c{}"]\n'
    total = reader_module.MAX_CONNECTIONS + 50
    frames = [f for i in range(total) for f in reader.feed(opened.format(i, i), i + 1)]
    assert len(frames) == total and frames[-1].conn == total
    assert len(reader.connections) <= reader_module.MAX_CONNECTIONS
    reader.finish()
    assert reader.findings == []


def test_reused_address_is_a_new_connection() -> None:
    """Proton reuses a freed transport's address: after both ends of stream, a new connection."""
    lines = _lines("log-proton-p2p")
    frames = list(records_from_log(lines + lines, "twice.log"))
    assert sorted({f.conn for f in frames}) == [1, 2, 3, 4]


@pytest.mark.parametrize("indent", ["", "    "])
def test_wrapped_lines_are_one_frame(indent: str) -> None:
    """A logger or terminal that wraps long lines (at 100 characters, continuation lines
    indented or not): each frame is read whole, on its first line."""
    good, _ = logged("log-proton-broker")
    wrapped: list[str] = []
    first_lines: list[int] = []
    for line in _lines("log-proton-broker"):
        text = line.rstrip("\n")
        first_lines.append(len(wrapped) + 1)
        pieces = [text[i : i + 100] for i in range(0, len(text), 100)] or [""]
        wrapped.extend((indent if n else "") + piece + "\n" for n, piece in enumerate(pieces))
    assert len(wrapped) > len(good) + 20
    reader = LogReader("wrapped.log")
    frames = [f for n, line in enumerate(wrapped, 1) for f in reader.feed(line, n)]
    reader.finish()
    assert reader.findings == []
    assert [shape(f) for f in frames] == [shape(f) for f in good]
    assert [f.source["line"] for f in frames if f.source] == [
        first_lines[f.source["line"] - 1] for f in good if f.source
    ]


#: `[conn]: AMQP:FRAME:0 -> `, `[conn]:0 -> `, a router's `[C1]:  -> `: right or a little wrong
_FRAMED = st.tuples(
    st.sampled_from(["[", "x[", "[[", ""]),
    st.sampled_from(["0x55d2c8a1e0a0", "C1", "", "a b", "a]"]),
    st.sampled_from(["]:", "]", "] :", "]:]"]),
    st.sampled_from(["", " ", "  ", "\t"]),
    st.sampled_from(["", "AMQP:", "SASL:", "IO:", "TLS:", "AMQP"]),
    st.sampled_from(["", "FRAME:", "FRAME"]),
    st.sampled_from(["", " "]),
    st.sampled_from(["", "0", "12", "\u0663"]),
    st.sampled_from(["", " ", "  "]),
    st.sampled_from(["->", "<-", "-", "=>"]),
    st.sampled_from(["", " ", "  "]),
).map("".join)
_AROUND = st.sampled_from(["", "x", "[t-1] ", "2024-01-31 12:00:00 ", "\n", "\r", "@open(16) []"])


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.one_of(_FRAMED, _FRAMED, _AROUND), max_size=5).map("".join))
def test_a_line_is_split_as_its_pattern_splits_it(line: str) -> None:
    """`proton._framed` finds what `proton._LINE.search` does."""
    from amqpscope.logs import proton

    m = proton._LINE.search(line)
    wanted = None
    if m is not None:
        conn, layer, digits, direction, _ = m.groups()
        wanted = (m.start(), conn, layer, digits, direction, m.start("rest"))
    assert proton._framed(line) == wanted
