"""How each AMQP connection's TCP connection ended: the `transport` record, the summary's
`transport`, and the `*.transport-closed` finding when an open AMQP connection was dropped.

Oracles: tshark's own reading of the TCP flags (which packet carried the first RST, who sent the
first FIN) for every recorded capture; the ground truth of `091-killed-consumer` (pika counted 5
unacked deliveries, then the process was killed with SIGKILL); and for 1.0 a Proton conversation
whose client dies after sending unsettled messages (its bytes are Proton's, the TCP around them
is built here).
"""

from __future__ import annotations

import json
import struct
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
from click.testing import CliRunner

from amqpscope.capture.files import open_capture
from amqpscope.capture.packet import RawPacket
from amqpscope.cli import main
from amqpscope.dissect import Dissector
from amqpscope.track.tracker import Tracker
from tests import peers
from tests.oracle import TSHARK, keylog_for, keys_for

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
FILES = sorted(p for p in CAPTURES.iterdir() if p.suffix in (".pcap", ".pcapng"))
KILLED = CAPTURES / "091-killed-consumer.pcap"
FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10


def records(path: Path) -> list:
    with open_capture(str(path)) as capture:
        return list(Dissector(keylog=keylog_for(path)).run(capture))


def summary_of(path: Path) -> dict:
    keys = keys_for(path)  # TLS captures: their key log
    extra = ["--keylog", str(keys)] if keys else []
    result = CliRunner().invoke(main, ["summary", str(path), "--json", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def tcp_ends(path: Path) -> dict[tuple[str, str], list[tuple[int, str, bool]]]:
    """tshark's FIN and RST segments per endpoint pair: (packet, sender ip:port, is a reset)."""
    fields = ["frame.number", "ip.src", "tcp.srcport", "ip.dst", "tcp.dstport"]
    fields += ["ipv6.src", "ipv6.dst", "tcp.flags.fin", "tcp.flags.reset"]
    cmd = [TSHARK, "-n", "-r", str(path), "-Y", "tcp.flags.fin==1 || tcp.flags.reset==1"]
    cmd += ["-T", "fields", "-E", "separator=|", *[x for f in fields for x in ("-e", f)]]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=120).stdout
    ends: dict[tuple[str, str], list[tuple[int, str, bool]]] = defaultdict(list)
    for line in out.splitlines():
        number, src, sport, dst, dport, src6, dst6, _fin, rst = line.split("|")
        src, dst = (src, dst) if src else (f"[{src6}]", f"[{dst6}]")
        a, b = f"{src}:{sport}", f"{dst}:{dport}"
        ends[tuple(sorted((a, b)))].append((int(number), a, rst in ("1", "True")))
    return ends


@pytest.mark.skipif(TSHARK is None, reason="tshark is not installed (make test installs it)")
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_each_transport_record_is_the_tcp_end_tshark_sees(path: Path) -> None:
    """Each side's first FIN is a `fin` record at its own packet, by its sender; the first reset
    is an `rst` record, the connection's last, naming the FIN before it (whose)."""
    found = records(path)
    ends = tcp_ends(path)
    amqp = {f.conn: (f.src, f.dst, f.direction) for f in found if f.kind != "transport"}
    transport = [f for f in found if f.kind == "transport"]
    assert {f.conn for f in transport} <= set(amqp)
    for conn, (src, dst, direction) in amqp.items():
        client = src if direction == "c2s" else dst
        mine = [f for f in transport if f.conn == conn]
        want: list[tuple[str, int, str]] = []
        senders: list[str] = []
        for number, sender, reset in ends[tuple(sorted((src, dst)))]:
            side = "client" if sender == client else "server"
            if reset:  # the first reset ends it, whoever sent a FIN before
                want.append(("rst", number, side))
                break
            if side not in senders:
                senders.append(side)
                want.append(("fin", number, side))
        assert [(r.name, r.packet, r.fields["by"]) for r in mine] == want
        for record in mine:
            assert record.direction == ("c2s" if record.fields["by"] == "client" else "s2c")
            assert record.fields["event"] == record.name and record.size == 0 and not record.data
            if record.name == "rst":
                last = max(f.number for f in found if f.conn == conn)
                assert record.number == last  # the connection's last record
                assert record.fields.get("after-fin") == (senders[0] if senders else None)


def test_a_capture_that_stops_mid_connection_writes_no_transport_record() -> None:
    """The end of a capture is no end of the connection: no record, and the summary says the
    connection had not ended (`transport` null) and is still open, with no finding."""
    with open_capture(str(CAPTURES / "10-send-receive.pcap")) as capture:
        packets = list(capture)
    half = packets[: len(packets) // 2]
    found = list(Dissector().run(half))
    assert found and not [f for f in found if f.kind == "transport"]
    tracker = Tracker()
    for frame in found:
        tracker.feed(frame)
    tracker.finish()
    (conn,) = tracker.summary()["connections"]
    assert (conn["state"], conn["transport"]) == ("open", None)
    assert not [f for f in tracker.findings if f.code.endswith("transport-closed")]


@pytest.mark.parametrize(
    ("name", "state", "transport"),
    [
        # RabbitMQ resets after the client's FIN even when everything closed cleanly: the
        # client ended the TCP connection first
        ("091-publish-consume", "closed", "fin by client"),
        # the broker's connection.close 403 ends a refused login: no close-ok came back; pika
        # hangs up first
        ("091-refused-login", "closing", "fin by client"),
        # the SASL outcome was auth, so no AMQP connection was ever opened
        ("10-sasl-failed", "sasl-failed", "fin by client"),
        ("10-tls-inband", "closed", "fin by server"),
    ],
)
def test_an_amqp_connection_not_open_when_tcp_ended_is_not_dropped(
    name: str, state: str, transport: str
) -> None:
    summary = summary_of(CAPTURES / f"{name}.pcap")
    (conn,) = summary["connections"]
    assert (conn["state"], conn["transport"], conn["dropped"]) == (state, transport, False)
    assert not [f for f in summary["findings"] if f["code"].endswith("transport-closed")]


def test_the_killed_consumer_is_reported_dropped_with_its_unacked_deliveries() -> None:
    truth = json.loads((CAPTURES / "091-killed-consumer.json").read_text())["expect"]
    assert truth["killed_with"] == "SIGKILL" and truth["connection_closes"] == 0
    found = records(KILLED)
    assert not [f for f in found if f.name == "connection.close"]
    fin, last = found[-2:]
    assert (fin.kind, fin.name, fin.fields["by"]) == ("transport", "fin", "client")
    assert (last.kind, last.name, last.fields["by"]) == ("transport", "rst", "server")
    assert last.fields["after-fin"] == "client"  # the kernel closed the killed client's socket
    summary = summary_of(KILLED)
    (conn,) = summary["connections"]
    # the client ended the TCP connection first: its kernel's FIN
    assert (conn["state"], conn["transport"], conn["dropped"]) == ("open", "fin by client", True)
    assert conn["totals"]["unacked"] == truth["unacked_when_killed"]
    (channel,) = conn["channels"]
    assert channel["ended"] == "transport"
    dropped = [f for f in summary["findings"] if f["code"] == "amqp091.transport-closed"]
    (unacked,) = [f for f in summary["findings"] if f["code"] == "amqp091.unacked-at-end"]
    assert len(dropped) == 1 and dropped[0]["frame"] == unacked["frame"] == fin.number
    assert dropped[0]["severity"] == "warning"
    text = dropped[0]["message"]
    assert "client closed the TCP connection (FIN)" in text and "no connection.close" in text
    assert f"{truth['unacked_when_killed']} deliveries unacked" in text and "1 channel" in text
    assert f"{truth['unacked_when_killed']} deliveries" in unacked["message"]


def test_the_killed_consumer_reads_as_dropped_in_the_terminal() -> None:
    result = CliRunner().invoke(main, ["summary", str(KILLED), "--width", "200"])
    assert result.exit_code == 0, result.output
    assert "dropped (TCP FIN by client, no connection.close)" in result.stdout.splitlines()[0]
    read = CliRunner().invoke(main, ["read", str(KILLED), "--width", "400"])
    fin, last = read.stdout.splitlines()[-2:]
    assert "c1 →" in fin and "TCP FIN (client)" in fin and "amqp091.transport-closed" in fin
    assert "c1 ←" in last and "TCP RST (server, after the client's FIN)" in last


def _ipv4_tcp(sport: int, dport: int, seq: int, ack: int, flags: int, payload: bytes) -> bytes:
    """127.0.0.1:40000 (client) <-> 127.0.0.2:5672 (server), raw IPv4."""
    tcp = struct.pack(">HHIIBBHHH", sport, dport, seq, ack, 5 << 4, flags, 65535, 0, 0)
    total = 20 + len(tcp) + len(payload)
    client, server = b"\x7f\x00\x00\x01", b"\x7f\x00\x00\x02"
    src, dst = (client, server) if sport == 40000 else (server, client)
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, total, 1, 0, 64, 6, 0, src, dst)
    return ip + tcp + payload


def _connection(writes: list[tuple[str, bytes]], end: list[tuple[bool, int]]) -> list[RawPacket]:
    """A TCP connection 40000 -> 5672 with a handshake, `writes` as segments, then `end`:
    (client?, flags) segments with no payload."""
    out: list[RawPacket] = []
    seq = {True: 1000, False: 5000}

    def add(c2s: bool, flags: int, payload: bytes) -> None:
        sport, dport = (40000, 5672) if c2s else (5672, 40000)
        data = _ipv4_tcp(sport, dport, seq[c2s], seq[not c2s], flags | ACK, payload)
        out.append(RawPacket(len(out) + 1, 1.0 + len(out) / 1000, 101, data, len(data)))
        seq[c2s] = (seq[c2s] + len(payload) + (1 if flags & (SYN | FIN) else 0)) % (1 << 32)

    syn = _ipv4_tcp(40000, 5672, 1000, 0, SYN, b"")  # the client's SYN: no ACK
    out.append(RawPacket(1, 1.0, 101, syn, len(syn)))
    seq[True] = 1001
    add(False, SYN, b"")  # SYN-ACK
    for direction, chunk in writes:
        add(direction == "c2s", PSH, chunk)
    for c2s, flags in end:
        add(c2s, flags, b"")
    return out


def _sender_that_dies() -> list[tuple[str, bytes]]:
    """Proton: open, begin, attach, 3 unsettled transfers the receiver never settles; then
    nothing more (the client process died)."""
    pair = peers.ProtonPair()
    sender, _ = peers.open_link(pair, "doomed", 10)
    for i in range(3):
        sender.delivery(f"tag-{i}".encode())
        sender.send(peers.Message(body=f"m{i}").encode())
        sender.advance()
    pair.pump()
    return pair.conversation.writes


@pytest.mark.parametrize(
    ("end", "last_event", "by"),
    [
        ([(True, FIN), (False, RST)], "rst", "client"),  # killed: the kernel's FIN, a reset
        ([(False, FIN), (True, FIN)], "fin", "server"),  # the broker hung up
    ],
)
def test_a_dropped_10_connection_is_reported_once_with_what_it_left(
    end: list[tuple[bool, int]], last_event: str, by: str
) -> None:
    """Who ended the TCP connection first is who dropped it (the first FIN); the link ends
    when the client is gone: at its own FIN, or at the end after the broker's."""
    event = "fin"
    found = list(Dissector().run(_connection(_sender_that_dies(), end)))
    assert [f.name for f in found if f.name in ("close", "detach", "end")] == []
    first, last = found[-2:]
    assert (first.kind, first.name, first.fields["by"]) == ("transport", "fin", by)
    assert (last.kind, last.name) == ("transport", last_event)
    tracker = Tracker()
    for frame in found:
        tracker.feed(frame)
    tracker.finish()
    codes = [f.code for f in tracker.findings]
    assert codes == ["amqp10.transport-closed", "amqp10.unsettled-at-end"]
    gone = first if by == "client" else last
    assert [f.frame for f in tracker.findings] == [first.number, gone.number]
    dropped, unsettled = tracker.findings
    assert f"the {by}" in dropped.message and "(no close)" in dropped.message
    assert "1 session and 1 link still open, 3 deliveries unsettled" in dropped.message
    assert "3 deliveries left unsettled" in unsettled.message
    assert "when the TCP connection ended" in unsettled.message
    (conn,) = tracker.summary()["connections"]
    assert (conn["state"], conn["transport"], conn["dropped"]) == ("open", f"{event} by {by}", True)
    (session,) = conn["sessions"]
    assert session["state"] == "transport closed"


def test_the_second_fin_follows_what_the_codec_held_at_the_close(tmp_path: Path) -> None:
    """A record the codec still held when both FINs had come (here a TLS record behind a gap,
    the server's address mangled by tests/test_mutation) is given before the second FIN: that FIN
    is the connection's last record, where the Spark rows retire it (a record after it was lost
    from the connection's row)."""
    from tests.test_mutation import FILES, mutations

    source = next(f for f in FILES if f.name == "10-tls-inband.pcap")
    _, data = next(iter(mutations(source)))
    path = tmp_path / "mutated.pcap"
    path.write_bytes(data)
    first = [f for f in records(path) if f.conn == 1]
    names = [(f.kind, f.name) for f in first]
    assert ("transport", "fin") in names[:-1] and "tls" in [f.name for f in first]
    assert names[-1] == ("transport", "fin")  # the second FIN, after the held TLS record
