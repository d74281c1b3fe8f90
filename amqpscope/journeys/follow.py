"""Each message's journey across the connections of one input (sans-IO): `amqpscope follow`.

Frames go in, in capture order; journeys come out, each a message's hops with the frame that
shows each: published on c3 (exchange, routing key) → confirmed → delivered on c1 (queue,
consumer, delivery-tag) → nacked (requeue) → redelivered on c2 → acked.

No second matcher: a delivery is tied to its publish by the `Correlator` of
`track/amqp091/journeys.py` (message-id, else exchange, routing key and body digest; equal
messages in order, per queue), and a redelivery to the delivery before it by `Redeliveries` of
`diagnose/redelivery.py` (message-id, then correlation-id, then body). What this module adds is
the bookkeeping of what happened to each: the publisher's confirm (delivery-tag of a channel in
confirm mode), the consumer's ack, nack or reject (delivery-tag of the consumer's channel, with
`multiple`), a return, and a channel or connection closed with the delivery still unacked.

AMQP 1.0 has no publish/deliver pair to correlate: a message's hops are its transfers (the
client's into the broker or router, the peer's onward ones) and the dispositions that settle
them. An onward transfer joins the latest journey with the same identity, taken in
`Redeliveries`' order with its body digest (message-id, else correlation-id, else body), and a
redelivery joins the journey of the delivery `Redeliveries` links it to.

The words of a hop say what the wire showed and who did it: "requeue" is what the consumer
asked; that the broker requeued it shows only as a later redelivery.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from amqpscope.codec.frames import METHOD, Frame
from amqpscope.diagnose.redelivery import Redeliveries, body_digest
from amqpscope.track.amqp091.journeys import Correlator, message_key

#: journeys kept (a capture's messages; past this, later publishes start no journey)
MAX_JOURNEYS: Final = 1_000_000
#: how many characters of a text body a journey keeps (for --body-match and --json)
BODY_KEPT: Final = 4096
DELIVERIES: Final = frozenset(("basic.deliver", "basic.get-ok"))
CONTENT_METHODS: Final = frozenset(
    ("basic.publish", "basic.deliver", "basic.get-ok", "basic.return")
)
OTHER: Final = {"c2s": "s2c", "s2c": "c2s"}
SERIAL: Final = 1 << 32
#: a 1.0 disposition range longer than this is not walked (a damaged or hostile frame)
MAX_RANGE: Final = 10_000


@dataclass(slots=True)
class Hop:
    """One thing that happened to a message: `event` (published, confirmed, publish-nacked,
    returned, delivered, redelivered, acked, nacked, rejected, unacked-at-close), the frame
    showing it and where; `details` what that frame said about it."""

    event: str
    frame: int
    conn: int
    channel: int | None
    ts: float
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self, first_ts: float | None, names: dict[int, str]) -> dict[str, Any]:
        out: dict[str, Any] = {
            "event": self.event,
            "frame": self.frame,
            "conn": self.conn,
            "connection-name": names.get(self.conn),
            "channel": self.channel,
            "ts": self.ts,
            "time": round(self.ts - first_ts, 6) if first_ts is not None else None,
        }
        out.update(self.details)
        return out


@dataclass(slots=True)
class Journey:
    """A message: what identifies it, and its hops in capture order. `frames` every frame
    that carried it or answered for it (what `--frame N` looks in)."""

    number: int
    message_id: str | None
    correlation_id: str | None
    body: str | None
    body_size: int | None
    hops: list[Hop] = field(default_factory=list)
    frames: set[int] = field(default_factory=set)
    #: told of each hop as it is added (`Follower.on_hop`): the OTLP spans are built then
    on_hop: Callable[[Journey, Hop], None] | None = field(default=None, repr=False, compare=False)

    def add(self, hop: Hop, *frames: int) -> None:
        self.hops.append(hop)
        self.frames.add(hop.frame)
        self.frames.update(frames)
        if self.on_hop is not None:
            self.on_hop(self, hop)

    @property
    def confirmed(self) -> bool | None:
        """True/False when the publisher's channel was in confirm mode and the broker answered;
        None when not asked for (or the answer is not in the input)."""
        for hop in self.hops:
            if hop.event == "confirmed":
                return True
            if hop.event == "publish-nacked":
                return False
        return None

    @property
    def end(self) -> str:
        """Where the journey stopped, in the input."""
        settled = [h for h in self.hops if h.event not in ("published", "confirmed")]
        if not settled:
            return "published, not delivered in the input" if self.hops else "unknown"
        last = settled[-1]
        if last.event == "acked":
            return "acked"
        if last.event in ("delivered", "redelivered"):
            if last.details.get("no-ack"):
                return "delivered (no-ack: settled when sent)"
            return "delivered, not acked in the input"
        if last.event in ("nacked", "rejected"):
            if last.details.get("requeue"):
                return f"{last.event} with requeue, not delivered again in the input"
            return f"{last.event} without requeue (dropped or dead-lettered by the broker)"
        if last.event == "unacked-at-close":
            return "unacked when its channel closed, not delivered again in the input"
        if last.event == "transfer":
            if last.details.get("settled"):
                return "transferred settled (pre-settled: no outcome to wait for)"
            return "transferred, not settled in the input"
        if last.event == "disposition":
            state = last.details.get("state") or "no outcome"
            return f"{state}{' and settled' if last.details.get('settled') else ', not settled'}"
        return last.event

    def to_json(self, first_ts: float | None, names: dict[int, str]) -> dict[str, Any]:
        return {
            "journey": self.number,
            "message-id": self.message_id,
            "correlation-id": self.correlation_id,
            "body": self.body,
            "body-size": self.body_size,
            "confirmed": self.confirmed,
            "end": self.end,
            "hops": [hop.to_json(first_ts, names) for hop in self.hops],
        }


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _size(message: dict[str, Any]) -> int | None:
    """The body's size: 0-9-1's content-header body-size, 1.0's body section's."""
    size = message.get("body-size")
    if type(size) is int:
        return size
    body = message.get("body")
    size = body.get("size") if isinstance(body, dict) else None
    return size if type(size) is int else None


def _body(message: dict[str, Any]) -> str | None:
    body = message.get("body")
    if not isinstance(body, dict):
        return None
    text = body.get("text")
    if isinstance(text, str):
        return text
    value = body.get("value")  # 1.0: an amqp-value section
    if isinstance(value, str):
        return value
    raw = body.get("raw")
    if isinstance(raw, (bytes, bytearray)):
        return bytes(raw).decode("utf-8", "replace")
    return None


def _identity(properties: dict[str, Any], message: dict[str, Any]) -> tuple[Any, ...] | None:
    """What a 1.0 message is known by, strongest first (as `Redeliveries` links them)."""
    for how in ("message-id", "correlation-id"):
        value = properties.get(how)
        if value is not None and not isinstance(value, (dict, list)):
            return (how, f"{type(value).__name__}:{value}")
    digest = body_digest(message)
    return ("body", digest) if digest is not None else None


class Follower:
    """Feed every frame of an input in order; `journeys` then holds each message's."""

    def __init__(
        self, bodies: bool = True, on_hop: Callable[[Journey, Hop], None] | None = None
    ) -> None:
        """`bodies`: keep each message's text (False: `summary`, which shows none). `on_hop`:
        called with each hop as it is added, in the feed of the frame that shows it (for a
        message's transfer or publish, the frame that completes the message)."""
        self.bodies = bodies
        self.on_hop = on_hop
        self.correlator = Correlator()
        self.redeliveries = Redeliveries(keep=False)
        self.journeys: list[Journey] = []
        self.names: dict[int, str] = {}  # conn -> the client's connection_name
        self.first_ts: float | None = None
        self._by_key: dict[int, list[Journey]] = {}  # message key digest -> publishes in order
        self._by_delivery: dict[int, Journey] = {}  # a delivery's first frame -> its journey
        # (conn, ch, dir) -> the method frame of the content under way, and its time
        self._starts: dict[tuple[int, int, str], tuple[int, float]] = {}
        self._confirming: dict[tuple[int, int], int] = {}  # (conn, ch) -> publishes so far
        self._unconfirmed: dict[tuple[int, int], dict[int, Journey]] = {}  # -> seq -> journey
        self._unacked: dict[tuple[int, int], dict[int, Journey]] = {}  # -> delivery-tag -> j.
        self._no_ack: dict[tuple[int, str], bool] = {}  # (conn, consumer-tag) -> no-ack
        self._consuming: dict[tuple[int, int], bool] = {}  # (conn, ch) -> no-ack asked
        # 1.0: (conn, dir, channel, handle) -> the link's address; (conn, dir, channel) -> the
        # other side's channel of that session; the first frame of each delivery under way;
        # the deliveries not yet settled, by the sending side's (conn, dir, channel)
        self._address: dict[tuple[int, str, int, int], str | None] = {}
        self._links: dict[tuple[int, str, int, int], str | None] = {}  # -> the link's name
        self._peer: dict[tuple[int, str, int], int] = {}
        self._first10: dict[tuple[int, str, int, int], tuple[int, float]] = {}
        self._open10: dict[tuple[int, str, int], dict[int, Journey]] = {}
        self._by_identity: dict[tuple[Any, ...], Journey] = {}  # -> the latest with it

    # -- input ---------------------------------------------------------------------------------
    def through(self, frames: Iterable[Frame]) -> Iterator[Frame]:
        """Each frame, fed here first (to follow messages while another consumer reads)."""
        for frame in frames:
            self.feed(frame)
            yield frame

    def feed(self, frame: Frame) -> None:
        if self.first_ts is None and frame.ts:
            self.first_ts = frame.ts
        if frame.channel is None:
            return
        if frame.version == "1.0":
            self._frame10(frame)
            return
        if frame.version != "0-9-1":
            return
        where = (frame.conn, frame.channel)
        getting = self.correlator.getting.get(where)
        get_queue = getting[0] if getting else None  # the queue a get-ok comes from
        self.correlator.feed(frame)
        link = self.redeliveries.feed_frame(frame)
        if frame.kind == METHOD:
            self._method(frame, where)
        message = frame.message
        if message is None:
            return
        method = message.get("method")
        start, ts = self._starts.pop(
            (frame.conn, frame.channel, frame.direction), (frame.number, frame.ts)
        )
        if method == "basic.publish":
            self._published(frame, message, where, start, ts)
        elif method in DELIVERIES:
            earlier = link.earlier if link is not None else 0
            self._delivered(frame, message, where, start, ts, earlier, link.how if link else "")
            if method == "basic.get-ok" and get_queue:
                self._by_delivery[start].hops[-1].details["queue"] = get_queue
        elif method == "basic.return":
            self._returned(frame, message, start, ts)

    def _method(self, frame: Frame, where: tuple[int, int]) -> None:
        name, fields, c2s = frame.name, frame.fields, frame.direction == "c2s"
        if name in CONTENT_METHODS:
            self._starts[(frame.conn, where[1], frame.direction)] = (frame.number, frame.ts)
        elif name == "connection.start-ok":
            props = fields.get("client-properties")
            if isinstance(props, dict) and isinstance(props.get("connection_name"), str):
                self.names[frame.conn] = props["connection_name"]
        elif name == "confirm.select" and c2s:
            self._confirming.setdefault(where, 0)
        elif name in ("basic.ack", "basic.nack", "basic.reject"):
            tag = fields.get("delivery-tag")
            if type(tag) is not int:
                return
            multiple = fields.get("multiple") is True
            if c2s:
                self._settled(frame, where, tag, multiple)
            else:
                self._confirmed(frame, where, tag, multiple)
        elif name == "basic.consume" and c2s:
            no_ack = fields.get("no-ack") is True
            tag = fields.get("consumer-tag")
            if isinstance(tag, str) and tag:
                self._no_ack[(frame.conn, tag)] = no_ack
            self._consuming[where] = no_ack
        elif name == "basic.consume-ok" and not c2s:
            tag = fields.get("consumer-tag")
            if isinstance(tag, str) and where in self._consuming:
                self._no_ack[(frame.conn, tag)] = self._consuming.pop(where)
        elif name == "channel.close" or name == "connection.close":
            self._closed(frame, where if name == "channel.close" else None)

    # -- messages ------------------------------------------------------------------------------
    def _published(
        self,
        frame: Frame,
        message: dict[str, Any],
        where: tuple[int, int],
        start: int,
        ts: float,
    ) -> None:
        if len(self.journeys) >= MAX_JOURNEYS:
            return
        journey = self._journey(message)
        self._by_key.setdefault(hash(message_key(message)), []).append(journey)
        arguments = message.get("arguments") or {}
        details = {
            "exchange": _text(arguments.get("exchange")),
            "routing-key": _text(arguments.get("routing-key")),
        }
        journey.add(Hop("published", start, frame.conn, frame.channel, ts, details), frame.number)
        if where in self._confirming:
            sequence = self._confirming[where] = self._confirming[where] + 1
            self._unconfirmed.setdefault(where, {})[sequence] = journey

    def _journey(self, message: dict[str, Any]) -> Journey:
        properties = message.get("properties") or {}
        body = _body(message) if self.bodies else None
        journey = Journey(
            len(self.journeys) + 1,
            _text(properties.get("message-id")),
            _text(properties.get("correlation-id")),
            body[:BODY_KEPT] if body is not None else None,
            _size(message),
            on_hop=self.on_hop,
        )
        self.journeys.append(journey)
        return journey

    def _delivered(
        self,
        frame: Frame,
        message: dict[str, Any],
        where: tuple[int, int],
        start: int,
        ts: float,
        earlier: int,
        how: str,
    ) -> None:
        arguments = message.get("arguments") or {}
        redelivered = arguments.get("redelivered") is True
        journey = self._by_delivery.get(earlier) if earlier else None
        linked = how
        if journey is None and self.correlator.matched is not None:
            digest, index = self.correlator.matched
            published = self._by_key.get(digest, [])
            if index < len(published):
                journey = published[index]
                linked = "message-id" if journey.message_id is not None else "body"
        if journey is None:  # published before the input began (or not seen)
            journey = self._journey(message)
            linked = ""
        tag = _text(arguments.get("consumer-tag"))
        details: dict[str, Any] = {
            "queue": self.correlator.consumers.get((frame.conn, tag or "")),
            "consumer-tag": tag,
            "delivery-tag": arguments.get("delivery-tag"),
            "redelivered": redelivered,
            "exchange": _text(arguments.get("exchange")),
            "routing-key": _text(arguments.get("routing-key")),
            "linked-by": linked or None,
        }
        if earlier:
            details["earlier-frame"] = earlier
        no_ack = self._no_ack.get((frame.conn, tag or ""), False)
        if no_ack:
            details["no-ack"] = True
        event = "redelivered" if redelivered else "delivered"
        journey.add(Hop(event, start, frame.conn, frame.channel, ts, details), frame.number)
        self._by_delivery[start] = journey
        delivery_tag = arguments.get("delivery-tag")
        if not no_ack and type(delivery_tag) is int:
            self._unacked.setdefault(where, {})[delivery_tag] = journey

    def _returned(self, frame: Frame, message: dict[str, Any], start: int, ts: float) -> None:
        """basic.return: the broker gives an unroutable mandatory publish back; the latest
        publish of that message on this connection."""
        for journey in reversed(self._by_key.get(hash(message_key(message)), [])):
            if journey.hops and journey.hops[0].conn == frame.conn:
                arguments = message.get("arguments") or {}
                details = {
                    "reply-code": arguments.get("reply-code"),
                    "reply-text": _text(arguments.get("reply-text")),
                }
                hop = Hop("returned", start, frame.conn, frame.channel, ts, details)
                journey.add(hop, frame.number)
                return

    # -- answers ---------------------------------------------------------------------------------
    def _confirmed(self, frame: Frame, where: tuple[int, int], tag: int, multiple: bool) -> None:
        """The broker's basic.ack / basic.nack of publishes on a channel in confirm mode."""
        waiting = self._unconfirmed.get(where)
        if not waiting:
            return
        tags = [t for t in waiting if t <= tag] if multiple else [tag]
        event = "confirmed" if frame.name == "basic.ack" else "publish-nacked"
        for sequence in sorted(tags):
            journey = waiting.pop(sequence, None)
            if journey is not None:
                details = {"delivery-tag": tag, "multiple": multiple}
                journey.add(Hop(event, frame.number, frame.conn, frame.channel, frame.ts, details))

    def _settled(self, frame: Frame, where: tuple[int, int], tag: int, multiple: bool) -> None:
        """The consumer's basic.ack / nack / reject of deliveries on its channel."""
        waiting = self._unacked.get(where)
        if not waiting:
            return
        tags = [t for t in waiting if t <= tag] if multiple or tag == 0 else [tag]
        event = {"basic.ack": "acked", "basic.nack": "nacked", "basic.reject": "rejected"}[
            frame.name
        ]
        details: dict[str, Any] = {"delivery-tag": tag, "multiple": multiple}
        if event != "acked":
            details["requeue"] = frame.fields.get("requeue") is not False
        for delivery_tag in sorted(tags):
            journey = waiting.pop(delivery_tag, None)
            if journey is not None:
                hop = Hop(event, frame.number, frame.conn, frame.channel, frame.ts, dict(details))
                journey.add(hop)

    def _closed(self, frame: Frame, where: tuple[int, int] | None) -> None:
        """A channel (or the connection) closing with deliveries unacked on it."""
        keys = [where] if where is not None else [k for k in self._unacked if k[0] == frame.conn]
        for key in keys:
            for _, journey in sorted(self._unacked.pop(key, {}).items()):
                details = {"closed-by": "client" if frame.direction == "c2s" else "broker"}
                hop = Hop("unacked-at-close", frame.number, frame.conn, key[1], frame.ts, details)
                journey.add(hop)

    # -- 1.0 -----------------------------------------------------------------------------------
    def _frame10(self, frame: Frame) -> None:
        """Transfers are a message's hops (the client's link into the broker or router, its
        outgoing link to another); a disposition settles them. A transfer is the next hop of
        the latest journey with the same identity (message-id, else correlation-id, else body
        digest: the order `Redeliveries` matches in) and link address that has no hop on this
        connection and direction yet; a redelivery joins its earlier delivery's journey."""
        link = self.redeliveries.feed_frame(frame)
        fields, direction, channel = frame.fields, frame.direction, frame.channel or 0
        name = frame.name
        if name == "attach":
            handle = fields.get("handle")
            if type(handle) is int and fields.get("role") == "sender":
                # a client's sender names where it sends (target), a broker's where it takes
                # messages from (source): either way the queue or address of the journey
                end = fields.get("target" if direction == "c2s" else "source")
                address = end.get("address") if isinstance(end, dict) else None
                key = (frame.conn, direction, channel, handle)
                self._address[key] = address if isinstance(address, str) else None
                link_name = fields.get("name")
                self._links[key] = link_name if isinstance(link_name, str) else None
        elif name == "begin":
            remote = fields.get("remote-channel")
            if type(remote) is int:
                self._peer[(frame.conn, direction, channel)] = remote
                self._peer[(frame.conn, OTHER.get(direction, ""), remote)] = channel
        elif name == "transfer":
            delivery_id = fields.get("delivery-id")
            if type(delivery_id) is int:
                start = (frame.conn, direction, channel, delivery_id)
                self._first10.setdefault(start, (frame.number, frame.ts))
            if frame.message is not None:
                earlier, why = (link.earlier, link.why) if link is not None else (0, "")
                self._transfer(frame, frame.message, earlier, why)
        elif name == "disposition":
            self._disposition(frame)
        elif name == "open":
            container = fields.get("container-id")
            if direction == "c2s" and isinstance(container, str):
                self.names.setdefault(frame.conn, container)

    def _transfer(self, frame: Frame, message: dict[str, Any], earlier: int, why: str) -> None:
        delivery_id = message.get("delivery-id")
        if type(delivery_id) is not int:
            return
        direction, channel = frame.direction, frame.channel or 0
        start, ts = self._first10.pop(
            (frame.conn, direction, channel, delivery_id), (frame.number, frame.ts)
        )
        handle = frame.fields.get("handle")
        where = (frame.conn, direction, channel, handle if type(handle) is int else -1)
        address, link_name = self._address.get(where), self._links.get(where)
        properties = message.get("properties") or {}
        identity = _identity(properties, message)
        journey = self._by_delivery.get(earlier) if earlier else None
        linked = "redelivery" if journey is not None else ""
        if journey is None and identity is not None:
            latest = self._by_identity.get(identity)
            if latest is not None and not any(
                h.event == "transfer" and h.conn == frame.conn and h.details.get("dir") == direction
                for h in latest.hops
            ):
                journey, linked = latest, str(identity[0])
        if journey is None:
            if len(self.journeys) >= MAX_JOURNEYS:
                return
            journey = self._journey(message)
        if identity is not None:
            self._by_identity[identity] = journey
        settled = frame.fields.get("settled") is True
        details: dict[str, Any] = {
            "dir": direction,
            "address": address,
            "link": link_name,
            "handle": handle if type(handle) is int else None,
            "delivery-id": delivery_id,
            "settled": settled,
            "linked-by": linked or None,
        }
        if earlier:
            details["earlier-frame"] = earlier
        if why:
            details["why"] = why  # what made it a redelivery, as `Redeliveries` says
        journey.add(Hop("transfer", start, frame.conn, channel, ts, details), frame.number)
        self._by_delivery[start] = journey
        if not settled:
            self._open10.setdefault((frame.conn, direction, channel), {})[delivery_id] = journey

    def _disposition(self, frame: Frame) -> None:
        fields, direction, channel = frame.fields, frame.direction, frame.channel or 0
        first, last = fields.get("first"), fields.get("last")
        if type(first) is not int:
            return
        span = (last - first) % SERIAL if type(last) is int else 0
        if span > MAX_RANGE:
            return
        by_receiver = fields.get("role") == "receiver"
        if by_receiver:  # settles what the other side sent, on its channel of the session
            side, where = OTHER.get(direction, ""), self._peer.get((frame.conn, direction, channel))
        else:
            side, where = direction, channel
        if where is None:
            return
        deliveries = self._open10.get((frame.conn, side, where))
        if not deliveries:
            return
        state = fields.get("state")
        kind = state.get("type") if isinstance(state, dict) else None
        settled = fields.get("settled") is True
        for offset in range(span + 1):
            delivery_id = (first + offset) % SERIAL
            journey = deliveries.get(delivery_id)
            if journey is None:
                continue
            if settled:
                del deliveries[delivery_id]
            details = {
                "dir": direction,
                "role": "receiver" if by_receiver else "sender",
                "delivery-id": delivery_id,
                "state": kind if isinstance(kind, str) else None,
                "settled": settled,
            }
            journey.add(Hop("disposition", frame.number, frame.conn, channel, frame.ts, details))

    # -- out -----------------------------------------------------------------------------------
    def select(
        self,
        message_id: str | None = None,
        correlation_id: str | None = None,
        frame: int | None = None,
        body_match: str | None = None,
    ) -> list[Journey]:
        """The journeys every given criterion picks (all of them when none is given)."""
        out = []
        for journey in self.journeys:
            if message_id is not None and journey.message_id != message_id:
                continue
            if correlation_id is not None and journey.correlation_id != correlation_id:
                continue
            if frame is not None and frame not in journey.frames:
                continue
            if body_match is not None and body_match not in (journey.body or ""):
                continue
            out.append(journey)
        return out
