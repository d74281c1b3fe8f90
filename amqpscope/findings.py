"""Findings: what went wrong or looks odd on the wire, with where it happened.

Every layer reports damage as a `Finding` instead of raising, so one bad packet never hides the
rest of a capture. Codes are stable (tools filter on them); each is declared once in `CODES` with
its severity, and `finding()` refuses a code that is not declared.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

INFO: Final = "info"
WARNING: Final = "warning"
ERROR: Final = "error"

#: code -> (severity, what it means). The one list of every finding amqpscope can report.
CODES: Final[dict[str, tuple[str, str]]] = {
    # capture/
    "capture.truncated": (WARNING, "the capture file ends inside a packet record"),
    "capture.damaged": (ERROR, "a capture record could not be read"),
    "capture.snaplen": (WARNING, "a packet was cut short by the capture's snap length"),
    "capture.files-overlap": (
        WARNING,
        "capture files read as one overlap in time: they were joined, not merged packet by packet",
    ),
    # merge/ (several inputs as one timeline)
    "merge.clock-offset": (
        INFO,
        "several inputs merged: an input's clock offset from the reference input's (estimated"
        " from frames both saw, with its bound, or given) and its connections matched",
    ),
    "merge.window": (
        WARNING,
        "several inputs merged: they could not be merged as they were read (no frame in common"
        " in their beginnings, or clocks farther apart than the merge window), so they were"
        " merged whole (held in memory) from there",
    ),
    "capture.spool-overrun": (
        WARNING,
        "live: the decoder fell so far behind that captured packets were discarded unread",
    ),
    "link.unsupported": (INFO, "a link layer type amqpscope does not decode"),
    "link.malformed": (WARNING, "a link, IP or TCP header is malformed or truncated"),
    "ip.fragment-incomplete": (WARNING, "an IP datagram's fragments never all arrived"),
    # stream/
    "tcp.gap": (WARNING, "bytes of a TCP stream are missing from the capture"),
    "tcp.ack-unseen": (
        WARNING,
        "the peer acknowledged bytes the capture has not seen (lost, or captured out of order)",
    ),
    "tcp.overlap-mismatch": (WARNING, "a retransmission carried different bytes than the original"),
    "tcp.reset": (WARNING, "the connection was reset"),
    "tcp.buffer-limit": (
        WARNING,
        "out-of-order data overflowed the reassembly buffer",
    ),
    # codec/
    "amqp.resync": (WARNING, "framing resynchronised at the next frame boundary after damage"),
    "amqp.bad-frame": (ERROR, "bytes that should be an AMQP frame are not one"),
    "amqp.missing-header": (
        WARNING,
        "a direction began without its protocol header: its frames are read by their shape",
    ),
    "amqp.bad-frame-end": (ERROR, "an AMQP 0-9-1 frame does not end with 0xCE"),
    "amqp.unknown-method": (WARNING, "an AMQP 0-9-1 class/method id not in the specification"),
    "amqp.unknown-descriptor": (WARNING, "an AMQP 1.0 body with an unknown descriptor"),
    "amqp.unsupported-version": (INFO, "an AMQP version amqpscope names but does not decode"),
    "amqp.version-mismatch": (ERROR, "the peers offered different protocol headers"),
    "amqp.tls": (INFO, "the connection switched to TLS; its frames are encrypted"),
    # codec/tls
    "tls.no-key": (INFO, "a TLS connection whose secrets are not in the key log: not decrypted"),
    "tls.wrong-key": (ERROR, "the key log's secret for a TLS connection does not decrypt it"),
    "tls.decrypt-failed": (ERROR, "a TLS record failed to decrypt after earlier ones did"),
    "tls.bad-record": (ERROR, "bytes that should be a TLS record are not one"),
    "tls.bad-handshake": (WARNING, "a TLS handshake message is malformed"),
    "tls.unsupported": (INFO, "a TLS version or cipher suite amqpscope does not decrypt"),
    "tls.alert": (WARNING, "a TLS alert other than close_notify"),
    "amqp.incomplete-frame": (WARNING, "the stream ended inside a frame"),
    "amqp.decode-error": (ERROR, "a frame's fields could not be decoded (a bug: please report it)"),
    # codec/websocket: the HTTP upgrade and RFC 6455 frames under AMQP
    "websocket.refused": (ERROR, "the server answered the WebSocket upgrade with no 101"),
    "websocket.bad-handshake": (ERROR, "an HTTP upgrade request or response is malformed"),
    "websocket.subprotocol": (WARNING, "the upgrade did not agree on the amqp subprotocol"),
    "websocket.bad-opcode": (ERROR, "a WebSocket frame with a reserved opcode"),
    "websocket.masking": (WARNING, "a client frame not masked, or a server frame masked"),
    "websocket.bad-length": (ERROR, "a WebSocket frame length that is impossible or not minimal"),
    "websocket.bad-control": (ERROR, "a close, ping or pong frame that breaks RFC 6455's rules"),
    "websocket.bad-fragment": (ERROR, "a continuation with no message, or a message inside one"),
    "websocket.reserved-bits": (WARNING, "RSV bits or an extension amqpscope does not read"),
    "websocket.text-frame": (WARNING, "a text frame: the AMQP binding uses binary frames only"),
    "websocket.deflate-error": (ERROR, "a permessage-deflate payload that does not inflate"),
    "websocket.close-error": (WARNING, "a WebSocket closed with a status other than 1000/1001"),
    "websocket.frame-after-close": (WARNING, "a WebSocket frame sent after its sender's close"),
    "websocket.lost": (WARNING, "bytes lost under a WebSocket: framing resumes where it can"),
    "websocket.incomplete-frame": (WARNING, "the stream ended inside a WebSocket frame"),
    # logs/: frame-trace logs read as a source of frame records
    "log.bad-line": (WARNING, "a log line that looks like a logged frame but does not parse"),
    "log.cut-line": (WARNING, "the log ends inside a line (cut short while it was written)"),
    "log.truncated-payload": (INFO, "the logger cut a transfer's payload short: no message"),
    "log.not-shown": (INFO, "a field the logger printed without what it takes to read it"),
    "log.skipped-lines": (INFO, "lines of a log that are no frame of its format (counted)"),
    "log.lost-line": (INFO, "a frame after a log line that did not parse: one may be missing"),
    "log.other-format": (WARNING, "log lines that are frames of another format than the log's"),
    "log.no-time": (INFO, "a log whose lines' times are in a form amqpscope does not read"),
    "log.not-text": (WARNING, "log lines holding bytes that are not UTF-8 text, or NULs"),
    # codec/amqp10: fields and messages
    "amqp10.bad-encoding": (ERROR, "an AMQP 1.0 value is malformed or runs past its frame"),
    "amqp10.invalid-utf8": (WARNING, "an AMQP 1.0 string is not valid UTF-8"),
    "amqp10.missing-mandatory": (WARNING, "a mandatory field of a performative is absent"),
    "amqp10.trailing-bytes": (WARNING, "bytes after a frame body's described value"),
    "amqp10.aborted-transfer": (INFO, "a multi-frame delivery was aborted; its payload dropped"),
    "amqp10.incomplete-delivery": (WARNING, "a delivery's transfers never completed"),
    "amqp10.bad-message": (WARNING, "a delivery's payload is not a well-formed message"),
    "amqp10.bad-field": (WARNING, "a field has a value, or a count, its definition does not allow"),
    "amqp10.bad-field-type": (
        WARNING,
        "a field's value is of a type its definition does not allow: shown, not computed with",
    ),
    # codec/amqp091: arguments, content and messages
    "amqp091.bad-arguments": (ERROR, "a method's arguments are truncated or malformed"),
    "amqp091.bad-field-table": (ERROR, "a field table or array is malformed"),
    "amqp091.bad-field-type": (
        WARNING,
        "a peer property or login of a type amqpscope reads as another: shown, not computed with",
    ),
    "amqp091.trailing-bytes": (WARNING, "bytes after a method's last argument"),
    "amqp091.unexpected-content": (WARNING, "a content frame with no method expecting content"),
    "amqp091.body-size-mismatch": (WARNING, "content bodies do not add up to the header's size"),
    "amqp091.bad-content-header": (ERROR, "a content header is truncated or malformed"),
    "amqp091.version-difference": (INFO, "a 0-8/0-9 method that differs from 0-9-1"),
    "amqp091.incomplete-message": (WARNING, "a message's content header or body never arrived"),
    "amqp091.body-not-kept": (INFO, "a message body too large to keep is counted, not shown"),
    # track/amqp10: connection, session, link and delivery state
    "amqp10.unexpected-frame": (WARNING, "a frame its sender's connection state does not allow"),
    "amqp10.frame-after-close": (WARNING, "a frame sent after the sender's close"),
    "amqp10.unbegun-channel": (WARNING, "a session frame on a channel its sender has not begun"),
    "amqp10.unattached-handle": (WARNING, "a link frame on a handle its sender has not attached"),
    "amqp10.handle-in-use": (WARNING, "an attach on a handle that is still attached"),
    "amqp10.wrong-role": (WARNING, "a transfer from the receiving end of a link"),
    "amqp10.frame-too-large": (WARNING, "a frame larger than its receiver's max-frame-size"),
    "amqp10.channel-over-max": (WARNING, "a channel number above the connection's channel-max"),
    "amqp10.handle-over-max": (WARNING, "a link handle above the session's handle-max"),
    "amqp10.transfer-without-credit": (WARNING, "a delivery sent while the link had no credit"),
    "amqp10.window-exceeded": (WARNING, "a transfer beyond the receiver's session incoming window"),
    "amqp10.delivery-id-reused": (WARNING, "a delivery-id reused while still unsettled"),
    "amqp10.delivery-tag-reused": (WARNING, "a delivery-tag reused on a link while unsettled"),
    "amqp10.unknown-delivery": (WARNING, "a disposition for delivery-ids never transferred"),
    "amqp10.settle-mode-violated": (WARNING, "a transfer settled against its snd-settle-mode"),
    "amqp10.error": (ERROR, "a close, end or detach carried an error condition"),
    "amqp10.sasl-failed": (ERROR, "SASL authentication did not succeed"),
    "amqp10.header-after-failed-sasl": (
        WARNING,
        "a protocol header sent after a failed sasl-outcome (headers follow only a success)",
    ),
    "amqp10.rejected": (WARNING, "a delivery was rejected with an error condition"),
    "amqp10.transaction-failed": (
        ERROR,
        "a transaction declare or discharge was rejected (or a declare not declared)",
    ),
    "amqp10.credit-starvation": (WARNING, "a sender with messages to send waited for credit"),
    "amqp10.window-exhausted": (WARNING, "a session's outgoing transfers waited for window"),
    "amqp10.unsettled-backlog": (WARNING, "a link's unsettled deliveries piled up"),
    "amqp10.unsettled-at-end": (WARNING, "deliveries left unsettled at detach, end, close or EOF"),
    "amqp10.heartbeat-late": (WARNING, "a peer was silent longer than the other's idle-time-out"),
    "amqp10.transport-closed": (WARNING, "TCP ended while the AMQP connection was open (no close)"),
    "amqp10.mid-stream": (INFO, "the capture starts mid-connection: some state could not be known"),
    "amqp10.session-unknown": (
        INFO,
        "a log that shows no channel began a second session: frames are not placed on either",
    ),
    # track/amqp091: connection, channel, delivery and confirm state
    "amqp091.mid-stream": (INFO, "the capture starts inside a 0-9-1 connection"),
    "amqp091.login-refused": (ERROR, "the broker refused the login (close after start-ok)"),
    "amqp091.connection-error": (ERROR, "a connection was closed with an error reply code"),
    "amqp091.channel-error": (ERROR, "a channel was closed with an error reply code"),
    "amqp091.unexpected-method": (WARNING, "a method its connection or channel state forbids"),
    "amqp091.frame-after-close": (WARNING, "a channel's frame after the connection closed"),
    "amqp091.sent-after-close": (
        WARNING,
        "a frame sent after its sender's own connection.close (but close-ok)",
    ),
    "amqp091.unknown-delivery-tag": (ERROR, "an ack, nack or reject of a tag not outstanding"),
    "amqp091.unacked-at-end": (WARNING, "deliveries still unacknowledged when their channel ended"),
    "amqp091.unconfirmed-at-end": (WARNING, "confirm-mode publishes the broker never confirmed"),
    "amqp091.unanswered": (WARNING, "synchronous methods the broker had not answered at the end"),
    "amqp091.publish-nacked": (WARNING, "the broker nacked a publish (publisher confirms)"),
    "amqp091.returned": (WARNING, "the broker returned a mandatory publish it could not route"),
    "amqp091.prefetch-saturated": (INFO, "unacked deliveries reached the prefetch limit"),
    "amqp091.consumer-cancelled": (WARNING, "the broker cancelled a consumer (basic.cancel)"),
    "amqp091.flow-stopped": (WARNING, "channel.flow asked the peer to stop sending content"),
    "amqp091.blocked": (WARNING, "the broker blocked the connection's publishers (resource alarm)"),
    "amqp091.heartbeat-missed": (WARNING, "a peer was silent for over two heartbeat intervals"),
    "amqp091.transport-closed": (
        WARNING,
        "TCP ended while the AMQP connection was open (no connection.close)",
    ),
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


#: `tcp.gap`'s and `tcp.ack-unseen`'s messages begin "N bytes of DIRECTION ": the direction
#: that lost them, which need not be that of the frame the finding rides (the connection's
#: next frame)
GAP_LOST: Final = re.compile(r"(\d+) bytes of (c2s|s2c) ")
#: the findings that say a direction lost bytes (or may have: `tcp.ack-unseen`)
LOSSES: Final = frozenset(("tcp.gap", "tcp.ack-unseen"))


#: what a `tcp.gap` says after it when the snap length cut the packet (not lost in transit)
GAP_SNAPPED: Final = "the snap length cut packet"


def gap_message(missing: int, direction: str) -> str:
    """The start of a `tcp.gap` finding's message (`GAP_LOST` reads it back)."""
    return f"{missing} bytes of {direction} not captured"


def unseen_message(unseen: int, direction: str) -> str:
    """A `tcp.ack-unseen` finding's message (`GAP_LOST` reads it back)."""
    return (
        f"{unseen} bytes of {direction} acknowledged by the peer but not captured (lost, or"
        " captured out of order and still to come): what the peer answers next may answer them"
    )


def gap_lost(f: Finding, default: str | None = None) -> tuple[int, str | None]:
    """(bytes, direction) a `tcp.gap` finding says were lost; 0 and `default` when it does not
    say (a finding from an older export)."""
    match = GAP_LOST.match(f.message)
    if match is None:
        return 0, default
    return int(match.group(1)), match.group(2)
