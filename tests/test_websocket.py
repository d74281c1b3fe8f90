"""AMQP over WebSocket: the layer against an independent encoder, RFC 6455's own examples, damage,
and a recorded session against its ground truth, its clear-TCP twin and tshark.

The frames come from the `websockets` package's sans-IO client and server (its own handshake,
masking, fragmentation and permessage-deflate code), carrying bytes Qpid Proton really sends; the
hand-built vectors are the examples of RFC 6455 sections 1.3 and 5.7.
"""

from __future__ import annotations

import json
import random
import shutil
import struct
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from websockets.client import ClientProtocol
from websockets.extensions.permessage_deflate import (
    ClientPerMessageDeflateFactory,
    ServerPerMessageDeflateFactory,
)
from websockets.frames import Frame, Opcode
from websockets.server import ServerProtocol
from websockets.uri import parse_uri

from amqpscope.capture.files import open_capture
from amqpscope.codec import websocket as ws
from amqpscope.codec.websocket import WebSocketLayer
from amqpscope.dissect import Dissector
from amqpscope.stream.events import StreamData
from tests import peers

C2S, S2C = "c2s", "s2c"
CAPTURES = Path(__file__).resolve().parent.parent / "captures"


# -- an independent encoder: the websockets package, driven in memory ----------------------------
def ws_wire(
    writes: list[tuple[str, bytes]],
    *,
    path: str = "/amqp-ws",
    offer: tuple[str, ...] = ("amqp",),
    accept: tuple[str, ...] = ("amqp",),
    fragment: int = 0,
    deflate: dict[str, Any] | None = None,
    ping: bool = False,
    close: tuple[int, str] = (1000, ""),
) -> list[tuple[str, bytes]]:
    """The bytes a websockets client and server put on the wire carrying `writes` (AMQP bytes
    by direction): each write one binary message, cut into frames of `fragment` bytes if given,
    a ping after each if `ping`, then a close handshake started by the client."""
    client = ClientProtocol(
        parse_uri(f"ws://127.0.0.1:5674{path}"),
        subprotocols=list(offer) or None,
        extensions=[ClientPerMessageDeflateFactory(**deflate)] if deflate is not None else None,
    )
    server = ServerProtocol(
        subprotocols=list(accept) or None,
        extensions=[ServerPerMessageDeflateFactory()] if deflate is not None else None,
    )
    wire: list[tuple[str, bytes]] = []

    def flush(proto: Any, direction: str) -> bytes:
        data = b"".join(proto.data_to_send())
        if data:
            wire.append((direction, data))
        return data

    client.send_request(client.connect())
    server.receive_data(flush(client, C2S))
    request = server.events_received()[0]
    server.send_response(server.accept(request))
    client.receive_data(flush(server, S2C))
    for direction, chunk in writes:
        proto = client if direction == C2S else server
        if fragment and len(chunk) > fragment:
            pieces = [chunk[i : i + fragment] for i in range(0, len(chunk), fragment)]
            proto.send_binary(pieces[0], fin=False)
            for i, piece in enumerate(pieces[1:], 2):
                proto.send_continuation(piece, fin=i == len(pieces))
        else:
            proto.send_binary(chunk)
        if ping:
            proto.send_ping(b"amqpscope")
        flush(proto, direction)
    client.send_close(*close)
    server.receive_data(flush(client, C2S))
    flush(server, S2C)
    return wire


def feed(layer: WebSocketLayer, wire: list[tuple[str, bytes]], cut: int = 0) -> dict[str, bytes]:
    """Run `wire` through `layer` (in pieces of `cut` bytes if given); the inner bytes."""
    inner = {C2S: b"", S2C: b""}
    for direction, data in wire:
        pieces = [data[i : i + cut] for i in range(0, len(data), cut)] if cut else [data]
        for piece in pieces:
            inner[direction] += layer.data(direction, piece)
    layer.end()
    return inner


def amqp_writes() -> list[tuple[str, bytes]]:
    return peers.proton_conversation(messages=5, body_size=1000).writes


def codes(layer: WebSocketLayer) -> Counter[str]:
    return Counter(f.code for f in layer.findings)


# -- unwrapping what a real implementation sends ---------------------------------------------------
@pytest.mark.parametrize("cut", [0, 1, 7, 1460])
def test_binary_messages_unwrap_into_the_amqp_stream(cut: int) -> None:
    writes = amqp_writes()
    layer = WebSocketLayer()
    inner = feed(layer, ws_wire(writes), cut)
    assert inner[C2S] == b"".join(d for w, d in writes if w == C2S)
    assert inner[S2C] == b"".join(d for w, d in writes if w == S2C)
    assert not layer.findings
    info, counts = layer.info(), layer.counts()
    assert info["subprotocol"] == "amqp" and info["path"] == "/amqp-ws"
    assert info["host"] == "127.0.0.1:5674" and info["status"] == 101
    for direction in (C2S, S2C):
        sent = sum(1 for w, _ in writes if w == direction)
        assert counts["messages"][direction] == sent
        assert counts["frames"][direction] == sent + 1  # and the close
        assert counts["payload"][direction] == len(inner[direction])
    assert info["close"] == {
        C2S: {"code": 1000, "reason": "", "name": "normal closure"},
        S2C: {"code": 1000, "reason": "", "name": "normal closure"},
    }


def test_fragmented_messages_and_interleaved_pings() -> None:
    writes = amqp_writes()
    wire = ws_wire(writes, fragment=100, ping=True)
    layer = WebSocketLayer()
    inner = feed(layer, wire)
    assert inner[C2S] == b"".join(d for w, d in writes if w == C2S)
    assert inner[S2C] == b"".join(d for w, d in writes if w == S2C)
    assert not layer.findings
    counts = layer.counts()
    for direction in (C2S, S2C):
        chunks = [d for w, d in writes if w == direction]
        frames = sum(max(1, -(-len(c) // 100)) for c in chunks) + len(chunks) + 1
        assert counts["frames"][direction] == frames  # data frames, pings, the close
        assert counts["pings"][direction] == len(chunks)
        assert counts["messages"][direction] == len(chunks)


@pytest.mark.parametrize(
    "options",
    [{}, {"client_no_context_takeover": True, "server_no_context_takeover": True}],
    ids=["context-takeover", "no-context-takeover"],
)
def test_permessage_deflate_is_inflated(options: dict[str, Any]) -> None:
    writes = amqp_writes()
    wire = ws_wire(writes, deflate=options, fragment=64)
    layer = WebSocketLayer()
    inner = feed(layer, wire, cut=13)
    assert inner[C2S] == b"".join(d for w, d in writes if w == C2S)
    assert inner[S2C] == b"".join(d for w, d in writes if w == S2C)
    assert layer.info()["extensions"] == "permessage-deflate"
    assert not layer.findings
    # the frames really were compressed: fewer bytes on the wire than inside
    assert sum(len(d) for w, d in wire if w == C2S) < len(inner[C2S])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=300), min_size=1, max_size=50))
def test_split_anywhere_gives_the_same_stream(sizes: list[int]) -> None:
    wire = ws_wire(amqp_writes()[:8], fragment=50, ping=True)
    whole = feed(WebSocketLayer(), wire)
    layer = WebSocketLayer()
    inner = {C2S: b"", S2C: b""}
    for direction, data in wire:
        for piece in peers.chunked(data, lambda i: sizes[i % len(sizes)]):
            inner[direction] += layer.data(direction, piece)
    assert inner == whole
    assert not layer.findings


# -- RFC 6455's own examples --------------------------------------------------------------------
RFC_REQUEST = (
    b"GET /chat HTTP/1.1\r\nHost: server.example.com\r\nUpgrade: websocket\r\n"
    b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    b"Origin: http://example.com\r\nSec-WebSocket-Protocol: amqp, chat\r\n"
    b"Sec-WebSocket-Version: 13\r\n\r\n"
)
RFC_RESPONSE = (
    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Protocol: amqp\r\n\r\n"
)


def opened(request: bytes = RFC_REQUEST, response: bytes = RFC_RESPONSE) -> WebSocketLayer:
    layer = WebSocketLayer()
    assert layer.data(C2S, request) == b""
    assert layer.data(S2C, response) == b""
    return layer


def test_rfc_6455_accept_key_example() -> None:
    # section 1.3: the key and the accept value the server answers with
    assert ws.accept_key("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
    layer = opened()
    assert not layer.findings
    assert layer.info()["origin"] == "http://example.com"
    assert layer.info()["offered"] == ["amqp", "chat"]


def test_rfc_6455_frame_examples() -> None:
    # section 5.7, with the server's frames unmasked and the client's masked
    layer = opened()
    hello_masked = bytes.fromhex("818537fa213d7f9f4d5158")
    assert layer.data(C2S, hello_masked) == b"Hello"
    assert layer.data(S2C, bytes.fromhex("810548656c6c6f")) == b"Hello"
    # a fragmented unmasked text message: "Hel" then "lo"
    assert layer.data(S2C, bytes.fromhex("010348656c")) == b"Hel"
    assert layer.data(S2C, bytes.fromhex("80026c6f")) == b"lo"
    # an unmasked ping and a masked pong, both with "Hello"
    assert layer.data(S2C, bytes.fromhex("890548656c6c6f")) == b""
    assert layer.data(C2S, bytes.fromhex("8a8537fa213d7f9f4d5158")) == b""
    # 256 bytes in a single unmasked binary frame (16-bit length), then 64 KiB (64-bit length)
    body256 = bytes(range(256))
    assert layer.data(S2C, b"\x82\x7e\x01\x00" + body256) == body256
    body64k = random.Random(6455).randbytes(65536)
    assert layer.data(S2C, b"\x82\x7f" + (65536).to_bytes(8, "big") + body64k) == body64k
    counts = layer.counts()
    assert counts["pings"] == {C2S: 0, S2C: 1} and counts["pongs"] == {C2S: 1, S2C: 0}
    assert counts["messages"] == {C2S: 1, S2C: 4}
    # the text frames are named: AMQP travels in binary frames
    assert codes(layer) == {"websocket.text-frame": 3}


def test_the_unmasking_matches_websockets_own() -> None:
    rng = random.Random(1)
    for size in (0, 1, 3, 4, 5, 125, 126, 65535, 65536, 100_000):
        payload = rng.randbytes(size)
        data = Frame(Opcode.BINARY, payload).serialize(mask=True)
        layer = opened()
        # fed in uneven pieces so that unmasking resumes mid-key
        got = b"".join(layer.data(C2S, data[i : i + 777]) for i in range(0, len(data), 777))
        assert got == payload
        assert not layer.findings
        assert layer.counts()["frames"][C2S] == 1


# -- damage and refusal -----------------------------------------------------------------------
def test_reserved_opcode_is_skipped_and_framing_goes_on() -> None:
    layer = opened()
    bad = b"\x83\x04abcd"  # opcode 3 is reserved
    good = Frame(Opcode.BINARY, b"AMQP\x00\x01\x00\x00").serialize(mask=False)
    assert layer.data(S2C, bad + good) == b"AMQP\x00\x01\x00\x00"
    assert codes(layer) == {"websocket.bad-opcode": 1}


def test_unmasked_client_and_masked_server_frames_are_findings() -> None:
    layer = opened()
    assert layer.data(C2S, Frame(Opcode.BINARY, b"abc").serialize(mask=False)) == b"abc"
    assert layer.data(S2C, Frame(Opcode.BINARY, b"xyz").serialize(mask=True)) == b"xyz"
    assert codes(layer) == {"websocket.masking": 2}


def test_a_declared_length_beyond_belief_stops_the_direction() -> None:
    layer = opened()
    header = b"\x82\x7f" + (1 << 63 | 5).to_bytes(8, "big")
    assert layer.data(S2C, header + b"hello" + b"\x82\x01x") == b""
    assert layer.data(S2C, b"more bytes") == b""
    assert codes(layer) == {"websocket.bad-length": 1}
    assert layer.sides[S2C].state == ws.OPAQUE and not layer.sides[S2C].buf


def test_declared_sizes_are_never_trusted_beyond_the_bytes_present() -> None:
    layer = opened()
    header = b"\x82\x7f" + (1 << 30).to_bytes(8, "big")  # 1 GiB declared, 10 bytes sent
    assert layer.data(S2C, header + b"0123456789") == b"0123456789"
    side = layer.sides[S2C]
    assert not side.buf and side.remaining == (1 << 30) - 10
    layer.end()
    assert codes(layer) == {"websocket.incomplete-frame": 1}


def test_non_minimal_lengths_and_bad_control_frames() -> None:
    layer = opened()
    assert layer.data(S2C, b"\x82\x7e\x00\x03abc") == b"abc"  # 3 in a 16-bit length
    long_ping = b"\x89\x7e\x00\x80" + b"p" * 128  # a ping longer than 125 bytes
    fragmented_pong = b"\x0a\x01p"  # a pong without FIN
    assert layer.data(S2C, long_ping + fragmented_pong + b"\x82\x01!") == b"!"
    assert codes(layer) == {"websocket.bad-length": 1, "websocket.bad-control": 2}


def test_fragmentation_errors() -> None:
    layer = opened()
    orphan = b"\x80\x03abc"  # a final continuation with nothing begun
    first = b"\x02\x02de"  # a binary message begun ...
    intruder = b"\x82\x02fg"  # ... and another binary message inside it
    assert layer.data(S2C, orphan + first + intruder) == b"abcdefg"
    assert codes(layer) == {"websocket.bad-fragment": 2}


def test_close_codes_and_frames_after_close() -> None:
    layer = opened()
    close = Frame(Opcode.CLOSE, struct.pack("!H", 1011) + b"broker gone").serialize(mask=False)
    after = Frame(Opcode.BINARY, b"late").serialize(mask=False)
    assert layer.data(S2C, close + after) == b"late"
    assert layer.info()["close"] == {
        S2C: {"code": 1011, "reason": "broker gone", "name": "internal error"}
    }
    assert codes(layer) == {"websocket.close-error": 1, "websocket.frame-after-close": 1}
    layer = opened()
    assert layer.data(C2S, Frame(Opcode.CLOSE, b"\x03\xed").serialize(mask=True)) == b""
    assert codes(layer) == {"websocket.bad-control": 1}  # 1005 may not be sent


def test_a_refused_upgrade_is_reported_and_nothing_is_unwrapped() -> None:
    client = ClientProtocol(parse_uri("ws://127.0.0.1:5674/amqp-ws"), subprotocols=["amqp"])
    server = ServerProtocol(subprotocols=["amqp"])
    client.send_request(client.connect())
    request_bytes = b"".join(client.data_to_send())
    server.receive_data(request_bytes)
    refusal = server.reject(403, "no AMQP for you\n")
    server.send_response(refusal)
    layer = WebSocketLayer()
    assert layer.data(C2S, request_bytes) == b""
    assert layer.data(S2C, b"".join(server.data_to_send())) == b""
    assert layer.data(C2S, b"AMQP\x00\x01\x00\x00") == b""
    assert codes(layer) == {"websocket.refused": 1}
    assert layer.info()["status"] == 403 and layer.info()["reason"] == "Forbidden"


def test_a_wrong_subprotocol_is_reported_and_frames_still_unwrap() -> None:
    writes = amqp_writes()[:4]
    wire = ws_wire(writes, offer=("amqp", "mqtt"), accept=("mqtt",))
    layer = WebSocketLayer()
    inner = feed(layer, wire)
    assert inner[C2S] == b"".join(d for w, d in writes if w == C2S)
    assert codes(layer) == {"websocket.subprotocol": 1}
    assert layer.info()["subprotocol"] == "mqtt"
    layer = WebSocketLayer()
    feed(layer, ws_wire(writes, offer=(), accept=()))
    assert codes(layer) == {"websocket.subprotocol": 2}  # not offered, not agreed


def test_a_wrong_accept_value_is_reported() -> None:
    layer = opened(response=RFC_RESPONSE.replace(b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", b"AAAA"))
    assert codes(layer) == {"websocket.bad-handshake": 1}
    assert "does not match" in layer.findings[0].message


def test_an_endless_handshake_is_bounded() -> None:
    layer = WebSocketLayer()
    layer.data(C2S, b"GET / HTTP/1.1\r\n")
    for _ in range(100):
        layer.data(C2S, b"X-Filler: " + b"y" * 1000 + b"\r\n")
    assert codes(layer) == {"websocket.bad-handshake": 1}
    assert not layer.sides[C2S].buf and layer.sides[C2S].state == ws.OPAQUE


def _lost_bytes_layout(seed: int) -> tuple[list[bytes], list[bytes]]:
    """Six masked binary frames of random payload (masks and payloads from `seed`): payloads,
    wire bytes."""
    rnd = random.Random(seed)
    payloads = [rnd.randbytes(50 + 40 * i) for i in range(6)]
    wire = []
    for payload in payloads:
        mask = rnd.randbytes(4)
        length = len(payload)
        head = bytes([0x82, 0x80 | length]) if length < 126 else b"\x82\xfe" + length.to_bytes(2)
        wire.append(head + mask + ws.unmask(payload, mask))  # masking is its own inverse
    return payloads, wire


def _resume_after_loss(seed: int) -> tuple[bytes, WebSocketLayer, list[bytes]]:
    """Frame 0 whole, 30 bytes of frame 1, then 100 bytes lost, then frames 2 (its tail) to 5."""
    payloads, wire = _lost_bytes_layout(seed)
    layer = opened()
    header = len(wire[1]) - len(payloads[1])
    assert layer.data(C2S, wire[0] + wire[1][:30]) == payloads[0] + payloads[1][: 30 - header]
    layer.gap(C2S, 100)  # the rest of frame 1 and the start of frame 2 are lost
    got = layer.data(C2S, wire[2][57:] + wire[3])  # the search needs three frames ...
    got += layer.data(C2S, wire[4] + wire[5])  # ... and finds frame 3
    assert layer.data(S2C, Frame(Opcode.BINARY, b"ok").serialize(mask=False)) == b"ok"
    return got, layer, payloads


def test_after_lost_bytes_framing_resumes_at_the_next_frame_boundary() -> None:
    got, layer, payloads = _resume_after_loss(seed=1)
    assert got == payloads[3] + payloads[4] + payloads[5]
    assert codes(layer) == {"websocket.lost": 1}


def test_resuming_after_lost_bytes_is_a_search_that_is_rarely_fooled() -> None:
    """Frames carry no marker: the search takes the first offset where three headers chain, and
    the lost frame's masked tail can hold a header that fools it (6 layouts in 300 here): one that
    chains into the real frames lets a few bytes too many through or misses frame 3; one whose
    declared length runs past the bytes present holds the search until that many bytes have come
    (nothing is let through meanwhile). Otherwise it finds frame 3 exactly."""
    exact = 0
    for seed in range(300):
        got, layer, payloads = _resume_after_loss(seed)
        if got:
            assert got.endswith(payloads[4] + payloads[5])
        else:
            assert layer.sides[C2S].state == ws.RESYNC  # still searching, bytes kept
        exact += got == payloads[3] + payloads[4] + payloads[5]
    assert exact >= 285


def test_a_lost_segment_inside_a_real_conversation_costs_only_its_frames() -> None:
    from amqpscope.codec.connection import ConnectionCodec

    writes = amqp_writes()
    wire = ws_wire(writes, fragment=60)
    clean = ConnectionCodec(True)
    expected = []
    for packet, (direction, data) in enumerate(wire, 1):
        expected += clean.data(direction, data, packet)
    # cut 100 bytes out of the client's biggest write (the transfers)
    index = max(range(len(wire)), key=lambda i: len(wire[i][1]) if wire[i][0] == C2S else 0)
    codec = ConnectionCodec(True)
    frames = []
    for packet, (direction, data) in enumerate(wire, 1):
        if packet - 1 == index:
            frames += codec.data(direction, data[:200], packet)
            codec.gap(direction, 100)
            frames += codec.data(direction, data[300:], packet)
        else:
            frames += codec.data(direction, data, packet)
    frames += codec.end(len(wire))
    found = [x.code for f in frames for x in f.findings] + [x.code for x in codec.findings]
    assert "websocket.lost" in found and "amqp.resync" in found
    names = [(f.direction, f.name) for f in frames if f.kind != "layer"]
    clean_names = [(f.direction, f.name) for f in expected if f.kind != "layer"]
    lost = len(clean_names) - len(names)
    assert 0 < lost <= 3  # the transfers the lost bytes were in
    assert names[-12:] == clean_names[-12:]  # and what follows is read as before


def test_query_values_are_redacted_unless_secrets_are_shown() -> None:
    request = RFC_REQUEST.replace(b"GET /chat ", b"GET /ws?sig=s3cret&se=1700000000 ")
    assert WebSocketLayer().info()["path"] is None
    layer = WebSocketLayer()
    layer.data(C2S, request)
    assert layer.info()["path"] == "/ws?sig=<redacted>&se=<redacted>"
    assert "s3cret" not in json.dumps(layer.info())
    layer = WebSocketLayer(show_secrets=True)
    layer.data(C2S, request)
    assert layer.info()["path"] == "/ws?sig=s3cret&se=1700000000"


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400), st.integers(min_value=1, max_value=50))
def test_random_bytes_after_the_handshake_never_raise_and_stay_bounded(
    data: bytes, cut: int
) -> None:
    layer = opened()
    out = b""
    for direction in (C2S, S2C):
        for i in range(0, len(data), cut):
            out += layer.data(direction, data[i : i + cut])
            if i // cut == 3:
                layer.gap(direction, cut)
            assert len(layer.sides[direction].buf) <= 14 + len(data)
            assert len(layer.sides[direction].control) <= ws.MAX_CONTROL_PAYLOAD
    layer.end()
    assert len(out) <= 2 * len(data)
    json.dumps([layer.info(), layer.counts()])


def test_detect() -> None:
    assert ws.detect(RFC_REQUEST) is True
    assert ws.detect(RFC_REQUEST[:40]) is None
    assert ws.detect(b"GE") is None
    assert ws.detect(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n") is False
    assert ws.detect(b"AMQP\x00\x01\x00\x00") is False
    assert ws.detect(b"\x16\x03\x01\x02\x00") is False


# -- the recorded session -----------------------------------------------------------------------
def tshark_ws(path: Path, port: int) -> list[tuple[str, int, bool, bool, int]]:
    """(direction, opcode, fin, masked, payload length) of every WebSocket frame, as tshark
    dissects them (its HTTP dissector is told the port; it follows the upgrade by itself)."""
    cmd = [
        "tshark", "-n", "-r", str(path), "-d", f"tcp.port=={port},http", "-Y", "websocket",
        "-T", "json", "--no-duplicate-keys", "-J", "tcp websocket",
    ]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=120).stdout
    frames = []
    for packet in json.loads(out):
        layers = packet["_source"]["layers"]
        direction = S2C if int(layers["tcp"]["tcp.srcport"]) == port else C2S
        found = layers["websocket"]
        for frame in found if isinstance(found, list) else [found]:
            length = int(frame["websocket.payload_length"])
            length = int(frame.get("websocket.payload_length_ext_16", length))
            length = int(frame.get("websocket.payload_length_ext_64", length))
            fin, masked = frame["websocket.fin"] == "1", frame["websocket.mask"] == "1"
            frames.append((direction, int(frame["websocket.opcode"]), fin, masked, length))
    return frames


def recording() -> tuple[dict[str, Any], list[Any], Dissector]:
    meta = json.loads((CAPTURES / "10-websocket.json").read_text())
    dissector = Dissector()
    with open_capture(CAPTURES / meta["file"]) as capture:
        frames = list(dissector.run(capture))
    return meta, frames, dissector


def feed_streams(layer: WebSocketLayer, meta: dict[str, Any]) -> None:
    """The recording's TCP streams (reassembled by amqpscope) straight into `layer`."""
    dissector = Dissector()
    with open_capture(CAPTURES / meta["file"]) as capture:
        for packet in capture:
            segment = dissector.segments.decode(packet)
            for event in dissector.tcp.feed(segment) if segment else ():
                if isinstance(event, StreamData):
                    layer.data(event.direction, event.data)


def test_the_recording_is_amqp_over_websocket_as_its_ground_truth_says() -> None:
    meta, frames, dissector = recording()
    truth = meta["expect"]["websocket"]
    (conn,) = dissector.connections.values()
    assert conn.version == "1.0" and conn.server.endswith(f":{meta['port']}")
    (slot,) = conn.codec.layers
    layer = slot.layer
    assert isinstance(layer, WebSocketLayer)
    counts, info = layer.counts(), layer.info()
    # what the websockets client and server counted while the scenario ran
    assert info["subprotocol"] == truth["client_subprotocol"] == truth["server_subprotocol"]
    assert info["path"] == truth["path"] == truth["server_request_path"]
    assert counts["messages"] == {
        C2S: truth["client_messages_sent"],
        S2C: truth["server_messages_sent"],
    }
    assert truth["client_messages_received"] == truth["server_messages_sent"]
    assert counts["payload"] == {C2S: truth["amqp_bytes_c2s"], S2C: truth["amqp_bytes_s2c"]}
    assert counts["pings"][C2S] == truth["client_pings_sent"]
    assert counts["pongs"][S2C] == truth["client_pongs_received"]
    # every frame each library's protocol object sent, by opcode, against the layer's log
    log: list[tuple[str, int, bool, bool, int]] = []
    feed_streams(WebSocketLayer(log=log), meta)
    for direction, side in ((C2S, "client"), (S2C, "server")):
        sent = Counter(Opcode(op).name.lower() for d, op, _, _, _ in log if d == direction)
        assert sent == truth[f"{side}_frames_sent"]
        assert counts["frames"][direction] == sum(sent.values())
    assert truth["client_fragmented_messages"] > 0 and truth["client_frames_sent"]["cont"] > 0
    close = truth["server_close_received"]
    assert info["close"][C2S]["code"] == close["code"] == 1000
    assert info["close"][C2S]["reason"] == close["reason"]
    assert info["close"][S2C]["code"] == truth["client_close_received"]["code"]
    assert not [f for f in layer.findings if f.code.startswith("websocket.")]
    assert not [f for fr in frames for f in fr.findings if f.code.startswith("websocket.")]
    # the layer is named once, before the first AMQP frame it carries
    kinds = [f.kind for f in frames]
    assert kinds.count("layer") == 1 and kinds[0] == "layer"
    assert frames[0].name == "websocket" and frames[0].fields["path"] == "/amqp"
    assert frames[0].fields["subprotocol"] == "amqp"
    # and the AMQP frames are what Proton counted
    seen = Counter((f.name, f.direction) for f in frames)
    assert seen[("transfer", C2S)] == meta["expect"]["transfers_sent"]
    assert seen[("transfer", S2C)] == meta["expect"]["transfers_received"]
    assert seen[("sasl-outcome", S2C)] == 1


def test_the_recording_says_the_same_as_its_clear_tcp_twin() -> None:
    """10-send-receive ran the same Proton client straight to 5672. How RabbitMQ batches its
    dispositions into ranges, and whether detach and end follow its close, vary with timing, so
    the comparison is per delivery: what was transferred, and how each delivery was settled."""

    def conversation(name: str) -> tuple[Counter, list, dict]:
        with open_capture(CAPTURES / f"{name}.pcap") as capture:
            frames = [f for f in Dissector().run(capture) if f.kind != "layer"]
        others: Counter[tuple[str, str]] = Counter()
        transfers, settled = [], {}
        for frame in frames:
            fields = frame.fields
            if frame.name == "transfer":
                body = frame.message.get("body") if frame.message else None
                transfers.append((frame.direction, fields["handle"], fields["delivery-id"], body))
            elif frame.name == "disposition":
                last = fields.get("last", fields["first"])
                for delivery in range(fields["first"], last + 1):
                    key = (frame.direction, fields["role"], delivery)
                    settled[key] = (fields.get("settled"), (fields.get("state") or {}).get("type"))
            elif frame.name != "flow":
                others[(frame.direction, frame.name)] += 1
            if frame.direction == S2C and frame.name == "close":
                break  # RabbitMQ sometimes sends detach and end after its close (see README)
        return others, transfers, settled

    websocket, tcp = conversation("10-websocket"), conversation("10-send-receive")
    assert len(websocket[1]) == 20 and len(websocket[2]) == 20
    assert set(websocket[2].values()) == {(True, "accepted")}
    assert websocket == tcp


def test_the_websocket_frames_are_the_ones_tshark_sees() -> None:
    if shutil.which("tshark") is None:
        pytest.skip(reason="tshark is not installed (make test installs it)")
    meta = json.loads((CAPTURES / "10-websocket.json").read_text())
    port = meta["port"]
    log: list[tuple[str, int, bool, bool, int]] = []
    feed_streams(WebSocketLayer(log=log), meta)
    assert len(log) > 30
    assert log == tshark_ws(CAPTURES / meta["file"], port)
    assert {opcode for _, opcode, _, _, _ in log} == {0x0, 0x2, 0x8, 0x9, 0xA}
    assert all(masked == (d == C2S) for d, _op, _fin, masked, _n in log)


def test_the_timeline_and_json_say_amqp_over_websocket() -> None:
    def run(*args: str) -> str:
        cmd = [sys.executable, "-m", "amqpscope.cli", *args]
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        return result.stdout

    path = str(CAPTURES / "10-websocket.pcap")
    lines = run("read", path, "--color", "never").splitlines()
    assert lines[0].endswith(":5674  WebSocket")
    assert "websocket /amqp subprotocol=amqp host=127.0.0.1:5674 status=101" in lines[1]
    assert "protocol-header AMQP 1.0 (sasl)" in lines[2]
    records = [json.loads(line) for line in run("read", path, "--json").splitlines()]
    first = records[0]
    assert (first["kind"], first["name"], first["version"]) == ("layer", "websocket", "unknown")
    assert first["fields"]["subprotocol"] == "amqp" and first["fields"]["path"] == "/amqp"
    assert {r["version"] for r in records[1:]} == {"1.0"}
    assert all(r["conn"] == first["conn"] for r in records)


def test_websocket_inside_tls_as_azure_serves_it_on_443() -> None:
    from amqpscope.codec.connection import ConnectionCodec
    from amqpscope.codec.layers import LayerContext
    from amqpscope.codec.tls import KeyLog
    from tests.tls_memory import converse

    def frames_of(wire: list[tuple[str, bytes]], keylog: KeyLog | None = None) -> list[Any]:
        codec = ConnectionCodec(True, context=LayerContext(keylog=keylog))
        out = []
        for packet, (direction, data) in enumerate(wire, 1):
            out += codec.data(direction, data, packet)
        return out + codec.end(len(wire))

    writes = amqp_writes()
    clear = frames_of(writes)
    tls = converse(ws_wire(writes, fragment=100, ping=True), "1.3")
    frames = frames_of(tls["writes"], KeyLog(tls["keylog"]))
    layers_seen = [(f.name, f.fields.get("subprotocol")) for f in frames if f.kind == "layer"]
    assert layers_seen == [("tls", None), ("websocket", "amqp")]
    amqp = [(f.direction, f.name, f.data) for f in frames if f.kind != "layer"]
    assert amqp == [(f.direction, f.name, f.data) for f in clear]
    assert not [x for f in frames for x in f.findings]


def test_wireshark_reads_no_amqp_inside_the_websocket() -> None:
    """Wireshark 4.0 follows the upgrade (once told the port is HTTP) and dissects the frames,
    but registers no AMQP dissector for the `amqp` subprotocol: with or without Decode As it
    shows no AMQP at all. amqpscope unwraps the frames and decodes every AMQP frame inside."""
    from tests.oracle import tshark_frames

    if shutil.which("tshark") is None:
        pytest.skip(reason="tshark is not installed (make test installs it)")
    path = str(CAPTURES / "10-websocket.pcap")
    assert tshark_frames(path) == [] and tshark_frames(path, (5674,)) == []
    _meta, frames, _ = recording()
    assert len([f for f in frames if f.kind != "layer"]) > 40
