"""Findings: what went wrong or looks odd on the wire, with where it happened.

Every layer reports damage as a `Finding` instead of raising, so one bad packet never hides the
rest of a capture. Codes are stable (tools filter on them); each is declared once in `CODES` with
its severity, and `finding()` refuses a code that is not declared.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

INFO = "info"
WARNING = "warning"
ERROR = "error"

#: code -> (severity, what it means). The one list of every finding amqpscope can report.
CODES: dict[str, tuple[str, str]] = {
    # capture/
    "capture.truncated": (WARNING, "the capture file ends inside a packet record"),
    "capture.damaged": (ERROR, "a capture record could not be read"),
    "capture.snaplen": (WARNING, "a packet was cut short by the capture's snap length"),
    "link.unsupported": (INFO, "a link layer type amqpscope does not decode"),
    "link.malformed": (WARNING, "a link, IP or TCP header is malformed or truncated"),
    "ip.fragment-incomplete": (WARNING, "an IP datagram's fragments never all arrived"),
    # stream/
    "tcp.gap": (WARNING, "bytes of a TCP stream are missing from the capture"),
    "tcp.overlap-mismatch": (WARNING, "a retransmission carried different bytes than the original"),
    "tcp.reset": (WARNING, "the connection was reset"),
    "tcp.buffer-limit": (
        WARNING,
        "out-of-order data overflowed the reassembly buffer",
    ),
    # codec/
    "amqp.resync": (WARNING, "framing resynchronised at the next frame boundary after damage"),
    "amqp.bad-frame": (ERROR, "bytes that should be an AMQP frame are not one"),
    "amqp.bad-frame-end": (ERROR, "an AMQP 0-9-1 frame does not end with 0xCE"),
    "amqp.unknown-method": (WARNING, "an AMQP 0-9-1 class/method id not in the specification"),
    "amqp.unknown-descriptor": (WARNING, "an AMQP 1.0 body with an unknown descriptor"),
    "amqp.unsupported-version": (INFO, "an AMQP version amqpscope names but does not decode"),
    "amqp.version-mismatch": (ERROR, "the peers offered different protocol headers"),
    "amqp.tls": (INFO, "the connection switched to TLS; its frames are encrypted"),
    "amqp.incomplete-frame": (WARNING, "the stream ended inside a frame"),
    "amqp.decode-error": (ERROR, "a frame's fields could not be decoded (a bug: please report it)"),
    # codec/amqp10: fields and messages
    "amqp10.bad-encoding": (ERROR, "an AMQP 1.0 value is malformed or runs past its frame"),
    "amqp10.invalid-utf8": (WARNING, "an AMQP 1.0 string is not valid UTF-8"),
    "amqp10.missing-mandatory": (WARNING, "a mandatory field of a performative is absent"),
    "amqp10.trailing-bytes": (WARNING, "bytes after a frame body's described value"),
    "amqp10.aborted-transfer": (INFO, "a multi-frame delivery was aborted; its payload dropped"),
    "amqp10.incomplete-delivery": (WARNING, "a delivery's transfers never completed"),
    "amqp10.bad-message": (WARNING, "a delivery's payload is not a well-formed message"),
    "amqp10.bad-field": (WARNING, "a field has a type or value its definition does not allow"),
    # codec/amqp091: arguments, content and messages
    "amqp091.bad-arguments": (ERROR, "a method's arguments are truncated or malformed"),
    "amqp091.bad-field-table": (ERROR, "a field table or array is malformed"),
    "amqp091.trailing-bytes": (WARNING, "bytes after a method's last argument"),
    "amqp091.unexpected-content": (WARNING, "a content frame with no method expecting content"),
    "amqp091.body-size-mismatch": (WARNING, "content bodies do not add up to the header's size"),
    "amqp091.bad-content-header": (ERROR, "a content header is truncated or malformed"),
    "amqp091.version-difference": (INFO, "a 0-8/0-9 method that differs from 0-9-1"),
    "amqp091.incomplete-message": (WARNING, "a message's content header or body never arrived"),
    "amqp091.body-not-kept": (INFO, "a message body too large to keep is counted, not shown"),
}


@dataclass(frozen=True, slots=True)
class Finding:
    """One observation: a stable `code`, its severity, a human `message`, and where it was."""

    code: str
    severity: str
    message: str
    packet: int | None = None
    conn: int | None = None  # the connection, when the finding is about one
    frame: int | None = None  # the frame it rides on, once it has been placed on one

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
        }
        if self.packet is not None:
            out["packet"] = self.packet
        if self.conn is not None:
            out["conn"] = self.conn
        if self.frame is not None:
            out["frame"] = self.frame
        return out


def finding(
    code: str,
    message: str,
    packet: int | None = None,
    conn: int | None = None,
    frame: int | None = None,
) -> Finding:
    """Make a finding for a declared `code` (its severity comes from `CODES`)."""
    severity, _ = CODES[code]
    return Finding(code, severity, message, packet, conn, frame)
