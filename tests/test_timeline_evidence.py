"""The merged timeline shows, under a frame, which inputs saw it and when, and the log line
that showed it (render/evidence.py, issue 44), on the logs recorded beside their captures
(captures/scenarios: the publisher's pika DEBUG log of 091-vantage, Proton's and rhea's traces
of log-proton-broker and log-rhea-broker). A single input's timeline has none of it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from amqpscope.render.evidence import REDACTED, LineBook, mask_credentials
from tests.cli import run

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
FRAME_LINE = re.compile(r"^ *(\d+) ")
EVIDENCE = "      ↳ "


def under_frames(text: str) -> dict[int, list[str]]:
    """The timeline's lines under each frame's line, by frame number."""
    out: dict[int, list[str]] = {}
    frame = 0
    for line in text.splitlines():
        if line.startswith(EVIDENCE):
            out.setdefault(frame, []).append(line)
            continue
        m = FRAME_LINE.match(line)
        if m:
            frame = int(m.group(1))
    return out


def records(*args: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in run("read", "--json", *args).stdout.splitlines()]


@pytest.mark.parametrize(
    "capture,log",
    [
        ("091-vantage.pcap", "091-vantage.log"),
        ("log-proton-broker.pcap", "log-proton-broker.log"),
        ("log-rhea-broker.pcap", "log-rhea-broker.log"),
    ],
)
def test_the_log_line_is_shown_under_the_frames_it_showed_and_no_other(
    capture: str, log: str
) -> None:
    """Under each frame the log showed (its `seen`, in --json): the capture's packet and the
    log's file:line with that line's text as the file holds it; under the others, nothing."""
    pcap, logfile = str(CAPTURES / capture), str(CAPTURES / log)
    logged = {
        r["frame"]: (s["line"], [x["packet"] for x in r["seen"] if x["input"] == "A"])
        for r in records(pcap, logfile)
        for s in r["seen"]
        if s["input"] == "B"
    }
    assert logged
    file_lines = Path(logfile).read_text(encoding="utf-8").splitlines()
    shown = under_frames(run("read", pcap, logfile).stdout)
    assert set(shown) == set(logged)  # none under a frame the log did not show
    for number, (line, packets) in logged.items():
        [of_capture] = [x for x in shown[number] if f" A {pcap} packet " in x]
        assert of_capture.endswith(f"packet {packets[0]}")
        [of_log] = [x for x in shown[number] if f" B {logfile}:{line}  " in x]
        text = of_log.split(f" B {logfile}:{line}  ", 1)[1]
        expected = file_lines[line - 1].rstrip()
        if "sasl-init" in expected or "sasl_init" in expected:
            assert "guest\\x00guest" not in text and "116,0,103" not in text, text
            assert REDACTED in text
            continue
        cut = text.removesuffix("…")
        assert expected.startswith(cut) and (cut == expected or len(text) == 200), text


def test_a_sasl_password_in_a_log_line_shows_with_show_secrets_only() -> None:
    """Proton's trace logs the PLAIN response whole: masked as the frame's line masks it."""
    pcap = str(CAPTURES / "log-proton-broker.pcap")
    logfile = str(CAPTURES / "log-proton-broker.log")
    hidden = run("read", pcap, logfile).stdout
    assert "guest\\x00guest" not in hidden
    assert 'initial-response=b"\\x00guest\\x00<redacted>"' in hidden
    shown = run("read", pcap, logfile, "--show-secrets").stdout
    assert 'initial-response=b"\\x00guest\\x00guest"' in shown


def test_a_single_input_shows_no_evidence_lines() -> None:
    for name in ("091-vantage.pcap", "log-proton-broker.log"):
        assert EVIDENCE.strip() not in run("read", str(CAPTURES / name)).stdout


def test_two_captures_show_both_packets_and_times() -> None:
    """Two vantage points: each frame both hold shows both inputs, with their own times."""
    a, b = str(CAPTURES / "091-vantage.pcap"), str(CAPTURES / "091-vantage-b.pcap")
    merged = records(a, b)
    both = {r["frame"]: r["seen"] for r in merged if {s["input"] for s in r["seen"]} == {"A", "B"}}
    assert both
    shown = under_frames(run("read", a, b).stdout)
    t0 = merged[0]["ts"]
    for number, seen in both.items():
        lines = shown[number]
        assert len(lines) == 2
        for line, entry in zip(lines, seen, strict=True):
            path = a if entry["input"] == "A" else b
            assert line.endswith(f" {entry['input']} {path} packet {entry['packet']}")
            assert f"{entry['ts'] - t0:10.6f}" in line


def test_credentials_in_log_text_forms() -> None:
    proton = 'AMQP:FRAME:0 -> @sasl-init(65) [mechanism=:PLAIN, initial-response=b"\\x00u\\x00pw"]'
    assert mask_credentials(proton, "sasl-init") == proton.replace("\\x00pw", "\\x00<redacted>")
    other = 'initial-response=b"token-bytes"]'
    assert mask_credentials(other, "sasl-init") == 'initial-response=b"<redacted>"]'
    rhea = '{"initial_response":{"type":"Buffer","data":[0,117,0,112,119]}}'
    assert mask_credentials(rhea, "sasl-init") == rhea.replace("112,119", "<redacted>")
    # a credential frame in a form not known here: no text rather than the password
    start_ok = "Sending Connection.StartOk response=\\x00u\\x00pw"
    assert mask_credentials(start_ok, "connection.start-ok") is None
    url = "connecting to amqp://guest:s3cret@broker:5672/"
    assert mask_credentials(url, "open") == "connecting to amqp://guest:<redacted>@broker:5672/"


def test_lines_are_read_back_in_any_order_and_not_from_stdin(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("".join(f"line {n}\n" for n in range(1, 10_001)), encoding="utf-8")
    book = LineBook()
    assert book.line(str(log), 9000) == "line 9000\n"
    assert book.line(str(log), 3) == "line 3\n"  # behind what is kept: read again
    assert book.line(str(log), 10_001) is None
    assert book.line("-", 1) is None
    assert book.line(str(tmp_path / "gone.log"), 1) is None
    book.close()


def test_a_log_line_cannot_drive_the_terminal_and_is_cut(tmp_path: Path) -> None:
    """A line's text is the log's, escaped as every captured text is (`render.lines.safe`),
    read through the log's compression, and cut to the limit with an ellipsis."""
    import gzip

    from amqpscope.codec.frames import Frame
    from amqpscope.render.evidence import seen_pieces

    text = "2026-12-02 01:54:30,462 DEBUG x \x1b]0;owned\x07 \u202e" + "y" * 300 + "\n"
    log = tmp_path / "hostile.log.gz"
    log.write_bytes(gzip.compress(("first\n" + text).encode()))
    frame = Frame("0-9-1", "method", "basic.ack", 1, b"", ts=10.0)
    frame.seen = [("A", "a.pcap", "packet", 7, 10.0), ("B", str(log), "line", 2, 9.5)]
    book = LineBook()
    capture_line, log_line = ("".join(t for t, _ in p) for p in seen_pieces(frame, 9.0, book))
    book.close()
    assert capture_line == f"{EVIDENCE}  1.000000 A a.pcap packet 7"
    assert log_line.startswith(f"{EVIDENCE}  0.500000 B {log}:2  2026-12-02 01:54:30,462 DEBUG")
    assert "\x1b" not in log_line and "\x07" not in log_line and "\u202e" not in log_line
    assert "\\x1b]0;owned\\x07 \\u202e" in log_line
    assert log_line.endswith("…") and len(log_line.split(":2  ", 1)[1]) == 200
