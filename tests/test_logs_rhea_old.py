# ruff: noqa: E501  (the lines as rhea 0.2.15 printed them)
"""rhea's frame trace before 0.2.16 (2015 to 2018), as rhea 0.2.15 printed it (npm, with
`DEBUG=rhea:frames`, against RabbitMQ 3.10.8; `lib/transport.js` before ac85f0e:
`[%s] RECV: %o` of `JSON.stringify(frame)` and `[%s] PENDING: %o` of a frame it sends). A
received frame names its performative (`"type":"open#10"`) and reads as the newer form's; a sent
one is a bare list of fields without its name: a `log.bad-line` each, never a skipped line."""

from __future__ import annotations

from amqpscope.findings import Finding
from amqpscope.logs.detect import detect
from amqpscope.logs.reader import records_from_log

LINES = [
    "2026-12-02T02:16:43.497Z rhea:frames [connection-1] RECV: { protocol_id: 3, major: 1, minor: 0, revision: 0 }",
    '2026-12-02T02:16:43.518Z rhea:frames [connection-1] RECV: \'{"size":52,"type":1,"performative":{"type":"sasl_mechanisms#40","sasl_server_mechanisms":["ANONYMOUS","PLAIN","AMQPLAIN"]}}\'',
    '2026-12-02T02:16:43.534Z rhea:frames [connection-1] RECV: \'{"size":17,"type":1,"performative":{"type":"sasl_outcome#44"}}\'',
    '2026-12-02T02:16:43.563Z rhea:frames [connection-1] PENDING: \'{"channel":0,"type":0,"performative":["57f84a0a-ad46-8d46-88d9-bf012f10745d",0,false,null,null,[],["/amq/queue/amqpscope.i42.old-rhea"],null,null,0]}\'',
    '2026-12-02T02:16:43.596Z rhea:frames [connection-1] RECV: \'{"size":36,"type":0,"channel":0,"performative":{"type":"begin#11","incoming_window":65535,"outgoing_window":65535,"handle_max":4294967295}}\'',
    '2026-12-02T02:16:43.614Z rhea:frames [connection-1] PENDING: \'{"channel":0,"type":0,"performative":[0,true]}\'',
    '2026-12-02T02:16:43.614Z rhea:frames [connection-1] RECV: \'{"size":23,"type":0,"channel":0,"performative":{"type":"disposition#15","role":true,"settled":true,"state":[]}}\'',
]


def test_received_frames_read_sent_ones_said() -> None:
    found: list[Finding] = []
    text = [line + "\n" for line in LINES]
    assert detect(text) == "rhea"
    records = list(records_from_log(iter(text), "old.log", fmt="rhea", findings=found))
    assert [r.name for r in records] == [
        "protocol-header",
        "sasl-mechanisms",
        "sasl-outcome",
        "begin",
        "disposition",
    ]
    assert records[1].fields["sasl-server-mechanisms"] == ["ANONYMOUS", "PLAIN", "AMQPLAIN"]
    assert records[3].fields["incoming-window"] == 65535
    assert records[3].fields["handle-max"] == 4294967295
    assert records[4].fields["role"] == "receiver" and records[4].fields["settled"] is True
    bad = [f.message for f in found if f.code == "log.bad-line"]
    assert [m.split(":")[1] for m in bad] == ["4", "6"]  # the two PENDING lines
    assert all("without its performative's name" in m for m in bad)
