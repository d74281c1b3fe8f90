"""TLS secrets in the NSS key log format (`SSLKEYLOGFILE`), as text: parsing only, no files.

Each line is `LABEL <client random, hex> <secret, hex>`; `#` starts a comment. TLS 1.2 and
earlier log `CLIENT_RANDOM` (the master secret); TLS 1.3 logs the handshake and application
traffic secrets. Lines are found by (label, client random): the ClientHello's random says which
lines decrypt a connection. The same text comes from `--keylog FILE`, `SSLKEYLOGFILE` and pcapng
Decryption Secrets Blocks; the reading of files is the caller's (capture/, cli).
"""

from __future__ import annotations

from collections.abc import Callable

from amqpscope.codec.tls.spec import KEYLOG_LABELS

#: a secret longer than this is not one (SHA-384 output is 48 bytes)
MAX_SECRET = 64


class KeyLog:
    """Secrets by (label, client random). `refresh`, when set, is called on a miss (a file that
    grows while a live capture runs) and may add lines with `add_text`."""

    def __init__(self, text: str = "") -> None:
        self.secrets: dict[tuple[str, bytes], bytes] = {}
        self.bad_lines = 0  # lines that are not comments and not key log entries
        self.refresh: Callable[[], None] | None = None
        if text:
            self.add_text(text)

    def __len__(self) -> int:
        return len(self.secrets)

    def add_text(self, text: str) -> int:
        """Add every entry in `text`; returns how many were read."""
        added = 0
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) != 3 or parts[0] not in KEYLOG_LABELS:
                self.bad_lines += 1
                continue
            try:
                random = bytes.fromhex(parts[1])
                secret = bytes.fromhex(parts[2])
            except ValueError:
                self.bad_lines += 1
                continue
            if len(random) != 32 or not 0 < len(secret) <= MAX_SECRET:
                self.bad_lines += 1
                continue
            self.secrets[(parts[0], random)] = secret
            added += 1
        return added

    def add_bytes(self, data: bytes) -> int:
        """Add the entries of key log bytes (a pcapng DSB's payload, for one)."""
        return self.add_text(data.decode("ascii", errors="replace"))

    def get(self, label: str, client_random: bytes) -> bytes | None:
        secret = self.secrets.get((label, client_random))
        if secret is None and self.refresh is not None:
            self.refresh()
            secret = self.secrets.get((label, client_random))
        return secret

    def randoms(self) -> set[bytes]:
        return {random for _, random in self.secrets}
