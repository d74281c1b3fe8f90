"""The TLS layer: one connection's TLS records in, its application data out (when keys allow).

Rules, per connection (both directions in one object, since keys need both hellos):

- Records are split by their 5-byte header; one that cannot be a record (unknown type, a version
  not 3.x, a length beyond 2^14 + 2048) ends decoding of that direction with `tls.bad-record`.
- Plaintext handshake records are parsed for the ClientHello (client random, SNI, ALPN, offered
  versions) and the ServerHello (version, cipher suite, ALPN, encrypt-then-mac); a
  HelloRetryRequest waits for the second ClientHello.
- TLS 1.3: after the ServerHello every record is encrypted. Each direction starts in its
  handshake epoch (`*_HANDSHAKE_TRAFFIC_SECRET`) and moves to its application epoch
  (`*_TRAFFIC_SECRET_0`) after its Finished; without handshake secrets the first record that
  opens under the application key moves it. A KeyUpdate steps that direction's secret.
- TLS 1.2: a direction's ChangeCipherSpec starts its encryption; the keys come from the
  `CLIENT_RANDOM` master secret and both randoms.
- No secret for the connection: `tls.no-key` (once), naming the key log line that would decrypt
  it; the encrypted bytes are dropped. A secret that does not open the records: `tls.wrong-key`,
  and nothing of that direction is handed on (never garbage). A record that fails after others
  opened: `tls.decrypt-failed` (damage), and the direction stops. A key that turns up later
  (a key log written during a live capture) decrypts from there on.
- Bytes lost (`gap`): the next record the key opens, at one of the sequence numbers the loss
  allows, is where decryption resumes.
"""

from __future__ import annotations

from typing import Any

from amqpscope.codec.tls import hello, keys, spec
from amqpscope.codec.tls.keylog import KeyLog
from amqpscope.codec.tls.records import BadRecord, Decryptor
from amqpscope.findings import Finding, finding
from amqpscope.stream.events import C2S

#: sequence numbers tried after a gap (records lost in it; beyond, decryption stops)
MAX_RESYNC = 4096
#: handshake bytes kept while a message is incomplete (certificate chains fit easily)
MAX_HANDSHAKE = 1 << 20
PLAIN, HANDSHAKE, APPLICATION, STOPPED = "plain", "handshake", "application", "stopped"


class _Side:
    """One direction: its record buffer, handshake buffer, epoch and decryptor."""

    __slots__ = (
        "buf",
        "decryptor",
        "epoch",
        "handshake",
        "lost",
        "opened",
        "secret",
        "skipped",
        "update",
    )

    def __init__(self) -> None:
        self.buf = bytearray()
        self.handshake = bytearray()
        self.epoch = PLAIN
        self.decryptor: Decryptor | None = None
        self.secret = b""  # TLS 1.3: the current application traffic secret
        self.opened = 0  # records decrypted
        self.skipped = 0  # encrypted records gone by while its key was missing
        self.lost = -1  # after a gap: how many records may be gone (-1: no gap to recover from)
        self.update = False  # a KeyUpdate was read: step the secret after this record


class TlsLayer:
    """The `Layer` for TLS (see `codec/layers.py`)."""

    name = "tls"

    def __init__(self, keylog: KeyLog | None = None) -> None:
        self.keylog = keylog
        self.findings: list[Finding] = []
        self.sides = {C2S: _Side(), "s2c": _Side()}
        self.client: hello.ClientHello | None = None
        self.server: hello.ServerHello | None = None
        self.alpn: list[str] = []
        self.alerts: list[str] = []
        self.records = 0
        self.no_key = False
        self.wrong_key = False

    # -- the Layer interface -----------------------------------------------------------------------
    def data(self, direction: str, data: bytes) -> bytes:
        side = self.sides[direction]
        if side.epoch == STOPPED:
            return b""
        side.buf += data
        if side.lost >= 0 and not self._resync(direction, side):
            return b""
        out = bytearray()
        buf = side.buf
        pos = 0
        while len(buf) - pos >= 5:
            content_type = buf[pos]
            length = int.from_bytes(buf[pos + 3 : pos + 5], "big")
            if (
                content_type not in spec.CONTENT_TYPES
                or buf[pos + 1] != 3
                or length > spec.MAX_RECORD
            ):
                self._stop(
                    side,
                    "tls.bad-record",
                    f"{direction}: bytes at a record boundary are "
                    f"not a TLS record ({bytes(buf[pos : pos + 5]).hex()})",
                )
                return bytes(out)
            if len(buf) - pos - 5 < length:
                break
            header = bytes(buf[pos : pos + 5])
            body = bytes(buf[pos + 5 : pos + 5 + length])
            pos += 5 + length
            self.records += 1
            out += self._record(direction, side, header, body)
            if side.epoch == STOPPED:
                return bytes(out)
        del buf[:pos]
        return bytes(out)

    def gap(self, direction: str, missing: int) -> None:
        """`missing` bytes of `direction` were not captured: the record they cut is gone, and
        maybe whole records. Decryption resumes at the next record the key opens at one of the
        sequence numbers the loss allows (`_resync`); a handshake cut short stops it."""
        side = self.sides[direction]
        side.buf.clear()
        decryptor = side.decryptor
        if side.epoch != APPLICATION or decryptor is None or isinstance(decryptor, _Probe):
            self._stop(side, "tls.decrypt-failed", f"{direction}: bytes lost in the handshake")
            return
        # every record is at least 5 bytes of header and 17 of tag and type
        side.lost = min(missing // 22 + 1, MAX_RESYNC)

    def _resync(self, direction: str, side: _Side) -> bool:
        """After a gap: find the next record boundary in the buffer (a header a key opens);
        True once found (the buffer then starts there)."""
        buf = side.buf
        decryptor = side.decryptor
        assert decryptor is not None
        for pos in range(max(0, len(buf) - 4)):
            if buf[pos] not in (spec.APPLICATION_DATA, spec.ALERT, spec.HANDSHAKE):
                continue
            if buf[pos + 1] != 3 or buf[pos + 2] > 4:
                continue
            length = int.from_bytes(buf[pos + 3 : pos + 5], "big")
            if length > spec.MAX_RECORD or len(buf) - pos - 5 < length:
                continue
            header, body = bytes(buf[pos : pos + 5]), bytes(buf[pos + 5 : pos + 5 + length])
            first = decryptor.seq
            for seq in range(first, first + side.lost + 1):
                decryptor.seq = seq
                try:
                    decryptor.decrypt(header, body)
                except BadRecord:
                    continue
                decryptor.seq = seq  # opened: decrypt it again in order, from `data`
                side.lost = -1
                del buf[:pos]
                return True
            decryptor.seq = first
        if len(buf) > 4 * spec.MAX_RECORD:  # no record opens: the key has lost its place
            self._stop(side, "tls.decrypt-failed", f"{direction}: no record opens after a gap")
        return False

    def info(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.server is not None and not self.server.retry:
            out["version"] = spec.version_name(self.server.version)
            out["cipher-suite"] = spec.suite_name(self.server.suite)
        elif self.client is not None:
            offered = self.client.versions or []
            out["version"] = "unknown"
            out["offered-versions"] = [spec.version_name(v) for v in offered]
        if self.client is not None:
            if self.client.sni is not None:
                out["sni"] = self.client.sni
            out["client-random"] = self.client.random.hex()
            out["key-log-line"] = f"{self._label()} {self.client.random.hex()}"
        if self.alpn:
            out["alpn"] = self.alpn[0]
        elif self.client is not None and self.client.alpn:
            out["alpn-offered"] = self.client.alpn
        out["decrypted"] = any(side.opened for side in self.sides.values())
        if self.alerts:
            out["alerts"] = self.alerts
        return out

    # -- records -------------------------------------------------------------------------------
    def _record(self, direction: str, side: _Side, header: bytes, body: bytes) -> bytes:
        content_type = header[0]
        if side.epoch == PLAIN:
            if content_type == spec.HANDSHAKE:
                self._handshake(direction, side, body)
                return b""
            if content_type == spec.CHANGE_CIPHER_SPEC:
                if self._tls13() is False:
                    side.epoch = APPLICATION  # TLS 1.2: this direction's next record is encrypted
                return b""  # TLS 1.3: a middlebox-compatibility no-op
            if content_type == spec.ALERT:
                self._alert(body)
                return b""
            if self._tls13():  # the first encrypted record of this direction
                side.epoch = HANDSHAKE
            else:
                return b""  # application data before any handshake: cannot be decrypted
        if content_type == spec.CHANGE_CIPHER_SPEC:
            return b""
        return self._encrypted(direction, side, header, body)

    def _encrypted(self, direction: str, side: _Side, header: bytes, body: bytes) -> bytes:
        if side.decryptor is None and not self._keys(direction, side):
            side.skipped += 1  # the key may turn up later (a key log written while capturing)
            return b""
        decryptor = side.decryptor
        assert decryptor is not None
        try:
            content_type, plain = decryptor.decrypt(header, body)
        except BadRecord as exc:
            if self._tls13() and side.epoch == HANDSHAKE and self._to_application(direction, side):
                return self._encrypted(direction, side, header, body)
            if side.opened:
                self._stop(
                    side,
                    "tls.decrypt-failed",
                    f"{direction}: a record after "
                    f"{side.opened} good ones does not decrypt ({exc}): damage or loss",
                )
            else:
                self._wrong_key(direction, side, str(exc))
            return b""
        if content_type == spec.CHANGE_CIPHER_SPEC and not plain:
            return b""  # a handshake record skipped by `_Probe`
        side.opened += 1
        if content_type == spec.APPLICATION_DATA:
            return plain
        if content_type == spec.HANDSHAKE:
            self._handshake(direction, side, plain)
            if side.update:
                side.update = False
                suite = self._suite()
                assert suite is not None  # this record decrypted under keys made with it
                side.secret = keys.tls13_next_secret(side.secret, suite)
                side.decryptor = Decryptor(suite, keys.tls13_keys(side.secret, suite), True)
        elif content_type == spec.ALERT:
            self._alert(plain)
        return b""

    def _keys(self, direction: str, side: _Side) -> bool:
        """Make `side`'s decryptor for its epoch; False (and a finding) when it cannot be."""
        suite = self._suite()
        if self.client is None or self.server is None or suite is None:
            if self.server is not None and suite is None:
                self._unsupported(side, f"cipher suite {spec.suite_name(self.server.suite)}")
            return False
        random = self.client.random
        if self._tls13() and side.skipped:
            # the key came late: find this direction's place in its application records
            return self._to_application(direction, side, probe=True)
        if self._tls13():
            label = {
                (C2S, HANDSHAKE): spec.CLIENT_HANDSHAKE_TRAFFIC_SECRET,
                ("s2c", HANDSHAKE): spec.SERVER_HANDSHAKE_TRAFFIC_SECRET,
                (C2S, APPLICATION): spec.CLIENT_TRAFFIC_SECRET_0,
                ("s2c", APPLICATION): spec.SERVER_TRAFFIC_SECRET_0,
            }[(direction, side.epoch)]
            secret = self._secret(label)
            if secret is None and side.epoch == HANDSHAKE:
                # no handshake secrets: wait for the first record the application key opens
                return self._to_application(direction, side, probe=True)
            if secret is None:
                self._missing(side)
                return False
            if side.epoch == APPLICATION:
                side.secret = secret
            side.decryptor = Decryptor(suite, keys.tls13_keys(secret, suite), True)
            return True
        if self.server.version != spec.TLS12:
            self._unsupported(side, spec.version_name(self.server.version))
            return False
        master = self._secret(spec.CLIENT_RANDOM)
        if master is None:
            self._missing(side)
            return False
        client_keys, server_keys = keys.tls12_keys(master, random, self.server.random, suite)
        side.decryptor = Decryptor(
            suite,
            client_keys if direction == C2S else server_keys,
            False,
            self.server.encrypt_then_mac,
        )
        side.decryptor.seq = side.skipped  # every record since ChangeCipherSpec counts
        return True

    def _to_application(self, direction: str, side: _Side, probe: bool = False) -> bool:
        """TLS 1.3 without (working) handshake secrets: try the application key from sequence 0;
        with `probe`, a direction whose record does not open under it stays in its handshake."""
        secret = self._secret(
            spec.CLIENT_TRAFFIC_SECRET_0 if direction == C2S else spec.SERVER_TRAFFIC_SECRET_0
        )
        suite = self._suite()
        if secret is None or suite is None or side.epoch != HANDSHAKE:
            if secret is None and probe:
                self._missing(side)
            return False
        if probe:
            side.decryptor = _Probe(suite, secret, side, side.skipped)
            return True
        side.epoch = APPLICATION
        side.secret = secret
        side.decryptor = Decryptor(suite, keys.tls13_keys(secret, suite), True)
        return True

    # -- handshake ---------------------------------------------------------------------------------
    def _handshake(self, direction: str, side: _Side, data: bytes) -> None:
        side.handshake += data
        if len(side.handshake) > MAX_HANDSHAKE:
            side.handshake.clear()
            self.findings.append(
                finding("tls.bad-handshake", f"{direction}: a handshake message beyond 1 MiB")
            )
            return
        for kind, body in hello.messages(side.handshake):
            try:
                self._message(direction, side, kind, body)
            except hello.Malformed as exc:
                self.findings.append(
                    finding("tls.bad-handshake", f"{direction}: handshake type {kind}: {exc}")
                )

    def _message(self, direction: str, side: _Side, kind: int, body: bytes) -> None:
        if kind == spec.CLIENT_HELLO and direction == C2S:
            self.client = hello.client_hello(body)
        elif kind == spec.SERVER_HELLO and direction != C2S:
            self.server = hello.server_hello(body)
            if self.server.alpn:
                self.alpn = self.server.alpn
            if not self.server.retry and self._suite() is None:
                self._unsupported(side, f"cipher suite {spec.suite_name(self.server.suite)}")
        elif kind == spec.ENCRYPTED_EXTENSIONS:
            self.alpn = hello.encrypted_extensions_alpn(body) or self.alpn
        elif kind == spec.FINISHED and self._tls13() and side.epoch == HANDSHAKE:
            side.epoch = APPLICATION  # the next record is under the application secret
            side.decryptor = None
            side.handshake.clear()
        elif kind == spec.KEY_UPDATE and side.epoch == APPLICATION:
            side.update = True

    def _alert(self, body: bytes) -> None:
        if len(body) >= 2:
            name = spec.ALERTS.get(body[1], str(body[1]))
            self.alerts.append(name)
            if body[1] != 0:
                self.findings.append(finding("tls.alert", f"TLS alert {name}"))

    # -- what the layer knows ----------------------------------------------------------------------
    def _tls13(self) -> bool | None:
        """True / False once the ServerHello said; None before."""
        if self.server is None or self.server.retry:
            return None
        return self.server.version == spec.TLS13

    def _suite(self) -> spec.Suite | None:
        if self.server is None:
            return None
        suite = spec.SUITES.get(self.server.suite)
        if suite is None or suite.tls13 != bool(self._tls13()):
            return None
        return suite

    def _label(self) -> str:
        return spec.CLIENT_TRAFFIC_SECRET_0 if self._tls13() else spec.CLIENT_RANDOM

    def _secret(self, label: str) -> bytes | None:
        if self.keylog is None or self.client is None:
            return None
        return self.keylog.get(label, self.client.random)

    # -- findings ----------------------------------------------------------------------------
    def _missing(self, side: _Side) -> None:
        """No secret (yet): said once; the records are counted, and looked up again each time."""
        if self.no_key:
            return
        self.no_key = True
        random = self.client.random.hex() if self.client else "?"
        self.findings.append(
            finding(
                "tls.no-key",
                f"encrypted; a key log line `{self._label()} {random} ...` would decrypt it "
                "(--keylog FILE, SSLKEYLOGFILE, or secrets in the pcapng)",
            )
        )

    def _wrong_key(self, direction: str, side: _Side, why: str) -> None:
        side.epoch = STOPPED
        if self.wrong_key:
            return
        self.wrong_key = True
        random = self.client.random.hex() if self.client else "?"
        self.findings.append(
            finding(
                "tls.wrong-key",
                f"the key log's secret for client random {random} does not decrypt the "
                f"{direction} records ({why})",
            )
        )

    def _unsupported(self, side: _Side, what: str) -> None:
        side.epoch = STOPPED
        if any(f.code == "tls.unsupported" for f in self.findings):
            return
        self.findings.append(finding("tls.unsupported", f"{what} is not decrypted"))

    def _stop(self, side: _Side, code: str, why: str) -> None:
        side.epoch = STOPPED
        side.buf.clear()
        self.findings.append(finding(code, why))


class _Probe(Decryptor):
    """TLS 1.3 without handshake secrets, or with a key that came late: each record is tried
    under the application key, at every sequence number the records gone by allow (0 ..
    `behind`); the first that opens moves the direction to its application epoch. Records that
    open at none are the encrypted handshake, skipped."""

    def __init__(self, suite: spec.Suite, secret: bytes, side: _Side, behind: int = 0) -> None:
        super().__init__(suite, keys.tls13_keys(secret, suite), True)
        self.secret = secret
        self.side = side
        self.behind = behind
        self.tried = 0

    def decrypt(self, header: bytes, body: bytes) -> tuple[int, bytes]:
        for seq in range(self.behind + 1):
            self.seq = seq
            try:
                out = super().decrypt(header, body)
            except BadRecord:
                continue
            side = self.side
            side.epoch = APPLICATION
            side.secret = self.secret
            side.decryptor = Decryptor(self.suite, self.keys, True)
            side.decryptor.seq = self.seq
            return out
        self.tried += 1
        if self.tried > 8:  # a handshake is a few records: this key is wrong
            raise BadRecord("authentication tag does not match at any sequence number")
        return spec.CHANGE_CIPHER_SPEC, b""  # skipped (not counted as opened)
