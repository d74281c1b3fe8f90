"""The handshake messages that say what a TLS connection is: ClientHello, ServerHello and
EncryptedExtensions (RFC 8446 4.1.2, 4.1.3, 4.3.1; RFC 5246 7.4.1): versions, random values,
cipher suites, SNI (RFC 6066 3), ALPN (RFC 7301), encrypt-then-mac (RFC 7366)."""

from __future__ import annotations

from dataclasses import dataclass, field

from amqpscope.codec.tls import spec


class Malformed(Exception):
    """A handshake message shorter than its fields say."""


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, count: int) -> bytes:
        if self.pos + count > len(self.data):
            raise Malformed(f"needs {count} bytes at {self.pos}, has {len(self.data) - self.pos}")
        out = self.data[self.pos : self.pos + count]
        self.pos += count
        return out

    def uint(self, size: int) -> int:
        return int.from_bytes(self.take(size), "big")

    def vector(self, size: int) -> bytes:
        return self.take(self.uint(size))

    def left(self) -> int:
        return len(self.data) - self.pos


def _extensions(reader: _Reader) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    if not reader.left():
        return out
    body = _Reader(reader.vector(2))
    while body.left():
        kind = body.uint(2)
        out[kind] = body.vector(2)
    return out


def _alpn(data: bytes) -> list[str]:
    names = _Reader(_Reader(data).vector(2))
    out = []
    while names.left():
        out.append(names.vector(1).decode("ascii", errors="replace"))
    return out


def _sni(data: bytes) -> str | None:
    names = _Reader(_Reader(data).vector(2))
    while names.left():
        kind = names.uint(1)
        name = names.vector(2)
        if kind == 0:  # host_name
            return name.decode("ascii", errors="replace")
    return None


@dataclass
class ClientHello:
    random: bytes
    suites: list[int]
    sni: str | None = None
    alpn: list[str] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)


@dataclass
class ServerHello:
    random: bytes
    version: int  # the negotiated one (supported_versions in 1.3)
    suite: int
    alpn: list[str] = field(default_factory=list)
    encrypt_then_mac: bool = False

    @property
    def retry(self) -> bool:
        """A HelloRetryRequest: the client will send a second ClientHello."""
        return self.random == spec.HELLO_RETRY_RANDOM


def client_hello(body: bytes) -> ClientHello:
    reader = _Reader(body)
    reader.take(2)  # legacy_version
    random = reader.take(32)
    reader.vector(1)  # legacy_session_id
    raw_suites = reader.vector(2)
    suites = [int.from_bytes(raw_suites[i : i + 2], "big") for i in range(0, len(raw_suites), 2)]
    reader.vector(1)  # legacy_compression_methods
    hello = ClientHello(random, suites)
    extensions = _extensions(reader)
    if extensions.get(spec.EXT_SERVER_NAME):
        hello.sni = _sni(extensions[spec.EXT_SERVER_NAME])
    if spec.EXT_ALPN in extensions:
        hello.alpn = _alpn(extensions[spec.EXT_ALPN])
    if spec.EXT_SUPPORTED_VERSIONS in extensions:
        raw = _Reader(extensions[spec.EXT_SUPPORTED_VERSIONS]).vector(1)
        hello.versions = [int.from_bytes(raw[i : i + 2], "big") for i in range(0, len(raw), 2)]
    return hello


def server_hello(body: bytes) -> ServerHello:
    reader = _Reader(body)
    version = reader.uint(2)
    random = reader.take(32)
    reader.vector(1)  # legacy_session_id_echo
    suite = reader.uint(2)
    reader.uint(1)  # legacy_compression_method
    extensions = _extensions(reader)
    if spec.EXT_SUPPORTED_VERSIONS in extensions:
        version = int.from_bytes(extensions[spec.EXT_SUPPORTED_VERSIONS][:2], "big")
    hello = ServerHello(random, version, suite)
    if spec.EXT_ALPN in extensions:
        hello.alpn = _alpn(extensions[spec.EXT_ALPN])
    hello.encrypt_then_mac = spec.EXT_ENCRYPT_THEN_MAC in extensions
    return hello


def encrypted_extensions_alpn(body: bytes) -> list[str]:
    """The ALPN protocol a TLS 1.3 server chose (it travels in EncryptedExtensions)."""
    extensions = _extensions(_Reader(body))
    return _alpn(extensions[spec.EXT_ALPN]) if spec.EXT_ALPN in extensions else []


def messages(buf: bytearray) -> list[tuple[int, bytes]]:
    """Take the whole handshake messages off the front of `buf`: (type, body) each."""
    out = []
    pos = 0
    while len(buf) - pos >= 4:
        length = int.from_bytes(buf[pos + 1 : pos + 4], "big")
        if len(buf) - pos - 4 < length:
            break
        out.append((buf[pos], bytes(buf[pos + 4 : pos + 4 + length])))
        pos += 4 + length
    del buf[:pos]
    return out
