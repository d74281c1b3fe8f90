"""Framing and naming, bytes in and frames out, with Proton and pika as independent encoders."""

from __future__ import annotations

import os
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from amqpscope.codec import detect
from amqpscope.codec.connection import ConnectionCodec
from tests import peers

C2S, S2C = "c2s", "s2c"


def run(chunks: list[tuple[str, bytes]], from_start: bool = True) -> tuple[list, ConnectionCodec]:
    codec = ConnectionCodec(from_start)
    frames = []
    for packet, (direction, chunk) in enumerate(chunks, 1):
        frames += codec.data(direction, chunk, packet)
    frames += codec.end(len(chunks))
    return frames, codec


def names(frames: list) -> list[str]:
    return [f.name for f in frames]


def test_every_pika_method_is_named_as_the_spec_spells_it() -> None:
    encoded = peers.pika_frames(peers.pika_methods())
    stream = [(C2S, peers.protocol_header_091())] + [(C2S, data) for _, data in encoded]
    frames, codec = run(stream)
    assert names(frames) == ["protocol-header"] + [name for name, _ in encoded]
    assert codec.version == "0-9-1"
    assert all(not f.findings for f in frames)
    kinds = {f.kind for f in frames}
    assert kinds == {"protocol-header", "method", "content-header", "content-body"}


def test_091_server_frames_follow_the_clients_header() -> None:
    start = peers.pika_frames([peers.pika_methods()[0]], channel=0)[0][1]
    frames, _ = run(
        [(C2S, peers.protocol_header_091()), (S2C, start), (S2C, peers.heartbeat_091())]
    )
    assert [(f.direction, f.name) for f in frames] == [
        (C2S, "protocol-header"),
        (S2C, "connection.start"),
        (S2C, "heartbeat"),
    ]
    assert frames[0].fields["protocol"] == "AMQP 0-9-1"


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=200))
def test_091_split_anywhere_gives_the_same_frames(sizes: list[int]) -> None:
    encoded = peers.pika_frames(peers.pika_methods()[:30])
    data = peers.protocol_header_091() + b"".join(d for _, d in encoded)
    chunks = peers.chunked(data, lambda i: sizes[i % len(sizes)])
    frames, _ = run([(C2S, c) for c in chunks])
    assert names(frames) == ["protocol-header"] + [n for n, _ in encoded]
    assert b"".join(f.data for f in frames) == data


def test_proton_conversation_is_framed_and_named() -> None:
    conversation = peers.proton_conversation(messages=3)
    frames, codec = run(conversation.writes)
    assert codec.version == "1.0"
    client = [f.name for f in frames if f.direction == C2S]
    server = [f.name for f in frames if f.direction == S2C]
    assert client[:4] == ["protocol-header", "open", "begin", "attach"]
    assert client.count("transfer") == 3
    assert server.count("disposition") >= 1 and "flow" in server
    assert client[-1] == "close" and server[-1] == "close"
    for direction in (C2S, S2C):
        sent = b"".join(f.data for f in frames if f.direction == direction)
        assert sent == conversation.stream(direction)


def test_sasl_layer_then_amqp_layer() -> None:
    conversation = peers.proton_conversation(sasl="ANONYMOUS")
    frames, _ = run(conversation.writes)
    client = [(f.kind, f.name) for f in frames if f.direction == C2S][:4]
    assert client == [
        ("protocol-header", "protocol-header"),
        ("sasl", "sasl-init"),
        ("protocol-header", "protocol-header"),
        ("performative", "open"),
    ]
    server = [f.name for f in frames if f.direction == S2C]
    assert server[:4] == ["protocol-header", "sasl-mechanisms", "sasl-outcome", "protocol-header"]
    headers = [f.fields["protocol"] for f in frames if f.kind == "protocol-header"]
    assert headers == ["AMQP 1.0 (sasl)"] * 2 + ["AMQP 1.0 (amqp)"] * 2


def test_large_message_over_many_transfer_frames() -> None:
    conversation = peers.proton_conversation(messages=1, body_size=20000, max_frame=512)
    frames, _ = run(conversation.writes)
    transfers = [f for f in frames if f.name == "transfer"]
    assert len(transfers) > 30
    assert all(f.size <= 512 for f in frames)


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=1, max_value=400))
def test_mid_stream_recovers_every_frame_after_the_first_boundary(cut: int) -> None:
    encoded = peers.pika_frames(peers.pika_methods())
    data = b"".join(d for _, d in encoded)
    boundaries = [0]
    for _, d in encoded:
        boundaries.append(boundaries[-1] + len(d))
    frames, _ = run([(C2S, data[cut:])], from_start=False)
    first = next(i for i, b in enumerate(boundaries) if b >= cut)
    assert names(frames) == [n for n, _ in encoded[first:]]


def test_mid_stream_10_recovers_frames() -> None:
    conversation = peers.proton_conversation(messages=5)
    stream = conversation.stream(C2S)
    frames, _ = run([(C2S, stream[100:])], from_start=False)
    assert "transfer" in names(frames) and names(frames)[-1] == "close"


def test_gap_resynchronises_at_the_next_boundary() -> None:
    encoded = peers.pika_frames(peers.pika_methods())
    data = peers.protocol_header_091() + b"".join(d for _, d in encoded)
    codec = ConnectionCodec(from_start=True)
    frames = codec.data(C2S, data[:300], 1)
    codec.gap(C2S, 50)
    frames += codec.data(C2S, data[350:], 2)
    frames += codec.end(2)
    resumed = [f for f in frames if f.findings]
    assert resumed and resumed[0].findings[0].code == "amqp.resync"
    assert names(frames)[-1] == encoded[-1][0]
    assert all(f.data in data for f in frames)


def test_damaged_frame_end_is_a_finding_and_framing_continues() -> None:
    encoded = [d for _, d in peers.pika_frames(peers.pika_methods()[:10])]
    broken = bytearray(encoded[3])
    broken[-1] = 0x00
    encoded[3] = bytes(broken)
    frames, _ = run([(C2S, peers.protocol_header_091() + b"".join(encoded))])
    codes = [c.code for f in frames for c in f.findings]
    assert "amqp.bad-frame-end" in codes
    assert frames[-1].data == encoded[-1]


def test_not_amqp_is_never_claimed() -> None:
    http = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n" + b"x" * 2000
    tls = bytes.fromhex("160301020001000200030399") + os.urandom(600)
    # RabbitMQ stream protocol: size, key, version, correlation id... (a peer-properties request)
    stream_protocol = bytes.fromhex("0000001d00110001000000010000000100047573657200056775657374")
    rng = random.Random(7)
    noise = bytes(rng.randrange(256) for _ in range(200_000))
    for payload in (http, tls, stream_protocol * 50, noise):
        for from_start in (True, False):
            frames, codec = run([(C2S, payload), (S2C, payload[::-1])], from_start)
            assert frames == [] and not codec.is_amqp


def test_other_versions_are_named_not_mistaken() -> None:
    for raw, version in (
        (b"AMQP\x01\x01\x00\x0a", "0-10"),
        (b"AMQP\x01\x01\x08\x00", "0-8"),
        (b"AMQP\x01\x01\x00\x09", "0-9"),
        (b"AMQP\x02\x01\x00\x00", "1.0"),
    ):
        frames, _ = run([(C2S, raw + b"\x00" * 40)])
        assert frames[0].kind == "protocol-header" and frames[0].version == version
        assert frames[0].findings, version
    assert detect.header_name(b"AMQP\x09\x09\x09\x09") == "AMQP 9.9.9.9"


def test_incomplete_frame_at_the_end_is_reported() -> None:
    encoded = [d for _, d in peers.pika_frames(peers.pika_methods()[:5])]
    data = peers.protocol_header_091() + b"".join(encoded)
    frames, codec = run([(C2S, data[:-3])])
    assert len(frames) == len(encoded)  # header + all but the last
    assert [f.code for f in codec.findings] == ["amqp.incomplete-frame"]
