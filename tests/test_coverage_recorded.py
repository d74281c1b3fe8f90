"""Diagnoses and findings that had no test, each on a recording (issue 40 item 14): what the
recorded client or peer saw (captures/NAME.json) against what amqpscope reads from the capture
or log of the same run. consumer.cancelled, close.connection (0-9-1 320 and 540, a 1.0 close
with an error), consumer.flow-stopped, the 1.0 link violations (handle-in-use,
handle-over-max, wrong-role) and session.window-closed are recorded by
captures/scenarios/coverage.py.

log.truncated-payload: rhea's frame trace (DEBUG=rhea:frames) prints a payload as Node prints a
Buffer, its first 50 bytes and "... N more bytes": every transfer of log-rhea-broker.log is cut,
and the finding gives the payload's whole size, which is what Proton decodes out of the same
transfer in log-rhea-broker.pcap (tcpdump beside the trace).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from proton import Data

from amqpscope.capture.files import open_capture
from amqpscope.cli import main
from amqpscope.dissect import Dissector
from amqpscope.logs.detect import detect
from amqpscope.logs.reader import records_from_log

CAPTURES = Path(__file__).resolve().parent.parent / "captures"


def truth(name: str) -> dict[str, Any]:
    return json.loads((CAPTURES / f"{name}.json").read_text())["expect"]


def log_records(name: str) -> list[Any]:
    lines = (CAPTURES / name).read_text().splitlines(keepends=True)
    fmt = detect(lines)
    assert fmt is not None
    return list(records_from_log(lines, name, fmt))


def payload_sizes(pcap: Path) -> dict[tuple[str, str], int]:
    """(direction, delivery-tag) -> the payload's size of each transfer, Proton decoding the
    performative (the payload is what follows it)."""
    out = {}
    with open_capture(str(pcap)) as capture:
        for frame in Dissector().run(capture):
            if frame.name == "transfer":
                body = frame.data[frame.data[4] * 4 :]
                performative = Data().decode(body)
                out[(frame.direction, frame.fields["delivery-tag"])] = len(body) - performative
    return out


def test_a_payload_the_log_cut_short_is_found_with_its_whole_size() -> None:
    expect = truth("log-rhea-broker")
    records = log_records("log-rhea-broker.log")
    cut = {
        (r.direction, r.fields["delivery-tag"]): [
            f.message for f in r.findings if f.code == "log.truncated-payload"
        ]
        for r in records
        if r.name == "transfer"
    }
    transfers = [r for r in records if r.name == "transfer"]
    assert len(cut) == len(transfers) == expect["transfers_sent"] + expect["transfers_received"]
    wire = payload_sizes(CAPTURES / "log-rhea-broker.pcap")
    assert wire.keys() == cut.keys()
    for key, messages in cut.items():
        assert messages == [f"the log shows {wire[key]} payload bytes cut short"], key
    # and nothing but transfers is said to be cut, nor any transfer of a log that shows them
    codes = [(r.name, f.code) for r in records for f in r.findings]
    assert {name for name, code in codes if code == "log.truncated-payload"} == {"transfer"}
    proton = log_records("log-proton-broker.log")
    assert not [f for r in proton for f in r.findings if f.code == "log.truncated-payload"]


def diagnoses(name: str) -> list[dict[str, Any]]:
    result = CliRunner().invoke(main, ["diagnose", "--json", str(CAPTURES / name)])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["diagnoses"]


def frames(name: str) -> dict[int, dict[str, Any]]:
    """`read --json`'s records by frame number: what each evidence frame is."""
    result = CliRunner().invoke(main, ["read", "--json", str(CAPTURES / name)])
    assert result.exit_code == 0, result.output
    records = map(json.loads, result.stdout.splitlines())
    return {r["frame"]: r for r in records if "frame" in r}


def codes(record: dict[str, Any]) -> list[str]:
    """The codes of the findings `read --json` gives a frame."""
    return [f["code"] for f in record["findings"]]


def only(found: list[dict[str, Any]], code: str) -> dict[str, Any]:
    (diagnosis,) = [d for d in found if d["code"] == code]
    return diagnosis


def test_a_consumer_the_broker_cancelled_and_a_connection_it_forced_closed() -> None:
    """captures/scenarios/coverage.py: another connection deleted the queue under the
    consumer (RabbitMQ's basic.cancel, pika's on_cancel callback), then rabbitmqctl
    close_connection (320, pika's ConnectionClosedByBroker)."""
    name = "091-broker-cancel-and-close"
    expect, found, by_number = truth(name), diagnoses(f"{name}.pcap"), frames(f"{name}.pcap")
    cancelled = only(found, "consumer.cancelled")
    tag = expect["cancelled_by_broker"]["consumer_tag"]
    assert cancelled["title"] == f"The broker cancelled consumer {tag!r} on channel 1"
    assert cancelled["severity"] == "warning"  # not this connection's own queue.delete
    assert cancelled["queue"] == f"amqpscope.{name}.q"
    consume, cancel = (by_number[n] for n in cancelled["evidence"])
    assert (consume["name"], consume["dir"]) == ("basic.consume", "c2s")
    assert (cancel["name"], cancel["dir"]) == ("basic.cancel", "s2c")
    assert cancel["fields"]["consumer-tag"] == tag and cancel["conn"] == consume["conn"]
    closed = only(found, "close.connection")
    code, text = expect["closed_by_broker"]["reply_code"], expect["closed_by_broker"]["reply_text"]
    assert closed["title"] == f"Connection closed by the server: {code} CONNECTION_FORCED"
    assert closed["severity"] == "error" and closed["conn"] == cancel["conn"]
    (close,) = (by_number[n] for n in closed["evidence"])
    assert (close["name"], close["dir"]) == ("connection.close", "s2c")
    assert (close["fields"]["reply-code"], close["fields"]["reply-text"]) == (code, text)
    assert sorted(d["code"] for d in found) == ["close.connection", "consumer.cancelled"]


def test_a_client_that_stopped_the_brokers_content_with_channel_flow() -> None:
    """captures/scenarios/coverage.py: the client's channel.flow active=false, which RabbitMQ
    3.x answers with 540 NOT_IMPLEMENTED (what pika raised)."""
    name = "091-flow-refused"
    expect, found, by_number = truth(name), diagnoses(f"{name}.pcap"), frames(f"{name}.pcap")
    stopped = only(found, "consumer.flow-stopped")
    assert stopped["title"] == "The client stopped content on channel 1 (channel.flow)"
    (flow,) = (by_number[n] for n in stopped["evidence"])
    assert (flow["name"], flow["dir"], flow["fields"]["active"]) == ("channel.flow", "c2s", False)
    closed = only(found, "close.connection")
    code, text = expect["closed_by_broker"]["reply_code"], expect["closed_by_broker"]["reply_text"]
    assert closed["title"] == f"Connection closed by the server: {code} NOT_IMPLEMENTED"
    (close,) = (by_number[n] for n in closed["evidence"])
    assert (close["name"], close["dir"]) == ("connection.close", "s2c")
    assert (close["fields"]["reply-code"], close["fields"]["reply-text"]) == (code, text)
    assert close["frame"] > flow["frame"]
    unacked = only(found, "delivery.unacked-at-end")  # the one delivery pika held
    assert unacked["title"].startswith(f"{expect['unacked_when_closed']} deliveries on channel 1")


def test_a_clients_1_0_link_violations_and_the_listeners_close() -> None:
    """captures/scenarios/coverage.py: a socket client, its frames encoded by Proton's Data,
    breaks one link rule per connection against a Proton listener, which closes the last
    connection with an error of its own (what the client decoded, and Proton reported)."""
    name = "10-link-violations"
    expect, found, by_number = truth(name), diagnoses(f"{name}.pcap"), frames(f"{name}.pcap")
    violations = sorted(
        (d for d in found if d["code"] == "spec.violation"), key=lambda d: d["evidence"][0]
    )
    assert [d["title"] for d in violations] == [
        "The client broke a rule: attach on channel 0",
        "The client broke a rule: transfer on channel 0",
        "The client broke a rule: attach on channel 0",
    ]
    in_use, role, over = ([by_number[n] for n in d["evidence"]] for d in violations)
    assert len({d["conn"] for d in violations}) == 3  # one connection each
    # (1) link b attached on handle 0 while a was: the client's attaches, in order
    (attach,) = in_use
    attaches = [
        (r["fields"]["name"], r["fields"]["handle"])
        for r in by_number.values()
        if r["conn"] == attach["conn"] and r["name"] == "attach" and r["dir"] == "c2s"
    ]
    assert [n for n, _ in attaches] == expect["handle_in_use"]["attached_on_handle_0"]
    assert {h for _, h in attaches} == {0} and attach["fields"]["name"] == "b"
    assert codes(attach) == ["amqp10.handle-in-use"]
    # (2) a transfer on the link the client attached as its receiver
    (transfer,) = role
    (receiver,) = [
        r
        for r in by_number.values()
        if r["conn"] == transfer["conn"] and r["name"] == "attach" and r["dir"] == "c2s"
    ]
    assert receiver["fields"]["name"] == expect["wrong_role"]["receiver_link"]
    assert receiver["fields"]["role"] == "receiver" and transfer["dir"] == "c2s"
    assert transfer["fields"]["handle"] == receiver["fields"]["handle"]
    assert codes(transfer) == ["amqp10.wrong-role"]
    # (3) an attach above the listener's handle-max, which the listener closed the connection for
    (high,) = over
    assert high["fields"]["handle"] == expect["handle_over_max"]["handle"]
    (begin,) = [
        r
        for r in by_number.values()
        if r["conn"] == high["conn"] and r["name"] == "begin" and r["dir"] == "s2c"
    ]
    assert begin["fields"]["handle-max"] == expect["handle_over_max"]["listener_handle_max"]
    assert codes(high) == ["amqp10.handle-over-max"]
    closed = only(found, "close.connection")
    condition, description = expect["handle_over_max"]["listener_closed_with"]
    assert closed["title"] == f"The server closed the connection: {condition}"
    assert closed["conn"] == high["conn"] and closed["severity"] == "error"
    close = by_number[closed["evidence"][-1]]
    assert (close["name"], close["dir"]) == ("close", "s2c")
    assert close["fields"]["error"]["condition"] == condition
    assert close["fields"]["error"]["description"] == description
    assert [condition, description] in expect["listener_transport_errors"]  # Proton's own word
    # the other two connections the listener kept open, as the client saw
    assert expect["handle_in_use"]["listener_closed_with"] is None
    assert expect["wrong_role"]["listener_closed_with"] is None
    unsettled = only(found, "delivery.unsettled-at-end")  # the wrong-role transfer, unsettled
    assert unsettled["conn"] == transfer["conn"]


def test_a_session_window_the_receiver_shut_and_re_opened() -> None:
    """captures/scenarios/coverage.py: the socket client's begin states incoming-window 1 and
    its link grants credit 10; Proton, the sender, sends one transfer and waits until the
    client's session flow re-opens the window 1.5 s later (the client's clock): the diagnosis
    is the server's session, stopped by the client's window, for that long, citing the
    transfer that used the window and the flow that re-opened it."""
    name = "10-session-window"
    expect, found, by_number = truth(name), diagnoses(f"{name}.pcap"), frames(f"{name}.pcap")
    window = expect["session_window"]
    closed = only(found, "session.window-closed")
    assert closed["title"].startswith("The server's session on channel 0 had no window for")
    assert "The client's incoming-window for the session was used up" in closed["explanation"]
    assert not closed["ongoing"]
    shut = window["shut_seconds"]
    assert abs(closed["duration"] - shut) <= 0.1 * shut, (closed["duration"], shut)
    transfer, flow = (by_number[n] for n in closed["evidence"])
    # the transfer that used the client's window of 1, the only one before the re-opening
    transfers = [r for r in by_number.values() if r["name"] == "transfer"]
    assert len(transfers) == window["transfers_before_reopen"] + window["transfers_after_reopen"]
    before = [r for r in transfers if r["frame"] < flow["frame"]]
    assert len(before) == window["transfers_before_reopen"] == 1
    assert (transfer["name"], transfer["dir"]) == ("transfer", "s2c") and before == [transfer]
    assert abs(closed["start"] - transfer["ts"]) < 1e-6
    (begin,) = [r for r in by_number.values() if r["name"] == "begin" and r["dir"] == "c2s"]
    assert begin["fields"]["incoming-window"] == window["client_incoming_window"]
    # the client's session flow (no handle) that re-opened it: its own next-incoming-id
    assert (flow["name"], flow["dir"]) == ("flow", "c2s") and "handle" not in flow["fields"]
    assert flow["fields"]["next-incoming-id"] == window["reopen_next_incoming_id"]
    assert flow["fields"]["incoming-window"] == window["reopen_incoming_window"]
    assert codes(flow) == ["amqp10.window-exhausted"]
    assert [r["fields"]["delivery-id"] for r in transfers] == window["delivery_ids"]
    assert expect["listener_sent"] == len(window["delivery_ids"])
