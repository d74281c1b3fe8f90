"""What a connection's AMQP travels in reaches the summary: `layers` on a tracked connection
(TLS with its version, suite, SNI and whether it was decrypted; WebSocket with its path), and a
connection whose AMQP could not be read (TLS without its key) listed as `undecoded` instead of
leaving the summary empty. The facts are the layer records' own (`read --json`, kind `layer`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from amqpscope import schema
from amqpscope.cli import main
from amqpscope.codec.frames import Frame
from amqpscope.track import tracker as tracking

CAPTURES = Path(__file__).resolve().parent.parent / "captures"


def run(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def summary(*args: str) -> dict[str, Any]:
    out = json.loads(run("summary", "--json", *args))
    assert not list(schema.validator("summary").iter_errors(out))
    return out


def layer_records(*args: str) -> list[dict[str, Any]]:
    lines = run("read", "--json", *args).splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == "layer"]


def test_tls_without_its_key_is_listed_as_undecoded() -> None:
    capture = str(CAPTURES / "091-tls13.pcap")
    out = summary(capture)
    (record,) = layer_records(capture)
    assert out["connections"] == []
    (conn,) = out["undecoded"]
    client, server = (
        (record["src"], record["dst"]) if record["dir"] == "c2s" else (record["dst"], record["src"])
    )
    assert (conn["id"], conn["client"], conn["server"]) == (record["conn"], client, server)
    (tls,) = conn["layers"]
    for key in ("version", "cipher-suite", "sni"):
        assert tls[key] == record["fields"][key]
    assert tls["decrypted"] is False and tls["findings"] == ["tls.no-key"]
    text = run("summary", capture, "--width", "200", "--color", "never")
    assert f"{tls['version']} {tls['cipher-suite']}" in text
    assert "AMQP not read: no key (--keylog FILE or SSLKEYLOGFILE)" in text


def test_tls_with_its_key_is_a_connection_with_its_layer() -> None:
    capture, keys = str(CAPTURES / "091-tls13.pcap"), str(CAPTURES / "091-tls13.keys")
    out = summary(capture, "--keylog", keys)
    assert "undecoded" not in out
    (conn,) = out["connections"]
    (tls,) = conn["layers"]
    assert tls["decrypted"] is True and "findings" not in tls
    assert tls["version"] == layer_records(capture, "--keylog", keys)[0]["fields"]["version"]
    text = run("summary", capture, "--keylog", keys, "--width", "200", "--color", "never")
    assert f"AMQP 0-9-1  closed  {tls['version']} {tls['cipher-suite']}" in text
    assert " decrypted" in text and "not decrypted" not in text


def test_websocket_and_plain_connections() -> None:
    capture = str(CAPTURES / "10-websocket.pcap")
    (conn,) = summary(capture)["connections"]
    (ws,) = conn["layers"]
    (record,) = layer_records(capture)
    assert ws == {
        "name": "websocket",
        **{k: record["fields"][k] for k in ("path", "subprotocol", "host", "status")},
    }
    assert f"WebSocket {ws['path']}" in run("summary", capture, "--width", "200")
    plain = summary(str(CAPTURES / "091-ack-nack-reject.pcap"))
    assert plain["connections"] and all("layers" not in c for c in plain["connections"])
    assert "undecoded" not in plain


def _layer(conn: int) -> Frame:
    return Frame(
        "unknown", "layer", "tls", None, b"", direction="c2s", conn=conn, src="a:1", dst="b:2",
        fields={"version": "TLS 1.3", "decrypted": False},
    )  # fmt: skip


def test_layers_are_bounded_and_kept_when_their_connection_is_evicted(monkeypatch: Any) -> None:
    monkeypatch.setattr(tracking, "MAX_LAYERED", 3)
    t = tracking.Tracker()
    for conn in range(1, 6):
        t.feed(_layer(conn))
    assert [u["id"] for u in t.summary()["undecoded"]] == [1, 2, 3]
    assert t.evict(2) is None  # never tracked: no summary to hand back
    assert 2 not in t.layers  # its live state is gone, its entry stays listed
    assert [u["id"] for u in t.summary()["undecoded"]] == [1, 2, 3]
    for conn in range(6, 12):  # the evicted ones kept are bounded too (the latest)
        t.feed(_layer(conn))
        t.evict(conn)
    assert [u["id"] for u in t.summary()["undecoded"]] == [1, 3, 9, 10, 11]
    decrypted = _layer(1)
    decrypted.fields["decrypted"] = True
    t.feed(decrypted)
    t.feed(_layer(1))  # a later record without the key's help does not undo it
    assert t.summary()["undecoded"][0]["layers"][0]["decrypted"] is True
