"""Across connections: request/reply pairs and message journeys (sans-IO).

Every 0-9-1 frame of the capture comes in; only a few matter: the frames that complete a message
(`frame.message`), and the methods that say which queue a delivery came from (basic.consume and
consume-ok, basic.get, queue.declare-ok).

**Journeys.** A message published on any channel of any connection and delivered (basic.deliver
or basic.get-ok) on any channel of any connection is one journey through the broker's queue. The
publish and its delivery are matched by `message-id` when the publisher set one; otherwise by the
exchange and routing key (a delivery carries the publish's), the body's size and a digest of the
body (not of the properties: the broker may add headers on the way). Identical messages are
matched in order, per queue: the n-th delivery of a key from queue Q is the n-th publish of that
key, so a fanout to several queues makes one journey per queue. Redeliveries are counted, not
timed (the first delivery was): those the broker marked `redelivered`, and those it did not (a
delivery of a message whose every remembered publish its queue already delivered: garagemq
requeues without the flag), also counted `unmarked`. Latency is from the frame that completed
the publish to the one that completed the delivery: the broker's routing and queueing time plus
any wait for a consumer.

Memory is bounded: a publish is remembered as the hash of its key and its time (a few hundred
bytes); the publishes remembered for matching are the last `MAX_PUBLISHES` (a message
that waits in its queue longer than that many later publishes is not matched, and counted as an
unmatched delivery); latencies are reservoirs (`stats.py`); at most `MAX_QUEUES` queues.

**Request/reply.** A publish with `reply-to` and `correlation-id` is a request; the reply is the
first later publish carrying that correlation-id to the reply-to queue (by the default exchange's
routing key, or the name the broker gave `amq.rabbitmq.reply-to` on delivery). Each pair records
where the request and reply were published and delivered, the service time (request delivered
to reply published) and the latency (request published to reply delivered, else to reply
published).
"""

from __future__ import annotations

from collections import deque
from typing import Any, Final

from amqpscope.codec.body import as_text
from amqpscope.codec.frames import METHOD, Frame
from amqpscope.track.amqp091.rules import name
from amqpscope.track.stats import Latency

#: publishes remembered for journey matching
MAX_PUBLISHES = 200_000
#: queues with journey statistics (more are counted under "(other)")
MAX_QUEUES: Final = 1024
#: RPC pairs listed (all are counted); requests awaiting a reply
MAX_RPC: Final = 1000
MAX_REQUESTS: Final = 10_000
#: consumer tags and channels remembered for the queue a delivery came from
MAX_ROUTES: Final = 100_000
DIRECT_REPLY: Final = "amq.rabbitmq.reply-to"
OTHER: Final = "(other)"
UNKNOWN: Final = "(unknown)"


#: what `_fields` gives for a part a message lacks (only read, never written)
_NONE: Final[dict[str, Any]] = {}


def _fields(value: Any) -> dict[str, Any]:
    """A part of a message (its properties, arguments, body) as a dict (compiled: typed, so
    that each `get` on it is a direct call, not a method looked up on an Any)."""
    return value if isinstance(value, dict) else _NONE


def message_key(message: dict[str, Any]) -> tuple:
    """The identity of a message as publish and delivery both show it."""
    properties = _fields(message.get("properties"))
    message_id = properties.get("message-id")
    arguments = _fields(message.get("arguments"))
    if type(message_id) is str and message_id:
        return (
            "id",
            message_id,
            name(arguments.get("exchange")),
            name(arguments.get("routing-key")),
        )
    body = _fields(message.get("body"))
    raw = body.get("raw")
    content: Any
    if raw is not None:  # `summary`: the body as bytes, rendered here only when needed
        content = as_text(raw, properties.get("content-type"), properties.get("content-encoding"))
        if content is None:  # binary: the bytes, in a tuple (never equal to a text, as hex)
            content = (raw,)
    else:
        content = body.get("text")
        if content is None:
            content = body.get("hex")
    # the body's digest: Python's string hash (computed once per string, 64 bits); both sides
    # render the body the same way, as their properties (content-type) are the same
    return (
        "rk",
        name(arguments.get("exchange")),
        name(arguments.get("routing-key")),
        message.get("body-size"),
        hash(content),
    )


class _Key:
    """The remembered publishes of one message key: their times, oldest first, and each queue's
    cursor. Most keys are published once and delivered to one queue: their times are a short
    list (evicted ones are dropped from its front in bulk) and the first queue's cursor needs no
    dict, so that a remembered publish costs a few hundred bytes, not a kilobyte."""

    __slots__ = ("base", "cursor", "cursors", "head", "queue", "times")

    def __init__(self) -> None:
        self.times: list[float] = []
        self.head = 0  # times[head] is the oldest remembered publish
        self.base = 0  # its index among all publishes of the key
        self.queue: str | None = None  # the first queue that delivered the key,
        self.cursor = 0  # and the index of the next publish it delivers
        self.cursors: dict[str, int] | None = None  # other queues -> the same

    def __len__(self) -> int:
        return len(self.times) - self.head

    def evict(self) -> None:
        """Forget the oldest publish."""
        self.head += 1
        self.base += 1
        if self.head >= 32 and self.head * 2 > len(self.times):
            del self.times[: self.head]
            self.head = 0


class _Queue:
    __slots__ = ("latency", "matched", "redelivered", "unmarked", "unmatched")

    def __init__(self) -> None:
        self.matched = 0
        self.unmatched = 0
        self.redelivered = 0
        self.unmarked = 0  # redeliveries without the `redelivered` flag
        self.latency = Latency()


class Correlator:
    """Every 0-9-1 frame of the capture in; RPC pairs and per-queue journeys out."""

    def __init__(self) -> None:
        # where deliveries come from
        self.consumers: dict[tuple[int, str], str] = {}  # (conn, consumer tag) -> queue
        self.consuming: dict[tuple[int, int], deque[str]] = {}  # (conn, ch) -> queues asked
        self.getting: dict[tuple[int, int], deque[str]] = {}  # (conn, ch) -> queues of gets
        self.declared: dict[tuple[int, int], str] = {}  # (conn, ch) -> last queue declared
        # journeys
        # message key digests (see `message_key`: a key is kept as its hash) -> publishes
        self.keys: dict[int, _Key] = {}
        self.order: deque[int] = deque()  # digests of remembered publishes, oldest first
        self.evicted = 0
        self.published = 0
        self.queues: dict[str, _Queue] = {}
        # request/reply
        self.requests: dict[Any, deque[dict[str, Any]]] = {}  # correlation-id -> requests
        self.request_count = 0
        self.pairs: list[dict[str, Any]] = []
        self.pair_count = 0
        self.rpc_latency = Latency()
        self.answered: dict[Any, dict[str, Any]] = {}  # correlation-id -> pair awaiting delivery
        # the last delivery's publish, (its key's digest, its index among the key's publishes),
        # None when it was not matched: `follow` builds journeys on this matching, not a copy
        self.matched: tuple[int, int] | None = None

    def feed(self, frame: Frame) -> None:
        """Note one frame (only those that complete a message, and a few methods, matter)."""
        message = frame.message
        if message is not None:
            method = message.get("method")
            if method == "basic.publish":
                self._published(frame, message)
            elif method == "basic.deliver" or method == "basic.get-ok":
                self._delivered(frame, message, method)
            return
        if frame.kind == METHOD:
            handler = ROUTES.get(frame.name)
            if handler is not None:
                handler(self, frame)

    # -- which queue a delivery comes from ---------------------------------------------------
    def _consume(self, frame: Frame) -> None:
        fields = frame.fields
        queue = name(fields.get("queue")) or self.declared.get((frame.conn, frame.channel or 0), "")
        tag = name(fields.get("consumer-tag"))
        if tag and fields.get("nowait"):
            self._route(frame.conn, tag, queue)
            return
        waiting = self._waiting(self.consuming, frame)
        if len(waiting) < 64:
            waiting.append(queue)

    @staticmethod
    def _waiting(table: dict[tuple[int, int], deque[str]], frame: Frame) -> deque[str]:
        key = (frame.conn, frame.channel or 0)
        waiting = table.get(key)
        if waiting is None:
            if len(table) >= MAX_ROUTES:
                table.pop(next(iter(table)))
            waiting = table[key] = deque()
        return waiting

    def _consume_ok(self, frame: Frame) -> None:
        waiting = self.consuming.get((frame.conn, frame.channel or 0))
        if waiting:
            self._route(frame.conn, name(frame.fields.get("consumer-tag")), waiting.popleft())

    def _route(self, conn: int, tag: str, queue: str) -> None:
        if len(self.consumers) >= MAX_ROUTES:
            self.consumers.pop(next(iter(self.consumers)))
        self.consumers[(conn, tag)] = queue

    def _get(self, frame: Frame) -> None:
        fields = frame.fields
        queue = name(fields.get("queue")) or self.declared.get((frame.conn, frame.channel or 0), "")
        waiting = self._waiting(self.getting, frame)
        if len(waiting) < 64:
            waiting.append(queue)

    def _get_empty(self, frame: Frame) -> None:
        waiting = self.getting.get((frame.conn, frame.channel or 0))
        if waiting:
            waiting.popleft()

    def _declare_ok(self, frame: Frame) -> None:
        if len(self.declared) >= MAX_ROUTES:
            self.declared.pop(next(iter(self.declared)))
        self.declared[(frame.conn, frame.channel or 0)] = name(frame.fields.get("queue"))

    # -- messages -----------------------------------------------------------------------------
    def _published(self, frame: Frame, message: dict[str, Any]) -> None:
        self.published += 1
        key = hash(message_key(message))
        entry = self.keys.get(key)
        if entry is None:
            entry = self.keys[key] = _Key()
        entry.times.append(frame.ts)
        order = self.order
        order.append(key)
        if len(order) > MAX_PUBLISHES:
            self._evict(order.popleft())
        properties = _fields(message.get("properties"))
        correlation = properties.get("correlation-id")
        if correlation is not None:
            self._rpc_publish(frame, message, properties, correlation)

    def _evict(self, key: int) -> None:
        entry = self.keys[key]
        entry.evict()
        self.evicted += 1
        if not entry:
            del self.keys[key]

    def _delivered(self, frame: Frame, message: dict[str, Any], method: str) -> None:
        self.matched = None
        arguments = _fields(message.get("arguments"))
        if method == "basic.deliver":
            queue = self.consumers.get((frame.conn, name(arguments.get("consumer-tag"))))
        else:
            waiting = self.getting.get((frame.conn, frame.channel or 0))
            queue = waiting.popleft() if waiting else None
        if queue is None:  # consuming since before the capture
            # the default exchange routes by queue name: its routing key is the queue
            queue = name(arguments.get("routing-key")) if arguments.get("exchange") == "" else ""
            queue = queue or UNKNOWN
        stats = self.queues.get(queue)
        if stats is None:
            if len(self.queues) >= MAX_QUEUES:
                queue = OTHER
                stats = self.queues.get(OTHER)
            if stats is None:
                stats = self.queues[queue] = _Queue()
        properties = _fields(message.get("properties"))
        correlation = properties.get("correlation-id")
        if correlation is not None:
            self._rpc_deliver(frame, message, properties, correlation)
        if arguments.get("redelivered"):
            stats.redelivered += 1
            return
        digest = hash(message_key(message))
        entry = self.keys.get(digest)
        if entry is None:
            stats.unmatched += 1
            return
        first = entry.queue is None or entry.queue == queue
        if first:
            entry.queue = queue
            index = entry.cursor
        else:
            index = entry.cursors.get(queue, entry.base) if entry.cursors else entry.base
        if index < entry.base:
            index = entry.base
        at = index - entry.base
        if at >= len(entry):
            # every remembered publish of the key was delivered from this queue already: this is
            # one of them again, which the broker did not mark redelivered
            if (first and entry.cursor > 0) or (entry.cursors and queue in entry.cursors):
                stats.redelivered += 1
                stats.unmarked += 1
            else:
                stats.unmatched += 1
            return
        if first:
            entry.cursor = index + 1
        elif entry.cursors is None:
            entry.cursors = {queue: index + 1}
        else:
            entry.cursors[queue] = index + 1
        stats.matched += 1
        self.matched = (digest, index)
        stats.latency.add(frame.ts - entry.times[entry.head + at])

    # -- request/reply --------------------------------------------------------------------------
    def _rpc_publish(
        self, frame: Frame, message: dict[str, Any], properties: dict[str, Any], cid: Any
    ) -> None:
        key = _hashable(cid)
        reply_to = properties.get("reply-to")
        reply_to = None if reply_to is None else name(reply_to)
        arguments = _fields(message.get("arguments"))
        routing_key = name(arguments.get("routing-key"))
        waiting = self.requests.get(key)
        if waiting:
            for i, request in enumerate(waiting):
                if routing_key in request["targets"] and request["reply"] is None:
                    del waiting[i]
                    if not waiting:
                        del self.requests[key]
                    self._paired(request, frame, key)
                    return
        if reply_to is None:
            return
        if self.request_count - self.pair_count >= MAX_REQUESTS and self.requests:
            oldest = next(iter(self.requests))
            self.requests[oldest].popleft()
            if not self.requests[oldest]:
                del self.requests[oldest]
        self.request_count += 1
        request = {
            "correlation-id": cid,
            "reply-to": reply_to,
            "request": _where(frame),
            "served": None,
            "reply": None,
            "answered": None,
            "targets": {reply_to},
            "ts": frame.ts,
            "served-ts": None,
        }
        self.requests.setdefault(key, deque()).append(request)

    def _rpc_deliver(
        self, frame: Frame, message: dict[str, Any], properties: dict[str, Any], cid: Any
    ) -> None:
        key = _hashable(cid)
        reply_to = properties.get("reply-to")
        if reply_to is not None:  # a request reaching its server
            reply_to = name(reply_to)
            for request in self.requests.get(key, ()):
                if request["served"] is None:
                    request["served"] = _where(frame)
                    request["served-ts"] = frame.ts
                    if reply_to != request["reply-to"]:
                        request["targets"].add(reply_to)  # amq.rabbitmq.reply-to, renamed
                    return
            return
        pair = self.answered.pop(key, None)
        if pair is not None:  # a reply reaching its requester
            pair["answered"] = _where(frame)
            pair["latency-ms"] = round((frame.ts - pair.pop("ts")) * 1000.0, 3)
            self.rpc_latency.add(pair["latency-ms"] / 1000.0)

    def _paired(self, request: dict[str, Any], frame: Frame, key: Any) -> None:
        self.pair_count += 1
        ts = request.pop("ts")
        served_ts = request.pop("served-ts")
        request.pop("targets")
        request["reply"] = _where(frame)
        request["service-ms"] = (
            round((frame.ts - served_ts) * 1000.0, 3) if served_ts is not None else None
        )
        request["latency-ms"] = round((frame.ts - ts) * 1000.0, 3)
        if len(self.pairs) < MAX_RPC:
            self.pairs.append(request)
        if len(self.answered) >= MAX_REQUESTS:
            self.answered.pop(next(iter(self.answered)))
        # the latency so far runs to the reply's publish; its delivery, if seen, replaces it
        request["ts"] = ts
        self.answered[key] = request

    # -- out --------------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        for pair in self.answered.values():  # replies never seen delivered: latency to publish
            if "ts" in pair:
                pair.pop("ts")
                self.rpc_latency.add(pair["latency-ms"] / 1000.0)
        self.answered.clear()
        journeys = [
            {
                "queue": queue,
                "matched": stats.matched,
                "unmatched": stats.unmatched,
                "redelivered": stats.redelivered,
                "latency-ms": stats.latency.to_json(),
            }
            for queue, stats in sorted(self.queues.items())
        ]
        if any(stats.unmarked for stats in self.queues.values()):  # only then: its column
            for row, (_queue, stats) in zip(journeys, sorted(self.queues.items()), strict=True):
                row["unmarked"] = stats.unmarked
        unanswered = sum(len(w) for w in self.requests.values())
        return {
            "rpc": self.pairs,
            "rpc-stats": {
                "requests": self.request_count,
                "pairs": self.pair_count,
                "unanswered": unanswered,
                "listed": len(self.pairs),
                "latency-ms": self.rpc_latency.to_json(),
            },
            "journeys": journeys,
            "journey-stats": {
                "publishes": self.published,
                "forgotten": self.evicted,
            },
        }


def _where(frame: Frame) -> dict[str, Any]:
    return {"conn": frame.conn, "channel": frame.channel, "frame": frame.number}


def _hashable(value: Any) -> Any:
    return value if isinstance(value, str) else repr(value)


#: method -> what it says about where deliveries come from
ROUTES: Final = {
    "basic.consume": Correlator._consume,
    "basic.consume-ok": Correlator._consume_ok,
    "basic.get": Correlator._get,
    "basic.get-empty": Correlator._get_empty,
    "queue.declare-ok": Correlator._declare_ok,
}
