"""The 0-9-1 decoder: methods, content headers and messages, against pika's encoder, the recorded
captures' ground truth, and damage of every kind (which must become findings, never exceptions).
"""

from __future__ import annotations

import enum
import hashlib
import json
import struct
from pathlib import Path
from typing import Any

import pika.frame
import pika.spec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqpscope.capture.files import open_capture
from amqpscope.codec.amqp091 import content, spec, spec08
from amqpscope.codec.amqp091 import fieldtable as ft
from amqpscope.codec.amqp091 import frames as frames091
from amqpscope.codec.amqp091.decoder import REDACTED, Decoder
from amqpscope.codec.connection import ConnectionCodec
from amqpscope.dissect import Dissector
from amqpscope.findings import CODES
from tests import peers
from tests.oracle import keylog_for
from tests.test_amqp091_fieldtable import as_decoded, same, tables

C2S, S2C = "c2s", "s2c"
CAPTURES = Path(__file__).resolve().parent.parent / "captures"
BY_NAME = {m.name: m for m in spec.METHODS.values()}
PIKA_CLASSES = {peers.pika_name(m): type(m) for m in peers.pika_methods()}
#: where pika's attribute names are not the spec's with underscores
PIKA_ATTRIBUTE = {"global": "global_qos"}
#: keys the decoder adds beside the spec's arguments
EXTRAS = {"reply-name", "method", "user"}


def pika_attribute(name: str) -> str:
    return PIKA_ATTRIBUTE.get(name, name.replace("-", "_"))


def decode_one(data: bytes, version: str = "0-9-1", show_secrets: bool = False):  # type: ignore[no-untyped-def]
    frame = frames091.make_frame(data, version)
    Decoder(version, show_secrets).decode(frame)
    return frame


def after_publish(data: bytes):  # type: ignore[no-untyped-def]
    """A content frame decoded by a decoder that has just seen a basic.publish on channel 1."""
    decoder = Decoder()
    decoder.decode(frames091.make_frame(pika_method(pika.spec.Basic.Publish()), "0-9-1"))
    frame = frames091.make_frame(data, "0-9-1")
    decoder.decode(frame)
    return frame


def run(chunks: list[tuple[str, bytes]], show_secrets: bool = False) -> tuple[list, list]:
    """Frames (and end-of-connection findings) of a conversation, through the real framer."""
    codec = ConnectionCodec(from_start=True, show_secrets=show_secrets)
    out = []
    for packet, (direction, chunk) in enumerate(chunks, 1):
        out += codec.data(direction, chunk, packet)
    out += codec.end(len(chunks))
    return out, codec.findings


def raw_frame(ftype: int, channel: int, payload: bytes, end: int = 0xCE) -> bytes:
    return struct.pack(">BHI", ftype, channel, len(payload)) + payload + bytes([end])


def method_frame(ids: tuple[int, int], arguments: bytes, channel: int = 1) -> bytes:
    return raw_frame(1, channel, struct.pack(">HH", *ids) + arguments)


def pika_method(method: Any, channel: int = 1) -> bytes:
    return pika.frame.Method(channel, method).marshal()


def codes(frame: Any) -> list[str]:
    return [f.code for f in frame.findings]


HEADER_091 = peers.protocol_header_091()


# -- every method, as pika encodes it ------------------------------------------------------------


def expected_value(value: Any, domain: str = "") -> Any:
    if domain == "bit":
        return bool(value)  # pika packs any truthy value as a set bit
    if isinstance(value, enum.Enum):
        value = value.value  # pika's ExchangeType
    if isinstance(value, bytes):
        return ft.text(value)
    return as_decoded(value)


@pytest.mark.parametrize("method", peers.pika_methods(), ids=peers.pika_name)
def test_every_method_pika_encodes_decodes_to_its_arguments(method: Any) -> None:
    name = peers.pika_name(method)
    frame = decode_one(pika_method(method), show_secrets=True)
    assert frame.name == name and frame.findings == []
    arguments = BY_NAME[name].arguments
    assert [n for n, _ in arguments] == [n for n in frame.fields if n not in EXTRAS]
    for arg, domain in arguments:
        value = getattr(method, pika_attribute(arg))
        assert same(frame.fields[arg], expected_value(value, domain)), arg


short_strings = st.text(max_size=40).filter(lambda s: len(s.encode()) <= 255)
DOMAINS = {
    "octet": st.integers(0, 2**8 - 1),
    "short": st.integers(0, 2**16 - 1),
    "long": st.integers(0, 2**32 - 1),
    "longlong": st.integers(0, 2**64 - 1),
    "bit": st.booleans(),
    "shortstr": short_strings,
    "longstr": st.one_of(st.text(max_size=60), st.binary(max_size=60)),
    "table": tables,
}
#: mechanisms whose response the decoder reshapes (PLAIN, AMQPLAIN) stay out of the random ones
MECHANISMS = st.sampled_from(["X-TEST", "RABBIT-CR-DEMO", "SCRAM-SHA-256", ""])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(BY_NAME)), st.integers(0, 65535), st.data())
def test_random_arguments_decode_to_the_values_pika_encoded(
    name: str, channel: int, data: st.DataObject
) -> None:
    method = BY_NAME[name]
    values = {
        arg: data.draw(MECHANISMS if arg == "mechanism" else DOMAINS[domain], label=arg)
        for arg, domain in method.arguments
    }
    instance = object.__new__(PIKA_CLASSES[name])  # every attribute is set just below
    for arg, value in values.items():
        setattr(instance, pika_attribute(arg), value)
    frame = decode_one(pika_method(instance, channel), show_secrets=True)
    assert frame.findings == []
    assert set(frame.fields) - set(values) <= EXTRAS
    for arg, value in values.items():
        assert same(frame.fields[arg], expected_value(value)), arg


PROPERTY_VALUES = {
    "shortstr": short_strings,
    "octet": st.integers(0, 255),
    "timestamp": st.integers(0, 2**64 - 1),
    "table": tables,
}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**64 - 1), st.data())
def test_random_properties_decode_to_the_values_pika_encoded(
    body_size: int, data: st.DataObject
) -> None:
    chosen = {}
    for name, domain in spec.PROPERTIES[60]:
        value = data.draw(st.none() | PROPERTY_VALUES[domain], label=name)
        if value is not None:
            chosen[name] = value
    props = pika.spec.BasicProperties(**{k.replace("-", "_"): v for k, v in chosen.items()})
    frame = after_publish(pika.frame.Header(1, body_size, props).marshal())
    assert frame.findings == []
    flags = sum(1 << (15 - i) for i, (n, _) in enumerate(spec.PROPERTIES[60]) if n in chosen)
    assert {k: v for k, v in frame.fields.items() if k != "properties"} == {
        "class-id": 60,
        "weight": 0,
        "body-size": body_size,
        "property-flags": f"0x{flags:04x}",
    }
    got = frame.fields["properties"]
    assert list(got) == list(chosen)
    for name, value in chosen.items():
        expected = ft.timestamp(value) if name == "timestamp" else as_decoded(value)
        assert same(got[name], expected), name


# -- messages --------------------------------------------------------------------------------------


def publish(channel: int, body: bytes, frame_max: int = 4096, **props: Any) -> list[bytes]:
    """A basic.publish, its header and its body cut into frames of at most `frame_max`."""
    out = [pika_method(pika.spec.Basic.Publish(exchange="x", routing_key="k"), channel)]
    out.append(pika.frame.Header(channel, len(body), pika.spec.BasicProperties(**props)).marshal())
    step = frame_max - 8
    out += [
        pika.frame.Body(channel, body[i : i + step]).marshal() for i in range(0, len(body), step)
    ]
    return out


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=5000), st.integers(min_value=9, max_value=600))
def test_a_body_over_many_frames_is_one_whole_message(body: bytes, frame_max: int) -> None:
    frames, _ = run([(C2S, HEADER_091), *((C2S, f) for f in publish(1, body, frame_max))])
    done = [f for f in frames if f.message is not None]
    assert len(done) == 1 and done[0] is frames[-1]
    message = done[0].message
    assert message["method"] == "basic.publish" and message["body-size"] == len(body)
    assert message["arguments"]["routing-key"] == "k"
    shown = message["body"]
    raw = shown["text"].encode() if "text" in shown else bytes.fromhex(shown["hex"])
    assert raw == body and shown["size"] == len(body)
    assert all(not f.findings for f in frames)


def test_channels_interleave_and_heartbeats_pass_between_bodies() -> None:
    one = publish(1, b"a" * 300, 100, content_type="text/plain")
    two = publish(2, bytes(range(256)), 100, content_type="application/octet-stream")
    stream = [HEADER_091, one[0], two[0], one[1], two[1], peers.heartbeat_091()]
    stream += [x for pair in zip(one[2:], two[2:], strict=False) for x in pair]
    stream += one[2 + len(two[2:]) :] + two[2 + len(one[2:]) :]
    frames, findings = run([(C2S, f) for f in stream])
    messages = {f.channel: f.message for f in frames if f.message}
    assert messages[1]["body"] == {"text": "a" * 300, "size": 300}
    assert messages[2]["body"] == {"hex": bytes(range(256)).hex(), "size": 256}
    assert not findings and all(not f.findings for f in frames)


def test_an_empty_body_completes_on_the_header() -> None:
    frames, _ = run([(C2S, HEADER_091), *((C2S, f) for f in publish(1, b""))])
    assert frames[-1].kind == "content-header"
    assert frames[-1].message["body"] == {"text": "", "size": 0}


@pytest.mark.parametrize(
    "body,props,shown",
    [
        (b'{"a": 1}', {"content_type": "application/json"}, {"text": '{"a": 1}'}),
        ("é".encode("latin-1"), {"content_type": "text/plain; charset=latin-1"}, {"text": "é"}),
        (b"\xff", {"content_type": "text/plain"}, {"hex": "ff"}),  # not UTF-8 after all
        (b"plain", {}, {"text": "plain"}),
        (b"\x00\x01", {}, {"hex": "0001"}),  # valid UTF-8, but controls: binary
        (b"abc", {"content_type": "application/octet-stream"}, {"hex": "616263"}),
        (b"abc", {"content_type": "text/plain", "content_encoding": "gzip"}, {"hex": "616263"}),
    ],
)
def test_bodies_render_by_content_type(body: bytes, props: dict, shown: dict) -> None:
    frames, _ = run([(C2S, HEADER_091), *((C2S, f) for f in publish(1, body, **props))])
    assert frames[-1].message["body"] == {**shown, "size": len(body)}


def test_a_body_too_large_to_keep_is_counted_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(content, "MAX_BODY", 1000)
    frames, _ = run([(C2S, HEADER_091), *((C2S, f) for f in publish(1, b"x" * 2500, 600))])
    assert frames[-1].message["body"] == {"size": 2500, "truncated": True}
    assert codes(frames[-1]) == ["amqp091.body-not-kept"]
    frames, _ = run([(C2S, HEADER_091), *((C2S, f) for f in publish(1, b"x" * 1000, 600))])
    assert frames[-1].message["body"] == {"text": "x" * 1000, "size": 1000}


def test_a_body_longer_than_the_header_says_is_a_finding() -> None:
    frames = publish(1, b"abcdef")
    frames[1] = pika.frame.Header(1, 4, pika.spec.BasicProperties()).marshal()
    out, _ = run([(C2S, HEADER_091), *((C2S, f) for f in frames)])
    assert codes(out[-1]) == ["amqp091.body-size-mismatch"]
    assert out[-1].message["body"]["size"] == 6


def test_a_short_body_is_reported_when_the_next_method_arrives() -> None:
    frames = publish(1, b"abcdef")
    frames[1] = pika.frame.Header(1, 10, pika.spec.BasicProperties()).marshal()
    ack = pika_method(pika.spec.Basic.Ack(delivery_tag=1))
    out, findings = run([(C2S, HEADER_091), *((C2S, f) for f in frames), (C2S, ack)])
    assert out[-1].name == "basic.ack" and codes(out[-1]) == ["amqp091.body-size-mismatch"]
    assert "6 of 10 body bytes" in out[-1].findings[0].message
    assert not any(f.message for f in out) and not findings


def test_content_without_a_method_and_messages_left_open_are_findings() -> None:
    body = pika.frame.Body(1, b"stray").marshal()
    header = pika.frame.Header(3, 5, pika.spec.BasicProperties()).marshal()
    unfinished = publish(2, b"abcdef")[:2]
    no_header = pika_method(pika.spec.Basic.Publish(), 4)
    stream = [HEADER_091, body, header, *unfinished, no_header]
    out, findings = run([(C2S, f) for f in stream])
    assert codes(out[1]) == ["amqp091.unexpected-content"]
    assert codes(out[2]) == ["amqp091.unexpected-content"]
    assert sorted((f.code, f.message) for f in findings) == [
        ("amqp091.incomplete-message", "basic.publish on channel 2 ended with 0 of 6 body bytes"),
        ("amqp091.incomplete-message", "basic.publish on channel 4 ended with no content header"),
    ]


def test_a_method_before_the_content_header_is_an_incomplete_message() -> None:
    stream = [HEADER_091, pika_method(pika.spec.Basic.Publish()), *publish(1, b"ok")]
    out, _ = run([(C2S, f) for f in stream])
    assert codes(out[2]) == ["amqp091.incomplete-message"]
    assert out[-1].message["body"]["text"] == "ok"


# -- the handshake ---------------------------------------------------------------------------------


def start_ok(mechanism: str, response: bytes) -> bytes:
    return pika_method(
        pika.spec.Connection.StartOk(
            client_properties={"product": "test"}, mechanism=mechanism, response=response
        ),
        0,
    )


def test_plain_shows_the_user_and_never_the_password() -> None:
    data = start_ok("PLAIN", b"\0guest\0s3cret")
    hidden = decode_one(data)
    assert hidden.fields["user"] == "guest"
    assert hidden.fields["response"] == {"authzid": "", "username": "guest", "password": REDACTED}
    assert "s3cret" not in json.dumps(hidden.to_json())
    shown = decode_one(data, show_secrets=True)
    assert shown.fields["response"]["password"] == "s3cret"


def test_amqplain_shows_the_login_and_never_the_password() -> None:
    pieces: list[bytes] = []
    pika.data.encode_table(pieces, {"LOGIN": "guest", "PASSWORD": "s3cret"})
    table_body = b"".join(pieces)[4:]  # AMQPLAIN's response is a table without its length
    hidden = decode_one(start_ok("AMQPLAIN", table_body))
    assert hidden.fields["user"] == "guest"
    assert hidden.fields["response"] == {"LOGIN": "guest", "PASSWORD": REDACTED}
    assert "s3cret" not in json.dumps(hidden.to_json())
    shown = decode_one(start_ok("AMQPLAIN", table_body), show_secrets=True)
    assert shown.fields["response"]["PASSWORD"] == "s3cret"


def test_other_secrets_are_redacted_unless_shown() -> None:
    for method in (
        pika.spec.Connection.SecureOk(response=b"My password is s3cret"),
        pika.spec.Connection.UpdateSecret(new_secret=b"s3cret-token", reason="expiry"),
    ):
        hidden = decode_one(pika_method(method, 0))
        assert "s3cret" not in json.dumps(hidden.to_json())
        assert REDACTED in hidden.fields.values()
        assert "s3cret" in json.dumps(decode_one(pika_method(method, 0), show_secrets=True).fields)
    unknown = decode_one(start_ok("X-CUSTOM", b"token s3cret"))
    assert unknown.fields["response"] == REDACTED and "user" not in unknown.fields
    external = decode_one(start_ok("EXTERNAL", b"CN=client"))
    assert external.fields["response"] == "CN=client"


def test_refused_login_capture_names_the_user_and_hides_the_password() -> None:
    frames = dissect("091-refused-login.pcap")
    start_ok = next(f for f in frames if f.name == "connection.start-ok")
    assert start_ok.fields["user"] == "guest" and start_ok.fields["mechanism"] == "PLAIN"
    everything = json.dumps([f.to_json() for f in frames])
    assert "wrong-password" not in everything and REDACTED in everything
    shown = dissect("091-refused-login.pcap", show_secrets=True)
    assert "wrong-password" in json.dumps([f.to_json() for f in shown])


def test_connection_start_has_the_servers_properties_and_capabilities() -> None:
    start = next(f for f in dissect("091-publish-consume.pcap") if f.name == "connection.start")
    props = start.fields["server-properties"]
    assert props["product"] == "RabbitMQ" and props["version"] == "3.10.8"
    assert props["capabilities"]["publisher_confirms"] is True
    assert start.fields["mechanisms"] == "PLAIN AMQPLAIN" and start.fields["locales"] == "en_US"


# -- the recorded captures' ground truth -----------------------------------------------------------


def dissect(name: str, show_secrets: bool = False) -> list:
    with open_capture(str(CAPTURES / name)) as capture:
        keylog = keylog_for(CAPTURES / name)  # TLS captures: their key log
        return list(Dissector(show_secrets=show_secrets, keylog=keylog).run(capture))


def truth(name: str) -> dict:
    return json.loads((CAPTURES / name).with_suffix(".json").read_text())["expect"]


def body_of(message: dict) -> bytes:
    body = message["body"]
    return body["text"].encode() if "text" in body else bytes.fromhex(body["hex"])


SCENARIOS_091 = sorted(
    p.name
    for p in CAPTURES.glob("*.json")
    if json.loads(p.read_text()).get("protocol") in ("0-9-1", "0-8/0-9")
)


@pytest.mark.parametrize("meta", SCENARIOS_091)
def test_every_091_capture_decodes_without_a_finding_and_counts_its_messages(meta: str) -> None:
    doc = json.loads((CAPTURES / meta).read_text())
    frames = dissect(doc["file"])
    decoder_codes = {c.code for f in frames for c in f.findings if c.code.startswith("amqp091.")}
    assert decoder_codes <= {"amqp091.version-difference"}
    messages = [f.message for f in frames if f.message]
    expect = doc["expect"]
    if "publishes" in expect:
        assert sum(m["method"] == "basic.publish" for m in messages) == expect["publishes"]
    if "deliveries" in expect:
        assert sum(m["method"] == "basic.deliver" for m in messages) == expect["deliveries"]
    methods = [f for f in frames if f.kind == "method"]
    assert all(f.fields or not BY_NAME[f.name].arguments for f in methods if f.name in BY_NAME)


def test_the_100_kb_body_over_frame_max_4096_is_one_whole_message() -> None:
    expect = truth("091-large-body.pcap")
    frames = dissect("091-large-body.pcap")
    tune_ok = next(f for f in frames if f.name == "connection.tune-ok")
    assert tune_ok.fields["frame-max"] == expect["negotiated_frame_max"] == 4096
    bodies = [f for f in frames if f.kind == "content-body"]
    assert len(bodies) > 50 and all(f.size <= 4096 for f in bodies)
    messages = {f.message["method"]: f.message for f in frames if f.message}
    for method, key in (
        ("basic.publish", "body_sha256"),
        ("basic.deliver", "received_body_sha256"),
    ):
        message = messages[method]
        assert message["body-size"] == message["body"]["size"] == expect["body_size"]
        assert hashlib.sha256(body_of(message)).hexdigest() == expect[key]


def test_deliveries_match_the_clients_log() -> None:
    expect = truth("091-ack-nack-reject.pcap")
    frames = dissect("091-ack-nack-reject.pcap")
    got = [
        {
            "delivery_tag": f.message["arguments"]["delivery-tag"],
            "body": body_of(f.message).decode(),
            "redelivered": f.message["arguments"]["redelivered"],
        }
        for f in frames
        if f.message and f.message["method"] == "basic.deliver"
    ]
    assert got == expect["delivery_log"]
    nacks = [f.fields for f in frames if f.name == "basic.nack"]
    assert [n["requeue"] for n in nacks] == [True] * expect["nacks_requeue"]
    acks = [f.fields for f in frames if f.name == "basic.ack" and f.direction == C2S]
    assert sum(a["multiple"] for a in acks) == expect["acks_multiple"]


def test_get_ok_and_get_empty_match() -> None:
    expect = truth("091-get.pcap")
    frames = dissect("091-get.pcap")
    got = [
        {
            "body": body_of(f.message).decode(),
            "message_count": f.message["arguments"]["message-count"],
            "delivery_tag": f.message["arguments"]["delivery-tag"],
        }
        for f in frames
        if f.message and f.message["method"] == "basic.get-ok"
    ]
    assert got == [{k: d[k] for k in got[0]} for d in expect["get_ok_details"]]
    gets = [f.fields["no-ack"] for f in frames if f.name == "basic.get"]
    assert gets[:2] == [d["no_ack"] for d in expect["get_ok_details"]]


def test_returns_and_closes_carry_readable_reply_names() -> None:
    expect = truth("091-confirms-return.pcap")
    frames = dissect("091-confirms-return.pcap")
    (returned,) = [f for f in frames if f.message and f.message["method"] == "basic.return"]
    (detail,) = expect["return_details"]
    args = returned.message["arguments"]
    assert {k.replace("_", "-"): v for k, v in detail.items()} == {
        k: args[k] for k in ("reply-code", "reply-text", "exchange", "routing-key")
    }
    assert args["reply-name"] == "NO_ROUTE"
    delete_ok = next(f for f in frames if f.name == "queue.delete-ok")
    assert delete_ok.fields["message-count"] == expect["queue_message_count_at_delete"]


def test_channel_errors_name_the_reply_and_the_failed_method() -> None:
    expect = truth("091-channel-errors.pcap")
    frames = dissect("091-channel-errors.pcap")
    closes = [f for f in frames if f.name == "channel.close" and f.direction == S2C]
    got = [
        {"channel": f.channel, "code": f.fields["reply-code"], "text": f.fields["reply-text"]}
        for f in closes
    ]
    assert got == [{k: e[k] for k in ("channel", "code", "text")} for e in expect["channel_errors"]]
    assert [(f.fields["reply-name"], f.fields["method"]) for f in closes] == [
        ("PRECONDITION_FAILED", "queue.declare"),
        ("ACCESS_REFUSED", "queue.declare"),
        ("PRECONDITION_FAILED", "basic.ack"),
    ]


def test_refused_login_close() -> None:
    expect = truth("091-refused-login.pcap")
    (close,) = [f for f in dissect("091-refused-login.pcap") if f.name == "connection.close"]
    (error,) = expect["connection_errors"]
    assert (close.channel, close.fields["reply-code"], close.fields["reply-text"]) == (
        error["channel"],
        error["code"],
        error["text"],
    )
    assert close.fields["reply-name"] == "ACCESS_REFUSED" and "method" not in close.fields


def test_negotiation_and_exchange_details_match() -> None:
    frames = dissect("091-heartbeats.pcap")
    tune_ok = next(f for f in frames if f.name == "connection.tune-ok")
    assert tune_ok.fields["heartbeat"] == truth("091-heartbeats.pcap")["negotiated_heartbeat"]
    frames = dissect("091-qos-prefetch.pcap")
    qos = next(f for f in frames if f.name == "basic.qos")
    assert qos.fields["prefetch-count"] == truth("091-qos-prefetch.pcap")["prefetch_count"]
    expect = truth("091-exchanges.pcap")
    frames = dissect("091-exchanges.pcap")
    types = [f.fields["type"] for f in frames if f.name == "exchange.declare"]
    assert types == expect["exchange_types"]
    purge_ok = next(f for f in frames if f.name == "queue.purge-ok")
    assert purge_ok.fields["message-count"] == expect["purged_messages"]
    headers_bind = [f for f in frames if f.name == "queue.bind" and f.fields["arguments"]]
    assert headers_bind and headers_bind[0].fields["arguments"]["x-match"] == "all"


def test_rpc_replies_carry_the_requests_correlation_ids() -> None:
    expect = truth("091-rpc.pcap")
    messages = [f.message for f in dissect("091-rpc.pcap") if f.message]
    requests = [m for m in messages if m["properties"].get("reply-to")]
    ids = {m["properties"]["correlation-id"] for m in requests if m["method"] == "basic.publish"}
    replies = [
        m
        for m in messages
        if m["method"] == "basic.deliver"
        and m["properties"].get("correlation-id") in ids
        and not m["properties"].get("reply-to")
    ]
    assert len(ids) == expect["requests_sent"] and len(replies) == expect["correlations_matched"]


def test_tx_and_mid_stream() -> None:
    frames = dissect("091-tx.pcap")
    (got,) = [f.message for f in frames if f.message and f.message["method"] == "basic.get-ok"]
    assert body_of(got).decode() == truth("091-tx.pcap")["got_body"]
    frames = dissect("mid-stream.pcap")
    tags = [f.fields["delivery-tag"] for f in frames if f.name == "basic.deliver"]
    assert tags == truth("mid-stream.pcap")["delivery_tags"]


# -- 0-8 and 0-9 -----------------------------------------------------------------------------------


def test_legacy_connection_starts_decode() -> None:
    expect = truth("091-legacy-headers.pcap")
    starts = [f for f in dissect("091-legacy-headers.pcap") if f.name == "connection.start"]
    got = [(f.version, f.fields["version-major"], f.fields["version-minor"]) for f in starts]
    assert got == [(r["sent"], r["version_major"], r["version_minor"]) for r in expect["replies"]]
    assert all(f.fields["server-properties"]["product"] == "RabbitMQ" for f in starts)
    assert all(f.findings == [] or codes(f) == [] for f in starts)


HEADER_08 = b"AMQP\x01\x01\x08\x00"


def test_08_methods_that_differ_from_091_are_flagged_and_decoded_by_08s_table() -> None:
    close_08 = next(ids for ids, m in spec08.METHODS.items() if m.name == "connection.close")
    close_args = struct.pack(">H", 320) + b"\x04bye!" + struct.pack(">HH", 0, 0)
    consume_08 = next(ids for ids, m in spec08.METHODS.items() if m.name == "basic.consume")
    consume_args = struct.pack(">H", 0) + b"\x01q" + b"\x03tag" + b"\x02"  # no arguments table
    declare = pika_method(pika.spec.Queue.Declare(queue="q"))  # the same in 0-8
    nack = pika_method(pika.spec.Basic.Nack(delivery_tag=3))  # 0-9-1 only
    stream = [
        HEADER_08,
        declare,
        method_frame(consume_08, consume_args),
        nack,
        method_frame(close_08, close_args, 0),
    ]
    out, _ = run([(C2S, f) for f in stream])
    assert [f.name for f in out[1:]] == [
        "queue.declare",
        "basic.consume",
        "method",
        "connection.close",
    ]
    assert out[1].findings == [] and out[1].fields["queue"] == "q"
    assert codes(out[2]) == ["amqp091.version-difference"]
    assert "no 'arguments'" in out[2].findings[0].message
    assert out[2].fields == {
        "ticket": 0,
        "queue": "q",
        "consumer-tag": "tag",
        "no-local": False,
        "no-ack": True,
        "exclusive": False,
        "nowait": False,
    }
    assert codes(out[3]) == ["amqp.unknown-method", "amqp091.version-difference"]
    assert out[3].fields == {"delivery-tag": 3, "multiple": False, "requeue": True}
    assert codes(out[4]) == ["amqp091.version-difference"]
    assert (
        out[4].fields["reply-text"] == "bye!" and out[4].fields["reply-name"] == "CONNECTION_FORCED"
    )


# -- damage: findings, and the next frame decodes -------------------------------------------------

GOOD = pika_method(pika.spec.Basic.Ack(delivery_tag=42, multiple=True), channel=9)


def damaged(frame_bytes: bytes, before: bytes = b"") -> tuple[Any, Any]:
    """The damaged frame and the good frame after it, through the real framer."""
    out, _ = run([(C2S, HEADER_091 + before + frame_bytes + GOOD)])
    assert out[-1].fields == {"delivery-tag": 42, "multiple": True}
    assert out[-1].findings == []
    return out[-2], out[-1]


def ids_of(name: str) -> tuple[int, int]:
    return BY_NAME[name].class_id, BY_NAME[name].method_id


def declare_with(table_bytes: bytes) -> bytes:
    return method_frame(
        ids_of("queue.declare"), struct.pack(">H", 0) + b"\x01q" + b"\x00" + table_bytes
    )


def test_unknown_class_or_method() -> None:
    bad, _ = damaged(method_frame((99, 7), b"\x01\x02"))
    assert codes(bad) == ["amqp.unknown-method"]
    assert bad.fields == {"class-id": 99, "method-id": 7, "arguments": {"hex": "0102"}}


def test_truncated_arguments() -> None:
    deliver = pika_method(pika.spec.Basic.Deliver("c", 5, exchange="e", routing_key="r"))
    cut = deliver[7:-1][:-3]  # the payload without its last 3 bytes
    bad, _ = damaged(raw_frame(1, 1, cut))
    assert codes(bad) == ["amqp091.bad-arguments"]
    assert bad.fields["consumer-tag"] == "c" and bad.fields["delivery-tag"] == 5
    assert "runs past the end of the frame" in bad.findings[0].message


def test_a_string_length_past_the_frame() -> None:
    bad, _ = damaged(method_frame(ids_of("basic.cancel"), b"\xc8abc"))  # a 200-byte tag
    assert codes(bad) == ["amqp091.bad-arguments"] and bad.fields == {}


def test_trailing_bytes() -> None:
    bad, _ = damaged(method_frame(ids_of("basic.ack"), struct.pack(">QB", 1, 0) + b"junk"))
    assert codes(bad) == ["amqp091.trailing-bytes"]
    assert bad.fields == {"delivery-tag": 1, "multiple": False}


def test_a_table_longer_than_the_frame() -> None:
    bad, _ = damaged(declare_with(struct.pack(">I", 1000) + b"\x01kt\x01"))
    assert codes(bad) == ["amqp091.bad-field-table"]
    assert bad.fields["queue"] == "q" and bad.fields["arguments"] == {}


def test_an_unknown_field_type_keeps_the_entries_before_it_and_the_arguments_after() -> None:
    table = b"\x02okt\x01" + b"\x03badZ\x00\x00"
    start = (
        struct.pack(">BB", 0, 9)
        + struct.pack(">I", len(table))
        + table
        + struct.pack(">I", 5)
        + b"PLAIN"
        + struct.pack(">I", 5)
        + b"en_US"
    )
    bad, _ = damaged(method_frame(ids_of("connection.start"), start, 0))
    assert codes(bad) == ["amqp091.bad-field-table"]
    assert "unknown field type 'Z'" in bad.findings[0].message
    assert bad.fields["server-properties"] == {"ok": True}
    assert bad.fields["mechanisms"] == "PLAIN" and bad.fields["locales"] == "en_US"


def test_a_short_table_inside_a_table() -> None:
    inner = b"\x01kF" + struct.pack(">I", 20) + b"\x01xt\x01"
    bad, _ = damaged(declare_with(struct.pack(">I", len(inner)) + inner))
    assert codes(bad) == ["amqp091.bad-field-table"]
    assert bad.fields["arguments"] == {"k": {}}


def test_wrong_frame_end() -> None:
    broken = bytearray(GOOD)
    broken[-1] = 0x00
    out, _ = run([(C2S, HEADER_091 + bytes(broken) + GOOD + GOOD)])
    assert "amqp.bad-frame-end" in codes(out[1])
    assert out[-1].fields == {"delivery-tag": 42, "multiple": True}


@pytest.mark.parametrize(
    "payload,code,message",
    [
        (struct.pack(">HHQ", 60, 0, 5), "amqp091.bad-content-header", "at least 14"),
        (struct.pack(">HHQH", 77, 0, 5, 0), "amqp091.bad-content-header", "class 77"),
        (
            struct.pack(">HHQH", 60, 0, 5, 0x8000) + b"\x09text",
            "amqp091.bad-content-header",
            "runs",
        ),
        (struct.pack(">HHQH", 60, 0, 5, 0x0001), "amqp091.bad-content-header", "property flags"),
        (
            struct.pack(">HHQHH", 60, 0, 5, 0x0001, 0x8000),
            "amqp091.bad-content-header",
            "name no property",
        ),
        (
            struct.pack(">HHQH", 60, 0, 5, 0x2000) + struct.pack(">I", 3) + b"\x01kQ",
            "amqp091.bad-field-table",
            "unknown field type 'Q'",
        ),
        (struct.pack(">HHQH", 60, 0, 5, 0) + b"xx", "amqp091.bad-content-header", "after the last"),
    ],
)
def test_malformed_content_headers(payload: bytes, code: str, message: str) -> None:
    bad, _ = damaged(raw_frame(2, 1, payload), before=pika_method(pika.spec.Basic.Publish()))
    assert code in codes(bad) and message in str([f.message for f in bad.findings])


def test_a_header_continuation_word_decodes_known_properties() -> None:
    payload = struct.pack(">HHQHH", 60, 0, 0, 0x8001, 0x0000) + b"\x04text"
    frame = after_publish(raw_frame(2, 1, payload))
    assert frame.findings == []
    assert frame.fields["property-flags"] == "0x8001 0x0000"
    assert frame.fields["properties"] == {"content-type": "text"}


# -- nothing raises ----------------------------------------------------------------------------


SAMPLE = [data for _, data in peers.pika_frames(peers.pika_methods())]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_damaged_payloads_become_findings_never_exceptions(data: st.DataObject) -> None:
    """Random bytes in the payload of real frames (sizes kept, so framing holds): the decoder
    reports, never raises (the framer would turn a raise into `amqp.decode-error`)."""
    frames = []
    for original in data.draw(st.lists(st.sampled_from(SAMPLE), min_size=1, max_size=6)):
        payload = bytearray(original[7:-1])
        if payload:
            for _ in range(data.draw(st.integers(1, 4))):
                payload[data.draw(st.integers(0, len(payload) - 1))] = data.draw(
                    st.integers(0, 255)
                )
        if data.draw(st.booleans()):
            payload = payload[: data.draw(st.integers(0, len(payload)))]
        frames.append(raw_frame(original[0], 1, bytes(payload)))
    out, findings = run([(C2S, HEADER_091 + b"".join(frames) + GOOD)])
    every = [c for f in out for c in f.findings] + findings
    assert all(c.code != "amqp.decode-error" for c in every), every
    assert all(c.code in CODES for c in every)
    assert out[-1].fields == {"delivery-tag": 42, "multiple": True}


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(spec.METHODS)), st.binary(max_size=64), st.booleans())
def test_random_arguments_of_every_method_never_raise(
    ids: tuple[int, int], arguments: bytes, legacy: bool
) -> None:
    version = "0-8" if legacy else "0-9-1"
    frame = frames091.make_frame(method_frame(ids, arguments), version)
    decoder = Decoder(version)
    decoder.decode(frame)
    decoder.end()
    json.dumps(frame.to_json())  # and the result is JSON
