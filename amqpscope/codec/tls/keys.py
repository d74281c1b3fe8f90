"""Record keys from logged secrets: TLS 1.3's HKDF key schedule and TLS 1.2's PRF key block.

TLS 1.3 (RFC 8446 7.1-7.3): a traffic secret gives its record key and IV by HKDF-Expand-Label
("key", "iv"); a KeyUpdate replaces the secret by HKDF-Expand-Label(secret, "traffic upd").
TLS 1.2 (RFC 5246 5, 6.3): the master secret and both randoms give the key block (MAC keys, then
encryption keys, then IVs) through the PRF, P_hash of the suite's hash. Only HMAC is used here
(the standard library's); the ciphers themselves are `cryptography`'s, in `records.py`.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import NamedTuple

from amqpscope.codec.tls.spec import Suite

HASH_LEN = {"sha256": 32, "sha384": 48, "sha1": 20}
#: AEAD IV lengths: TLS 1.3 and ChaCha20 use 12 bytes; TLS 1.2 GCM a 4-byte implicit salt
AEAD_IV = 12
GCM12_SALT = 4


def hkdf_expand_label(secret: bytes, label: str, context: bytes, length: int, hash_: str) -> bytes:
    """HKDF-Expand-Label (RFC 8446 7.1): HKDF-Expand(secret, HkdfLabel, length)."""
    full = b"tls13 " + label.encode("ascii")
    info = length.to_bytes(2, "big") + bytes([len(full)]) + full + bytes([len(context)]) + context
    return hkdf_expand(secret, info, length, hash_)


def hkdf_expand(prk: bytes, info: bytes, length: int, hash_: str) -> bytes:
    """HKDF-Expand (RFC 5869 2.3)."""
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hash_).digest()
        out += block
        counter += 1
    return out[:length]


def hkdf_extract(salt: bytes, ikm: bytes, hash_: str) -> bytes:
    """HKDF-Extract (RFC 5869 2.2); used by the tests that walk RFC 8448's schedule."""
    return hmac.new(salt or bytes(HASH_LEN[hash_]), ikm, hash_).digest()


def derive_secret(secret: bytes, label: str, transcript: bytes, hash_: str) -> bytes:
    """Derive-Secret (RFC 8446 7.1) over the transcript's messages."""
    digest = hashlib.new(hash_, transcript).digest()
    return hkdf_expand_label(secret, label, digest, HASH_LEN[hash_], hash_)


class Keys(NamedTuple):
    """One direction's record protection: encryption key, IV (or salt), MAC key (CBC)."""

    key: bytes
    iv: bytes
    mac_key: bytes = b""


def tls13_keys(secret: bytes, suite: Suite) -> Keys:
    """The record key and IV of a TLS 1.3 traffic secret (RFC 8446 7.3)."""
    key = hkdf_expand_label(secret, "key", b"", suite.key_len, suite.hash)
    iv = hkdf_expand_label(secret, "iv", b"", AEAD_IV, suite.hash)
    return Keys(key, iv)


def tls13_next_secret(secret: bytes, suite: Suite) -> bytes:
    """The traffic secret after a KeyUpdate (RFC 8446 7.2)."""
    return hkdf_expand_label(secret, "traffic upd", b"", HASH_LEN[suite.hash], suite.hash)


def prf(secret: bytes, label: bytes, seed: bytes, length: int, hash_: str) -> bytes:
    """The TLS 1.2 PRF (RFC 5246 5): P_hash(secret, label + seed)."""
    seed = label + seed
    out, a = b"", seed
    while len(out) < length:
        a = hmac.new(secret, a, hash_).digest()
        out += hmac.new(secret, a + seed, hash_).digest()
    return out[:length]


def tls12_keys(
    master: bytes, client_random: bytes, server_random: bytes, suite: Suite
) -> tuple[Keys, Keys]:
    """Client and server record keys from a TLS 1.2 master secret (RFC 5246 6.3)."""
    mac_len = HASH_LEN[suite.mac] if suite.cipher == "aes-cbc" else 0
    if suite.cipher == "aes-cbc":
        iv_len = 0  # TLS 1.1+: every CBC record carries its IV
    elif suite.cipher == "aes-gcm":
        iv_len = GCM12_SALT
    else:
        iv_len = AEAD_IV
    size = 2 * (mac_len + suite.key_len + iv_len)
    block = prf(master, b"key expansion", server_random + client_random, size, suite.hash)
    parts = []
    pos = 0
    for length in (mac_len, mac_len, suite.key_len, suite.key_len, iv_len, iv_len):
        parts.append(block[pos : pos + length])
        pos += length
    client_mac, server_mac, client_key, server_key, client_iv, server_iv = parts
    return Keys(client_key, client_iv, client_mac), Keys(server_key, server_iv, server_mac)
