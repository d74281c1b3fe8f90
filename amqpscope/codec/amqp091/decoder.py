"""AMQP 0-9-1 field decoding: fills `fields` (and `message`) of the frames of one direction.

One `Decoder` per connection direction: it keeps what spans frames (messages assembled across
content frames, per channel; the SASL mechanism the client chose). It never raises; damage
becomes findings on the frame. 0-8 (and 0-9) peers are decoded with the table their frames were
named from, and every method whose ids or arguments differ from 0-9-1's is flagged. With
`redact_bodies` message bodies are counted, never kept (content.py).
"""

from __future__ import annotations

import functools
from typing import Any, Final

from amqpscope.codec import frames as k
from amqpscope.codec.amqp091 import spec, spec08
from amqpscope.codec.amqp091.arguments import CompiledMethods, MethodArguments, compile_methods
from amqpscope.codec.amqp091.content import Assembler, compile_properties, decode_header
from amqpscope.codec.amqp091.fieldtable import Malformed, table_entries, text
from amqpscope.codec.amqp091.frames import CLASS_METHOD, HEADER_SIZE, methods_for
from amqpscope.codec.amqp091.peerprops import found_type, ill_typed
from amqpscope.codec.frames import Frame
from amqpscope.codec.tree import REDACTED
from amqpscope.findings import Finding, finding

ARGS_AT: Final = HEADER_SIZE + CLASS_METHOD.size  # offset of a method's first argument in the frame
DIFFERENCE: Final = "amqp091.version-difference"
BAD_FIELD_TYPE: Final = "amqp091.bad-field-type"


class Tables:
    """One spec table, compiled: arguments and properties per id, reply codes, differences."""

    def __init__(self, methods: dict, properties: dict, replies: dict) -> None:
        self.methods = methods
        self.arguments: CompiledMethods = compile_methods(methods)
        self.content = frozenset(ids for ids, m in methods.items() if m.content)
        self.properties = compile_properties(properties)
        self.replies = {code: name for code, (name, _) in replies.items()}
        self.differences = differences(methods, spec.METHODS)


def differences(methods: dict, reference: dict) -> dict[tuple[int, int], str]:
    """Where `methods` (0-8's) and `reference` (0-9-1's) disagree on the same ids, and how."""
    out = {}
    for ids, method in methods.items():
        other = reference.get(ids)
        where = f"{method.name} ({ids[0]}/{ids[1]})"
        if other is None:
            out[ids] = f"{where} is not a 0-9-1 method"
        elif other.name != method.name:
            out[ids] = f"{where} is {other.name} in 0-9-1"
        elif other.arguments != method.arguments:
            ours, theirs = dict(method.arguments), dict(other.arguments)
            notes = [f"no {n!r}" for n in theirs if n not in ours]
            notes += [f"an extra {n!r}" for n in ours if n not in theirs]
            notes += [f"{n!r} as {ours[n]}" for n in ours if n in theirs and ours[n] != theirs[n]]
            out[ids] = f"{where} has {', '.join(notes) or 'its arguments reordered'}, unlike 0-9-1"
    return out


TABLES_091: Final = Tables(spec.METHODS, spec.PROPERTIES, spec.REPLY_CODES)


@functools.cache
def _tables_08() -> Tables:
    """0-8's tables, compiled when a 0-8 peer first shows up (it rarely does: startup counts)."""
    return Tables(spec08.METHODS, spec08.PROPERTIES, spec08.REPLY_CODES)


def tables_for(version: str) -> Tables:
    """The compiled tables the framer names `version`'s methods from."""
    return TABLES_091 if methods_for(version) is spec.METHODS else _tables_08()


class Decoder:
    """The decoder of one direction of one connection (the framer makes one per direction)."""

    __slots__ = ("assembler", "mechanism", "show_secrets", "tables", "version")

    def __init__(
        self,
        version: str = "0-9-1",
        show_secrets: bool = False,
        redact_bodies: bool = False,
        messages: bool = True,
    ) -> None:
        self.version = version  # "0-9-1", or "0-9" / "0-8" (decoded where they agree)
        self.show_secrets = show_secrets
        self.tables = tables_for(version)
        # messages False (`summary`): bodies are not rendered, only kept for message journeys
        self.assembler = Assembler(redact_bodies, messages)
        self.mechanism = ""  # the SASL mechanism of this direction's start-ok

    def decode(self, frame: Frame) -> None:
        """Fill `frame.fields` (and `frame.message` on the frame that completes a message)."""
        kind = frame.kind
        if kind == k.METHOD:
            self._method(frame)
        elif kind == k.CONTENT_HEADER:
            fields, problems, body_size = decode_header(frame.data, self.tables.properties)
            frame.fields = fields
            if problems:
                _note(frame, problems)
            self.assembler.header(frame, fields.get("properties") or {}, body_size)
        elif kind == k.CONTENT_BODY:
            if self.assembler.render:  # not in `summary`, which shows no frame
                frame.fields = {"size": len(frame.data) - HEADER_SIZE - 1}
            self.assembler.body(frame)

    def end(self) -> list[Finding]:
        """The direction ended: findings for messages left incomplete."""
        return self.assembler.end()

    def gap(self) -> None:
        """Bytes were lost: see `Assembler.gap`."""
        self.assembler.gap()

    def _method(self, frame: Frame) -> None:
        data = frame.data
        limit = len(data) - 1
        if limit < ARGS_AT:
            return  # framing already said the method frame is too short
        tables = self.tables
        # the common case, 0-9-1: the frame was named from this table by its ids, and its name
        # finds the decoder (the ids are not read again)
        compiled = tables.arguments.named(frame.name) if tables is TABLES_091 else None
        if compiled is None:
            compiled, tables = self._by_ids(frame, data, limit)
            if compiled is None:
                return
        fields, problems = compiled.decode(data, ARGS_AT, limit)
        frame.fields = fields
        if problems:
            _note(frame, problems)
        if compiled.replies and "reply-code" in fields:
            self._reply(fields, tables)
        special = SPECIAL.get(compiled.name)
        if special is not None:
            special(self, frame, fields)
        if compiled.content or self.assembler.open:
            self.assembler.method(frame, compiled.name, fields, compiled.content)

    def _by_ids(
        self, frame: Frame, data: bytes, limit: int
    ) -> tuple[MethodArguments | None, Tables]:
        """The decoder by the frame's class and method ids, and the table it is from: a 0-8 peer
        (a method 0-8 lacks is read as 0-9-1's; either way a difference is noted), or ids no
        table knows (None; the fields then say the ids, and the arguments in hex)."""
        ids = CLASS_METHOD.unpack_from(data, HEADER_SIZE)
        tables = self.tables
        compiled = tables.arguments.get(ids)
        if tables is not TABLES_091:
            if compiled is None and ids in TABLES_091.arguments:
                tables = TABLES_091
                compiled = tables.arguments[ids]
                note = (
                    f"{compiled.name} ({ids[0]}/{ids[1]}) is not an AMQP {self.version} method;"
                    " read as 0-9-1"
                )
                frame.findings.append(finding(DIFFERENCE, note))
            elif ids in tables.differences:
                note = f"AMQP {self.version}: {tables.differences[ids]}"
                frame.findings.append(finding(DIFFERENCE, note))
        if compiled is None:
            frame.fields = {
                "class-id": ids[0],
                "method-id": ids[1],
                "arguments": {"hex": data[ARGS_AT:limit].hex()},
            }
        return compiled, tables

    # -- readable extras -----------------------------------------------------------------------
    @staticmethod
    def _reply(fields: dict[str, Any], tables: Tables) -> None:
        """reply-code 406 -> "reply-name": "PRECONDITION_FAILED"; class-id 50 method-id 10 ->
        "method": "queue.declare" (the method that failed)."""
        name = tables.replies.get(fields["reply-code"])
        if name is not None:
            fields["reply-name"] = name
        failed = tables.methods.get((fields.get("class-id"), fields.get("method-id")))
        if failed is not None:
            fields["method"] = failed.name

    def _start(self, frame: Frame, fields: dict[str, Any]) -> None:
        _peer_properties(frame, fields, "server-properties")

    def _start_ok(self, frame: Frame, fields: dict[str, Any]) -> None:
        """The mechanism, and the user of a PLAIN or AMQPLAIN response; the password only with
        show_secrets."""
        _peer_properties(frame, fields, "client-properties")
        mechanism = fields.get("mechanism")
        self.mechanism = mechanism if isinstance(mechanism, str) else ""
        response = fields.get("response")
        if response is None:
            return
        raw = response.encode() if isinstance(response, str) else bytes.fromhex(response["hex"])
        user, shown = _credentials(self.mechanism.upper(), raw, self.show_secrets)
        if shown is not None:
            fields["response"] = shown
        elif not self.show_secrets:
            fields["response"] = REDACTED
        if type(user) is str:
            fields["user"] = user
        elif user is not None:  # an AMQPLAIN LOGIN of another type, or PLAIN's not UTF-8
            what = f"connection.start-ok.response's user is {found_type(user)}, not longstr"
            frame.findings.append(finding(BAD_FIELD_TYPE, what))

    def _secret(self, frame: Frame, fields: dict[str, Any]) -> None:
        """secure-ok's response and update-secret's new secret: shown only with show_secrets."""
        if self.show_secrets:
            return
        for name in ("response", "new-secret"):
            if name in fields:
                fields[name] = REDACTED


#: method name -> what the decoder adds to (or hides in) its fields
SPECIAL: Final = {
    "connection.start": Decoder._start,
    "connection.start-ok": Decoder._start_ok,
    "connection.secure-ok": Decoder._secret,
    "connection.update-secret": Decoder._secret,
}
#: mechanisms whose response carries no secret
NO_SECRET: Final = frozenset({"EXTERNAL", "ANONYMOUS"})


def _credentials(mechanism: str, raw: bytes, show: bool) -> tuple[Any, Any]:
    """(user or None, the response to show or None to leave it as decoded / redact it whole)."""
    if mechanism == "PLAIN":
        parts = raw.split(b"\0")
        if len(parts) != 3:
            return None, None
        authzid, user, password = (text(p) for p in parts)
        return user, {
            "authzid": authzid,
            "username": user,
            "password": password if show else REDACTED,
        }
    if mechanism == "AMQPLAIN":
        try:
            table = table_entries(raw, 0, len(raw))
        except Malformed:
            return None, None
        if not show and "PASSWORD" in table:
            table["PASSWORD"] = REDACTED
        return table.get("LOGIN"), table
    if mechanism in NO_SECRET:
        return None, text(raw)
    return None, None


def _peer_properties(frame: Frame, fields: dict[str, Any], name: str) -> None:
    """An `amqp091.bad-field-type` for each entry of the peer's properties that is not of the
    type `peerprops` gives it (the frame keeps it; the tracker reads `peerprops.well_typed`)."""
    table = fields.get(name)
    if type(table) is not dict:
        return
    for key, found, expected in ill_typed(table):
        what = f"{frame.name}.{name}.{key} is {found}, not {expected}"
        frame.findings.append(finding(BAD_FIELD_TYPE, what))


def _note(frame: Frame, problems: list[tuple[str, str]]) -> None:
    frame.findings.extend(finding(code, message) for code, message in problems)
