"""Recorded TLS captures (captures/record.py: pika and Proton over RabbitMQ's TLS listener, the
AMQP 1.0 in-band upgrade peer to peer, a pcapng with its secrets embedded), decrypted.

Oracles: the clear-text twin of each scenario (same conversation recorded without TLS), tshark's
own reading of the handshake (version, suite, SNI, client random), the client's TLS library's
report in NAME.json. Field-by-field agreement with tshark's AMQP decode of the decrypted frames is
in test_amqp091_vs_tshark.py and test_amqp10_vs_tshark.py (they read NAME.keys too).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from amqpscope.capture.files import open_capture
from amqpscope.cli import main
from amqpscope.codec.tls import KeyLog, spec
from amqpscope.dissect import Dissector
from tests.oracle import TSHARK, keylog_for, keys_for

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
#: TLS scenario -> the clear-text scenario that had the same conversation
TWINS = {
    "091-tls12": "091-publish-consume",
    "091-tls13": "091-publish-consume",
    "091-tls13-embedded": "091-publish-consume",
    "10-tls": "10-send-receive",
    "10-tls-inband": "10-peer-to-peer",
}
_CTAG = re.compile(r"ctag1\.[0-9a-f]{32}")


def path_of(name: str) -> Path:
    return CAPTURES / json.loads((CAPTURES / f"{name}.json").read_text())["file"]


def frames(path: Path, keylog: KeyLog | None = None) -> list:
    with open_capture(str(path)) as capture:
        return list(Dissector(keylog=keylog).run(capture))


def conversation(name: str, found: list) -> dict[str, list[str]]:
    """Each direction's frames as comparable text: the scenario's name (in queue names and
    bodies) and pika's random consumer tags masked, sizes dropped (they follow the name), and
    nothing after a direction's close (RabbitMQ's late detach/end there is a race)."""
    out: dict[str, list[str]] = {"c2s": [], "s2c": []}
    closed: set[str] = set()
    for frame in found:
        if frame.kind == "layer" or frame.direction in closed:
            continue
        if frame.fields.get("protocol") == "AMQP 1.0 (tls)":
            continue  # the in-band upgrade's own header: the twin has none
        fields = {k: v for k, v in frame.fields.items() if k not in ("size", "body-size")}
        message = frame.message or {}
        body = message.get("body", {}) if isinstance(message, dict) else {}
        text = json.dumps([frame.kind, frame.name, frame.channel, fields, body.get("text")])
        out[frame.direction].append(_CTAG.sub("CTAG", text.replace(name, "NAME")))
        if frame.name in ("close", "connection.close", "connection.close-ok"):
            closed.add(frame.direction)
    return out


@pytest.mark.parametrize("name", sorted(TWINS))
def test_decrypted_frames_equal_the_clear_text_twins(name: str) -> None:
    path = path_of(name)
    mine = frames(path, keylog_for(path))
    twin = TWINS[name]
    theirs = frames(path_of(twin))
    assert len(mine) > 20
    assert conversation(name, mine) == conversation(twin, theirs)
    layers = [f for f in mine if f.kind == "layer"]
    assert [(f.name, f.fields["decrypted"], f.findings) for f in layers] == [("tls", True, [])]


def tshark_handshake(path: Path) -> dict[str, str]:
    """What Wireshark reads in the hellos (no key needed)."""
    fields = ["tls.handshake.type", "tls.handshake.random", "tls.handshake.ciphersuite"]
    fields += ["tls.handshake.extensions_server_name"]
    cmd = [TSHARK, "-r", str(path), "-d", "tcp.port==5673,tls", "-Y", "tls.handshake.type <= 2"]
    cmd += ["-T", "fields", "-E", "occurrence=f"]
    for field in fields:
        cmd += ["-e", field]
    out: dict[str, str] = {}
    text = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=120).stdout
    for line in text.splitlines():
        kind, random, suite, sni = (line.split("\t") + [""] * 4)[:4]
        if kind == "1":
            out["client-random"], out["sni"] = random, sni
        elif kind == "2":
            out["suite"] = suite
    return out


@pytest.mark.skipif(TSHARK is None, reason="tshark is not installed (make test installs it)")
@pytest.mark.parametrize("name", sorted(TWINS))
def test_without_a_key_the_connection_is_named_tls_with_what_the_hellos_say(name: str) -> None:
    path = path_of(name)
    found = frames(path, KeyLog())
    if name.endswith("embedded"):  # its secrets are in the file: nothing to take away
        assert any(f.kind == "method" for f in found)
        return
    layers = [f for f in found if f.kind == "layer"]
    assert len(layers) == 1
    # in-band only (and, for an AMQP connection, how its TCP connection ended)
    assert all(f.kind in ("protocol-header", "transport") for f in found if f.kind != "layer")
    fields = layers[0].fields
    wire = tshark_handshake(path)
    assert fields["client-random"] == wire["client-random"].replace(":", "")
    assert fields["sni"] == wire["sni"] == "localhost"
    assert spec.suite_name(int(wire["suite"], 0)) == fields["cipher-suite"]  # IANA's id
    truth = json.loads((CAPTURES / f"{name}.json").read_text())["expect"]["tls"]
    assert fields["version"] == truth["version"].replace("TLSv", "TLS ")  # the client's report
    assert fields["decrypted"] is False
    label = "CLIENT_TRAFFIC_SECRET_0" if truth["version"] == "TLSv1.3" else "CLIENT_RANDOM"
    assert fields["key-log-line"] == f"{label} {fields['client-random']}"
    assert f"{label} {fields['client-random']} " in keys_for(path).read_text()  # the right line
    assert [f.code for f in layers[0].findings] == ["tls.no-key"]


@pytest.mark.parametrize("name", ["091-tls12", "091-tls13", "10-tls-inband"])
def test_a_wrong_key_is_a_finding_not_garbage(name: str) -> None:
    path = path_of(name)
    text = keys_for(path).read_text()
    # the same lines, every secret's last byte flipped
    wrong = re.sub(
        r"([0-9a-f]{2})$",
        lambda m: f"{int(m.group(1), 16) ^ 1:02x}",
        text,
        flags=re.M,
    )
    found = frames(path, KeyLog(wrong))
    layers = [f for f in found if f.kind == "layer"]
    assert [f.code for f in layers[0].findings] == ["tls.wrong-key"]
    assert not [f for f in found if f.kind not in ("layer", "protocol-header", "transport")]


def test_the_embedded_secrets_decrypt_with_no_option() -> None:
    result = CliRunner().invoke(main, ["read", str(path_of("091-tls13-embedded")), "--json"])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert records[0]["kind"] == "layer" and records[0]["fields"]["decrypted"] is True
    names = [r["name"] for r in records]
    assert names.count("basic.deliver") == 10 and names.count("basic.ack") == 10


@pytest.mark.parametrize("how", ["option", "environment"])
def test_the_cli_takes_a_key_log(how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = path_of("10-tls")
    keys = str(keys_for(path))
    args: list[str] = ["read", str(path), "--json"]
    if how == "option":
        args += ["--keylog", keys]
    else:
        monkeypatch.setenv("SSLKEYLOGFILE", keys)
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    names = [json.loads(line)["name"] for line in result.stdout.splitlines()]
    assert names.count("transfer") == 20  # 10 sent, 10 received back


def test_the_timeline_names_an_undecrypted_connection() -> None:
    result = CliRunner().invoke(main, ["read", str(path_of("091-tls12")), "--width", "250"])
    assert result.exit_code == 0, result.output
    legend, line = result.stdout.splitlines()[:2]
    assert legend.endswith("127.0.0.1:5671  TLS")
    assert "tls TLS 1.2 TLS_ECDHE_" in line and "sni=localhost not decrypted" in line
    assert "tls.no-key" in line


def test_a_missing_key_log_is_an_unreadable_input() -> None:
    """A key log that cannot be read is an input that cannot be read: one line, exit 1."""
    result = CliRunner().invoke(main, ["read", str(path_of("10-tls")), "--keylog", "/nonexistent"])
    assert result.exit_code == 1
    assert len(result.output.splitlines()) == 1 and "/nonexistent" in result.output


def test_the_summary_of_a_decrypted_capture_counts_its_messages() -> None:
    path = path_of("091-tls13")
    result = CliRunner().invoke(
        main, ["summary", str(path), "--json", "--keylog", str(keys_for(path))]
    )
    assert result.exit_code == 0, result.output
    summary: dict[str, Any] = json.loads(result.stdout)
    assert len(summary["connections"]) == 1


def test_key_log_files_are_read_as_they_grow(tmp_path: Path) -> None:
    """A live client appends to its key log: only whole new lines are taken, each once."""
    from amqpscope.capture.secrets import KeyLogFiles

    path = tmp_path / "keys.txt"
    files = KeyLogFiles([str(path), str(tmp_path / "not-yet-written.txt")])
    assert files.read_new() == []
    path.write_text("CLIENT_RANDOM aa bb\nCLIENT_RAN")
    assert files.read_new() == ["CLIENT_RANDOM aa bb\n"]
    assert files.read_new() == []
    with path.open("a") as f:
        f.write("DOM cc dd\n")
    assert files.read_new() == ["CLIENT_RANDOM cc dd\n"]


@pytest.mark.broker
def test_live_decrypts_with_a_key_log_the_client_writes_meanwhile(tmp_path: Path) -> None:
    """`amqpscope live --keylog FILE` while pika speaks TLS 1.3 to RabbitMQ and OpenSSL writes
    FILE: the frames shown live are those `read --keylog` gives on the recorder's own capture."""
    from tests.test_live import RECORDER, LiveProcess, comparable

    rec = tmp_path / "rec"
    rec.mkdir()
    keys = rec / "091-tls13.keys"
    keys.touch()  # the recorder's client replaces it as it connects
    proc = LiveProcess(tmp_path, "lo", "-f", "tcp port 5671", "--json", "--keylog", str(keys))
    try:
        done = subprocess.run(
            [sys.executable, str(RECORDER), "--no-check", "--out", str(rec), "--only", "091-tls13"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        time.sleep(0.5)
    finally:
        code = proc.stop(signal.SIGINT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert code == 0, proc.stderr()
    live = [f for f in proc.frames() if f["kind"] != "layer"]
    result = CliRunner().invoke(
        main, ["read", str(rec / "091-tls13.pcap"), "--json", "--keylog", str(keys)]
    )
    recorded = [json.loads(line) for line in result.stdout.splitlines()]
    recorded = [f for f in recorded if f["kind"] != "layer"]
    assert len(recorded) > 40
    assert [comparable(f) for f in live] == [comparable(f) for f in recorded]


def test_a_pcapng_decrypts_with_its_own_secrets_behind_a_progress_bar() -> None:
    """On a terminal the packets reach the dissector through the progress bar's wrapper, which
    has no `secrets`: the pcapng's own Decryption Secrets Blocks must still be used."""
    from amqpscope.cli.inputs import open_input

    def wrap(packets: Any) -> Any:
        return (packet for packet in packets)

    path = str(CAPTURES / "091-tls13-embedded.pcapng")
    names = {}
    for how in (None, wrap):
        with open_input(path) as source:
            names[how is None] = [f.name for f in source.frames(wrap=how)]
    assert "basic.publish" in names[True]
    assert names[False] == names[True]
