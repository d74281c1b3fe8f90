"""TLS key schedule and record decryption against RFC 8448's TLS 1.3 trace (section 3, "Simple
1-RTT Handshake"): every expected value below is printed in the RFC, an oracle independent of
amqpscope. The messages and records are the RFC's too."""

from __future__ import annotations

import hashlib

import pytest

from amqpscope.codec.tls import TlsLayer, hello, keys, spec
from amqpscope.codec.tls.keylog import KeyLog
from amqpscope.codec.tls.records import BadRecord, Decryptor

H = bytes.fromhex
SUITE = spec.SUITES[0x1301]  # TLS_AES_128_GCM_SHA256, the trace's suite

CLIENT_HELLO = H(
    "010000c00303cb34ecb1e78163ba1c38c6dacb196a6dffa21a8d9912ec18a2ef6283024dece7000006130113031302"
    "010000910000000b0009000006736572766572ff01000100000a00140012001d0017001800190100010101020103"
    "010400230000003300260024001d002099381de560e4bd43d23d8e435a7dbafeb3c06e51c13cae4d5413691e529a"
    "af2c002b0003020304000d0020001e040305030603020308040805080604010501060102010402050206020202002d"
    "00020101001c00024001"
)
SERVER_HELLO = H(
    "020000560303a6af06a4121860dc5e6e60249cd34c95930c8ac5cb1434dac155772ed3e2692800130100002e0033"
    "0024001d0020c9828876112095fe66762bdbf7c672e156d6cc253b833df1dd69b1b04e751f0f002b00020304"
)
CLIENT_RANDOM = H("cb34ecb1e78163ba1c38c6dacb196a6dffa21a8d9912ec18a2ef6283024dece7")
SHARED = H("8bd4054fb55b9d63fdfbacf9f04b9f0d35e6d63f537563efd46272900f89492d")
HELLO_HASH = H("860c06edc07858ee8e78f0e7428c58edd6b43f2ca3e6e95f02ed063cf0e1cad8")
FINISHED_HASH = H("9608102a0f1ccc6db6250b7b7e417b1a000eaada3daae4777a7686c9ff83df13")
C_HS = H("b3eddb126e067f35a780b3abf45e2d8f3b1a950738f52e9600746a0e27a55a21")
S_HS = H("b67b7d690cc16c4e75e54213cb2d37b4e9c912bcded9105d42befd59d391ad38")
C_AP = H("9e40646ce79a7f9dc05af8889bce6552875afa0b06df0087f792ebb7c17504a5")
S_AP = H("a11af9f05531f856ad47116b45a950328204b4f44bfb6b3a4b4f1f3fcb631643")
CLIENT_FINISHED = H("14000020a8ec436d677634ae525ac1fcebe11a039ec17694fac6e98527b642f2edd5ce61")
# {client} records: Finished (handshake keys, seq 0), 50 bytes (application keys, seq 0),
# close_notify (application keys, seq 1); {server} 50 bytes (application keys, seq 1)
C_FINISHED_RECORD = H(
    "170303003575ec4dc238cce60b298044a71e219c56cc77b0517fe9b93c7a4bfc44d87f38f80338ac98fc46deb384"
    "bd1caeacab6867d726c40546"
)
C_DATA_RECORD = H(
    "1703030043a23f7054b62c94d0affafe8228ba55cbefacea42f914aa66bcab3f2b9819a8a5b46b395bd54a9a2044"
    "1e2b62974e1f5a6292a2977014bd1e3deae63aeebb21694915e4"
)
C_ALERT_RECORD = H("1703030013c9872760655666b74d7ff1153efd6db6d0b0e3")
S_DATA_RECORD = H(
    "17030300432e937e11ef4ac740e538ad36005fc4a46932fc3225d05f82aa1b36e30efaf97d90e6dffc602dcb501a"
    "59a8fcc49c4bf2e5f0a21c0047c2abf332540dd032e167c2955d"
)
PAYLOAD = bytes(range(0x32))


def test_key_schedule_walks_to_the_rfc_traffic_secrets() -> None:
    early = keys.hkdf_extract(b"", bytes(32), "sha256")
    assert early == H("33ad0a1c607ec03b09e6cd9893680ce210adf300aa1f2660e1b22e10f170f92a")
    derived = keys.derive_secret(early, "derived", b"", "sha256")
    assert derived == H("6f2615a108c702c5678f54fc9dbab69716c076189c48250cebeac3576c3611ba")
    handshake = keys.hkdf_extract(derived, SHARED, "sha256")
    assert handshake == H("1dc826e93606aa6fdc0aadc12f741b01046aa6b99f691ed221a9f0ca043fbeac")
    assert hashlib.sha256(CLIENT_HELLO + SERVER_HELLO).digest() == HELLO_HASH
    label = keys.hkdf_expand_label
    assert label(handshake, "c hs traffic", HELLO_HASH, 32, "sha256") == C_HS
    assert label(handshake, "s hs traffic", HELLO_HASH, 32, "sha256") == S_HS
    master = keys.hkdf_extract(
        keys.derive_secret(handshake, "derived", b"", "sha256"), bytes(32), "sha256"
    )
    assert master == H("18df06843d13a08bf2a449844c5f8a478001bc4d4c627984d5a41da8d0402919")
    assert label(master, "c ap traffic", FINISHED_HASH, 32, "sha256") == C_AP
    assert label(master, "s ap traffic", FINISHED_HASH, 32, "sha256") == S_AP


@pytest.mark.parametrize(
    ("secret", "key", "iv"),
    [
        (S_HS, "3fce516009c21727d0f2e4e86ee403bc", "5d313eb2671276ee13000b30"),
        (C_HS, "dbfaa693d1762c5b666af5d950258d01", "5bd3c71b836e0b76bb73265f"),
        (S_AP, "9f02283b6c9c07efc26bb9f2ac92e356", "cf782b88dd83549aadf1e984"),
        (C_AP, "17422dda596ed5d9acd890e3c63f5051", "5b78923dee08579033e523d9"),
    ],
)
def test_traffic_keys_match_the_rfc(secret: bytes, key: str, iv: str) -> None:
    assert keys.tls13_keys(secret, SUITE) == keys.Keys(H(key), H(iv))


def test_records_decrypt_to_the_rfc_plaintext() -> None:
    client = Decryptor(SUITE, keys.tls13_keys(C_HS, SUITE), True)
    assert client.decrypt(C_FINISHED_RECORD[:5], C_FINISHED_RECORD[5:]) == (22, CLIENT_FINISHED)
    client = Decryptor(SUITE, keys.tls13_keys(C_AP, SUITE), True)
    assert client.decrypt(C_DATA_RECORD[:5], C_DATA_RECORD[5:]) == (23, PAYLOAD)
    assert client.decrypt(C_ALERT_RECORD[:5], C_ALERT_RECORD[5:]) == (21, b"\x01\x00")
    server = Decryptor(SUITE, keys.tls13_keys(S_AP, SUITE), True)
    server.seq = 1  # the server's first application record was its NewSessionTicket
    assert server.decrypt(S_DATA_RECORD[:5], S_DATA_RECORD[5:]) == (23, PAYLOAD)


def test_a_wrong_sequence_number_or_key_fails_the_tag() -> None:
    client = Decryptor(SUITE, keys.tls13_keys(C_AP, SUITE), True)
    client.seq = 1
    with pytest.raises(BadRecord):
        client.decrypt(C_DATA_RECORD[:5], C_DATA_RECORD[5:])
    wrong = Decryptor(SUITE, keys.tls13_keys(S_AP, SUITE), True)
    with pytest.raises(BadRecord):
        wrong.decrypt(C_DATA_RECORD[:5], C_DATA_RECORD[5:])
    assert wrong.seq == 0  # a record that fails does not count


def test_key_update_steps_the_secret_by_the_rfc_label() -> None:
    stepped = keys.tls13_next_secret(C_AP, SUITE)
    assert stepped == keys.hkdf_expand_label(C_AP, "traffic upd", b"", 32, "sha256")
    assert stepped != C_AP


def test_hellos_are_parsed() -> None:
    client = hello.client_hello(CLIENT_HELLO[4:])
    assert client.random == CLIENT_RANDOM
    assert client.sni == "server"
    assert client.suites == [0x1301, 0x1303, 0x1302]
    assert client.versions == [0x0304]
    server = hello.server_hello(SERVER_HELLO[4:])
    assert (server.version, server.suite, server.retry) == (0x0304, 0x1301, False)


def _record(content_type: int, body: bytes) -> bytes:
    return bytes([content_type, 3, 3]) + len(body).to_bytes(2, "big") + body


def _keylog(*lines: tuple[str, bytes]) -> KeyLog:
    return KeyLog("".join(f"{label} {CLIENT_RANDOM.hex()} {s.hex()}\n" for label, s in lines))


def _client_stream(layer: TlsLayer) -> bytes:
    """The trace through the layer: the hellos in clear, then the client's records split oddly
    (records may span TCP segments)."""
    out = layer.data("c2s", _record(22, CLIENT_HELLO))
    out += layer.data("s2c", _record(22, SERVER_HELLO))
    stream = C_FINISHED_RECORD + C_DATA_RECORD + C_ALERT_RECORD
    for cut in range(0, len(stream), 7):
        out += layer.data("c2s", stream[cut : cut + 7])
    return out


def test_the_layer_decrypts_with_handshake_and_traffic_secrets() -> None:
    layer = TlsLayer(
        _keylog(("CLIENT_HANDSHAKE_TRAFFIC_SECRET", C_HS), ("CLIENT_TRAFFIC_SECRET_0", C_AP))
    )
    assert _client_stream(layer) == PAYLOAD
    assert layer.findings == []
    info = layer.info()
    assert info["version"] == "TLS 1.3"
    assert info["cipher-suite"] == "TLS_AES_128_GCM_SHA256"
    assert info["sni"] == "server"
    assert info["client-random"] == CLIENT_RANDOM.hex()
    assert info["decrypted"] is True
    assert info["alerts"] == ["close_notify"]


def test_the_layer_decrypts_with_traffic_secrets_only() -> None:
    layer = TlsLayer(_keylog(("CLIENT_TRAFFIC_SECRET_0", C_AP)))
    assert _client_stream(layer) == PAYLOAD
    assert layer.findings == []


def test_without_a_key_the_layer_names_the_line_that_would_decrypt() -> None:
    layer = TlsLayer(KeyLog())
    assert _client_stream(layer) == b""
    assert [f.code for f in layer.findings] == ["tls.no-key"]
    assert f"CLIENT_TRAFFIC_SECRET_0 {CLIENT_RANDOM.hex()}" in layer.findings[0].message
    assert layer.info()["key-log-line"] == f"CLIENT_TRAFFIC_SECRET_0 {CLIENT_RANDOM.hex()}"
    assert layer.info()["decrypted"] is False


def test_a_wrong_key_is_a_finding_not_garbage() -> None:
    wrong = bytes(32)
    layer = TlsLayer(
        _keylog(("CLIENT_HANDSHAKE_TRAFFIC_SECRET", wrong), ("CLIENT_TRAFFIC_SECRET_0", wrong))
    )
    assert _client_stream(layer) == b""
    assert [f.code for f in layer.findings] == ["tls.wrong-key"]


def test_a_record_layer_that_is_not_tls_is_a_finding() -> None:
    layer = TlsLayer(KeyLog())
    layer.data("c2s", _record(22, CLIENT_HELLO))
    assert layer.data("c2s", b"GET / HTTP/1.1\r\n\r\n") == b""
    assert [f.code for f in layer.findings] == ["tls.bad-record"]


def test_key_log_lines() -> None:
    log = KeyLog(
        "# comment\n"
        f"CLIENT_RANDOM {CLIENT_RANDOM.hex()} {'ab' * 48}\n"
        "CLIENT_RANDOM nothex 00\n"
        "SOMETHING_ELSE 00 00\n"
        f"CLIENT_TRAFFIC_SECRET_0 {CLIENT_RANDOM.hex()} {C_AP.hex()}\r\n"
    )
    assert len(log) == 2
    assert log.bad_lines == 2
    assert log.get("CLIENT_RANDOM", CLIENT_RANDOM) == H("ab" * 48)
    assert log.get("CLIENT_TRAFFIC_SECRET_0", CLIENT_RANDOM) == C_AP
    assert log.get("CLIENT_TRAFFIC_SECRET_0", bytes(32)) is None
