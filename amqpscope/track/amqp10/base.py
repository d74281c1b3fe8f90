"""What every level of a 1.0 connection's tracking shares (sans-IO).

`TrackerBase` holds the tracker's state: each side's connection-level state (`Side`), the
sessions, the violations reported once and the notes of what the wire did not show. The levels
build on it one on top of the other, each beside its data: `delivery.DeliveryLevel` (transfers,
dispositions), `link.LinkLevel` (attach, detach, flow, credit), `session.SessionLevel` (begin,
end, which channel and handle a frame may use), and `connection.ConnectionTracker` (headers, SASL,
open, close, the front door). A level calls a lower level's methods directly; the two lookups
the lower levels need from above (`_session`, `_link`) are declared here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, final

from amqpscope.codec.frames import Frame
from amqpscope.findings import Finding, finding
from amqpscope.track.amqp10.rules import CLIENT, CLOSED, SERVER, STALL_SECONDS, START
from amqpscope.track.amqp10.transaction import Transactions

if TYPE_CHECKING:  # session.py and link.py build on this module
    from amqpscope.track.amqp10.link import Link
    from amqpscope.track.amqp10.session import Session

NOTES: Final = 50  # things a mid-stream capture could not know, listed (the rest counted)


@final
class Side:
    """One side's connection-level state: typed attributes, so that the per-frame checks read
    slots (compiled, a field access) rather than dicts keyed by side."""

    __slots__ = (
        "channels",
        "closed",
        "heartbeats",
        "idle",
        "last_ts",
        "late",
        "max_frame",
        "max_gap",
        "name",
        "opened",
        "peer",
        "pending",
        "state",
    )

    def __init__(self, name: str) -> None:
        self.name = name  # CLIENT or SERVER
        self.state = START
        self.last_ts: float | None = None
        self.heartbeats = 0
        self.max_gap = 0.0
        self.late = 0
        self.opened: dict[str, Any] | None = None  # what this side's open said (OPEN_FIELDS)
        self.closed: dict[str, Any] | None = None
        #: from `opened`: what this side holds its peer to (None: not said, or no open yet)
        self.idle: Any = None
        self.max_frame: Any = None
        self.channels: dict[int, Session] = {}  # channel -> the session this side began on it
        self.pending: dict[int, Session] = {}  # sessions begun, the peer's begin not yet seen
        self.peer: Side = self  # the other side (set by the tracker)

    def open(self, opened: dict[str, Any]) -> None:
        self.opened = opened
        self.idle = opened.get("idle-time-out")
        self.max_frame = opened.get("max-frame-size")


class TrackerBase:
    """The state of one connection's tracker, and the bookkeeping every level uses."""

    def __init__(
        self,
        conn: int,
        client: str,
        server: str,
        version: str,
        stats: bool = True,
        source: str = "capture",
    ) -> None:
        self.conn = conn
        self.source = source  # what findings call the frames' source: "capture", "log"
        #: keep what only the summary shows (each link's settle-latency reservoir and its
        #: sparklines' series); False for a reader that never asks for a summary (`read`)
        self.stats = stats
        self.client = client
        self.server = server
        self.version = version
        self.client_side = Side(CLIENT)
        self.server_side = Side(SERVER)
        self.client_side.peer = self.server_side
        self.server_side.peer = self.client_side
        self.sides: dict[str, Side] = {CLIENT: self.client_side, SERVER: self.server_side}
        self.started = False
        self.mid_stream = False
        self.lenient = False  # mid-stream, or bytes were lost: unknown state is not a violation
        self.lost_at: int | None = None  # the frame after the last bytes lost (a `tcp.gap`)
        self.first_frame: int | None = None
        self.headers: dict[str, list[str]] = {CLIENT: [], SERVER: []}
        self.sasl: dict[str, Any] = {"mechanisms": None, "mechanism": None, "outcome": None}
        self.channel_max: Any = None  # the lower channel-max of the opens seen (`_open`)
        self.sessions: list[Session] = []
        self.dropped_links = 0
        self.txns = Transactions()
        self.ts = 0.0
        self.noted: set[tuple[str, Any]] = set()  # violations reported once (bounded by kinds)
        self.notes: list[str] = []
        self.more_notes = 0
        self.frames = 0
        self.transport_end: dict[str, Any] | None = None  # the `transport` record's fields
        self.transport_ts: float | None = None  # when the TCP connection first ended
        self.dropped = False  # TCP ended while the AMQP connection was open (transport-closed)
        #: a log that shows no channel (uamqp's, pyamqp's): the session its begins made, and how
        #: many were begun; frames without a channel are that session's while it is the only
        #: one (`SessionLevel._begin_unnamed`)
        self.unnamed: Session | None = None
        self.unnamed_sessions = 0

    # --- lookups the lower levels need from the upper ones -------------------------------------

    def _session(self, side: str, frame: Frame, out: list[Finding]) -> Session | None:
        """`session.SessionLevel._session`."""
        raise NotImplementedError

    def _link(self, session: Session, side: str, frame: Frame, out: list[Finding]) -> Link | None:
        """`link.LinkLevel._link`."""
        raise NotImplementedError

    # --- stalls, violations, notes ------------------------------------------------------------

    def _stall_credit(
        self, out: list[Finding], link: Link, seconds: float | None, open_at_end: bool = False
    ) -> None:
        if seconds is None or seconds < STALL_SECONDS:
            return
        out.append(
            finding(
                "amqp10.credit-starvation",
                f"the sender on {link.label()} had messages (available "
                f"{link.credit.available}) but no credit for {seconds:.3f} s"
                + (f" (still waiting when the {self.source} ended)" if open_at_end else ""),
            )
        )

    def _stall_window(
        self,
        out: list[Finding],
        session: Session,
        half: Any,
        seconds: float | None,
        open_at_end: bool = False,
    ) -> None:
        if seconds is None or seconds < STALL_SECONDS:
            return
        side = CLIENT if half is session.half[CLIENT] else SERVER
        out.append(
            finding(
                "amqp10.window-exhausted",
                f"{side}'s session on channel {half.channel} had no incoming window at its peer "
                f"for {seconds:.3f} s" + (" (still closed at the end)" if open_at_end else ""),
            )
        )

    def _violation(
        self, out: list[Finding], code: str, key: Any, side: str, frame: Frame, text: str = ""
    ) -> None:
        """A frame its sender's state does not allow; reported once per `key` (a run)."""
        if key in self.noted:
            return
        if len(self.noted) < 10_000:
            self.noted.add(key)
        if not text:
            state = self.sides[side].state
            text = (
                f"{frame.name} from {side} after its close"
                if state == CLOSED
                else f"{frame.name} from {side} in connection state {state}"
            )
        out.append(finding(code, text))

    def _note(self, text: str) -> None:
        if text in self.notes:
            return
        if len(self.notes) < NOTES:
            self.notes.append(text)
        else:
            self.more_notes += 1
