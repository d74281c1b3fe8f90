"""Big captures for the benchmark, synthesised at run time from recorded conversations.

A recorded conversation (a bundled capture of pika or Qpid Proton talking to RabbitMQ) gives the
handshake, the frames of one message and the teardown, byte for byte. The middle is repeated as
often as asked, on one connection, with what must change patched in: each message its own
message-id (`<recorded id>-<n>`) and body, as an application sends them, the frames and
sections around them re-encoded to their new sizes; 0-9-1 delivery tags; 1.0 delivery ids, tags
and the flows and dispositions that keep credit, session windows and settlement consistent.
The frames go out in TCP segments with consistent sequence and acknowledgement numbers (a
handshake, one segment per client write as pika and Proton do, the broker's writes batched, a
FIN each way), so both amqpscope and tshark see one clean, long conversation: `amqpscope
summary` of it has no findings.

    build_091(path, messages)   publish, consume with prefetch 5, ack each: 0-9-1
    build_10(path, messages)    send (credit 65536), receive (credit 50), settle: AMQP 1.0
    multiply(source, target, n) many short connections: a recorded capture repeated n times,
                                each copy with its own client port and later timestamps
"""

from __future__ import annotations

import struct
from pathlib import Path

from scapy.utils import RawPcapReader

from amqpscope.capture.files import open_capture
from amqpscope.codec.amqp091.frames import FRAME_HEADER as FRAME_HEADER_091
from amqpscope.codec.amqp10 import composites
from amqpscope.codec.amqp10.types import Context, read_value
from amqpscope.codec.frames import Frame
from amqpscope.dissect import Dissector

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
SOURCE_091 = CAPTURES / "091-qos-prefetch.pcap"
SOURCE_10 = CAPTURES / "10-send-receive.pcap"
MSS = 65483  # loopback's
PACKET_GAP = 0.000_02  # seconds between packets


def recorded(path: Path) -> list[Frame]:
    """Every frame of a recorded capture (one connection), with its direction and bytes."""
    with open_capture(path) as capture:
        return list(Dissector(show_secrets=True).run(capture))


class PcapWriter:
    """Ethernet/IPv4/TCP packets of one connection into a microsecond pcap."""

    def __init__(self, path: Path, start: float) -> None:
        self.out = path.open("wb")
        self.out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
        self.ts = start
        self.packets = 0

    def packet(self, src: tuple[bytes, int], dst: tuple[bytes, int], tcp: bytes) -> None:
        ip = struct.pack(
            ">BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0x4000, 64, 6, 0, src[0], dst[0]
        )
        frame = b"\x00" * 12 + b"\x08\x00" + ip + tcp
        self.ts += PACKET_GAP
        sec = int(self.ts)
        usec = round((self.ts - sec) * 1e6)
        self.out.write(struct.pack("<IIII", sec, usec, len(frame), len(frame)))
        self.out.write(frame)
        self.packets += 1

    def close(self) -> None:
        self.out.close()


class Conversation:
    """One TCP connection: each side's next sequence number, segments cut at the MSS."""

    SYN, FIN, PSH, ACK = 0x02, 0x01, 0x08, 0x10

    def __init__(self, pcap: PcapWriter, client_port: int, server_port: int) -> None:
        self.pcap = pcap
        self.ends = {
            "c2s": ((b"\x7f\x00\x00\x01", client_port), (b"\x7f\x00\x00\x01", server_port)),
            "s2c": ((b"\x7f\x00\x00\x01", server_port), (b"\x7f\x00\x00\x01", client_port)),
        }
        self.seq = {"c2s": 1_000_000, "s2c": 3_000_000_000}
        self._segment("c2s", self.SYN, b"", ack=False)
        self._segment("s2c", self.SYN | self.ACK, b"")
        self._segment("c2s", self.ACK, b"")

    def _segment(self, direction: str, flags: int, payload: bytes, ack: bool = True) -> None:
        other = "s2c" if direction == "c2s" else "c2s"
        (src, dst) = self.ends[direction]
        seq = self.seq[direction]
        header = struct.pack(
            ">HHIIBBHHH", src[1], dst[1], seq, self.seq[other] if ack else 0, 5 << 4, flags,
            65535, 0, 0,
        )  # fmt: skip
        self.pcap.packet(src, dst, header + payload)
        self.seq[direction] = (seq + len(payload) + (1 if flags & (self.SYN | self.FIN) else 0)) % (
            1 << 32
        )

    def send(self, direction: str, data: bytes) -> None:
        """One write of a peer: as many segments as the MSS needs."""
        for at in range(0, len(data), MSS):
            self._segment(direction, self.PSH | self.ACK, data[at : at + MSS])

    def ack(self, direction: str) -> None:
        self._segment(direction, self.ACK, b"")

    def close(self) -> None:
        self._segment("c2s", self.FIN | self.ACK, b"")
        self._segment("s2c", self.FIN | self.ACK, b"")
        self._segment("c2s", self.ACK, b"")


def _replay(conv: Conversation, frames: list[Frame]) -> None:
    """Recorded frames as they were sent: the frames of one packet in one write."""
    group: list[Frame] = []
    for frame in frames:
        if group and (frame.packet != group[0].packet or frame.direction != group[0].direction):
            conv.send(group[0].direction, b"".join(f.data for f in group))
            group = []
        group.append(frame)
    if group:
        conv.send(group[0].direction, b"".join(f.data for f in group))


# -- AMQP 0-9-1 ----------------------------------------------------------------------------------


def _frame091(ftype: int, channel: int, payload: bytes) -> bytes:
    return FRAME_HEADER_091.pack(ftype, channel, len(payload)) + payload + b"\xce"


def _shortstr(text: str) -> bytes:
    raw = text.encode()
    return bytes((len(raw),)) + raw


def _content(header: Frame, number: int) -> bytes:
    """The content header and body of message `number`: the recorded message's properties
    (content-type, message-id) with a message-id and body of its own, as an application sends."""
    properties = header.fields["properties"]
    assert header.fields["property-flags"] == "0x8080", "content-type and message-id only"
    body = f"work item {number}".encode()
    props = _shortstr(properties["content-type"]) + _shortstr(
        f"{properties['message-id']}-{number}"
    )
    head = struct.pack(">HHQH", header.fields["class-id"], 0, len(body), 0x8080) + props
    return _frame091(2, header.channel, head) + _frame091(3, header.channel, body)


def build_091(path: Path, messages: int, source: Path = SOURCE_091) -> int:
    """One pika-like connection that publishes `messages` in batches of 100 and consumes them
    with prefetch 5, acking each; returns the number of packets written."""
    frames = recorded(source)
    names = [f.name for f in frames]
    publish = names.index("basic.publish")
    consume = names.index("basic.consume")
    deliver = names.index("basic.deliver")
    cancel = names.index("basic.cancel")
    ack = names.index("basic.ack")
    prefetch = next(f.fields["prefetch-count"] for f in frames if f.name == "basic.qos")
    publish_frame = frames[publish].data
    header = frames[publish + 1]
    deliver_frame = frames[deliver].data
    ack_frame = frames[ack].data
    # basic.deliver: consumer-tag (shortstr), delivery-tag (longlong), ...; basic.ack: the tag
    tag_at = FRAME_HEADER_091.size + 4 + 1 + deliver_frame[FRAME_HEADER_091.size + 4]
    ack_tag_at = FRAME_HEADER_091.size + 4

    pcap = PcapWriter(path, frames[0].ts)
    conv = Conversation(pcap, 40001, 5672)
    _replay(conv, frames[:publish])
    _replay(conv, frames[consume : consume + 2])  # basic.consume, consume-ok: the consumer is up
    tag = 0
    for batch in range(0, messages, 100):
        contents = [_content(header, number) for number in range(batch, min(batch + 100, messages))]
        for content in contents:
            conv.send("c2s", publish_frame + content)
        conv.ack("s2c")
        count = len(contents)
        for window in range(0, count, prefetch):
            writes = []
            for _ in range(min(prefetch, count - window)):
                frame = bytearray(deliver_frame)
                struct.pack_into(">Q", frame, tag_at, tag + 1)
                writes.append(bytes(frame) + contents[tag - batch])
                tag += 1
            conv.send("s2c", b"".join(writes))
            for acked in range(tag - len(writes) + 1, tag + 1):
                frame = bytearray(ack_frame)
                struct.pack_into(">Q", frame, ack_tag_at, acked)
                conv.send("c2s", bytes(frame))
            conv.ack("s2c")
    _replay(conv, frames[cancel:])
    conv.close()
    pcap.close()
    return pcap.packets


# -- AMQP 1.0 ------------------------------------------------------------------------------------


def _uint(value: int) -> bytes:
    if value == 0:
        return b"\x43"
    if value < 256:
        return b"\x52" + bytes((value,))
    return b"\x70" + struct.pack(">I", value)


def _list(code: int, items: list[bytes]) -> bytes:
    """A described list, as Proton encodes it (list8 when it fits)."""
    body = b"".join(items)
    if len(body) + 1 < 256:
        encoded = b"\xc0" + bytes((len(body) + 1, len(items))) + body
    else:
        encoded = b"\xd0" + struct.pack(">II", len(body) + 4, len(items)) + body
    return b"\x00\x53" + bytes((code,)) + encoded


def _frame10(channel: int, body: bytes) -> bytes:
    return struct.pack(">IBBH", 8 + len(body), 2, 0, channel) + body


TRUE, FALSE = b"\x41", b"\x42"
ACCEPTED = b"\x00\x53\x24\x45"


def _transfer(handle: int, delivery_id: int, tag: bytes, payload: bytes) -> bytes:
    items = [_uint(handle), _uint(delivery_id), b"\xa0" + bytes((len(tag),)) + tag, b"\x43", FALSE]
    return _frame10(0, _list(0x14, items) + payload)


def _disposition(first: int, last: int) -> bytes:
    items = [TRUE, _uint(first), _uint(last), TRUE, ACCEPTED]
    return _frame10(0, _list(0x15, items))


def _flow(next_in: int, in_win: int, next_out: int, out_win: int, handle: int, count: int,
          credit: int) -> bytes:  # fmt: skip
    items = [_uint(v) for v in (next_in, in_win, next_out, out_win, handle, count, credit)]
    return _frame10(0, _list(0x13, items))


def _payload(frame: Frame) -> bytes:
    """The message bytes after a recorded transfer's performative."""
    _, _, pos = composites.decode_body(Context(memoryview(frame.data)), frame.data[4] * 4,
                                       len(frame.data))  # fmt: skip
    return frame.data[pos:]


def _values(data: bytes, off: int, end: int) -> list[bytes]:
    """The encoded values of `data[off:end]`, one after another, each as its bytes."""
    ctx = Context(memoryview(data))
    out = []
    while off < end:
        _, after = read_value(ctx, off, end)
        out.append(data[off:after])
        off = after
    return out


def _binary(code: int, raw: bytes) -> bytes:
    """A string (code 0xa1) or binary (0xa0) of `raw`, in its one-byte-size form when it fits."""
    if len(raw) < 256:
        return bytes((code, len(raw))) + raw
    return bytes((code + 0x10,)) + struct.pack(">I", len(raw)) + raw


PROPERTIES, DATA, AMQP_VALUE = 0x73, 0x75, 0x77  # section descriptors


def _message10(payload: bytes, number: int) -> bytes:
    """A recorded 1.0 message as message `number`: its properties' message-id
    `<recorded id>-<number>` and a body of its own (a data or string amqp-value section),
    the other sections as recorded."""
    out = []
    for section in _values(payload, 0, len(payload)):
        code, value = section[2], section[3:]
        assert section[:2] == b"\x00\x53", "sections with a numeric descriptor"
        if code == PROPERTIES:
            assert value[0] == 0xC0, "properties as a list8"
            items = _values(value, 3, len(value))
            (recorded_id, _) = read_value(Context(memoryview(items[0])), 0, len(items[0]))
            assert isinstance(recorded_id, str), "a string message-id"
            items[0] = _binary(0xA1, f"{recorded_id}-{number}".encode())
            body = b"".join(items)
            size = len(body) + 1
            head = b"\xc0" + bytes((size, len(items))) if size < 256 else (
                b"\xd0" + struct.pack(">II", len(body) + 4, len(items))
            )  # fmt: skip
            section = section[:3] + head + body
        elif code == DATA:
            section = section[:3] + _binary(0xA0, f"work item {number}".encode())
        elif code == AMQP_VALUE:
            assert value[0] in (0xA1, 0xB1), "a string amqp-value"
            section = section[:3] + _binary(0xA1, f"work item {number}".encode())
        out.append(section)
    return b"".join(out)


def build_10(
    path: Path, messages: int, source: Path = SOURCE_10, batch: int = 50, per_write: int = 1
) -> int:
    """One Proton-like connection: a sender link sends `messages` (RabbitMQ settles each batch
    with one disposition and tops up credit and window), a receiver link takes them back with
    credit `batch` and settles each batch; returns the number of packets written. `per_write`:
    transfers per TCP segment, both ways (1: each message in a packet of its own, as a client
    sending one message at a time and a broker delivering each as it goes write them; the
    benchmark's 52,500 messages are then 108,000 packets)."""
    frames = recorded(source)
    names = [(f.name, f.direction) for f in frames]
    send_flow = names.index(("flow", "s2c"))  # RabbitMQ grants the sender its credit
    sent = next(f for f in frames if f.name == "transfer" and f.direction == "c2s")
    received = next(f for f in frames if f.name == "transfer" and f.direction == "s2c")
    attaches = [f for f in frames[send_flow:] if f.name == "attach"]  # the receiver link
    teardown = names.index(("detach", "c2s"))
    client_payload, server_payload = _payload(sent), _payload(received)
    server_window = 65535  # RabbitMQ's session windows, as its begin says
    client_window = 2147483647

    pcap = PcapWriter(path, frames[0].ts)
    conv = Conversation(pcap, 40002, 5672)
    _replay(conv, frames[: send_flow + 1])
    _replay(conv, attaches)
    conv.send("c2s", _flow(0, client_window, 0, client_window, 1, 0, batch))
    done = 0
    while done < messages:
        count = min(batch, messages - done)
        ids = range(done, done + count)
        sent = [_transfer(0, i, str(i).encode(), _message10(client_payload, i)) for i in ids]
        for at in range(0, count, per_write):  # what the client has, `per_write` a segment
            conv.send("c2s", b"".join(sent[at : at + per_write]))
        conv.send(
            "s2c",
            _disposition(done, done + count - 1)
            + _flow(done + count, server_window, done, server_window, 0, done + count, 65536),
        )
        back = [
            _transfer(1, i, struct.pack(">Q", i + 1), _message10(server_payload, i)) for i in ids
        ]
        for at in range(0, count, per_write):
            conv.send("s2c", b"".join(back[at : at + per_write]))
        done += count
        conv.send(
            "c2s",
            _disposition(ids[0], ids[-1])
            + _flow(done, client_window, done, client_window, 1, done, batch),
        )
        conv.ack("s2c")
    _replay(conv, frames[teardown:])
    conv.close()
    pcap.close()
    return pcap.packets


def multiply(source: Path, target: Path, copies: int) -> int:
    """Write `copies` of `source` into `target`; returns the number of packets written."""
    packets = list(RawPcapReader(str(source)))
    if not packets:
        raise ValueError(f"{source}: no packets")
    span = packets[-1][1].sec - packets[0][1].sec + 1
    with target.open("wb") as out:
        out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
        for copy in range(copies):
            for data, meta in packets:
                frame = bytearray(data)
                if len(frame) >= 38 and frame[12:14] == b"\x08\x00" and frame[23] == 6:
                    tcp = 14 + (frame[14] & 0x0F) * 4
                    sport, dport = struct.unpack_from(">HH", frame, tcp)
                    if sport > dport:
                        struct.pack_into(">H", frame, tcp, 20000 + (sport + copy) % 40000)
                    else:
                        struct.pack_into(">H", frame, tcp + 2, 20000 + (dport + copy) % 40000)
                out.write(
                    struct.pack(
                        "<IIII", meta.sec + copy * span, meta.usec, len(frame), meta.wirelen
                    )
                )
                out.write(frame)
    return copies * len(packets)
