"""amqpnetlite's frame lines besides a performative's own (issue 42), each as
`src/Connection.cs` writes it (the same format strings from ed63e4a, 2015-03, to its HEAD):
`Trace.WriteLine(TraceLevel.Frame, "SEND (ch={0}) {1} payload {2}", channel, transfer,
payloadSize)`, `"RECV (ch={0}) {1} payload {2}"` and `"SEND (ch=0) empty"` (a heartbeat), behind
the listener's `[hh:mm:ss.fff]` prefix as the samples print it."""

from __future__ import annotations

from amqpscope.findings import Finding
from amqpscope.logs.detect import detect
from amqpscope.logs.reader import records_from_log

LINES = [
    "[10:11:12.101] SEND (ch=0) transfer(handle:0,delivery-id:0,delivery-tag:00000000,"
    "message-format:0,settled:False,batchable:True) payload 123",
    "[10:11:12.102] RECV (ch=0) transfer(handle:1,delivery-id:5,delivery-tag:01,message-format:0)"
    " payload 56",
    "[10:11:12.103] SEND (ch=0) empty",
    "[10:11:12.104] RECV (ch=0) disposition(role:True,first:0,settled:True,state:accepted())",
]


def test_payload_sizes_and_heartbeats() -> None:
    text = [line + "\n" for line in LINES]
    assert detect(text) == "amqpnetlite"
    found: list[Finding] = []
    records = list(records_from_log(iter(text), "net.log", fmt="amqpnetlite", findings=found))
    assert [f for f in found if f.code in ("log.bad-line", "log.cut-line")] == []
    assert [r.name for r in records] == ["transfer", "transfer", "heartbeat", "disposition"]
    assert records[0].fields["delivery-tag"] == "00000000" and records[0].fields["settled"] is False
    assert records[1].fields["delivery-id"] == 5 and records[1].fields["handle"] == 1
    for record in records[:2]:  # the payload's size only: the bytes are not in the log
        assert any(f.code == "log.not-shown" and "payload" in f.message for f in record.findings), (
            record.findings
        )
