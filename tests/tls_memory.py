"""Real TLS from OpenSSL (Python's ssl) in memory, for tests: no sockets, no broker.

A client and a server `SSLObject` are wired back to back through `MemoryBIO`s; the handshake and
the application bytes given are pumped across, and every chunk each side wrote is kept, with the
key log OpenSSL wrote (`keylog_filename`). OpenSSL is the independent oracle: amqpscope must
recover the application bytes from the chunks and the key log alone.

TLS 1.3 cipher suites cannot be chosen through Python's ssl API, so `converse()` runs this file
in a subprocess with an `OPENSSL_CONF` that sets them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import ssl
import subprocess
import sys
import tempfile
from pathlib import Path

#: OpenSSL's SSL_OP_NO_ENCRYPT_THEN_MAC (not exported by Python's ssl)
OP_NO_ENCRYPT_THEN_MAC = 1 << 19


def make_certificate(directory: Path, name: str = "localhost") -> tuple[Path, Path]:
    """A self-signed certificate and its key for `name`, written as PEM files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=3650))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def _pump(
    client: ssl.SSLObject,
    server: ssl.SSLObject,
    bios: dict[str, tuple[ssl.MemoryBIO, ssl.MemoryBIO]],
    writes: list[tuple[str, bytes]],
) -> None:
    """Move bytes both ways until neither side has anything to send."""
    moved = True
    while moved:
        moved = False
        for side in (client, server):
            with contextlib.suppress(ssl.SSLWantReadError):
                side.do_handshake()
        for direction, (outgoing, incoming) in bios.items():
            data = outgoing.read()
            if data:
                writes.append((direction, data))
                incoming.write(data)
                moved = True


def _run(
    version: str,
    cipher: str | None,
    etm: bool,
    plain: list[tuple[str, bytes]],
    server_name: str = "localhost",
) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cert, key = make_certificate(Path(tmp))
        keylog = Path(tmp) / "keys.txt"
        server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_ctx.load_cert_chain(cert, key)
        client_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        client_ctx.load_verify_locations(cert)
        client_ctx.keylog_filename = str(keylog)
        tls = ssl.TLSVersion.TLSv1_3 if version == "1.3" else ssl.TLSVersion.TLSv1_2
        for ctx in (client_ctx, server_ctx):
            ctx.minimum_version = ctx.maximum_version = tls
            if cipher and version == "1.2":
                ctx.set_ciphers(cipher)
            if not etm:
                ctx.options |= OP_NO_ENCRYPT_THEN_MAC
        c2s, s2c = ssl.MemoryBIO(), ssl.MemoryBIO()
        client_in, server_in = ssl.MemoryBIO(), ssl.MemoryBIO()
        client_ctx.check_hostname = server_name == "localhost"
        client = client_ctx.wrap_bio(client_in, c2s, server_hostname=server_name)
        server = server_ctx.wrap_bio(server_in, s2c, server_side=True)
        bios = {"c2s": (c2s, server_in), "s2c": (s2c, client_in)}
        writes: list[tuple[str, bytes]] = []
        _pump(client, server, bios, writes)
        received = {"c2s": b"", "s2c": b""}
        for direction, data in plain:
            (client if direction == "c2s" else server).write(data)
            _pump(client, server, bios, writes)
            reader = server if direction == "c2s" else client
            while True:
                try:
                    received[direction] += reader.read(65536)
                except ssl.SSLWantReadError:
                    break
        return {
            "writes": [[d, w.hex()] for d, w in writes],
            "keylog": keylog.read_text(),
            "suite": client.cipher()[0],
            "version": client.version(),
            "received": {d: r.hex() for d, r in received.items()},
        }


def converse(
    plain: list[tuple[str, bytes]],
    version: str = "1.3",
    cipher: str | None = None,
    etm: bool = True,
    server_name: str = "localhost",
) -> dict:
    """Run a TLS conversation carrying `plain` (direction, bytes) writes; returns the TLS chunks
    (`writes`, as (direction, bytes)), the key log text, and the suite OpenSSL chose."""
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as tmp:
        if version == "1.3" and cipher:
            conf = Path(tmp) / "openssl.cnf"
            conf.write_text(
                "openssl_conf = default_conf\n[default_conf]\nssl_conf = ssl_sect\n"
                "[ssl_sect]\nsystem_default = system_default_sect\n"
                f"[system_default_sect]\nCiphersuites = {cipher}\n"
            )
            env["OPENSSL_CONF"] = str(conf)
        request = json.dumps(
            {
                "version": version,
                "cipher": cipher,
                "etm": etm,
                "server_name": server_name,
                "plain": [[d, p.hex()] for d, p in plain],
            }
        )
        done = subprocess.run(
            [sys.executable, __file__],
            input=request,
            capture_output=True,
            text=True,
            env=env,
            check=True,
            timeout=60,
        )
    out = json.loads(done.stdout)
    out["writes"] = [(d, bytes.fromhex(w)) for d, w in out["writes"]]
    out["received"] = {d: bytes.fromhex(r) for d, r in out["received"].items()}
    return out


if __name__ == "__main__":
    args = json.loads(sys.stdin.read())
    plain = [(d, bytes.fromhex(p)) for d, p in args["plain"]]
    print(
        json.dumps(_run(args["version"], args["cipher"], args["etm"], plain, args["server_name"]))
    )
