"""The detail tree of an AMQP 1.0 frame: every value with its constructor, offset and length.

Walks the frame as the spec nests it (frame header, the performative's described list with its
fields named from `spec.COMPOSITES`, maps, arrays, nested described types, a transfer's message
sections) and reads each primitive with the fast decoder's own readers (`types.read_at`), so a
value here is the value in the frame record. Only for the frames shown (`read -V`): slower than
the fast path and never on it. Damage ends the walk where it is, as a `malformed` node holding
the bytes left; nothing raises.
"""

from __future__ import annotations

from typing import Any, Final

from amqpscope.codec.amqp10 import composites, frames, spec, types
from amqpscope.codec.amqp10.decoder import OPEN_MECHANISMS
from amqpscope.codec.amqp10.message import BODY_SECTIONS
from amqpscope.codec.tree import Node
from amqpscope.codec.typed import typed_fields

#: descriptor symbol -> code, for composites and restricted described types alike
_CODES: Final[dict[str, int]] = {
    **{c.symbol: code for code, c in spec.COMPOSITES.items()},
    **{r.symbol: r.code for r in spec.RESTRICTED.values() if r.symbol and r.code is not None},
}
_RESTRICTED_BY_CODE: Final = {r.code: r for r in spec.RESTRICTED.values() if r.code is not None}
#: fields whose value is a credential (SASL responses): hidden unless secrets are shown
SECRET_FIELDS: Final = frozenset({("sasl-init", "initial-response"), ("sasl-response", "response")})
#: protocol ids of the protocol header (transport.xml, section version negotiation)
PROTOCOL_IDS: Final = {0: "AMQP", 2: "TLS", 3: "SASL"}
FRAME_TYPES: Final = {frames.TYPE_AMQP: "AMQP", frames.TYPE_SASL: "SASL"}


def _type(ctor: int) -> str:
    enc = spec.ENCODINGS.get(ctor)
    if enc is None:
        return f"invalid {ctor:#04x}"
    kind = enc.type if enc.name == enc.type else f"{enc.type}/{enc.name}"
    return f"{kind} {ctor:#04x}"


class _Walker:
    """One walk over one frame's bytes (the fast decoder's context, for its readers)."""

    def __init__(self, data: bytes) -> None:
        self.ctx = types.Context(data)
        self.buf = self.ctx.buf

    def value(self, name: str, pos: int, end: int, depth: int = 0) -> tuple[Node, int]:
        """The node of the value whose constructor is at `pos`, and the position after it."""
        if pos >= end:
            raise types.Malformed(pos, "value expected, no bytes left")
        if depth >= types.MAX_DEPTH:
            raise types.Malformed(pos, f"values nested deeper than {types.MAX_DEPTH}")
        ctor = self.buf[pos]
        if ctor == types.DESCRIBED:
            return self.described(name, pos, end, depth)
        if ctor in types.LISTS:
            return self.compound(name, ctor, pos, end, depth, is_map=False)
        if ctor in types.MAPS:
            return self.compound(name, ctor, pos, end, depth, is_map=True)
        if ctor in types.ARRAYS:
            return self.array(name, ctor, pos, end, depth)
        value, nxt = types.read_at(self.ctx, ctor, pos + 1, end, depth)
        return Node(name, value, _type(ctor), pos, nxt - pos), nxt

    def _header(self, ctor: int, pos: int, end: int) -> tuple[int, int, int, int]:
        """(width, first element, end of the value, count) of a list, map or array at `pos`."""
        width = spec.ENCODINGS[ctor].width
        if width == 0:
            return 0, pos + 1, pos + 1, 0
        unpack = types.COMPOUND8 if width == 1 else types.COMPOUND32
        if pos + 1 + 2 * width > end:
            raise types.Malformed(pos, f"{_type(ctor)} header runs past the end")
        size, count = unpack(self.buf, pos + 1)
        stop = pos + 1 + width + size
        if stop > end:
            raise types.Malformed(pos, f"{_type(ctor)} of {size} bytes runs past the end")
        return width, pos + 1 + 2 * width, stop, count

    def compound(
        self,
        name: str,
        ctor: int,
        pos: int,
        end: int,
        depth: int,
        is_map: bool,
        fields: tuple[spec.Field, ...] = (),
        owner: str = "",
    ) -> tuple[Node, int]:
        width, at, stop, count = self._header(ctor, pos, end)
        node = Node(name, None, _type(ctor), pos, stop - pos)
        if width:
            node.add(Node("size", stop - pos - 1 - width, "size", pos + 1, width))
            node.add(Node("count", count, "count", pos + 1 + width, width))
        index = 0
        while at < stop and index < count:
            if is_map:
                key, at = self.value("key", at, stop, depth + 1)
                entry, at = self.value(_key_name(key.value), at, stop, depth + 1)
                entry.children.insert(0, key)
                node.add(entry)
                index += 2
                continue
            field = fields[index] if index < len(fields) else None
            child, at = self.value(field.name if field else f"[{index}]", at, stop, depth + 1)
            if field is not None:
                _field(child, field, owner)
            node.add(child)
            index += 1
        if at < stop:
            node.add(Node("trailing bytes", self.buf[at:stop].hex(), "binary", at, stop - at))
        if is_map:
            node.value = f"{count // 2} entries"
        elif not fields:
            node.value = f"{count} items"
        return node, stop

    def array(self, name: str, ctor: int, pos: int, end: int, depth: int) -> tuple[Node, int]:
        width, at, stop, count = self._header(ctor, pos, end)
        node = Node(name, None, _type(ctor), pos, stop - pos)
        node.add(Node("size", stop - pos - 1 - width, "size", pos + 1, width))
        node.add(Node("count", count, "count", pos + 1 + width, width))
        if count == 0 or at >= stop:
            node.value = []
            return node, stop
        element = self.buf[at]
        node.add(Node("element constructor", _type(element), "constructor", at, 1))
        if element == types.DESCRIBED or element in types.ARRAYS:
            # elements of described or array type: the whole array read as the fast path does
            node.value, _ = types.read_at(self.ctx, ctor, pos + 1, end, depth)
            return node, stop
        at += 1
        values: list[Any] = []
        for index in range(count):
            if element in types.LISTS or element in types.MAPS:
                child, nxt = self._bare_compound(f"[{index}]", element, at, stop, depth)
            else:
                value, nxt = types.read_at(self.ctx, element, at, stop, depth + 1)
                child = Node(f"[{index}]", value, _type(element), at, nxt - at)
            values.append(child.value)
            node.add(child)
            at = nxt
        node.value = values
        return node, stop

    def _bare_compound(
        self, name: str, ctor: int, at: int, stop: int, depth: int
    ) -> tuple[Node, int]:
        """An array element of list or map type: its size and count, without a constructor."""
        # read as if the constructor were at at-1 (the array's one constructor stands for it)
        node, nxt = self.compound(name, ctor, at - 1, stop, depth + 1, ctor in types.MAPS)
        node.offset, node.length = at, nxt - at
        return node, nxt

    def described(self, name: str, pos: int, end: int, depth: int) -> tuple[Node, int]:
        descriptor, at = self.value("descriptor", pos + 1, end, depth + 1)
        code = descriptor.value
        if isinstance(code, str):
            code = _CODES.get(code, code)
        composite = spec.COMPOSITES.get(code) if isinstance(code, int) else None
        restricted = _RESTRICTED_BY_CODE.get(code) if isinstance(code, int) else None
        if at >= end:
            raise types.Malformed(at, "described type without its value")
        ctor = self.buf[at]
        if composite is not None and ctor in types.LISTS:
            inner, nxt = self.compound(
                "value", ctor, at, end, depth + 1, False, composite.fields, composite.name
            )
            node = Node(name, composite.name, f"described {composite.name}", pos, nxt - pos)
            node.children = [descriptor, *inner.children]
            return node, nxt
        inner, nxt = self.value("value", at, end, depth + 1)
        kind = restricted.name if restricted is not None else "described"
        node = Node(name, inner.value, f"described {kind}", pos, nxt - pos)
        node.children = [descriptor, inner]
        return node, nxt

    def rest(self, parent: Node, at: int, end: int, why: str) -> None:
        parent.add(Node("malformed", why, "binary", at, end - at))


def _key_name(key: Any) -> str:
    return key if isinstance(key, str) else str(key)


def _field(node: Node, field: spec.Field, owner: str) -> None:
    """A composite's field: its restricted type's choice by name, its secret flag."""
    named = composites.choices(field.type)
    if named is not None and type(node.value) in (bool, int) and node.value in named:
        node.value = named[node.value]
    if (owner, field.name) in SECRET_FIELDS:
        node.secret = True


class DeliveryStarts:
    """Which transfers begin a delivery (their payload starts with message sections) and which
    continue one (their payload is the next bytes of it): fed every frame read, in order, not
    only the frames shown, as a frame alone cannot say."""

    def __init__(self) -> None:
        self.open: set[tuple[Any, ...]] = set()

    def continues(self, frame: Any) -> bool:
        """Whether `frame` continues a delivery an earlier transfer of its link began."""
        if frame.version != "1.0" or frame.name != "transfer":
            return False
        fields = typed_fields(frame)  # a handle of the wrong type is no key (codec.typed)
        key = (frame.conn, frame.direction, frame.channel, fields.get("handle"))
        continued = key in self.open
        if fields.get("more") is True and fields.get("aborted") is not True:
            self.open.add(key)
        else:
            self.open.discard(key)
        return continued


def amqp_tree(data: bytes, kind: str, version: str = "1.0", continues: bool = False) -> Node:
    """The AMQP 1.0 frame (or protocol header) `data` as a tree, offsets within `data`;
    `continues`: a transfer whose payload continues a delivery (`DeliveryStarts`)."""
    root = Node("AMQP 1.0", kind, "frame", 0, len(data))
    if kind == "protocol-header":
        _protocol_header(root, data)
        return root
    if len(data) < frames.HEADER_SIZE:
        root.add(Node("malformed", "frame shorter than its header", "binary", 0, len(data)))
        return root
    size, doff, ftype, channel = frames.FRAME_HEADER.unpack_from(data, 0)
    root.add(Node("size", size, "uint", 0, 4))
    root.add(Node("doff", doff, "ubyte", 4, 1))
    root.add(Node("type", FRAME_TYPES.get(ftype, ftype), "ubyte", 5, 1))
    if ftype == frames.TYPE_AMQP:
        root.add(Node("channel", channel, "ushort", 6, 2))
    else:
        root.add(Node("ignored", channel, "ushort", 6, 2))
    body = doff * 4
    end = len(data)
    if body > frames.HEADER_SIZE:
        extended = min(body, end)
        root.add(Node("extended header", data[8:extended].hex(), "binary", 8, extended - 8))
    if body >= end:
        root.value = "empty frame (heartbeat)"
        return root
    walker = _Walker(data)
    try:
        performative, at = walker.value("performative", body, end)
    except types.Malformed as exc:
        walker.rest(root, body, end, exc.why)
        return root
    root.add(performative)
    root.value = performative.value
    if performative.value == "sasl-init":
        _open_mechanism(performative)
    if at < end:
        sections = performative.value == "transfer" and not continues
        root.add(_payload(walker, at, end, sections))
    return root


def _open_mechanism(init: Node) -> None:
    """A mechanism whose initial response is no secret (ANONYMOUS's trace text): shown, as the
    frame record shows it."""
    mechanism = next((c.value for c in init.children if c.name == "mechanism"), None)
    if isinstance(mechanism, str) and mechanism in OPEN_MECHANISMS:  # a list is no mechanism
        for child in init.children:
            child.secret = False


def _protocol_header(root: Node, data: bytes) -> None:
    root.add(Node("protocol", data[:4].decode("latin-1"), "bytes", 0, min(4, len(data))))
    if len(data) >= 8:
        root.add(Node("protocol id", PROTOCOL_IDS.get(data[4], data[4]), "octet", 4, 1))
        root.add(Node("major", data[5], "octet", 5, 1))
        root.add(Node("minor", data[6], "octet", 6, 1))
        root.add(Node("revision", data[7], "octet", 7, 1))


def _payload(walker: _Walker, at: int, end: int, sections: bool) -> Node:
    """A transfer's payload: its message sections where this frame holds whole ones (a message
    spread over frames shows its first frame's sections, and the rest as bytes); the payload of
    a frame that continues a delivery is bytes (`sections` False)."""
    node = Node("payload", f"{end - at} bytes", "payload", at, end - at)
    if not sections:  # a continued delivery's bytes are its message's, the body's mostly
        node.body = True
        return node
    pos = at
    while pos < end:
        if walker.buf[pos] != types.DESCRIBED:
            walker.rest(node, pos, end, "not a message section")
            break
        try:
            section, nxt = walker.value("section", pos, end)
        except types.Malformed as exc:
            # a section cut by the frame's end goes on in the next frame of the delivery
            node.add(Node("continues", exc.why, "binary", pos, end - pos, body=True))
            break
        descriptor = section.children[0].value if section.children else None
        restricted = _RESTRICTED_BY_CODE.get(descriptor) if isinstance(descriptor, int) else None
        composite = spec.COMPOSITES.get(descriptor) if isinstance(descriptor, int) else None
        section.name = composite.name if composite else restricted.name if restricted else "section"
        section.body = section.name in BODY_SECTIONS
        node.add(section)
        pos = nxt
    return node
