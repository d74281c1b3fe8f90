"""One epoch of one channel: from channel.open (or the first frame seen) to close-ok.

What each method does to the channel is the table `METHODS` at the end: (direction, method) ->
the handler. The channel's open/close states and modes are `rules.py`'s; the connection applies
those and calls the handlers while the channel is active. Handlers append findings to the list
they are given; they never print and never raise on odd input.

Memory per epoch is bounded by what is outstanding on the wire (unacked deliveries, unconfirmed
publishes, in-flight gets and consumes) plus fixed caps on what the summary lists.
"""

from __future__ import annotations

from collections import deque
from heapq import heappush, heapreplace
from itertools import islice
from typing import Any, Final, cast

from amqpscope.codec.frames import Frame
from amqpscope.findings import Finding, finding
from amqpscope.track.amqp091 import rules
from amqpscope.track.amqp091.deliveries import Outstanding
from amqpscope.track.stats import Durations, Latency, Level, Rate

C2S: Final = rules.C2S
S2C: Final = rules.S2C
#: consumers listed per epoch (active ones are always tracked; cancelled ones beyond are counted)
MAX_CONSUMERS: Final = 256
#: returns listed per epoch with their details
MAX_RETURNS: Final = 32
#: transactions listed per epoch
MAX_TRANSACTIONS: Final = 64
#: recent mandatory publishes remembered to link a basic.return to its publish
MAX_MANDATORY: Final = 1024
#: in-flight requests remembered (gets, consumes, transaction ends): more means a broken trace
MAX_IN_FLIGHT: Final = 4096
#: stalls (prefetch-limit periods) listed per epoch, and the shortest one listed: the rest are
#: only counted (a slow consumer touches its limit at every delivery)
MAX_STALLS: Final = 64
STALL_LISTED_SECONDS: Final = 0.25
#: why an epoch ended, as its end findings say it
ENDED_WHEN: Final = {
    "closed": "when it closed",
    "connection": "when its connection closed",
    "capture": "when the capture ended",
    "transport": "when the TCP connection ended",
}
#: deliveries and publishes left outstanding at the end that are listed with their ages
MAX_LEFT: Final = 32
#: the slowest confirms kept per epoch with their frames (`diagnose` picks the outliers)
MAX_SLOW: Final = 8
#: a client's settling method -> its count in `settle_frames` (the name without "basic.")
SETTLE_COUNTS: Final = {name: name[6:] for name in ("basic.ack", "basic.nack", "basic.reject")}

#: the counts an epoch adds to its connection's totals
COUNTS: Final = (
    "publishes",
    "deliveries",
    "acks",
    "nacks",
    "rejects",
    "redelivered",
    "unacked",
    "returns",
)


def close_info(frame: Frame, by: str) -> dict[str, Any]:
    """connection.close / channel.close as the summary shows it."""
    fields = frame.fields
    class_id = fields.get("class-id") or 0
    method = fields.get("method")
    if method is None and class_id:
        method = f"{class_id}/{fields.get('method-id', 0)}"
    return {
        "reply-code": fields.get("reply-code"),
        "reply-text": fields.get("reply-text"),
        "class-method": method,
        "by": by,
        "frame": frame.number,
    }


class Consumer:
    __slots__ = (
        "cancelled",
        "deliveries",
        "exclusive",
        "frame",
        "no_ack",
        "prefetch",
        "queue",
        "tag",
        "unacked",
    )

    def __init__(
        self,
        tag: str,
        queue: str | None,
        no_ack: bool | None,
        exclusive: bool | None,
        prefetch: int,
        frame: int | None,
    ) -> None:
        self.tag = tag
        self.queue = queue
        self.no_ack = no_ack
        self.exclusive = exclusive
        self.prefetch = prefetch  # 0: no per-consumer limit
        self.frame = frame
        self.deliveries = 0
        self.unacked = 0
        self.cancelled: str | None = None  # "client" or "server"

    def to_json(self) -> dict[str, Any]:
        return {
            "tag": self.tag,
            "queue": self.queue,
            "no-ack": self.no_ack,
            "exclusive": self.exclusive,
            "prefetch": self.prefetch or None,
            "deliveries": self.deliveries,
            "cancelled-by": self.cancelled,
            "frame": self.frame,
        }


class ChannelEpoch:
    """The state and counts of one use of a channel number."""

    def __init__(
        self, number: int, epoch: int, frame: Frame, from_start: bool, source: str = "capture"
    ) -> None:
        self.number = number
        self.source = source  # what findings call the frames' source: "capture", "log"
        self.epoch = epoch  # 1 for the first use of the number in the capture, 2 after a reopen
        self.from_start = from_start  # False: adopted mid-stream, its start was not captured
        # the capture lost bytes of its connection while it was open: a tag or a method the
        # lost bytes may explain is counted, not flagged
        self.lenient = False
        self.opened_frame = frame.number if from_start else None
        self.state = rules.channel_first(from_start)
        self.modes: set[str] = set()
        self.listed = True  # set by the connection: listed in the summary, or only counted
        # counts
        self.publishes = 0
        self.published_bytes = 0
        self.deliveries = 0
        self.delivered_bytes = 0
        self.acks = 0
        self.nacks = 0
        self.rejects = 0
        self.requeued = 0
        self.redelivered = 0
        self.settle_frames = {"ack": 0, "nack": 0, "reject": 0, "multiple": 0}
        self.unacked = 0
        self.returns = 0
        self.discarded = 0
        # deliveries awaiting the client's settlement: tag -> (ts, consumer or None, frame)
        self.outstanding = Outstanding()
        self.max_unacked = 0
        self.ack_latency = Latency()
        # over time, for the summary's sparklines
        self.unacked_series = Level()
        self.delivery_series = Rate()
        self.publish_series = Rate()
        self.ack_latency_series = Durations()  # by when the ack came
        self.confirm_latency_series = Durations()  # by when the confirm came
        self.suspect: tuple[int, str, int] | None = None  # (frame, method, tag) of a bad settle
        # consumers and gets
        self.consumers: dict[str, Consumer] = {}
        self.consumers_unlisted = 0
        self.consuming: deque[Consumer] = deque()  # consumes awaiting consume-ok
        self.gets: deque[tuple[bool, str]] = deque()  # (no-ack, queue) of gets awaiting a reply
        self.get_ok = 0
        # get-oks whose basic.get was seen, by its no-ack (a capture that starts after the get
        # leaves the mode unknown: counted in get_ok only)
        self.get_ok_no_ack = 0
        self.get_ok_ack = 0
        self.get_empty = 0
        self.last_queue: str | None = None  # the queue "" names (last declared on the channel)
        # qos and saturation
        self.qos: dict[str, Any] | None = None
        self.consumer_prefetch = 0  # the non-global prefetch-count new consumers get
        self.channel_prefetch = 0  # the global (channel-wide) prefetch-count
        self.at_limit: set[str] = set()  # consumers (or "" for the channel) at their limit
        self.saturations = 0
        self.saturated_since: float | None = None
        self.saturated_seconds = 0.0
        self.saturated_frame = 0  # the delivery that reached the limit
        self.saturated_unacked = 0
        self.saturated_limit = 0
        self.saturated_last_settle = 0  # the client's last settle before the limit was reached
        #: limit periods of STALL_LISTED_SECONDS or more: start, start frame, end, end frame (0:
        #: the epoch ended at its limit), unacked, limit, the last settle frame before the start
        self.stalls: list[tuple[float, int, float, int, int, int, int]] = []
        self.last_settle_frame = 0
        #: at the end: (tag, delivered at, frame) of unacked deliveries, (seq, published at, frame,
        #: routing key) of unconfirmed publishes, the oldest first, MAX_LEFT of each
        self.left_unacked: list[tuple[int, float, int]] = []
        self.left_unconfirmed: list[tuple[int, float, int, str]] = []
        #: the client's last basic.publish and last content header: a header after the publish
        #: is its content, which a server refusing the publish (channel.close) must discard
        self.publish_frame = 0
        self.header_frame = 0
        # publisher confirms
        self.confirm_seq = 0
        #: publishes are numbered as the broker numbers them: False when confirm mode was adopted
        #: from a confirm (confirm.select came before the capture), and the numbers are not known
        self.numbered = True
        self.unconfirmed = Outstanding()  # seq -> (ts, frame, routing key, seq)
        self.confirmed = 0
        self.confirm_nacked = 0
        self.confirm_latency = Latency()
        #: the slowest confirms, a min-heap of (latency, seq, published at, publish frame,
        #: confirm frame, routing key); the nacked publishes, (seq, published at, publish frame,
        #: nack frame, nacked at, routing key), MAX_LEFT of them
        self.slow_confirms: list[tuple[float, int, float, int, int, str]] = []
        self.nacked: list[tuple[int, float, int, int, float, str]] = []
        self.mandatory: deque[tuple[str, str, int, int]] = deque(maxlen=MAX_MANDATORY)
        self.returned: list[dict[str, Any]] = []
        self.s2c_content = ""  # the s2c content method whose header/body frames come next
        # transactions
        self.commits = 0
        self.rollbacks = 0
        self.tx_current = _tx_group()
        self.tx_ending: deque[tuple[str, dict[str, Any]]] = deque()  # commit/rollback awaiting -ok
        self.transactions: list[dict[str, Any]] = []
        self.transactions_unlisted = 0
        self.tx_select_frame = 0  # the tx.select seen (0: none; tx adopted from a commit)
        self.tx_answered = False  # tx.select-ok (or a commit-ok or rollback-ok) came back
        # synchronous requests awaiting their answer: (method, frame, sent at); at the end,
        # those never answered: (method, frame, sent at, how long the client waited)
        self.asked: deque[tuple[str, int, float]] = deque()
        self.unanswered: list[tuple[str, int, float, float]] = []
        # flow
        self.flow_stops = 0
        # why the epoch ended: "closed", "connection", "transport" (TCP ended), "capture"
        self.ended: str | None = None
        self.close: dict[str, Any] | None = None

    # -- content ------------------------------------------------------------------------------
    def content_header(self, frame: Frame, direction: str) -> None:
        size = frame.fields.get("body-size") or 0
        if direction == C2S:
            self.published_bytes += size
            self.header_frame = frame.number
        elif self.s2c_content in ("basic.deliver", "basic.get-ok"):
            self.delivered_bytes += size

    def bytes_lost(self, direction: str) -> None:
        """The capture lost bytes of the connection (`direction`'s) while this use was open: a
        tag, confirm or method the lost bytes may explain is counted, not flagged; publishes
        lost in confirm mode leave the broker's numbering unknown, so confirms are counted
        from here on, not matched (as when confirm mode was adopted)."""
        self.lenient = True
        if direction == C2S and rules.CONFIRM in self.modes and self.numbered:
            self.numbered = False
            self.unconfirmed.drain()

    # -- publishing ---------------------------------------------------------------------------
    def publish(self, frame: Frame, out: list[Finding]) -> None:
        self.publishes += 1
        self.publish_frame = frame.number
        self.publish_series.add(frame.ts)
        fields = frame.fields
        if rules.CONFIRM in self.modes and self.numbered:
            self.confirm_seq += 1
            key = rules.name(fields.get("routing-key"))
            self.unconfirmed.give(self.confirm_seq, (frame.ts, frame.number, key, self.confirm_seq))
        if rules.TX in self.modes:
            self.tx_current["publishes"] += 1
        if fields.get("mandatory"):
            self.mandatory.append(
                (
                    fields.get("exchange", ""),
                    fields.get("routing-key", ""),
                    frame.number,
                    self.confirm_seq,
                )
            )

    def broker_settles(self, frame: Frame, out: list[Finding]) -> None:
        """basic.ack / basic.nack from the broker: publisher confirms."""
        fields = frame.fields
        tag = fields.get("delivery-tag", 0)
        multiple = bool(fields.get("multiple"))
        nack = frame.name == "basic.nack"
        if rules.CONFIRM not in self.modes:
            if self.from_start and not self.lenient:
                out.append(
                    finding(
                        "amqp091.unexpected-method",
                        f"{frame.name} from the broker on channel {self.number}, which never"
                        " entered confirm mode",
                    )
                )
                return
            # adopted: confirm.select came before the capture, so which publish a tag names is
            # not known (the broker numbers them from there); confirms are counted, not matched
            self.modes.add(rules.CONFIRM)
            self.numbered = False
        settled = self.unconfirmed.settle(tag, multiple)
        if settled is None:
            # unknown: before the capture, or in bytes it lost
            count = 0 if multiple or (self.from_start and not self.lenient) else 1
        else:
            count = len(settled)
            ts = frame.ts
            add = self.confirm_latency.add
            add_series = self.confirm_latency_series.add
            slow = self.slow_confirms
            floor = slow[0][0] if len(slow) >= MAX_SLOW else -1.0
            for note in settled:
                sent = note[0]  # (published at, frame, routing key, seq)
                add(ts - sent)
                add_series(ts, ts - sent)
                if ts - sent > floor:
                    entry = (ts - sent, note[3], sent, note[1], frame.number, note[2])
                    if len(slow) < MAX_SLOW:
                        heappush(slow, entry)
                    else:
                        heapreplace(slow, entry)
                    floor = slow[0][0] if len(slow) >= MAX_SLOW else -1.0
                if nack and len(self.nacked) < MAX_LEFT:
                    self.nacked.append((note[3], sent, note[1], frame.number, ts, note[2]))
        if nack:
            self.confirm_nacked += count
            out.append(
                finding(
                    "amqp091.publish-nacked",
                    f"the broker nacked {count} publish(es) on channel {self.number}"
                    f" (delivery-tag {tag}{', multiple' if multiple else ''})",
                )
            )
        else:
            self.confirmed += count
        mandatory = self.mandatory
        while mandatory and mandatory[0][3] and mandatory[0][3] <= tag:
            mandatory.popleft()  # confirmed: a return for it would have come before

    def returned_message(self, frame: Frame, out: list[Finding]) -> None:
        self.returns += 1
        self.s2c_content = "basic.return"
        fields = frame.fields
        exchange = fields.get("exchange", "")
        key = fields.get("routing-key", "")
        publish = None
        for i, entry in enumerate(self.mandatory):
            if entry[0] == exchange and entry[1] == key:
                publish = entry[2]
                del self.mandatory[i]
                break
        code = fields.get("reply-code")
        text = fields.get("reply-text", "")
        if len(self.returned) < MAX_RETURNS:
            self.returned.append(
                {
                    "reply-code": code,
                    "reply-text": text,
                    "exchange": exchange,
                    "routing-key": key,
                    "publish-frame": publish,
                    "frame": frame.number,
                }
            )
        where = (
            f"the publish in frame {publish}" if publish else f"a publish not in the {self.source}"
        )
        out.append(
            finding(
                "amqp091.returned",
                f"{code} {text}: {where} to exchange {exchange!r} with routing key {key!r} came"
                f" back on channel {self.number}",
            )
        )

    # -- consuming ----------------------------------------------------------------------------
    def consume(self, frame: Frame, out: list[Finding]) -> None:
        fields = frame.fields
        queue = rules.name(fields.get("queue")) or self.last_queue or ""
        consumer = Consumer(
            rules.name(fields.get("consumer-tag")),
            queue,
            bool(fields.get("no-ack")),
            bool(fields.get("exclusive")),
            self.consumer_prefetch,
            frame.number,
        )
        if fields.get("nowait"):
            self._add_consumer(consumer)
        elif len(self.consuming) < MAX_IN_FLIGHT:
            self.consuming.append(consumer)

    def consume_ok(self, frame: Frame, out: list[Finding]) -> None:
        tag = rules.name(frame.fields.get("consumer-tag"))
        if self.consuming:
            consumer = self.consuming.popleft()
            consumer.tag = tag or consumer.tag
        else:  # the consume was before the capture
            consumer = Consumer(tag, None, None, None, 0, None)
        self._add_consumer(consumer)

    def _add_consumer(self, consumer: Consumer) -> None:
        consumers = self.consumers
        if len(consumers) >= MAX_CONSUMERS:
            for tag, old in list(consumers.items()):
                if old.cancelled:
                    del consumers[tag]
                    self.consumers_unlisted += 1
                    break
        consumers[consumer.tag] = consumer

    def _consumer(self, tag: str) -> Consumer:
        consumer = self.consumers.get(tag)
        if consumer is None:  # consuming since before the capture: adopted as first seen
            consumer = Consumer(tag, None, None, None, 0, None)
            self._add_consumer(consumer)
        return consumer

    def cancel(self, frame: Frame, out: list[Finding]) -> None:
        by = "client" if frame.direction == C2S else "server"
        tag = rules.name(frame.fields.get("consumer-tag"))
        consumer = self._consumer(tag)
        if consumer.cancelled is None:
            consumer.cancelled = by
        if by == "server":
            out.append(
                finding(
                    "amqp091.consumer-cancelled",
                    f"the broker cancelled consumer {tag!r} of queue {consumer.queue!r} on"
                    f" channel {self.number} (queue deleted, or failed over)",
                )
            )

    def deliver(self, frame: Frame, out: list[Finding]) -> None:
        self.s2c_content = "basic.deliver"
        fields = frame.fields
        consumer = self._consumer(rules.name(fields.get("consumer-tag")))
        consumer.deliveries += 1
        self._delivered(frame, consumer, bool(consumer.no_ack), out)

    def get(self, frame: Frame, out: list[Finding]) -> None:
        fields = frame.fields
        if len(self.gets) < MAX_IN_FLIGHT:
            self.gets.append((bool(fields.get("no-ack")), rules.name(fields.get("queue"))))

    def get_ok_(self, frame: Frame, out: list[Finding]) -> None:
        self.s2c_content = "basic.get-ok"
        self.get_ok += 1
        no_ack = False
        if self.gets:
            no_ack = self.gets.popleft()[0]
            if no_ack:
                self.get_ok_no_ack += 1
            else:
                self.get_ok_ack += 1
        self._delivered(frame, None, no_ack, out)

    def get_empty_(self, frame: Frame, out: list[Finding]) -> None:
        self.get_empty += 1
        if self.gets:
            self.gets.popleft()

    def _delivered(
        self, frame: Frame, consumer: Consumer | None, no_ack: bool, out: list[Finding]
    ) -> None:
        self.deliveries += 1
        self.delivery_series.add(frame.ts)
        fields = frame.fields
        if fields.get("redelivered"):
            self.redelivered += 1
        if no_ack:
            return
        outstanding = self.outstanding
        outstanding.give(fields.get("delivery-tag", 0), (frame.ts, consumer, frame.number))
        unacked = len(outstanding)
        self.unacked_series.set(frame.ts, unacked)
        if unacked > self.max_unacked:
            self.max_unacked = unacked
        if consumer is not None:
            consumer.unacked += 1
            if consumer.prefetch and consumer.unacked >= consumer.prefetch:
                self.at_limit.add(consumer.tag)
        if self.channel_prefetch and unacked >= self.channel_prefetch:
            self.at_limit.add("")
        if self.at_limit and self.saturated_since is None:
            self.saturated_since = frame.ts
            self.saturations += 1
            self.saturated_frame = frame.number
            self.saturated_unacked = unacked
            limit_now = self.channel_prefetch if "" in self.at_limit else 0
            if not limit_now and consumer is not None:
                limit_now = consumer.prefetch
            self.saturated_limit = limit_now
            self.saturated_last_settle = self.last_settle_frame
            if self.saturations == 1:
                limit = self.channel_prefetch
                if "" not in self.at_limit and consumer is not None:
                    limit = consumer.prefetch
                out.append(
                    finding(
                        "amqp091.prefetch-saturated",
                        f"{unacked} deliveries unacked on channel {self.number}: the prefetch"
                        f" limit of {limit} is reached; the broker waits for acks (the summary"
                        " counts how often and for how long)",
                    )
                )

    # -- the client settles deliveries ----------------------------------------------------------
    def client_settles(self, frame: Frame, out: list[Finding]) -> None:
        """basic.ack / basic.nack / basic.reject from the client."""
        fields = frame.fields
        name = frame.name
        settle = (
            name,
            fields.get("delivery-tag", 0),
            name != "basic.reject" and bool(fields.get("multiple")),
            bool(fields.get("requeue")),
            frame.number,
        )
        frames = self.settle_frames
        frames[SETTLE_COUNTS.get(name) or name[6:]] += 1  # no slice made per frame
        if settle[2]:
            frames["multiple"] += 1
        if rules.TX in self.modes:  # applied by tx.commit-ok, dropped by tx.rollback-ok
            self.tx_current["settles"].append(settle)
            return
        self._settle(settle, frame.ts, out)

    def _settle(self, settle: tuple[str, int, bool, bool, int], ts: float, out: list) -> None:
        name, tag, multiple, requeue, number = settle
        settled = self.outstanding.settle(tag, multiple)
        if settled is None and multiple and self.lenient:
            settled = self.outstanding.through(tag)  # its own tag may be in the lost bytes
        if settled is None:
            if self.lenient or (
                not self.from_start and (tag < self.outstanding.first or not self.outstanding.first)
            ):
                count = 0 if multiple else 1  # delivered before the capture, or in bytes lost
            else:
                self.suspect = (number, name, tag)
                out.append(
                    finding(
                        "amqp091.unknown-delivery-tag",
                        f"{name} of delivery tag {tag}{' (multiple)' if multiple else ''} on"
                        f" channel {self.number}: no such delivery is outstanding (never"
                        " delivered, already settled, or delivered no-ack); the broker closes"
                        " the channel with 406 PRECONDITION_FAILED",
                    )
                )
                return
        else:
            count = len(settled)
            self.unacked_series.set(ts, len(self.outstanding))
            latency, series = self.ack_latency, self.ack_latency_series
            at_limit = self.at_limit
            # the notes typed (what `_delivered` gives): compiled, the times are native floats,
            # the consumer's attributes native reads, and each `add` a direct call
            notes = cast(list[tuple[float, Consumer | None, int]], settled)
            for delivered, consumer, _frame in notes:
                latency.add(ts - delivered)
                series.add(ts, ts - delivered)
                if consumer is not None:
                    consumer.unacked -= 1
                    if at_limit and consumer.unacked < consumer.prefetch:
                        at_limit.discard(consumer.tag)
            if "" in at_limit and len(self.outstanding) < self.channel_prefetch:
                at_limit.discard("")
            if not at_limit and self.saturated_since is not None:
                self.saturated_seconds += ts - self.saturated_since
                self._stall_ended(ts, number)
        self.last_settle_frame = number
        if name == "basic.ack":
            self.acks += count
        else:
            if name == "basic.nack":
                self.nacks += count
            else:
                self.rejects += count
            if requeue:
                self.requeued += count

    def _stall_ended(self, ts: float, number: int) -> None:
        """The limit period that began at `saturated_since` ends at `ts` (frame `number`, 0 for
        the epoch's end); listed when long enough to matter."""
        since = self.saturated_since
        self.saturated_since = None
        if since is None or ts - since < STALL_LISTED_SECONDS or len(self.stalls) >= MAX_STALLS:
            return
        self.stalls.append(
            (
                since,
                self.saturated_frame,
                ts,
                number,
                self.saturated_unacked,
                self.saturated_limit,
                self.saturated_last_settle,
            )
        )

    # -- qos, flow, queues ----------------------------------------------------------------------
    def qos_(self, frame: Frame, out: list[Finding]) -> None:
        fields = frame.fields
        count = fields.get("prefetch-count", 0)
        glob = bool(fields.get("global"))
        self.qos = {
            "count": count,
            "size": fields.get("prefetch-size", 0),
            "global": glob,
        }
        if glob:
            self.channel_prefetch = count
        else:
            self.consumer_prefetch = count

    def flow(self, frame: Frame, out: list[Finding]) -> None:
        if frame.fields.get("active") is False:
            self.flow_stops += 1
            who = "client" if frame.direction == C2S else "broker"
            out.append(
                finding(
                    "amqp091.flow-stopped",
                    f"the {who} asked its peer to stop sending content on channel {self.number}",
                )
            )

    def declare_ok(self, frame: Frame, out: list[Finding]) -> None:
        self.last_queue = rules.name(frame.fields.get("queue"))

    # -- synchronous requests and their answers -------------------------------------------------
    def ask(self, frame: Frame) -> None:
        """A client's synchronous request (`rules.REPLIES`) that asks for an answer."""
        if not frame.fields.get("nowait") and len(self.asked) < MAX_IN_FLIGHT:
            self.asked.append((frame.name, frame.number, frame.ts))

    def answer(self, name: str) -> None:
        """The broker's answer `name`: it answers the oldest request waiting for it."""
        for i, (asked, _frame, _ts) in enumerate(self.asked):
            if name in rules.REPLIES[asked]:
                del self.asked[i]
                return

    # -- modes: confirm and tx ----------------------------------------------------------------
    def select(self, frame: Frame, out: list[Finding]) -> None:
        self.modes.add(rules.MODES[(frame.direction, frame.name)])
        if frame.name == "tx.select" and not self.tx_select_frame:
            self.tx_select_frame = frame.number

    def tx_select_ok(self, frame: Frame, out: list[Finding]) -> None:
        self.tx_answered = True

    def tx_end(self, frame: Frame, out: list[Finding]) -> None:
        """tx.commit / tx.rollback: the transaction's content is fixed; the -ok applies it."""
        if rules.TX not in self.modes:
            self.modes.add(rules.TX)  # adopted mid-stream (or a protocol error the broker reports)
        group = self.tx_current
        group["frame"] = frame.number
        self.tx_current = _tx_group()
        if len(self.tx_ending) < MAX_IN_FLIGHT:
            self.tx_ending.append((frame.name, group))

    def tx_end_ok(self, frame: Frame, out: list[Finding]) -> None:
        self.tx_answered = True
        if not self.tx_ending:
            return
        name, group = self.tx_ending.popleft()
        settles = group.pop("settles")
        commit = name == "tx.commit"
        if commit:
            self.commits += 1
            before = (self.acks, self.nacks, self.rejects)
            for settle in settles:
                self._settle(settle, frame.ts, out)
            group["acks"] = self.acks - before[0]
            group["nacks"] = self.nacks - before[1]
            group["rejects"] = self.rejects - before[2]
        else:
            self.rollbacks += 1
            group["settles-discarded"] = len(settles)
        if len(self.transactions) < MAX_TRANSACTIONS:
            self.transactions.append({"outcome": "commit" if commit else "rollback", **group})
        else:
            self.transactions_unlisted += 1

    # -- the end ----------------------------------------------------------------------------
    def closing(self, frame: Frame, by: str, out: list[Finding]) -> None:
        """channel.close from either side (the first one is the reason)."""
        if self.close is not None:
            return
        self.close = info = close_info(frame, by)
        if by == "server":
            self.asked.clear()  # the broker's close is its answer to what was waiting
        code = info["reply-code"]
        if code in rules.OK_CODES or code is None:
            return
        cause = ""
        if self.suspect is not None and by == "server":
            cause_frame, method, tag = self.suspect
            info["cause-frame"] = cause_frame
            cause = f"; caused by the {method} of delivery tag {tag} in frame {cause_frame}"
        failed = f" in reply to {info['class-method']}" if info["class-method"] else ""
        if by == "server" and info["class-method"] == "basic.publish":
            cause += self._refused_publish()
        out.append(
            finding(
                "amqp091.channel-error",
                f"channel {self.number} (use {self.epoch}) closed by the {by}{failed}:"
                f" {code} {info['reply-text']}{cause}",
            )
        )

    def _refused_publish(self) -> str:
        """The broker closed the channel in reply to a basic.publish in confirm mode: when one
        publish alone was unconfirmed, the close is its answer (a broker that has closed the
        channel confirms nothing after it), not a confirm still owed. Several: which one the
        close answered is not on the wire, and all stay unconfirmed.

        Why: py-amqp (celery's client) publishes with confirms, one at a time; a publish to a
        missing exchange is answered by channel.close 404, and was never "unconfirmed"."""
        if not self.numbered or len(self.unconfirmed) != 1:
            return ""
        seq = next(iter(self.unconfirmed.tags))  # (no tuple-unpacking of a dict: compiled)
        self.unconfirmed.drain()
        return f"; the close is the answer to publish seq {seq} (no confirm comes after it)"

    def end(
        self,
        ts: float,
        why: str,
        out: list[Finding],
        lost_c2s: float = -1.0,
        lost_s2c: float = -1.0,
    ) -> None:
        """The epoch is over: closed, its connection closed, or the capture ended. `lost_c2s` and
        `lost_s2c`: when each direction last lost bytes (-1.0: never); an ack or confirm the
        capture may have lost is "not seen", and what the broker does then is conditional."""
        if self.ended is not None:
            return
        self.ended = why
        tags = self.outstanding.tags
        self.left_unacked = [
            (tag, note[0], note[2]) for tag, note in islice(tags.items(), MAX_LEFT)
        ]
        self.left_unconfirmed = [
            (seq, note[0], note[1], note[2])
            for seq, note in islice(self.unconfirmed.tags.items(), MAX_LEFT)
        ]
        self._unanswered(ts, why, out)
        first_unacked = min((note[0] for note in tags.values()), default=ts)
        first_unconfirmed = min((note[0] for note in self.unconfirmed.tags.values()), default=ts)
        left = self.outstanding.drain()
        self.unacked = len(left)
        if self.saturated_since is not None:
            self.saturated_seconds += max(0.0, ts - self.saturated_since)
            self._stall_ended(ts, 0)
        where = ENDED_WHEN[why] if why != "capture" else f"when the {self.source} ended"
        if left:
            lost = lost_c2s >= first_unacked
            notes = (
                ["the capture lost bytes the client sent after the first of them"] if lost else []
            )
            if why != "capture":  # the channel or connection ended: the broker takes them back
                notes.append(
                    ("if they were not acked, " if lost else "") + "the broker requeues them"
                )
            out.append(
                finding(
                    "amqp091.unacked-at-end",
                    f"{len(left)} deliveries on channel {self.number} were"
                    f" {'not seen acked' if lost else 'still unacked'} {where}"
                    + (f" ({'; '.join(notes)})" if notes else ""),
                )
            )
        pending = len(self.unconfirmed)
        if pending:
            lost = lost_s2c >= first_unconfirmed
            never = "not seen" if lost else "not yet" if why == "capture" else "never"
            out.append(
                finding(
                    "amqp091.unconfirmed-at-end",
                    f"{pending} publishes on channel {self.number} were {never} confirmed by the"
                    f" broker {where}"
                    + (
                        " (the capture lost bytes the broker sent after the first of them)"
                        if lost
                        else ""
                    ),
                )
            )

    def _unanswered(self, ts: float, why: str, out: list[Finding]) -> None:
        """The synchronous requests still waiting when the epoch ended: never answered."""
        if not self.asked:
            return
        self.unanswered = [
            (name, number, sent, max(0.0, ts - sent))
            for name, number, sent in islice(self.asked, MAX_LEFT)
        ]
        self.asked.clear()
        if why == "capture":  # cut short by the capture, not seen unanswered: no finding
            return
        where = ENDED_WHEN[why]
        listed = ", ".join(
            f"{name} (frame {number}, {waited:.3f} s before)"
            for name, number, _sent, waited in self.unanswered
        )
        out.append(
            finding(
                "amqp091.unanswered",
                f"the broker had not answered {listed} on channel {self.number} {where}",
            )
        )

    # -- the summary ----------------------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        out = {name: getattr(self, name) for name in COUNTS}
        out["unacked"] = self.unacked if self.ended else len(self.outstanding)
        return out

    def to_json(self) -> dict[str, Any]:
        confirm = rules.CONFIRM in self.modes
        tx = rules.TX in self.modes
        unacked = self.unacked if self.ended else len(self.outstanding)
        saturated = self.saturated_seconds
        out: dict[str, Any] = {
            "channel": self.number,
            "use": self.epoch,
            "from-start": self.from_start,
            "opened-frame": self.opened_frame,
            "state": self.state,
            "ended": self.ended,
            "publishes": self.publishes,
            "deliveries": self.deliveries,
            "acks": self.acks,
            "nacks": self.nacks,
            "rejects": self.rejects,
            "requeued": self.requeued,
            "settle-frames": self.settle_frames,
            "redelivered": self.redelivered,
            "unacked": unacked,
            "max-unacked": self.max_unacked,
            "bytes": {"published": self.published_bytes, "delivered": self.delivered_bytes},
            "ack-latency-ms": self.ack_latency.to_json(),
            "series": {
                "unacked": self.unacked_series.to_json(),
                "deliveries": self.delivery_series.to_json(),
                "publishes": self.publish_series.to_json(),
                "ack-latency": self.ack_latency_series.to_json(),
                "confirm-latency": self.confirm_latency_series.to_json(),
            },
            "confirms": {
                "selected": confirm,
                "acked": self.confirmed,
                "nacked": self.confirm_nacked,
                "pending": len(self.unconfirmed) if self.numbered else None,
                "latency-ms": self.confirm_latency.to_json(),
            },
            "returns": self.returns,
            "returned": self.returned,
            "tx": {
                # in a transaction once the broker said so (tx.select-ok), or, on a channel the
                # capture starts inside, once it answered a commit or rollback
                "selected": tx and (self.tx_answered or not self.tx_select_frame),
                "commits": self.commits,
                "rollbacks": self.rollbacks,
            },
            "consumers": [c.to_json() for c in self.consumers.values()],
            "prefetch": None,
            "get": None,
            "discarded": self.discarded,
            "close": self.close,
        }
        if tx and self.tx_select_frame and not self.tx_answered:
            out["tx"]["select-unanswered"] = self.tx_select_frame
        if tx:
            out["tx"]["transactions"] = self.transactions
            if self.transactions_unlisted:
                out["tx"]["transactions-unlisted"] = self.transactions_unlisted
        if self.consumers_unlisted:
            out["consumers-unlisted"] = self.consumers_unlisted
        if self.qos is not None or self.saturations:
            out["prefetch"] = {
                **(self.qos or {"count": None, "size": None, "global": None}),
                "saturations": self.saturations,
                "saturated-ms": round(saturated * 1000.0, 3),
            }
        if self.get_ok or self.get_empty or self.gets:
            out["get"] = {"ok": self.get_ok, "empty": self.get_empty, "unanswered": len(self.gets)}
        if self.flow_stops:
            out["flow-stops"] = self.flow_stops
        return out


def _tx_group() -> dict[str, Any]:
    return {"publishes": 0, "settles": []}


# -- what each method does to an active channel --------------------------------------------------
#: (direction, method name) -> handler(epoch, frame, findings)
METHODS: Final = {
    (C2S, "basic.publish"): ChannelEpoch.publish,
    (S2C, "basic.ack"): ChannelEpoch.broker_settles,
    (S2C, "basic.nack"): ChannelEpoch.broker_settles,
    (S2C, "basic.return"): ChannelEpoch.returned_message,
    (C2S, "basic.consume"): ChannelEpoch.consume,
    (S2C, "basic.consume-ok"): ChannelEpoch.consume_ok,
    (C2S, "basic.cancel"): ChannelEpoch.cancel,
    (S2C, "basic.cancel"): ChannelEpoch.cancel,
    (S2C, "basic.deliver"): ChannelEpoch.deliver,
    (C2S, "basic.get"): ChannelEpoch.get,
    (S2C, "basic.get-ok"): ChannelEpoch.get_ok_,
    (S2C, "basic.get-empty"): ChannelEpoch.get_empty_,
    (C2S, "basic.ack"): ChannelEpoch.client_settles,
    (C2S, "basic.nack"): ChannelEpoch.client_settles,
    (C2S, "basic.reject"): ChannelEpoch.client_settles,
    (C2S, "basic.qos"): ChannelEpoch.qos_,
    (C2S, "channel.flow"): ChannelEpoch.flow,
    (S2C, "channel.flow"): ChannelEpoch.flow,
    (S2C, "queue.declare-ok"): ChannelEpoch.declare_ok,
    (C2S, "confirm.select"): ChannelEpoch.select,
    (C2S, "tx.select"): ChannelEpoch.select,
    (S2C, "tx.select-ok"): ChannelEpoch.tx_select_ok,
    (C2S, "tx.commit"): ChannelEpoch.tx_end,
    (C2S, "tx.rollback"): ChannelEpoch.tx_end,
    (S2C, "tx.commit-ok"): ChannelEpoch.tx_end_ok,
    (S2C, "tx.rollback-ok"): ChannelEpoch.tx_end_ok,
}
