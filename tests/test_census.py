"""A capture with no AMQP says what it held: its TCP connections by what they spoke (HTTP,
TLS, RabbitMQ streams, unknown) and on which ports, in `read` (on stderr: stdout stays the
frames, so --json stays empty) and in `summary`, instead of nothing or "no findings". The
counts are checked against what the recording's clients did (captures/non-amqp.json)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from amqpscope.capture.files import open_capture
from amqpscope.census import census, kind_of
from amqpscope.dissect import Dissector
from tests.crafted import CAPTURES, drop

CAPTURE = CAPTURES / "non-amqp.pcap"
TRUTH = json.loads(CAPTURE.with_suffix(".json").read_text())["expect"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_census_counts_what_the_clients_did() -> None:
    dissector = Dissector()
    with open_capture(str(CAPTURE)) as capture:
        list(dissector.run(capture))
    found = census(dissector.connections.values())
    by = {o["protocol"]: o for o in found["other"]}
    assert found["amqp-connections"] == TRUTH["amqp_connections"] == 0
    assert by["HTTP"]["connections"] == TRUTH["http_connections"]
    assert by["TLS"]["connections"] == TRUTH["tls_connections"]
    assert by["RabbitMQ streams"] == {
        "protocol": "RabbitMQ streams",
        "port": 5552,
        "connections": TRUTH["stream_connections"],
    }
    assert by["unknown"]["connections"] == TRUTH["raw_tcp_connections"]
    total = sum(TRUTH[k] for k in ("http_connections", "tls_connections", "raw_tcp_connections"))
    assert found["tcp-connections"] == total + TRUTH["stream_connections"]


def test_read_and_summary_say_it() -> None:
    said = "5 TCP connections: 2 HTTP on port 39361, 1 RabbitMQ streams on port 5552"
    read = run("read", str(CAPTURE))
    assert read.returncode == 0 and read.stdout == ""
    assert said in read.stderr and "no AMQP in" in read.stderr
    as_json = run("read", "--json", str(CAPTURE))
    assert as_json.stdout == "" and said in as_json.stderr
    summary = run("summary", str(CAPTURE))
    assert said in summary.stdout and "no findings" not in summary.stdout


def test_an_amqp_capture_says_nothing_of_the_kind() -> None:
    read = run("read", str(CAPTURES / "091-get.pcap"))
    assert "no AMQP" not in read.stderr


def test_a_capture_of_only_http(tmp_path: Path) -> None:
    """The HTTP connections alone (the other ports dropped): two connections, one kind."""
    only = drop(
        CAPTURE, tmp_path / "http.pcap", lambda raw: b"HTTP" in raw.data or len(raw.data) < 80
    )
    out = run("summary", str(only)).stdout
    assert "HTTP on port 39361" in out


def test_signatures() -> None:
    assert kind_of(b"GET / HTTP/1.1\r\n", b"", 8080) == "HTTP"
    assert kind_of(b"\x16\x03\x01\x02\x00", b"", 443) == "TLS"
    assert kind_of(b"\x00\x00\x00\x4e\x00\x11\x00\x01", b"", 5552) == "RabbitMQ streams"
    assert kind_of(b"SSH-2.0-OpenSSH", b"", 22) == "SSH"
    assert kind_of(b"\x01\x02\x03", b"\x04", 9999) == "unknown"
