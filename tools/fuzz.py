#!/usr/bin/env python3
"""Structure-aware mutation fuzzing: every bundled capture, damaged, through the whole pipeline.

Why: byte flips alone rarely make a well-formed value of the wrong type (a map where a
delivery-tag's binary belongs, a list for a handle), yet any peer may send one. Here each
capture's AMQP frames are taken apart into values (1.0) or arguments and field tables (0-9-1),
damaged as a hostile peer could, put back together (sizes fixed up, or left lying on purpose)
and written as a fresh capture; other runs damage the original file's bytes, its TLS records and
WebSocket frames in place. Each mutated capture goes, in this one process, through the dissector,
the tracker, the NDJSON and timeline renderers and the summary; an exception, or an input that
takes longer than `SLOW_SECONDS`, is a failure, and the input is kept.

    python3 tools/fuzz.py --seconds 60                 # one minute, seed 0
    python3 tools/fuzz.py --count 1000000 --log /tmp/fuzz.log --keep captures/regressions
    python3 tools/fuzz.py --replay captures/regressions/*.pcap

The mutations of a given seed and index are always the same (`mutant(seed, index)`), so a
failure is reproduced by its (seed, index) as well as by the kept file.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import resource
import signal
import struct
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.append(str(ROOT))

from amqpscope.capture.files import open_capture  # noqa: E402
from amqpscope.codec.amqp091 import spec as spec091  # noqa: E402
from amqpscope.codec.amqp10 import spec as spec10  # noqa: E402
from amqpscope.dissect import Dissector  # noqa: E402
from amqpscope.track.tracker import Tracker  # noqa: E402

CAPTURES = ROOT / "captures"
SLOW_SECONDS = 10.0
#: one mutant in this many is also drawn by rich (a terminal's timeline and tables), which
#: takes most of an input's time; the others as piped output is
RICH_EVERY = 8

# -- writing a capture: Ethernet / IPv4 / TCP, one pcap record per packet ---------------------
CLIENT = (bytes([10, 0, 0, 1]), 40000)
SERVER = (bytes([10, 0, 0, 2]), 5672)
PCAP_HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)


def _checksum(header: bytes) -> int:
    total = sum(struct.unpack(f">{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def tcp_packet(c2s: bool, seq: int, ack: int, flags: int, payload: bytes) -> bytes:
    """One Ethernet frame of a segment between CLIENT and SERVER."""
    (sip, sport), (dip, dport) = (CLIENT, SERVER) if c2s else (SERVER, CLIENT)
    tcp = struct.pack(">HHIIBBHHH", sport, dport, seq, ack, 5 << 4, flags, 65535, 0, 0)
    ip = struct.pack(
        ">BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(payload), 0, 0, 64, 6, 0, sip, dip
    )
    ip = ip[:10] + struct.pack(">H", _checksum(ip)) + ip[12:]
    return b"\x02" * 6 + b"\x04" * 6 + b"\x08\x00" + ip + tcp + payload


SYN, ACK, PSH = 0x02, 0x10, 0x08


def write_pcap(segments: list[tuple[bool, bytes]], handshake: bool = True) -> bytes:
    """A capture of one TCP connection carrying `segments` ((from the client?, payload)) in
    order, each direction's sequence numbers running on. Packets are 1 ms apart."""
    seq = {True: 1000, False: 5000}
    packets = []
    if handshake:
        packets.append(tcp_packet(True, seq[True] - 1, 0, SYN, b""))
        packets.append(tcp_packet(False, seq[False] - 1, seq[True], SYN | ACK, b""))
        packets.append(tcp_packet(True, seq[True], seq[False], ACK, b""))
    for c2s, payload in segments:
        packets.append(tcp_packet(c2s, seq[c2s], seq[not c2s], PSH | ACK, payload))
        seq[c2s] = (seq[c2s] + len(payload)) & 0xFFFFFFFF
    return records(packets)


def records(packets: list[bytes]) -> bytes:
    out = io.BytesIO()
    out.write(PCAP_HEADER)
    for n, data in enumerate(packets):
        out.write(
            struct.pack("<IIII", 1_700_000_000 + n // 1000, (n % 1000) * 1000, len(data), len(data))
        )
        out.write(data)
    return out.getvalue()


def frame10(body: bytes, channel: int = 0, kind: int = 0) -> bytes:
    """An AMQP 1.0 frame (doff 2) around `body`."""
    return struct.pack(">IBBH", 8 + len(body), 2, kind, channel) + body


def frame091(kind: int, channel: int, payload: bytes) -> bytes:
    return struct.pack(">BHI", kind, channel, len(payload)) + payload + b"\xce"


# -- the seeds: each bundled capture's conversations, as frames -------------------------------
def load_keylog(path: Path) -> Any:
    """The TLS secrets of a bundled capture's key log."""
    from amqpscope.codec.tls import KeyLog

    keylog = KeyLog()
    keylog.add_text(path.read_text())
    return keylog


@dataclass
class Conversation:
    """One AMQP connection of a capture: its frames ((from the client?, bytes)) in order."""

    source: str
    version: str
    frames: list[tuple[bool, bytes]]


@dataclass
class Seed:
    path: Path
    raw: bytes
    conversations: list[Conversation]
    links: tuple[str, ...] = ()  # 1.0 link names, for --link
    queues: tuple[str, ...] = ()  # 0-9-1 queue names, for --queue


def seed_of(path: Path) -> Seed:
    """A capture and its AMQP connections' frames, decrypted with its key log if it has one."""
    frames: dict[int, list[Any]] = {}
    keylog = path.with_suffix(".keys")
    dissector = Dissector()
    if keylog.exists():
        dissector.context.keylog = load_keylog(keylog)
    links, queues = set(), set()
    with open_capture(path) as capture:
        for frame in dissector.run(capture):
            if frame.data:
                frames.setdefault(frame.conn, []).append(frame)
            if frame.name == "attach" and type(frame.fields.get("name")) is str:
                links.add(frame.fields["name"])
            if type(frame.fields.get("queue")) is str:
                queues.add(frame.fields["queue"])
    convs = [
        Conversation(path.name, fs[-1].version, [(f.direction == "c2s", bytes(f.data)) for f in fs])
        for fs in frames.values()
    ]
    return Seed(path, path.read_bytes(), convs, tuple(sorted(links)), tuple(sorted(queues)))


def seeds(directory: Path = CAPTURES) -> list[Seed]:
    """Every bundled capture, as a seed."""
    return [seed_of(p) for p in sorted(directory.iterdir()) if p.suffix in (".pcap", ".pcapng")]


# -- AMQP 1.0 values as a tree, to damage by structure ----------------------------------------
# a node: ("raw", bytes) | ("described", node, node)
#       | ("compound", ctor, [node], size lie, count lie)
Node = tuple[Any, ...]
_ENC = spec10.ENCODINGS
_DESCRIBED = 0x00


def parse10(buf: bytes, pos: int, end: int, depth: int = 0) -> tuple[Node, int]:
    """The value at `pos`; anything it cannot take apart is one raw node to the end."""
    if pos >= end:
        raise ValueError("empty")
    ctor = buf[pos]
    if ctor == _DESCRIBED and depth < 32:
        descriptor, p = parse10(buf, pos + 1, end, depth + 1)
        value, p = parse10(buf, p, end, depth + 1)
        return ("described", descriptor, value), p
    enc = _ENC.get(ctor)
    if enc is None:
        raise ValueError("bad constructor")
    w = enc.width
    if enc.category == "fixed":
        p = pos + 1 + w
    elif enc.category == "variable":
        p = pos + 1 + w + int.from_bytes(buf[pos + 1 : pos + 1 + w], "big")
    elif enc.category == "compound" and depth < 32:
        size = int.from_bytes(buf[pos + 1 : pos + 1 + w], "big")
        count = int.from_bytes(buf[pos + 1 + w : pos + 1 + 2 * w], "big")
        p, stop = pos + 1 + 2 * w, pos + 1 + w + size
        if stop > end:
            raise ValueError("overrun")
        children = []
        for _ in range(count):
            child, p = parse10(buf, p, stop, depth + 1)
            children.append(child)
        return ("compound", ctor, children, 0, 0), stop
    else:  # arrays (and compounds too deep) stay whole
        p = pos + 1 + w + int.from_bytes(buf[pos + 1 : pos + 1 + w], "big")
    if p > end:
        raise ValueError("overrun")
    return ("raw", buf[pos:p]), p


def encode10(node: Node) -> bytes:
    if node[0] == "raw":
        return bytes(node[1])
    if node[0] == "described":
        return b"\x00" + encode10(node[1]) + encode10(node[2])
    _, ctor, children, size_lie, count_lie = node
    body = b"".join(encode10(c) for c in children)
    count = max(0, len(children) + count_lie)
    wide = ctor in (0xD0, 0xD1) or len(body) + 1 > 255 or count > 255
    if ctor == 0x45 and not children and not count_lie and not size_lie:
        return b"\x45"
    if ctor == 0x45:
        ctor = 0xC0
    kind = 0xC1 if ctor in (0xC1, 0xD1) else 0xC0
    if wide:
        size = max(0, len(body) + 4 + size_lie) & 0xFFFFFFFF
        return bytes([kind | 0x10]) + struct.pack(">II", size, count & 0xFFFFFFFF) + body
    size = max(0, len(body) + 1 + size_lie) & 0xFF
    return bytes([kind, size, count & 0xFF]) + body


def _sym(text: bytes) -> bytes:
    return b"\xa3" + bytes([len(text)]) + text


#: values of every kind of type, to put where another type belongs
PALETTE10: tuple[bytes, ...] = (
    b"\x40",  # null
    b"\x41",
    b"\x56\x07",  # a boolean that is neither
    b"\x43",
    b"\x52\xff",
    b"\x70\xff\xff\xff\xff",
    b"\x53\x07",
    b"\x80" + b"\xff" * 8,
    b"\x54\xfe",
    b"\x81" + b"\x80" + b"\x00" * 7,
    b"\x60\xff\xff",
    b"\x50\x09",
    b"\x72\x7f\xc0\x00\x00",  # NaN
    b"\x82\x7f\xf0" + b"\x00" * 6,  # infinity
    b"\x73\x00\x11\x00\x00",  # no Unicode scalar
    b"\x83" + b"\xff" * 8,  # a timestamp far away
    b"\x98" + bytes(range(16)),
    b"\xa0\x03abc",
    b"\xa0\x00",
    b"\xa1\x04\xff\xfe\x00\x01",  # not UTF-8
    b"\xa1\x05hello",
    _sym(b"amqp:not-found"),
    b"\xc1\x01\x00",  # an empty map
    b"\xc1\x08\x02" + _sym(b"key") + b"\x52\x01",
    b"\xc1\x05\x02\xc1\x01\x00\x40",  # a map whose key is a map
    b"\x45",
    b"\xc0\x03\x01\x52\x05",
    b"\xc0\x05\x02\x45\xc1\x01\x00",
    b"\x00\x53\x70\x45",  # a described composite (header)
    b"\x00" + _sym(b"foo:bar") + _sym(b"baz"),  # a described symbol, unknown descriptor
    b"\x00\x53\x24\x45",  # accepted
    b"\x00\x00\x53\x01\x52\x01\x40",  # a descriptor that is itself described
    b"\xe0\x06\x02\xa3\x01a\x01b",  # an array of symbols
    b"\xe0\x04\x02\x52\x01\x02",
    b"\xf0\x00\x00\x00\x05\x00\x00\x00\x00\x40",
)


def walk(node: Node, path: tuple[int, ...] = ()) -> Iterator[tuple[tuple[int, ...], Node]]:
    yield path, node
    if node[0] == "described":
        yield from walk(node[1], (*path, 1))
        yield from walk(node[2], (*path, 2))
    elif node[0] == "compound":
        for i, child in enumerate(node[2]):
            yield from walk(child, (*path, 100 + i))


def replace_at(node: Node, path: tuple[int, ...], new: Node) -> Node:
    if not path:
        return new
    step, rest = path[0], path[1:]
    if node[0] == "described":
        parts = list(node)
        parts[step] = replace_at(node[step], rest, new)
        return tuple(parts)
    children = list(node[2])
    children[step - 100] = replace_at(children[step - 100], rest, new)
    return (node[0], node[1], children, node[3], node[4])


def damage_value(rng: random.Random, tree: Node) -> Node:
    """One structural damage somewhere in `tree` (the root's descriptor is spared half the
    time, so the performative is still known and its fields are what is damaged)."""
    spots = list(walk(tree))
    if len(spots) > 1 and rng.random() < 0.8:
        spots = [s for s in spots if len(s[0]) >= 2] or spots
    path, node = rng.choice(spots)
    roll = rng.random()
    if roll < 0.6:  # another type's value where this one's belongs
        new: Node = ("raw", rng.choice(PALETTE10))
        if rng.random() < 0.2:  # or a whole composite of this frame
            new = rng.choice(spots)[1]
        return replace_at(tree, path, new)
    if node[0] == "compound":
        children = list(node[2])
        if roll < 0.7 and children:  # a field repeated, or one dropped
            i = rng.randrange(len(children))
            if rng.random() < 0.5:
                children.insert(i, children[i])
            else:
                del children[i]
            return replace_at(tree, path, (node[0], node[1], children, node[3], node[4]))
        if roll < 0.8:  # more fields than the type has
            children += [("raw", rng.choice(PALETTE10)) for _ in range(rng.randrange(1, 4))]
            return replace_at(tree, path, (node[0], node[1], children, node[3], node[4]))
        lie = rng.choice((-3, -2, -1, 1, 2, 7, 200, 1 << 20))
        if rng.random() < 0.5:  # the size lies, or the count
            return replace_at(tree, path, (node[0], node[1], children, lie, node[4]))
        return replace_at(tree, path, (node[0], node[1], children, node[3], lie))
    if node[0] == "raw" and len(node[1]) > 1:  # a length prefix that lies
        raw = bytearray(node[1])
        enc = _ENC.get(raw[0])
        if enc is not None and enc.category in ("variable", "array") and len(raw) > enc.width:
            at = 1 + rng.randrange(enc.width)
            raw[at] = rng.choice((0, 0xFF, raw[at] ^ 1, (raw[at] + 1) & 0xFF))
            return replace_at(tree, path, ("raw", bytes(raw)))
        raw[rng.randrange(len(raw))] = rng.randrange(256)
        return replace_at(tree, path, ("raw", bytes(raw)))
    return replace_at(tree, path, ("raw", rng.choice(PALETTE10)))


def set_field10(frame: bytes, index: int, value: bytes) -> bytes:
    """A 1.0 frame with its performative's field `index` replaced by the encoded `value` (the
    list grown with nulls to reach it), sizes fixed up: how a test makes one ill-typed field."""
    doff = frame[4] * 4
    tree, used = parse10(frame, doff, len(frame))
    _, descriptor, (_, ctor, children, _, _) = tree
    children = children + [("raw", b"\x40")] * (index + 1 - len(children))
    children[index] = ("raw", value)
    body = encode10(("described", descriptor, ("compound", ctor, children, 0, 0)))
    out = frame[:doff] + body + frame[used:]
    return struct.pack(">I", len(out)) + out[4:]


def mutate_frame10(rng: random.Random, frame: bytes) -> bytes:
    """A 1.0 frame whose performative (or, sometimes, message) is damaged by structure."""
    if len(frame) < 8 or frame[:4] == b"AMQP":
        return frame
    doff = frame[4] * 4
    if doff < 8 or doff > len(frame):
        return frame
    body = frame[doff:]
    try:
        tree, used = parse10(body, 0, len(body))
    except (ValueError, IndexError):
        return frame
    payload = body[used:]
    if payload and rng.random() < 0.3:  # the message's sections instead
        try:
            section, sused = parse10(payload, 0, len(payload))
            payload = encode10(damage_value(rng, section)) + payload[sused:]
        except (ValueError, IndexError):
            pass
    else:
        tree = damage_value(rng, tree)
    out = frame[:doff] + encode10(tree) + payload
    return struct.pack(">I", len(out)) + out[4:]


# -- AMQP 0-9-1: arguments and field tables -----------------------------------------------------
#: a field table value of every type tag RabbitMQ and the spec know, to swap in
PALETTE091: tuple[bytes, ...] = (
    b"t\x01",
    b"b\xff",
    b"B\xff",
    b"s\xff\xff",
    b"u\xff\xff",
    b"I\xff\xff\xff\xff",
    b"i\x7f\xff\xff\xff",
    b"l" + b"\xff" * 8,
    b"f\x7f\xc0\x00\x00",
    b"d\x7f\xf0" + b"\x00" * 6,
    b"D\x09\xff\xff\xff\xff",
    b"S\x00\x00\x00\x03abc",
    b"S\x00\x00\x00\x02\xff\xfe",
    b"x\x00\x00\x00\x02\x00\x01",
    b"T" + b"\xff" * 8,
    b"F\x00\x00\x00\x00",
    b"F\x00\x00\x00\x07\x01kS\x00\x00\x00\x00",
    b"A\x00\x00\x00\x00",
    b"A\x00\x00\x00\x05I\x00\x00\x00\x01",
    b"V",
    b"Z\x01",
)


def _table_entries(buf: bytes) -> list[tuple[bytes, bytes]] | None:
    """A field table's (name, tag + value) pairs, or None if it is not one this can read."""
    from amqpscope.codec.amqp091 import fieldtable

    out = []
    pos = 0
    try:
        while pos < len(buf):
            n = buf[pos]
            name = buf[pos + 1 : pos + 1 + n]
            start = pos + 1 + n
            _, nxt = fieldtable._value(buf, start, len(buf), 0)
            out.append((name, buf[start:nxt]))
            pos = nxt
    except Exception:
        return None
    return out


def mutate_table(rng: random.Random, table: bytes) -> bytes:
    entries = _table_entries(table)
    if entries is None:
        return table
    roll = rng.random()
    if entries and roll < 0.6:  # a value of another type
        i = rng.randrange(len(entries))
        entries[i] = (entries[i][0], rng.choice(PALETTE091))
    elif entries and roll < 0.75:
        i = rng.randrange(len(entries))
        entries.insert(i, entries[i])  # a name twice
    else:
        name = rng.choice([b"x-match", b"x-message-ttl", b"headers", b"capabilities", b"\xff"])
        entries.append((name, rng.choice(PALETTE091)))
    return b"".join(bytes([len(n)]) + n + v for n, v in entries)


def _args_layout(kinds: list[str], buf: bytes, pos: int) -> list[tuple[str, int, int]] | None:
    """(type, start, end) of each argument, or None if the bytes do not fit."""
    out = []
    bits = False
    try:
        for kind in kinds:
            if kind == "bit":
                if not bits:
                    out.append((kind, pos, pos + 1))
                    pos += 1
                bits = True
                continue
            bits = False
            if kind == "octet":
                end = pos + 1
            elif kind == "short":
                end = pos + 2
            elif kind in ("long",):
                end = pos + 4
            elif kind in ("longlong", "timestamp"):
                end = pos + 8
            elif kind == "shortstr":
                end = pos + 1 + buf[pos]
            elif kind in ("longstr", "table"):
                end = pos + 4 + int.from_bytes(buf[pos : pos + 4], "big")
            else:
                return None
            if end > len(buf):
                return None
            out.append((kind, pos, end))
            pos = end
    except IndexError:
        return None
    return out


def set_argument091(frame: bytes, argument: str, value: bytes) -> bytes:
    """A 0-9-1 method frame with `argument` replaced by `value` (encoded, length prefix and
    all), the frame size fixed up: how a test makes one damaged argument."""
    payload = frame[7:-1]
    method = spec091.METHODS[struct.unpack_from(">HH", payload)]
    kinds = [t for _, t in method.arguments]
    layout = _args_layout(kinds, payload, 4)
    assert layout is not None
    names = [n for n, t in method.arguments if t != "bit"]
    _, s, e = layout[names.index(argument)]
    return frame091(
        frame[0], struct.unpack_from(">H", frame, 1)[0], payload[:s] + value + payload[e:]
    )


def table_with(frame: bytes, argument: str, entries: dict[bytes, bytes]) -> bytes:
    """A 0-9-1 method frame whose table `argument` has `entries` (name -> tag and value) set."""
    payload = frame[7:-1]
    method = spec091.METHODS[struct.unpack_from(">HH", payload)]
    layout = _args_layout([t for _, t in method.arguments], payload, 4)
    assert layout is not None
    names = [n for n, t in method.arguments if t != "bit"]
    _, s, e = layout[names.index(argument)]
    table = dict(_table_entries(payload[s + 4 : e]) or [])
    table.update(entries)
    body = b"".join(bytes([len(n)]) + n + v for n, v in table.items())
    return set_argument091(frame, argument, struct.pack(">I", len(body)) + body)


def mutate_frame091(rng: random.Random, frame: bytes) -> bytes:
    """A 0-9-1 frame whose arguments, field tables or content header are damaged by structure."""
    if len(frame) < 8 or frame[:4] == b"AMQP":
        return frame
    kind, channel, size = struct.unpack_from(">BHI", frame)
    payload = frame[7 : 7 + size]
    if len(payload) != size:
        return frame
    if kind == 2 and size >= 14:  # content header: flags that promise more, a body size
        roll = rng.random()
        head = bytearray(payload)
        if roll < 0.5:
            head[12:14] = struct.pack(
                ">H", rng.choice((0xFFFE, 0xFFFC, 0x8000 | rng.randrange(1 << 15), 0xFFFF))
            )
        elif roll < 0.7:
            head[4:12] = struct.pack(">Q", rng.choice((0, 1 << 63, 0xFFFFFFFF, 1)))
        else:
            flags = struct.unpack_from(">H", head, 12)[0]
            props = spec091.PROPERTIES.get(struct.unpack_from(">H", head, 0)[0], ())
            kinds = [t for i, (_, t) in enumerate(props) if flags & (0x8000 >> i)]
            layout = _args_layout(kinds, bytes(head), 14)
            tables = [(s, e) for t, s, e in layout or () if t == "table"]
            if tables:
                s, e = rng.choice(tables)
                table = mutate_table(rng, bytes(head[s + 4 : e]))
                head[s:e] = struct.pack(">I", len(table)) + table
            else:
                head = head[: rng.randrange(14, len(head) + 1)]  # properties cut
        return frame091(kind, channel, bytes(head))
    if kind != 1 or size < 4:
        return frame
    method = spec091.METHODS.get(struct.unpack_from(">HH", payload))
    if method is None:
        return frame
    layout = _args_layout([t for _, t in method.arguments], payload, 4)
    if not layout:
        return frame
    t, s, e = rng.choice(layout)
    args = bytearray(payload)
    roll = rng.random()
    if t == "table" and roll < 0.7:
        table = mutate_table(rng, bytes(args[s + 4 : e]))
        args[s:e] = struct.pack(">I", len(table)) + table
    elif t in ("shortstr", "longstr", "table") and roll < 0.85:  # its length lies
        width = 1 if t == "shortstr" else 4
        lie = rng.choice((0, 1, 0xFF, (1 << (8 * width)) - 1))
        args[s : s + width] = lie.to_bytes(width, "big")
    else:  # another value of the same width, or the arguments cut there
        if rng.random() < 0.5:
            args[s:e] = bytes(rng.randrange(256) for _ in range(e - s))
        else:
            args = args[:s]
    return frame091(kind, channel, bytes(args))


# -- the mutators -----------------------------------------------------------------------------
def _conversation(rng: random.Random, seed: Seed) -> Conversation | None:
    convs = [c for c in seed.conversations if len(c.frames) > 1]
    return rng.choice(convs) if convs else None


def structural(rng: random.Random, seed: Seed) -> bytes | None:
    """A conversation of `seed` with some frames damaged by structure, and frames repeated,
    dropped or reordered; written one frame a packet, or cut into other packets."""
    conv = _conversation(rng, seed)
    if conv is None:
        return None
    frames = list(conv.frames)
    mutate = mutate_frame10 if conv.version == "1.0" else mutate_frame091
    for _ in range(rng.choice((1, 1, 1, 2, 3, 8))):
        if not frames:
            return None
        i = rng.randrange(len(frames))
        c2s, data = frames[i]
        roll = rng.random()
        if roll < 0.75:
            frames[i] = (c2s, mutate(rng, data))
        elif roll < 0.82:
            frames.insert(i, frames[i])  # repeated
        elif roll < 0.88:
            del frames[i]
        elif roll < 0.94 and i + 1 < len(frames):
            frames[i], frames[i + 1] = frames[i + 1], frames[i]
        elif len(data) >= 8:  # its size stretched or shrunk
            size = struct.unpack_from(">I", data)[0] if conv.version == "1.0" else None
            raw = bytearray(data)
            at = 0 if size is not None else 3
            old = struct.unpack_from(">I", raw, at)[0]
            new = max(0, old + rng.choice((-9, -1, 1, 3, 64, 1 << 16, 1 << 30))) & 0xFFFFFFFF
            struct.pack_into(">I", raw, at, new)
            frames[i] = (c2s, bytes(raw))
    if not frames:
        return None
    segments = frames
    roll = rng.random()
    if roll < 0.3:  # one direction's frames cut into packets anywhere
        segments = []
        for c2s, data in frames:
            while data:
                cut = rng.randrange(1, len(data) + 1)
                segments.append((c2s, data[:cut]))
                data = data[cut:]
    pcap = write_pcap(segments, handshake=rng.random() < 0.9)
    if roll > 0.85:  # two packets swapped in the file (TCP puts them back)
        return reorder(rng, pcap)
    return pcap


def _packets(raw: bytes) -> list[tuple[int, int]] | None:
    """(start, end) of each record of a little-endian microsecond pcap."""
    if raw[:4] != b"\xd4\xc3\xb2\xa1":
        return None
    out = []
    pos = 24
    while pos + 16 <= len(raw):
        caplen = struct.unpack_from("<I", raw, pos + 8)[0]
        out.append((pos, pos + 16 + caplen))
        pos += 16 + caplen
    return out


def reorder(rng: random.Random, raw: bytes) -> bytes:
    recs = _packets(raw)
    if not recs or len(recs) < 3:
        return raw
    pieces = [raw[s:e] for s, e in recs]
    i = rng.randrange(len(pieces) - 1)
    j = min(len(pieces) - 1, i + rng.randrange(1, 4))
    pieces[i], pieces[j] = pieces[j], pieces[i]
    if rng.random() < 0.3:  # and one packet repeated
        k = rng.randrange(len(pieces))
        pieces.insert(k, pieces[k])
    if rng.random() < 0.2:  # or dropped
        del pieces[rng.randrange(len(pieces))]
    return raw[:24] + b"".join(pieces)


def bytewise(rng: random.Random, seed: Seed) -> bytes | None:
    """The capture file itself damaged: bits flipped, 32-bit fields inflated, bytes cut, or
    packets reordered (the kinds of tests/test_mutation.py, at random places each time)."""
    raw = bytearray(seed.raw)
    recs = _packets(seed.raw)
    roll = rng.random()
    if roll < 0.4:
        for _ in range(rng.choice((1, 2, 4, 16))):
            if recs and rng.random() < 0.9:  # in packet data, past the headers mostly
                s, e = rng.choice(recs)
                at = rng.randrange(s + 16, e) if e > s + 16 else rng.randrange(len(raw))
            else:
                at = rng.randrange(len(raw))
            raw[at] ^= 1 << rng.randrange(8)
        return bytes(raw)
    if roll < 0.55 and recs:
        s, e = rng.choice(recs)
        if e - s > 24:
            at = rng.randrange(s + 16, e - 3)
            value = rng.choice((0xFFFFFFFF, 0x7FFFFFFF, 0, 1, rng.randrange(1 << 32)))
            struct.pack_into(">I", raw, at, value)
        return bytes(raw)
    if roll < 0.65:
        return bytes(raw[: rng.randrange(24, len(raw) + 1)])
    if roll < 0.8 and recs:
        return reorder(rng, seed.raw)
    if recs:  # bytes overwritten inside one packet's payload
        s, e = rng.choice(recs)
        if e - s > 70:
            at = rng.randrange(s + 16 + 54, e)
            n = min(e - at, rng.randrange(1, 32))
            raw[at : at + n] = rng.randbytes(n)
        return bytes(raw)
    return bytes(raw)


def layered(rng: random.Random, seed: Seed) -> bytes | None:
    """TLS records and WebSocket frames of the original packets damaged by their structure
    (a record's type, version or length; a frame's opcode, RSV and mask bits, length form)."""
    recs = _packets(seed.raw)
    if not recs:
        return None
    raw = bytearray(seed.raw)
    spots = []
    for s, e in recs:
        ip = s + 16 + 14  # Ethernet (every bundled pcap is); IPv4 only
        if e - ip < 40 or raw[ip] >> 4 != 4:
            continue
        tcp = ip + (raw[ip] & 0x0F) * 4
        payload = tcp + (raw[tcp + 12] >> 4) * 4 if tcp + 12 < e else e
        for at in range(payload, min(e - 1, payload + 64)):  # a record or frame starting here
            if raw[at] in (0x14, 0x15, 0x16, 0x17) and raw[at + 1] == 3 and at + 5 <= e:
                spots.append(("tls", at))
                break
            if raw[at] in (0x82, 0x02, 0x80, 0x88, 0x89, 0x8A) and at == payload:
                spots.append(("ws", at))
                break
    if not spots:
        return None
    for _ in range(rng.choice((1, 1, 2, 4))):
        what, at = rng.choice(spots)
        if what == "tls":
            part = rng.randrange(4)
            if part == 0:
                raw[at] = rng.choice((0x14, 0x15, 0x16, 0x17, 0x18, 0x00, 0xFF))
            elif part == 1:
                raw[at + 2] = rng.choice((0x00, 0x01, 0x03, 0x04, 0xFF))
            else:
                struct.pack_into(">H", raw, at + 3, rng.choice((0, 1, 5, 0x4000, 0x4100, 0xFFFF)))
        else:
            part = rng.randrange(4)
            if part == 0:
                raw[at] = (raw[at] & 0xF0) | rng.choice(
                    (0x0, 0x1, 0x2, 0x3, 0x8, 0x9, 0xA, 0xB, 0xF)
                )
            elif part == 1:
                raw[at] ^= rng.choice((0x80, 0x40, 0x20, 0x10))
            elif part == 2:
                raw[at + 1] ^= 0x80  # mask bit
            else:
                raw[at + 1] = (raw[at + 1] & 0x80) | rng.choice((0, 1, 125, 126, 127))
    return bytes(raw)


MUTATORS: tuple[Callable[[random.Random, Seed], bytes | None], ...] = (
    structural,
    structural,
    structural,
    bytewise,
    layered,
)


def mutant(seeds_: list[Seed], seed: int, index: int) -> tuple[str, bytes, Seed]:
    """The `index`-th mutated capture of run `seed`: (what was done, its bytes, its source)."""
    rng = random.Random(seed * 1_000_003 + index)
    while True:
        source = rng.choice(seeds_)
        mutator = rng.choice(MUTATORS)
        data = mutator(rng, source)
        if data is not None:
            return f"{mutator.__name__} of {source.path.name}", data, source


# -- running one input through everything -----------------------------------------------------
def run_one(
    path: Path,
    keylog: Path | None = None,
    links: tuple[str, ...] = (),
    queues: tuple[str, ...] = (),
    rich: bool = True,
) -> int:
    """The pipeline of `read --json`, `read` (timeline), `read --link` / `--queue` (`links`,
    `queues`), the Spark delivery rows, `summary` and `diagnose` over one capture file, in this
    process; returns how many frames it read. Any exception is the caller's failure. The
    timeline and the summary are drawn as piped output is (plain text); with `rich` also as a
    terminal's (rich's styled lines and tables: most of the time a run takes), and each frame's
    `read -V -x` detail (the slow tree decoder) and the diagnose report too."""
    from rich.console import Console

    from amqpscope.capture.files import CaptureError
    from amqpscope.cli.inspect import Inspect
    from amqpscope.diagnose import Diagnoser
    from amqpscope.filter import LinkScope, QueueScope
    from amqpscope.render.diagnoses import write_diagnoses
    from amqpscope.render.lines import frame_ndjson
    from amqpscope.render.summary import print_summary, summary_text
    from amqpscope.render.timeline import Timeline
    from amqpscope.spark.deliveries import DeliveryLog

    sink = io.StringIO()
    ndjson = io.BytesIO()
    dissector = Dissector()
    if keylog is not None:
        dissector.context.keylog = load_keylog(keylog)
    tracker = Tracker()
    diagnoser = Diagnoser()
    scopes = (LinkScope(links), QueueScope(queues))
    deliveries = DeliveryLog()
    console = Console(file=sink, width=120, color_system=None)
    if rich:
        timeline = Timeline(console, False, True, fit=True)
    else:  # as `read | ...` draws it
        timeline = Timeline(lambda: console, False, True, out=sink)
    inspect = None
    if rich:  # the tree and dump as piped (rich only prints their lines: the timeline has it)
        plain = Timeline(lambda: console, False, True, out=io.StringIO())
        inspect = Inspect(dissector, True, True, False, plain)
    frames = 0
    try:
        with open_capture(path) as capture:
            for frame in dissector.run(capture):
                tracker.feed(frame)
                diagnoser.feed(frame)
                ndjson.write(frame_ndjson(frame))
                timeline.frame(frame)
                if inspect is not None:  # read -V -x, and its JSON
                    continues = inspect.starts.continues(frame)
                    inspect.show(frame, continues)
                    inspect.ndjson(frame, continues)
                for scope in scopes:
                    scope.accepts(frame)
                deliveries.feed(frame)
                frames += 1
    except CaptureError:
        return frames
    tracker.finish()
    timeline.finish()
    deliveries.finish()
    summary = tracker.summary()
    json.dumps(summary, ensure_ascii=False)  # `summary --json`
    summary_text(summary, 100, "utf-8")
    if rich and frames < 2000:  # rich's tables are slow; the text form covers the same fields
        print_summary(summary, Console(file=sink, width=100, color_system=None))
    found = diagnoser.diagnoses(tracker)
    json.dumps({"diagnoses": [d.to_json() for d in found]}, ensure_ascii=False)
    if rich:
        write_diagnoses(found, {}, None, sink, lambda: Timeline(console, False, False, fit=True))
    return frames


@dataclass
class Failure:
    index: int
    what: str
    error: str
    seconds: float
    kept: Path | None


def fuzz(
    count: int | None = None,
    seconds: float | None = None,
    seed: int = 0,
    start: int = 0,
    keep: Path | None = None,
    log: Callable[[str], None] | None = None,
    every: int = 1000,
    only: str = "",
) -> tuple[int, list[Failure]]:
    """Run mutated captures until `count` of them or `seconds` have passed; return how many ran
    and the failures (exceptions, or inputs slower than SLOW_SECONDS)."""
    sources = [s for s in seeds() if only in s.path.name]
    previous = signal.signal(signal.SIGALRM, _hung)
    failures: list[Failure] = []
    began = time.monotonic()
    done = 0
    with tempfile.TemporaryDirectory(prefix="amqpscope-fuzz-") as tmp:
        path = Path(tmp) / "mutant.pcap"
        index = start
        while (count is None or done < count) and (
            seconds is None or time.monotonic() - began < seconds
        ):
            what, data, source = mutant(sources, seed, index)
            suffix = ".pcapng" if data[:4] == b"\x0a\x0d\x0d\x0a" else ".pcap"
            path = path.with_suffix(suffix)
            path.write_bytes(data)
            keylog = (
                source.path.with_suffix(".keys")
                if what.startswith(("bytewise", "layered"))
                else None
            )
            if keylog is not None and not keylog.exists():
                keylog = None
            t0 = time.monotonic()
            error = None
            signal.setitimer(signal.ITIMER_REAL, SLOW_SECONDS * 3)  # a hang ends as a failure
            try:
                run_one(path, keylog, source.links, source.queues, rich=index % RICH_EVERY == 0)
            except Exception:
                error = traceback.format_exc()
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            took = time.monotonic() - t0
            if error is None and took > SLOW_SECONDS:
                error = f"took {took:.1f} s"
            if error is not None:
                kept = None
                if keep is not None:
                    keep.mkdir(parents=True, exist_ok=True)
                    kept = keep / f"fuzz-{seed}-{index}{suffix}"
                    kept.write_bytes(data)
                failures.append(Failure(index, what, error, took, kept))
                if log:
                    log(f"FAIL {seed}:{index} {what} ({took:.2f} s) kept={kept}\n{error}")
            done += 1
            index += 1
            if log and done % every == 0:
                elapsed = time.monotonic() - began
                peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
                log(
                    f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {done} mutants,"
                    f" {done / elapsed:.1f}/s, {len(failures)} failures, peak {peak} MB,"
                    f" next index {index}"
                )
    signal.signal(signal.SIGALRM, previous)
    return done, failures


class Hung(Exception):
    """An input ran for three times SLOW_SECONDS."""


def _hung(_signum: int, _frame: Any) -> None:
    raise Hung(f"still running after {SLOW_SECONDS * 3:.0f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int)
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=int, default=0, help="the first index (to continue a run)")
    parser.add_argument("--keep", type=Path, help="where failing inputs are written")
    parser.add_argument("--log", type=Path, help="progress and failures, appended")
    parser.add_argument("--every", type=int, default=1000, help="a progress line per N inputs")
    parser.add_argument("--only", default="", help="only captures whose name holds this")
    parser.add_argument(
        "--memory", type=int, default=1024, help="address-space limit in MiB (0: none)"
    )
    parser.add_argument("--replay", nargs="*", type=Path, help="run these captures instead")
    args = parser.parse_args(argv)
    if args.memory:  # an input that needs more fails with MemoryError, kept like any other
        limit = args.memory << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    def log(line: str) -> None:
        if args.log:
            with args.log.open("a") as f:
                f.write(line + "\n")
        else:
            print(line, flush=True)

    if args.replay is not None:
        bad = 0
        for path in args.replay:
            try:
                run_one(path)
            except Exception:
                bad += 1
                log(f"FAIL {path}\n{traceback.format_exc()}")
        return 1 if bad else 0
    if args.count is None and args.seconds is None:
        args.seconds = 10.0
    done, failures = fuzz(
        args.count, args.seconds, args.seed, args.start, args.keep, log, args.every, args.only
    )
    log(f"{done} mutated captures, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
