"""TLS protocol facts as tables: record and handshake types, versions, cipher suites, extensions.

Cipher suites are described by what decryption needs: the TLS version family, the record
protection (AEAD or CBC), key and IV lengths, the MAC (CBC) and the hash of the PRF / HKDF.
Ids and names are IANA's (TLS Cipher Suites registry; RFC 8446 B.4, RFC 5288, RFC 5289,
RFC 7905, RFC 5246 A.5, RFC 4492).
"""

from __future__ import annotations

from typing import NamedTuple

# record content types (RFC 8446 5.1)
CHANGE_CIPHER_SPEC = 20
ALERT = 21
HANDSHAKE = 22
APPLICATION_DATA = 23
CONTENT_TYPES = {
    CHANGE_CIPHER_SPEC: "change_cipher_spec",
    ALERT: "alert",
    HANDSHAKE: "handshake",
    APPLICATION_DATA: "application_data",
}

# handshake message types (RFC 8446 4, RFC 5246 7.4)
CLIENT_HELLO = 1
SERVER_HELLO = 2
NEW_SESSION_TICKET = 4
END_OF_EARLY_DATA = 5
ENCRYPTED_EXTENSIONS = 8
CERTIFICATE = 11
SERVER_KEY_EXCHANGE = 12
CERTIFICATE_REQUEST = 13
SERVER_HELLO_DONE = 14
CERTIFICATE_VERIFY = 15
CLIENT_KEY_EXCHANGE = 16
FINISHED = 20
KEY_UPDATE = 24

# extensions (IANA TLS ExtensionType Values)
EXT_SERVER_NAME = 0
EXT_ALPN = 16
EXT_ENCRYPT_THEN_MAC = 22
EXT_EXTENDED_MASTER_SECRET = 23
EXT_SUPPORTED_VERSIONS = 43

#: protocol version on the wire -> name
VERSIONS = {
    0x0300: "SSL 3.0",
    0x0301: "TLS 1.0",
    0x0302: "TLS 1.1",
    0x0303: "TLS 1.2",
    0x0304: "TLS 1.3",
}
TLS12 = 0x0303
TLS13 = 0x0304

#: the ServerHello random that marks a HelloRetryRequest (RFC 8446 4.1.3)
HELLO_RETRY_RANDOM = bytes.fromhex(
    "cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c"
)

#: alert descriptions (RFC 8446 6), for the info a closed connection shows
ALERTS = {
    0: "close_notify",
    10: "unexpected_message",
    20: "bad_record_mac",
    40: "handshake_failure",
    42: "bad_certificate",
    46: "certificate_unknown",
    48: "unknown_ca",
    50: "decode_error",
    51: "decrypt_error",
    70: "protocol_version",
    80: "internal_error",
    90: "user_canceled",
    109: "missing_extension",
    112: "unrecognized_name",
    116: "certificate_required",
    120: "no_application_protocol",
}

#: largest TLSCiphertext fragment (2^14 + 256, RFC 8446 5.2; 5246 allows 2^14 + 2048)
MAX_RECORD = 2**14 + 2048


class Suite(NamedTuple):
    """What decrypting a suite's records needs. `cipher`: "aes-gcm", "chacha20-poly1305",
    "aes-ccm", "aes-cbc"; `hash`: of HKDF (1.3) or the PRF (1.2); `mac`: the CBC HMAC."""

    name: str
    tls13: bool
    cipher: str
    key_len: int
    hash: str
    mac: str = ""
    tag_len: int = 16


#: cipher suite id -> how its records are protected (the suites amqpscope decrypts)
SUITES: dict[int, Suite] = {
    # TLS 1.3 (RFC 8446 B.4)
    0x1301: Suite("TLS_AES_128_GCM_SHA256", True, "aes-gcm", 16, "sha256"),
    0x1302: Suite("TLS_AES_256_GCM_SHA384", True, "aes-gcm", 32, "sha384"),
    0x1303: Suite("TLS_CHACHA20_POLY1305_SHA256", True, "chacha20-poly1305", 32, "sha256"),
    0x1304: Suite("TLS_AES_128_CCM_SHA256", True, "aes-ccm", 16, "sha256"),
    0x1305: Suite("TLS_AES_128_CCM_8_SHA256", True, "aes-ccm", 16, "sha256", tag_len=8),
    # TLS 1.2 AES-GCM (RFC 5288, RFC 5289)
    0x009C: Suite("TLS_RSA_WITH_AES_128_GCM_SHA256", False, "aes-gcm", 16, "sha256"),
    0x009D: Suite("TLS_RSA_WITH_AES_256_GCM_SHA384", False, "aes-gcm", 32, "sha384"),
    0x009E: Suite("TLS_DHE_RSA_WITH_AES_128_GCM_SHA256", False, "aes-gcm", 16, "sha256"),
    0x009F: Suite("TLS_DHE_RSA_WITH_AES_256_GCM_SHA384", False, "aes-gcm", 32, "sha384"),
    0xC02B: Suite("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", False, "aes-gcm", 16, "sha256"),
    0xC02C: Suite("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", False, "aes-gcm", 32, "sha384"),
    0xC02F: Suite("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", False, "aes-gcm", 16, "sha256"),
    0xC030: Suite("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", False, "aes-gcm", 32, "sha384"),
    # TLS 1.2 ChaCha20-Poly1305 (RFC 7905)
    0xCCA8: Suite(
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", False, "chacha20-poly1305", 32, "sha256"
    ),
    0xCCA9: Suite(
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", False, "chacha20-poly1305", 32, "sha256"
    ),
    0xCCAA: Suite(
        "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256", False, "chacha20-poly1305", 32, "sha256"
    ),
    # TLS 1.2 AES-CBC with HMAC (RFC 5246 A.5, RFC 4492, RFC 5289)
    0x002F: Suite("TLS_RSA_WITH_AES_128_CBC_SHA", False, "aes-cbc", 16, "sha256", "sha1"),
    0x0035: Suite("TLS_RSA_WITH_AES_256_CBC_SHA", False, "aes-cbc", 32, "sha256", "sha1"),
    0x003C: Suite("TLS_RSA_WITH_AES_128_CBC_SHA256", False, "aes-cbc", 16, "sha256", "sha256"),
    0x003D: Suite("TLS_RSA_WITH_AES_256_CBC_SHA256", False, "aes-cbc", 32, "sha256", "sha256"),
    0x0033: Suite("TLS_DHE_RSA_WITH_AES_128_CBC_SHA", False, "aes-cbc", 16, "sha256", "sha1"),
    0x0039: Suite("TLS_DHE_RSA_WITH_AES_256_CBC_SHA", False, "aes-cbc", 32, "sha256", "sha1"),
    0x0067: Suite("TLS_DHE_RSA_WITH_AES_128_CBC_SHA256", False, "aes-cbc", 16, "sha256", "sha256"),
    0x006B: Suite("TLS_DHE_RSA_WITH_AES_256_CBC_SHA256", False, "aes-cbc", 32, "sha256", "sha256"),
    0xC009: Suite("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", False, "aes-cbc", 16, "sha256", "sha1"),
    0xC00A: Suite("TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", False, "aes-cbc", 32, "sha256", "sha1"),
    0xC013: Suite("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", False, "aes-cbc", 16, "sha256", "sha1"),
    0xC014: Suite("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", False, "aes-cbc", 32, "sha256", "sha1"),
    0xC023: Suite(
        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", False, "aes-cbc", 16, "sha256", "sha256"
    ),
    0xC024: Suite(
        "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384", False, "aes-cbc", 32, "sha384", "sha384"
    ),
    0xC027: Suite(
        "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", False, "aes-cbc", 16, "sha256", "sha256"
    ),
    0xC028: Suite(
        "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384", False, "aes-cbc", 32, "sha384", "sha384"
    ),
}


def suite_name(suite_id: int) -> str:
    suite = SUITES.get(suite_id)
    return suite.name if suite else f"0x{suite_id:04X}"


def version_name(version: int) -> str:
    return VERSIONS.get(version, f"0x{version:04X}")


# NSS key log labels (https://www.ietf.org/archive/id/draft-ietf-tls-keylogfile-02.html)
CLIENT_RANDOM = "CLIENT_RANDOM"  # TLS 1.2 and earlier: the master secret
CLIENT_HANDSHAKE_TRAFFIC_SECRET = "CLIENT_HANDSHAKE_TRAFFIC_SECRET"
SERVER_HANDSHAKE_TRAFFIC_SECRET = "SERVER_HANDSHAKE_TRAFFIC_SECRET"
CLIENT_TRAFFIC_SECRET_0 = "CLIENT_TRAFFIC_SECRET_0"
SERVER_TRAFFIC_SECRET_0 = "SERVER_TRAFFIC_SECRET_0"
KEYLOG_LABELS = frozenset(
    {
        CLIENT_RANDOM,
        "CLIENT_EARLY_TRAFFIC_SECRET",
        CLIENT_HANDSHAKE_TRAFFIC_SECRET,
        SERVER_HANDSHAKE_TRAFFIC_SECRET,
        CLIENT_TRAFFIC_SECRET_0,
        SERVER_TRAFFIC_SECRET_0,
        "EARLY_EXPORTER_SECRET",
        "EXPORTER_SECRET",
    }
)
