"""Redeliveries linked to the earlier delivery of the same message (sans-IO).

A consumer that gets a message twice asks "where did I see it before?". The broker says only
that a delivery is a redelivery (0-9-1 `redelivered`; 1.0 `header.delivery-count` > 0 or
`first-acquirer` false), or says nothing (a 1.0 message sent again after it was released,
modified, or left unsettled when its link detached). `Redeliveries` follows the deliveries of a
capture and links each redelivery to the latest earlier delivery of the same message, which
came from the same queue (0-9-1: the consumer's or basic.get's queue, else exchange and routing
key; 1.0: the sending link's source address) in the same direction, matched by:

- `message-id`: the same message-id, and the same body where both bodies are known;
- `correlation-id`: the same, when there is no message-id;
- `body`: the same body digest (weaker: equal bodies may be different messages).

A redelivery the broker did not mark is linked only to an earlier delivery that came back to
it (1.0: released, modified, or unsettled when its link, session or connection ended; 0-9-1:
requeued by the client's basic.nack or basic.reject, which garagemq delivers again without
setting `redelivered`), so equal messages sent twice on purpose are not taken for redeliveries.

Frames go in as `read --json` records (`feed`, `link_redeliveries`) or `Frame` objects
(`feed_frame`); frame numbers come out. The frame of a delivery is its first frame: the
0-9-1 basic.deliver / basic.get-ok, the 1.0 transfer that carries the delivery-id. Bodies are
known when the frames carry `message` (`read --json` does; a message too large to keep, or
redacted, has no body to compare). Memory is capped for live captures: the oldest deliveries
are forgotten first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from amqpscope.codec.frames import Frame

__all__ = ["Redeliveries", "Redelivery", "link_redeliveries"]

#: how a redelivery was matched to its earlier delivery, strongest first
MESSAGE_ID: Final = "message-id"
CORRELATION_ID: Final = "correlation-id"
BODY: Final = "body"
#: 1.0 outcomes (and ends), and 0-9-1's requeue, after which the broker may send the message again
REQUEUED: Final = "requeued"
RETURNED: Final = frozenset(("released", "modified", "detached", "ended", REQUEUED))
#: deliveries remembered (index keys) and 1.0 deliveries followed until settled
MAX_KEYS: Final = 200_000
MAX_OPEN: Final = 100_000
#: a disposition range longer than this is not walked (a damaged or hostile frame)
MAX_RANGE: Final = 10_000
SERIAL: Final = 1 << 32
OTHER: Final = {"c2s": "s2c", "s2c": "c2s"}
DELIVERIES_091: Final = frozenset(("basic.deliver", "basic.get-ok"))
SETTLES_091: Final = frozenset(("basic.ack", "basic.nack", "basic.reject"))


@dataclass(frozen=True, slots=True)
class Redelivery:
    """A redelivery (`frame`) and the earlier delivery of the same message (`earlier`, 0 when
    the capture does not show it). `how`: message-id, correlation-id or body (empty when not
    linked); `why`: what made it a redelivery ("redelivered", "delivery-count 2",
    "first-acquirer false", or the earlier delivery's fate: "released", "modified", "detached",
    "ended"); `queue`: the queue or address both came from, if known."""

    frame: int
    earlier: int
    how: str
    why: str
    conn: int
    earlier_conn: int
    queue: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "frame": self.frame,
            "earlier": self.earlier or None,
            "how": self.how or None,
            "why": self.why,
            "conn": self.conn,
            "earlier-conn": self.earlier_conn if self.earlier else None,
            "queue": self.queue,
        }


class _Seen:
    """A delivery remembered: its frame, connection, and (1.0) what became of it."""

    __slots__ = ("conn", "digest", "frame", "handle", "state")

    def __init__(self, frame: int, conn: int, digest: int | None, handle: object) -> None:
        self.frame = frame
        self.conn = conn
        self.digest = digest
        self.handle = handle
        self.state = "open"


def _int(value: Any) -> int | None:
    return value if type(value) is int else None


def _text(value: Any) -> str | None:
    """An id as a key: strings, numbers, uuids and binary all compare by their text."""
    if value is None or isinstance(value, (dict, list)):
        return None
    return f"{type(value).__name__}:{value}"


def body_digest(message: Mapping[str, Any]) -> int | None:
    """A digest of a message's body as the frame carries it (None when it is not there:
    redacted, too large to keep, or not decoded). Python's hash of the bytes or of the rendered
    body's text: fast, 64 bits, and compared only within one process."""
    body = message.get("body")
    if isinstance(body, dict):
        if body.get("redacted") or body.get("truncated"):
            return None
        raw = body.get("raw")
        if isinstance(raw, (bytes, bytearray)):
            return hash(bytes(raw))
        return hash(repr(body))
    if isinstance(message.get("hex"), str):  # 1.0, not the standard message format
        return hash(message["hex"])
    return None if body is None else hash(repr(body))


class Redeliveries:
    """Feed frames in capture order; `links` maps each redelivery's frame to its `Redelivery`
    (unless `keep` is false: a caller that takes each from `feed`'s return keeps its own)."""

    def __init__(self, keep: bool = True) -> None:
        self.keep = keep
        self.links: dict[int, Redelivery] = {}
        self._index: OrderedDict[tuple, _Seen] = OrderedDict()
        # 0-9-1: where a delivery's message comes from
        self._consume: dict[tuple[int, int], str] = {}  # (conn, channel) -> consume's queue
        self._tags: dict[tuple[int, int, str], str] = {}  # (conn, channel, tag) -> queue
        self._get: dict[tuple[int, int], str] = {}  # (conn, channel) -> last basic.get queue
        self._method: dict[tuple[int, str, int], tuple[int, str | None]] = {}
        # (conn, channel) -> delivery tag -> its delivery, until the client settles it
        self._unsettled: dict[tuple[int, int], dict[int, _Seen]] = {}
        self._requeued = False  # some 0-9-1 delivery was requeued by the client
        # 1.0: links, sessions, and deliveries not yet settled
        self._address: dict[tuple[int, str, int, int], str | None] = {}
        self._names: dict[tuple[int, str, int, int], str] = {}  # handle -> link name
        self._handles: dict[tuple[int, str, int, str], int] = {}  # link name -> handle
        self._peer: dict[tuple[int, str, int], int] = {}  # a session's channel, other side's
        self._first: dict[tuple[int, str, int, int], int] = {}  # delivery-id -> first frame
        self._open: dict[tuple[int, str, int], dict[int, _Seen]] = {}
        self._opened = 0
        self._back = False  # some 1.0 delivery came back (released, modified, detached...)

    # -- input ---------------------------------------------------------------------------------
    def feed(self, record: Mapping[str, Any]) -> Redelivery | None:
        """A `read --json` record; the redelivery it completes, if any."""
        return self._feed(
            _int(record.get("frame")) or 0,
            _int(record.get("conn")) or 0,
            str(record.get("dir") or ""),
            _int(record.get("channel")),
            str(record.get("version") or ""),
            str(record.get("name") or ""),
            record.get("fields") or {},
            record.get("message"),
        )

    def feed_frame(
        self, frame: Frame, fields: Mapping[str, Any] | None = None
    ) -> Redelivery | None:
        """A `Frame` (its well-typed `fields` if the caller has them)."""
        return self._feed(
            frame.number,
            frame.conn,
            frame.direction,
            frame.channel,
            frame.version,
            frame.name,
            frame.fields if fields is None else fields,
            frame.message,
        )

    def _feed(
        self,
        number: int,
        conn: int,
        direction: str,
        channel: int | None,
        version: str,
        name: str,
        fields: Any,
        message: Any,
    ) -> Redelivery | None:
        if channel is None or not isinstance(fields, Mapping):
            return None
        if version == "1.0":
            return self._frame10(number, conn, direction, channel, name, fields, message)
        return self._frame091(number, conn, direction, channel, name, fields, message)

    def forget(self, conn: int) -> None:
        """A connection ended and was forgotten (live capture): its channels and links go; its
        deliveries stay, as the earlier deliveries of redeliveries on other connections."""
        tables: tuple[dict[Any, Any], ...] = (
            self._unsettled,
            self._consume,
            self._tags,
            self._get,
            self._method,
            self._address,
            self._names,
            self._handles,
            self._peer,
            self._first,
        )
        for table in tables:
            for key in [k for k in table if k[0] == conn]:
                del table[key]
        for key in [k for k in self._open if k[0] == conn]:
            self._returned(self._open.pop(key), "ended")

    # -- 0-9-1 ---------------------------------------------------------------------------------
    def _frame091(
        self,
        number: int,
        conn: int,
        direction: str,
        channel: int,
        name: str,
        fields: Mapping[str, Any],
        message: Any,
    ) -> Redelivery | None:
        where = (conn, channel)
        queue = fields.get("queue")
        if name == "basic.consume" and isinstance(queue, str):
            self._consume[where] = queue
            tag = fields.get("consumer-tag")
            if isinstance(tag, str) and tag:
                self._tags[(conn, channel, tag)] = queue
        elif name == "basic.consume-ok" and where in self._consume:
            tag = fields.get("consumer-tag")
            if isinstance(tag, str):
                self._tags[(conn, channel, tag)] = self._consume[where]
        elif name == "basic.get" and isinstance(queue, str):
            self._get[where] = queue
        elif name in SETTLES_091 and direction == "c2s":
            self._settle091(where, name, fields)
        elif name in ("channel.close-ok", "connection.close-ok"):
            for key in [k for k in self._unsettled if k[0] == conn and (not channel or k == where)]:
                del self._unsettled[key]  # (what a close requeues, RabbitMQ marks redelivered)
        elif name in DELIVERIES_091:
            if name == "basic.get-ok":
                source = self._get.get(where)
            else:
                source = self._tags.get((conn, channel, str(fields.get("consumer-tag"))))
            if source is None:
                source = f"{fields.get('exchange')!s}/{fields.get('routing-key')!s}"
            self._method[(conn, direction, channel)] = (number, source)
        if not isinstance(message, Mapping):
            return None
        method = message.get("method")
        # the decoder's method is a name; a record from elsewhere may hold anything (a list is
        # unhashable: `in` a frozenset raised TypeError)
        if not isinstance(method, str) or method not in DELIVERIES_091:
            return None
        first = self._method.pop((conn, direction, channel), None)
        if first is None:
            return None
        start, source = first
        arguments = message.get("arguments")
        redelivered = isinstance(arguments, Mapping) and arguments.get("redelivered") is True
        properties = message.get("properties")
        props = properties if isinstance(properties, Mapping) else {}
        scope = (direction, source)
        seen = _Seen(start, conn, body_digest(message), None)
        keys = self._keys(scope, props, seen.digest)
        if redelivered:
            found = self._match(keys, seen, any_state=True)
        else:  # unmarked: only a message the client requeued can come again
            found = self._match(keys, seen, any_state=False) if self._requeued else None
        self._remember(keys, seen)
        tag = _int(arguments.get("delivery-tag")) if isinstance(arguments, Mapping) else None
        if tag is not None:
            unsettled = self._unsettled.get(where)
            if unsettled is None:
                if len(self._unsettled) >= MAX_OPEN:
                    del self._unsettled[next(iter(self._unsettled))]
                unsettled = self._unsettled[where] = {}
            if len(unsettled) < MAX_OPEN:  # (no-ack deliveries stay until the channel closes)
                unsettled[tag] = seen
        if redelivered:
            return self._link(seen, found, "redelivered", source)
        if found is None:
            return None
        return self._link(seen, found, REQUEUED, source)

    def _settle091(self, where: tuple[int, int], name: str, fields: Mapping[str, Any]) -> None:
        """The client's ack, nack or reject: its deliveries are settled; requeued ones may come
        again, with or without the `redelivered` flag."""
        unsettled = self._unsettled.get(where)
        if not unsettled:
            return
        tag = _int(fields.get("delivery-tag")) or 0
        if name != "basic.reject" and fields.get("multiple") is True:
            tags = [t for t in unsettled if t <= tag or tag == 0]
        else:
            tags = [tag] if tag in unsettled else []
        requeue = name != "basic.ack" and fields.get("requeue") is True
        for settled in tags:
            seen = unsettled.pop(settled)
            if requeue:
                seen.state = REQUEUED
                self._requeued = True

    # -- 1.0 -----------------------------------------------------------------------------------
    def _frame10(
        self,
        number: int,
        conn: int,
        direction: str,
        channel: int,
        name: str,
        fields: Mapping[str, Any],
        message: Any,
    ) -> Redelivery | None:
        if name == "transfer":
            return self._transfer(number, conn, direction, channel, fields, message)
        if name == "disposition":
            self._disposition(conn, direction, channel, fields)
        elif name == "attach":
            handle, link = _int(fields.get("handle")), fields.get("name")
            if handle is None or not isinstance(link, str):
                return None
            self._names[(conn, direction, channel, handle)] = link
            self._handles[(conn, direction, channel, link)] = handle
            if fields.get("role") == "sender":
                source = fields.get("source")
                address = source.get("address") if isinstance(source, Mapping) else None
                self._address[(conn, direction, channel, handle)] = (
                    address if isinstance(address, str) else None
                )
        elif name == "begin":
            remote = _int(fields.get("remote-channel"))
            if remote is not None:
                self._peer[(conn, direction, channel)] = remote
                self._peer[(conn, OTHER.get(direction, ""), remote)] = channel
        elif name == "detach":
            self._detach(conn, direction, channel, _int(fields.get("handle")))
        elif name == "end":  # the session's deliveries both ways, unsettled, come back
            self._returned(self._open.pop((conn, direction, channel), {}), "ended")
            peer = self._peer.get((conn, direction, channel))
            if peer is not None:
                self._returned(self._open.pop((conn, OTHER.get(direction, ""), peer), {}), "ended")
        elif name == "close":
            for key in [k for k in self._open if k[0] == conn]:
                self._returned(self._open.pop(key), "ended")
        return None

    def _transfer(
        self,
        number: int,
        conn: int,
        direction: str,
        channel: int,
        fields: Mapping[str, Any],
        message: Any,
    ) -> Redelivery | None:
        delivery_id = _int(fields.get("delivery-id"))
        if delivery_id is not None:
            self._first.setdefault((conn, direction, channel, delivery_id), number)
        if not isinstance(message, Mapping):
            return None
        delivery_id = _int(message.get("delivery-id"))
        if delivery_id is None:
            return None
        start = self._first.pop((conn, direction, channel, delivery_id), number)
        handle = _int(fields.get("handle"))
        address = self._address.get((conn, direction, channel, handle or 0))
        scope = (direction, address)
        header = message.get("header")
        header = header if isinstance(header, Mapping) else {}
        count = _int(header.get("delivery-count"))
        why = ""
        if count:
            why = f"delivery-count {count}"
        elif header.get("first-acquirer") is False:
            why = "first-acquirer false"
        properties = message.get("properties")
        props = properties if isinstance(properties, Mapping) else {}
        seen = _Seen(start, conn, body_digest(message), handle)
        keys = self._keys(scope, props, seen.digest)
        # unmarked, it can only be a message that came back; none has yet on a happy path
        found = self._match(keys, seen, any_state=bool(why)) if why or self._back else None
        if found is not None and not why:
            why = found[0].state
        self._remember(keys, seen)
        if fields.get("settled") is True:
            seen.state = "settled"
        elif self._opened < MAX_OPEN:
            self._open.setdefault((conn, direction, channel), {})[delivery_id] = seen
            self._opened += 1
        if not why:
            return None
        return self._link(seen, found, why, address)

    def _disposition(self, conn: int, direction: str, channel: int, fields: Mapping) -> None:
        first = _int(fields.get("first"))
        if first is None:
            return
        last = _int(fields.get("last"))
        span = (last - first) % SERIAL if last is not None else 0
        if span > MAX_RANGE:
            return
        if fields.get("role") == "receiver":  # settles what the other side sent
            side, where = OTHER.get(direction, ""), self._peer.get((conn, direction, channel))
        else:
            side, where = direction, channel
        if where is None:
            return
        deliveries = self._open.get((conn, side, where))
        if not deliveries:
            return
        state = fields.get("state")
        kind = state.get("type") if isinstance(state, Mapping) else None
        settled = fields.get("settled") is True
        for offset in range(span + 1):
            seen = deliveries.get((first + offset) % SERIAL)
            if seen is None:
                continue
            if isinstance(kind, str):
                seen.state = kind
                self._back = self._back or kind in RETURNED
            if settled or kind in RETURNED:
                del deliveries[(first + offset) % SERIAL]
                self._opened -= 1
                if seen.state == "open":
                    seen.state = "settled"

    def _detach(self, conn: int, direction: str, channel: int, handle: int | None) -> None:
        """The link's unsettled deliveries come back to their sender, whichever end detached."""
        if handle is None:
            return
        ends = [(direction, channel, handle)]
        link = self._names.get((conn, direction, channel, handle))
        peer = self._peer.get((conn, direction, channel))
        if link is not None and peer is not None:
            other = OTHER.get(direction, "")
            theirs = self._handles.get((conn, other, peer, link))
            if theirs is not None:
                ends.append((other, peer, theirs))
        for side, where, h in ends:
            deliveries = self._open.get((conn, side, where))
            if not deliveries:
                continue
            gone = {i: s for i, s in deliveries.items() if s.handle == h}
            for delivery_id in gone:
                del deliveries[delivery_id]
            self._returned(gone, "detached")

    def _returned(self, deliveries: dict[int, _Seen], state: str) -> None:
        for seen in deliveries.values():
            seen.state = state
            self._back = True
        self._opened -= len(deliveries)

    # -- matching ------------------------------------------------------------------------------
    def _keys(self, scope: tuple, props: Mapping[str, Any], digest: int | None) -> list[tuple]:
        keys: list[tuple] = []
        for how in (MESSAGE_ID, CORRELATION_ID):
            value = _text(props.get(how))
            if value is not None:
                keys.append((how, scope, value))
                break  # the correlation-id only for a message without a message-id
        if digest is not None:
            keys.append((BODY, scope, digest))
        return keys

    def _match(self, keys: list[tuple], seen: _Seen, any_state: bool) -> tuple[_Seen, str] | None:
        for key in keys:
            earlier = self._index.get(key)
            if earlier is None:
                continue
            known = None not in (earlier.digest, seen.digest)
            if key[0] != BODY and known and earlier.digest != seen.digest:
                continue  # an id reused for another message
            if any_state or earlier.state in RETURNED:
                return earlier, key[0]
        return None

    def _remember(self, keys: list[tuple], seen: _Seen) -> None:
        index = self._index
        for key in keys:
            index[key] = seen
            index.move_to_end(key)
        while len(index) > MAX_KEYS:
            index.popitem(last=False)

    def _link(
        self, seen: _Seen, found: tuple[_Seen, str] | None, why: str, queue: str | None
    ) -> Redelivery:
        earlier, how = found if found is not None else (None, "")
        link = Redelivery(
            seen.frame,
            earlier.frame if earlier is not None else 0,
            how,
            why,
            seen.conn,
            earlier.conn if earlier is not None else 0,
            queue,
        )
        if self.keep:
            links = self.links
            links[seen.frame] = link
            if len(links) > MAX_KEYS:
                del links[next(iter(links))]
        return link


def link_redeliveries(records: Iterable[Mapping[str, Any]]) -> dict[int, Redelivery]:
    """Every redelivery in `records` (`read --json` records, in capture order) by its frame
    number, each with its earlier delivery's frame number (0 when not in the capture), how
    they were matched and why it is a redelivery."""
    matcher = Redeliveries()
    for record in records:
        matcher.feed(record)
    return matcher.links
