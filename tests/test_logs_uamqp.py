"""Azure's C uamqp's frame trace (uamqp-python's `debug=True`) against the capture of the same
run: captures/log-uamqp-broker.log, Debian's python3-uamqp 1.5.3 logging through Python's
logging (each frame the repr of the bytes the C library wrote, `INFO b'-> [OPEN]* {...}'`).

uamqp prints no field names, no channel, no payload and no descriptor of a nested value, and
leaves out the SASL frames unless its SASL layer's trace is on (uamqp-python does not switch it
on). The rule tested: every field a record has equals the captured frame's; a captured field the
record lacks is named by a `log.not-shown` finding or was not sent (uamqp's trailing nulls). The
forms of lines are the library's own, each from `azure-uamqp-c` (`src/connection.c`,
`src/saslclientio.c`, `src/amqpvalue_to_string.c`, unchanged in form since 2015).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from amqpscope.capture.files import open_capture
from amqpscope.codec.frames import TRANSPORT, Frame
from amqpscope.dissect import Dissector
from amqpscope.findings import Finding
from amqpscope.logs import uamqp
from amqpscope.logs.detect import detect
from amqpscope.logs.reader import records_from_log

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
NAME = "log-uamqp-broker"


def captured() -> list[Frame]:
    with open_capture(str(CAPTURES / f"{NAME}.pcap")) as capture:
        return [f for f in Dissector().run(capture) if f.kind != TRANSPORT]


def logged(text: str | None = None) -> tuple[list[Frame], list[Finding]]:
    found: list[Finding] = []
    if text is None:
        text = (CAPTURES / f"{NAME}.log").read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    frames = list(records_from_log(iter(lines), f"{NAME}.log", fmt="uamqp", findings=found))
    return frames, found


def test_detected_by_content() -> None:
    lines = (CAPTURES / f"{NAME}.log").read_text().splitlines(keepends=True)
    assert detect(lines) == "uamqp"


def test_frame_for_frame_what_uamqp_shows() -> None:
    truth = json.loads((CAPTURES / f"{NAME}.json").read_text())["expect"]
    # uamqp-python does not switch its SASL layer's trace on: no SASL header or frame logged
    wire = [
        f
        for f in captured()
        if not f.name.startswith("sasl-") and "(sasl)" not in str(f.fields.get("protocol"))
    ]
    frames, found = logged()
    assert [f.code for f in found] == ["log.skipped-lines"] or found == []
    assert len({f.conn for f in frames}) == truth["connections"] == 2
    compared = 0
    for conn in (1, 2):
        for direction in ("c2s", "s2c"):
            mine = [f for f in frames if f.direction == direction and f.conn == conn]
            theirs = [f for f in wire if f.direction == direction and f.conn == conn]
            # uamqp closes its socket after sending its close: the broker's answers to its
            # detach, end and close are on the wire only
            assert [f.name for f in theirs[len(mine) :]] in ([], ["detach", "end", "close"])
            for log_frame, wire_frame in zip(mine, theirs, strict=False):
                assert (log_frame.name, log_frame.kind) == (wire_frame.name, wire_frame.kind)
                assert log_frame.channel is None  # uamqp prints none
                not_shown = {
                    f.message.split(": ")[0].split(" ", 1)[1]
                    for f in log_frame.findings
                    if f.code == "log.not-shown"
                }
                for key, value in log_frame.fields.items():
                    assert value == wire_frame.fields.get(key), (log_frame.source, key)
                for key in wire_frame.fields:
                    if key not in log_frame.fields:
                        assert key in not_shown, (log_frame.source, key)
                compared += 1
    assert compared == len(frames)
    transfers = [f for f in frames if f.name == "transfer"]
    assert len(transfers) == truth["transfers_sent"] + truth["transfers_received"]
    outcomes = [f.fields.get("state") for f in frames if f.name == "disposition" and f.conn == 2]
    assert len(outcomes) == len(truth["settled"]) == 3
    rejected = outcomes[2]
    assert isinstance(rejected, dict) and rejected["type"] == "rejected"
    assert rejected["error"]["condition"] == "amqp:not-allowed"
    assert rejected["error"]["description"] == "rejected by the test"
    # accepted or released: `* {}` cannot say which
    assert outcomes[:2] == [None, None]


@pytest.mark.parametrize(
    ("line", "name", "fields"),
    [
        # the forms the issue quotes (a Service Bus thread): an error in a detach and an end
        (
            "<- [DETACH]* {0,true,* {amqp:not-allowed,Sending is disabled,NULL}}",
            "detach",
            {"handle": 0, "closed": True, "error": ("amqp:not-allowed", "Sending is disabled")},
        ),
        (
            "-> [END]* {* {amqp:session:unattached-handle,}}",
            "end",
            {"error": ("amqp:session:unattached-handle", "")},
        ),
        # the SASL layer's names (saslclientio.c) and a map (`[key:value]` pairs)
        ("<- [SASL MECHANISMS]* {{MSSBCBS,PLAIN,ANONYMOUS}}", "sasl-mechanisms", {}),
        ("<- [SASL OUTCOME]* {0,<57 65 6C 63 6F 6D 65>}", "sasl-outcome", {"code": "ok"}),
        (
            "<- [OPEN]* {c6f2,NULL,65536,4999,120000,NULL,NULL,NULL,NULL,{[product:qpid]}}",
            "open",
            {"container-id": "c6f2", "idle-time-out": 120000},
        ),
    ],
)
def test_a_line_as_the_library_prints_it(line: str, name: str, fields: dict[str, object]) -> None:
    for text in (line, f"2026-12-02 01:52:31,101 uamqp.c_uamqp INFO b'{line}'"):
        frames, found = logged(text + "\n")
        assert not [f for f in found if f.code != "log.skipped-lines"], found
        assert [f.name for f in frames] == [name]
        for key, want in fields.items():
            got = frames[0].fields[key]
            if isinstance(want, tuple):
                assert (got["condition"], got.get("description", "")) == want
            else:
                assert got == want, key


def test_a_cut_frame_is_a_truncated_record() -> None:
    line = "<- [ATTACH]* {sender-link-1,0,true,2,0,* {amqps://localhost/q1,0,NULL,0,fal"
    frames, found = logged(line)
    assert [f.code for f in found] == ["log.cut-line"]
    assert [f.name for f in frames] == ["attach"]
    assert frames[0].source.get("truncated") is True
    assert frames[0].fields["name"] == "sender-link-1" and frames[0].fields["role"] == "receiver"


def test_a_uuid_before_2017_is_a_frame_with_nothing_shown() -> None:
    logged_line = uamqp.parse("-> [ATTACH](null)")
    assert logged_line is not None and logged_line.lossy
