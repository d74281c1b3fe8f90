"""AMQP 0-9-1 state rules: what each frame does to a connection and to its channels.

Rule 1: every state and every transition lives here, as tables. `connection.py` and `channel.py`
        apply them and keep the counts, but decide nothing about the order of frames.
Rule 2: nothing here knows about packets, sockets or files. An event is a frame's direction and
        name, ("c2s", "channel.open"); the frames come from wherever the caller got them.
Rule 3: a capture is evidence, not a peer. An event a table does not allow is noted (the caller
        raises `amqp091.unexpected-method`) and the state stays as it was; nothing is refused and
        nothing raises.
Rule 4: a capture may start anywhere (mid-stream). Whatever first shows up on a channel or a
        connection that was never seen opening is adopted as OPEN, and the caller says once that
        the start was not seen. Such a connection closes on a close-ok whose close is not in the
        input (a log that shows one side).

The connection (spec section 4.2.3, "connection" class) and a channel (section 4.2.4, "channel"
class; a number is free again once CLOSED, and opening it again starts a new epoch, a new entry in
the summary) are the tables below; their diagrams, drawn from these tables, are in
docs/developer/state-machines.md (`tools/state_diagrams.py`). `connection_step` and `channel_step`
are the only ways a state moves.

While a channel is closing, the side that sent close discards everything but close and close-ok
(spec: "the sender MUST discard ... until close-ok"); frames already in flight still show up on
the wire and are counted as discarded, not applied. The modes a channel may enter once (confirm,
tx) are in `MODES`.
"""

from __future__ import annotations

from typing import Final

from amqpscope.codec.amqp091.spec import METHODS as SPEC_METHODS

C2S: Final = "c2s"
S2C: Final = "s2c"

# -- connection states -----------------------------------------------------------------------------
AWAIT_HEADER: Final = "awaiting-header"
AWAIT_START: Final = "awaiting-start"
STARTING: Final = "starting"
AUTHENTICATING: Final = "authenticating"
SECURING: Final = "securing"
TUNING: Final = "tuning"
TUNED: Final = "tuned"
OPENING: Final = "opening"
OPEN: Final = "open"
CLOSING: Final = "closing"
CLOSED: Final = "closed"
REFUSED: Final = "refused"

#: state -> {(direction, frame name): next state}
CONNECTION_TRANSITIONS: Final[dict[str, dict[tuple[str, str], str]]] = {
    AWAIT_HEADER: {(C2S, "protocol-header"): AWAIT_START, (S2C, "protocol-header"): REFUSED},
    AWAIT_START: {(S2C, "connection.start"): STARTING, (S2C, "protocol-header"): REFUSED},
    STARTING: {(C2S, "connection.start-ok"): AUTHENTICATING},
    AUTHENTICATING: {(S2C, "connection.secure"): SECURING, (S2C, "connection.tune"): TUNING},
    SECURING: {(C2S, "connection.secure-ok"): AUTHENTICATING},
    TUNING: {(C2S, "connection.tune-ok"): TUNED},
    TUNED: {(C2S, "connection.open"): OPENING},
    OPENING: {(S2C, "connection.open-ok"): OPEN},
    OPEN: {},
    CLOSING: {(C2S, "connection.close-ok"): CLOSED, (S2C, "connection.close-ok"): CLOSED},
    CLOSED: {},
    REFUSED: {},
}
#: after the capture lost bytes of a connection, the state a handshake method leads to, from
#: whatever state the tracker had (the method that came before it may be in the lost bytes);
#: derived from the transitions above, not a second list
CONNECTION_ADOPTED: Final[dict[tuple[str, str], str]] = {
    key: after
    for moves in CONNECTION_TRANSITIONS.values()
    for key, after in moves.items()
    if key[1] != "protocol-header"
}
#: events that move any state but CLOSED (a close may cut the handshake short: refused login)
CONNECTION_ANY_STATE: Final[dict[tuple[str, str], str]] = {
    (C2S, "connection.close"): CLOSING,
    (S2C, "connection.close"): CLOSING,
}
#: a connection adopted mid-stream (rule 4): a close-ok closes it though its close is not in the
#: input (pika's log shows the broker's close-ok, not the close pika sent)
CONNECTION_ADOPTED_CLOSE: Final[dict[tuple[str, str], str]] = {
    (C2S, "connection.close-ok"): CLOSED,
    (S2C, "connection.close-ok"): CLOSED,
}
#: channel-0 events that leave the state as it is, and the states that allow them
CONNECTION_STAYS: Final[dict[tuple[str, str], frozenset[str]]] = {
    (S2C, "connection.blocked"): frozenset((OPEN, OPENING, TUNED)),
    (S2C, "connection.unblocked"): frozenset((OPEN, OPENING, TUNED)),
    (S2C, "connection.update-secret"): frozenset((OPEN,)),
    (C2S, "connection.update-secret-ok"): frozenset((OPEN,)),
    (C2S, "connection.update-secret"): frozenset((OPEN,)),
    (S2C, "connection.update-secret-ok"): frozenset((OPEN,)),
    (C2S, "connection.close"): frozenset((CLOSING,)),  # both sides closed at once
    (S2C, "connection.close"): frozenset((CLOSING,)),
}
#: the state a connection is adopted in when its first frame is not its protocol header (rule 4)
CONNECTION_MID_STREAM: Final = OPEN


def connection_first(from_start: bool) -> str:
    """The state a connection starts in: before its header, or adopted mid-stream (rule 4)."""
    return AWAIT_HEADER if from_start else CONNECTION_MID_STREAM


def connection_step(
    state: str, key: tuple[str, str], from_start: bool, lenient: bool
) -> tuple[str | None, bool]:
    """What a channel-0 event (direction, name) does in `state`: (the state it moves to, None
    when it stays; whether that is unexpected). The tables are tried in this order: the
    handshake's transitions; a close, from any state but CLOSED (in CLOSING, crossed closes: it
    stays); after lost bytes, any handshake step (the one before it may be lost); adopted
    mid-stream and OPEN, a close-ok (its close not in the input). An event none of them moves
    is unexpected unless `CONNECTION_STAYS` allows it in `state`, or the input did not show the
    start (`from_start` False) or lost bytes (`lenient`)."""
    after = CONNECTION_TRANSITIONS[state].get(key)
    if after is None and state != CLOSED:
        after = CONNECTION_ANY_STATE.get(key)
        if after is not None and state == CLOSING:
            after = None  # crossed closes: stays CLOSING
    if after is None and lenient:
        after = CONNECTION_ADOPTED.get(key)
    if after is None and not from_start and state == OPEN:
        after = CONNECTION_ADOPTED_CLOSE.get(key)
    if after is not None:
        return after, False
    allowed = CONNECTION_STAYS.get(key)
    return None, (allowed is None or state not in allowed) and from_start and not lenient


#: states in which a heartbeat or channel traffic is expected (tune-ok fixed the heartbeat)
CONNECTION_LIVE: Final = frozenset((TUNED, OPENING, OPEN, CLOSING))
#: states before the login succeeded: a close here is a refused login (or a refused handshake)
CONNECTION_LOGIN: Final = frozenset((STARTING, AUTHENTICATING, SECURING))

# -- channel states ----------------------------------------------------------------------------
CH_CLOSED: Final = "closed"
CH_OPENING: Final = "opening"
CH_OPEN: Final = "open"
CH_CLOSING_BY_CLIENT: Final = "closing-by-client"
CH_CLOSING_BY_SERVER: Final = "closing-by-server"

#: state -> {(direction, frame name): next state}
CHANNEL_TRANSITIONS: Final[dict[str, dict[tuple[str, str], str]]] = {
    CH_CLOSED: {(C2S, "channel.open"): CH_OPENING},
    CH_OPENING: {
        (S2C, "channel.open-ok"): CH_OPEN,
        (C2S, "channel.close"): CH_CLOSING_BY_CLIENT,
        (S2C, "channel.close"): CH_CLOSING_BY_SERVER,
    },
    CH_OPEN: {
        (C2S, "channel.close"): CH_CLOSING_BY_CLIENT,
        (S2C, "channel.close"): CH_CLOSING_BY_SERVER,
    },
    CH_CLOSING_BY_CLIENT: {
        (S2C, "channel.close-ok"): CH_CLOSED,
        (S2C, "channel.close"): CH_CLOSING_BY_CLIENT,  # crossed closes: each answers close-ok
        (C2S, "channel.close-ok"): CH_CLOSING_BY_CLIENT,
    },
    CH_CLOSING_BY_SERVER: {
        (C2S, "channel.close-ok"): CH_CLOSED,
        (C2S, "channel.close"): CH_CLOSING_BY_SERVER,
        (S2C, "channel.close-ok"): CH_CLOSING_BY_SERVER,
    },
}
#: the method names that appear in `CHANNEL_TRANSITIONS` (only these can move a channel)
CHANNEL_EVENTS: Final = frozenset(
    name for moves in CHANNEL_TRANSITIONS.values() for _direction, name in moves
)
#: the states in which a channel's methods and content are applied (OPENING: a client may send
#: before open-ok arrives; the broker processes frames in order)
CHANNEL_ACTIVE: Final = frozenset((CH_OPENING, CH_OPEN))
#: a channel adopted mid-stream (or after lost bytes) while active: a close-ok closes it though
#: its close is not in the input (rule 4)
CHANNEL_ADOPTED_CLOSE: Final[dict[str, str]] = {"channel.close-ok": CH_CLOSED}


def channel_first(from_start: bool) -> str:
    """The state a channel's epoch starts in: CLOSED before its channel.open, or adopted OPEN
    when the first frame seen on it is anything else (rule 4)."""
    return CH_CLOSED if from_start else CH_OPEN


def channel_step(state: str, direction: str, name: str) -> str | None:
    """The state a channel's event moves it to (None: it does not move it). Fast path: a method
    not in `CHANNEL_EVENTS` (every message's) moves no channel, and makes no key."""
    if name not in CHANNEL_EVENTS:
        return None
    return CHANNEL_TRANSITIONS[state].get((direction, name))


def channel_adopted_step(state: str, name: str) -> str | None:
    """An active channel adopted mid-stream, or of a connection that lost bytes: a channel-class
    method the tables do not move it by may answer one not in the input (a close-ok its close)."""
    if state not in CHANNEL_ACTIVE:
        return None
    return CHANNEL_ADOPTED_CLOSE.get(name)


#: closing states, and the direction whose frames the closing side discards
CHANNEL_DISCARDS: Final = {CH_CLOSING_BY_CLIENT: S2C, CH_CLOSING_BY_SERVER: C2S}

# -- channel modes: entered once, never left (section 1.8 tx, RabbitMQ's confirm extension) -----
CONFIRM: Final = "confirm"
TX: Final = "tx"
#: (direction, method) -> the mode it puts the channel in. The mode starts with the request: the
#: broker numbers publishes from the first one after confirm.select, whatever its -ok's timing.
MODES: Final[dict[tuple[str, str], str]] = {
    (C2S, "confirm.select"): CONFIRM,
    (C2S, "tx.select"): TX,
}

# -- synchronous requests and their answers (the spec's `synchronous` methods) ----------------
#: a client's synchronous request on a channel -> the methods that answer it: its -ok (and
#: basic.get-empty for basic.get). Unless its `nowait` is set, the broker must answer, or close
#: the channel or connection with an error. channel.open and channel.close answer in the channel
#: states above; connection methods in the connection's.
REPLIES: Final[dict[str, frozenset[str]]] = {
    method.name: frozenset(
        (method.name + "-ok",) + (("basic.get-empty",) if method.name == "basic.get" else ())
    )
    for method in SPEC_METHODS.values()
    if method.synchronous
    and not method.name.startswith("connection.")
    and method.name not in ("channel.open", "channel.close")
    and any(other.name == method.name + "-ok" for other in SPEC_METHODS.values())
}
#: every method that answers one of `REPLIES`
ANSWERS: Final[frozenset[str]] = frozenset(name for names in REPLIES.values() for name in names)

# -- reply codes (section 1.2 constants) ---------------------------------------------------------
#: reply codes that are not errors: 200 reply-success, and 0 which clients send for "no reason"
OK_CODES: Final = frozenset((0, 200))
#: connection.close codes during the login that mean the credentials were refused
LOGIN_REFUSED: Final = frozenset((403,))
#: the client sent its credentials (start-ok, secure-ok) and waits for the broker's verdict: a
#: close now refuses the login whatever its code (RabbitMQ 403 ACCESS_REFUSED, garagemq 530
#: NOT_ALLOWED "login failure")
LOGIN_VERDICT: Final = frozenset((AUTHENTICATING,))


def name(value: object) -> str:
    """A wire string as a key: the decoder shows a shortstr that is not UTF-8 as {"hex": ...},
    which cannot be a dict key; it becomes "hex:..." (and anything else odd, its repr)."""
    if type(value) is str:
        return value
    if value is None:
        return ""
    if isinstance(value, dict) and "hex" in value:
        return f"hex:{value['hex']}"
    return repr(value)
