"""Every recorded AMQP 1.0 scenario's ground truth, asserted from the summary the tracker builds.

The numbers in captures/NAME.json were counted by Proton while the scenario ran, never read from
the capture; here they must come out of `Tracker.summary()` (what `amqpscope summary --json`
prints): deliveries, outcomes, pre-settled, unsettled, credit issued and drained, errors and
their conditions, SASL, the coordinator link. The findings each capture raises are listed
exactly: each one is something the capture really shows.
"""

from __future__ import annotations

import json
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from amqpscope.capture.files import open_capture
from amqpscope.dissect import Dissector
from amqpscope.track.tracker import Tracker
from tests.oracle import keylog_for

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
SCENARIOS = sorted(p.stem for p in CAPTURES.glob("10-*.json"))

#: the findings (code -> count) each recording raises, and why they are true
EXPECTED_FINDINGS: dict[str, dict[str, int]] = {
    "10-send-receive": {},
    "10-presettled": {"amqp10.frame-after-close": 1},  # RabbitMQ detaches/ends after its close
    "10-outcomes": {"amqp10.error": 1},  # end amqp:invalid-field (modified not supported)
    "10-large-message": {"amqp10.frame-after-close": 1},
    "10-sasl-plain": {},
    "10-sasl-anonymous": {},
    "10-sasl-failed": {"amqp10.sasl-failed": 1},
    "10-bad-address": {"amqp10.error": 2},
    "10-transaction": {"amqp10.error": 1},
    # RabbitMQ sends the drain-completing flow (delivery-count 7, link-credit 0) before the
    # 3 transfers it then sends with no credit; and a detach after its close
    "10-drain": {"amqp10.transfer-without-credit": 1, "amqp10.frame-after-close": 1},
    "10-drain-classic": {"amqp10.error": 1},
    "10-peer-to-peer": {"amqp10.rejected": 3},
    "10-peer-to-peer-transactions": {},  # declared, committed, rolled back: no error
    "10-websocket": {"amqp10.frame-after-close": 1},  # as 10-presettled (not every recording)
    "10-tls": {"amqp10.frame-after-close": 1},  # as 10-websocket, over TLS 1.3
    "10-tls-inband": {"amqp10.rejected": 3},  # as 10-peer-to-peer, after the TLS upgrade
    # captures/scenarios/diagnose.py: the receiver grants no credit for 2.5 s while 7 wait
    "10-credit-starved": {"amqp10.credit-starvation": 1, "amqp10.frame-after-close": 1},
    # the first receiver detached with its 3 deliveries unsettled; RabbitMQ's detach after close
    "10-redelivered": {"amqp10.unsettled-at-end": 1, "amqp10.frame-after-close": 1},
    # captures/scenarios/tokens.py: the listener drops the entity's link when the token expires
    "10-cbs-tokens": {"amqp10.error": 1},
    # captures/scenarios/peers10.py: the node amqp10 client, Proton's C++ example broker
    # (never states `available`: the starvation is the diagnosis's inference, not a finding)
    "10-amqp10-cpp-broker": {},
    "10-amqp10-cpp-starved": {},
    "10-amqp10-never-granted": {},
    "10-amqp10-rabbitmq": {"amqp10.frame-after-close": 1},  # RabbitMQ's flow after its close
    "10-header-hangup": {},  # garagemq's 0-9-1 header: a codec finding, not the tracker's
    "10-sasl-no-mechanism": {},
    "10-stream-port-hangup": {},
    "10-uamqp-cpp-broker": {},  # uamqp's two connections (send, then receive): a happy path
    # captures/scenarios/coverage.py: a socket client breaks one link rule per connection;
    # Proton closes the last with framing-error; the wrong-role transfer is never settled
    "10-link-violations": {
        "amqp10.handle-in-use": 1,
        "amqp10.wrong-role": 1,
        "amqp10.handle-over-max": 1,
        "amqp10.error": 1,
        "amqp10.unsettled-at-end": 1,
    },
    # captures/scenarios/coverage.py: Proton's transfers waited 1.5 s for the client's window
    "10-session-window": {"amqp10.window-exhausted": 1},
    # captures/scenarios/garagemq_methods.py: a listener with no coordinator accepts the declare
    "10-tx-no-coordinator": {"amqp10.transaction-failed": 1},
    # captures/scenarios/garagemq_close.py: the client killed holding its link: its FIN
    "10-killed-client": {"amqp10.transport-closed": 1},
    # captures/scenarios/journeys10.py: the receiver closes at once; RabbitMQ's detach after it
    "10-journeys": {"amqp10.frame-after-close": 1},
    # captures/scenarios/otel.py: the receiver's rejected outcome, the sender's detach with error
    "10-otel": {"amqp10.rejected": 1, "amqp10.error": 1, "amqp10.frame-after-close": 1},
    # captures/scenarios/activemq.py (ActiveMQ Classic 5.17): a happy path raises nothing
    "10-amq-happy": {},
    # the client's rejection with its error (the released and modified ones are no finding)
    "10-amq-outcomes": {"amqp10.rejected": 1},
    # the broker detaches the link it refused: precondition-failed (a temp-queue it never
    # made), invalid-field (a selector that does not parse)
    "10-amq-bad-address": {"amqp10.error": 1},
    "10-amq-bad-selector": {"amqp10.error": 1},
    # ActiveMQ sends its AMQP protocol header after its failed sasl-outcome (spec 5.3.3.5)
    "10-amq-sasl-failed": {"amqp10.sasl-failed": 1, "amqp10.header-after-failed-sasl": 1},
    # the receiver killed holding 5 unsettled: its FIN with the link open, the 5 left unsettled;
    # ActiveMQ then closes with amqp:decode-error (no description) into the dead socket
    "10-amq-killed-receiver": {
        "amqp10.transport-closed": 1,
        "amqp10.unsettled-at-end": 1,
        "amqp10.error": 1,
    },
    # a drain ActiveMQ completes as the spec says (transfers, then delivery-count 10, credit 0)
    "10-amq-drain": {},
    # rhea's happy path (ActiveMQ gives the second link its handle 0 again, freed by the detach)
    "10-amq-rhea": {},
    # the broker detaches the sender its user may not use: unauthorized-access
    "10-amq-forbidden": {"amqp10.error": 1},
    # a dynamic receiver: the temporary queue ActiveMQ names in its attach, a sender to it
    "10-amq-dynamic": {},
}


@cache
def summarize(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    meta = json.loads((CAPTURES / f"{name}.json").read_text())
    tracker = Tracker()
    with open_capture(str(CAPTURES / meta["file"])) as capture:
        for frame in Dissector(keylog=keylog_for(CAPTURES / meta["file"])).run(capture):
            tracker.feed(frame)
    tracker.finish()
    summary = tracker.summary()
    json.dumps(summary, allow_nan=False)  # serialisable, no NaN
    return meta, summary


def links(summary: dict[str, Any]) -> list[dict[str, Any]]:
    return [link for c in summary["connections"] for s in c["sessions"] for link in s["links"]]


def client_links(summary: dict[str, Any], role: str) -> list[dict[str, Any]]:
    return [link for link in links(summary) if link["role"] == role]


def outcomes(counts: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in counts.items() if v}


def test_every_scenario_is_listed() -> None:
    assert set(SCENARIOS) == set(EXPECTED_FINDINGS)


@pytest.mark.parametrize("name", SCENARIOS)
def test_ground_truth(name: str) -> None:
    meta, summary = summarize(name)
    expect = meta["expect"]
    conns = summary["connections"]
    assert len(conns) == expect["connections"]
    conn = conns[0]
    assert conn["version"] == "1.0"
    if "sasl_outcome" in expect:
        assert conn["sasl"]["outcome"] == expect["sasl_outcome"]
    if "sasl_mechanism" in expect:
        assert conn["sasl"]["mechanism"] == expect["sasl_mechanism"]
    opened = [c for c in conns if c["open"] is not None and c["open"]["server"] is not None]
    assert len(opened) == expect["connections_opened"]
    if "remote_container_id" in expect:
        assert conn["open"]["server"]["container-id"] == expect["remote_container_id"]
    if "local_max_frame_size" in expect:
        holds = conn["open"]["holds"]["max-frame-size"]
        assert holds == {
            "s2c": expect["local_max_frame_size"],
            "c2s": expect["remote_max_frame_size"],
        }
    senders = client_links(summary, "sender")
    receivers = client_links(summary, "receiver")
    data_senders = [link for link in senders if link["target"] != "coordinator"]
    if "transfers_sent" in expect:
        assert sum(link["deliveries"] for link in data_senders) == expect["transfers_sent"]
    if "transfers_received" in expect:
        assert sum(link["deliveries"] for link in receivers) == expect["transfers_received"]
    if "sender_outcomes" in expect:
        got = Counter()
        for link in data_senders:
            got.update(outcomes(link["outcomes"]))
        assert dict(got) == expect["sender_outcomes"]
    if "receiver_outcomes" in expect:
        got = Counter()
        for link in receivers:
            got.update(outcomes(link["outcomes"]))
        assert dict(got) == expect["receiver_outcomes"]
    if "sent_presettled" in expect:
        assert sum(link["presettled"] for link in senders) == expect["sent_presettled"]
    if "received_presettled" in expect:
        assert sum(link["presettled"] for link in receivers) == expect["received_presettled"]
    if "links_attached" in expect:
        assert len(senders) == expect["links_attached"]["sender"]
        assert len(receivers) == expect["links_attached"]["receiver"]
    if "sender_remote_snd_settle_mode" in expect:  # the broker's attach echoes our sender's
        assert senders[0]["snd-settle-mode"] == expect["sender_remote_snd_settle_mode"]
    if "receiver_remote_snd_settle_mode" in expect:  # the broker is the sender: its mode holds
        assert receivers[0]["snd-settle-mode"] == expect["receiver_remote_snd_settle_mode"]
    if "initial_sender_credit" in expect:
        assert senders[0]["credit"]["issued"] == expect["initial_sender_credit"]
    if "drain_credit_issued" in expect:
        assert receivers[0]["credit"]["issued"] == expect["drain_credit_issued"]
        assert receivers[0]["credit"]["drain"]["requested"] == 1
    if "credit_drained" in expect:
        assert receivers[0]["credit"]["drain"]["drained"] == expect["credit_drained"]
        assert receivers[0]["credit"]["drain"]["completed"] == 1
    if expect.get("receiver_draining_at_end") is False:
        assert receivers[0]["credit"]["drain"]["draining"] is False
    if "session_errors" in expect:
        got = [s["error"] for s in conn["sessions"] if s["error"]]
        assert sorted((e["condition"], e["description"]) for e in got) == sorted(
            (e["condition"], e["description"]) for e in expect["session_errors"]
        )
        assert all(e["by"] == "server" for e in got)
    else:
        assert all(s["error"] is None for s in conn["sessions"])
    if "sessions_begun" in expect:
        assert len(conn["sessions"]) == expect["sessions_begun"]
    if "addresses" in expect:
        assert sorted(link["source"] for link in receivers) == sorted(expect["addresses"])
    if "coordinator_attaches" in expect:
        assert conn["transactions"]["coordinator-links"] == expect["coordinator_attaches"]
        assert [link["target"] for link in senders] == ["coordinator"]
    if "transaction_declared" in expect:
        assert (conn["transactions"]["declared"] > 0) == expect["transaction_declared"]
    if "rejection_conditions" in expect:
        got = [
            {"condition": r["condition"], "description": r["description"]}
            for link in senders
            for r in link["rejections"]
        ]
        assert sorted(got, key=str) == sorted(expect["rejection_conditions"], key=str)
    if "link_errors" in expect:  # the links the peer detached with an error, as Proton saw
        got = [(link["name"], link["error"]) for link in links(summary) if link["error"]]
        assert sorted((name, e["condition"], e["description"]) for name, e in got) == sorted(
            (e["link"], e["condition"], e["description"]) for e in expect["link_errors"]
        )
        assert all(e["by"] == "server" for _name, e in got)
    if "transport_errors" in expect:  # Proton's own words for the failed SASL: never on the wire
        assert conn["state"] == "sasl-failed" and conn["close"] is None
    # every delivery is accounted for: nothing was left unsettled in any scenario but the one
    # whose first receiver detached holding what Proton counted
    left = sum(link["unsettled"] for link in links(summary))
    unsettled = expect.get("first_detached", {}).get("unsettled", 0)
    assert left == expect.get("unsettled_at_end", unsettled)
    for link in links(summary):
        assert link["presettled"] + link["settled"] + link["unsettled"] == link["deliveries"]
        if link["settled"]:
            assert link["latency"]["count"] == link["settled"]


@pytest.mark.parametrize("name", SCENARIOS)
def test_findings_are_the_true_ones(name: str) -> None:
    _, summary = summarize(name)
    got = Counter(f["code"] for f in summary["findings"] if f["code"].startswith("amqp10."))
    assert dict(got) == EXPECTED_FINDINGS[name]
    ids = {c["id"] for c in summary["connections"]}
    for f in summary["findings"]:
        assert f["conn"] in ids


def test_a_declare_accepted_not_declared_is_a_failed_declare() -> None:
    """A peer with no coordinator settles the declare `accepted`: no txn-id, no transaction;
    Proton's controller called it a failed declare."""
    meta, summary = summarize("10-tx-no-coordinator")
    expect = meta["expect"]
    assert expect["transaction_declare_failed"] and not expect["transaction_declared"]
    assert expect["declare_outcome"] == "accepted" == next(iter(expect["listener_outcomes"]))
    (conn,) = summary["connections"]
    txns = conn["transactions"]
    assert (txns["declares"], txns["declared"], txns["failed"]) == (1, 0, 1)
    assert txns["items"] == []
    (failed,) = [f for f in summary["findings"] if f["code"] == "amqp10.transaction-failed"]
    assert failed["message"].startswith("declare settled accepted, not declared")


def test_bad_address_errors_end_the_sessions_they_name() -> None:
    _, summary = summarize("10-bad-address")
    sessions = summary["connections"][0]["sessions"]
    by_channel = {s["channel"]: s for s in sessions}
    assert by_channel[0]["error"]["condition"] == "amqp:not-found"
    assert by_channel[0]["links"][0]["source"].endswith("does-not-exist")
    assert by_channel[1]["error"]["condition"] == "amqp:invalid-field"
    assert by_channel[1]["links"][0]["source"] == "/bogus/amqpscope"
    assert all(s["state"] == "ended" for s in sessions)
    # the broker never attached: the receiver issued credit 10 that no sender ever saw
    for s in sessions:
        (link,) = s["links"]
        assert link["remote-handle"] is None and link["credit"]["issued"] == 10
        assert link["credit"]["link-credit"] is None


def test_outcomes_credit_reduced_while_transfers_in_flight() -> None:
    """10-outcomes: the broker sent 6 transfers against credit 10; the client's flow, written
    after it had seen 4, says delivery-count 4, link-credit 9. The sender's view is
    4 + 9 - 6 = 7, which is what the broker's next flow states (delivery-count 6, credit 7)."""
    _, summary = summarize("10-outcomes")
    (receiver,) = client_links(summary, "receiver")
    assert receiver["deliveries"] == 7  # o0..o5 and the redelivered o2
    assert receiver["credit"]["delivery-count"] == 7
    assert receiver["credit"]["issued"] == 17  # limits 10, 13, 15, 16, 17
    assert receiver["snd-settle-mode"] == "unsettled" and receiver["rcv-settle-mode"] == "first"
    assert receiver["latency"]["count"] == 7 and receiver["latency"]["max"] > 0


def test_drain_arithmetic_on_the_quorum_queue() -> None:
    _, summary = summarize("10-drain")
    (receiver,) = client_links(summary, "receiver")
    credit = receiver["credit"]
    assert credit["drain"] == {"requested": 1, "completed": 1, "drained": 7, "draining": False}
    # the 3 transfers came after the drain had taken the credit to 0: 3 sent without credit
    assert credit["without-credit"] == 3 and credit["link-credit"] == -3
    (finding,) = [f for f in summary["findings"] if f["code"] == "amqp10.transfer-without-credit"]
    assert finding["frame"] == 24 and "drain" in finding["message"]


def test_drain_classic_crash_leaves_the_drain_open() -> None:
    _, summary = summarize("10-drain-classic")
    (receiver,) = client_links(summary, "receiver")
    assert receiver["credit"]["drain"]["draining"] is True
    assert receiver["credit"]["link-credit"] == 8  # 10 granted, 2 delivered before the crash
    assert receiver["credit"]["available"] == 1  # the broker said 3 were available, sent 2


def test_presettled_and_windows() -> None:
    _, summary = summarize("10-presettled")
    conn = summary["connections"][0]
    (session,) = conn["sessions"]
    assert session["windows"]["c2s"]["transfers"] == 10
    assert session["windows"]["c2s"]["remote-incoming-window"] == 65525  # 65535 - 10
    assert session["windows"]["s2c"]["transfers"] == 10
    for link in session["links"]:
        assert link["presettled"] == 10 and link["settled"] == 0 and link["latency"] is None


def test_large_message_counts_one_delivery_over_74_transfers() -> None:
    _, summary = summarize("10-large-message")
    (session,) = summary["connections"][0]["sessions"]
    assert session["windows"]["c2s"]["transfers"] == 74
    assert session["windows"]["c2s"]["next-delivery-id"] == 1
    for link in session["links"]:
        assert link["deliveries"] == 1 and link["outcomes"]["accepted"] == 1


def test_peer_to_peer_modified_and_rejected_details() -> None:
    _, summary = summarize("10-peer-to-peer")
    (sender,) = client_links(summary, "sender")
    assert sender["target"] == "amqpscope/peer-to-peer"
    assert all(r["condition"] == "amqp:precondition-failed" for r in sender["rejections"])
    assert summary["connections"][0]["open"]["holds"]["idle-time-out"] == {"c2s": None, "s2c": None}


def test_transaction_refused() -> None:
    _, summary = summarize("10-transaction")
    conn = summary["connections"][0]
    txns = conn["transactions"]
    assert txns["coordinator-links"] == 1 and txns["declares"] == 0 and txns["items"] == []
    (session,) = conn["sessions"]
    assert session["error"] == {
        "by": "server",
        "condition": "amqp:not-implemented",
        "description": "Transactions not supported",
    }
    (link,) = session["links"]
    assert link["target"] == "coordinator" and link["remote-handle"] is None


def test_a_dynamic_node_is_named_by_the_brokers_attach() -> None:
    """The client's receiver asked for a dynamic source (no address); ActiveMQ named the
    temporary queue in its attach, the name Proton read, and the sender went to it."""
    meta, summary = summarize("10-amq-dynamic")
    (receiver,) = client_links(summary, "receiver")
    (sender,) = client_links(summary, "sender")
    address = meta["expect"]["dynamic_address"]
    assert receiver["source"] == sender["target"] == address
    assert address.startswith("temp-queue://")


def test_summary_is_stable_json() -> None:
    for name in SCENARIOS:
        _, summary = summarize(name)
        text = json.dumps(summary, allow_nan=False, sort_keys=True)
        assert json.loads(text) == json.loads(json.dumps(summary))


#: every capture with AMQP 1.0 in it (the log captures' pcaps and mid-stream included)
ALL_10 = sorted(
    p
    for p in CAPTURES.glob("*.pcap*")
    if p.name.startswith(("10-", "log-proton", "log-rhea", "mid-stream"))
)


def _tracked(path: Path, stats: bool) -> tuple[list[list[str]], dict[str, Any]]:
    """Each frame's finding codes, the findings at the end, and the summary, of a tracker that
    keeps the summary-only statistics (`stats`) or not."""
    tracker = Tracker(stats=stats)
    per_frame = []
    with open_capture(str(path)) as capture:
        for frame in Dissector(keylog=keylog_for(path)).run(capture):
            tracker.feed(frame)
            per_frame.append([f"{f.code} {f.message}" for f in frame.findings])
    tracker.finish()
    per_frame.append([f"{f.code} {f.message} {f.conn}" for f in tracker.findings])
    return per_frame, tracker.summary()


@pytest.mark.parametrize("path", ALL_10, ids=lambda p: p.name)
def test_without_stats_same_findings_no_latency_or_series(path: Path) -> None:
    """`read`'s tracker (`stats=False`) raises the same findings, frame by frame and at the end,
    and its summary is the full one without the settle latencies and series (which it skips)."""
    kept, full = _tracked(path, True)
    skipped, bare = _tracked(path, False)
    assert skipped == kept
    series = deliveries = 0
    for conn in full["connections"]:
        for session in conn.get("sessions", []):
            for link in session["links"]:
                series += sum(value is not None for value in link["series"].values())
                deliveries += link["deliveries"]
                link["latency"] = None
                link["series"] = dict.fromkeys(link["series"])
    assert bare == full
    if deliveries:
        assert series  # the full summary had series to skip (so the check above means something)
