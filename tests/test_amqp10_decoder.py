"""The AMQP 1.0 decoder: performatives and messages from Qpid Proton and the recorded captures
(checked against what the clients counted), secrets, request/reply patterns, and damage."""

from __future__ import annotations

import hashlib
import json
import struct
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import proton
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from proton import Message, symbol, timestamp, ulong

from amqpscope.capture.files import open_capture
from amqpscope.codec.amqp10 import composites
from amqpscope.codec.amqp10 import frames as frames10
from amqpscope.codec.amqp10.decoder import Decoder
from amqpscope.codec.amqp10.jsonmap import REDACTED
from amqpscope.codec.amqp10.types import Context
from amqpscope.codec.frames import Frame
from amqpscope.dissect import Dissector
from tests import peers
from tests.oracle import keylog_for
from tests.test_amqp10_types import put
from tests.test_codec_framing import run

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
C2S, S2C = "c2s", "s2c"


def performatives(frames: list[Frame]) -> list[Frame]:
    return [f for f in frames if f.kind in ("performative", "sasl") and f.name != "heartbeat"]


def deliver(
    messages: list[Message],
    target: str = "queue-a",
    max_frame: int | None = None,
    abort_first_after: int | None = None,
) -> list[tuple[str, bytes]]:
    """A Proton client sending `messages` to a Proton server on a link to `target`."""
    pair = peers.ProtonPair(max_frame=max_frame)
    pair.client.open()
    session = pair.client.session()
    session.open()
    sender = session.sender("amqpscope-sender")
    sender.target.address = target
    sender.open()
    pair.pump()
    pair.server.open()
    pair.server.session_head(0).open()
    receiver = pair.server.link_head(0)
    receiver.target.copy(receiver.remote_target)
    receiver.open()
    receiver.flow(len(messages) + 1)
    pair.pump()
    for i, message in enumerate(messages):
        delivery = sender.delivery(f"t{i}".encode())
        raw = message.encode()
        if i == 0 and abort_first_after is not None:
            sender.send(raw[:abort_first_after])
            pair.pump()
            delivery.abort()
            pair.pump()
            continue
        sender.send(raw)
        sender.advance()
    pair.pump()
    return pair.conversation.writes


def messages_of(frames: list[Frame], direction: str = C2S) -> list[dict[str, Any]]:
    return [f.message for f in frames if f.message is not None and f.direction == direction]


# -- Proton in memory ------------------------------------------------------------------------
def test_a_proton_conversation_decodes_without_findings() -> None:
    frames, _ = run(peers.proton_conversation(messages=3).writes)
    decoded = performatives(frames)
    assert decoded and all(not f.findings for f in frames)
    by_name = {(f.direction, f.name): f.fields for f in decoded}
    assert by_name[(C2S, "open")]["container-id"] == "amqpscope-test-client"
    attach = by_name[(C2S, "attach")]
    assert (attach["name"], attach["role"], attach["handle"]) == ("amqpscope-sender", "sender", 0)
    assert attach["target"]["type"] == "target" and attach["target"]["address"] == "queue-a"
    assert attach["snd-settle-mode"] == "mixed" and attach["rcv-settle-mode"] == "first"
    assert by_name[(S2C, "attach")]["role"] == "receiver"
    transfers = [f for f in decoded if f.name == "transfer"]
    assert [t.fields["delivery-tag"] for t in transfers] == [
        f"tag-{i}".encode().hex() for i in range(3)
    ]
    assert [t.fields["delivery-id"] for t in transfers] == [0, 1, 2]
    assert [t.message["body"] for t in transfers] == [
        {"type": "amqp-value", "size": 12, "value": "x" * 10}
    ] * 3
    states = [
        (f.fields["first"], f.fields["state"]["type"])
        for f in decoded
        if f.name == "disposition" and f.direction == S2C
    ]
    assert sorted(states) == [(0, "accepted"), (1, "rejected"), (2, "released")]
    drains = [f.fields for f in decoded if f.name == "flow" and f.fields.get("drain")]
    assert drains and drains[0]["handle"] == 0


def test_absent_fields_read_as_their_spec_defaults_and_nothing_else() -> None:
    frames, _ = run(peers.proton_conversation(messages=1).writes)
    detach = next(f for f in frames if f.name == "detach")
    assert detach.fields["closed"] is True and set(detach.fields) == {"handle", "closed"}
    transfer = next(f for f in frames if f.name == "transfer")
    for name, default in (("more", False), ("resume", False), ("aborted", False)):
        assert transfer.fields[name] is default
    assert "rcv-settle-mode" not in transfer.fields  # no default in the spec: absent stays absent
    begin = next(f for f in frames if f.name == "begin")
    assert isinstance(begin.fields["handle-max"], int)


def test_sasl_anonymous_frames() -> None:
    frames, _ = run(peers.proton_conversation(sasl="ANONYMOUS").writes)
    sasl = {f.name: f.fields for f in frames if f.kind == "sasl"}
    assert sasl["sasl-mechanisms"]["sasl-server-mechanisms"] == ["ANONYMOUS"]
    assert sasl["sasl-init"]["mechanism"] == "ANONYMOUS"
    assert sasl["sasl-outcome"]["code"] == "ok"


def test_a_message_over_many_transfers_arrives_once_and_whole() -> None:
    frames, _ = run(peers.proton_conversation(messages=1, body_size=20000, max_frame=512).writes)
    transfers = [f for f in frames if f.name == "transfer"]
    assert len(transfers) > 30
    assert [f.message is not None for f in transfers] == [False] * (len(transfers) - 1) + [True]
    message = transfers[-1].message
    assert message["transfers"] == len(transfers)
    assert message["body"]["value"] == "x" * 20000
    assert message["size"] == sum(len(f.data) - _performative_end(f) for f in transfers)


def _performative_end(frame: Frame) -> int:
    """Where a transfer's performative ends and its payload starts."""
    ctx = Context(memoryview(frame.data))
    return composites.decode_body(ctx, frames10.HEADER_SIZE, len(frame.data))[2]


def test_an_aborted_delivery_is_dropped_with_a_finding() -> None:
    frames, _ = run(
        deliver(
            [Message(body="x" * 5000), Message(body="after")], max_frame=512, abort_first_after=1200
        )
    )
    transfers = [f for f in frames if f.name == "transfer"]
    aborted = [f for f in transfers if f.fields.get("aborted")]
    assert len(aborted) == 1
    assert [x.code for x in aborted[0].findings] == ["amqp10.aborted-transfer"]
    assert [m["body"]["value"] for m in messages_of(frames)] == ["after"]


def test_sections_annotations_and_data_bodies() -> None:
    created = 1700000000.5
    message = Message(
        body=b"plain text body",
        inferred=True,
        content_type="text/plain; charset=utf-8",
        id=uuid.UUID(int=42),
        user_id=b"guest",
        creation_time=created,
        durable=True,
        priority=7,
        ttl=1.5,
        properties={"k": "v", "n": 3},
        annotations={
            symbol("x-opt-sequence-number"): 12,
            symbol("x-opt-enqueued-time"): timestamp(1700000000000),
            symbol("x-opt-partition-key"): "p1",
            ulong(99): "numeric key",
        },
        instructions={symbol("x-opt-lock-token"): uuid.UUID(int=7)},
    )
    binary = Message(body=b"\x00\xff\x10binary", inferred=True)
    octets = Message(body=b"{}", inferred=True, content_type="application/octet-stream")
    frames, _ = run(deliver([message, binary, octets]))
    first, second, third = messages_of(frames)
    assert first["sections"] == [
        "header",
        "delivery-annotations",
        "message-annotations",
        "properties",
        "application-properties",
        "data",
    ]
    assert first["header"] == {"durable": True, "priority": 7, "ttl": 1500}
    assert first["properties"]["message-id"] == str(uuid.UUID(int=42))
    assert first["properties"]["user-id"] == b"guest".hex()
    assert first["properties"]["creation-time"] == "2023-11-14T22:13:20.500Z"
    assert first["application-properties"] == {"k": "v", "n": 3}
    assert first["message-annotations"]["99"] == "numeric key"
    assert first["body"] == {"type": "data", "size": 15, "text": "plain text body"}
    named = {a["key"]: (a["system"], a["name"], a["value"]) for a in first["named-annotations"]}
    assert named == {
        "x-opt-sequence-number": ("Azure Service Bus", "SequenceNumber", 12),
        "x-opt-enqueued-time": ("Azure Service Bus", "EnqueuedTime", "2023-11-14T22:13:20.000Z"),
        "x-opt-partition-key": ("Azure Service Bus", "PartitionKey", "p1"),
    }
    assert second["body"] == {"type": "data", "size": 9, "hex": b"\x00\xff\x10binary".hex()}
    assert third["body"]["hex"] == b"{}".hex()  # an explicitly binary content type stays binary


def test_cbs_put_token_is_recognised_and_its_token_redacted() -> None:
    request = Message(
        body="SharedAccessSignature sr=x&sig=SECRET",
        id="req-1",
        reply_to="cbs-client-reply",
        properties={
            "operation": "put-token",
            "type": "servicebus.windows.net:sastoken",
            "name": "amqp://ns.servicebus.windows.net/queue",
            "expiration": timestamp(1700000000000),
        },
    )
    writes = deliver([request], target="$cbs")
    for show in (False, True):
        codec_frames = _run_with_secrets(writes, show)
        (message,) = messages_of(codec_frames)
        assert message["request-reply"] == {
            "node": "$cbs",
            "kind": "request",
            "operation": "put-token",
            "type": "servicebus.windows.net:sastoken",
            "name": "amqp://ns.servicebus.windows.net/queue",
            "expiration": "2023-11-14T22:13:20.000Z",
            "message-id": "req-1",
            "reply-to": "cbs-client-reply",
        }
        text = json.dumps([f.to_json() for f in codec_frames])
        assert ("SECRET" in text) is show
        if not show:
            assert message["body"]["value"] == REDACTED and message["body"]["redacted"] is True


def _run_with_secrets(writes: list[tuple[str, bytes]], show: bool) -> list[Frame]:
    from amqpscope.codec.connection import ConnectionCodec

    codec = ConnectionCodec(True, show_secrets=show)
    out: list[Frame] = []
    for packet, (direction, chunk) in enumerate(writes, 1):
        out += codec.data(direction, chunk, packet)
    return out + codec.end(len(writes))


def test_management_responses_are_recognised_by_the_links_node() -> None:
    pair = peers.ProtonPair()
    pair.client.open()
    session = pair.client.session()
    session.open()
    receiver = session.receiver("mgmt-replies")
    receiver.source.address = "myentity/$management"
    receiver.target.address = "client-reply-1"
    receiver.open()
    receiver.flow(1)
    pair.pump()
    pair.server.open()
    pair.server.session_head(0).open()
    sender = pair.server.link_head(0)
    sender.source.copy(sender.remote_source)
    sender.open()
    pair.pump()
    sender.delivery(b"r1")
    reply = Message(
        body=None,
        correlation_id="req-1",
        properties={"statusCode": 200, "statusDescription": "OK"},
    )
    sender.send(reply.encode())
    sender.advance()
    pair.pump()
    frames, _ = run(pair.conversation.writes)
    (message,) = messages_of(frames, S2C)
    assert message["request-reply"] == {
        "node": "$management",
        "kind": "response",
        "status-code": 200,
        "status-description": "OK",
        "correlation-id": "req-1",
    }


def test_an_ordinary_message_is_not_taken_for_a_request() -> None:
    frames, _ = run(deliver([Message(body="hi", properties={"operation": "order-pizza"})]))
    assert "request-reply" not in messages_of(frames)[0]


# -- the recorded captures against their ground truth -----------------------------------------
def capture(name: str, show_secrets: bool = False) -> tuple[dict, list[Frame]]:
    meta = json.loads((CAPTURES / f"{name}.json").read_text())
    with open_capture(str(CAPTURES / meta["file"])) as packets:
        keylog = keylog_for(CAPTURES / meta["file"])  # TLS captures: their key log
        frames = list(Dissector(show_secrets=show_secrets, keylog=keylog).run(packets))
    return meta["expect"], frames


SCENARIOS_10 = sorted(p.stem for p in CAPTURES.glob("10-*.json"))


def outcomes(frames: list[Frame], direction: str) -> Counter:
    """Deliveries settled with each outcome by the dispositions sent in `direction`."""
    counts: Counter = Counter()
    for f in frames:
        if f.name == "disposition" and f.direction == direction and "state" in f.fields:
            last = f.fields.get("last", f.fields["first"])
            counts[f.fields["state"]["type"]] += last - f.fields["first"] + 1
    return counts


@pytest.mark.parametrize("name", SCENARIOS_10)
def test_decoded_fields_match_what_the_clients_counted(name: str) -> None:
    expect, frames = capture(name)
    assert not [x for f in frames for x in f.findings if x.code.startswith("amqp10.")]
    fields = [(f.direction, f.name, f.fields) for f in frames]

    def all_of(direction: str, frame_name: str) -> list[dict]:
        return [x for d, n, x in fields if d == direction and n == frame_name]

    if "sasl_mechanism" in expect:
        assert [x["mechanism"] for x in all_of(C2S, "sasl-init")] == [expect["sasl_mechanism"]]
    if "sasl_outcome" in expect:
        assert [x["code"] for x in all_of(S2C, "sasl-outcome")] == [expect["sasl_outcome"]]
    if "remote_container_id" in expect:
        assert [x["container-id"] for x in all_of(S2C, "open")] == [expect["remote_container_id"]]
    if "session_errors" in expect:
        errors = [
            (x["error"]["condition"], x["error"]["description"])
            for x in all_of(S2C, "end")
            if "error" in x
        ]
        wanted = [(e["condition"], e["description"]) for e in expect["session_errors"]]
        assert sorted(errors) == sorted(wanted)
    for key, direction in (("transfers_sent", C2S), ("transfers_received", S2C)):
        if key in expect:
            assert len(messages_of(frames, direction)) == expect[key], key
    for key, direction in (
        ("sender_outcomes", S2C),
        ("receiver_outcomes", C2S),
        ("listener_outcomes", S2C),
    ):
        if key in expect:
            assert outcomes(frames, direction) == Counter(expect[key]), key
    if "rejection_conditions" in expect:
        rejected = [
            x["state"]["error"]
            for x in all_of(S2C, "disposition")
            if x["state"]["type"] == "rejected"
        ]
        assert sorted((e["condition"], e["description"]) for e in rejected) == sorted(
            (e["condition"], e["description"]) for e in expect["rejection_conditions"]
        )
    if "modified_details" in expect:
        modified = [
            x["state"] for x in all_of(S2C, "disposition") if x["state"]["type"] == "modified"
        ]
        got = [
            (m.get("delivery-failed"), m.get("undeliverable-here"), m.get("message-annotations"))
            for m in modified
        ]
        wanted = [
            (d["delivery_failed"], d["undeliverable_here"], d["message_annotations"])
            for d in expect["modified_details"]
        ]
        assert sorted(got, key=repr) == sorted(wanted, key=repr)
    if isinstance(expect.get("deliveries"), list) and "sender_outcomes" in expect:
        got = [
            (
                m["properties"].get("message-id"),
                m["header"].get("delivery-count", 0),
                m["header"].get("first-acquirer", False),
            )
            for m in messages_of(frames, S2C)
        ]
        wanted = [
            (d.get("id", d.get("message_id")), d["delivery_count"], d["first_acquirer"])
            for d in expect["deliveries"]
        ]
        assert got == wanted
    if "addresses" in expect:
        sources = [x["source"]["address"] for x in all_of(C2S, "attach")]
        assert sources == expect["addresses"]
    if "sent_presettled" in expect:
        settled = [x for x in all_of(C2S, "transfer") if x.get("settled") is True]
        assert len(settled) == expect["sent_presettled"]
    if "received_presettled" in expect:
        settled = [x for x in all_of(S2C, "transfer") if x.get("settled") is True]
        assert len(settled) == expect["received_presettled"]
    if "initial_sender_credit" in expect:
        credits = [x["link-credit"] for x in all_of(S2C, "flow") if "link-credit" in x]
        assert credits[0] == expect["initial_sender_credit"]
    for key, role in (
        ("sender_remote_snd_settle_mode", "receiver"),
        ("receiver_remote_snd_settle_mode", "sender"),
    ):
        if key in expect:
            modes = [x["snd-settle-mode"] for x in all_of(S2C, "attach") if x["role"] == role]
            assert modes == [expect[key]], key
    if "drain_credit_issued" in expect:
        drains = [x["link-credit"] for x in all_of(C2S, "flow") if x.get("drain")]
        assert drains == [expect["drain_credit_issued"]]
    if "coordinator_attaches" in expect:
        coordinators = [x for x in all_of(C2S, "attach") if x["target"]["type"] == "coordinator"]
        assert len(coordinators) == expect["coordinator_attaches"]
        assert coordinators[0]["target"]["capabilities"] == ["amqp:local-transactions"]


def test_the_large_capture_yields_one_whole_message_each_way() -> None:
    expect, frames = capture("10-large-message")
    for direction, key in ((C2S, "body_sha256"), (S2C, "received_body_sha256")):
        (message,) = messages_of(frames, direction)
        body = bytes.fromhex(message["body"]["value"])  # Proton sent the bytes as amqp-value
        assert len(body) == expect["body_size"]
        assert hashlib.sha256(body).hexdigest() == expect[key]
        assert message["transfers"] > expect["body_size"] // expect["local_max_frame_size"]


def test_sasl_plain_shows_the_user_and_never_the_password() -> None:
    for name, password in (("10-sasl-plain", "guest"), ("10-sasl-failed", None)):
        _, frames = capture(name)
        (init,) = [f for f in frames if f.name == "sasl-init"]
        response = init.fields["initial-response"]
        assert response == {"authzid": "", "username": "guest", "password": REDACTED}
        assert b"guest".hex() not in json.dumps([f.to_json() for f in frames])
        _, shown = capture(name, show_secrets=True)
        (init,) = [f for f in shown if f.name == "sasl-init"]
        if password is not None:
            assert init.fields["initial-response"]["password"] == password
        assert init.fields["initial-response"]["password"] != REDACTED


# -- hand-made frames: damage and edge cases ---------------------------------------------------
def body(code: int, fields: list[tuple[str, Any]]) -> bytes:
    data = proton.Data()
    data.put_described()
    data.enter()
    data.put_ulong(code)
    put(data, ("list", fields))
    data.exit()
    return data.encode()


def frame(payload: bytes, channel: int = 0, ftype: int = 0) -> Frame:
    data = struct.pack(">IBBH", 8 + len(payload), 2, ftype, channel) + payload
    return frames10.make_frame(data)


def decoded(*frames: Frame, decoder: Decoder | None = None) -> list[Frame]:
    decoder = decoder or Decoder()
    for f in frames:
        decoder.decode(f)
    return list(frames)


def codes_of(f: Frame) -> list[str]:
    return [x.code for x in f.findings]


ATTACH, TRANSFER, OPEN, DETACH, END = 0x12, 0x14, 0x10, 0x16, 0x17
NULL = ("null", None)


def test_missing_mandatory_fields_are_findings() -> None:
    (f,) = decoded(frame(body(ATTACH, [NULL, ("uint", 1)])))
    assert f.fields["handle"] == 1 and "name" not in f.fields
    assert codes_of(f) == ["amqp10.missing-mandatory"] * 2  # name and role
    assert f.fields["snd-settle-mode"] == "mixed"


def test_a_field_of_the_wrong_type_or_choice_is_shown_with_a_finding() -> None:
    (f,) = decoded(
        frame(body(ATTACH, [("string", "l"), ("string", "0"), ("bool", True), ("ubyte", 7)]))
    )
    assert f.fields["handle"] == "0" and f.fields["role"] == "receiver"
    assert f.fields["snd-settle-mode"] == 7
    assert codes_of(f) == ["amqp10.bad-field-type", "amqp10.bad-field"]
    assert f.findings[0].message.startswith(
        "attach.handle is string (str8-utf8, 0xa1), not handle (uint)"
    )
    assert "snd-settle-mode 7 is not a choice" in f.findings[1].message
    (f,) = decoded(
        frame(
            body(
                0x15,
                [
                    ("bool", True),
                    ("uint", 0),
                    NULL,
                    ("bool", True),
                    ("described", (0x28, ("list", []))),
                ],
            )
        )
    )
    assert f.fields["state"] == {
        "type": "source",
        "durable": "none",
        "expiry-policy": "session-end",
        "timeout": 0,
        "dynamic": False,
    }
    assert codes_of(f) == ["amqp10.bad-field-type"]
    assert "disposition.state is source, not " in f.findings[0].message


def test_trailing_bytes_and_extra_list_elements() -> None:
    (f,) = decoded(frame(body(OPEN, [("string", "c")]) + b"\x40\x40"))
    assert codes_of(f) == ["amqp10.trailing-bytes"]
    (f,) = decoded(frame(body(END, [NULL, NULL])))
    assert codes_of(f) == ["amqp10.bad-field"]


def test_a_truncated_performative_keeps_the_fields_before_the_damage() -> None:
    raw = body(OPEN, [("string", "container"), ("string", "host"), ("uint", 512)])
    raw = raw[:-2]  # the last field cut; the list header still claims it
    (f,) = decoded(frame(raw))
    assert codes_of(f) == ["amqp10.bad-encoding"]
    assert f.fields == {}
    ok = bytearray(body(OPEN, [("string", "container"), ("string", "host"), ("uint", 512)]))
    ok[-5] = 0xEE  # a bad constructor for the third field, inside a well-formed list
    (f,) = decoded(frame(bytes(ok)))
    assert f.fields["container-id"] == "container" and f.fields["hostname"] == "host"
    assert "invalid constructor 0xee" in f.findings[0].message
    # the fields read, then the spec defaults of the damaged field and those after it, in the
    # spec's order (as the JSON lines show them)
    spec = composites.SPECS[0x10]
    later = [(n, d) for n, d in zip(spec.names[2:], spec.defaults[2:], strict=True)]
    assert list(f.fields.items()) == [("container-id", "container"), ("hostname", "host")] + [
        (n, d) for n, d in later if d is not composites._MISSING
    ]


def test_an_unknown_body_descriptor_keeps_its_value() -> None:
    data = proton.Data()
    data.put_described()
    data.enter()
    data.put_symbol("vendor:thing:list")
    data.put_list()
    data.enter()
    data.put_int(1)
    data.exit()
    data.exit()
    (f,) = decoded(frame(data.encode()))
    assert f.name == "performative" and codes_of(f) == ["amqp.unknown-descriptor"]
    assert f.fields == {"descriptor": "vendor:thing:list", "value": [1]}


def transfer(handle: int, delivery_id: int | None, payload: bytes, **flags: bool) -> Frame:
    fields: list[tuple[str, Any]] = [("uint", handle)]
    fields.append(NULL if delivery_id is None else ("uint", delivery_id))
    fields.append(("binary", b"tag") if delivery_id is not None else NULL)
    fields += [("uint", 0), NULL, ("bool", flags.get("more", False)), NULL, NULL, NULL]
    fields.append(("bool", flags.get("aborted", False)))
    return frame(body(TRANSFER, fields) + payload)


def section(code: int, node: tuple[str, Any]) -> bytes:
    return body(code, []) if node == NULL else _described(code, node)


def _described(code: int, node: tuple[str, Any]) -> bytes:
    data = proton.Data()
    data.put_described()
    data.enter()
    data.put_ulong(code)
    put(data, node)
    data.exit()
    return data.encode()


VALUE = _described(0x77, ("string", "v"))


def test_deliveries_left_incomplete_are_reported() -> None:
    decoder = Decoder()
    first = transfer(0, 1, VALUE[:2], more=True)
    (second,) = decoded(first, transfer(0, 2, VALUE), decoder=decoder)[1:]
    assert codes_of(second) == ["amqp10.incomplete-delivery"]
    assert second.message["body"]["value"] == "v"
    decoded(transfer(1, 3, VALUE[:2], more=True), decoder=decoder)
    (detach,) = decoded(frame(body(DETACH, [("uint", 1)])), decoder=decoder)
    assert codes_of(detach) == ["amqp10.incomplete-delivery"]
    decoded(transfer(2, 4, VALUE[:2], more=True), decoder=decoder)
    assert [x.code for x in decoder.end()] == ["amqp10.incomplete-delivery"]
    decoded(transfer(3, 5, VALUE[:2], more=True), decoder=decoder)
    (end,) = decoded(frame(body(END, [])), decoder=decoder)
    assert codes_of(end) == ["amqp10.incomplete-delivery"] and decoder.end() == []


def test_malformed_messages_are_findings() -> None:
    header = _described(0x70, ("list", []))
    props = _described(0x73, ("list", [("string", "id")]))
    cases = {
        "out of order": (props + header + VALUE, "header section after properties"),
        "no body": (header, "without a body"),
        "mixed bodies": (VALUE + _described(0x75, ("binary", b"x")), "data section after"),
        "two values": (VALUE + VALUE, "amqp-value section after amqp-value"),
        "not a section": (VALUE + b"\x40", "not a section"),
        "unknown section": (_described(0x99, ("int", 1)) + VALUE, "unknown section"),
    }
    for name, (payload, words) in cases.items():
        (f,) = decoded(transfer(0, 0, payload))
        assert "amqp10.bad-message" in codes_of(f), name
        assert any(words in x.message for x in f.findings), (name, f.findings)
        assert f.message is not None


def test_odd_map_in_application_properties() -> None:
    odd = bytes.fromhex("005374" + "c10603a1016b4040")  # 3 elements: a key without a value
    (f,) = decoded(transfer(0, 0, odd + VALUE))
    assert f.message["application-properties"] == {"k": None, "null": None}
    assert "odd count" in f.findings[0].message


def test_non_standard_message_formats_are_kept_as_bytes() -> None:
    fields: list[tuple[str, Any]] = [
        ("uint", 0),
        ("uint", 0),
        ("binary", b"t"),
        ("uint", 0x80013700),
    ]
    (f,) = decoded(frame(body(TRANSFER, fields) + b"\x01\x02"))
    assert f.message == {
        "delivery-id": 0,
        "delivery-tag": "74",
        "transfers": 1,
        "size": 2,
        "hex": "0102",
    }


def test_other_sasl_responses_are_redacted_unless_asked() -> None:
    init = body(0x41, [("symbol", "XOAUTH2"), ("binary", b"user=me\x01auth=Bearer TOKEN\x01\x01")])
    response = body(0x43, [("binary", b"more TOKEN")])
    for show in (False, True):
        frames = decoded(frame(init, ftype=1), frame(response, ftype=1), decoder=Decoder(show))
        text = json.dumps([f.fields for f in frames])
        assert (b"TOKEN".hex() in text) is show
        assert (REDACTED in text) is not show


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_damaged_real_frames_never_raise(data: Any) -> None:
    """Any byte of any real frame changed, or the frame cut short: findings, no exception."""
    conversation = _conversation()
    original = data.draw(st.sampled_from(conversation))
    raw = bytearray(original)
    if data.draw(st.booleans()):
        for _ in range(data.draw(st.integers(1, 4))):
            pos = data.draw(st.integers(8, len(raw) - 1))
            raw[pos] = data.draw(st.integers(0, 255))
    else:
        raw = raw[: data.draw(st.integers(9, len(raw)))]
        raw[0:4] = struct.pack(">I", len(raw))
    f = frames10.make_frame(bytes(raw))
    Decoder().decode(f)  # must not raise
    json.dumps(f.to_json())


_CACHE: list[bytes] = []


def _conversation() -> list[bytes]:
    if not _CACHE:
        frames, _ = run(peers.proton_conversation(messages=2, sasl="ANONYMOUS").writes)
        _CACHE.extend(f.data for f in frames if f.kind == "performative" and len(f.data) > 8)
        message = Message(body={"k": [1, 2.5, None]}, properties={"a": 1}, annotations={"x": 1})
        frames, _ = run(deliver([message]))
        _CACHE.extend(f.data for f in frames if f.name == "transfer")
    return _CACHE


def test_symbolic_descriptors_filters_and_arrays_of_described_values() -> None:
    data = proton.Data()
    data.put_described()
    data.enter()
    data.put_symbol("amqp:attach:list")
    data.put_list()
    data.enter()
    data.put_string("link")
    data.put_uint(3)
    data.put_bool(True)
    data.put_null()
    data.put_null()
    data.put_described()
    data.enter()
    data.put_symbol("amqp:source:list")
    data.put_list()
    data.enter()
    data.put_string("queue")
    for _ in range(6):
        data.put_null()
    data.put_map()  # filter: values are extension types, expected to be unknown
    data.enter()
    data.put_symbol("selector")
    data.put_described()
    data.enter()
    data.put_symbol("apache.org:selector-filter:string")
    data.put_string("colour = 'red'")
    data.exit()
    data.exit()
    data.put_null()
    data.put_array(True, proton.Data.LIST)  # outcomes would be symbols: an array of states
    data.enter()
    data.put_ulong(0x24)
    data.put_list()
    data.put_list()
    data.exit()
    data.exit()
    data.exit()
    data.exit()
    data.exit()
    (f,) = decoded(frame(data.encode()))
    assert f.name == "attach" and f.fields["handle"] == 3 and f.fields["role"] == "receiver"
    source = f.fields["source"]
    assert source["filter"] == {
        "selector": {"descriptor": "apache.org:selector-filter:string", "value": "colour = 'red'"}
    }
    assert source["outcomes"] == [{"type": "accepted"}, {"type": "accepted"}]
    assert codes_of(f) == ["amqp10.bad-field-type"]  # outcomes must be symbols, not accepted lists
    assert "source.outcomes is an array of a described value, not an array or list of symbol" in (
        f.findings[0].message
    )
