"""Record protection, undone: one direction's decryptor for TLS 1.3 and TLS 1.2 records.

TLS 1.3 (RFC 8446 5.2-5.3): AEAD over the whole record; nonce = IV xor the 64-bit sequence
number; additional data = the 5-byte record header; the plaintext ends with its real content type
and zero padding. TLS 1.2 AEAD (RFC 5288 3, RFC 7905 2): GCM's nonce is the 4-byte salt and an
8-byte explicit nonce sent in the record, ChaCha20-Poly1305's the IV xor the sequence number;
additional data = sequence number, type, version, plaintext length. TLS 1.2 CBC (RFC 5246 6.2.3.2):
an explicit IV per record, padding, and an HMAC over sequence number, header and content (or over
the ciphertext, with encrypt-then-mac, RFC 7366). Every cipher is `cryptography`'s.

A failed tag or MAC raises `BadRecord`: with a wrong key every record fails, never garbage.
"""

from __future__ import annotations

import hmac
import struct

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESCCM, AESGCM, ChaCha20Poly1305

from amqpscope.codec.tls.keys import HASH_LEN, Keys
from amqpscope.codec.tls.spec import Suite

_SEQ = struct.Struct(">Q")
_AAD12 = struct.Struct(">QBHH")
AES_BLOCK = 16


class BadRecord(Exception):
    """A record that does not decrypt (wrong key, wrong sequence number, damage)."""


def _aead(suite: Suite, key: bytes):
    if suite.cipher == "aes-gcm":
        return AESGCM(key)
    if suite.cipher == "chacha20-poly1305":
        return ChaCha20Poly1305(key)
    if suite.cipher == "aes-ccm":
        return AESCCM(key, tag_length=suite.tag_len)
    raise ValueError(f"not an AEAD: {suite.cipher}")


def _xor_nonce(iv: bytes, seq: int) -> bytes:
    padded = bytes(len(iv) - 8) + _SEQ.pack(seq)
    return bytes(a ^ b for a, b in zip(iv, padded, strict=True))


class Decryptor:
    """One direction's record decryption under one key; counts its sequence number."""

    def __init__(self, suite: Suite, keys: Keys, tls13: bool, encrypt_then_mac: bool = False):
        self.suite = suite
        self.keys = keys
        self.tls13 = tls13
        self.etm = encrypt_then_mac
        self.seq = 0
        self.aead = None if suite.cipher == "aes-cbc" else _aead(suite, keys.key)

    def decrypt(self, header: bytes, body: bytes) -> tuple[int, bytes]:
        """(content type, plaintext) of the record `header` (5 bytes) + `body`. The sequence
        number advances only when the record decrypts."""
        if self.tls13:
            out = self._tls13(header, body)
        elif self.aead is not None:
            out = self._aead12(header, body)
        else:
            out = self._cbc12(header, body)
        self.seq += 1
        return out

    def _tls13(self, header: bytes, body: bytes) -> tuple[int, bytes]:
        try:
            aead = self.aead
            assert aead is not None  # every TLS 1.3 suite is an AEAD
            plain = aead.decrypt(_xor_nonce(self.keys.iv, self.seq), body, header)
        except InvalidTag:
            raise BadRecord("authentication tag does not match") from None
        end = len(plain)
        while end and plain[end - 1] == 0:
            end -= 1
        if not end:
            raise BadRecord("a record with no content type")
        return plain[end - 1], plain[: end - 1]

    def _aead12(self, header: bytes, body: bytes) -> tuple[int, bytes]:
        content_type, version = header[0], int.from_bytes(header[1:3], "big")
        if self.suite.cipher == "aes-gcm":
            if len(body) < 8 + self.suite.tag_len:
                raise BadRecord("record shorter than its nonce and tag")
            nonce, body = self.keys.iv + body[:8], body[8:]
        else:
            nonce = _xor_nonce(self.keys.iv, self.seq)
        length = len(body) - self.suite.tag_len
        if length < 0:
            raise BadRecord("record shorter than its tag")
        aad = _AAD12.pack(self.seq, content_type, version, length)
        aead = self.aead
        assert aead is not None  # decrypt() comes here only with an AEAD
        try:
            return content_type, aead.decrypt(nonce, body, aad)
        except InvalidTag:
            raise BadRecord("authentication tag does not match") from None

    def _cbc12(self, header: bytes, body: bytes) -> tuple[int, bytes]:
        content_type, version = header[0], int.from_bytes(header[1:3], "big")
        mac_len = HASH_LEN[self.suite.mac]
        mac_key = self.keys.mac_key
        if self.etm:  # encrypt-then-mac: the MAC covers IV and ciphertext
            if len(body) < mac_len + 2 * AES_BLOCK:
                raise BadRecord("record shorter than IV, a block and the MAC")
            body, tag = body[:-mac_len], body[-mac_len:]
            signed = _AAD12.pack(self.seq, content_type, version, len(body)) + body
            if not hmac.compare_digest(hmac.new(mac_key, signed, self.suite.mac).digest(), tag):
                raise BadRecord("MAC does not match")
        if len(body) < 2 * AES_BLOCK or len(body) % AES_BLOCK:
            raise BadRecord("CBC record is not whole blocks")
        iv, body = body[:AES_BLOCK], body[AES_BLOCK:]
        decryptor = Cipher(algorithms.AES(self.keys.key), modes.CBC(iv)).decryptor()
        plain = decryptor.update(body) + decryptor.finalize()
        pad = plain[-1]
        if pad + 1 > len(plain) or plain[-pad - 1 :] != bytes([pad]) * (pad + 1):
            raise BadRecord("CBC padding is malformed")
        plain = plain[: -pad - 1]
        if self.etm:
            return content_type, plain
        if len(plain) < mac_len:
            raise BadRecord("record shorter than its MAC")
        plain, tag = plain[:-mac_len], plain[-mac_len:]
        signed = _AAD12.pack(self.seq, content_type, version, len(plain)) + plain
        if not hmac.compare_digest(hmac.new(mac_key, signed, self.suite.mac).digest(), tag):
            raise BadRecord("MAC does not match")
        return content_type, plain
