"""go-amqp's debug lines of every version, each as the library printed it (issue 42).

Each line below is built from the format string of the go-amqp (github.com/Azure/go-amqp) or
vcabbage/amqp commit named beside it (`git log -p` of their `debug` calls), with the body
formatted by that version's `String()` methods. At debug level 2 and up, go-amqp prints most
frames two or three times as they pass between goroutines (the session's line, the mux's, the
connection writer's): a frame printed by several lines is one record; an excerpt that holds
only one of those lines still has its frame.
"""

from __future__ import annotations

import pytest

from amqpscope.findings import Finding
from amqpscope.logs.detect import detect
from amqpscope.logs.reader import records_from_log

T = "10:11:12.{:06d} "
ATTACH = (
    "Attach{Name: recv-1, Handle: 1, Role: Receiver, SenderSettleMode: <nil>, "
    "ReceiverSettleMode: <nil>, Source: source{Address: q1, Durable: 0, ExpiryPolicy: , "
    "Timeout: 0, Dynamic: false, DynamicNodeProperties: map[], DistributionMode: , "
    "Filter: map[], DefaultOutcome: <nil> Outcomes: [], Capabilities: []}, Target: <nil>, "
    "Unsettled: map[], IncompleteUnsettled: false, InitialDeliveryCount: 0, "
    "MaxMessageSize: 0, OfferedCapabilities: [], DesiredCapabilities: [], Properties: map[]}"
)
FLOW = (
    "Flow{NextIncomingID: 1, IncomingWindow: 5000, NextOutgoingID: 1, OutgoingWindow: 5000, "
    "Handle: 1, DeliveryCount: 0, LinkCredit: 10, Available: <nil>, Drain: false, "
    "Echo: false, Properties: map[]}"
)
# vcabbage/amqp (types.go at its HEAD): a source's DefaultOutcome has no space before Outcomes
VCABBAGE_ATTACH = ATTACH.replace("DefaultOutcome: <nil> Outcomes", "DefaultOutcome: <nil>Outcomes")
# before go-amqp 428a684 (2022-12-15) a tag was Go's %q of its bytes
OLD_TRANSFER = (
    'Transfer{Handle: 0, DeliveryID: 3, DeliveryTag: "\\x00\\x00\\x00\\x03", MessageFormat: 0, '
    "Settled: false, More: false, ReceiverSettleMode: <nil>, State: <nil>, Resume: false, "
    "Aborted: false, Batchable: false, Payload [size]: 0}"
)
# before go-amqp 2048490 (2024-12-04) the states were Accepted, Rejected{...}
OLD_DISPOSITION = (
    "Disposition{Role: Receiver, First: 3, Last: <nil>, Settled: true, State: Accepted, "
    "Batchable: false}"
)
OLD_REJECTED = (
    "Disposition{Role: Receiver, First: 4, Last: <nil>, Settled: true, State: Rejected{Error: "
    "*Error{Condition: amqp:not-allowed, Description: no, Info: map[]}}, Batchable: false}"
)
C, S = "0xc000180000", "0xc0000ac340"


def read(lines: list[str]) -> tuple[list[dict[str, object]], list[Finding]]:
    found: list[Finding] = []
    text = [T.format(i) + line + "\n" for i, line in enumerate(lines)]
    frames = list(records_from_log(iter(text), "go.log", fmt="go-amqp", findings=found))
    return [{**f.fields, "frame": f.name, "channel": f.channel} for f in frames], found


def bad(found: list[Finding]) -> list[Finding]:
    return [f for f in found if f.code in ("log.bad-line", "log.cut-line")]


@pytest.mark.parametrize(
    ("lines", "names"),
    [
        # session.go at 36806c7 (2023-04-05): `TX (Session %p): %d, %s`, alone
        ([f"TX (Session {S}): 0, {ATTACH}"], ["attach"]),
        # session.go at 36806c7: `TX (Session %p) mux frame to Conn (%p): %s`, alone
        ([f"TX (Session {S}) mux frame to Conn ({C}): {ATTACH}"], ["attach"]),
        # the three prints of one frame at debug level 2 (session.go, then conn.go's
        # `TX (Conn %p): mux frame to connWriter: %s` and `TX (connWriter %p): %s`)
        (
            [
                f"TX (Session {S}): 0, {ATTACH}",
                f"TX (Session {S}) mux frame to Conn ({C}): {ATTACH}",
                f"TX (Conn {C}): mux frame to connWriter: "
                f"Frame{{Type: AMQP, Channel: 0, Body: {ATTACH}}}",
                f"TX (connWriter {C}): Frame{{Type: AMQP, Channel: 0, Body: {ATTACH}}}",
            ],
            ["attach"],
        ),
        # conn.go at 36806c7: `RX (connReader %p): %s`, then `... mux frame to Session (%p): %s`
        # and session.go's `RX (Session %p): mux frame to link (%p): %s, %s` (the link's name)
        (
            [
                f"RX (connReader {C}): Frame{{Type: AMQP, Channel: 0, Body: {FLOW}}}",
                f"RX (connReader {C}): mux frame to Session ({S}): "
                f"Frame{{Type: AMQP, Channel: 0, Body: {FLOW}}}",
                f"RX (Session {S}): mux frame to link (0xc0001f2000): recv-1, {FLOW}",
            ],
            ["flow"],
        ),
        # the link's line alone
        ([f"RX (Session {S}): mux frame to link (0xc0001f2000): recv-1, {FLOW}"], ["flow"]),
        # ea77b26 (2023-02-08): `TX (Session): %d, %s`, `RX (connReader): %s` (no pointers)
        ([f"TX (Session): 0, {ATTACH}", f"RX (connReader): {FLOW}"], ["attach", "flow"]),
        # 5515441 (2022-12-13): `TX (attachLink): %s`, `TX (muxFlow): %s`, `TX (sender): %s`
        (
            [f"TX (attachLink): {ATTACH}", f"TX (muxFlow): {FLOW}", f"TX (sender): {OLD_TRANSFER}"],
            ["attach", "flow", "transfer"],
        ),
        # vcabbage/amqp (client.go, HEAD): `TX: %s`, `TX(Session): %s`, `TX(link): %s`,
        # `TX(Session) - tx: %s` (one transfer printed by the link and the session's mux)
        (
            [
                f"TX: {VCABBAGE_ATTACH}",
                f"TX(link): {OLD_TRANSFER}",
                f"TX(Session) - txtransfer: {OLD_TRANSFER}",
                f"RX(Session): {OLD_DISPOSITION}",
                f"TX(Session) - tx: {FLOW}",
            ],
            ["attach", "transfer", "disposition", "flow"],
        ),
    ],
)
def test_each_form_is_one_record_a_frame(lines: list[str], names: list[str]) -> None:
    records, found = read(lines)
    assert bad(found) == []
    assert [r["frame"] for r in records] == names
    for record in records:
        if record["frame"] == "attach":
            assert (
                record["handle"] == 1
                and record["name"] == "recv-1"
                and record["role"] == "receiver"
            )
            assert record["source"]["address"] == "q1"  # type: ignore[index]
        if record["frame"] == "flow":
            assert record["link-credit"] == 10 and record["incoming-window"] == 5000


def test_the_channel_a_session_line_names() -> None:
    records, _ = read([f"TX (Session {S}): 3, {ATTACH}"])
    assert records[0]["channel"] == 3


def test_old_tags_and_states() -> None:
    records, found = read(
        [f"TX(link): {OLD_TRANSFER}", f"RX: {OLD_DISPOSITION}", f"RX: {OLD_REJECTED}"]
    )
    assert bad(found) == []
    assert records[0]["delivery-tag"] == "00000003"
    assert records[1]["state"] == {"type": "accepted"}
    assert records[2]["state"]["error"]["condition"] == "amqp:not-allowed"  # type: ignore[index]


def test_a_frame_printed_twice_by_the_same_line_is_two() -> None:
    records, _ = read([f"TX (connWriter {C}): {FLOW}", f"TX (connWriter {C}): {FLOW}"])
    assert len(records) == 2


def test_detected() -> None:
    text = [
        T.format(i) + line + "\n" for i, line in enumerate([f"TX (Session {S}): 0, {ATTACH}"] * 3)
    ]
    assert detect(text) == "go-amqp"


@pytest.mark.parametrize(
    "line",
    [
        # an excerpt cut mid-frame, in both forms (with and without `Frame{...}` around it)
        f"TX (connWriter {C}): Frame{{Type: AMQP, Channel: 0, Body: Attach{{Name: recv-1, "
        "Handle: 1, Role: Receiver, SenderSettleMode: <nil>, Receiv",
        "TX: Attach{Name: recv-1, Handle: 1, Role: Receiver, SenderSettleMode: <nil>, Receiv",
    ],
)
def test_a_line_cut_mid_frame(line: str) -> None:
    found: list[Finding] = []
    frames = list(
        records_from_log(iter([T.format(1) + line]), "go.log", fmt="go-amqp", findings=found)
    )
    assert [f.code for f in found if f.code.startswith("log.c")] == ["log.cut-line"]
    assert [f.name for f in frames] == ["attach"]
    assert frames[0].source["truncated"] is True  # type: ignore[index]
    assert frames[0].fields["handle"] == 1 and frames[0].fields["role"] == "receiver"
