"""Every family amqpscope exports, in one table: its name, type, labels, help, the RabbitMQ
Prometheus plugin family whose meaning it shares (so dashboards built on the plugin read it),
and how its value is read from the trackers' state.

The values are read from the trackers' own counters and reservoirs (the same objects `summary
--json` renders), never from any output: a family's reader gets one tracked connection (or the
capture-wide correlator, or the findings) and yields `(label values, value)` pairs; the sampler
sums the pairs of every connection by label values. Counters are totals since the connection's
first frame; gauges are the state at the sample's time (a closed channel or link holds nothing).
Histograms read a `stats.Latency` each: the sampler takes its new samples at each sample time.

`docs/metrics.md` is generated from this table (`tools/metrics_doc.py`); a test fails when it
drifts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from amqpscope.track import amqp091, amqp10
from amqpscope.track.amqp091 import rules as amqp091_rules
from amqpscope.track.amqp10.rules import CLIENT, SERVER
from amqpscope.track.stats import Latency

PREFIX: Final = "amqpscope_"
#: histogram bucket bounds, seconds (a broker's confirms and a consumer's acks run from tens of
#: microseconds to minutes)
BUCKETS: Final = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
    0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip
#: the label value a bounded label (queue, address) takes past its limit
OTHER: Final = "other"
#: labels whose values are names chosen by applications: bounded by `--metrics-max-names`
BOUNDED: Final = ("queue", "address", "node")

Pairs = Iterable[tuple[tuple[str, ...], float]]


@dataclass(frozen=True)
class Family:
    """One exported family. `scope`: what its reader is given — "amqp091" or "amqp10" (one
    tracked connection of that version), "capture" (the sampler: findings, journeys)."""

    name: str  # without PREFIX; a counter's without `_total`
    kind: str  # "counter", "gauge" or "histogram"
    labels: tuple[str, ...]
    help: str
    scope: str
    read: Callable[[Any, float], Any]
    rabbitmq: str | None = None  # the RabbitMQ plugin family of the same meaning

    @property
    def exported(self) -> str:
        return PREFIX + self.name


# -- 0-9-1 readers ---------------------------------------------------------------------------------


def _epochs(conn: amqp091.ConnectionTracker) -> Iterator[Any]:
    """Every channel use the connection still has (listed, and open unlisted ones)."""
    yield from conn.epochs
    for epoch in conn.channels.values():
        if not epoch.listed:
            yield epoch


def _vhost(conn: amqp091.ConnectionTracker) -> str:
    return conn.vhost if isinstance(conn.vhost, str) else ""


def _channel_count(attr: str) -> Callable[[Any, float], Pairs]:
    """A channel counter: its value over the connection's channels (ended unlisted uses too)."""

    def read(conn: amqp091.ConnectionTracker, now: float) -> Pairs:
        total = conn.unlisted.get(attr, 0) + sum(getattr(e, attr) for e in _epochs(conn))
        return [((_vhost(conn),), float(total))]

    return read


def _channel_sum(value: Callable[[Any], float]) -> Callable[[Any, float], Pairs]:
    """A per-channel value the `unlisted` totals do not keep: over the listed channels."""

    def read(conn: amqp091.ConnectionTracker, now: float) -> Pairs:
        return [((_vhost(conn),), float(sum(value(e) for e in _epochs(conn))))]

    return read


def _open(epoch: Any) -> bool:
    return epoch.ended is None


def _consume_deliveries(epoch: Any, no_ack: bool) -> int:
    return sum(c.deliveries for c in epoch.consumers.values() if bool(c.no_ack) == no_ack)


def _uncommitted(epoch: Any) -> int:
    return int(epoch.tx_current["publishes"])


def _acks_uncommitted(epoch: Any) -> int:
    return len(epoch.tx_current["settles"])


def _channels_closed(conn: amqp091.ConnectionTracker, now: float) -> Pairs:
    """Channel uses closed by channel.close: by which side, with which reply-code."""
    for epoch in _epochs(conn):
        close = epoch.close
        if close is not None:
            yield (_vhost(conn), str(close.get("by") or ""), str(close.get("reply-code"))), 1.0


def _blocked_seconds(conn: amqp091.ConnectionTracker, now: float) -> Pairs:
    seconds = conn.blocked_seconds
    if conn.blocked_since is not None:
        seconds += max(0.0, now - conn.blocked_since)
    return [((_vhost(conn),), seconds)]


def _queue_consumers(conn: amqp091.ConnectionTracker, now: float) -> Pairs:
    for epoch in _epochs(conn):
        if _open(epoch):
            for consumer in epoch.consumers.values():
                if consumer.cancelled is None:
                    yield (_vhost(conn), consumer.queue or ""), 1.0


def _queue_delivered(conn: amqp091.ConnectionTracker, now: float) -> Pairs:
    for epoch in _epochs(conn):
        for consumer in epoch.consumers.values():
            yield (_vhost(conn), consumer.queue or ""), float(consumer.deliveries)


def _channel_latency(
    attr: str,
) -> Callable[[Any, float], Iterable[tuple[tuple[str, ...], Latency]]]:
    def read(conn: amqp091.ConnectionTracker, now: float) -> Any:
        return [((_vhost(conn),), getattr(e, attr)) for e in _epochs(conn)]

    return read


# -- 1.0 readers -----------------------------------------------------------------------------------


def _links(conn: amqp10.ConnectionTracker) -> Iterator[Any]:
    for session in conn.sessions:
        yield from session.links


def _address(link: Any) -> str:
    """The node the client's end works with: a sender's target, a receiver's source."""
    summary_side = link.sender
    attach = link.attach[CLIENT] or link.attach[SERVER] or {}
    key = "target" if summary_side == CLIENT else "source"
    terminus = attach.get(key)
    if isinstance(terminus, dict):
        if terminus.get("type") == "coordinator":
            return "coordinator"
        address = terminus.get("address")
        if address is not None:
            return address if isinstance(address, str) else str(address)
    return ""


def _link_labels(link: Any) -> tuple[str, str]:
    return (link.role_of(CLIENT) or "", _address(link))


def _link_value(value: Callable[[Any, float], float]) -> Callable[[Any, float], Pairs]:
    def read(conn: amqp10.ConnectionTracker, now: float) -> Pairs:
        for link in _links(conn):
            yield _link_labels(link), float(value(link, now))

    return read


def _link_open(link: Any) -> bool:
    return link.ended is None


def _starved(link: Any, now: float) -> float:
    episodes = link.credit.starvation
    seconds = float(episodes.seconds)
    if episodes.since is not None:
        seconds += max(0.0, now - episodes.since)
    return seconds


def _outcomes(conn: amqp10.ConnectionTracker, now: float) -> Pairs:
    for link in _links(conn):
        role, address = _link_labels(link)
        for outcome, count in link.outcomes.items():
            yield (role, address, outcome), float(count)


def _detaches(conn: amqp10.ConnectionTracker, now: float) -> Pairs:
    for link in _links(conn):
        for side in (CLIENT, SERVER):
            detach = link.detach[side]
            if detach is not None:
                error = detach.get("error")
                yield (side, error["condition"] if error else "none"), 1.0


def _session_ends(conn: amqp10.ConnectionTracker, now: float) -> Pairs:
    for session in conn.sessions:
        for side in (CLIENT, SERVER):
            half = session.half[side]
            if half.ended:
                error = half.error
                yield (side, error["condition"] if error else "none"), 1.0


def _link_latency(conn: amqp10.ConnectionTracker, now: float) -> Any:
    return [(_link_labels(link), link.latency) for link in _links(conn)]


# -- both versions -----------------------------------------------------------------------------


def _version(conn: Any) -> str:
    return "1.0" if isinstance(conn, amqp10.ConnectionTracker) else "0-9-1"


def _opened(conn: Any, now: float) -> Pairs:
    return [((_version(conn),), 1.0)]


def _closed(conn: Any, now: float) -> Pairs:
    """A connection that ended: by which side, with which code or condition."""
    if isinstance(conn, amqp10.ConnectionTracker):
        for side in (conn.client_side, conn.server_side):
            if side.closed is not None:
                error = side.closed.get("error")
                return [(("1.0", side.name, error["condition"] if error else "none"), 1.0)]
    elif conn.close is not None:
        return [(("0-9-1", conn.close.get("by") or "", str(conn.close.get("reply-code"))), 1.0)]
    if conn.dropped:
        return [((_version(conn), "", "transport"), 1.0)]
    return []


def _silent_past(last: float | None, end: float, limit: float) -> int:
    """1 when a side's silence still going on at `end` (its last frame at `last`) is already
    past `limit` seconds: the tracker counts a silence when its next frame comes, and a side
    that never sends again (paused, killed, its peer gave up on it) would be counted never. When
    the frame does come, the tracker's count takes it over and this one ends: the sum never goes
    back."""
    return 1 if last is not None and last > 0 and end - last > limit else 0


def _silence_end(conn: Any, now: float) -> float:
    """Where a silence being measured ends: the TCP end, else the sample's time."""
    ended = conn.transport_ts
    return now if ended is None else min(now, ended)


def _heartbeat_misses(conn: Any, now: float) -> Pairs:
    """Silences past the limit: 0-9-1's two heartbeat intervals, 1.0's peer's idle-time-out;
    one still going on at the sample's time (or at the TCP end) counts once it is past it."""
    end = _silence_end(conn, now)
    if isinstance(conn, amqp10.ConnectionTracker):
        out = []
        for side in (conn.client_side, conn.server_side):
            idle = side.peer.idle
            going = bool(idle) and side.closed is None and side.peer.closed is None
            extra = _silent_past(side.last_ts, end, idle / 1000.0) if going else 0
            out.append((("1.0", side.name), float(side.late + extra)))
        return out
    live = bool(conn.heartbeat) and conn.state in amqp091_rules.CONNECTION_LIVE
    limit = 2.0 * conn.heartbeat
    pairs = []
    for direction, n in conn.missed.items():
        last = conn.last_c2s if direction == "c2s" else conn.last_s2c
        extra = _silent_past(last, end, limit) if live else 0
        pairs.append((("0-9-1", direction), float(n + extra)))
    return pairs


def _capture(attr: str) -> Callable[[Any, float], Any]:
    """What the sampler itself keeps (findings by code, journeys' latencies)."""

    def read(sampler: Any, now: float) -> Any:
        return getattr(sampler, attr)()

    return read


F = Family
FAMILIES: Final = (
    # 0-9-1 channels, by vhost
    F(
        "channel_messages_published",
        "counter",
        ("vhost",),
        "Messages published (basic.publish) by clients.",
        "amqp091",
        _channel_count("publishes"),
        "rabbitmq_channel_messages_published_total",
    ),
    F(
        "channel_messages_confirmed",
        "counter",
        ("vhost",),
        "Publishes the broker confirmed with basic.ack (confirm mode).",
        "amqp091",
        _channel_count("confirmed"),
        "rabbitmq_channel_messages_confirmed_total",
    ),
    F(
        "channel_messages_publish_nacked",
        "counter",
        ("vhost",),
        "Publishes the broker refused with basic.nack (confirm mode).",
        "amqp091",
        _channel_count("confirm_nacked"),
    ),
    F(
        "channel_messages_unroutable_returned",
        "counter",
        ("vhost",),
        "Mandatory publishes the broker returned (basic.return).",
        "amqp091",
        _channel_count("returns"),
        "rabbitmq_channel_messages_unroutable_returned_total",
    ),
    F(
        "channel_messages_delivered",
        "counter",
        ("vhost",),
        "Messages delivered to consumers in automatic ack mode (basic.deliver, no-ack).",
        "amqp091",
        _channel_sum(lambda e: _consume_deliveries(e, True)),
        "rabbitmq_channel_messages_delivered_total",
    ),
    F(
        "channel_messages_delivered_ack",
        "counter",
        ("vhost",),
        "Messages delivered to consumers in manual acknowledgement mode (basic.deliver).",
        "amqp091",
        _channel_sum(lambda e: _consume_deliveries(e, False)),
        "rabbitmq_channel_messages_delivered_ack_total",
    ),
    F(
        "channel_messages_got",
        "counter",
        ("vhost",),
        "Messages fetched with basic.get (basic.get-ok), either acknowledgement mode.",
        "amqp091",
        _channel_sum(lambda e: e.get_ok),
    ),
    F(
        "channel_get_ack",
        "counter",
        ("vhost",),
        "Messages fetched with basic.get in manual acknowledgement mode (the get seen).",
        "amqp091",
        _channel_sum(lambda e: e.get_ok_ack),
        "rabbitmq_channel_get_ack_total",
    ),
    F(
        "channel_get",
        "counter",
        ("vhost",),
        "Messages fetched with basic.get in automatic acknowledgement mode (no-ack; the get seen).",
        "amqp091",
        _channel_sum(lambda e: e.get_ok_no_ack),
        "rabbitmq_channel_get_total",
    ),
    F(
        "channel_get_empty",
        "counter",
        ("vhost",),
        "basic.get answered basic.get-empty.",
        "amqp091",
        _channel_sum(lambda e: e.get_empty),
        "rabbitmq_channel_get_empty_total",
    ),
    F(
        "channel_messages_redelivered",
        "counter",
        ("vhost",),
        "Deliveries flagged redelivered.",
        "amqp091",
        _channel_count("redelivered"),
        "rabbitmq_channel_messages_redelivered_total",
    ),
    F(
        "channel_messages_acked",
        "counter",
        ("vhost",),
        "Deliveries the client acknowledged (basic.ack; a multiple ack counts each delivery).",
        "amqp091",
        _channel_count("acks"),
        "rabbitmq_channel_messages_acked_total",
    ),
    F(
        "channel_messages_nacked",
        "counter",
        ("vhost",),
        "Deliveries the client refused with basic.nack.",
        "amqp091",
        _channel_count("nacks"),
    ),
    F(
        "channel_messages_rejected",
        "counter",
        ("vhost",),
        "Deliveries the client refused with basic.reject.",
        "amqp091",
        _channel_count("rejects"),
    ),
    F(
        "channel_messages_unacked",
        "gauge",
        ("vhost",),
        "Deliveries awaiting the client's ack on open channels.",
        "amqp091",
        _channel_sum(lambda e: len(e.outstanding) if _open(e) else 0),
        "rabbitmq_channel_messages_unacked",
    ),
    F(
        "channel_messages_unconfirmed",
        "gauge",
        ("vhost",),
        "Publishes awaiting the broker's confirm on open channels.",
        "amqp091",
        _channel_sum(lambda e: len(e.unconfirmed) if _open(e) else 0),
        "rabbitmq_channel_messages_unconfirmed",
    ),
    F(
        "channel_messages_uncommitted",
        "gauge",
        ("vhost",),
        "Publishes in the open transaction of open transactional channels.",
        "amqp091",
        _channel_sum(lambda e: _uncommitted(e) if _open(e) else 0),
        "rabbitmq_channel_messages_uncommitted",
    ),
    F(
        "channel_acks_uncommitted",
        "gauge",
        ("vhost",),
        "Acks, nacks and rejects in the open transaction of open transactional channels.",
        "amqp091",
        _channel_sum(lambda e: _acks_uncommitted(e) if _open(e) else 0),
        "rabbitmq_channel_acks_uncommitted",
    ),
    F(
        "channel_prefetch",
        "gauge",
        ("vhost",),
        "Prefetch limits (basic.qos: the channel's, else its consumers') of open channels.",
        "amqp091",
        _channel_sum(lambda e: (e.channel_prefetch or e.consumer_prefetch) if _open(e) else 0),
        "rabbitmq_channel_prefetch",
    ),
    F(
        "channel_consumers",
        "gauge",
        ("vhost",),
        "Consumers (consume-ok, not cancelled) on open channels.",
        "amqp091",
        _channel_sum(
            lambda e: sum(c.cancelled is None for c in e.consumers.values()) if _open(e) else 0
        ),
        "rabbitmq_channel_consumers",
    ),
    F(
        "queue_consumers",
        "gauge",
        ("vhost", "queue"),
        "Consumers (not cancelled) on open channels, by the queue they consume.",
        "amqp091",
        _queue_consumers,
        "rabbitmq_queue_consumers",
    ),
    F(
        "queue_messages_delivered",
        "counter",
        ("vhost", "queue"),
        "Messages delivered to consumers (basic.deliver), by the consumer's queue.",
        "amqp091",
        _queue_delivered,
    ),
    F(
        "channels_closed",
        "counter",
        ("vhost", "by", "code"),
        "Channels closed with channel.close, by the closing side and reply-code (406: a"
        " precondition failed, 403: access refused...).",
        "amqp091",
        _channels_closed,
    ),
    F(
        "connection_blocked_seconds",
        "counter",
        ("vhost",),
        "Seconds connections spent blocked by the broker (connection.blocked to unblocked).",
        "amqp091",
        _blocked_seconds,
    ),
    # 1.0 links, by the client's role and its node's address
    F(
        "link_deliveries",
        "counter",
        ("role", "address"),
        "Deliveries begun on links (first transfers), by the client end's role.",
        "amqp10",
        _link_value(lambda link, now: link.deliveries),
    ),
    F(
        "link_presettled",
        "counter",
        ("role", "address"),
        "Deliveries sent settled (presettled).",
        "amqp10",
        _link_value(lambda link, now: link.presettled),
    ),
    F(
        "link_settled",
        "counter",
        ("role", "address", "outcome"),
        "Deliveries settled, by outcome (accepted, rejected, released, modified).",
        "amqp10",
        _outcomes,
    ),
    F(
        "link_unsettled",
        "gauge",
        ("role", "address"),
        "Deliveries unsettled on open links.",
        "amqp10",
        _link_value(lambda link, now: len(link.unsettled) if _link_open(link) else 0),
    ),
    F(
        "link_credit",
        "gauge",
        ("role", "address"),
        "Link-credit as the sender sees it, on open links.",
        "amqp10",
        _link_value(lambda link, now: (link.credit.credit or 0) if _link_open(link) else 0),
    ),
    F(
        "link_available",
        "gauge",
        ("role", "address"),
        "Messages the sender last said it had available, on open links.",
        "amqp10",
        _link_value(lambda link, now: (link.credit.available or 0) if _link_open(link) else 0),
    ),
    F(
        "link_starved_seconds",
        "counter",
        ("role", "address"),
        "Seconds links sat at zero credit while the sender had messages available (starved).",
        "amqp10",
        _link_value(_starved),
    ),
    F(
        "link_drains",
        "counter",
        ("role", "address"),
        "Drain requests (a receiver's flow with drain set).",
        "amqp10",
        _link_value(lambda link, now: link.credit.drains),
    ),
    F(
        "link_detaches",
        "counter",
        ("side", "condition"),
        "Link detaches, by the detaching side and error condition (none: no error).",
        "amqp10",
        _detaches,
    ),
    F(
        "session_ends",
        "counter",
        ("side", "condition"),
        "Session ends, by the ending side and error condition (none: no error).",
        "amqp10",
        _session_ends,
    ),
    # connections, both versions
    F(
        "connections_opened",
        "counter",
        ("protocol",),
        "Connections seen (their first frame).",
        "any",
        _opened,
        "rabbitmq_connections_opened_total",
    ),
    F(
        "connections_closed",
        "counter",
        ("protocol", "by", "condition"),
        "Connections ended: by which side, with the 0-9-1 reply-code or the 1.0 error"
        " condition (none: no error; transport: TCP ended first).",
        "any",
        _closed,
        "rabbitmq_connections_closed_total",
    ),
    F(
        "connection_frames",
        "counter",
        ("protocol", "direction"),
        "AMQP frames (the protocol headers too), by direction (c2s: client to server).",
        "capture",
        _capture("frames_by_direction"),
    ),
    F(
        "connection_bytes",
        "counter",
        ("protocol", "direction"),
        "Bytes of the AMQP frames (as on the wire, after TLS), by direction; a log's frames"
        " count none.",
        "capture",
        _capture("bytes_by_direction"),
    ),
    F(
        "connection_heartbeat_misses",
        "counter",
        ("protocol", "direction"),
        "Silences past the limit (0-9-1: two heartbeat intervals; 1.0: the peer's"
        " idle-time-out), by who was silent.",
        "any",
        _heartbeat_misses,
    ),
    F(
        "findings",
        "counter",
        ("code", "severity"),
        "Findings raised, by code and severity.",
        "capture",
        _capture("findings_by_code"),
    ),
    F(
        "diagnoses",
        "counter",
        ("code", "severity"),
        "Diagnoses (amqpscope diagnose's rules: a stalled consumer, a starved link...) of"
        " connections that ended, by code and severity.",
        "capture",
        _capture("diagnoses_by_code"),
    ),
    F(
        "diagnosis_seconds",
        "counter",
        ("code", "severity"),
        "Seconds the diagnosed conditions lasted (a stall, a starvation), by code and severity.",
        "capture",
        _capture("diagnosis_seconds_by_code"),
    ),
    F(
        "requests",
        "counter",
        ("node", "operation", "status"),
        "AMQP 1.0 management and CBS requests ($management, $cbs: put-token...) answered, by"
        " node, operation and the response's status-code.",
        "capture",
        _capture("requests_by_status"),
    ),
    F(
        "requests_unanswered",
        "counter",
        ("node", "operation"),
        "Management and CBS requests still unanswered when their connection ended.",
        "capture",
        _capture("requests_left"),
    ),
    # latencies, seconds
    F(
        "publish_confirm_seconds",
        "histogram",
        ("vhost",),
        "Publish to the broker's confirm (basic.ack or basic.nack), seconds.",
        "amqp091",
        _channel_latency("confirm_latency"),
    ),
    F(
        "consumer_ack_seconds",
        "histogram",
        ("vhost",),
        "Delivery to the client's settlement (ack, nack or reject): consumer time, seconds.",
        "amqp091",
        _channel_latency("ack_latency"),
    ),
    F(
        "link_settle_seconds",
        "histogram",
        ("role", "address"),
        "A delivery's first transfer to its settlement, seconds.",
        "amqp10",
        _link_latency,
    ),
    F(
        "queue_time_seconds",
        "histogram",
        ("queue",),
        "A message's publish to its delivery on any connection of the capture (time in"
        " the broker), seconds.",
        "capture",
        _capture("journey_latencies"),
    ),
    F(
        "request_seconds",
        "histogram",
        ("node", "operation"),
        "A management or CBS request to its response (by correlation-id), seconds.",
        "capture",
        _capture("no_latencies"),
    ),
    F(
        "rpc_seconds",
        "histogram",
        (),
        "A request's publish (reply-to, correlation-id) to its reply's delivery, seconds.",
        "capture",
        _capture("rpc_latencies"),
    ),
)

BY_NAME: Final = {family.name: family for family in FAMILIES}


def exported_names() -> set[str]:
    """Every sample name a scrape can hold (counters' `_total`, histograms' parts)."""
    names: set[str] = set()
    for family in FAMILIES:
        base = family.exported
        if family.kind == "counter":
            names.update((base + "_total", base + "_created"))
        elif family.kind == "histogram":
            names.update(base + part for part in ("_bucket", "_count", "_sum", "_created"))
        else:
            names.add(base)
    return names
