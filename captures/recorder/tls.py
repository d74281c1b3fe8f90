"""TLS: RabbitMQ's TLS listener and its self-signed certificate, the client contexts that write
a key log, the relay between a plain and a TLS socket, secrets embedded in a pcapng."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import shutil
import socket
import ssl
import threading
import time
from pathlib import Path
from typing import Any

from recorder.harness import CaptureSpec, Counts, Ctx, run_cmd


def self_signed_cert(tmp: Path) -> tuple[Path, Path] | None:
    """A throwaway localhost certificate (cryptography, else openssl CLI), or None."""
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        if not shutil.which("openssl"):
            return None
        run_cmd(
            [
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                str(key),
                "-out",
                str(cert),
                "-days",
                "2",
                "-subj",
                "/CN=localhost",
            ]
        )
        return cert, key
    pkey = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(pkey.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=2))
        .sign(pkey, hashes.SHA256())
    )
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(
        pkey.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert, key


TLS_PORT = 5671

#: what a scenario through RabbitMQ's TLS listener says to `scenario`: its port, captured alone
TLS_LISTENER: dict[str, Any] = {
    "port": TLS_PORT,
    "capture": CaptureSpec(bpf=f"tcp port {TLS_PORT}"),
}


def keylog_path(ctx: Ctx) -> Path:
    """The scenario's key log, next to its capture (NAME.keys)."""
    return ctx.capture.path.parent / f"{ctx.name}.keys"


def tls_client_context(ctx: Ctx, version: ssl.TLSVersion | None = None) -> ssl.SSLContext:
    """A client context that writes the scenario's key log (OpenSSL's, through Python's ssl)."""
    path = keylog_path(ctx)
    path.unlink(missing_ok=True)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if version is not None:
        context.minimum_version = context.maximum_version = version
    context.keylog_filename = str(path)
    return context


def tls_facts(sock: ssl.SSLSocket | ssl.SSLObject) -> dict[str, Any]:
    """What the client's TLS library negotiated (ground truth for the TLS layer's info)."""
    cipher = sock.cipher()
    return {"version": sock.version(), "cipher": cipher[0] if cipher else None}


def noting_handshakes(context: ssl.SSLContext, facts: dict[str, Any]) -> ssl.SSLContext:
    """`context`, whose sockets put their `tls_facts` into `facts` once the handshake is done:
    pika drives the handshake itself (non-blocking), so only its socket knows when it ends."""
    original = context.wrap_socket

    def wrap(sock: socket.socket, *args: Any, **kw: Any) -> ssl.SSLSocket:
        wrapped = original(sock, *args, **kw)
        handshake = wrapped.do_handshake

        def do_handshake(*hargs: Any, **hkw: Any) -> None:
            handshake(*hargs, **hkw)  # pika calls it until it stops raising WantRead
            facts.update(tls_facts(wrapped))

        wrapped.do_handshake = do_handshake  # type: ignore[method-assign]
        return wrapped

    context.wrap_socket = wrap  # type: ignore[method-assign]
    return context


def _send(sock: socket.socket, data: bytes) -> None:
    sock.setblocking(True)
    sock.sendall(data)
    sock.setblocking(False)


def _close_write(sock: socket.socket) -> None:
    """End one direction: a TLS socket sends close_notify (a non-blocking unwrap sends it and
    does not wait for the peer's), a plain one a FIN."""
    with contextlib.suppress(OSError, ssl.SSLError):
        if isinstance(sock, ssl.SSLSocket):
            sock.unwrap()
        else:
            sock.shutdown(socket.SHUT_WR)


def drain_and_close(sock: socket.socket) -> None:
    """Read what the peer still sent (a close_notify, its FIN) before closing: closing with
    unread bytes makes the kernel answer with a reset, which the capture would show."""
    import select

    with contextlib.suppress(OSError):
        while select.select([sock.fileno()], [], [], 0.3)[0]:
            if not os.read(sock.fileno(), 65536):
                break
    with contextlib.suppress(OSError):
        sock.close()


def relay(plain: socket.socket, tls: ssl.SSLSocket, timeout: float = 30.0) -> None:
    """Copy bytes both ways until both ends are done, in one thread (an SSL object must not be
    read and written from two threads at once)."""
    import select

    other = {plain: tls, tls: plain}
    reading = {plain, tls}
    for sock in other:
        sock.setblocking(False)
    deadline = time.monotonic() + timeout
    while reading and time.monotonic() < deadline:
        ready, _, _ = select.select(list(reading), [], [], 1.0)
        for src in ready:
            while True:  # drain: a TLS socket may hold decrypted bytes select cannot see
                try:
                    data = src.recv(65536)
                except (ssl.SSLWantReadError, BlockingIOError):
                    break
                except (OSError, ssl.SSLError):
                    data = b""
                if not data:
                    reading.discard(src)
                    _close_write(other[src])
                    break
                try:
                    _send(other[src], data)
                except (OSError, ssl.SSLError):
                    reading.discard(src)
                    break


class TlsRelay:
    """Plain TCP in on an ephemeral loopback port, TLS out (Python's ssl: OpenSSL writes the key
    log). Proton's reactor cannot log TLS keys, so Proton's bytes go through this relay, the
    way `ssl.MemoryBIO` would carry them. `inband`: the AMQP 1.0 TLS header exchange first.
    `server`: terminate TLS instead (in on `listen_port`, plain out to `target`)."""

    def __init__(
        self,
        target: tuple[str, int],
        context: ssl.SSLContext,
        inband: bool = False,
        server: bool = False,
        listen_port: int = 0,
    ) -> None:
        self.target = target
        self.context = context
        self.inband = inband
        self.server = server
        self.listener = socket.create_server(("127.0.0.1", listen_port))
        self.port = self.listener.getsockname()[1]
        self.n = Counts()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def start(self) -> int:
        self.thread.start()
        return self.port

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.listener.close()

    def finish(self, timeout: float = 10.0) -> None:
        """Wait for the relayed connection to end; a relay still running means a lost close."""
        if not self.done.wait(timeout):
            raise RuntimeError(f"a TLS relay did not finish: {json.dumps(self.n)}")

    def _serve(self) -> None:
        try:
            plain, _ = self.listener.accept()
        except OSError:
            return
        header = b"AMQP\x02\x01\x00\x00"
        try:
            if self.server:
                if self.inband:
                    self.n["header_received"] = plain.recv(8, socket.MSG_WAITALL).hex()
                    plain.sendall(header)
                outer = self.context.wrap_socket(plain, server_side=True)
                inner = socket.create_connection(self.target)
            else:
                inner = socket.create_connection(self.target)
                if self.inband:
                    inner.sendall(header)
                    self.n["header_received"] = inner.recv(8, socket.MSG_WAITALL).hex()
                outer = plain
                inner = self.context.wrap_socket(inner, server_hostname="localhost")
                self.n["tls"] = tls_facts(inner)
        except (OSError, ssl.SSLError) as exc:
            self.n["error"] = repr(exc)
            plain.close()
            self.done.set()
            return
        if self.server:
            relay(inner, outer)  # type: ignore[arg-type]
        else:
            relay(outer, inner)  # type: ignore[arg-type]
        for sock in (outer, inner):
            drain_and_close(sock)
        self.done.set()


def embed_secrets(final: Path, out: Path, name: str) -> None:
    """editcap --inject-secrets: the key log goes into the pcapng (a Decryption Secrets Block),
    so the capture decrypts with no option; the separate key log is then removed."""
    keys = out / f"{name}.keys"
    tmp = final.with_name(final.name + ".dsb")
    run_cmd(["editcap", "--inject-secrets", f"tls,{keys}", str(final), str(tmp)])
    os.replace(tmp, final)
    keys.unlink()
