"""Issue 39, items 1, 2, 3 and 5: `diagnose` against another broker than RabbitMQ and a client
that vanishes, on recordings of captures/scenarios/garagemq_close.py, against their ground truth.

1. Who ended the TCP stream first: garagemq's FIN on a silent pika client (3 s before the client
   woke, published and got a reset), a Proton client killed holding a link (its FIN first), and
   Proton's engine closing with framing-error after such a FIN (Proton engines back to back).
2. A refused login by garagemq's 530 NOT_ALLOWED (not RabbitMQ's 403).
3. garagemq's close on a frame in flight, and its second connection.close.
5. Reply names spelled as the wire spells them (NOT_FOUND, not NOT-FOUND).
"""

from __future__ import annotations

import re
from typing import Any

from amqpscope.capture.packet import ACK, FIN, PSH, RST, SYN, RawPacket
from amqpscope.diagnose import diagnose_frames
from amqpscope.dissect import Dissector
from tests import peers
from tests.test_diagnose_captures import diagnoses_of, evidence, expect, frames_of, of_code
from tests.test_transport import _ipv4_tcp


def transport(name: str) -> list[dict[str, Any]]:
    """The capture's `transport` records (`read --json`), in frame order."""
    return [r for _n, r in sorted(frames_of(name).items()) if r["kind"] == "transport"]


def test_the_brokers_fin_is_shown_when_it_hung_up_on_the_silent_client() -> None:
    """garagemq's FIN comes while pika sleeps (between the times the client went silent and
    woke), long before the reset its late publish drew; each is a record at its own time."""
    name = "091-gmq-heartbeat-fin.pcap"
    truth = expect("091-gmq-heartbeat-fin")
    silence = truth["silence"]
    assert truth["client_error"]["exception"] == "StreamLostError"
    fin, rst = transport(name)
    assert (fin["name"], fin["fields"]["by"], fin["dir"]) == ("fin", "server", "s2c")
    assert silence["went_silent"] < fin["ts"] < silence["woke"]
    assert (rst["name"], rst["fields"]["by"], rst["fields"]["after-fin"]) == (
        "rst",
        "server",
        "server",
    )
    assert rst["ts"] >= silence["woke"] and rst["ts"] - fin["ts"] > 2.0
    publish = next(r for r in frames_of(name).values() if r["name"] == "basic.publish")
    assert fin["frame"] < publish["frame"] < rst["frame"]


def test_the_silent_client_is_blamed_not_the_broker_that_gave_up_on_it() -> None:
    """The broker hung up first, after the client's silence: the diagnosis says the broker gave
    up on the client; no silence of the broker is claimed."""
    name = "091-gmq-heartbeat-fin.pcap"
    (dropped,) = of_code(name, "liveness.dropped")
    assert "(fin by server)" in dropped["title"]
    assert "after the client's silence" in dropped["explanation"]
    assert "gave up on it" in dropped["explanation"]
    *_, end = evidence(name, dropped)
    assert (end["kind"], end["name"], end["fields"]["by"]) == ("transport", "fin", "server")
    silences = of_code(name, "liveness.heartbeat-missed")
    assert [d["title"].split(" sent nothing")[0] for d in silences] == ["The client"]
    truth = expect("091-gmq-heartbeat-fin")["silence"]["seconds"]
    assert abs(silences[0]["duration"] - truth) < 0.5


def test_a_killed_10_client_ended_the_tcp_stream_first() -> None:
    """The Proton client killed holding its link: its kernel's FIN is the first end, at the
    time it was killed; the listener's end comes after. The diagnosis names the client."""
    name = "10-killed-client.pcap"
    truth = expect("10-killed-client")
    assert truth["killed_with"] == "SIGKILL" and truth["closes_sent_by_client"] == 0
    ends = transport(name)
    assert [(r["name"], r["fields"]["by"]) for r in ends] == [("fin", "client"), ("fin", "server")]
    assert truth["killed"] <= ends[0]["ts"] < truth["listener_saw_end"]
    (dropped,) = of_code(name, "liveness.dropped")
    assert "(fin by client)" in dropped["title"]
    assert "client closed the TCP connection (FIN)" in dropped["explanation"]


def test_a_login_refused_with_530_is_a_refused_login_in_the_brokers_words() -> None:
    name = "091-gmq-refused-login.pcap"
    truth = expect("091-gmq-refused-login")
    (error,) = truth["connection_errors"]
    (refused,) = [d for d in diagnoses_of(name) if d["severity"] in ("warning", "error")]
    assert refused["code"] == "auth.refused"
    assert refused["title"].endswith(f"{error['code']} NOT_ALLOWED")
    assert refused["explanation"].startswith(error["text"])  # the broker's words first
    assert "credentials" in refused["explanation"]
    assert "vhost" not in refused["explanation"] and "channel-max" not in refused["explanation"]
    start_ok, close = evidence(name, refused)
    assert (start_ok["name"], close["name"]) == ("connection.start-ok", "connection.close")


def test_a_close_on_a_frame_in_flight_is_the_brokers_error_not_the_clients() -> None:
    """garagemq closed the channel on the publish to a missing exchange, then the connection on
    that publish's content header, sent before the client's close-ok: not a malformed frame of
    the client's. Its second connection.close is its own breach."""
    name = "091-gmq-missing-exchange.pcap"
    truth = expect("091-gmq-missing-exchange")
    (client_error,) = truth["client_errors"]
    (channel,) = of_code(name, "close.channel")
    assert "404 NOT_FOUND on basic.publish" in channel["title"]
    assert truth["exchange"] in channel["explanation"]
    (connection,) = of_code(name, "close.connection")
    assert f"{client_error['code']} FRAME_ERROR on a frame in flight" in connection["title"]
    assert connection["explanation"].startswith(client_error["reply_text"])
    assert "not the client's" in connection["explanation"]
    assert "malformed" not in connection["explanation"]
    closed, in_flight, close = evidence(name, connection)
    assert (closed["name"], closed["dir"]) == ("channel.close", "s2c")
    assert (in_flight["kind"], in_flight["dir"], in_flight["channel"]) == (
        "content-header",
        "c2s",
        closed["channel"],
    )
    assert (close["name"], close["dir"]) == ("connection.close", "s2c")
    (breach,) = of_code(name, "spec.violation")
    assert breach["title"].startswith("The broker broke a rule: connection.close")
    (again,) = evidence(name, breach)
    assert (again["name"], again["dir"]) == ("connection.close", "s2c")
    assert again["frame"] > close["frame"]


#: a reply code and name in a headline, and the name a reply-text starts with
HEADLINE = re.compile(r": (\d{3}) ([A-Z_-]+)")


def test_reply_names_are_spelled_as_the_wire_spells_them() -> None:
    """The headline's reply name is the one the broker put in its reply-text (NOT_FOUND,
    PRECONDITION_FAILED: what users search for), on RabbitMQ's closes and garagemq's."""
    seen = set()
    for name in ("091-channel-errors.pcap", "091-gmq-missing-exchange.pcap"):
        for diagnosis in diagnoses_of(name):
            if not diagnosis["code"].startswith("close."):
                continue
            m = HEADLINE.search(diagnosis["title"])
            assert m, diagnosis["title"]
            assert diagnosis["explanation"].startswith(f"{m.group(2)} - "), diagnosis["title"]
            seen.add(m.group(2))
    assert {"NOT_FOUND", "PRECONDITION_FAILED", "FRAME_ERROR"} <= seen


def _killed_client_then_proton_closes() -> list[RawPacket]:
    """A TCP connection (client 40000 -> 5672): Proton engines back to back open a connection,
    a session and a link; then the client's FIN (killed), and what Proton-C's server engine
    writes when its input ends so (as Proton's C++ broker does): close with
    amqp:connection:framing-error "connection aborted"; then the dead client's reset."""
    pair = peers.ProtonPair()
    peers.open_link(pair, "held", 10)
    pair.pump()
    engine = pair.server_transport
    engine.close_tail()  # the client's FIN reaches the broker's engine
    pending = engine.pending()
    close = bytes(engine.peek(pending))
    engine.pop(pending)
    assert b"amqp:connection:framing-error" in close  # Proton's own words, not ours
    out: list[RawPacket] = []
    seq = {True: 1001, False: 5000}

    def add(c2s: bool, flags: int, payload: bytes = b"") -> None:
        sport, dport = (40000, 5672) if c2s else (5672, 40000)
        data = _ipv4_tcp(sport, dport, seq[c2s], seq[not c2s], flags | ACK, payload)
        out.append(RawPacket(len(out) + 1, 1.0 + len(out) / 1000, 101, data, len(data)))
        seq[c2s] = (seq[c2s] + len(payload) + (1 if flags & (SYN | FIN) else 0)) % (1 << 32)

    syn = _ipv4_tcp(40000, 5672, 1000, 0, SYN, b"")
    out.append(RawPacket(1, 1.0, 101, syn, len(syn)))
    add(False, SYN)
    for direction, chunk in pair.conversation.writes:
        add(direction == "c2s", PSH, chunk)
    add(True, FIN)
    add(False, PSH, close)
    add(True, RST)
    return out


def test_a_close_after_the_peers_fin_reacts_to_a_peer_that_is_gone() -> None:
    """Proton's engine closes with framing-error once the killed client's FIN ended its input:
    the diagnosis says the broker reacted to a client that was gone, not that the client sent
    something unreadable."""
    frames = list(Dissector().run(_killed_client_then_proton_closes()))
    fin = next(f for f in frames if f.kind == "transport")
    close = next(f for f in frames if f.name == "close")
    assert (fin.name, fin.fields["by"]) == ("fin", "client") and fin.number < close.number
    found = diagnose_frames(frames)
    (error,) = [d for d in found if d.code == "close.connection"]
    assert "amqp:connection:framing-error" in error.title
    assert f"client had ended its TCP stream (FIN, frame {fin.number})" in error.explanation
    assert "could not read the framing" not in error.explanation
    assert fin.number in error.evidence and close.number in error.evidence
