"""The rules of AMQP 1.0 as an observer between the two peers applies them.

Rule 1: what a frame may do is decided by a table lookup here, never by scattered `if`s in the
trackers. Each side of a connection has its own state, moved by the frames *it sends* (as in
h11, where client and server each have one): what a side has sent decides what it may send next.
A frame its state does not allow is a finding, with the code the table names; the frame is still
applied as far as it can be, because one bad frame must not hide the rest of a capture.

Rule 2: nothing here knows about sockets, files, packets or printing. Frames come in as
`Frame` records, findings go out as values; time is the frame's capture timestamp.

Rule 3: the arithmetic is the specification's (section 2.5.6 for session windows, 2.6.7 for link
credit), on RFC 1982 serial numbers of 32 bits: transfer-ids, delivery-ids and delivery-counts
wrap. `serial_diff(a, b)` is how far `a` is ahead of `b`.

Rule 4: what the wire does not show is not guessed. A capture that starts mid-connection, or
loses bytes, leaves state unknown (`None`); checks that need unknown state are skipped and the
connection says once, at the end, what it could not know.

The four levels and their per-side states (spec 2.4.6, 2.5.5, 2.6.1), simplified to what one
side's frames show, are the tables below: the connection (START, HEADER, OPENED, CLOSED, and
UNKNOWN when the capture starts after the headers), a session per side and channel (UNMAPPED,
MAPPED), a link per side and handle (DETACHED, ATTACHED); a delivery, per sending side and
delivery-id, is unsettled until either end settles it. Their diagrams, drawn from these tables,
are in docs/developer/state-machines.md (`tools/state_diagrams.py`).
"""

from __future__ import annotations

from typing import Final

# --- sides --------------------------------------------------------------------------------------

CLIENT: Final = "client"
SERVER: Final = "server"
OTHER: Final = {CLIENT: SERVER, SERVER: CLIENT}
SIDE_OF: Final = {"c2s": CLIENT, "s2c": SERVER}  # frame.direction -> the side that sent it
DIRECTION_OF: Final = {CLIENT: "c2s", SERVER: "s2c"}  # the side that sends -> the direction

# --- serial numbers (RFC 1982, 32 bits) ---------------------------------------------------------

SERIAL: Final = 1 << 32
HALF: Final = 1 << 31


def serial_add(a: int, n: int) -> int:
    return (a + n) % SERIAL


def serial_diff(a: int, b: int) -> int:
    """a - b as a signed distance in serial-number space: positive when `a` is after `b`."""
    d = (a - b) % SERIAL
    return d - SERIAL if d >= HALF else d


# --- connection: per side ------------------------------------------------------------------------

START: Final = "start"
HEADER: Final = "header"
OPENED: Final = "opened"
CLOSED: Final = "closed"
UNKNOWN: Final = "unknown"

SASL_FRAMES: Final = (
    "sasl-mechanisms",
    "sasl-init",
    "sasl-challenge",
    "sasl-response",
    "sasl-outcome",
)
SESSION_FRAMES: Final = ("begin", "attach", "flow", "transfer", "disposition", "detach", "end")

#: state -> {frame name: next state}; a frame not in its sender's row is a finding
CONNECTION_TRANSITIONS: Final[dict[str, dict[str, str]]] = {
    START: {"protocol-header": HEADER},
    HEADER: {
        "protocol-header": HEADER,  # the AMQP header after SASL
        **dict.fromkeys(SASL_FRAMES, HEADER),
        "heartbeat": HEADER,
        "open": OPENED,
    },
    OPENED: {**dict.fromkeys(SESSION_FRAMES, OPENED), "heartbeat": OPENED, "close": CLOSED},
    CLOSED: {},
    UNKNOWN: {  # mid-stream, or after lost bytes: the state is adopted from what comes
        "protocol-header": HEADER,  # SASL's outcome was not seen: the AMQP header follows it
        **dict.fromkeys(SESSION_FRAMES, UNKNOWN),
        "heartbeat": UNKNOWN,
        "open": OPENED,
        "close": CLOSED,
    },
}

#: state -> the finding code for a frame its row does not allow
CONNECTION_VIOLATION: Final[dict[str, str]] = {
    START: "amqp10.unexpected-frame",
    HEADER: "amqp10.unexpected-frame",
    OPENED: "amqp10.unexpected-frame",
    CLOSED: "amqp10.frame-after-close",
    UNKNOWN: "amqp10.unexpected-frame",
}

#: a side's state when the capture starts after the headers (rule 4)
CONNECTION_MID_STREAM: Final = UNKNOWN
#: a side's state -> its state once bytes it sent were lost: before its open, the open may be in
#: them (any other state stays)
CONNECTION_LOST: Final[dict[str, str]] = {START: UNKNOWN, HEADER: UNKNOWN}


def connection_step(state: str, name: str) -> str | None:
    """The state a side's frame moves its connection state to (None: its row does not allow
    it; `CONNECTION_VIOLATION` names the finding). Fast path: a transfer on an open connection,
    most frames, is answered without a lookup (`TRANSFER_ON_OPENED`, from the table)."""
    if state == OPENED and name == "transfer":
        return TRANSFER_ON_OPENED
    return CONNECTION_TRANSITIONS[state].get(name)


def connection_lost(state: str) -> str:
    """A side's state after bytes it sent were lost (`CONNECTION_LOST`)."""
    return CONNECTION_LOST.get(state, state)


# --- session: per side and channel ---------------------------------------------------------------

UNMAPPED: Final = "unmapped"
MAPPED: Final = "mapped"

SESSION_TRANSITIONS: Final[dict[str, dict[str, str]]] = {
    UNMAPPED: {"begin": MAPPED},
    MAPPED: {
        **dict.fromkeys(("attach", "flow", "transfer", "disposition", "detach"), MAPPED),
        "end": UNMAPPED,
    },
}
SESSION_VIOLATION: Final = {UNMAPPED: "amqp10.unbegun-channel", MAPPED: "amqp10.unexpected-frame"}

# --- link: per side and handle -------------------------------------------------------------------

DETACHED: Final = "detached"
ATTACHED: Final = "attached"

LINK_TRANSITIONS: Final[dict[str, dict[str, str]]] = {
    DETACHED: {"attach": ATTACHED},
    ATTACHED: {"flow": ATTACHED, "transfer": ATTACHED, "detach": DETACHED},
}
LINK_VIOLATION: Final = {DETACHED: "amqp10.unattached-handle", ATTACHED: "amqp10.handle-in-use"}

#: frame -> the role its sender's end must have
ROLE_REQUIRED: Final = {"transfer": "sender"}

# --- deliveries ----------------------------------------------------------------------------------

#: delivery states that are outcomes (terminal), counted per link
OUTCOMES: Final = ("accepted", "rejected", "released", "modified")
#: snd-settle-mode -> the `settled` flag a first transfer must carry (None: either)
SETTLED_REQUIRED: Final = {"settled": True, "unsettled": False, "mixed": None}

# --- fast paths: the usual frame's answers, read from the tables above once ---------------------
# (tests/test_rules_fast_paths.py holds each to the table over every state and frame)

#: a side's connection state after a transfer on an open connection (it stays open)
TRANSFER_ON_OPENED: Final = CONNECTION_TRANSITIONS[OPENED]["transfer"]
#: whether the tables allow a transfer on a mapped session and on an attached link
TRANSFER_ON_MAPPED: Final = SESSION_TRANSITIONS[MAPPED].get("transfer") is not None
TRANSFER_ON_ATTACHED: Final = LINK_TRANSITIONS[ATTACHED].get("transfer") is not None

# --- limits (bounded memory, stall thresholds) ---------------------------------------------------

MIN_MAX_FRAME_SIZE: Final = 512  # frames before the peer's open (spec 2.7.1)
STALL_SECONDS: Final = 1.0  # a credit or window stall this long is a finding
#: transfers this soon after a grant came at once: the sender had them waiting (the inference
#: of a stall for a sender that never states `available`)
FOLLOW_SECONDS: Final = 0.05
BACKLOG: Final = 10_000  # unsettled deliveries on one link before `amqp10.unsettled-backlog`
RESERVOIR: Final = 2048  # settlement-latency samples kept per link
RANGE_WALK: Final = 4096  # disposition ranges wider than this walk the unsettled map instead
NOTED_REJECTIONS: Final = 20  # distinct rejection errors reported per link
