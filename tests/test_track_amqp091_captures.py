"""Every recorded 0-9-1 scenario's ground truth, asserted from `amqpscope summary FILE --json`.

The ground truth (captures/NAME.json, `expect`) was counted by pika while the scenario ran, never
read from the capture. The summary is what the state tracker made of the frames: messages settled
(multiple acks expanded), confirms, returns, transactions, each channel error on its own channel
entry, the refused login, RPC pairs. The tracker's findings on each capture are listed here too:
each one is true of its scenario, and no other is raised.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from amqpscope.cli import main
from tests.oracle import keys_for
from tests.test_ground_truth import scenario as scenario_frames

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
SCENARIOS = [
    path
    for path in sorted(CAPTURES.glob("*.json"))
    if json.loads(path.read_text())["protocol"] in ("0-9-1", "0-8/0-9")
]

#: the tracker's findings on each capture (codes, in order); none on the others
FINDINGS = {
    "091-channel-errors": [
        "amqp091.channel-error",  # 406 inequivalent arg
        "amqp091.channel-error",  # 403 amq.foo
        "amqp091.unknown-delivery-tag",  # basic.ack 999 ...
        "amqp091.channel-error",  # ... and its 406
    ],
    "091-confirms-return": ["amqp091.returned"],
    "091-killed-consumer": [
        "amqp091.prefetch-saturated",  # the 5 deliveries the prefetch allows, never acked
        "amqp091.transport-closed",  # killed: TCP ended with no connection.close
        "amqp091.unacked-at-end",  # the 5, once, when TCP ended (not again at the capture's end)
    ],
    "091-killed-autoack-consumer": ["amqp091.transport-closed"],  # killed; no-ack: none unacked
    "091-hostile-names": ["amqp091.channel-error"],  # 404 for the missing queue
    "091-html-names": ["amqp091.channel-error"],  # 404 for the missing queue
    # captures/scenarios/garagemq_methods.py: 404 for the missing queue's passive declare
    "091-passive-declare": ["amqp091.channel-error"],
    "091-gmq-passive-declare": ["amqp091.channel-error"],
    # garagemq never answers tx.select: the client closed the connection 3 s later
    "091-gmq-tx": ["amqp091.unanswered"],
    "091-gmq-stuck-delete": ["amqp091.unanswered"],  # a queue.delete, likewise
    # amqp-consume --count 2 sets basic.qos prefetch_count=2: both come at once
    "091-amqp-tools": ["amqp091.prefetch-saturated"],
    "091-gmq-amqp-tools": ["amqp091.prefetch-saturated"],
    "091-qos-prefetch": ["amqp091.prefetch-saturated"],
    "091-refused-login": ["amqp091.login-refused"],
    "091-rpc": ["amqp091.prefetch-saturated"],  # the server's prefetch of 1, full per request
    "mid-stream": ["amqp091.mid-stream"],
    # captures/scenarios/logs.py: a tag acked twice, and the broker's 406 for it
    "log-pika-closed": ["amqp091.unknown-delivery-tag", "amqp091.channel-error"],
    # captures/scenarios/logs.py: basic.qos prefetch_count=2, both delivered at once
    "log-pika-broker": ["amqp091.prefetch-saturated"],
    # captures/scenarios/journeys.py: prefetch 1 on each of the two consumers' channels
    "091-journeys": ["amqp091.prefetch-saturated"] * 2,
    # captures/scenarios/vantage.py: the same two consumers
    "091-vantage": ["amqp091.prefetch-saturated"] * 2,
    # captures/scenarios/diagnose.py
    "091-blocked-publisher": ["amqp091.blocked"],  # the memory alarm
    "091-stalled-consumer": ["amqp091.prefetch-saturated"],  # first at tag 5, the stall at 8
    "091-bad-acks": [  # a double ack, an ack on the wrong channel, an ack after a reopen
        "amqp091.unknown-delivery-tag",
        "amqp091.channel-error",
    ]
    * 3,
    # captures/scenarios/otel.py: prefetch 4, all four delivered at once; the ack of tag 999
    "091-otel": [
        "amqp091.prefetch-saturated",
        "amqp091.unknown-delivery-tag",
        "amqp091.channel-error",
    ],
    "091-missed-heartbeats": [
        "amqp091.transport-closed",  # the broker gave up on the paused client: TCP RST
    ],
    # x-overflow=reject-publish: seq 3, 4 and 5 nacked, each by its own basic.nack
    "091-nacked-publish": ["amqp091.publish-nacked"] * 3,
    "091-slow-confirm": ["amqp091.blocked"],  # the short alarm that held back one confirm
    "091-unconfirmed-publish": [
        "amqp091.blocked",  # the alarm left on
        "amqp091.transport-closed",  # pika's blocked_connection_timeout: FIN, no close
        "amqp091.unconfirmed-at-end",  # seq 3-5, when the TCP connection ended
    ],
    "091-redelivered": [
        "amqp091.prefetch-saturated",  # consumer A holding its 3 of 3
        "amqp091.unacked-at-end",  # ... when it closed its channel
    ],
    # captures/scenarios/coverage.py: the broker's basic.cancel, then its 320
    "091-broker-cancel-and-close": ["amqp091.consumer-cancelled", "amqp091.connection-error"],
    "091-flow-refused": [
        "amqp091.prefetch-saturated",  # prefetch 1, the delivery held
        "amqp091.flow-stopped",  # the client's channel.flow active=false ...
        "amqp091.connection-error",  # ... which RabbitMQ refuses: 540
        "amqp091.unacked-at-end",
    ],
    # captures/scenarios/garagemq_close.py: garagemq hangs up (FIN) on the silent client, which
    # wakes 3 s later and publishes into the closed socket
    "091-gmq-heartbeat-fin": ["amqp091.transport-closed", "amqp091.heartbeat-missed"],
    # amqp-consume -c 3 asks for 3 at a time (basic.qos 3) and is sent all 3 at once
    "091-gmq-happy": ["amqp091.prefetch-saturated"],
    "091-gmq-refused-login": ["amqp091.login-refused"],  # 530 NOT_ALLOWED, not RabbitMQ's 403
    "091-gmq-missing-exchange": [
        "amqp091.channel-error",  # 404: the exchange does not exist
        "amqp091.connection-error",  # 501 on the publish's content header, in flight
        "amqp091.sent-after-close",  # garagemq's second connection.close
    ],
    # captures/scenarios/clients091.py (py-amqp and php-amqplib; their happy paths: none)
    # the 404 answers py-amqp's one confirm-mode publish: no unconfirmed-at-end
    "091-pyamqp-missing-exchange": ["amqp091.channel-error"],
    "091-php-amqplain-gmq": ["amqp091.login-refused"],  # AMQPLAIN, which garagemq does not offer
    "091-php-killed": [
        "amqp091.prefetch-saturated",  # prefetch 2, both delivered, neither acked
        "amqp091.transport-closed",  # SIGKILL: the kernel's FIN, no close
        "amqp091.unacked-at-end",
    ],
    "091-pyamqp-heartbeat-silent": ["amqp091.transport-closed"],  # RabbitMQ's RST
    "091-pyamqp-missing-exchange-gmq": [
        "amqp091.channel-error",  # 404, the one confirm-mode publish's answer
        "amqp091.connection-error",  # 501 on that publish's content, written with its method
        "amqp091.sent-after-close",  # garagemq's second connection.close
        "amqp091.sent-after-close",  # its channel.open-ok to py-amqp's revival, after it
    ],
    "091-aiormq-no-close": ["amqp091.transport-closed"],  # exited: FIN, no connection.close
    "091-aiormq-idle-gmq": [
        "amqp091.transport-closed",  # garagemq's FIN after 30 s idle
        "amqp091.connection-error",  # aiormq's connection.close 500 after it
    ],
    # captures/scenarios/clients091_go_node.py: prefetch 4 and all 4 delivered before the acks
    "091-amqplib-happy": ["amqp091.prefetch-saturated"],
    "091-amqplib-happy-gmq": ["amqp091.prefetch-saturated"],
    "091-go-happy": ["amqp091.prefetch-saturated"],
    "091-go-happy-gmq": ["amqp091.prefetch-saturated"],
    "091-streadway-happy": ["amqp091.prefetch-saturated"],
    "091-amqplib-redeclare": ["amqp091.channel-error"],  # 406 inequivalent arg
    "091-go-return": ["amqp091.returned"],  # 312 NO_ROUTE (and the publish confirmed)
    "091-go-return-gmq": ["amqp091.returned"],  # garagemq's 312 "No route"
    "091-go-cancel": ["amqp091.consumer-cancelled"],  # its own channel 2 deleted the queue
}


@cache
def summary_of(file: str) -> dict[str, Any]:
    keys = keys_for(CAPTURES / file)  # TLS captures: their key log, through --keylog
    extra = ["--keylog", str(keys)] if keys else []
    result = CliRunner().invoke(main, ["summary", str(CAPTURES / file), "--json", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def scenario(meta_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    meta = json.loads(meta_path.read_text())
    return meta["expect"], summary_of(meta["file"])


def entries(summary: dict[str, Any]) -> list[dict[str, Any]]:
    return [ch for conn in summary["connections"] for ch in conn["channels"]]


def total(summary: dict[str, Any], key: str) -> int:
    return sum(ch[key] for ch in entries(summary))


#: recorded keys this test compares outside `checks`
HERE = {"acked_messages", "unacked_when_killed", "unacked_when_closed", "unconfirmed"}
HERE |= {"nacked_messages"}  # amqplib's nackAll: one nack frame, several messages
#: recorded keys compared by other tests (or describing how the scenario ran, not a count the
#: summary gives): a key a new recording adds fails test_counts_match_the_scenario until it is
#: compared or listed here
_DECODED = "decoded frames (test_amqp091_decoder, test_ground_truth)"
_DIAGNOSED = "diagnoses (test_diagnose_captures)"
_INPUTS = "inputs (TLS, logs, the report, hostile names)"
_COVERAGE = "diagnoses (test_coverage_recorded)"
_NOTES = "how the scenario ran (pika's view, no count the summary gives)"
_FOLLOWED = "journeys (test_follow)"
_ANSWERED = "test_answers_are_the_clients"
_TOOLS = "test_amqp_tools_got_what_the_tools_printed"
_GARAGEMQ = "diagnoses (test_diagnose_garagemq)"
_METRICS = "metrics (test_metrics: the busiest queues keep their names)"
ELSEWHERE: dict[str, str] = {
    "traces": "spans (test_otel: the trace context each message carried)",
    "settlements": "spans (test_otel: each delivery's tag and what the consumer did)",
    "vantage": "vantage points merged (test_merge)",
    "cancelled_by_broker": _COVERAGE,
    "closed_by_broker": _COVERAGE,
    "body": _DECODED,
    "body_sha256": _DECODED,
    "received_body_sha256": _DECODED,
    "got_body": _DECODED,
    "get_ok_details": _DECODED,
    "exchange_types": _DECODED,
    "purged_messages": _DECODED,
    "queue_message_count_at_delete": _DECODED,
    "replies": _DECODED,
    "requests_sent": _DECODED,
    "return_details": _DECODED,
    "delivery_log": _DECODED,
    "delivery_tags": _DECODED,
    "confirm_selects": _DECODED,
    "exchange_binds": _DECODED,
    "exchange_declares": _DECODED,
    "exchange_deletes": _DECODED,
    "exchange_unbinds": _DECODED,
    "queue_binds": _DECODED,
    "queue_declares": _DECODED,
    "queue_deletes": _DECODED,
    "queue_purges": _DECODED,
    "queue_unbinds": _DECODED,
    "tx_selects": _DECODED,
    "connection_starts_received": _DECODED,
    "negotiated_frame_max": _DECODED,
    "negotiated_heartbeat": _DECODED,
    "heartbeats_received_by_client": _DECODED,
    "heartbeats_sent_by_client": _DECODED,
    "channel_numbers_opened": _DECODED,
    "connection_errors": _DECODED,
    "connection_opened": _DECODED,
    "channel_errors": _DECODED,
    "prefetch_count": _DECODED,
    "blocked": _DIAGNOSED,
    "channel_a": _DIAGNOSED,
    "confirms": _DIAGNOSED,
    "deliveries_log": _DIAGNOSED,
    "gave_up": _DIAGNOSED,
    "last_ack_before_stall_tag": _DIAGNOSED,
    "left_in_queue": _DIAGNOSED,
    "missing_queue": _DIAGNOSED,
    "oldest_unacked_seconds": _DIAGNOSED,
    "silence": _DIAGNOSED,
    "slow_confirm": _DIAGNOSED,
    "stall": _DIAGNOSED,
    "unacked_in_stall": _DIAGNOSED,
    "killed_with": _DIAGNOSED,
    "keylog": _INPUTS,
    "tls": _INPUTS,
    "log": _INPUTS,
    "channel_close": _INPUTS,
    "app_id": _INPUTS,
    "queue": _INPUTS,
    "alarm": _NOTES,
    "watermark_restored": _NOTES,
    "blocked_times": _NOTES,
    "before_capture": _NOTES,
    "connections_established_before_capture": _NOTES,
    "exception": _NOTES,
    "exception_text": _NOTES,
    "exchanges": _NOTES,
    "log_lines": _NOTES,
    "nacked_seqs": _NOTES,
    "protocol_header_replies": _NOTES,
    "queue_arguments": _NOTES,
    "queue_declare_oks": _NOTES,
    "queue_message_count_after": _NOTES,
    "replies_received": _NOTES,
    "reply_queue_server_named": _NOTES,
    "requests_served": _NOTES,
    "channels_opened": _NOTES,
    "channel_closes": _NOTES,
    "passive_declares": _DIAGNOSED,
    "passive_found": _DIAGNOSED,
    "close_reply_text": _DIAGNOSED,
    "waited_s": _DIAGNOSED,
    "delivered": _DIAGNOSED,
    "delivered_twice": _DIAGNOSED,
    "redelivered_flag_seen": _DIAGNOSED,
    "connection_names": _FOLLOWED,
    "published": _FOLLOWED,
    "tx_select_ok": _ANSWERED,
    "queue_delete_ok": _ANSWERED,
    "connection_close_ok": _ANSWERED,
    "requeued": _ANSWERED,
    "tools": _TOOLS,
    "queues_in_order": _METRICS,
    "client_error": _GARAGEMQ,
    "client_errors": _GARAGEMQ,
    "exchange": _GARAGEMQ,
    "amqp_tools": _NOTES,
    "tools_deliveries": "part of the deliveries compared here (amqp-consume's)",
    "deliveries_by_queue": _METRICS,
    "declared": _TOOLS,
    "got": _TOOLS,
    "consumed": _TOOLS,
    "deleted_message_count": _TOOLS,
    "client_library": _NOTES,  # captures/scenarios/clients091.py: py-amqp's, php-amqplib's
    "consumer_tag": "test_clients091_consumer_tags",
    "nothing_more_in_s": _NOTES,
    "missing_exchange": _DIAGNOSED,
    "idle_s": _NOTES,
    "silent_s": _DIAGNOSED,
    "close_failed": _DIAGNOSED,
    "lost_after_s": _DIAGNOSED,
    "lost_with": _NOTES,
}

#: the counts test_counts_match_the_scenario compares with the summary's
COUNTS = (
    "publishes",
    "deliveries",
    "nacks",
    "rejects",
    "redeliveries",
    "nacks_requeue",
    "returns",
    "confirms_acked",
    "confirms_nacked",
    "gets",
    "tx_commits",
    "tx_rollbacks",
    "get_ok",
    "get_empty",
    "consumers",
    "cancels",
    "channels",
    "connections",
    "max_unacked",
    "correlations_matched",
    "body_size",
    "connection_closes",
    "acks",
    "acks_multiple",
)


@pytest.mark.parametrize("meta_path", SCENARIOS, ids=lambda p: p.stem)
def test_counts_match_the_scenario(meta_path: Path) -> None:
    expect, summary = scenario(meta_path)
    chans = entries(summary)
    checks = {
        "publishes": total(summary, "publishes"),
        "deliveries": total(summary, "deliveries"),
        "nacks": total(summary, "nacks"),
        "rejects": total(summary, "rejects"),
        "redeliveries": total(summary, "redelivered"),
        "nacks_requeue": total(summary, "requeued"),
        "returns": total(summary, "returns"),
        "confirms_acked": sum(ch["confirms"]["acked"] for ch in chans),
        "confirms_nacked": sum(ch["confirms"]["nacked"] for ch in chans),
        "gets": sum(sum((ch["get"] or {}).get(k, 0) for k in ("ok", "empty")) for ch in chans),
        "tx_commits": sum(ch["tx"]["commits"] for ch in chans),
        "tx_rollbacks": sum(ch["tx"]["rollbacks"] for ch in chans),
        "get_ok": sum((ch["get"] or {}).get("ok", 0) for ch in chans),
        "get_empty": sum((ch["get"] or {}).get("empty", 0) for ch in chans),
        "consumers": sum(len(ch["consumers"]) for ch in chans),
        "cancels": sum(c["cancelled-by"] == "client" for ch in chans for c in ch["consumers"]),
        "channels": len(chans),
        "connections": len(summary["connections"]),
        "max_unacked": max((ch["max-unacked"] for ch in chans), default=0),
        "correlations_matched": len(summary["rpc"]),
        "body_size": sum(ch["bytes"]["published"] for ch in chans),
        "connection_closes": sum(
            (c["close"] or {}).get("by") == "client" for c in summary["connections"]
        ),
    }
    # acks: ack frames; acked_messages: what they settled (one multiple ack settles several)
    checks["acks"] = sum(ch["settle-frames"]["ack"] for ch in chans)
    checks["acks_multiple"] = sum(ch["settle-frames"]["multiple"] for ch in chans)
    unknown = [f for f in summary["findings"] if f["code"] == "amqp091.unknown-delivery-tag"]
    messages = expect.get("acked_messages", expect.get("acks", 0) - len(unknown))
    assert total(summary, "acks") == messages
    # nacks likewise: nack frames, and the messages they settled where a multiple nack (amqplib's
    # nackAll, delivery-tag 0) settled several
    checks["nacks"] = sum(ch["settle-frames"]["nack"] for ch in chans)
    assert total(summary, "nacks") == expect.get("nacked_messages", expect.get("nacks", 0))
    # the summary counts a get-ok as a delivery (the broker hands a message over either way);
    # the recordings count the consumer's deliveries and their get-oks apart
    wanted = dict(expect)
    if "deliveries" in wanted:
        wanted["deliveries"] += expect.get("get_ok", 0)
    assert sorted(checks) == sorted(COUNTS)
    for key, got in checks.items():
        if key in wanted:
            assert got == wanted[key], f"{key}: {got} != {wanted[key]}"
    # both ways: each count the scenario recorded is compared, here or where ELSEWHERE says
    unaccounted = set(expect) - set(checks) - set(HERE) - set(ELSEWHERE)
    assert not unaccounted, f"recorded but compared nowhere: {sorted(unaccounted)}"
    # nothing left outstanding in any recorded scenario (every delivery was settled or no-ack)
    # but those whose consumer was killed or closed its channel holding what pika counted
    left = expect.get("unacked_when_killed", expect.get("unacked_when_closed", 0))
    assert total(summary, "unacked") == left
    # and the publisher that gave up on a blocked broker, leaving what pika never saw confirmed
    pending = sum(ch["confirms"]["pending"] for ch in chans)
    assert pending == len(expect.get("unconfirmed", []))


def test_every_count_compared_is_recorded_by_a_scenario() -> None:
    """The other way: no count is compared only if some scenario happens to record it, and
    none of them does."""
    recorded = {key for path in SCENARIOS for key in json.loads(path.read_text())["expect"]}
    assert not set(COUNTS) - recorded
    assert not (set(HERE) | set(ELSEWHERE)) - recorded  # no entry for a key nobody records


@pytest.mark.parametrize("meta_path", SCENARIOS, ids=lambda p: p.stem)
def test_the_tracker_raises_exactly_the_true_findings(meta_path: Path) -> None:
    _expect, summary = scenario(meta_path)
    got = [f["code"] for f in summary["findings"] if f["code"].startswith("amqp091.")]
    assert got == FINDINGS.get(meta_path.stem, [])


def test_each_channel_error_is_on_its_own_entry_though_the_number_is_reused() -> None:
    expect, summary = scenario(CAPTURES / "091-channel-errors.json")
    chans = entries(summary)
    errors = [ch for ch in chans if ch["close"] and ch["close"]["by"] == "server"]
    assert [
        (ch["channel"], ch["close"]["reply-code"], ch["close"]["reply-text"]) for ch in errors
    ] == [(e["channel"], e["code"], e["text"]) for e in expect["channel_errors"]]
    assert [ch["use"] for ch in errors] == [1, 2, 3]
    assert [ch["close"]["class-method"] for ch in errors] == [
        "queue.declare",
        "queue.declare",
        "basic.ack",
    ]
    opened = Counter(ch["channel"] for ch in chans if ch["opened-frame"] is not None)
    assert opened[1] == len(expect["channel_numbers_opened"])
    # the unknown tag is linked to the 406 that follows it
    unknown = next(f for f in summary["findings"] if f["code"] == "amqp091.unknown-delivery-tag")
    assert errors[2]["close"]["cause-frame"] == unknown["frame"]
    assert "999" in unknown["message"]


def test_the_refused_login() -> None:
    expect, summary = scenario(CAPTURES / "091-refused-login.json")
    (conn,) = summary["connections"]
    (error,) = expect["connection_errors"]
    assert (conn["close"]["reply-code"], conn["close"]["reply-text"]) == (
        error["code"],
        error["text"],
    )
    assert conn["close"]["by"] == "server" and conn["channels"] == []
    assert conn["user"] == "guest" and conn["mechanism"] == "PLAIN"
    assert conn["state"] != "open" and not expect["connection_opened"]
    (refused,) = summary["findings"]
    assert refused["frame"] == 4 and "guest" in refused["message"]


def test_confirms_and_the_returned_publish() -> None:
    expect, summary = scenario(CAPTURES / "091-confirms-return.json")
    (chan,) = entries(summary)
    assert chan["confirms"]["selected"] and chan["confirms"]["latency-ms"]["count"] == 11
    assert [
        (r["reply-code"], r["reply-text"], r["exchange"], r["routing-key"])
        for r in chan["returned"]
    ] == [
        (d["reply_code"], d["reply_text"], d["exchange"], d["routing_key"])
        for d in expect["return_details"]
    ]
    assert chan["returned"][0]["publish-frame"] is not None


def test_transactions_group_their_publishes_and_acks() -> None:
    _expect, summary = scenario(CAPTURES / "091-tx.json")
    (chan,) = entries(summary)
    groups = [(t["outcome"], t["publishes"], t.get("acks")) for t in chan["tx"]["transactions"]]
    assert groups == [("commit", 1, 0), ("rollback", 1, None), ("commit", 0, 1)]


def test_tx_selected_only_once_the_broker_answered_tx_select() -> None:
    """garagemq never sent tx.select-ok: the channel never was in a transaction."""
    expect, summary = scenario(CAPTURES / "091-gmq-tx.json")
    (chan,) = entries(summary)
    assert expect["tx_selects"] == 1 and expect["tx_select_ok"] == 0
    assert chan["tx"]["selected"] is False
    (unanswered,) = [f for f in summary["findings"] if f["code"] == "amqp091.unanswered"]
    asked = re.search(r"tx\.select \(frame (\d+), ([\d.]+) s before\)", unanswered["message"])
    assert asked and chan["tx"]["select-unanswered"] == int(asked[1])
    assert abs(float(asked[2]) - expect["waited_s"]) < 0.1 * expect["waited_s"]
    assert "tx.select" in unanswered["message"] and "connection closed" in unanswered["message"]
    _expect, summary = scenario(CAPTURES / "091-tx.json")  # RabbitMQ answers it
    (chan,) = entries(summary)
    assert chan["tx"]["selected"] is True and "select-unanswered" not in chan["tx"]


def test_prefetch_and_saturation() -> None:
    expect, summary = scenario(CAPTURES / "091-qos-prefetch.json")
    (chan,) = entries(summary)
    assert chan["prefetch"]["count"] == expect["prefetch_count"]
    assert chan["prefetch"]["saturations"] >= 1 and chan["prefetch"]["saturated-ms"] > 0
    assert chan["ack-latency-ms"]["count"] == expect["deliveries"]


def test_tune_and_heartbeats() -> None:
    expect, summary = scenario(CAPTURES / "091-heartbeats.json")
    (conn,) = summary["connections"]
    assert conn["tune"]["negotiated"]["heartbeat"] == expect["negotiated_heartbeat"]
    frames = conn["heartbeat"]["frames"]
    assert frames == {
        "c2s": expect["heartbeats_sent_by_client"],
        "s2c": expect["heartbeats_received_by_client"],
    }
    assert conn["heartbeat"]["missed"] == {"c2s": 0, "s2c": 0}
    expect, summary = scenario(CAPTURES / "091-large-body.json")
    assert (
        summary["connections"][0]["tune"]["negotiated"]["frame-max"]
        == (expect["negotiated_frame_max"])
    )


def test_products_and_the_handshake() -> None:
    _expect, summary = scenario(CAPTURES / "091-publish-consume.json")
    (conn,) = summary["connections"]
    assert conn["server-product"]["product"] == "RabbitMQ"
    assert conn["server-product"]["version"] == "3.10.8"
    assert conn["client-product"]["product"] == "Pika Python Client Library"
    assert (conn["vhost"], conn["user"], conn["state"]) == ("/", "guest", "closed")
    expect, summary = scenario(CAPTURES / "091-legacy-headers.json")
    assert [c["version"] for c in summary["connections"]] == ["0-8", "0-9"]
    assert all(c["server-product"]["product"] == "RabbitMQ" for c in summary["connections"])
    expect, summary = scenario(CAPTURES / "091-bad-header.json")
    assert [c["state"] for c in summary["connections"]] == ["refused"] * expect["connections"]


def test_rpc_pairs_across_two_connections() -> None:
    expect, summary = scenario(CAPTURES / "091-rpc.json")
    pairs = summary["rpc"]
    assert len(pairs) == expect["correlations_matched"] == summary["rpc-stats"]["pairs"]
    assert len({p["correlation-id"] for p in pairs}) == expect["requests_sent"]
    for pair in pairs:
        assert pair["request"]["conn"] == pair["answered"]["conn"] != pair["reply"]["conn"]
        assert pair["served"]["conn"] == pair["reply"]["conn"]
        assert 0 < pair["service-ms"] < pair["latency-ms"]


@pytest.mark.parametrize("meta_path", SCENARIOS, ids=lambda p: p.stem)
def test_journeys_match_every_first_delivery_to_its_publish(meta_path: Path) -> None:
    expect, summary = scenario(meta_path)
    deliveries = total(summary, "deliveries")
    redelivered = total(summary, "redelivered")  # those the broker marked
    journeys = summary["journeys"]
    # and those it did not (garagemq): a message delivered again, as the client saw it
    unmarked = sum(j.get("unmarked", 0) for j in journeys)
    assert unmarked == len(expect.get("delivered_twice", [])) - expect.get(
        "redelivered_flag_seen", 0
    )
    assert sum(j["matched"] for j in journeys) == deliveries - redelivered - unmarked
    assert sum(j["redelivered"] for j in journeys) == redelivered + unmarked
    assert all(j["unmatched"] == 0 and "(unknown)" not in j["queue"] for j in journeys)
    if deliveries:
        assert all(j["latency-ms"]["count"] == j["matched"] for j in journeys)


def test_mid_stream_tracks_what_it_can_and_says_once_what_it_cannot() -> None:
    expect, summary = scenario(CAPTURES / "mid-stream.json")
    (conn,) = summary["connections"]
    assert conn["from-start"] is False and conn["user"] is None and conn["tune"] is None
    (chan,) = conn["channels"]
    assert chan["from-start"] is False
    assert (chan["deliveries"], chan["acks"]) == (len(expect["delivery_tags"]), expect["acks"])
    assert [f["code"] for f in summary["findings"]] == ["amqp091.mid-stream"]
    assert conn["close"]["reply-code"] == 200


#: a method's answer as the client counted it (0 or False: never answered) and its name
ANSWERS = {
    "tx_select_ok": "tx.select-ok",
    "queue_delete_ok": "queue.delete-ok",
    "connection_close_ok": "connection.close-ok",
}


def decoded(path: Path) -> list[Any]:
    return scenario_frames(path)[1]


@pytest.mark.parametrize(
    "path",
    [p for p in SCENARIOS if {*ANSWERS, "requeued"} & set(json.loads(p.read_text())["expect"])],
    ids=lambda p: p.stem,
)
def test_answers_are_the_clients(path: Path) -> None:
    """The answers the client got (or never got) are the frames the broker sent; the deliveries
    the consumer requeued are the nacks and rejects with requeue on the wire."""
    expect = json.loads(path.read_text())["expect"]
    frames = decoded(path)
    for key, method in ANSWERS.items():
        if key in expect:
            got = sum(1 for f in frames if f.name == method and f.direction == "s2c")
            assert got == int(expect[key]), f"{key}: {got} {method} from the broker"
    if "requeued" in expect:
        requeued = [
            f
            for f in frames
            if f.name in ("basic.nack", "basic.reject") and f.fields.get("requeue") is True
        ]
        assert len(requeued) == expect["requeued"]


@pytest.mark.parametrize(
    "path",
    [p for p in SCENARIOS if "tools" in json.loads(p.read_text())["expect"]],
    ids=lambda p: p.stem,
)
def test_amqp_tools_got_what_the_tools_printed(path: Path) -> None:
    """librabbitmq's amqp-tools, a connection a run: what amqp-get and amqp-consume printed is
    the bodies delivered, amqp-declare-queue's name the declared queue, amqp-delete-queue's
    count the delete-ok's."""
    expect = json.loads(path.read_text())["expect"]
    frames = decoded(path)
    assert sum(expect["tools"].values()) == expect["connections"]
    assert sum(1 for f in frames if f.name == "connection.start-ok") == expect["connections"]
    (declare_ok,) = [f for f in frames if f.name == "queue.declare-ok"]
    assert declare_ok.fields["queue"] == expect["declared"]
    bodies: dict[str, bytes] = {"basic.get-ok": b"", "basic.deliver": b""}
    carrying: dict[tuple[Any, int], str] = {}  # the broker's method a channel's content follows
    for f in frames:
        if f.direction != "s2c":
            continue
        if f.name in bodies:
            carrying[f.conn, f.channel] = f.name
        elif f.name == "content-body" and (f.conn, f.channel) in carrying:
            bodies[carrying[f.conn, f.channel]] += f.data[7:-1]  # the frame's payload alone
    assert bodies["basic.get-ok"].decode() == expect["got"]
    assert bodies["basic.deliver"].decode() == expect["consumed"]
    (delete_ok,) = [f for f in frames if f.name == "queue.delete-ok"]
    assert str(delete_ok.fields["message-count"]) == expect["deleted_message_count"]


@pytest.mark.parametrize(
    "stem",
    [
        "091-pyamqp-happy",
        "091-pyamqp-happy-gmq",
        "091-php-happy",
        "091-php-happy-gmq",
        "091-aiormq-happy",
        "091-aiormq-happy-gmq",
        "091-amqplib-happy",  # the broker's tag; the broker's heartbeat taken
        "091-amqplib-happy-gmq",
        "091-go-happy",  # amqp091-go's own tag, ctag-<program>-<n>
        "091-go-happy-gmq",
        "091-streadway-happy",
    ],
)
def test_clients091_consumer_tags(stem: str) -> None:
    """py-amqp and php-amqplib leave the consumer tag to the broker: RabbitMQ's amq.ctag-...,
    garagemq's own form; aiormq makes its own (ctag1.<uuid>). The summary has the tag the client
    was given; the heartbeat is the client's tune-ok (0 for py-amqp and php-amqplib, 60 for
    aiormq whatever the broker proposed: garagemq 10)."""
    expect, summary = scenario(CAPTURES / f"{stem}.json")
    (consumer,) = [c for ch in entries(summary) for c in ch["consumers"]]
    assert consumer["tag"] == expect["consumer_tag"]
    assert consumer["deliveries"] == expect["deliveries"]
    negotiated = summary["connections"][0]["tune"]["negotiated"]
    assert negotiated["heartbeat"] == expect["negotiated_heartbeat"]


def test_the_login_refused_names_the_mechanism_not_offered() -> None:
    """The finding says the client's AMQPLAIN was not among garagemq's mechanisms."""
    _expect, summary = scenario(CAPTURES / "091-php-amqplain-gmq.json")
    (found,) = summary["findings"]
    assert "the client chose AMQPLAIN, which the broker did not offer (PLAIN)" in found["message"]
