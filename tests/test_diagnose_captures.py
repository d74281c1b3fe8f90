"""`amqpscope diagnose` on every recorded capture, against the scenario's ground truth.

The ground truth (captures/NAME.json, `expect`) was counted by the client while the scenario
ran. Each diagnosis is checked against it: the reply codes and conditions the client saw, the
routing key it published, the count it left unacked; each evidence frame is checked by what
`amqpscope read --json` says that frame is (a declare, the ack of tag 999, the close with the
client's code), not by a frame number written here. Every other capture is a happy path and
must give no warning or error diagnosis.
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

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
FILES = sorted(p for p in CAPTURES.iterdir() if p.suffix in (".pcap", ".pcapng", ".log"))

#: the warning and error diagnoses each capture gives (code -> count), and why they are true,
#: by file name or else by scenario (a log and its pcap alike); every capture not named gives none
WARNED: dict[str, dict[str, int]] = {
    "091-channel-errors": {"close.channel": 3, "spec.violation": 1},  # ack of tag 999
    "091-confirms-return": {"publish.returned": 1},
    "091-hostile-names": {"close.channel": 1},  # 404 for the missing queue
    "091-html-names": {"close.channel": 1},  # as 091-hostile-names, with markup in the name
    "091-killed-consumer": {"delivery.unacked-at-end": 1, "liveness.dropped": 1},
    # no-ack: the 20 deliveries were the client's alone when it was killed
    "091-killed-autoack-consumer": {"delivery.no-ack-dropped": 1, "liveness.dropped": 1},
    "091-refused-login": {"auth.refused": 1},
    "10-bad-address": {"close.session": 2},
    "10-sasl-failed": {"auth.refused": 1},
    "10-outcomes": {"close.session": 1},  # modified is not supported by RabbitMQ 3.10
    "10-transaction": {"close.session": 1},  # transactions not supported
    # RabbitMQ's classic queue crashed on the drain (internal-error): the drain never completed
    "10-drain-classic": {"close.session": 1, "credit.drain-incomplete": 1},
    # RabbitMQ completes the drain, then sends 3 transfers with no credit: its bug
    "10-drain": {"spec.violation": 1},
    "10-peer-to-peer": {"delivery.rejected": 3},  # the listener rejects p1, p5, p9
    "10-tls-inband": {"delivery.rejected": 3},  # as 10-peer-to-peer, after the TLS upgrade
    # captures/scenarios/diagnose.py: each records the trouble it is named for
    "091-stalled-consumer": {"consumer.stalled": 1},
    "091-blocked-publisher": {"publish.blocked": 1},
    "091-missed-heartbeats": {"liveness.heartbeat-missed": 1, "liveness.dropped": 1},
    "10-credit-starved": {"credit.starved": 1},
    # captures/scenarios/logs.py: a tag acked twice, the channel closed: on the wire the second
    # ack is seen (a violation); pika logs no frame it sends, so its log has the close alone
    "log-pika-closed.pcap": {"close.channel": 1, "spec.violation": 1},
    "log-pika-closed.log": {"close.channel": 1},
    # captures/scenarios/logs.py: rhea grants 5 of 20 and no more (the pcap and the trace)
    "log-rhea-starved": {"credit.starved": 1},
    # captures/scenarios/logs.py: Proton grants 3 of 10 and exits 2 s later, closing nothing
    "log-proton-starved.pcap": {"credit.starved": 1, "liveness.dropped": 1},
    "log-proton-starved.log": {"credit.starved": 1},
    "091-bad-acks": {"close.channel": 3, "spec.violation": 3},
    "091-nacked-publish": {"publish.nacked": 1},  # x-overflow=reject-publish
    "091-slow-confirm": {"publish.confirm-slow": 1, "publish.blocked": 1},  # a short alarm
    # blocked, the publisher gave up and dropped the connection
    "091-unconfirmed-publish": {
        "publish.unconfirmed": 1,
        "publish.blocked": 1,
        "liveness.dropped": 1,
    },
    # consumer A held its prefetch of 3 for 1 s, then closed its channel
    "091-redelivered": {"consumer.stalled": 1, "delivery.unacked-at-end": 1},
    "10-redelivered": {"delivery.unsettled-at-end": 1},  # receiver A detached
    # captures/scenarios/tokens.py: a token refused, one that expired, a management request
    # answered 410 and one never answered
    # captures/scenarios/garagemq_methods.py: a passive declare of a missing queue (404)
    "091-passive-declare": {"close.channel": 1},
    "091-gmq-passive-declare": {"close.channel": 1},
    # garagemq never answers tx.select: the client gave up after 3 s
    "091-gmq-tx": {"method.unanswered": 1},
    # nor a queue.delete of a queue with a consumer (its own broker, stopped afterwards)
    "091-gmq-stuck-delete": {"method.unanswered": 1},
    # a Proton listener with no coordinator accepted the declare: no transaction began
    "10-tx-no-coordinator": {"transaction.failed": 1},
    "10-cbs-tokens": {
        "auth.token-refused": 1,
        "auth.token-expired": 1,
        "request.failed": 1,
        "request.unanswered": 1,
    },
    # captures/scenarios/peers10.py: amqp10 and Proton's C++ example broker, garagemq, a
    # client with no SASL mechanism in common (10-amqp10-cpp-broker and 10-amqp10-rabbitmq
    # are happy paths: none)
    "10-amqp10-cpp-starved": {"credit.starved": 1},  # inferred: the broker never says available
    "10-amqp10-never-granted": {"credit.never-granted": 1},
    "10-header-hangup": {"connection.not-opened": 1},  # garagemq answers 0-9-1 and hangs up
    "10-sasl-no-mechanism": {"connection.not-opened": 1},
    "10-stream-port-hangup": {"connection.not-opened": 1},  # RabbitMQ's stream port hangs up
    # captures/scenarios/coverage.py (tests/test_coverage_recorded.py): RabbitMQ cancelled the
    # consumer whose queue another connection deleted, then rabbitmqctl closed it (320)
    "091-broker-cancel-and-close": {"consumer.cancelled": 1, "close.connection": 1},
    # the client's channel.flow active=false, which RabbitMQ answers 540, holding one delivery
    "091-flow-refused": {
        "consumer.flow-stopped": 1,
        "close.connection": 1,
        "delivery.unacked-at-end": 1,
    },
    # a socket client breaks a link rule per connection (handle in use, a transfer from the
    # receiving end, a handle over handle-max); Proton closes the last with framing-error; the
    # wrong-role transfer is never settled
    # (the receiver 'r' attached and never granted credit for the second it was open)
    "10-link-violations": {
        "credit.never-granted": 1,
        "spec.violation": 3,
        "close.connection": 1,
        "delivery.unsettled-at-end": 1,
    },
    # the socket client's session window of 1, re-opened by its flow 1.5 s after Proton's
    # first transfer used it (tests/test_coverage_recorded.py)
    "10-session-window": {"session.window-closed": 1},
    # captures/scenarios/garagemq_close.py (tests/test_diagnose_garagemq.py says what each says)
    "091-gmq-heartbeat-fin": {"liveness.heartbeat-missed": 1, "liveness.dropped": 1},
    "091-gmq-refused-login": {"auth.refused": 1},
    "091-gmq-missing-exchange": {"close.channel": 1, "close.connection": 1, "spec.violation": 1},
    "10-killed-client": {"liveness.dropped": 1},
    # captures/scenarios/otel.py: the consumer's ack of a tag it never got (999), RabbitMQ's 406
    "091-otel": {"close.channel": 1, "spec.violation": 1},
    # the receiver's rejected t1 and the client's detach of its sender with amqp:internal-error
    "10-otel": {"delivery.rejected": 1, "close.link": 1},
    # captures/scenarios/uamqp_log.py: the receiver rejects the third message (amqp:not-allowed),
    # in the log too: its lines name no channel, and each connection has one session, whose
    # frames they are (track/amqp10/session.py `_begin_unnamed`)
    "log-uamqp-broker": {"delivery.rejected": 1},
    # captures/scenarios/activemq.py (ActiveMQ Classic 5.17); 10-amq-happy gives none. The
    # receiver rejected the third message with its own error (its released and modified ones
    # come back: info)
    "10-amq-outcomes": {"delivery.rejected": 1},
    # the broker detached the link it refused (a temp-queue it never made; a bad selector)
    "10-amq-bad-address": {"close.link": 1},
    "10-amq-bad-selector": {"close.link": 1},
    "10-amq-forbidden": {"close.link": 1},  # a queue the user may not use (authorizationPlugin)
    # a wrong password; ActiveMQ's header after its failed outcome is a harmless violation (info)
    "10-amq-sasl-failed": {"auth.refused": 1},
    # the receiver killed holding 5 unsettled (they come back on the next connection: info);
    # ActiveMQ's close with amqp:decode-error answers the client's FIN (its explanation says so)
    "10-amq-killed-receiver": {
        "liveness.dropped": 1,
        "delivery.unsettled-at-end": 1,
        "close.connection": 1,
    },
    # captures/scenarios/clients091.py (py-amqp and php-amqplib; their happy paths: none)
    # py-amqp's confirmed publish to a missing exchange: the 404 close is the publish's answer,
    # not a confirm still owed (no publish.unconfirmed)
    "091-pyamqp-missing-exchange": {"close.channel": 1},
    # php-amqplib's default AMQPLAIN, which garagemq does not offer: refused (530)
    "091-php-amqplain-gmq": {"auth.refused": 1},
    # a PHP worker SIGKILLed 1 s after its prefetch of 2 filled: held, never acked, no close
    "091-php-killed": {
        "consumer.stalled": 1,
        "delivery.unacked-at-end": 1,
        "liveness.dropped": 1,
    },
    # py-amqp with heartbeat 2 s and no heartbeat_tick for 8 s: RabbitMQ dropped it (RST)
    "091-pyamqp-heartbeat-silent": {"liveness.heartbeat-missed": 1, "liveness.dropped": 1},
    # garagemq's 404, then its 501 for the refused publish's content (py-amqp wrote it with the
    # method) and, after its own connection.close, a second close and a channel.open-ok
    "091-pyamqp-missing-exchange-gmq": {
        "close.channel": 1,
        "close.connection": 1,
        "spec.violation": 2,
    },
    # aiormq's program exits after a confirmed publish, closing nothing: the kernel's FIN
    "091-aiormq-no-close": {"liveness.dropped": 1},
    # garagemq ends the idle aiormq connection after 30 s: 3 of the 10 s it proposed (90 chosen);
    # aiormq's connection.close 500 after that FIN is its reply (info, not counted here)
    "091-aiormq-idle-gmq": {"liveness.dropped": 1},
    # captures/scenarios/clients091_go_node.py (amqplib, amqp091-go, streadway; their happy
    # paths: none, though amqplib's ackAll is basic.ack delivery-tag 0 multiple)
    # amqplib re-declares a queue with other arguments: RabbitMQ's 406 closes the channel
    "091-amqplib-redeclare": {"close.channel": 1},
    # amqp091-go's mandatory publish to a key no queue has: basic.return 312, then its ack
    "091-go-return": {"publish.returned": 1},
    "091-go-return-gmq": {"publish.returned": 1},
    # 091-go-cancel: none. amqp091-go's own channel 2 deleted the queue its channel 1 consumed:
    # the broker's basic.cancel is what the client asked for (info, naming that queue.delete)
    # 091-amqplib-nack: none. nack and nackAll with requeue false are the consumer's own choice
}
#: a duration measured by the client agrees with the capture's within this fraction
WITHIN = 0.10


def run(*args: str) -> Any:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def keyed(path: Path) -> list[str]:
    keys = keys_for(path)
    return ["--keylog", str(keys)] if keys else []


@cache
def diagnoses_of(name: str) -> list[dict[str, Any]]:
    path = CAPTURES / name
    return json.loads(run("diagnose", str(path), "--json", *keyed(path)))["diagnoses"]


@cache
def frames_of(name: str) -> dict[int, dict[str, Any]]:
    path = CAPTURES / name
    lines = run("read", str(path), "--json", *keyed(path)).splitlines()
    records = [json.loads(line) for line in lines]
    return {r["frame"]: r for r in records if "frame" in r}


def expect(stem: str) -> dict[str, Any]:
    return json.loads((CAPTURES / f"{stem}.json").read_text())["expect"]


def of_code(name: str, code: str) -> list[dict[str, Any]]:
    return [d for d in diagnoses_of(name) if d["code"] == code]


def evidence(name: str, diagnosis: dict[str, Any]) -> list[dict[str, Any]]:
    frames = frames_of(name)
    return [frames[number] for number in diagnosis["evidence"]]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_warnings_only_where_the_scenario_went_wrong(path: Path) -> None:
    found = diagnoses_of(path.name)
    serious = Counter(d["code"] for d in found if d["severity"] in ("warning", "error"))
    assert dict(serious) == WARNED.get(path.name, WARNED.get(path.stem.split(".")[0], {}))
    for diagnosis in found:  # the shape every consumer reads
        assert diagnosis["title"] and diagnosis["explanation"]
        assert diagnosis["evidence"] == sorted(set(diagnosis["evidence"]))
        assert all(n in frames_of(path.name) for n in diagnosis["evidence"])
        assert diagnosis["duration"] >= 0


def test_ranked_most_severe_first() -> None:
    for path in FILES:
        ranks = [("error", "warning", "info").index(d["severity"]) for d in diagnoses_of(path.name)]
        assert ranks == sorted(ranks), path.name


def test_channel_errors_each_explained_with_the_method_that_caused_it() -> None:
    name = "091-channel-errors.pcap"
    truth = expect("091-channel-errors")["channel_errors"]
    closes = sorted(of_code(name, "close.channel"), key=lambda d: d["start"])
    assert [d["channel"] for d in closes] == [e["channel"] for e in truth]
    for diagnosis, error in zip(closes, truth, strict=True):
        frames = evidence(name, diagnosis)
        close = frames[-1]
        assert close["name"] == "channel.close" and close["dir"] == "s2c"
        assert close["fields"]["reply-code"] == error["code"]
        assert close["fields"]["reply-text"] == error["text"]
        cause = frames[0]
        assert cause["dir"] == "c2s" and cause["channel"] == error["channel"]
        # the trigger the client wrote down: "queue.declare ...", "basic.ack delivery_tag=999"
        assert cause["name"] == error["trigger"].split()[0]
        assert str(error["code"]) in diagnosis["title"]
    inequivalent, reserved, unknown = closes
    assert "inequivalent" in inequivalent["explanation"]
    assert "amq." in reserved["explanation"]
    ack = evidence(name, unknown)[0]
    assert ack["fields"]["delivery-tag"] == 999
    assert "never delivered" in unknown["explanation"]  # "(never delivered)" in the trigger
    (violation,) = of_code(name, "spec.violation")
    assert violation["evidence"] == [ack["frame"]] and "client" in violation["title"]


def test_missing_queue_names_the_declare() -> None:
    name = "091-hostile-names.pcap"
    (diagnosis,) = of_code(name, "close.channel")
    declare, close = evidence(name, diagnosis)
    missing = expect("091-hostile-names")["missing_queue"]
    assert declare["name"] == "queue.declare" and declare["fields"]["queue"] == missing
    assert diagnosis["queue"] == missing  # the queue the close is about, not the channel's last
    assert close["fields"]["reply-code"] == 404


@pytest.mark.parametrize("stem", ["091-passive-declare", "091-gmq-passive-declare"])
def test_passive_declare_of_a_missing_queue_is_the_clients_check(stem: str) -> None:
    """RabbitMQ and garagemq close the channel with 404: the client asked whether the queue
    exists (often expected), it did not name a queue that should have been there."""
    (diagnosis,) = of_code(f"{stem}.pcap", "close.channel")
    declare, close = evidence(f"{stem}.pcap", diagnosis)
    truth = expect(stem)
    assert declare["name"] == "queue.declare" and declare["fields"]["passive"] is True
    assert declare["fields"]["queue"] == truth["missing_queue"] == diagnosis["queue"]
    assert close["fields"]["reply-code"] == truth["channel_errors"][0]["code"] == 404
    assert diagnosis["title"].endswith("on queue.declare (passive)")
    words = diagnosis["explanation"]
    assert "client checked (a passive declare) for a queue that does not exist" in words
    assert "often expected" in words and "the method named" not in words
    assert diagnosis["severity"] == "warning"
    # the timeline says which declares were passive: the check of the queue that exists too
    lines = {
        int(line.split()[0]): line
        for line in run("read", str(CAPTURES / f"{stem}.pcap")).splitlines()
        if line.strip()[:1].isdigit()
    }
    declares = [n for n, r in frames_of(f"{stem}.pcap").items() if r["name"] == "queue.declare"]
    shown = [lines[n].split()[-1] == "passive" for n in declares]
    assert (
        shown
        == [r["fields"]["passive"] for n, r in frames_of(f"{stem}.pcap").items() if n in declares]
        == [False, True, True]
    )
    assert truth["passive_declares"] == 2 and truth["passive_found"]["queue"].endswith(".q")


@pytest.mark.parametrize(
    ("stem", "method", "hint"),
    [
        ("091-gmq-tx", "tx.select", "it may not support transactions"),
        ("091-gmq-stuck-delete", "queue.delete", "it may be stuck on it"),
    ],
)
def test_synchronous_method_never_answered_until_the_client_gave_up(
    stem: str, method: str, hint: str
) -> None:
    """garagemq never answers tx.select, nor a queue.delete of a queue with a consumer; the
    client waited 3 s and closed the connection."""
    name = f"{stem}.pcap"
    truth = expect(stem)
    counted = method.replace(".", "_")  # tx_selects and tx_select_ok, queue_deletes and ...
    assert truth[f"{counted}s"] == 1 and truth[f"{counted}_ok"] == 0
    (diagnosis,) = of_code(name, "method.unanswered")
    request, close = evidence(name, diagnosis)
    assert (request["name"], request["dir"]) == (method, "c2s")
    assert (close["name"], close["dir"]) == ("connection.close", "c2s")
    assert close["fields"]["reply-text"] == truth["close_reply_text"]
    assert diagnosis["title"].startswith(
        f"The broker (garagemq 0.1) never answered {method} (frame {request['frame']}) on"
        f" channel 1: {hint}"
    )
    assert "gave up waiting" in diagnosis["explanation"]
    assert abs(diagnosis["duration"] - truth["waited_s"]) <= WITHIN * truth["waited_s"]


def test_returned_publish_with_exchange_and_routing_key() -> None:
    name = "091-confirms-return.pcap"
    (detail,) = expect("091-confirms-return")["return_details"]
    (diagnosis,) = of_code(name, "publish.returned")
    publish, returned = evidence(name, diagnosis)
    assert publish["name"] == "basic.publish" and returned["name"] == "basic.return"
    assert publish["fields"]["routing-key"] == detail["routing_key"]
    assert returned["fields"]["reply-code"] == detail["reply_code"]
    assert repr(detail["routing_key"]) in diagnosis["title"]
    assert str(detail["reply_code"]) in diagnosis["title"]


def test_refused_logins() -> None:
    name = "091-refused-login.pcap"
    (error,) = expect("091-refused-login")["connection_errors"]
    (diagnosis,) = of_code(name, "auth.refused")
    start_ok, close = evidence(name, diagnosis)
    assert start_ok["name"] == "connection.start-ok"
    assert close["fields"]["reply-code"] == error["code"] == 403
    name = "10-sasl-failed.pcap"
    (diagnosis,) = of_code(name, "auth.refused")
    init, outcome = evidence(name, diagnosis)
    assert init["name"] == "sasl-init" and outcome["name"] == "sasl-outcome"
    assert expect("10-sasl-failed")["sasl_outcome"] in diagnosis["title"]


def test_killed_consumer_left_its_prefetch_unacked() -> None:
    name = "091-killed-consumer.pcap"
    truth = expect("091-killed-consumer")
    (unacked,) = of_code(name, "delivery.unacked-at-end")
    assert unacked["title"].startswith(f"{truth['unacked_when_killed']} deliveries")
    (dropped,) = of_code(name, "liveness.dropped")
    end = evidence(name, dropped)[-1]
    assert end["kind"] == "transport"
    assert unacked["evidence"] == [end["frame"]]
    assert f"{truth['unacked_when_killed']} deliveries unacked" in dropped["explanation"]


def test_messages_delivered_with_no_ack_to_a_killed_consumer_are_gone() -> None:
    name = "091-killed-autoack-consumer.pcap"
    truth = expect("091-killed-autoack-consumer")
    (lost,) = of_code(name, "delivery.no-ack-dropped")
    assert lost["title"].startswith(f"{truth['deliveries']} messages delivered with no-ack")
    consume, *delivered, end = evidence(name, lost)
    assert consume["name"] == "basic.consume" and consume["fields"]["no-ack"]
    tags = [d["fields"]["delivery-tag"] for d in delivered]
    assert {d["name"] for d in delivered} == {"basic.deliver"}
    assert tags == list(range(truth["deliveries"] - len(tags) + 1, truth["deliveries"] + 1))
    assert end["kind"] == "transport"
    assert truth["left_in_queue"] == 0 and truth["acks"] == 0  # nothing requeued, nothing acked
    # a consumer with acks that is killed leaves its deliveries to be requeued: no such loss
    assert of_code("091-killed-consumer.pcap", "delivery.no-ack-dropped") == []


def test_session_errors_name_the_attach_and_its_address() -> None:
    name = "10-bad-address.pcap"
    truth = expect("10-bad-address")
    ends = sorted(of_code(name, "close.session"), key=lambda d: d["start"])
    assert [e["condition"] for e in truth["session_errors"]] == [
        d["title"].rsplit(": ", 1)[1] for d in ends
    ]
    for diagnosis in ends:
        attach, end = evidence(name, diagnosis)
        assert attach["name"] == "attach" and end["name"] == "end"
        assert attach["channel"] == end["channel"]
        assert diagnosis["queue"] == attach["fields"]["source"]["address"]
        assert diagnosis["queue"] in truth["addresses"]
    for stem in ("10-outcomes", "10-transaction", "10-drain-classic"):
        (error,) = expect(stem)["session_errors"]
        (diagnosis,) = of_code(f"{stem}.pcap", "close.session")
        assert diagnosis["title"].endswith(error["condition"])


def test_rejections_and_redeliveries_counted_as_the_client_saw_them() -> None:
    for stem in ("10-peer-to-peer",):
        truth = expect(stem)["rejection_conditions"]
        assert len(of_code(f"{stem}.pcap", "delivery.rejected")) == len(truth)
    (redelivered,) = of_code("091-ack-nack-reject.pcap", "delivery.redelivered")
    truth = expect("091-ack-nack-reject")
    assert redelivered["title"].startswith(f"{truth['redeliveries']} deliveries")
    earlier, again = evidence("091-ack-nack-reject.pcap", redelivered)  # both deliveries
    assert again["name"] == "basic.deliver" and again["fields"]["redelivered"] is True
    assert earlier["name"] == "basic.deliver" and earlier["fields"]["redelivered"] is False
    tags = {d["delivery_tag"]: d["body"] for d in truth["delivery_log"]}
    assert tags[earlier["fields"]["delivery-tag"]] == tags[again["fields"]["delivery-tag"]]
    assert (
        f"Frame {again['frame']} delivers again the message of frame {earlier['frame']}"
        in (redelivered["explanation"])
    )


def test_10_released_message_sent_again_cites_both_transfers() -> None:
    name = "10-outcomes.pcap"
    truth = expect("10-outcomes")
    (redelivered,) = of_code(name, "delivery.redelivered")
    assert redelivered["severity"] == "info"
    assert redelivered["title"].startswith(f"{truth['redeliveries']} deliveries")
    earlier, again = evidence(name, redelivered)
    assert earlier["name"] == again["name"] == "transfer" and again["dir"] == "s2c"
    ids = [d["id"] for d in truth["deliveries"]]
    (back,) = [d["id"] for d in truth["deliveries"] if d["redelivery"]]
    # the n-th transfer the client received is the n-th delivery it logged
    received = [
        f for f in frames_of(name).values() if f["name"] == "transfer" and f["dir"] == "s2c"
    ]
    order = [f["frame"] for f in received]
    assert ids[order.index(again["frame"])] == ids[order.index(earlier["frame"])] == back


def test_broker_sending_without_credit_is_the_brokers_violation() -> None:
    violation, harmless = of_code("10-drain.pcap", "spec.violation")  # ranked: info last
    assert violation["severity"] == "warning" and harmless["severity"] == "info"
    (detach,) = evidence("10-drain.pcap", harmless)
    assert detach["name"] == "detach"  # after the broker's close: info, not a warning
    (transfer,) = evidence("10-drain.pcap", violation)
    assert transfer["name"] == "transfer" and transfer["dir"] == "s2c"
    assert "server" in violation["title"] and "2.6.7" in violation["explanation"]


def test_activemq_header_after_its_failed_login_is_its_harmless_violation() -> None:
    """ActiveMQ 5.17 answers a wrong password with sasl-outcome auth, then sends its AMQP
    protocol header: the login is refused (an error) and the header is the broker's breach of
    5.3.3.5, harmless (info) since nothing opens after it."""
    name = "10-amq-sasl-failed.pcap"
    (refused,) = of_code(name, "auth.refused")
    assert expect("10-amq-sasl-failed")["sasl_outcome"] in refused["title"]
    (violation,) = of_code(name, "spec.violation")
    assert violation["severity"] == "info" and "server" in violation["title"]
    assert "5.3.3.5" in violation["explanation"] and "channel" not in violation["title"]
    (header,) = evidence(name, violation)
    assert header["name"] == "protocol-header" and header["dir"] == "s2c"
    assert header["fields"]["protocol-id"] == 0  # the AMQP header, not SASL's


@pytest.mark.parametrize("stem", ["10-amq-bad-address", "10-amq-bad-selector", "10-amq-forbidden"])
def test_activemq_refused_link_is_the_brokers_answer_to_the_clients_attach(stem: str) -> None:
    (error,) = expect(stem)["link_errors"]
    (diagnosis,) = of_code(f"{stem}.pcap", "close.link")
    assert diagnosis["title"] == f"The server detached the link: {error['condition']}"
    assert diagnosis["explanation"].startswith(error["description"])
    attach, detach = evidence(f"{stem}.pcap", diagnosis)
    assert attach["name"] == "attach" and attach["dir"] == "c2s"
    assert attach["fields"]["name"] == detach_name(stem) == error["link"]
    assert detach["name"] == "detach" and detach["dir"] == "s2c"


def detach_name(stem: str) -> str:
    """The name of the one link the client of `stem` attached (its attach, from `read`)."""
    (attach,) = [
        f for f in frames_of(f"{stem}.pcap").values() if f["name"] == "attach" and f["dir"] == "c2s"
    ]
    return str(attach["fields"]["name"])


def test_activemq_rejection_is_the_receivers_and_what_it_gave_back_redelivered() -> None:
    """The receiver (the client) rejected one delivery with its own error; ActiveMQ sent the
    released and the modified one again, the modified one with header delivery-count 1."""
    name = "10-amq-outcomes.pcap"
    truth = expect("10-amq-outcomes")
    (rejected,) = of_code(name, "delivery.rejected")
    (disposition,) = evidence(name, rejected)
    assert disposition["name"] == "disposition" and disposition["dir"] == "c2s"
    (sent,) = truth["rejection_conditions_sent"]
    assert sent["condition"] in rejected["explanation"]
    received = truth["received"]
    again = [r for i, r in enumerate(received) if r["body"] in [e["body"] for e in received[:i]]]
    (redelivered,) = of_code(name, "delivery.redelivered")
    assert redelivered["title"].startswith(f"{len(again)} deliveries")
    transfers = [
        f for f in frames_of(name).values() if f["name"] == "transfer" and f["dir"] == "s2c"
    ]
    assert [f["message"]["body"]["value"] for f in transfers] == [r["body"] for r in received]
    counts = [f["message"]["header"].get("delivery-count", 0) for f in transfers]
    assert counts == [r["delivery_count"] for r in received]


def test_activemq_receiver_killed_holding_deliveries_it_never_settled() -> None:
    """The receiver process was killed holding 5 deliveries: the client dropped (its kernel's
    FIN), the 5 were left unsettled on its session's channel and came back on the next
    connection with delivery-count 1; ActiveMQ's error close answers the FIN, not the client."""
    name = "10-amq-killed-receiver.pcap"
    truth = expect("10-amq-killed-receiver")
    (left,) = of_code(name, "delivery.unsettled-at-end")
    cited = evidence(name, left)  # the held transfers, the FIN, then where they came back
    (fin,) = [f for f in cited if f["kind"] == "transport"]
    assert fin["name"] == "fin" and fin["fields"]["by"] == "client"
    held = [f for f in cited if f["conn"] == fin["conn"] and f["name"] == "transfer"]
    assert [f["message"]["body"]["value"] for f in held] == truth["held_unsettled"]
    assert left["title"].startswith(f"Deliveries left unsettled on channel {held[0]['channel']}")
    (dropped,) = of_code(name, "liveness.dropped")
    assert "fin by client" in dropped["title"]
    (close,) = of_code(name, "close.connection")
    assert close["title"] == "The server closed the connection: amqp:decode-error"
    assert f"client had ended its TCP stream (FIN, frame {fin['frame']})" in close["explanation"]
    (redelivered,) = of_code(name, "delivery.redelivered")
    assert redelivered["title"].startswith(f"{len(truth['received_again'])} deliveries")
    again = [f for f in evidence(name, redelivered) if f["conn"] != held[0]["conn"]]
    got = [(f["message"]["body"]["value"], f["message"]["header"]["delivery-count"]) for f in again]
    assert got == [(r["body"], r["delivery_count"]) for r in truth["received_again"]]


def close_to(measured: float, truth: float) -> bool:
    return abs(measured - truth) <= WITHIN * truth


def test_stalled_consumer_as_long_as_the_client_held_its_acks() -> None:
    name = "091-stalled-consumer.pcap"
    truth = expect("091-stalled-consumer")
    (stall,) = of_code(name, "consumer.stalled")
    assert close_to(stall["duration"], truth["stall"]["seconds"])
    assert abs(stall["start"] - truth["stall"]["started"]) < 0.1  # the same moment
    held = len(truth["unacked_in_stall"])
    assert stall["title"].startswith(
        f"Consumer on channel 1 stopped: {held} of {truth['prefetch_count']} prefetched"
    )
    last_ack, filled, resumed = evidence(name, stall)
    assert last_ack["name"] == "basic.ack"
    assert last_ack["fields"]["delivery-tag"] == truth["last_ack_before_stall_tag"]
    assert filled["name"] == "basic.deliver"
    assert filled["fields"]["delivery-tag"] == max(truth["unacked_in_stall"])
    assert resumed["name"] == "basic.ack"
    assert resumed["fields"]["delivery-tag"] == min(truth["unacked_in_stall"])
    assert not stall["ongoing"]


def test_blocked_publisher_for_as_long_as_pika_was_told() -> None:
    name = "091-blocked-publisher.pcap"
    truth = expect("091-blocked-publisher")["blocked"]
    (blocked,) = of_code(name, "publish.blocked")
    assert close_to(blocked["duration"], truth["seconds"])
    assert truth["reason"] in blocked["title"]
    start, end = evidence(name, blocked)
    assert start["name"] == "connection.blocked" and end["name"] == "connection.unblocked"
    assert start["fields"]["reason"] == truth["reason"]


def test_paused_client_missed_its_heartbeats_until_the_broker_gave_up() -> None:
    name = "091-missed-heartbeats.pcap"
    truth = expect("091-missed-heartbeats")
    (missed,) = of_code(name, "liveness.heartbeat-missed")
    silence = truth["silence"]["seconds"]
    assert close_to(missed["duration"], silence)
    assert silence > 2 * truth["negotiated_heartbeat"]
    assert f"heartbeat of {truth['negotiated_heartbeat']} s" in missed["title"]
    assert "client" in missed["title"]
    last, end = evidence(name, missed)
    assert last["name"] == "queue.declare" and last["dir"] == "c2s"  # its last frame
    assert end["kind"] == "transport" and end["fields"]["by"] == "server"
    (dropped,) = of_code(name, "liveness.dropped")
    assert dropped["evidence"][-1] == end["frame"]
    assert "after the client's silence" in dropped["explanation"]


def test_receiver_that_stopped_granting_credit_starved_the_broker() -> None:
    name = "10-credit-starved.pcap"
    truth = expect("10-credit-starved")
    (starved,) = of_code(name, "credit.starved")
    assert close_to(starved["duration"], truth["starvation"]["seconds"])
    assert abs(starved["start"] - truth["starvation"]["started"]) < 0.1
    assert starved["link"] == "amqpscope-starved" and starved["queue"].endswith(".q")
    granted, ran_out, resumed = evidence(name, starved)
    first, rest = truth["credit_granted"]
    assert granted["name"] == "flow" and granted["dir"] == "s2c"  # the broker's answer
    # the broker's delivery that used the last credit, with what the client saw still waiting
    assert ran_out["name"] == "transfer" and ran_out["dir"] == "s2c"
    waiting = truth["waiting_when_starved"]
    assert (
        f"frame {ran_out['frame']} used the last credit with {waiting} still to send"
        in (starved["explanation"])
    )
    assert granted["fields"]["link-credit"] == first
    assert granted["fields"]["available"] >= truth["waiting_when_starved"]
    assert resumed["name"] == "flow" and resumed["dir"] == "c2s"
    assert resumed["fields"]["link-credit"] == rest
    assert not starved["ongoing"]


#: the trigger the client wrote down -> the words the diagnosis must find for it
ACK_CAUSES = {
    "double ack": "a double ack",
    "delivered on channel 2": "wrong channel: tag 1 was delivered on channel 2",
    "reopened": "after the channel was reopened",
}


def test_unknown_delivery_tags_each_traced_to_how_the_client_got_it_wrong() -> None:
    name = "091-bad-acks.pcap"
    truth = expect("091-bad-acks")["channel_errors"]
    closes = sorted(of_code(name, "close.channel"), key=lambda d: d["start"])
    assert [d["channel"] for d in closes] == [e["channel"] for e in truth]
    for diagnosis, error in zip(closes, truth, strict=True):
        ack, close = evidence(name, diagnosis)
        assert ack["name"] == "basic.ack" and ack["channel"] == error["channel"]
        assert close["fields"]["reply-text"] == error["text"]
        (words,) = [w for key, w in ACK_CAUSES.items() if key in error["trigger"]]
        assert words in diagnosis["explanation"]


def test_nacked_publishes_each_with_its_publish_and_nack() -> None:
    name = "091-nacked-publish.pcap"
    truth = expect("091-nacked-publish")
    nacked = [c for c in truth["confirms"] if c["outcome"] == "nacked"]
    (diagnosis,) = of_code(name, "publish.nacked")
    assert diagnosis["title"].startswith(f"The broker nacked {len(nacked)} publishes")
    frames = evidence(name, diagnosis)
    assert len(frames) == 2 * len(nacked)
    for (publish, nack), confirm in zip(
        zip(frames[::2], frames[1::2], strict=True), nacked, strict=True
    ):
        assert publish["name"] == "basic.publish" and publish["dir"] == "c2s"
        assert publish["fields"]["routing-key"] == confirm["routing_key"]
        assert nack["name"] == "basic.nack" and nack["fields"]["delivery-tag"] == confirm["seq"]
        assert f"seq {confirm['seq']} " in diagnosis["explanation"]
    assert "reject-publish" in diagnosis["explanation"]


def test_confirm_held_back_by_an_alarm_is_an_outlier() -> None:
    name = "091-slow-confirm.pcap"
    truth = expect("091-slow-confirm")
    slow = truth["slow_confirm"]
    fast = [c["seconds"] for c in truth["confirms"] if c["seq"] != slow["seq"]]
    assert slow["seconds"] > 10 * max(fast)  # the client's own view: one outlier
    (diagnosis,) = of_code(name, "publish.confirm-slow")
    assert close_to(diagnosis["duration"], slow["seconds"])
    assert abs(diagnosis["start"] - slow["sent"]) < 0.1
    publish, ack = evidence(name, diagnosis)
    assert publish["name"] == "basic.publish" and publish["dir"] == "c2s"
    assert ack["name"] == "basic.ack" and ack["dir"] == "s2c"
    assert ack["fields"]["delivery-tag"] == slow["seq"]
    assert diagnosis["title"].startswith("1 publisher confirms on channel 1 took up to")
    assert "10 times the median" in diagnosis["explanation"]  # the threshold, in words
    (blocked,) = of_code(name, "publish.blocked")
    assert blocked["start"] <= diagnosis["start"] + diagnosis["duration"]


def test_publisher_that_gave_up_left_its_publishes_unconfirmed() -> None:
    name = "091-unconfirmed-publish.pcap"
    truth = expect("091-unconfirmed-publish")
    pending = truth["unconfirmed"]
    (diagnosis,) = of_code(name, "publish.unconfirmed")
    assert diagnosis["title"].startswith(f"{len(pending)} publishes on channel 1 never confirmed")
    assert close_to(diagnosis["duration"], truth["gave_up"]["oldest_seconds"])
    assert abs(diagnosis["start"] - pending[0]["sent"]) < 0.1
    *publishes, end = evidence(name, diagnosis)
    assert [p["name"] for p in publishes] == ["basic.publish"] * len(pending)
    assert all(
        p["fields"]["routing-key"] == e["routing_key"]
        for p, e in zip(publishes, pending, strict=True)
    )
    assert end["kind"] == "transport" and end["fields"]["by"] == "client"
    for entry in pending:
        assert f"seq {entry['seq']} " in diagnosis["explanation"]
    (blocked,) = of_code(name, "publish.blocked")
    assert blocked["ongoing"] and truth["blocked"]["reason"] in blocked["title"]
    # blocked until the publisher gave up and its TCP connection ended
    assert close_to(blocked["duration"], truth["gave_up"]["at"] - truth["blocked"]["at"])


#: how a redelivery diagnosis says which frame delivers again which frame's message, and how
SAID = re.compile(r"frame (\d+) delivers again the message of frame (\d+) \(([^)]*)\)", re.I)


def said_pairs(diagnosis: dict[str, Any]) -> list[tuple[int, int, str]]:
    """(redelivery, earlier delivery, how matched) as the explanation says them."""
    return [(int(a), int(b), how) for a, b, how in SAID.findall(diagnosis["explanation"])]


def test_091_redeliveries_linked_across_connections_to_the_first_consumer() -> None:
    name = "091-redelivered.pcap"
    truth = expect("091-redelivered")
    log = truth["deliveries_log"]
    first = {d["delivery_tag"]: d for d in log if d["consumer"] == "A"}
    again = {d["delivery_tag"]: d for d in log if d["consumer"] == "B"}
    (unacked,) = of_code(name, "delivery.unacked-at-end")
    assert unacked["title"].startswith(
        f"{truth['unacked_when_closed']} deliveries on channel {truth['channel_a']['number']}"
        " never acked when its channel closed"
    )
    assert close_to(unacked["duration"], truth["oldest_unacked_seconds"])
    (redelivered,) = of_code(name, "delivery.redelivered")
    # the channel's end, and each unacked delivery with the redelivery that brought it back
    (end,) = set(unacked["evidence"]) - set(redelivered["evidence"])
    assert frames_of(name)[end]["name"] == "channel.close-ok"
    assert set(unacked["evidence"]) == {end, *redelivered["evidence"]}
    assert "(connection 2) delivers again the message of frame" in unacked["explanation"]
    assert redelivered["title"].startswith(f"{truth['redeliveries']} deliveries")
    pairs = said_pairs(redelivered)
    assert len(pairs) == len(again)
    assert redelivered["evidence"] == sorted(n for pair in pairs for n in pair[:2])
    frames = frames_of(name)
    for number, before, how in pairs:
        earlier, later = frames[before], frames[number]
        assert earlier["name"] == later["name"] == "basic.deliver"
        assert earlier["conn"] != later["conn"] and later["fields"]["redelivered"] is True
        assert f"connection {earlier['conn']}" in how
        was, now = first[earlier["fields"]["delivery-tag"]], again[later["fields"]["delivery-tag"]]
        assert was["body"] == now["body"]
        assert how.startswith("the same message-id" if now["message_id"] else "the same body")
    assert "the same body from the same queue" in redelivered["explanation"]


def test_091_requeued_deliveries_linked_though_the_broker_did_not_mark_them() -> None:
    """garagemq delivers nacked and rejected messages again without `redelivered`: each is
    linked to its first delivery by its message-id, and the diagnosis says the flag was not set."""
    name = "091-gmq-requeue.pcap"
    truth = expect("091-gmq-requeue")
    assert truth["redelivered_flag_seen"] == 0 and len(truth["delivered_twice"]) == 3
    (diagnosis,) = of_code(name, "delivery.redelivered")
    assert diagnosis["severity"] == "info"
    assert diagnosis["title"] == "3 deliveries were redelivered (3 without the redelivered flag)"
    assert (
        "the broker (garagemq 0.1) did not set their redelivered flag" in diagnosis["explanation"]
    )
    pairs = said_pairs(diagnosis)
    assert diagnosis["evidence"] == sorted(n for pair in pairs for n in pair[:2])
    frames = frames_of(name)
    tags = {d["delivery_tag"]: d for d in truth["delivered"]}
    linked = []
    for number, before, how in pairs:
        earlier, later = frames[before], frames[number]
        assert earlier["name"] == later["name"] == "basic.deliver"
        assert later["fields"]["redelivered"] is False and how.startswith("the same message-id")
        was, now = tags[earlier["fields"]["delivery-tag"]], tags[later["fields"]["delivery-tag"]]
        assert was["message_id"] == now["message_id"] and (was["time"], now["time"]) == (1, 2)
        linked.append(now["message_id"])
    assert sorted(linked) == truth["delivered_twice"]


def test_10_redeliveries_linked_to_the_receiver_that_left_them_unsettled() -> None:
    name = "10-redelivered.pcap"
    truth = expect("10-redelivered")
    log = truth["deliveries"]
    held = [d for d in log if d["receiver"] == "A"]
    (unsettled,) = of_code(name, "delivery.unsettled-at-end")
    (redelivered,) = of_code(name, "delivery.redelivered")
    # the held transfers, the detach, and where they came back (the redeliveries' own pairs)
    (detach,) = set(unsettled["evidence"]) - set(redelivered["evidence"])
    assert frames_of(name)[detach]["name"] == "detach"  # the broker's, completing it
    assert set(unsettled["evidence"]) == {detach, *redelivered["evidence"]}
    assert "They came back as duplicates" in unsettled["explanation"]
    assert unsettled["link"] == "amqpscope-first"
    assert close_to(unsettled["duration"], truth["first_detached"]["at"] - held[0]["at"])
    assert redelivered["title"].startswith(f"{truth['redeliveries']} deliveries")
    again = [d for d in log if d["receiver"] == "B"]
    pairs = said_pairs(redelivered)
    assert len(pairs) == len(again) == truth["redeliveries"]
    assert redelivered["evidence"] == sorted(n for pair in pairs for n in pair[:2])
    frames = frames_of(name)
    links = {}
    for record in frames.values():
        if record["name"] == "attach" and record["dir"] == "s2c":
            links[(record["conn"], record["channel"], record["fields"]["handle"])] = record
    for number, before, how in pairs:
        earlier, later = frames[before], frames[number]
        assert earlier["name"] == later["name"] == "transfer" and earlier["dir"] == "s2c"
        first = links[(earlier["conn"], earlier["channel"], earlier["fields"]["handle"])]
        second = links[(later["conn"], later["channel"], later["fields"]["handle"])]
        assert first["fields"]["name"] == "amqpscope-first"
        assert second["fields"]["name"] == "amqpscope-second"
        was, now = earlier["message"], later["message"]
        assert was["body"] == now["body"]
        assert was["header"].get("first-acquirer") is True
        assert now["header"].get("first-acquirer") is False
        wanted = "the same message-id" if now["properties"].get("message-id") else "the same body"
        assert how.startswith(wanted)
    redelivered_bodies = [str(frames[number]["message"]["body"]["value"]) for number, *_ in pairs]
    bodies = sorted(str(d["body"]) for d in again)
    assert sorted(redelivered_bodies) == bodies


def test_tokens_refused_and_expired_and_requests_failed_or_unanswered() -> None:
    """Against what each Proton side counted: the responses the client got, the link the
    listener dropped when the token expired, the request it never answered."""
    name = "10-cbs-tokens.pcap"
    truth = expect("10-cbs-tokens")
    frames = frames_of(name)
    responses = {r["correlation_id"]: r for r in truth["client_responses"]}

    def exchange(diagnosis: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        request, response = (frames[n]["message"]["request-reply"] for n in diagnosis["evidence"])
        assert request["kind"] == "request" and response["kind"] == "response"
        assert response["correlation-id"] == request["message-id"]
        return request, response

    (refused,) = of_code(name, "auth.token-refused")
    request, response = exchange(refused)
    said = responses[request["message-id"]]
    assert request["operation"] == "put-token" and said["status_code"] >= 400
    assert response["status-code"] == said["status_code"]
    assert f"{said['status_code']} {said['status_description']}" in refused["title"]
    assert refused["queue"] == request["name"]

    (expired,) = of_code(name, "auth.token-expired")
    (dropped,) = truth["link_errors"]
    *token, detach = (frames[n] for n in expired["evidence"])
    assert detach["name"] == "detach" and detach["dir"] == "s2c"
    assert detach["fields"]["error"]["condition"] == dropped["condition"]
    assert expired["link"] == dropped["link"]
    put, accepted = (record["message"]["request-reply"] for record in token)
    assert put["operation"] == "put-token" and accepted["status-code"] == 202
    last = truth["client_put_tokens"][-1]
    assert put["message-id"] == last["id"]
    assert put["expiration"] in expired["explanation"]  # the expiry the client wrote
    assert last["expiration_ms"] / 1000 <= detach["ts"]
    assert not of_code(name, "close.link")  # the expiry is the answer, not a bare detach

    (failed,) = of_code(name, "request.failed")
    request, response = exchange(failed)
    answered = [a for a in truth["listener_answers"] if a["operation"] != "put-token"]
    assert [(request["operation"], response["status-code"])] == [
        (a["operation"], a["status_code"]) for a in answered
    ]
    (unanswered,) = of_code(name, "request.unanswered")
    asked = [frames[n]["message"]["request-reply"]["operation"] for n in unanswered["evidence"]]
    assert asked == truth["listener_unanswered"]


def test_a_confirm_mode_publish_refused_by_the_close_is_not_unconfirmed() -> None:
    """py-amqp publishes with confirms one at a time; its publish to a missing exchange is
    answered by channel.close 404: the close names the publish, and no confirm is owed."""
    name = "091-pyamqp-missing-exchange.pcap"
    truth = expect("091-pyamqp-missing-exchange")
    assert not of_code(name, "publish.unconfirmed")
    (diagnosis,) = of_code(name, "close.channel")
    publish, close = evidence(name, diagnosis)
    assert publish["name"] == "basic.publish"
    assert publish["fields"]["exchange"] == truth["missing_exchange"]
    (error,) = truth["channel_errors"]
    assert close["fields"]["reply-code"] == error["code"] == 404
    assert close["fields"]["reply-text"] == error["text"]


@pytest.mark.parametrize(
    ("stem", "chosen"), [("091-php-amqplain-gmq", "AMQPLAIN"), ("091-gmq-refused-login", None)]
)
def test_a_login_refused_for_a_mechanism_the_broker_did_not_offer(stem: str, chosen: Any) -> None:
    """php-amqplib logs in with AMQPLAIN by default, garagemq offers PLAIN alone: the refusal is
    the mechanism's, not the credentials'. pika's wrong password (PLAIN) stays the credentials'."""
    name = f"{stem}.pcap"
    (diagnosis,) = of_code(name, "auth.refused")
    frames = evidence(name, diagnosis)
    (error,) = expect(stem)["connection_errors"]
    assert frames[-1]["fields"]["reply-code"] == error["code"] == 530
    if chosen is None:
        assert "not offered" not in diagnosis["title"]
        assert "user name or password" in diagnosis["explanation"]
        return
    start, start_ok, _close = frames
    assert start["name"] == "connection.start" and chosen not in start["fields"]["mechanisms"]
    assert start_ok["fields"]["mechanism"] == chosen
    assert f"mechanism {chosen} not offered" in diagnosis["title"]
    assert "user name or password" not in diagnosis["explanation"]
    assert f"listed {start['fields']['mechanisms']}" in diagnosis["explanation"]


def test_py_amqp_that_never_ticked_missed_its_heartbeats() -> None:
    """py-amqp negotiated 2 s and then sent nothing (no heartbeat_tick): the client's silence,
    RabbitMQ's RST; py-amqp's close failed on the reset connection."""
    name = "091-pyamqp-heartbeat-silent.pcap"
    truth = expect("091-pyamqp-heartbeat-silent")
    (missed,) = of_code(name, "liveness.heartbeat-missed")
    assert "client" in missed["title"]
    assert 2 * truth["negotiated_heartbeat"] < missed["duration"] <= truth["silent_s"]
    last, end = evidence(name, missed)
    assert last["dir"] == "c2s" and end["fields"] == {"event": "rst", "by": "server"}
    assert truth["heartbeats_sent_by_client"] == 0 and truth["close_failed"]
    (dropped,) = of_code(name, "liveness.dropped")
    assert "after the client's silence" in dropped["explanation"]


@pytest.mark.parametrize(
    ("stem", "hint"),
    [("091-pyamqp-heartbeat-silent", True), ("091-missed-heartbeats", False)],
)
def test_a_silent_client_whose_library_sends_heartbeats_only_when_asked(
    stem: str, hint: bool
) -> None:
    """py-amqp sends heartbeats from heartbeat_tick alone: its silence points at the application
    (no tick), which the check says; pika's paused process keeps the general check."""
    (missed,) = of_code(f"{stem}.pcap", "liveness.heartbeat-missed")
    assert ("heartbeat_tick" in missed["explanation"]) is hint
    assert ("paused" in missed["explanation"]) is True


def test_garagemq_closing_on_the_content_of_the_publish_it_refused_is_its_error() -> None:
    """py-amqp writes a publish's method, header and body at once: the header was on its way
    before garagemq's channel.close (in the capture, before it too), and garagemq's 501 on it is
    the broker's error, as on pika's header sent after the close (091-gmq-missing-exchange)."""
    name = "091-pyamqp-missing-exchange-gmq.pcap"
    truth = expect("091-pyamqp-missing-exchange-gmq")
    (diagnosis,) = of_code(name, "close.connection")
    header, close, conn_close = evidence(name, diagnosis)
    assert header["kind"] == "content-header" and header["dir"] == "c2s"
    assert close["name"] == "channel.close" and header["frame"] < close["frame"]
    (channel_error,) = truth["channel_errors"]
    assert close["fields"]["reply-code"] == channel_error["code"] == 404
    (connection_error,) = truth["connection_errors"]
    assert conn_close["fields"]["reply-code"] == connection_error["code"] == 501
    assert "on a frame in flight" in diagnosis["title"]
    assert "The broker's error, not the client's" in diagnosis["explanation"]
    assert "malformed" not in diagnosis["explanation"]


@pytest.mark.parametrize(
    ("stem", "by"),
    [
        ("091-aiormq-no-close", "client"),  # the program exited: its kernel's FIN
        ("091-php-killed", "client"),  # SIGKILL: the kernel's FIN
        ("091-killed-consumer", "client"),
    ],
)
def test_a_connection_dropped_by_the_client_names_the_client_not_the_broker(
    stem: str, by: str
) -> None:
    """A FIN from the client's side with the connection open is the client's process ending
    (aiormq's program exiting, a killed PHP worker), not a broker that gave up on it."""
    (dropped,) = of_code(f"{stem}.pcap", "liveness.dropped")
    end = evidence(f"{stem}.pcap", dropped)[-1]
    assert end["kind"] == "transport" and end["fields"]["by"] == by
    assert "The client's side ended it" in dropped["explanation"]
    assert "broker dropping" not in dropped["explanation"]


def test_a_broker_that_held_to_the_heartbeat_it_proposed() -> None:
    """aiormq's tune-ok chose 60 s where garagemq proposed 10; garagemq hung up after 30 s of the
    client's silence, which the negotiated 60 s allows: the diagnosis says so, not 'the broker
    dropped a connection it thought dead' alone."""
    name = "091-aiormq-idle-gmq.pcap"
    truth = expect("091-aiormq-idle-gmq")
    frames = frames_of(name)
    (tune,) = [f for f in frames.values() if f["name"] == "connection.tune"]
    (tune_ok,) = [f for f in frames.values() if f["name"] == "connection.tune-ok"]
    proposed, chosen = tune["fields"]["heartbeat"], tune_ok["fields"]["heartbeat"]
    assert chosen == truth["negotiated_heartbeat"] > proposed > 0
    (dropped,) = of_code(name, "liveness.dropped")
    last, *_, end = evidence(name, dropped)
    assert last["dir"] == "c2s" and end["fields"] == {"event": "fin", "by": "server"}
    assert close_to(end["ts"] - last["ts"], truth["lost_after_s"])
    assert f"of the {proposed} s heartbeat the broker proposed" in dropped["explanation"]
    assert f"tune-ok chose {chosen} s" in dropped["explanation"]
    assert not of_code(name, "liveness.heartbeat-missed")  # within the negotiated 90 s


def test_a_close_sent_after_the_other_side_hung_up_is_its_reply_not_a_cause() -> None:
    """aiormq sends connection.close 500 'reader unexpected closed' after garagemq's FIN: the
    close answers the lost connection (info, the FIN in its evidence), no error of its own."""
    name = "091-aiormq-idle-gmq.pcap"
    (close,) = of_code(name, "close.connection")
    fin, sent = evidence(name, close)
    assert fin["kind"] == "transport" and fin["fields"] == {"event": "fin", "by": "server"}
    assert sent["name"] == "connection.close" and sent["dir"] == "c2s"
    assert sent["fields"]["reply-code"] == 500
    assert close["severity"] == "info" and "after the server hung up" in close["title"]
    assert "the client's reply to the connection it lost" in close["explanation"]


def test_a_consumer_cancelled_after_its_own_connection_deleted_the_queue_on_another_channel() -> (
    None
):
    """amqp091-go consumes on channel 1 and deletes the queue on channel 2 of the same
    connection: RabbitMQ's basic.cancel answers the client's own queue.delete, so the diagnosis
    names that frame and is no warning to go and find who deleted the queue (it warned before:
    only the consumer's channel was searched)."""
    name = "091-go-cancel.pcap"
    truth = expect("091-go-cancel")
    (diagnosis,) = of_code(name, "consumer.cancelled")
    assert diagnosis["severity"] == "info"
    consume, delete, cancel = evidence(name, diagnosis)
    assert (delete["name"], delete["dir"]) == ("queue.delete", "c2s")
    assert delete["channel"] != cancel["channel"] == consume["channel"]
    assert delete["fields"]["queue"] == diagnosis["queue"] == consume["fields"]["queue"]
    assert cancel["fields"]["consumer-tag"] == truth["cancelled_by_broker"][0]
    assert f"queue.delete in frame {delete['frame']}" in diagnosis["explanation"]


def test_an_inequivalent_redeclare_names_the_earlier_declare_and_what_differs() -> None:
    """amqplib declares a queue with x-max-length 10, then again with 20: RabbitMQ's 406 names
    neither declare's values; the diagnosis names the earlier declare of that name on the wire
    and the argument the two disagree on, the client's own two calls (it named only the second
    before)."""
    name = "091-amqplib-redeclare.pcap"
    truth = expect("091-amqplib-redeclare")
    (diagnosis,) = of_code(name, "close.channel")
    second, close = evidence(name, diagnosis)
    (first,) = [
        f
        for n, f in frames_of(name).items()
        if n < second["frame"] and f["name"] == "queue.declare"
    ]
    assert first["name"] == second["name"] == "queue.declare"
    assert first["fields"]["queue"] == second["fields"]["queue"]
    assert first["fields"]["arguments"] != second["fields"]["arguments"]
    (error,) = truth["channel_errors"]
    assert close["fields"]["reply-code"] == error["code"] == 406
    assert f"frame {first['frame']}" in diagnosis["explanation"]
    assert "x-max-length 10 there, 20 here" in diagnosis["explanation"]
