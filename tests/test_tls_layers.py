"""The layer stack and TLS decryption end to end in the codec: real AMQP bytes (Qpid Proton's
engine) wrapped in real TLS (OpenSSL through Python's ssl, in memory), every suite amqpscope
claims; the frames decoded through TLS must equal the frames decoded from the clear bytes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from amqpscope.codec import layers
from amqpscope.codec.connection import ConnectionCodec
from amqpscope.codec.layers import LayerContext
from amqpscope.codec.tls import KeyLog, TlsLayer
from amqpscope.findings import finding
from tests import peers
from tests.tls_memory import converse

SUITES = [
    ("1.3", "TLS_AES_128_GCM_SHA256", True, "TLS_AES_128_GCM_SHA256"),
    ("1.3", "TLS_AES_256_GCM_SHA384", True, "TLS_AES_256_GCM_SHA384"),
    ("1.3", "TLS_CHACHA20_POLY1305_SHA256", True, "TLS_CHACHA20_POLY1305_SHA256"),
    ("1.2", "ECDHE-ECDSA-AES128-GCM-SHA256", True, "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"),
    ("1.2", "ECDHE-ECDSA-AES256-GCM-SHA384", True, "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"),
    (
        "1.2",
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        True,
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    ),
    ("1.2", "ECDHE-ECDSA-AES256-SHA", True, "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA"),
    ("1.2", "ECDHE-ECDSA-AES256-SHA", False, "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA"),
    ("1.2", "ECDHE-ECDSA-AES128-SHA256", True, "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256"),
]


def frames_of(writes: list[tuple[str, bytes]], keylog: KeyLog | None = None) -> list[Any]:
    codec = ConnectionCodec(True, context=LayerContext(keylog=keylog), server_port=5671)
    out = []
    for packet, (direction, chunk) in enumerate(writes, 1):
        out += codec.data(direction, chunk, packet)
    out += codec.end(len(writes) + 1)
    return out


def view(frames: list[Any]) -> list[tuple]:
    return [
        (f.direction, f.kind, f.name, f.channel, f.data, f.fields, f.message, f.findings)
        for f in frames
    ]


@pytest.fixture(scope="module")
def conversation() -> list[tuple[str, bytes]]:
    return peers.proton_conversation(messages=5, body_size=1000, sasl="ANONYMOUS").writes


@pytest.mark.parametrize(("version", "cipher", "etm", "suite"), SUITES)
def test_frames_through_tls_equal_the_clear_frames(
    conversation: list[tuple[str, bytes]], version: str, cipher: str, etm: bool, suite: str
) -> None:
    tls = converse(conversation, version, cipher, etm)
    for direction in ("c2s", "s2c"):  # OpenSSL carried every byte
        sent = b"".join(c for d, c in conversation if d == direction)
        assert tls["received"][direction] == sent
    clear = frames_of(conversation)
    through = frames_of(tls["writes"], KeyLog(tls["keylog"]))
    layer, decoded = through[0], through[1:]
    assert (layer.kind, layer.name) == ("layer", "tls")
    assert layer.fields["version"] == f"TLS {version}"
    assert layer.fields["cipher-suite"] == suite
    assert layer.fields["sni"] == "localhost"
    assert layer.fields["decrypted"] is True
    assert layer.findings == []
    assert len(clear) > 20
    assert view(decoded) == view(clear)


def test_without_keys_the_connection_is_named_tls_and_yields_no_frames(
    conversation: list[tuple[str, bytes]],
) -> None:
    tls = converse(conversation, "1.3")
    frames = frames_of(tls["writes"], KeyLog())
    assert [(f.kind, f.name) for f in frames] == [("layer", "tls")]
    fields = frames[0].fields
    assert fields["version"] == "TLS 1.3"
    assert fields["cipher-suite"] == tls["suite"]
    assert fields["decrypted"] is False
    random = fields["client-random"]
    assert f"CLIENT_TRAFFIC_SECRET_0 {random} " in tls["keylog"]  # the line OpenSSL logged
    assert [f.code for f in frames[0].findings] == ["tls.no-key"]
    assert fields["key-log-line"] in frames[0].findings[0].message


@pytest.mark.parametrize(
    ("server_name", "port", "reported"),
    [
        ("ns1.servicebus.windows.net", 443, True),  # Azure Service Bus over WebSockets
        ("localhost", 443, False),  # any other HTTPS is not AMQP's to report
        ("localhost", 5671, True),  # amqps
    ],
)
def test_tls_without_a_key_is_reported_on_amqps_or_for_an_amqp_server(
    conversation: list[tuple[str, bytes]], server_name: str, port: int, reported: bool
) -> None:
    tls = converse(conversation[:4], "1.3", server_name=server_name)
    codec = ConnectionCodec(True, context=LayerContext(keylog=KeyLog()), server_port=port)
    frames = []
    for packet, (direction, chunk) in enumerate(tls["writes"], 1):
        frames += codec.data(direction, chunk, packet)
    frames += codec.end(len(tls["writes"]) + 1)
    names = [(f.kind, f.name, (f.fields or {}).get("sni")) for f in frames]
    assert names == ([("layer", "tls", server_name)] if reported else [])


@pytest.mark.parametrize("version", ["1.2", "1.3"])
def test_a_wrong_key_is_a_finding_and_no_frames(
    conversation: list[tuple[str, bytes]], version: str
) -> None:
    tls = converse(conversation, version)
    other = converse(conversation, version)  # same software, other secrets
    random = tls["writes"][0][1][11:43].hex()  # the ClientHello's random
    wrong = "".join(
        f"{line.split()[0]} {random} {line.split()[2]}\n"
        for line in other["keylog"].splitlines()
        if line and not line.startswith("#")
    )
    frames = frames_of(tls["writes"], KeyLog(wrong))
    assert [(f.kind, f.name) for f in frames] == [("layer", "tls")]
    assert [f.code for f in frames[0].findings] == ["tls.wrong-key"]


def test_the_in_band_upgrade_header_then_tls(conversation: list[tuple[str, bytes]]) -> None:
    """AMQP 1.0's TLS header (`AMQP 2 1 0 0`) each way, then TLS on the same connection."""
    header = b"AMQP\x02\x01\x00\x00"
    tls = converse(conversation, "1.3")
    writes = [("c2s", header), ("s2c", header), *tls["writes"]]
    frames = frames_of(writes, KeyLog(tls["keylog"]))
    assert [(f.direction, f.name) for f in frames[:3]] == [
        ("c2s", "protocol-header"),
        ("s2c", "protocol-header"),
        ("c2s", "tls"),
    ]
    assert frames[0].fields["protocol"] == "AMQP 1.0 (tls)"
    assert view(frames[3:]) == view(frames_of(conversation))


class _Rot:
    """A toy layer (each byte + 1) to test the stack itself: detection split over segments,
    the other direction joining, nesting under TLS."""

    name = "rot"

    def __init__(self, _context: LayerContext) -> None:
        self.findings: list = []

    def data(self, direction: str, data: bytes) -> bytes:
        return bytes((b - 1) % 256 for b in data.removeprefix(b"ROT!"))

    def info(self) -> dict[str, Any]:
        return {"toy": True}


def _rot_match(direction: str, head: bytes) -> str:
    if head.startswith(b"ROT!"):
        return layers.MATCH
    return layers.MORE if b"ROT!".startswith(head) else layers.NO


@pytest.fixture
def rot_layer() -> Any:
    layers.register(layers.Detector("rot", _rot_match, _Rot))
    yield
    layers._DETECTORS.pop("rot", None)


def test_layers_stack_tls_then_a_toy_layer(
    conversation: list[tuple[str, bytes]], rot_layer: Any
) -> None:
    rot = [("c2s", b"ROT!")] + [(d, bytes((b + 1) % 256 for b in c)) for d, c in conversation]
    tls = converse(rot, "1.2")
    # the detector sees "RO", waits, then "T!..." (the bytes of a layer can arrive in pieces)
    frames = frames_of(tls["writes"], KeyLog(tls["keylog"]))
    assert [(f.kind, f.name) for f in frames[:2]] == [("layer", "tls"), ("layer", "rot")]
    assert view(frames[2:]) == view(frames_of(conversation))


def test_a_toy_layer_detected_across_segments(rot_layer: Any) -> None:
    header = b"AMQP\x00\x00\x09\x01"
    writes = [("c2s", b"RO"), ("c2s", b"T!" + bytes(b + 1 for b in header))]
    frames = frames_of(writes)
    assert [(f.kind, f.name, f.packet) for f in frames] == [
        ("layer", "rot", 2),
        ("protocol-header", "protocol-header", 2),
    ]
    assert frames[0].fields == {"toy": True, "size": 12}


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cut=st.integers(min_value=0, max_value=4000), flip=st.integers(min_value=0, max_value=255))
def test_damaged_tls_is_a_finding_never_an_exception(
    conversation: list[tuple[str, bytes]],
    tls12_writes: tuple[list[tuple[str, bytes]], str],
    cut: int,
    flip: int,
) -> None:
    """One byte of the TLS stream changed, anywhere: the codec reports, it does not raise, and
    it hands on no frame that was not in the clear conversation."""
    writes, keylog = tls12_writes
    stream = bytearray(b"".join(c for _, c in writes))
    position = cut % len(stream)
    stream[position] ^= flip or 1
    damaged, offset = [], 0
    for direction, chunk in writes:
        damaged.append((direction, bytes(stream[offset : offset + len(chunk)])))
        offset += len(chunk)
    found = frames_of(damaged, KeyLog(keylog))
    codes = {f.code for frame in found for f in frame.findings}
    assert all(code.split(".")[0] in ("tls", "amqp", "amqp10") for code in codes), codes
    assert "amqp.decode-error" not in codes
    clear = frames_of(conversation)
    for direction in ("c2s", "s2c"):  # what was decrypted is the clear stream's beginning
        mine = [f.data for f in found if f.direction == direction and f.kind != "layer"]
        theirs = [f.data for f in clear if f.direction == direction]
        assert mine == theirs[: len(mine)]


@pytest.fixture(scope="module")
def tls12_writes(conversation: list[tuple[str, bytes]]) -> tuple[list[tuple[str, bytes]], str]:
    tls = converse(conversation, "1.2")
    return tls["writes"], tls["keylog"]


@pytest.mark.parametrize("version", ["1.2", "1.3"])
def test_a_key_that_comes_late_decrypts_from_there_on(version: str) -> None:
    """Live capture: the client writes its key log while the packets are already being decoded.
    Records that went by without a key are lost; the layer finds its place in the sequence."""
    plain = [("c2s", bytes([i]) * 300) for i in range(1, 7)]
    tls = converse(plain, version)
    keylog = KeyLog()
    layer = TlsLayer(keylog)
    c2s = [w for w in tls["writes"] if w[0] == "c2s"]
    cut = len(c2s) - 3  # the last 3 client writes come after the key
    out = b""
    seen = 0
    for direction, chunk in tls["writes"]:
        if direction == "c2s":
            seen += 1
            if seen == cut + 1:
                keylog.add_text(tls["keylog"])
        decrypted = layer.data(direction, chunk)
        if direction == "c2s":
            out += decrypted
    clear = b"".join(p for _, p in plain)
    assert out == b"".join(bytes([i]) * 300 for i in range(4, 7))
    assert clear.endswith(out)
    assert [f.code for f in layer.findings] == ["tls.no-key"]


@pytest.mark.parametrize("version", ["1.2", "1.3"])
def test_bytes_lost_under_tls_resume_at_the_next_record(
    conversation: list[tuple[str, bytes]], version: str
) -> None:
    """A TCP gap in the middle of the client's TLS records: the layer finds the next record
    its key opens (how many were lost is unknown) and framing resynchronises inside it."""
    tls = converse(conversation, version)
    writes = tls["writes"]
    c2s = [i for i, (d, _) in enumerate(writes) if d == "c2s"]
    lost = c2s[len(c2s) // 2]  # one client write in the middle of the conversation
    codec = ConnectionCodec(True, context=LayerContext(keylog=KeyLog(tls["keylog"])))
    found = []
    for packet, (direction, chunk) in enumerate(writes, 1):
        if packet - 1 == lost:
            note = finding("tcp.gap", f"{len(chunk)} bytes of c2s not captured", packet)
            codec.gap(direction, len(chunk), note)
            continue
        found += codec.data(direction, chunk, packet)
    found += codec.end(len(writes) + 1)
    clear = [f.data for f in frames_of(conversation) if f.direction == "c2s"]
    mine = [f for f in found if f.direction == "c2s" and f.kind != "layer"]
    assert [f.data for f in mine][-3:] == clear[-3:]  # decrypting again after the gap
    assert len(mine) < len(clear)
    assert all(f.data in clear for f in mine)
    codes = [c.code for f in found for c in f.findings]
    assert "tcp.gap" in codes and "tls.decrypt-failed" not in codes
