"""AMQP 0-9-1 content: content headers, and body frames joined per channel into messages.

A content method (basic.publish, deliver, get-ok, return: the table's `content` flag) opens a
message on its channel; the content header gives its properties and body size; body frames add
up to that size, and the frame that completes it carries `message`. Frames of other channels may
interleave; another method on the same channel ends an incomplete message (a finding). With
`redact_bodies` body bytes are counted and dropped as they arrive: the message says its size only.
"""

from __future__ import annotations

import struct
from typing import Any, Final

from amqpscope.codec.amqp091.arguments import READERS, Truncated
from amqpscope.codec.amqp091.fieldtable import Malformed
from amqpscope.codec.body import as_text
from amqpscope.codec.frames import Frame
from amqpscope.findings import Finding, finding

HEADER: Final = struct.Struct(">HHQH")  # class-id, weight, body-size, first property-flags word
FLAGS: Final = struct.Struct(">H")
PAYLOAD: Final = 7  # offset of the payload in a frame's bytes
BAD_HEADER: Final = "amqp091.bad-content-header"
BAD_TABLE: Final = "amqp091.bad-field-table"
MISMATCH: Final = "amqp091.body-size-mismatch"
UNEXPECTED: Final = "amqp091.unexpected-content"
INCOMPLETE: Final = "amqp091.incomplete-message"
NOT_KEPT: Final = "amqp091.body-not-kept"
#: bodies up to this size are kept whole for `message`; a larger one is counted, not kept
MAX_BODY = 64 * 1024 * 1024


#: how to read the properties a set of flags names: (name, domain, reader or None for a bit)
Steps = tuple[tuple[str, str, Any], ...]
#: a set of flags' steps, the flags that name no property, and the flags as shown
Plan = tuple[Steps, str, str]


class ClassProperties:
    """One class's content properties, in flag order (bit 15 of the first flags word is the
    first property; bit 0 of every word says another word follows), and for each set of flags
    seen, the plan that reads its properties (cached: a connection reuses a few)."""

    __slots__ = ("plans", "props", "single")

    def __init__(self, props: tuple[tuple[str, str], ...]) -> None:
        self.props = tuple(
            (i // 15, 1 << (15 - i % 15), name, domain) for i, (name, domain) in enumerate(props)
        )
        self.plans: dict[tuple[int, ...], Plan] = {}
        self.single: dict[int, Plan] = {}  # the same, by a lone flags word

    def plan1(self, word: int) -> Plan:
        """`plan((word,))`, kept by the word itself (one flags word is the usual case: no
        tuple is made and hashed per header)."""
        plan = self.single.get(word)
        if plan is None:
            plan = self.plan((word,))
            if len(self.single) >= MAX_PLANS:
                self.single.clear()
            self.single[word] = plan
        return plan

    def plan(self, words: tuple[int, ...]) -> Plan:
        """((name, domain, reader), ...) for the flags set in `words`, the flags that name
        no property ("word:bit", empty when none), and the flags as shown ("0x9000")."""
        plan = self.plans.get(words)
        if plan is None:
            steps = tuple(
                (name, domain, None if domain == "bit" else READERS[domain])
                for index, mask, name, domain in self.props
                if index < len(words) and words[index] & mask
            )
            count = len(self.props)
            unknown = ",".join(
                f"{index}:{bit}"
                for index, word in enumerate(words)
                for bit in range(15, 0, -1)
                if word >> bit & 1 and index * 15 + 15 - bit >= count
            )
            if len(self.plans) >= MAX_PLANS:
                self.plans.clear()
            plan = self.plans[words] = (steps, unknown, flags_text(words))
        return plan


#: flag sets remembered per class before the cache starts over (damage could make any number)
MAX_PLANS: Final = 1024


def flags_text(words: tuple[int, ...]) -> str:
    """Property flag words as shown: "0x9000", "0x0001 0x8000"."""
    return " ".join(f"0x{w:04x}" for w in words)


def compile_properties(
    properties: dict[int, tuple[tuple[str, str], ...]],
) -> dict[int, ClassProperties]:
    """class id -> its `ClassProperties`."""
    return {class_id: ClassProperties(props) for class_id, props in properties.items()}


def decode_header(
    data: bytes, compiled: dict[int, ClassProperties]
) -> tuple[dict[str, Any], list, int]:
    """A content header frame's fields, problems [(code, message)], and its body size (-1 if the
    header is unreadable)."""
    limit = len(data) - 1
    if limit - PAYLOAD < HEADER.size:
        return {}, [(BAD_HEADER, f"content header of {limit - PAYLOAD} bytes, at least 14")], -1
    # HEADER's four fields read byte by byte: compiled, native reads, no tuple and no call
    class_id = data[7] << 8 | data[8]
    weight = data[9] << 8 | data[10]
    body_size = (
        data[11] << 56
        | data[12] << 48
        | data[13] << 40
        | data[14] << 32
        | data[15] << 24
        | data[16] << 16
        | data[17] << 8
        | data[18]
    )
    word = data[19] << 8 | data[20]
    pos = PAYLOAD + HEADER.size
    problems: list[tuple[str, str]] = []
    # typed (compiled: `plan1` a direct call, the steps a native loop)
    props = compiled.get(class_id)
    steps: Steps = ()
    unknown = ""
    if not word & 1:  # one flags word, the usual case
        if props is None:  # no plan: the flags are shown as they are
            flags = flags_text((word,))
        else:
            steps, unknown, flags = props.plan1(word)  # the flags' text is cached with the plan
    else:
        words = [word]
        while word & 1:
            if pos + 2 > limit:
                problems.append((BAD_HEADER, "property flags run past the end of the frame"))
                break
            word = FLAGS.unpack_from(data, pos)[0]
            words.append(word)
            pos += 2
        key = tuple(words)
        if props is None or problems:
            flags = flags_text(key)
        else:
            steps, unknown, flags = props.plan(key)
    if props is None:
        problems.append((BAD_HEADER, f"class {class_id} has no content properties"))
        return (
            {
                "class-id": class_id,
                "weight": weight,
                "body-size": body_size,
                "property-flags": flags,
            },
            problems,
            body_size,
        )
    values: dict[str, Any] = {}
    fields: dict[str, Any] = {
        "class-id": class_id,
        "weight": weight,
        "body-size": body_size,
        "property-flags": flags,
        "properties": values,
    }
    if problems:
        return fields, problems, body_size
    name = ""
    try:
        for name, domain, read in steps:
            if domain == "shortstr":  # most properties: read here, not by a call
                end = pos + 1 + data[pos] if pos < limit else limit + 1
                if end > limit:
                    raise Truncated(name, {})
                raw = data[pos + 1 : end]
                try:
                    values[name] = raw.decode()
                except UnicodeDecodeError:
                    values[name] = {"hex": raw.hex()}
                pos = end
            elif read is None:
                values[name] = True
            else:
                values[name], pos = read(data, pos, limit)
    except Truncated:
        problems.append((BAD_HEADER, f"property {name} runs past the end of the frame"))
        return fields, problems, body_size
    except Malformed as exc:
        values[name] = exc.partial
        problems.append((BAD_TABLE, f"{name}: {exc}"))
        return fields, problems, body_size
    if unknown:
        problems.append((BAD_HEADER, f"property flags {unknown} name no property of the class"))
    elif pos < limit:
        problems.append((BAD_HEADER, f"{limit - pos} bytes after the last property"))
    return fields, problems, body_size


def render_body(body: bytes, properties: dict[str, Any]) -> dict[str, Any]:
    """{"text": ...} or {"hex": ...}, with "size"; the whole body, always. The rule is 1.0's: a
    textual content-type (text/*, JSON, XML, ...) is text in its charset (UTF-8 unless given);
    without a content-type, UTF-8 free of control characters is text; anything else, and any
    compressed (content-encoding) body, is hex."""
    text = as_text(body, properties.get("content-type"), properties.get("content-encoding"))
    if text is None:
        return {"hex": body.hex(), "size": len(body)}
    return {"text": text, "size": len(body)}


class _Message:
    """A message being assembled on one channel."""

    __slots__ = (
        "arguments",
        "body_size",
        "got",
        "method",
        "parts",
        "properties",
        "redact",
        "render",
    )

    def __init__(
        self, method: str, arguments: dict[str, Any], redact: bool = False, render: bool = True
    ) -> None:
        self.redact = redact  # count the body, never keep it
        self.render = render  # False: the body stays bytes ("raw"), for a tracker, not for output
        self.method = method
        self.arguments = arguments
        self.properties: dict[str, Any] | None = None  # None until the content header
        self.body_size = 0
        self.got = 0
        self.parts: list[bytes] = []

    def to_json(self) -> dict[str, Any]:
        props = self.properties or {}
        if self.redact:
            body: dict[str, Any] = {"size": self.got, "redacted": True}
        elif self.got > MAX_BODY:
            body = {"size": self.got, "truncated": True}
        elif not self.render:  # `summary`: rendered only if a journey needs it (message_key)
            body = {"raw": b"".join(self.parts)}
        else:
            body = render_body(b"".join(self.parts), props)
        return {
            "method": self.method,
            "arguments": self.arguments,
            "properties": props,
            "body-size": self.body_size,
            "body": body,
        }

    def state(self) -> str:
        if self.properties is None:
            return "no content header"
        return f"{self.got} of {self.body_size} body bytes"


class Assembler:
    """The messages of one direction, one at most per channel. With `render` False (`summary`:
    no message is output) a message's body is left as bytes, `{"raw": ...}`."""

    __slots__ = ("open", "redact", "render", "since_gap")

    def __init__(self, redact: bool = False, render: bool = True) -> None:
        self.open: dict[int, _Message] = {}
        self.redact = redact  # message bodies are counted, never kept
        self.render = render
        # after bytes were lost (or a capture that started mid-stream): the channels that have
        # had a method since (None: no loss). Content on any other channel may belong to a
        # method in the lost bytes (or before the capture): not flagged
        self.since_gap: set[int] | None = None

    def gap(self) -> None:
        """Bytes were lost: messages in progress cannot complete (the gap itself is reported
        on the next frame), so they are dropped rather than reported as mismatches later; the
        content frames right after the hole may be those of a method in it."""
        self.open.clear()
        self.since_gap = set()

    def method(self, frame: Frame, name: str, fields: dict[str, Any], content: bool) -> None:
        """A method on `frame.channel`: it ends any message still open there; a content method
        opens one."""
        channel = frame.channel or 0
        if self.since_gap is not None:
            self.since_gap.add(channel)
        pending = self.open.pop(channel, None)
        if pending is not None:
            frame.findings.append(_interrupted(pending, channel, name))
        if content:
            self.open[channel] = _Message(name, fields, self.redact, self.render)

    def header(self, frame: Frame, properties: dict[str, Any], body_size: int) -> None:
        channel = frame.channel or 0
        pending = self.open.get(channel)
        if pending is not None and pending.properties is not None:
            del self.open[channel]
            frame.findings.append(_interrupted(pending, channel, "a content header"))
            pending = None
        if pending is None:
            if self._orphan(channel):
                return
            frame.findings.append(
                finding(UNEXPECTED, f"content header on channel {channel} follows no method")
            )
            return
        if body_size < 0:  # unreadable header: the message cannot be followed
            del self.open[channel]
            return
        pending.properties = properties
        pending.body_size = body_size
        if body_size == 0:
            del self.open[channel]
            frame.message = pending.to_json()

    def body(self, frame: Frame) -> None:
        channel = frame.channel or 0
        pending = self.open.get(channel)
        size = len(frame.data) - PAYLOAD - 1
        if pending is None or pending.properties is None:
            if pending is None and self._orphan(channel):
                return
            what = "no method" if pending is None else "no content header"
            frame.findings.append(
                finding(UNEXPECTED, f"content body on channel {channel} follows {what}")
            )
            return
        pending.got += size
        if pending.got <= MAX_BODY and not pending.redact:
            pending.parts.append(frame.data[PAYLOAD:-1])
        elif pending.parts:
            pending.parts = []  # too large to keep: counted from here on
        if pending.got < pending.body_size:
            return
        del self.open[channel]
        if pending.got > MAX_BODY:
            frame.findings.append(
                finding(NOT_KEPT, f"{pending.method} on channel {channel}: {pending.got} bytes")
            )
        if pending.got > pending.body_size:
            frame.findings.append(
                finding(
                    MISMATCH,
                    f"{pending.method} on channel {channel}: {pending.got} body bytes, "
                    f"the header says {pending.body_size}",
                )
            )
        frame.message = pending.to_json()

    def _orphan(self, channel: int) -> bool:
        """Content with no method, on a channel that had none since bytes were lost."""
        since = self.since_gap
        return since is not None and channel not in since

    def end(self) -> list[Finding]:
        out = [
            finding(INCOMPLETE, f"{m.method} on channel {channel} ended with {m.state()}")
            for channel, m in self.open.items()
        ]
        self.open.clear()
        return out


def _interrupted(pending: _Message, channel: int, by: str) -> Finding:
    code = INCOMPLETE if pending.properties is None else MISMATCH
    return finding(code, f"{pending.method} on channel {channel}: {pending.state()}, then {by}")
