"""Traffic that is not AMQP, beside AMQP: HTTP, an echo server, RabbitMQ's stream protocol."""

from __future__ import annotations

import contextlib
import http.client
import http.server
import random
import socket
import ssl
import struct
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from recorder.harness import BROKER_HOST, STREAM_PORT, Counts, Ctx, port_open, scenario
from recorder.tls import self_signed_cert


class _QuietHTTP(http.server.BaseHTTPRequestHandler):
    """Tiny HTTP/1.1 handler with keep-alive; no logging noise."""

    protocol_version = "HTTP/1.1"

    def _reply(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._reply(f"amqpscope test page {self.path}\n".encode())

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        self._reply(b"got " + str(len(self.rfile.read(length))).encode() + b" bytes\n")

    def log_message(self, fmt: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def tcp_server(
    handle: Callable[[socket.socket], None], wrap: ssl.SSLContext | None = None
) -> Iterator[int]:
    """One-thread TCP server on an ephemeral loopback port; yields the port."""
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(0.2)
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            with contextlib.suppress(OSError):
                conn.settimeout(5)
                if wrap is not None:
                    conn = wrap.wrap_socket(conn, server_side=True)
                with conn:
                    handle(conn)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield srv.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        srv.close()


def echo_handler(conn: socket.socket) -> None:
    """Echo everything until the client half-closes."""
    while data := conn.recv(65536):
        conn.sendall(data)


def stream_frame(key: int, corr: int | None, payload: bytes = b"") -> bytes:
    """A RabbitMQ stream protocol frame: size, key, version 1, [correlation id], payload."""
    body = (
        struct.pack(">HH", key, 1)
        + (struct.pack(">I", corr) if corr is not None else b"")
        + payload
    )
    return struct.pack(">I", len(body)) + body


def stream_str(text: str) -> bytes:
    """Stream protocol string: int16 length + UTF-8 bytes."""
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def read_stream_frame(sock: socket.socket) -> tuple[int, bytes]:
    """Read one stream protocol frame; return (key, bytes after key+version)."""

    def exact(size: int) -> bytes:
        buf = b""
        while len(buf) < size:
            chunk = sock.recv(size - len(buf))
            if not chunk:
                raise ConnectionError("stream server closed the connection")
            buf += chunk
        return buf

    (size,) = struct.unpack(">I", exact(4))
    body = exact(size)
    return struct.unpack(">H", body[:2])[0], body[4:]


def stream_session(n: Counts) -> None:
    """Open and close a RabbitMQ stream protocol session on 5552 (properties, SASL, tune, open).

    Why: it is a binary protocol on a RabbitMQ port that must NOT be mistaken for AMQP.
    """
    with socket.create_connection((BROKER_HOST, STREAM_PORT), timeout=5) as sock:
        n.inc("stream_connections")
        responses = []

        def request(key: int, corr: int, payload: bytes = b"") -> bytes:
            sock.sendall(stream_frame(key, corr, payload))
            n.inc("stream_requests")
            rkey, rest = read_stream_frame(sock)
            code = struct.unpack(">H", rest[4:6])[0]
            responses.append(
                {"request_key": hex(key), "response_key": hex(rkey), "response_code": code}
            )
            return rest[6:]

        props = {"product": "amqpscope recorder", "connection_name": "amqpscope non-amqp"}
        request(
            0x0011,
            1,
            struct.pack(">i", len(props))
            + b"".join(stream_str(k) + stream_str(v) for k, v in props.items()),
        )
        request(0x0012, 2)
        auth = b"\0guest\0guest"
        request(0x0013, 3, stream_str("PLAIN") + struct.pack(">i", len(auth)) + auth)
        tkey, tune = read_stream_frame(sock)  # server-initiated tune (no correlation id)
        n.add("stream_server_frames", {"key": hex(tkey)})
        sock.sendall(stream_frame(0x0014, None, tune[:8]))
        request(0x0015, 4, stream_str("/"))
        request(0x0016, 5, struct.pack(">H", 1) + stream_str("amqpscope done"))
        n["stream_responses"] = responses


@scenario(
    "non-amqp",
    "none",
    "Traffic that is not AMQP: 3 HTTP/1.1 requests over 2 connections to a local http.server, one "
    "TLS 1.3 session (real handshake, self-signed cert) echoing a line, one TCP connection "
    "carrying 4 KiB of random bytes to an echo server, and (if the plugin is on) a RabbitMQ stream "
    "protocol session on 5552 (peer-properties, SASL PLAIN, tune, open, close).",
    queues=(),
    manual_capture=True,
    port=[],
)
def s_non_amqp(ctx: Ctx) -> dict[str, Any]:
    """Negative test: the analyzer must report no AMQP here (and not crash)."""
    n = Counts()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _QuietHTTP)
    http_thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    http_thread.start()
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        stack.callback(httpd.server_close)
        stack.callback(httpd.shutdown)
        http_port = httpd.server_address[1]
        pair = self_signed_cert(Path(tmp))
        tls_port = None
        if pair:
            server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            server_ctx.load_cert_chain(*pair)
            tls_port = stack.enter_context(tcp_server(echo_handler, wrap=server_ctx))
        raw_port = stack.enter_context(tcp_server(echo_handler))
        stream_on = port_open(BROKER_HOST, STREAM_PORT)
        ports = [p for p in (http_port, tls_port, raw_port) if p] + (
            [STREAM_PORT] if stream_on else []
        )
        ctx.port = ports
        ctx.capture.start(bpf="tcp and (" + " or ".join(f"port {p}" for p in ports) + ")")

        for paths in (["/", "/status"], ["POST /submit"]):
            hc = http.client.HTTPConnection("127.0.0.1", http_port, timeout=5)
            n.inc("http_connections")
            for path in paths:
                if path.startswith("POST "):
                    hc.request(
                        "POST",
                        path[5:],
                        body=b"field=value&other=1",
                        headers={"Content-Type": "application/x-www-form-urlencoded"},
                    )
                else:
                    hc.request("GET", path)
                resp = hc.getresponse()
                resp.read()
                n.inc("http_requests")
                n.tally("http_status", str(resp.status))
            hc.close()

        if tls_port:
            client_ctx = ssl.create_default_context()
            client_ctx.check_hostname = False
            client_ctx.verify_mode = ssl.CERT_NONE
            with (
                socket.create_connection(("127.0.0.1", tls_port), timeout=5) as raw,
                client_ctx.wrap_socket(raw, server_hostname="localhost") as tls,
            ):
                n.inc("tls_connections")
                n["tls_version"] = tls.version()
                tls.sendall(b"hello over tls\n")
                n["tls_echo_ok"] = tls.recv(1024) == b"hello over tls\n"
        else:
            n["tls_skipped"] = "no cryptography module or openssl CLI"

        blob = random.Random(4096).randbytes(4096)
        with socket.create_connection(("127.0.0.1", raw_port), timeout=5) as sock:
            n.inc("raw_tcp_connections")
            sock.sendall(blob)
            sock.shutdown(socket.SHUT_WR)
            echoed = b""
            while chunk := sock.recv(65536):
                echoed += chunk
            n["raw_bytes_sent"] = len(blob)
            n["raw_echo_ok"] = echoed == blob

        if stream_on:
            stream_session(n)
        else:
            n["stream_skipped"] = "rabbitmq_stream plugin not listening on 5552"
    n["amqp_connections"] = 0
    return n
