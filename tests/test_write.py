"""`read -w`: the cut holds the selected frames' packets and their connections' handshakes, and
nothing else; tshark and amqpscope read it back; pcapng keeps its interfaces and TLS secrets;
the input is never overwritten; memory is bounded by the cut's window."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from amqpscope.capture.files import open_capture
from amqpscope.capture.packet import RawPacket
from amqpscope.capture.writer import _sum16, mask_packet
from amqpscope.cli import main
from amqpscope.dissect import Dissector
from amqpscope.stream.events import StreamData
from amqpscope.writing.cut import Cut
from amqpscope.writing.masking import secret_spans
from tests.oracle import TSHARK, missing, tshark_frames, tshark_or_skip
from tests.test_cli import INTERRUPT_AT
from tests.test_websocket import ws_wire

CAPTURES = Path(__file__).resolve().parent.parent / "captures"


def cut(tmp_path: Path, name: str, *args: str, out: str = "cut.pcap") -> Path:
    target = tmp_path / out
    result = CliRunner().invoke(
        main, ["read", str(CAPTURES / name), *args, "-w", str(target)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    assert "written to" in result.stderr
    return target


def dissect(path: Path) -> list:
    with open_capture(str(path)) as capture:
        return [f for f in Dissector().run(capture) if f.kind != "transport"]


def packets(path: Path) -> list[bytes]:
    with open_capture(str(path)) as capture:
        return [p.data for p in capture]


def test_conn_alone_cuts_one_connection_whole(tmp_path: Path) -> None:
    """091-rpc.pcap holds two connections (an RPC server and its client): --conn 2 -w writes
    every packet of the second and none of the first; both readers read it back."""
    out = cut(tmp_path, "091-rpc.pcap", "--conn", "2", "--show-secrets")  # bytes as captured
    source = dissect(CAPTURES / "091-rpc.pcap")
    mine = [(f.name, f.data) for f in source if f.conn == 2]
    back = dissect(out)
    assert {f.conn for f in back} == {1}  # the only connection of the cut
    assert [(f.name, f.data) for f in back] == mine
    assert not [f for f in back if f.findings]  # read from its SYN: no gap, no resync
    cut_packets = packets(out)
    assert set(cut_packets) <= set(packets(CAPTURES / "091-rpc.pcap"))
    tshark_or_skip()
    theirs = tshark_frames(str(out))
    assert len(theirs) >= len(mine) - 1  # all but the client's header (test_vs_tshark)
    assert subprocess.run(["tshark", "-r", str(out)], capture_output=True).returncode == 0


def test_a_filter_cuts_its_frames_and_their_connections_opening(tmp_path: Path) -> None:
    out = cut(tmp_path, "091-rpc.pcap", "-Y", 'name == "basic.publish"')
    source = dissect(CAPTURES / "091-rpc.pcap")
    back = dissect(out)
    chosen = Counter(f.data for f in source if f.name == "basic.publish")
    assert Counter(f.data for f in back if f.name == "basic.publish") == chosen
    opening = {"protocol-header", "connection.start", "connection.start-ok", "connection.tune"}
    opening |= {"connection.tune-ok", "connection.open", "connection.open-ok"}
    # nothing else, but frames that shared a packet with a chosen one
    shared = {p for f in source if f.name == "basic.publish" for p in [f.packet]}
    others = [f for f in back if f.name != "basic.publish" and f.name not in opening]
    by_data = {f.data: f for f in source}
    assert all(by_data[f.data].packet in shared for f in others)
    assert {f.name for f in back} >= opening


def test_pcapng_keeps_its_interfaces_and_secrets_and_still_decrypts(tmp_path: Path) -> None:
    name = "091-tls13-embedded.pcapng"
    out = cut(tmp_path, name, "-Y", 'name == "basic.publish"', out="cut.out")
    raw = out.read_bytes()
    assert raw[:4] == b"\x0a\x0d\x0d\x0a"  # a pcapng Section Header Block
    with open_capture(str(out)) as capture:
        list(capture)
        with open_capture(str(CAPTURES / name)) as source:
            list(source)
            assert capture.secrets == source.secrets and capture.secrets
            assert [(i.linktype, i.ts_resolution) for i in capture.interfaces] == [
                (i.linktype, i.ts_resolution) for i in source.interfaces
            ]
    back = dissect(out)  # decrypted with the secrets the cut carries, no key log given
    assert [f.name for f in back].count("basic.publish") == [
        f.name for f in dissect(CAPTURES / name)
    ].count("basic.publish")
    tshark_or_skip()
    names = [n for _, n in tshark_frames(str(out))]
    assert "basic.publish" in names


def test_the_input_is_never_overwritten_and_dash_is_stdout(tmp_path: Path) -> None:
    copy = tmp_path / "in.pcap"
    copy.write_bytes((CAPTURES / "091-get.pcap").read_bytes())
    before = copy.read_bytes()
    result = CliRunner().invoke(main, ["read", str(copy), "-w", str(copy)])
    assert result.exit_code == 2 and "input being read" in result.stderr
    assert copy.read_bytes() == before
    command = ["read", str(copy), "--conn", "1", "-w", "-", "--show-secrets"]  # start-ok as is
    done = subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", *command],
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0
    assert struct.unpack("<I", done.stdout[:4])[0] == 0xA1B2C3D4  # pcap, as the input
    back = tmp_path / "back.pcap"
    back.write_bytes(done.stdout)
    assert packets(back) == packets(copy)  # the one connection: every packet, same bytes


@pytest.mark.parametrize("window", [16 * 1024, 256 * 1024])
def test_the_window_bounds_memory_and_counts_what_it_lost(window: int) -> None:
    """The 300 KB message is sent in 4 KB frames: a window smaller than a frame's packets
    loses some of them (counted, never silently), one large enough loses none; the window
    never holds more than its size plus one packet."""
    biggest = max(len(p) for p in packets(CAPTURES / "10-large-message.pcap"))
    holder = Cut(window=window)
    dissector = Dissector(carriers=True)
    peak = 0
    with open_capture(str(CAPTURES / "10-large-message.pcap")) as capture:
        for raw in capture:
            frames = dissector.feed(raw)
            for frame in frames:
                holder.frame(frame, frame.name == "transfer")
            segment = dissector.segment
            conn = dissector.conn_of(segment) if segment is not None else None
            holder.packet(raw, conn, False)
            peak = max(peak, holder.window_bytes)
            holder.take()
    assert peak <= window + biggest
    if window < biggest:
        assert holder.lost > 0
    else:
        assert holder.lost == 0


def test_ctrl_c_leaves_the_cut_of_what_was_read(tmp_path: Path) -> None:
    """As tcpdump -w's file after Ctrl-C: readable, with the frames read so far (they were
    still in the window), not an empty file; then one line and 130."""
    name = "091-publish-consume.pcap"
    out = tmp_path / "cut.pcap"
    result = subprocess.run(
        [sys.executable, "-c", INTERRUPT_AT, "40", "read", str(CAPTURES / name), "-w", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert (result.returncode, result.stderr) == (130, "amqpscope: interrupted\n")
    got = [(f.number, f.name) for f in dissect(out)]
    whole = [(f.number, f.name) for f in dissect(CAPTURES / name)]
    assert len(whole) > 60 and len(got) >= 30
    assert got == whole[: len(got)]


BUNDLED = sorted(
    p.name for p in CAPTURES.iterdir() if p.suffix in (".pcap", ".pcapng") and p.is_file()
)


def ends(path: Path, *args: str) -> tuple[dict[int, str], dict[str, tuple], list[tuple]]:
    """`summary --json`'s connections (id -> client) and, by client endpoint (a cut numbers its
    connections afresh), each connection's end and its findings' codes."""
    result = CliRunner().invoke(main, ["summary", "--json", str(path), *args])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    who = {c["id"]: c["client"] for c in summary["connections"]}
    end = {  # the close's frame number aside: a cut of one connection numbers frames afresh
        c["client"]: (c["state"], c["transport"], c["close"] and c["close"] | {"frame": 0})
        for c in summary["connections"]
    }
    findings = sorted((f["code"], who.get(f.get("conn"))) for f in summary["findings"])
    return who, end, findings


@pytest.mark.parametrize("name", BUNDLED)
def test_a_cut_ends_each_connection_as_the_capture_did(tmp_path: Path, name: str) -> None:
    """FIN and RST packets carry no frame, but say how a connection ended: a cut of everything
    (no filter), and a cut of each connection by a filter (`-Y 'conn == N'`: not `--conn N`
    alone, which cuts it whole), read back with the same ends and no finding the capture had
    not (no `tcp.reset` for a connection that ended with a FIN, no gap)."""
    keys = CAPTURES / (name.rsplit(".", 1)[0] + ".keys")
    keylog = ("--keylog", str(keys)) if keys.exists() else ()
    who, end, findings = ends(CAPTURES / name, *keylog)
    suffix = ".pcapng" if name.endswith(".pcapng") else ".pcap"
    out = cut(tmp_path, name, *keylog, out="all" + suffix)
    assert ends(out, *keylog)[1:] == (end, findings)
    for conn, client in who.items():
        out = cut(tmp_path, name, "-Y", f"conn == {conn}", *keylog, out=f"c{conn}{suffix}")
        _, back_end, back_findings = ends(out, *keylog)
        assert back_end == {client: end[client]}
        assert back_findings == [f for f in findings if f[1] == client]


def credentials(path: Path) -> list[bytes]:
    """The SASL PLAIN responses `path` carries, as on the wire (`\\0user\\0password`)."""
    with open_capture(str(path)) as capture:
        frames = list(Dissector(show_secrets=True).run(capture))
    out = []
    for frame in frames:
        if frame.name in ("sasl-init", "connection.start-ok"):
            fields = frame.fields
            plain = fields.get("initial-response") or fields.get("response")
            assert isinstance(plain, dict) and plain["password"], fields
            out.append(f"{plain['authzid']}\0{plain['username']}\0{plain['password']}".encode())
    return out


@pytest.mark.parametrize(
    "name", ["10-sasl-plain.pcap", "10-sasl-failed.pcap", "091-refused-login.pcap"]
)
def test_a_cut_masks_credentials_unless_asked(tmp_path: Path, name: str) -> None:
    """The cut holds no password (masked, the same length: every packet as long as before; the
    user kept, as `read` shows it), unless --show-secrets, which writes the
    captured packets byte for byte. Both read back, with tshark too, frame for frame."""
    secrets = credentials(CAPTURES / name)
    assert secrets
    original = packets(CAPTURES / name)
    shown = cut(tmp_path, name, "--show-secrets", out="shown.pcap")
    masked = cut(tmp_path, name)
    assert set(packets(shown)) <= set(original)
    raw = masked.read_bytes()
    assert all(secret not in raw for secret in secrets)
    for secret in secrets:  # the password masked, the user kept (every output shows it)
        user, password = secret.rsplit(b"\0", 1)
        assert user + b"\0" + b"*" * len(password) in raw
    assert all(secret in shown.read_bytes() for secret in secrets)
    changed = [(a, b) for a, b in zip(packets(shown), packets(masked), strict=True) if a != b]
    assert len(changed) == len(secrets) and all(len(a) == len(b) for a, b in changed)
    names = [f.name for f in dissect(shown)]
    assert [f.name for f in dissect(masked)] == names
    assert not [f for f in dissect(masked) if f.findings]  # the TCP stream is whole still
    tshark_or_skip()
    for out in (shown, masked):
        done = subprocess.run(["tshark", "-r", str(out)], capture_output=True)
        assert done.returncode == 0 and b"Malformed" not in done.stdout
    assert tshark_frames(str(masked)) == tshark_frames(str(shown))


def tcp_checksum(data: bytes, ip: int) -> int:
    """The TCP checksum over an IPv4 packet at `ip` in `data` (0 when right)."""
    hlen = (data[ip] & 15) * 4
    total = struct.unpack_from("!H", data, ip + 2)[0]
    segment = data[ip + hlen : ip + total]
    pseudo = data[ip + 12 : ip + 20] + struct.pack("!BBH", 0, 6, len(segment))
    return ~_sum16(pseudo + segment) & 0xFFFF


def test_masking_keeps_a_right_tcp_checksum_right() -> None:
    """Loopback captures carry checksums the kernel never filled in; a packet whose checksum
    was right (made so here) is still right once masked (RFC 1624's update)."""
    with open_capture(str(CAPTURES / "10-sasl-plain.pcap")) as capture:
        frames = list(Dissector(carriers=True).run(capture))
    with open_capture(str(CAPTURES / "10-sasl-plain.pcap")) as capture:
        by_number = {p.number: p for p in capture}
    frame = next(f for f in frames if f.name == "sasl-init")
    ((number, spans),) = secret_spans(frame).items()
    packet = by_number[number]
    ip = 14 if packet.linktype == 1 else 4 if packet.linktype in (0, 108) else 16
    data = bytearray(packet.data)
    struct.pack_into("!H", data, ip + 20 + 16, 0)
    struct.pack_into("!H", data, ip + 20 + 16, tcp_checksum(bytes(data), ip))
    assert tcp_checksum(bytes(data), ip) == 0
    right = RawPacket(packet.number, packet.ts, packet.linktype, bytes(data), packet.wirelen)
    masked = mask_packet(right, spans)
    assert masked.data != right.data and len(masked.data) == len(right.data)
    assert tcp_checksum(masked.data, ip) == 0


def stream_writes(path: Path) -> list[tuple[str, bytes]]:
    """The AMQP bytes of `path`'s one connection as its peers wrote them, by direction, in order
    (the stream layer's reassembly)."""
    dissector = Dissector()
    out: list[tuple[str, bytes]] = []
    with open_capture(str(path)) as capture:
        for packet in capture:
            segment = dissector.segments.decode(packet)
            for event in dissector.tcp.feed(segment) if segment else ():
                if isinstance(event, StreamData):
                    out.append((event.direction, bytes(event.data)))
    return out


def write_conversation(path: Path, wire: list[tuple[str, bytes]], segment: int) -> None:
    """An Ethernet/IPv4/TCP capture of `wire` (bytes by direction) between a client and port 80
    (where tshark looks for HTTP and follows the WebSocket upgrade), each write cut into TCP
    segments of `segment` bytes (0: one segment), with right checksums (scapy's)."""
    from scapy.all import IP, TCP, Ether, wrpcap  # type: ignore[attr-defined]

    ends = {"c2s": (("10.0.0.1", 40000), ("10.0.0.2", 80))}
    ends["s2c"] = (ends["c2s"][1], ends["c2s"][0])
    seq = {"c2s": 1000, "s2c": 5000}

    def tcp(direction: str, flags: str, payload: bytes = b"") -> Any:
        (src, sport), (dst, dport) = ends[direction]
        ack = seq["s2c" if direction == "c2s" else "c2s"]
        head = TCP(sport=sport, dport=dport, flags=flags, seq=seq[direction], ack=ack)
        seq[direction] += len(payload) + (flags in ("S", "SA"))
        return Ether() / IP(src=src, dst=dst) / head / payload

    out = [tcp("c2s", "S"), tcp("s2c", "SA"), tcp("c2s", "A")]
    for direction, data in wire:
        step = segment or len(data)
        out.extend(tcp(direction, "PA", data[i : i + step]) for i in range(0, len(data), step))
    wrpcap(str(path), out)


def ws_messages(path: Path) -> list[bytes]:
    """The WebSocket messages of `path` as tshark reassembles and unmasks them."""
    command = ["tshark", "-r", str(path), "-Y", "websocket", "-T", "fields", "-e", "data.data"]
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=120)
    hexes = done.stdout.replace(":", "").split()
    return [bytes.fromhex(h) for line in hexes for h in line.split(",") if h]


@pytest.mark.skipif(not TSHARK, reason=missing("tshark"))
@pytest.mark.parametrize("fragment", [0, 5])
@pytest.mark.parametrize("segment", [0, 7])
def test_a_websocket_cut_masks_the_password_inside_the_frames(
    tmp_path: Path, fragment: int, segment: int
) -> None:
    """The client's WebSocket frames are XOR-masked, which hides nothing: the password inside
    the unmasked payload is masked and re-masked with the frame's own key, so the cut is still
    WebSocket of the same length that tshark and amqpscope unwrap, with `*` where the password
    was; --show-secrets writes it as captured. 10-sasl-plain's recorded bytes are carried by the
    websockets package (`fragment`: payload bytes per WebSocket frame, so the password spans
    frames with different keys), over TCP segments of `segment` bytes (the frames cut across
    packets)."""
    (secret,) = credentials(CAPTURES / "10-sasl-plain.pcap")
    user, password = secret.rsplit(b"\0", 1)
    source = tmp_path / "ws.pcap"
    wire = ws_wire(stream_writes(CAPTURES / "10-sasl-plain.pcap"), fragment=fragment)
    write_conversation(source, wire, segment)
    original = packets(source)
    assert any(secret in message for message in ws_messages(source))

    def cut_ws(*args: str, out: str) -> Path:
        target = tmp_path / out
        command = ["read", str(source), *args, "-w", str(target)]
        result = CliRunner().invoke(main, command, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return target

    shown = cut_ws("--show-secrets", out="shown.pcap")
    masked = cut_ws(out="masked.pcap")
    assert packets(shown) == original
    messages = b"|".join(ws_messages(masked))
    assert secret not in messages and user + b"\0" + b"*" * len(password) in messages
    assert any(secret in message for message in ws_messages(shown))
    changed = [(a, b) for a, b in zip(original, packets(masked), strict=True) if a != b]
    assert changed and all(len(a) == len(b) for a, b in changed)
    assert all(tcp_checksum(b, 14) == 0 for _, b in changed)  # right before, right after
    back = dissect(masked)
    assert [f.name for f in back] == [f.name for f in dissect(shown)]
    assert not [f for f in back if f.findings]  # every WebSocket frame still reads
    with open_capture(str(masked)) as capture:
        frames = list(Dissector(show_secrets=True).run(capture))
    (init,) = [f for f in frames if f.name == "sasl-init"]
    assert init.fields["initial-response"]["password"] == "*" * len(password)
