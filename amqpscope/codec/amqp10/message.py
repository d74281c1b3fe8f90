"""AMQP 1.0 messages: a delivery's payload as sections, its body rendered, its patterns named.

A bare message is a sequence of described sections in the order `spec.SECTIONS` lists them:
header, delivery-annotations, message-annotations, properties, application-properties, the body
(one or more data, one or more amqp-sequence, or one amqp-value) and footer. Out-of-order,
repeated or unknown sections, a missing body and mixed body kinds are findings; what can be
decoded is kept.

Bodies: data is shown as `text` when its content-type is textual (or, without one, when it is
valid UTF-8 without control characters), else as `hex`; amqp-value and amqp-sequence as JSON
values. Known annotation keys (Azure Service Bus `x-opt-*`, RabbitMQ's) are named, and the AMQP
management and claims-based-security request/response patterns (`$management`, `$cbs`
`put-token`) are recognised; a put-token's token is redacted unless secrets are shown. With
`redact_bodies` a body keeps only its kind and size (transaction control bodies, declare and
discharge, are protocol, not payload, and stay).
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from amqpscope.codec.amqp10 import composites, jsonmap, spec
from amqpscope.codec.amqp10.jsonmap import REDACTED
from amqpscope.codec.amqp10.types import (
    BINARIES,
    DESCRIBED,
    LISTS,
    MAPS,
    MAX_ZERO_WIDTH_ELEMENTS,
    READERS,
    SMALL_ULONG,
    Context,
    Malformed,
    read_at,
    read_descriptor,
)
from amqpscope.codec.body import as_text
from amqpscope.findings import Finding

BODY_SECTIONS: Final = ("data", "amqp-sequence", "amqp-value")
#: sections that may appear more than once in a row
REPEATABLE: Final = frozenset(("data", "amqp-sequence"))
#: section name -> rank in a message; the body kinds share one rank
_RANK: Final[dict[str, int]] = {}
for _name in spec.SECTIONS:
    _shared = _name in BODY_SECTIONS and BODY_SECTIONS[0] in _RANK
    _RANK[_name] = _RANK[BODY_SECTIONS[0]] if _shared else len(set(_RANK.values()))
#: section descriptor (numeric code and symbol) -> section name
SECTION_BY_DESCRIPTOR: Final[dict[Any, str]] = {}
for _code, _c in spec.COMPOSITES.items():
    if "section" in _c.provides:
        SECTION_BY_DESCRIPTOR[_code] = SECTION_BY_DESCRIPTOR[_c.symbol] = _c.name
for _r in spec.RESTRICTED.values():
    if "section" in _r.provides and _r.code is not None:
        SECTION_BY_DESCRIPTOR[_r.code] = SECTION_BY_DESCRIPTOR[_r.symbol] = _r.name
#: sections that are composites (decoded as named fields)
_COMPOSITE_SECTIONS: Final = {
    c.name: composites.SPECS[code] for code, c in spec.COMPOSITES.items() if "section" in c.provides
}


class _Section:
    """What `_sections` needs to know of a section, looked up once by its descriptor."""

    __slots__ = (
        "allowed",
        "annotations",
        "body",
        "composite",
        "name",
        "properties",
        "rank",
        "repeatable",
    )

    def __init__(self, name: str) -> None:
        self.name = name
        self.annotations = name in ("delivery-annotations", "message-annotations")
        self.properties = name == "properties"
        self.rank = _RANK[name]
        self.repeatable = name in REPEATABLE
        self.body = name in BODY_SECTIONS
        self.composite = _COMPOSITE_SECTIONS.get(name)
        #: the constructors its value may have (a section that is neither a composite nor data)
        self.allowed = LISTS if name == "amqp-sequence" else None if name == "amqp-value" else MAPS


#: section descriptor (numeric code and symbol) -> the section
_SECTIONS: Final = {d: _Section(name) for d, name in SECTION_BY_DESCRIPTOR.items()}
#: the same by one-byte code (how sections are usually sent): a tuple index, not a dict lookup
_SECTION_BY_CODE: Final[tuple[_Section | None, ...]] = tuple(
    [_SECTIONS.get(code) for code in range(256)]
)
_BINARY_WIDTH: Final = {c: spec.ENCODINGS[c].width for c in BINARIES}

#: annotation key -> (system, the name that system's API gives it). Not in the OASIS spec: from
#: the Azure Service Bus AMQP guide and RabbitMQ's AMQP 1.0 plugin.
ANNOTATIONS: Final[dict[str, tuple[str, str]]] = {
    "x-opt-scheduled-enqueue-time": ("Azure Service Bus", "ScheduledEnqueueTime"),
    "x-opt-partition-key": ("Azure Service Bus", "PartitionKey"),
    "x-opt-via-partition-key": ("Azure Service Bus", "TransactionPartitionKey"),
    "x-opt-enqueued-time": ("Azure Service Bus", "EnqueuedTime"),
    "x-opt-sequence-number": ("Azure Service Bus", "SequenceNumber"),
    "x-opt-offset": ("Azure Service Bus", "EnqueuedSequenceNumber"),
    "x-opt-locked-until": ("Azure Service Bus", "LockedUntil"),
    "x-opt-deadletter-source": ("Azure Service Bus", "DeadLetterSource"),
    "x-exchange": ("RabbitMQ", "exchange"),
    "x-routing-key": ("RabbitMQ", "routing-key"),
}
#: request/reply nodes, by the last segment of an address
NODES: Final = ("$cbs", "$management")
#: the application-properties a request or a response has one of (`request_reply`)
_PATTERN_KEYS: Final = frozenset(("operation", "status-code", "statusCode"))


class Link(NamedTuple):
    """What an attach said about a link, kept to interpret its deliveries."""

    name: str | None
    role: str | None
    source: str | None
    target: str | None
    coordinator: bool = False  # a transaction controller's link: its messages declare, discharge


def _address(terminus: Any) -> str | None:
    if type(terminus) is dict:
        address = terminus.get("address")
        return address if type(address) is str else None
    return None


def link_of(fields: dict[str, Any]) -> Link:
    """The Link an attach's fields describe."""
    name = fields.get("name")
    return Link(
        name if type(name) is str else None,
        fields.get("role"),
        _address(fields.get("source")),
        _address(fields.get("target")),
        type(target := fields.get("target")) is dict and target.get("type") == "coordinator",
    )


def decode_message(
    buf: bytes | memoryview,
    start: int,
    end: int,
    *,
    where: str = "offset",
    link: Link | None = None,
    show_secrets: bool = False,
    redact_bodies: bool = False,
    into: dict[str, Any] | None = None,
    ctx: Context | None = None,
) -> tuple[dict[str, Any], list[Finding]]:
    """The message whose sections are `buf[start:end]`, and findings (offsets named `where`).
    Its keys are added to `into` (the delivery's, ahead of them) when given. Never raises.

    `ctx`: the decoding pass of the frame that holds the message (a transfer's performative,
    `buf` its bytes, offsets named as `where` names them), which the message's pass goes on
    (one context a frame, not two): its findings go on `ctx.findings`, after the frame's, and
    none are returned."""
    if ctx is not None and ctx.buf is buf and ctx.where == where:
        ctx.zero_width = MAX_ZERO_WIDTH_ELEMENTS  # a budget of its own, as a new pass has
        shared = True
    else:
        ctx = Context(buf, where)
        shared = False
    message: dict[str, Any] = {} if into is None else into
    message["size"] = end - start
    names: list[str] = []
    message["sections"] = names
    body = _Body()
    try:
        _sections(ctx, start, end, message, names, body)
    except Malformed as exc:
        ctx.malformed(exc)
    if body.kind is None:
        ctx.note("amqp10.bad-message", end, "message without a body section")
    else:
        props = body.properties  # the message's "properties", kept by `_sections`
        if props is not None:
            content_type = props.get("content-type")
            content_encoding = props.get("content-encoding")
        else:
            content_type = content_encoding = None
        message["body"] = body.render(content_type, content_encoding, redact_bodies)
    if redact_bodies:
        for unknown in message.get("unknown-sections", ()):
            unknown["value"] = REDACTED
    if body.annotated:  # "delivery-annotations" or "message-annotations" in `message`
        named = _named_annotations(message)
        if named:
            message["named-annotations"] = named
    pattern = request_reply(message, link)
    if pattern is not None:
        message["request-reply"] = pattern
        if pattern.get("operation") == "put-token" and not show_secrets:
            _redact_body(message)
    return message, [] if shared else ctx.findings


class _Body:
    """The body sections seen so far."""

    __slots__ = ("annotated", "count", "kind", "parts", "properties", "size", "values")

    def __init__(self) -> None:
        #: what `decode_message` reads of the message's sections: its properties, whether it
        #: has annotations (set by `_sections` as it puts them in, not looked up again)
        self.properties: dict[str, Any] | None = None
        self.annotated = False
        self.kind: str | None = None
        self.parts: list[bytes] = []
        self.values: list[Any] = []
        self.size = 0
        self.count = 0

    def render(self, content_type: Any, content_encoding: Any, redact: bool = False) -> dict:
        out: dict[str, Any] = {"type": self.kind, "size": self.size}
        if self.count > 1:
            out["sections"] = self.count
        if redact and not self.control():
            out["redacted"] = True
            return out
        if self.kind == "data":
            raw = self.parts[0] if len(self.parts) == 1 else b"".join(self.parts)
            text = as_text(raw, content_type, content_encoding)
            if text is None:
                out["hex"] = raw.hex()
            else:
                out["text"] = text
        elif self.kind == "amqp-sequence":
            out["value"] = [item for seq in self.values for item in seq]
        else:
            out["value"] = self.values[0] if self.values else None
        return out

    def control(self) -> bool:
        """An amqp-value that is a spec composite (a transaction's declare or discharge)."""
        value = self.values[0] if self.kind == "amqp-value" and self.values else None
        return type(value) is dict and value.get("type") in composites.BY_NAME


def _sections(
    ctx: Context, pos: int, end: int, message: dict[str, Any], names: list[str], body: _Body
) -> None:
    buf = ctx.buf
    rank = -1
    descriptor: Any
    section: _Section | None
    while pos < end:
        if buf[pos] != DESCRIBED or pos + 1 >= end:
            ctx.note("amqp10.bad-message", pos, f"{end - pos} bytes that are not a section")
            return
        if buf[pos + 1] == SMALL_ULONG and pos + 2 < end:  # the usual form: a one-byte code
            code = buf[pos + 2]  # the descriptor (made an object only for an unknown section)
            vpos = pos + 3
            section = _SECTION_BY_CODE[code]
        else:
            code = -1
            descriptor, vpos = read_descriptor(ctx, pos + 1, end, 0)
            kind = type(descriptor)
            section = _SECTIONS.get(descriptor) if kind is int or kind is str else None
        if vpos >= end:
            raise Malformed(vpos, "section without its value")
        ctor = buf[vpos]
        if section is None:
            if code >= 0:
                descriptor = code
            what = f"unknown section {jsonmap.descriptor(descriptor)}"
            ctx.note("amqp10.bad-message", pos, what)
            value, pos = READERS[ctor](ctx, vpos + 1, end, 1)
            message.setdefault("unknown-sections", []).append(
                {"descriptor": jsonmap.descriptor(descriptor), "value": value}
            )
            continue
        name = section.name
        here = section.rank
        if (
            here < rank
            or (here == rank and not section.repeatable)
            or (section.body and body.kind is not None and body.kind != name)
        ):
            previous = names[-1] if names else "nothing"
            ctx.note("amqp10.bad-message", pos, f"{name} section after {previous}")
        if here > rank:
            rank = here
        names.append(name)
        cspec = section.composite
        if cspec is not None:
            fields: dict[str, Any] = {}
            pos = composites.decode_fields(ctx, cspec, ctor, vpos + 1, end, 1, fields)
            message[name] = fields
            if section.properties:
                body.properties = fields
        elif name == "data":
            pos = _data(ctx, ctor, vpos, end, body)
        else:
            allowed = section.allowed
            if allowed is not None and ctor not in allowed:
                ctx.note("amqp10.bad-message", vpos, f"{name} section of the wrong type")
            start = vpos
            value, pos = read_at(ctx, ctor, vpos + 1, end, 1)
            if section.body:
                body.kind = body.kind or name
                body.values.append(
                    value if name == "amqp-value" or type(value) is list else [value]
                )
                body.size += pos - start
                body.count += 1
            else:
                message[name] = value
                if section.annotations:
                    body.annotated = True


def _data(ctx: Context, ctor: int, vpos: int, end: int, body: _Body) -> int:
    """A data section's bytes, kept as they are (not as hex) for the body."""
    width = _BINARY_WIDTH.get(ctor)
    if width is None:
        raise Malformed(vpos, "data section is not binary")
    start = vpos + 1 + width
    if start > end:
        raise Malformed(vpos, "data section truncated")
    size = int.from_bytes(ctx.buf[vpos + 1 : start], "big")
    if size > end - start:
        raise Malformed(vpos, f"data of {size} bytes runs past the end ({end - start} left)")
    body.kind = body.kind or "data"
    body.parts.append(ctx.buf[start : start + size])
    body.size += size
    body.count += 1
    return start + size


def _named_annotations(message: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for section in ("delivery-annotations", "message-annotations"):
        annotations = message.get(section)
        if type(annotations) is not dict:
            continue
        for key, value in annotations.items():
            known = ANNOTATIONS.get(key)
            if known is not None:
                out.append({"key": key, "system": known[0], "name": known[1], "value": value})
    return out


def _node(address: Any) -> str | None:
    if type(address) is not str:
        return None
    last = address.rsplit("/", 1)[-1]
    return last if last in NODES else None


def request_reply(message: dict[str, Any], link: Link | None) -> dict[str, Any] | None:
    """The management / CBS pattern this message is part of: a request (application property
    `operation`) sent to a `$management` or `$cbs` node, or a response (`status-code`) from one.
    Without the link's attach (a capture started late) a `put-token` request is still known."""
    app = message.get("application-properties")
    if type(app) is not dict:
        return None
    for key in app:  # most messages: none of the keys looked up below (one look per key)
        if key in _PATTERN_KEYS:
            break
    else:
        return None
    operation = app.get("operation")
    status = app.get("status-code", app.get("statusCode"))
    if operation is None and status is None:  # most messages: no node to look for
        return None
    props = message.get("properties") or {}
    node = None
    for address in (
        link.target if link else None,
        link.source if link else None,
        props.get("to"),
    ):
        node = node or _node(address)
    if node is None and operation == "put-token":
        node = "$cbs"
    if node is None or (operation is None and status is None):
        return None
    out: dict[str, Any] = {"node": node}
    if operation is not None:
        out["kind"] = "request"
        out["operation"] = operation
        for key in ("type", "name", "expiration", "locales"):
            if key in app:
                out[key] = app[key]
    else:
        out["kind"] = "response"
        out["status-code"] = status
        description = app.get("status-description", app.get("statusDescription"))
        if description is not None:
            out["status-description"] = description
    for key in ("message-id", "correlation-id", "reply-to"):
        if props.get(key) is not None:
            out[key] = props[key]
    return out


def _redact_body(message: dict[str, Any]) -> None:
    body = message.get("body")
    if body is None:
        return
    for key in ("text", "hex", "value"):
        body.pop(key, None)
    body["value"] = REDACTED
    body["redacted"] = True
