"""The frame record: one AMQP frame (or protocol header) and where it was on the wire.

The codec fills what it knows from the bytes (version, kind, name, channel, the frame's bytes);
the dissector adds where it came from (frame number, packet, connection, endpoints, direction).
`fields` stays empty until a decoder fills it; `data` keeps the frame's bytes so decoding can be
lazy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from amqpscope.findings import Finding

# kinds, as the JSON contract spells them
PROTOCOL_HEADER: Final = "protocol-header"
SASL: Final = "sasl"
PERFORMATIVE: Final = "performative"
HEARTBEAT: Final = "heartbeat"
METHOD: Final = "method"
CONTENT_HEADER: Final = "content-header"
CONTENT_BODY: Final = "content-body"
#: a record that is no frame: how the TCP connection under an AMQP connection ended
#: (`dissect.Dissector`, fields `event` and `by`; no bytes of its own)
TRANSPORT: Final = "transport"


@dataclass(slots=True, init=False)
class Frame:
    version: str
    kind: str
    name: str
    channel: int | None
    data: bytes
    direction: str
    packet: int
    ts: float
    number: int
    conn: int
    src: str
    dst: str
    fields: dict[str, Any]
    findings: list[Finding]
    message: dict[str, Any] | None  # on the frame that completes a message
    #: a frame read from a log (`logs/`): {"file", "line"} instead of packet, bytes and ends
    source: dict[str, Any] | None
    #: which packets carried the frame's bytes, when the dissector is asked to keep it (`read
    #: -x`, `-w`): (packet, offset in the frame, length, stream offset) per packet, in order
    carriers: list[tuple[int, int, int, int]] | None
    #: a frame of several inputs merged (`amqpscope.merge`): every input that holds it, where
    #: and when on its own clock: (input, file, "packet" or "line", its number, ts), spelled
    #: out by `to_json` as {"input", "file", "packet" or "line", "ts"}
    seen: list[tuple[str, str, str, int, float | None]] | None

    def __init__(
        self,
        version: str,
        kind: str,
        name: str,
        channel: int | None,
        data: bytes,
        direction: str = "",
        packet: int = 0,
        ts: float = 0.0,
        number: int = 0,
        conn: int = 0,
        src: str = "",
        dst: str = "",
        fields: dict[str, Any] | None = None,
        findings: list[Finding] | None = None,
        message: dict[str, Any] | None = None,
        source: dict[str, Any] | None = None,
        carriers: list[tuple[int, int, int, int]] | None = None,
        seen: list[tuple[str, str, str, int, float | None]] | None = None,
    ) -> None:
        """Written out, not generated: see `capture.packet`."""
        self.version = version
        self.kind = kind
        self.name = name
        self.channel = channel
        self.data = data
        self.direction = direction
        self.packet = packet
        self.ts = ts
        self.number = number
        self.conn = conn
        self.src = src
        self.dst = dst
        self.fields = {} if fields is None else fields
        self.findings = [] if findings is None else findings
        self.message = message
        self.source = source
        self.carriers = carriers
        self.seen = seen

    def with_fields(self, fields: dict[str, Any]) -> Frame:
        """This frame with other `fields` (a tracker's well-typed view, `codec.typed`), every
        other attribute kept: a direct call, cheaper than `dataclasses.replace`."""
        return Frame(
            self.version,
            self.kind,
            self.name,
            self.channel,
            self.data,
            self.direction,
            self.packet,
            self.ts,
            self.number,
            self.conn,
            self.src,
            self.dst,
            fields,
            self.findings,
            self.message,
            self.source,
            self.carriers,
            self.seen,
        )

    @property
    def size(self) -> int:
        return len(self.data)

    def to_json(self) -> dict[str, Any]:
        """The frame as the NDJSON contract of `amqpscope read --json` has it."""
        if self.source is not None:
            return self._logged_json()
        out = {
            "frame": self.number,
            "packet": self.packet,
            "ts": self.ts,
            "conn": self.conn,
            "src": self.src,
            "dst": self.dst,
            "dir": self.direction,
            "version": self.version,
            "channel": self.channel,
            "kind": self.kind,
            "name": self.name,
            "size": self.size,
            "fields": self.fields,
            "findings": [f.to_json() for f in self.findings],
        }
        if self.message is not None:
            out["message"] = self.message
        if self.seen is not None:
            out["seen"] = seen_json(self.seen)
        return out

    def _logged_json(self) -> dict[str, Any]:
        """A frame read from a log: `source` (file, line) instead of packet, endpoints and
        size, which a log does not show; `ts` null when the line had no timestamp."""
        out: dict[str, Any] = {
            "frame": self.number,
            "source": self.source,
            "ts": self.ts if self.ts else None,
            "conn": self.conn,
            "dir": self.direction,
            "version": self.version,
            "channel": self.channel,
            "kind": self.kind,
            "name": self.name,
            "fields": self.fields,
            "findings": [f.to_json() for f in self.findings],
        }
        if self.message is not None:
            out["message"] = self.message
        if self.seen is not None:
            out["seen"] = seen_json(self.seen)
        return out


def seen_json(seen: list[tuple[str, str, str, int, float | None]]) -> list[dict[str, Any]]:
    """A merged frame's `seen` as the NDJSON contract spells it."""
    return [{"input": i, "file": f, where: n, "ts": ts} for i, f, where, n, ts in seen]


def is_error(frame: Any) -> bool:
    """A frame worth `--errors` (red on the timeline): it has findings, or it carries an error
    (a 1.0 `error` field, a 0-9-1 reply code of 300 or more, a failed SASL outcome). Here, not in
    filter.py, to be compiled with the timeline that asks it of every frame; `Any`, as -Y's
    callers may hand any record with the frame's attributes."""
    if isinstance(frame, Frame):  # its attributes read natively, compiled
        return error_in(frame.findings, frame.fields, frame.name)
    return error_in(frame.findings, frame.fields, frame.name)


def error_in(findings: list[Finding], fields: dict[str, Any], name: str) -> bool:
    """`is_error` of a frame's findings, fields and name."""
    if findings:
        return True
    if fields.get("error"):
        return True
    code = fields.get("reply-code")
    if isinstance(code, int) and code >= 300:
        return True
    return name == "sasl-outcome" and fields.get("code") not in (None, 0, "ok")
