"""The detail tree of an AMQP 0-9-1 (or 0-8) frame: every field with its domain, offset, length.

Walks the frame as the spec lays it out: the frame header (type, channel, size), a method's
class and method ids and its arguments in wire order (consecutive `bit`s packed into one octet,
each bit its own node on that octet), a content header's class, weight, body size, property
flags and the properties they announce, field tables entry by entry and the frame-end octet.
Names and domains come from the spec tables (`spec.py`, `spec08.py`); leaf values are read by
the fast decoder's own readers (`arguments.READERS`, `fieldtable`), so they equal the frame
record's. Only for the frames shown (`read -V`); damage ends the walk with a `malformed` node.
"""

from __future__ import annotations

from typing import Any, Final

from amqpscope.codec.amqp091 import fieldtable, frames
from amqpscope.codec.amqp091.arguments import READERS, Truncated
from amqpscope.codec.amqp091.content import FLAGS, HEADER, PAYLOAD, flags_text
from amqpscope.codec.amqp091.decoder import tables_for
from amqpscope.codec.tree import Node

FRAME_TYPES: Final = {
    frames.TYPE_METHOD: "method",
    frames.TYPE_HEADER: "content header",
    frames.TYPE_BODY: "content body",
    frames.TYPE_HEARTBEAT: "heartbeat",
}
#: arguments that carry credentials: hidden unless secrets are shown, as in the frame record
SECRET_ARGUMENTS: Final = frozenset(
    {
        ("connection.start-ok", "response"),
        ("connection.secure-ok", "response"),
        ("connection.update-secret", "new-secret"),
    }
)
#: field table tags by their RabbitMQ type names (the 0-9-1 errata)
TAG_TYPES: Final = {
    "t": "boolean",
    "b": "short-short-int",
    "B": "short-short-uint",
    "s": "short-int",
    "u": "short-uint",
    "I": "long-int",
    "i": "long-uint",
    "l": "long-long-int",
    "L": "long-long-int",
    "f": "float",
    "d": "double",
    "D": "decimal",
    "S": "long-string",
    "A": "array",
    "T": "timestamp",
    "F": "table",
    "V": "void",
    "x": "byte-array",
}


class _Damaged(Exception):
    """The walk cannot go on at `offset` (internal)."""

    def __init__(self, offset: int, why: str) -> None:
        super().__init__(why)
        self.offset = offset


def amqp_tree(data: bytes, kind: str, version: str = "0-9-1") -> Node:
    """The frame (or protocol header) `data` of AMQP `version` as a tree."""
    root = Node(f"AMQP {version}", kind, "frame", 0, len(data))
    if kind == "protocol-header":
        root.add(Node("protocol", data[:4].decode("latin-1"), "bytes", 0, min(4, len(data))))
        for index, name in enumerate(("protocol id", "major", "minor", "revision"), start=4):
            if index < len(data):
                root.add(Node(name, data[index], "octet", index, 1))
        return root
    if len(data) < frames.HEADER_SIZE + 1:
        root.add(Node("malformed", "frame shorter than its header", "binary", 0, len(data)))
        return root
    ftype, channel, size = frames.FRAME_HEADER.unpack_from(data, 0)
    root.add(Node("type", FRAME_TYPES.get(ftype, ftype), "octet", 0, 1))
    root.add(Node("channel", channel, "short", 1, 2))
    root.add(Node("size", size, "long", 3, 4))
    limit = len(data) - 1
    try:
        if ftype == frames.TYPE_METHOD:
            _method(root, data, limit, version)
        elif ftype == frames.TYPE_HEADER:
            _content_header(root, data, limit, version)
        elif ftype == frames.TYPE_BODY:
            body = Node("payload", f"{limit - PAYLOAD} bytes", "binary", PAYLOAD, limit - PAYLOAD)
            root.add(body)
    except _Damaged as exc:
        root.add(Node("malformed", str(exc), "binary", exc.offset, max(0, limit - exc.offset)))
    root.add(Node("frame end", data[limit], "octet", limit, 1))
    return root


def _method(root: Node, data: bytes, limit: int, version: str) -> None:
    at = frames.HEADER_SIZE
    if at + 4 > limit:
        raise _Damaged(at, "method frame without its class and method ids")
    class_id, method_id = frames.CLASS_METHOD.unpack_from(data, at)
    tables = tables_for(version)
    method = tables.methods.get((class_id, method_id))
    klass = method.name.split(".")[0] if method else class_id
    root.add(Node("class", klass, "short", at, 2))
    root.add(Node("method", method.name if method else method_id, "short", at + 2, 2))
    root.value = method.name if method else f"{class_id}/{method_id}"
    at += 4
    if method is None:
        root.add(Node("arguments", data[at:limit].hex(), "binary", at, limit - at))
        return
    arguments = root.add(Node("arguments", None, "arguments", at, 0))
    bit_at, bit = -1, 8
    for name, domain in method.arguments:
        if domain == "bit":
            if bit == 8:
                if at >= limit:
                    raise _Damaged(at, f"{name} runs past the end of the frame")
                bit_at, bit = at, 0
                at += 1
            value = bool(data[bit_at] >> bit & 1)
            arguments.add(Node(name, value, f"bit {bit}", bit_at, 1))
            bit += 1
            continue
        bit = 8
        if domain == "table":
            node, at = _table(name, data, at, limit, 0)
        else:
            try:
                value, nxt = READERS[domain](data, at, limit)
            except Truncated as exc:
                raise _Damaged(
                    at, f"{name}: {exc.args[0]} runs past the end of the frame"
                ) from None
            node = Node(name, value, domain, at, nxt - at)
            at = nxt
        if (method.name, name) in SECRET_ARGUMENTS:
            node.secret = True
        if name == "reply-code" and node.value in tables.replies:
            reply = tables.replies[node.value]
            node.add(Node("reply-name", reply, "reply code", node.offset, node.length))
        arguments.add(node)
    arguments.length = at - arguments.offset
    if at < limit:
        root.add(Node("trailing bytes", data[at:limit].hex(), "binary", at, limit - at))


def _content_header(root: Node, data: bytes, limit: int, version: str) -> None:
    if limit - PAYLOAD < HEADER.size:
        raise _Damaged(PAYLOAD, f"content header of {limit - PAYLOAD} bytes, at least 14")
    class_id, weight, body_size, word = HEADER.unpack_from(data, PAYLOAD)
    at = PAYLOAD
    root.add(Node("class", class_id, "short", at, 2))
    root.add(Node("weight", weight, "short", at + 2, 2))
    root.add(Node("body size", body_size, "longlong", at + 4, 8))
    words = [word]
    at += 14
    while word & 1:
        if at + 2 > limit:
            raise _Damaged(at, "property flags run past the end of the frame")
        word = FLAGS.unpack_from(data, at)[0]
        words.append(word)
        at += 2
    flags = root.add(Node("property flags", flags_text(tuple(words)), "flags", PAYLOAD + 12))
    flags.length = at - flags.offset
    props = tables_for(version).properties.get(class_id)
    if props is None:
        raise _Damaged(at, f"class {class_id} has no content properties")
    properties = root.add(Node("properties", None, "properties", at, 0))
    for index, mask, name, domain in props.props:
        if index >= len(words) or not words[index] & mask:
            continue
        flags.add(Node(name, True, f"flag {index}:{mask:#06x}", PAYLOAD + 12 + 2 * index, 2))
        if domain == "bit":
            properties.add(Node(name, True, "bit", PAYLOAD + 12 + 2 * index, 2))
            continue
        if domain == "table":
            node, at = _table(name, data, at, limit, 0)
        else:
            try:
                value, nxt = READERS[domain](data, at, limit)
            except Truncated:
                raise _Damaged(at, f"property {name} runs past the end of the frame") from None
            node, at = Node(name, value, domain, at, nxt - at), nxt
        properties.add(node)
    properties.length = at - properties.offset
    properties.value = f"{len(properties.children)} set"
    if at < limit:
        root.add(Node("trailing bytes", data[at:limit].hex(), "binary", at, limit - at))


def _table(name: str, data: bytes, at: int, limit: int, depth: int) -> tuple[Node, int]:
    """The field table whose length is at `at`, entry by entry."""
    if depth >= fieldtable.MAX_DEPTH:
        raise _Damaged(at, f"tables nested deeper than {fieldtable.MAX_DEPTH}")
    if at + 4 > limit:
        raise _Damaged(at, f"{name}: table length runs past the frame")
    end = at + 4 + fieldtable.U32.unpack_from(data, at)[0]
    if end > limit:
        raise _Damaged(at, f"{name}: table of {end - at - 4} bytes runs past the frame")
    node = Node(name, None, "table", at, end - at)
    node.add(Node("length", end - at - 4, "long", at, 4))
    pos = at + 4
    while pos < end:
        stop = pos + 1 + data[pos]
        if stop >= end:
            raise _Damaged(pos, f"{name}: field name runs past the table")
        key = fieldtable.text(data[pos + 1 : stop])
        entry, nxt = _tagged(key if isinstance(key, str) else key["hex"], data, stop, end, depth)
        entry.children.insert(0, Node("key", key, "shortstr", pos, stop - pos))
        entry.offset, entry.length = pos, nxt - pos
        node.add(entry)
        pos = nxt
    node.value = f"{len(node.children) - 1} entries"
    return node, end


def _array(name: str, data: bytes, at: int, limit: int, depth: int) -> tuple[Node, int]:
    if at + 4 > limit:
        raise _Damaged(at, f"{name}: array length runs past its table")
    end = at + 4 + fieldtable.U32.unpack_from(data, at)[0]
    if end > limit:
        raise _Damaged(at, f"{name}: array of {end - at - 4} bytes runs past its table")
    node = Node(name, None, "array", at, end - at)
    node.add(Node("length", end - at - 4, "long", at, 4))
    pos = at + 4
    index = 0
    while pos < end:
        child, pos = _tagged(f"[{index}]", data, pos, end, depth)
        node.add(child)
        index += 1
    node.value = f"{index} items"
    return node, end


def _tagged(name: str, data: bytes, at: int, limit: int, depth: int) -> tuple[Node, int]:
    """The tagged value at `at` (its tag byte first)."""
    tag = chr(data[at])
    kind = TAG_TYPES.get(tag, f"unknown {tag!r}")
    if tag == "F":
        node, nxt = _table(name, data, at + 1, limit, depth + 1)
    elif tag == "A":
        if depth + 1 >= fieldtable.MAX_DEPTH:
            raise _Damaged(at, f"arrays nested deeper than {fieldtable.MAX_DEPTH}")
        node, nxt = _array(name, data, at + 1, limit, depth + 1)
    else:
        try:
            value: Any
            value, nxt = fieldtable._value(data, at, limit, depth)
        except fieldtable.Malformed as exc:
            raise _Damaged(at, f"{name}: {exc}") from None
        node = Node(name, value, kind, at + 1, nxt - at - 1)
    node.type = f"{kind} '{tag}'"
    node.offset, node.length = at, nxt - at
    node.children.insert(0, Node("tag", tag, "octet", at, 1))
    return node, nxt
