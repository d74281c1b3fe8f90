"""`diagnose` on the AMQP 1.0 recordings of other peers (captures/scenarios/peers10.py): the
node amqp10 client, Qpid Proton's C++ example broker, garagemq, RabbitMQ with a client that has
no SASL mechanism in common with it. Each answer is checked against what the client observed
(NAME.json `expect`) and its evidence by what `read --json` says each frame is.
"""

from __future__ import annotations

from amqpscope.capture.files import open_capture
from amqpscope.diagnose.amqp10 import _address
from amqpscope.dissect import Dissector
from amqpscope.track.tracker import Tracker
from tests.test_diagnose_captures import CAPTURES, WITHIN, evidence, expect, frames_of, of_code


def _links(name: str) -> list:
    """The links of the capture's connections, as the tracker left them."""
    tracker = Tracker()
    with open_capture(str(CAPTURES / name)) as capture:
        for frame in Dissector().run(capture):
            tracker.feed(frame)
    tracker.finish()
    return [link for c in tracker.connections.values() for s in c.sessions for link in s.links]


def _terminus(frame: dict, key: str) -> str | None:
    value = frame["fields"].get(key)
    return value.get("address") if isinstance(value, dict) else None


def test_a_link_is_named_by_its_node_not_the_clients_own_terminus() -> None:
    """amqp10 fills in its own end ('localhost': the target of its receivers, the source of
    its senders); the node is the receiver's source and the sender's target."""
    name = "10-amqp10-cpp-starved.pcap"
    queue = expect("10-amqp10-cpp-starved")["address"]
    attaches = [f for f in frames_of(name).values() if f["name"] == "attach" and f["dir"] == "c2s"]
    ends = {(f["fields"]["role"], _terminus(f, "source"), _terminus(f, "target")) for f in attaches}
    assert ends == {("sender", "localhost", queue), ("receiver", queue, "localhost")}
    links = _links(name)
    assert len(links) == 2
    assert [_address(link) for link in links] == [queue, queue]
    # uamqp fills in its own end with its container-id; its node address is its URL's
    uamqp = f"amqps://localhost/{expect('10-uamqp-cpp-broker')['address']}"
    assert [_address(link) for link in _links("10-uamqp-cpp-broker.pcap")] == [uamqp] * 2
    (starved,) = of_code(name, "credit.starved")
    assert starved["queue"] == queue and "localhost" not in starved["title"]
    (never,) = of_code("10-amqp10-never-granted.pcap", "credit.never-granted")
    assert never["queue"] == expect("10-amqp10-never-granted")["address"]


def test_starvation_inferred_from_transfers_that_follow_a_grant() -> None:
    """Proton's C++ broker never states `available`: the wait shows as a grant that transfers
    answer at once, and the diagnosis says it is inferred, from what, and how sure."""
    name = "10-amqp10-cpp-starved.pcap"
    truth = expect("10-amqp10-cpp-starved")
    (diagnosis,) = of_code(name, "credit.starved")
    frames = frames_of(name)
    assert not any(f["fields"].get("available") for f in frames.values() if f["dir"] == "s2c")
    seconds = truth["starvation"]["seconds"]
    assert abs(diagnosis["duration"] - seconds) <= WITHIN * seconds
    last, grant, first = evidence(name, diagnosis)
    assert last["name"] == first["name"] == "transfer" and last["dir"] == first["dir"] == "s2c"
    assert grant["name"] == "flow" and grant["dir"] == "c2s"
    granted = [g["credit"] for g in truth["credit_granted"]]
    assert grant["fields"]["link-credit"] == granted[1] == 10
    # the 10 transfers that answered the grant: all between it and the next grant
    between = [
        f
        for f in frames.values()
        if f["name"] == "transfer" and f["dir"] == "s2c" and f["frame"] > grant["frame"]
    ][:10]
    within_ms = (between[-1]["ts"] - grant["ts"]) * 1000
    assert "(inferred)" in diagnosis["title"]
    text = diagnosis["explanation"]
    assert text.startswith("Inferred, confidence high: 10 transfers followed the grant within")
    assert f"within {within_ms:.1f} ms" in text and "available" in text
    assert first["frame"] == between[0]["frame"]
    assert truth["waiting_when_starved"] == 15


def test_a_receiver_that_never_grants_credit() -> None:
    name = "10-amqp10-never-granted.pcap"
    truth = expect("10-amqp10-never-granted")
    (diagnosis,) = of_code(name, "credit.never-granted")
    seconds = truth["no_credit_seconds"]
    assert abs(diagnosis["duration"] - seconds) <= WITHIN * seconds
    attach, close = evidence(name, diagnosis)
    assert attach["name"] == "attach" and attach["dir"] == "c2s"
    assert attach["fields"]["role"] == "receiver"
    assert _terminus(attach, "source") == truth["address"]
    assert close["name"] == "close"
    flows = [
        f
        for f in frames_of(name).values()
        if f["name"] == "flow" and f["fields"].get("handle") == attach["fields"]["handle"]
    ]
    assert flows == [] and truth["credit_granted"] == []
    assert "granted no link-credit" in diagnosis["explanation"]
    assert "client attached" in diagnosis["explanation"]


def test_a_server_that_answers_another_protocol_and_hangs_up() -> None:
    name = "10-header-hangup.pcap"
    error = expect("10-header-hangup")["proton_error"]
    # Proton saw the 0-9-1 header: AMQP 0 0 9 1
    assert error["condition"] == "amqp:connection:framing-error"
    assert "AMQP\\x00\\x00\\x09\\x01" in error["description"]
    (diagnosis,) = of_code(name, "connection.not-opened")
    header, end = evidence(name, diagnosis)
    assert header["name"] == "protocol-header" and header["dir"] == "s2c"
    assert header["fields"]["protocol"] == "AMQP 0-9-1"
    assert end["kind"] == "transport" and end["fields"]["by"] == "server"
    assert "AMQP 0-9-1" in diagnosis["title"]
    assert "the server closed the TCP connection" in diagnosis["explanation"]


def test_a_server_that_hangs_up_with_no_answer() -> None:
    """RabbitMQ's stream listener reads the AMQP header as a stream frame's size and closes."""
    name = "10-stream-port-hangup.pcap"
    error = expect("10-stream-port-hangup")["proton_error"]
    assert "no protocol header found" in error["description"]
    (diagnosis,) = of_code(name, "connection.not-opened")
    header, end = evidence(name, diagnosis)
    assert header["name"] == "protocol-header" and header["dir"] == "c2s"
    assert end["kind"] == "transport" and end["fields"]["by"] == "server"
    answered = [f for f in frames_of(name).values() if f["dir"] == "s2c"]
    assert [f["kind"] for f in answered] == ["transport"]  # the FIN, no byte before it
    assert "hung up after the protocol header" in diagnosis["title"]
    assert "the server closed the TCP connection with no header" in diagnosis["explanation"]


def test_no_sasl_mechanism_in_common() -> None:
    name = "10-sasl-no-mechanism.pcap"
    truth = expect("10-sasl-no-mechanism")
    assert truth["connections_opened"] == 0
    (diagnosis,) = of_code(name, "connection.not-opened")
    offered, end = evidence(name, diagnosis)
    assert offered["name"] == "sasl-mechanisms"
    mechanisms = offered["fields"]["sasl-server-mechanisms"]
    assert not set(truth["allowed_mechs"]) & set(mechanisms)
    assert "No SASL mechanism in common" in diagnosis["title"]
    assert ", ".join(mechanisms) in diagnosis["explanation"]
    # the client left: its FIN, the first end of the TCP stream, is the evidence
    assert end["kind"] == "transport" and end["fields"] == {"by": "client", "event": "fin"}
    assert "the client closed the TCP connection" in diagnosis["explanation"]
    assert not any(f["name"] == "sasl-init" for f in frames_of(name).values())


def test_a_frame_after_a_clean_close_is_info_whatever_it_is() -> None:
    """RabbitMQ 3.10 answers amqp10's close, then sends the flow of the credit amqp10 refreshed
    just before: harmless on a clean end, like the detach after close of the other captures."""
    name = "10-amqp10-rabbitmq.pcap"
    (diagnosis,) = of_code(name, "spec.violation")
    (late,) = evidence(name, diagnosis)
    assert late["name"] == "flow" and late["dir"] == "s2c"
    closes = [f for f in frames_of(name).values() if f["name"] == "close"]
    assert [c["dir"] for c in closes] == ["c2s", "s2c"] and closes[1]["frame"] < late["frame"]
    assert not any(c["fields"].get("error") for c in closes)
    assert diagnosis["severity"] == "info" and "Harmless" in diagnosis["explanation"]
    for other in ("10-presettled.pcap", "10-amqp10-rabbitmq.pcap"):
        violations = of_code(other, "spec.violation")
        after = [d for d in violations if "after its close" in d["explanation"]]
        assert len(after) == 1 and after[0]["severity"] == "info"
