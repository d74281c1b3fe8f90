"""Diagnoses of one 0-9-1 connection, from its tracker's state and the evidence kept.

Each rule reads what the tracker kept (prefetch-limit periods, what was left unacked or
unconfirmed, closes, blocked periods, silences) and names the frames that prove it. The words
of a cause come from `causes`; a rule only fills in what the wire showed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from amqpscope.codec.amqp091.spec import REPLY_CODES
from amqpscope.diagnose import causes
from amqpscope.diagnose.evidence import Evidence, Placed, Seen
from amqpscope.diagnose.lost import caveat, lost_line
from amqpscope.diagnose.model import Diagnosis, make
from amqpscope.diagnose.redelivery import Redelivery
from amqpscope.findings import INFO, WARNING
from amqpscope.track.amqp091 import rules
from amqpscope.track.amqp091.channel import ChannelEpoch
from amqpscope.track.amqp091.connection import ConnectionTracker

C2S: Final = "c2s"
#: why an epoch ended, in words
ENDED: Final = {
    "closed": "its channel closed",
    "connection": "its connection closed",
    "transport": "the TCP connection ended",
    "capture": "the capture ended",
}
#: how many tags or sequence numbers a title or explanation lists
LISTED: Final = 5


def per_finding(
    conn: int, ev: Evidence, finding: str, code: str, title: str, advice: str
) -> list[Diagnosis]:
    """One diagnosis `code` for each `finding` the tracker placed on connection `conn`'s frames:
    `title` (its `{channel}` the frame's; a log that shows no channel leaves " on channel
    {channel}" out), then the finding's words and `advice`, the frame as evidence."""
    return [
        make(
            code,
            title.format(channel=placed.frame.channel)
            if placed.frame.channel is not None
            else title.replace(" on channel {channel}", ""),
            f"{placed.finding.message}. {advice}",
            conn=conn,
            channel=placed.frame.channel,
            start=placed.frame.ts,
            evidence=[placed.frame.number],
        )
        for placed in ev.found(conn, finding)
    ]


def _text_cause(name: str, text: Any) -> tuple[str, str] | None:
    """(cause, what to check) when the reply-text narrows the reply name down."""
    lowered = str(text or "").lower()
    for key, needle, cause, check in causes.TEXT_CAUSES:
        if key == name and needle in lowered:
            return cause, check
    return None


def reply_cause(code: Any, text: Any) -> tuple[str, str, str]:
    """(reply name, cause, what to check) of a reply code and text, from the tables."""
    name = REPLY_CODES.get(code, ("UNKNOWN", ""))[0] if isinstance(code, int) else "UNKNOWN"
    narrowed = _text_cause(name, text)
    if narrowed is not None:
        return name, *narrowed
    cause, check = causes.REPLY_CAUSES.get(
        name, ("an error the table does not explain", "the broker's log")
    )
    return name, cause, check


def requeued(ended: str | None, lost: bool, what: str) -> str:
    """What becomes of deliveries left unacked: the client still holds them when only the
    capture ended; else the broker requeues them, if the acks were not merely lost from view."""
    if ended == "capture":
        return f"the client still held {what}"
    core = f"the broker requeues {what} and delivers them again"
    return f"if they were not acked, {core}" if lost else core


def _side(direction: str) -> str:
    return "client" if direction == C2S else "broker"


def queue_of(epoch: ChannelEpoch) -> str | None:
    for consumer in epoch.consumers.values():
        if consumer.queue:
            return consumer.queue
    return epoch.last_queue or None


def _epochs(conn: ConnectionTracker) -> list[ChannelEpoch]:
    listed = list(conn.epochs)
    listed += [e for e in conn.channels.values() if not e.listed]
    return listed


def _end_of(conn: ConnectionTracker, ev: Evidence, epoch: ChannelEpoch) -> Seen | None:
    """The frame that ended an epoch with something outstanding: the TCP end, or the frame its
    unacked / unconfirmed finding rode on (the close-ok); None when the capture ended."""
    if epoch.ended == "transport":
        return ev.ends.get(conn.conn)
    mark = f"channel {epoch.number} "
    after = epoch.opened_frame or 0
    for code in ("amqp091.unacked-at-end", "amqp091.unconfirmed-at-end"):
        for placed in ev.found(conn.conn, code):
            if placed.frame.number > after and mark in placed.finding.message:
                return placed.frame
    return None


def stalled_consumers(conn: ConnectionTracker, ev: Evidence) -> list[Diagnosis]:
    out = []
    for epoch in _epochs(conn):
        for since, first, until, last, unacked, limit, settle in epoch.stalls:
            seconds = until - since
            if seconds < causes.STALL_SECONDS:
                continue
            ongoing = not last
            end = _end_of(conn, ev, epoch) if ongoing else None
            why = ENDED.get(epoch.ended or "", "the end")
            before = (
                f"the last ack before it was frame {settle}" if settle else "no ack came before"
            )
            queue = queue_of(epoch)
            # acks the capture lost while it lasted (an ongoing stall: up to the end)
            lost, holes = caveat(ev, conn.conn, "c2s", since, until if last else None)
            how = (
                f"It ended when the client acked (frame {last})."
                if last
                else f"It {'was not seen to end' if lost else 'never ended'}: no ack was"
                f" {'seen' if lost else 'sent'} before {why}"
                + (f" (frame {end.number})" if end else "")
                + f"; {requeued(epoch.ended, bool(lost), 'the unacked messages')}."
            )
            out.append(
                make(
                    "consumer.stalled",
                    f"Consumer on channel {epoch.number} stopped: {unacked} of {limit} prefetched"
                    f" messages unacked for {seconds:.1f} s",
                    f"The channel reached its prefetch limit of {limit} at frame {first}, so the"
                    f" broker stopped delivering"
                    + (f" from queue {queue!r}" if queue else "")
                    + f"; {before}. {how}{lost} Check the consumer's handler: a slow or stuck"
                    " callback, an exception that skipped the ack, or a thread that stopped.",
                    conn=conn.conn,
                    channel=epoch.number,
                    queue=queue,
                    start=since,
                    duration=seconds,
                    evidence=[settle, first, last or (end.number if end else 0), *holes],
                    ongoing=ongoing,
                )
            )
    return out


def consumer_events(conn: ConnectionTracker, ev: Evidence) -> list[Diagnosis]:
    out = []
    for placed in ev.found(conn.conn, "amqp091.consumer-cancelled"):
        channel = placed.frame.channel
        tag = str(placed.frame.fields.get("consumer-tag", ""))
        queue = None
        consume = 0
        for epoch in _epochs(conn):
            consumer = epoch.consumers.get(tag) if epoch.number == channel else None
            if consumer is not None:
                queue, consume = consumer.queue, consumer.frame or 0
        # the client's own queue.delete just before: the cancel is what it asked for. On the
        # consumer's channel any delete will do when the queue is unknown; on another channel
        # of the connection (amqp091-go deletes on one channel what it consumes on another)
        # only a delete naming the consumer's queue
        own = next(
            (
                seen
                for seen in reversed(placed.before)
                if seen.direction == C2S
                and seen.name == "queue.delete"
                and (not queue or seen.fields.get("queue") == queue)
            ),
            None,
        ) or next(
            (
                seen
                for seen in reversed(placed.around)
                if queue
                and seen.direction == C2S
                and seen.name == "queue.delete"
                and seen.fields.get("queue") == queue
            ),
            None,
        )
        diagnosis = make(
            "consumer.cancelled",
            f"The broker cancelled consumer {tag!r} on channel {channel}",
            "The broker sent basic.cancel: the queue"
            + (f" {queue!r}" if queue else "")
            + (
                f" was deleted by this client itself (queue.delete in frame {own.number}), with"
                " its consumer still active: expected, unless the client meant to go on"
                " consuming."
                if own is not None
                else " was deleted, or its node went down or failed over. The consumer gets"
                " nothing more until it consumes again; check who deleted the queue."
            ),
            conn=conn.conn,
            channel=channel,
            queue=queue,
            start=placed.frame.ts,
            evidence=[consume, own.number if own else 0, placed.frame.number],
        )
        if own is not None:
            diagnosis.severity = INFO
        out.append(diagnosis)
    for placed in ev.found(conn.conn, "amqp091.flow-stopped"):
        who = _side(placed.frame.direction)
        out.append(
            make(
                "consumer.flow-stopped",
                f"The {who} stopped content on channel {placed.frame.channel} (channel.flow)",
                f"The {who} sent channel.flow active=false: its peer must stop sending"
                " content on the channel until flow is on again.",
                conn=conn.conn,
                channel=placed.frame.channel,
                start=placed.frame.ts,
                evidence=[placed.frame.number],
            )
        )
    return out


def left_at_end(conn: ConnectionTracker, ev: Evidence) -> list[Diagnosis]:
    out = []
    for epoch in _epochs(conn):
        if not epoch.unacked and not epoch.left_unconfirmed:
            continue
        end = _end_of(conn, ev, epoch)
        end_ts = end.ts if end is not None else conn.last_ts
        why = ENDED.get(epoch.ended or "", "the end")
        evidence = [end.number] if end is not None else []
        if epoch.unacked:
            ages = [end_ts - delivered for _tag, delivered, _frame in epoch.left_unacked]
            tags = ", ".join(str(tag) for tag, _ts, _frame in epoch.left_unacked[:LISTED])
            returned, again = came_back(ev, conn.conn, [f for _t, _ts, f in epoch.left_unacked])
            more = " ..." if epoch.unacked > LISTED else ""
            oldest = max(ages) if ages else 0.0
            first_ts = min((ts for _tag, ts, _frame in epoch.left_unacked), default=end_ts)
            lost, holes = caveat(ev, conn.conn, "c2s", first_ts)
            never = _never(bool(lost), epoch.ended)
            back = requeued(epoch.ended, bool(lost), "them") + " (duplicates)"
            if epoch.ended == "capture":
                back = "they were still with the client"
            out.append(
                make(
                    "delivery.unacked-at-end",
                    f"{epoch.unacked} deliveries on channel {epoch.number} {never} acked when"
                    f" {why}" + (f" (oldest {oldest:.1f} s)" if ev.timed else ""),
                    f"Delivery tags {tags}{more} were {never} acked, nacked or rejected before"
                    f" {why}; {back}."
                    + (
                        " Their ages at the end: "
                        + ", ".join(f"{age:.1f} s" for age in ages[:LISTED])
                        + "."
                        if ev.timed
                        else ""
                    )
                    + f"{returned}{lost} Check that every delivery is acked, also on error"
                    " paths.",
                    conn=conn.conn,
                    channel=epoch.number,
                    queue=queue_of(epoch),
                    start=end_ts - oldest,
                    duration=oldest,
                    evidence=evidence + again + holes,
                    ongoing=epoch.ended == "capture",
                )
            )
        if epoch.left_unconfirmed:
            pending = epoch.left_unconfirmed
            count = len(epoch.unconfirmed)  # all of them; `left_unconfirmed` lists the oldest
            listed = ", ".join(f"seq {seq} ({key!r})" for seq, _ts, _n, key in pending[:LISTED])
            oldest = end_ts - pending[0][1]
            lost, holes = caveat(ev, conn.conn, "s2c", pending[0][1])
            out.append(
                make(
                    "publish.unconfirmed",
                    f"{count} publishes on channel {epoch.number}"
                    f" {_never(bool(lost), epoch.ended)} confirmed"
                    + (f" (oldest {oldest:.1f} s)" if ev.timed else ""),
                    f"In confirm mode the broker acks or nacks every publish; these got neither"
                    f" before {why}: {listed}{' ...' if count > LISTED else ''}.{lost} The"
                    " publisher cannot know whether they were stored: check for a blocked"
                    " connection, a full queue, or a publisher that stopped waiting.",
                    conn=conn.conn,
                    channel=epoch.number,
                    start=pending[0][1],
                    duration=oldest,
                    evidence=[number for _s, _t, number, _k in pending[:LISTED]] + evidence + holes,
                    ongoing=epoch.ended == "capture",
                )
            )
    return out


def no_ack_dropped(conn: ConnectionTracker, ev: Evidence) -> list[Diagnosis]:
    """Messages that vanish: deliveries to a no-ack consumer whose connection dropped. The
    broker counts each acked as it sends it and requeues none: what the client had not
    handled when it died is gone. The consume and the last deliveries as evidence."""
    out = []
    end = ev.ends.get(conn.conn)
    for epoch in _epochs(conn):
        if epoch.ended != "transport":
            continue
        for consumer in epoch.consumers.values():
            if not consumer.no_ack or not consumer.deliveries:
                continue
            recent = ev.recent.get(conn.conn, ())
            last = [
                seen
                for seen in recent
                if seen.name == "basic.deliver"
                and seen.channel == epoch.number
                and seen.fields.get("consumer-tag") == consumer.tag
            ][-LISTED:]
            since = (
                f" (the last {len(last)} in frames {last[0].number} to {last[-1].number}"
                + (
                    f", {end.ts - last[-1].ts:.3f} s before the end"
                    if end is not None and ev.timed
                    else ""
                )
                + ")"
                if len(last) > 1
                else ""
            )
            how = f" ({end.fields.get('event')} by {end.fields.get('by')})" if end else ""
            out.append(
                make(
                    "delivery.no-ack-dropped",
                    f"{consumer.deliveries} messages delivered with no-ack to consumer"
                    f" {consumer.tag!r} on channel {epoch.number} before its connection dropped",
                    f"The consumer asked for no-ack (auto-ack) in frame {consumer.frame}: the"
                    " broker counts each message acknowledged as it sends it and requeues none"
                    f" when the connection ends. It sent {consumer.deliveries}{since}; then the"
                    f" TCP connection ended with the channel open{how}: any the client had not"
                    " handled are lost. Consume with manual acks (ack after handling) for"
                    " messages that must not be lost.",
                    conn=conn.conn,
                    channel=epoch.number,
                    queue=consumer.queue,
                    start=end.ts if end is not None else None,
                    evidence=[consumer.frame or 0]
                    + [seen.number for seen in last]
                    + ([end.number] if end is not None else []),
                )
            )
    return out


def _never(lost: bool, ended: str | None) -> str:
    """How a settlement missing at the end is put: not in the capture's lost bytes ("not
    seen"), or cut off by the capture's end ("not yet"), or "never" (the channel ended)."""
    return "not seen" if lost else "not yet" if ended == "capture" else "never"


def linked(links: list[Redelivery], conn: int) -> tuple[str, list[int]]:
    """What a redelivery diagnosis says of each redelivery's earlier delivery, and both frames
    as evidence."""
    said = []
    for link in links[:LISTED]:
        if not link.earlier:
            said.append(f"frame {link.frame}: its earlier delivery is not in the capture")
            continue
        where = f", connection {link.earlier_conn}" if link.earlier_conn != conn else ""
        said.append(
            f"frame {link.frame} delivers again the message of frame {link.earlier}"
            f" ({causes.MATCHED.get(link.how, link.how)}{where})"
        )
    more = f"; {len(links) - LISTED} more" if len(links) > LISTED else ""
    words = (" " + "; ".join(said)[:1].upper() + "; ".join(said)[1:] + more + ".") if said else ""
    return words, [n for link in links for n in (link.earlier, link.frame)]


def came_back(ev: Evidence, conn: int, frames: list[int]) -> tuple[str, list[int]]:
    """Where deliveries left unsettled (their first frames, on connection `conn`) were
    delivered again later in the capture, in words, and each pair of frames as evidence."""
    wanted = set(frames)
    back = sorted(
        (link for pairs in ev.relinked.values() for link, _seen in pairs) if wanted else (),
        key=lambda link: link.frame,
    )
    back = [link for link in back if link.earlier in wanted and link.earlier_conn == conn]
    if not back:
        return "", []
    said = "; ".join(
        f"frame {link.frame}"
        + (f" (connection {link.conn})" if link.conn != conn else "")
        + f" delivers again the message of frame {link.earlier}"
        for link in back[:LISTED]
    )
    more = f"; {len(back) - LISTED} more" if len(back) > LISTED else ""
    return f" They came back as duplicates: {said}{more}.", [
        n for link in back for n in (link.earlier, link.frame)
    ]


def redelivered(
    conn: int, count: int, pairs: list[tuple[Redelivery, Seen]], flagged: list[Seen], why: str
) -> Diagnosis:
    """The one `delivery.redelivered` of a connection: `count` redeliveries, each one linked
    (`pairs`: the link and the frame that completed it) citing its earlier delivery's frame
    and its own; `flagged`, the marked ones, cited too."""
    words, frames = linked([link for link, _seen in pairs], conn)
    seen = min([s for _link, s in pairs] + flagged, key=lambda s: s.number, default=None)
    return make(
        "delivery.redelivered",
        f"{count} deliveries were redelivered",
        f"{why} Expect duplicates; handlers should be idempotent.{words}",
        conn=conn,
        channel=seen.channel if seen else None,
        queue=pairs[0][0].queue if pairs else None,
        start=seen.ts if seen else None,
        evidence=frames + [s.number for s in flagged],
    )


def redeliveries(conn: ConnectionTracker, ev: Evidence) -> list[Diagnosis]:
    marked = sum(epoch.redelivered for epoch in _epochs(conn))
    unmarked = ev.unmarked.get(conn.conn, 0)
    if not marked and not unmarked:
        return []
    why = (
        "The broker marked these deliveries redelivered: an earlier delivery of the same"
        " message was not acked (a consumer closed, died or requeued it)."
        if marked
        else ""
    )
    if unmarked:
        product = conn.server_product or {}
        broker = " ".join(str(product[k]) for k in ("product", "version") if product.get(k))
        who = f"the broker ({broker})" if broker else "the broker"
        why += (
            f"{' ' if why else ''}{unmarked} came again after the client requeued them"
            f" (basic.nack or basic.reject with requeue), and {who} did not set their"
            " redelivered flag: a consumer that checks the flag takes them for first"
            " deliveries. Each is linked to its first delivery by message identity."
        )
    links = ev.relinked.get(conn.conn, [])
    diagnosis = redelivered(
        conn.conn, marked + unmarked, links, ev.redelivered.get(conn.conn, []), why
    )
    if unmarked:
        diagnosis.title += f" ({unmarked} without the redelivered flag)"
    return [diagnosis]


def _named(placed: Placed | None, method: Any, channel: int | None) -> Seen | None:
    """The last client frame before a close that is the method the close names."""
    if placed is None or not method:
        return None
    for seen in reversed(placed.before):
        if seen.direction == C2S and seen.name == method and seen.channel == channel:
            return seen
    return None


#: what a re-declare must repeat of the first declare of its name (besides its arguments)
_DECLARED: Final = ("type", "durable", "exclusive", "auto-delete", "internal")


def _earlier_declare(placed: Placed | None, named: Seen) -> tuple[Seen, str] | None:
    """The connection's earlier declare of the name a 406 inequivalent-arg close refused, and
    what the two differ in ("x-max-length 10 there, 20 here"): both are the client's own calls
    (amqplib's assertQueue twice with other arguments, captures/091-amqplib-redeclare)."""
    if placed is None:
        return None
    key = "queue" if named.name == "queue.declare" else "exchange"
    for seen in reversed(placed.around):
        same = seen.name == named.name and seen.fields.get(key) == named.fields.get(key)
        if seen.number >= named.number or seen.direction != C2S or not same:
            continue
        if seen.fields.get("passive"):
            continue  # a passive declare says nothing of the arguments
        there, here = seen.fields.get("arguments") or {}, named.fields.get("arguments") or {}
        pairs = [(k, seen.fields.get(k), named.fields.get(k)) for k in _DECLARED]
        if isinstance(there, dict) and isinstance(here, dict):
            pairs += [(k, there.get(k), here.get(k)) for k in sorted(set(there) | set(here))]
        differ = [
            f"{k} {'none' if a is None else a} there, {'none' if b is None else b} here"
            for k, a, b in pairs
            if a != b
        ]
        return seen, "; ".join(differ)
    return None


def _unknown_tag(conn: ConnectionTracker, epoch: ChannelEpoch, tag: int, at: int) -> str:
    """Why the tag of the settle in frame `at` was unknown, from what the connection's channels
    had delivered: this channel already (a double ack), this channel number's earlier use (an
    ack after a reopen: tags start at 1 again), another channel open at the time (the wrong
    channel), or none (never delivered)."""
    if tag and tag <= epoch.outstanding.highest:
        return "a double ack: the tag was delivered on this channel and already settled"
    epochs = _epochs(conn)
    for other in epochs:
        reopened = other.number == epoch.number and other.epoch < epoch.epoch
        if reopened and tag <= other.outstanding.highest:
            return (
                f"an ack after the channel was reopened: tag {tag} belonged to the"
                f" channel's use {other.epoch}, and tags start again at 1 on every open"
            )
    for other in epochs:
        if other.number == epoch.number or tag > other.outstanding.highest:
            continue
        opened = other.opened_frame or 0
        closed = (other.close or {}).get("frame") or 0
        if opened < at and (not closed or closed > at):
            return f"an ack on the wrong channel: tag {tag} was delivered on channel {other.number}"
    return "a tag this channel never delivered"


def closes(conn: ConnectionTracker, ev: Evidence) -> list[Diagnosis]:
    out = []
    targets: list[tuple[str, ChannelEpoch | None, dict[str, Any]]] = [
        ("close.channel", epoch, epoch.close) for epoch in _epochs(conn) if epoch.close
    ]
    if conn.close:
        targets.append(("close.connection", None, conn.close))
    for code, epoch, close in targets:
        reply = close.get("reply-code")
        if reply in (0, 200, None):
            continue
        placed = ev.on_frame(conn.conn, close.get("frame"))
        channel = epoch.number if epoch is not None else 0
        name, cause, check = reply_cause(reply, close.get("reply-text"))
        method = close.get("class-method")
        named = _named(placed, method, channel)
        checked = passive_cause(named, reply)
        if checked is not None:
            cause, check = checked
        evidence = [named.number if named else 0, close.get("frame") or 0]
        reaction = False  # a close sent after the other side ended TCP: its reply to that
        # the queue the failed method named (a 404's missing queue), else the channel's
        named_queue = str(named.fields["queue"]) if named and named.fields.get("queue") else None
        detail = ""
        if epoch is not None and close.get("cause-frame"):
            evidence.insert(0, close["cause-frame"])
            _frame, settle, tag = epoch.suspect or (0, "basic.ack", 0)
            detail = (
                f" The {settle} of delivery tag {tag} in frame {close['cause-frame']} named it:"
                f" {_unknown_tag(conn, epoch, tag, close['cause-frame'])}."
            )
        elif named is not None:
            detail = f" The {method} it refers to is frame {named.number}."
            earlier = (
                _earlier_declare(placed, named)
                if reply == 406 and "inequivalent arg" in str(close.get("reply-text"))
                else None
            )
            if earlier is not None:
                # named in words only: the evidence stays the refused declare and the close
                first, differ = earlier
                detail += (
                    f" This connection declared the same name in frame {first.number}"
                    + (f" ({differ})" if differ else "")
                    + ": the client's two declares disagree."
                )
        elif epoch is not None and causes.CONSUMER_TIMEOUT in str(close.get("reply-text")):
            oldest = min(epoch.left_unacked, key=lambda left: left[1], default=None)
            if oldest is not None and placed is not None:
                tag, delivered, frame = oldest
                evidence.insert(0, frame)
                detail = f" The oldest delivery unacked then, tag {tag} in frame {frame}, was" + (
                    f" {placed.frame.ts - delivered:.1f} s old." if ev.timed else " held."
                )
        login = ev.found(conn.conn, "amqp091.login-refused")
        if epoch is None and login:
            code = "auth.refused"
            start_ok = [s.number for s in login[0].before if s.name == "connection.start-ok"]
            evidence = start_ok[-1:] + evidence
            title = f"The broker refused the login of user {conn.user!r}: {reply} {name}"
            # a code of its own per broker (garagemq: 530 NOT_ALLOWED): the reply table would
            # explain that code's other uses (a vhost, a channel-max), not a login
            cause, check = _text_cause(name, close.get("reply-text")) or causes.LOGIN_CAUSE
            chosen = conn.unoffered_mechanism()
            if chosen is not None:  # the mechanism, not the credentials: the client's choice
                offered = str(conn.mechanisms)
                cause = causes.MECHANISM_CAUSE[0].format(chosen=chosen, offered=offered)
                check = causes.MECHANISM_CAUSE[1]
                title += f" (mechanism {chosen} not offered)"
                starts = [s.number for s in login[0].before if s.name == "connection.start"]
                evidence = starts[-1:] + evidence
        elif epoch is not None:
            title = f"Channel {epoch.number} closed by the {close.get('by')}: {reply} {name}" + (
                f" on {method}" if method else ""
            )
            if checked is not None:
                title += " (passive)"
        elif conn.close_in_flight is not None:
            # the broker's own breach (garagemq: 501 on the content of a publish whose channel
            # it had just closed): the client's frame was no malformed one
            in_channel, sent, closed = conn.close_in_flight
            title = (
                f"Connection closed by the {close.get('by')}: {reply} {name} on a frame in flight"
            )
            what = (
                f"which the client sent on channel {in_channel} after the broker's own"
                f" channel.close (frame {closed}) and before its close-ok: a frame in flight"
                if sent > closed
                # py-amqp writes a publish's method, header and body at once: the header was on
                # its way when the broker refused the method
                else f"the content of the basic.publish on channel {in_channel} that the"
                f" broker's own channel.close (frame {closed}) refused, on its way before the"
                " close: a frame in flight when the broker closed the channel"
            )
            cause = (
                f"the broker closed the connection on frame {sent}, {what}, which a peer that"
                " sent channel.close must discard (AMQP 0-9-1, channel.close). The broker's"
                " error, not the client's"
            )
            check = (
                f"the channel's close in frame {closed} (the error to fix) and the broker's"
                " handling of frames in flight"
            )
            evidence = [closed, sent, *evidence[1:]]
        else:
            title = f"Connection closed by the {close.get('by')}: {reply} {name}"
            hung_up = _hung_up_before(ev, conn, close, placed)
            reaction = hung_up is not None
            if hung_up is not None:  # aiormq's 500 after garagemq's FIN: its reaction
                title = (
                    f"Connection closed by the {close.get('by')} after the"
                    f" {hung_up.fields.get('by')} hung up: {reply} {name}"
                )
                cause = (
                    f"the {hung_up.fields.get('by')} had already ended the TCP connection"
                    f" ({hung_up.fields.get('event')}, frame {hung_up.number}); this close is"
                    f" the {close.get('by')}'s reply to the connection it lost, not a cause of"
                    " its own"
                )
                check = "why the TCP connection was ended (liveness.dropped)"
                evidence = sorted({hung_up.number, *evidence})
        diagnosis = make(
            code,
            title,
            f"{close.get('reply-text')!s}. Likely cause: {cause}.{detail} Check {check}.",
            conn=conn.conn,
            channel=channel or None,
            queue=named_queue or (queue_of(epoch) if epoch is not None else None),
            start=placed.frame.ts if placed else None,
            evidence=evidence,
        )
        if checked is not None:
            diagnosis.severity = WARNING  # the channel is gone, but the client asked for this
        if reaction:
            diagnosis.severity = INFO  # a consequence: liveness.dropped has the cause
        out.append(diagnosis)
    return out


def _hung_up_before(
    ev: Evidence, conn: ConnectionTracker, close: dict[str, Any], placed: Placed | None
) -> Seen | None:
    """The other side's TCP end (FIN or RST) that came before this connection.close: the close
    answers a connection already lost (aiormq sends connection.close 500 'reader unexpected
    closed' after the broker's FIN); None when the close came first or from the side that
    ended TCP."""
    end = ev.ends.get(conn.conn)
    if end is None or placed is None or end.ts > placed.frame.ts:
        return None
    return end if end.fields.get("by") not in (None, close.get("by")) else None


def passive_cause(named: Seen | None, reply: Any) -> tuple[str, str] | None:
    """(cause, what to check) of a close answering a passive declare, the client's check whether
    a queue or exchange exists (`causes.PASSIVE_CAUSES`); None for any other close."""
    if named is None or named.fields.get("passive") is not True or not isinstance(reply, int):
        return None
    words = causes.PASSIVE_CAUSES.get(reply)
    if words is None:
        return None
    cause, check = words
    return cause.format(what=named.name.partition(".")[0]), check


def unanswered(conn: ConnectionTracker, ev: Evidence) -> list[Diagnosis]:
    """Synchronous methods the broker never answered (no -ok, no close) while the client waited
    `causes.UNANSWERED_SECONDS` or more: the request and what ended the wait as evidence."""
    out = []
    product = conn.server_product or {}
    broker = " ".join(str(product[k]) for k in ("product", "version") if product.get(k))
    who = f"the broker ({broker})" if broker else "the broker"
    for epoch in _epochs(conn):
        ended = _wait_ended(conn, ev, epoch)
        for method, number, sent, waited in epoch.unanswered:
            if waited < causes.UNANSWERED_SECONDS:
                continue
            hint = causes.UNANSWERED_CAUSES.get(method, causes.UNANSWERED_CAUSES[""])
            answers = " or ".join(sorted(rules.REPLIES.get(method, ()))) or "answer"
            never = "has not answered" if epoch.ended == "capture" else "never answered"
            out.append(
                make(
                    "method.unanswered",
                    f"{who[:1].upper()}{who[1:]} {never} {method} (frame {number}) on channel"
                    f" {epoch.number}: {hint}",
                    f"The client sent {method} in frame {number} and waited {waited:.1f} s for"
                    f" {answers}; {who} neither answered nor closed the channel."
                    + (f" {ended[1]} (frame {ended[0]})." if ended else "")
                    + f" A synchronous method is answered, or refused by closing the channel:"
                    f" {hint}. Check whether the broker supports {method}, and its log.",
                    conn=conn.conn,
                    channel=epoch.number,
                    start=sent,
                    duration=waited,
                    evidence=[number, ended[0] if ended else 0],
                    ongoing=epoch.ended == "capture",
                )
            )
    return out


def _wait_ended(
    conn: ConnectionTracker, ev: Evidence, epoch: ChannelEpoch
) -> tuple[int, str] | None:
    """What ended a channel's wait for an answer, in words, and its frame: the client's channel
    or connection close (it gave up waiting), or the TCP end; None when the capture ended."""
    for close, what in ((epoch.close, "channel"), (conn.close, "connection")):
        if close is not None and close.get("by") == "client" and close.get("frame"):
            return int(close["frame"]), f"Then the client closed the {what}: it gave up waiting"
    end = ev.ends.get(conn.conn)
    if epoch.ended == "transport" and end is not None:
        return end.number, f"Then the TCP connection ended ({end.fields.get('event')})"
    return None


def _listed(entries: list[tuple[int, str]], total: int) -> str:
    """'seq 3 ('key'), seq 4 ('key') ...' of (seq, routing key) pairs."""
    more = " ..." if total > min(len(entries), LISTED) else ""
    return ", ".join(f"seq {seq} ({key!r})" for seq, key in entries[:LISTED]) + more


def nacked(conn: ConnectionTracker, epoch: ChannelEpoch) -> list[Diagnosis]:
    """The publishes the broker nacked on a channel: each publish and its nack as evidence."""
    if not epoch.confirm_nacked:
        return []
    entries = epoch.nacked
    listed = _listed([(e[0], e[5]) for e in entries], epoch.confirm_nacked)
    what = "publishes from before the capture"
    return [
        make(
            "publish.nacked",
            f"The broker nacked {epoch.confirm_nacked} publishes on channel {epoch.number}",
            f"The broker answered these publishes with basic.nack: {listed or what}. A nack"
            " means it could not take responsibility for the message: a"
            " queue's overflow policy reject-publish (x-max-length or x-max-length-bytes"
            " reached), or an internal error. Check the queue's length limits and the broker"
            " log; the publisher must publish the message again or give it up.",
            conn=conn.conn,
            channel=epoch.number,
            start=entries[0][4] if entries else None,
            evidence=[n for e in entries for n in (e[2], e[3])],
        )
    ]


def slow_confirms(conn: ConnectionTracker, epoch: ChannelEpoch) -> list[Diagnosis]:
    """Confirms far slower than the channel's median (`causes.CONFIRM_SLOW_*`)."""
    latency = epoch.confirm_latency.to_json()
    if not latency or not epoch.slow_confirms:
        return []
    median = float(latency["p50"]) / 1000.0
    threshold = max(causes.CONFIRM_SLOW_SECONDS, causes.CONFIRM_SLOW_FACTOR * median)
    slow = sorted((e for e in epoch.slow_confirms if e[0] >= threshold), key=lambda e: e[1])
    if not slow:
        return []
    worst = max(slow)
    listed = ", ".join(
        f"seq {seq} ({key!r}) {seconds:.3f} s (frames {published}, {confirmed})"
        for seconds, seq, _ts, published, confirmed, key in slow[:LISTED]
    )
    return [
        make(
            "publish.confirm-slow",
            f"{len(slow)} publisher confirms on channel {epoch.number} took up to"
            f" {worst[0]:.1f} s (median {median * 1000:.1f} ms)",
            f"Of {latency['count']} confirms on the channel these took at least"
            f" {causes.CONFIRM_SLOW_FACTOR:g} times the median latency and"
            f" {causes.CONFIRM_SLOW_SECONDS:g} s or more: {listed}. A publisher waiting for"
            " its confirms stalls that long: the broker was slow to take the message (a"
            " resource alarm, a queue writing to disk, a quorum queue waiting for its"
            " replicas, or a busy node). Check the broker's alarms and the queue's type and"
            " length at that time.",
            conn=conn.conn,
            channel=epoch.number,
            start=worst[2],
            duration=worst[0],
            evidence=[n for e in slow[:LISTED] for n in (e[3], e[4])],
        )
    ]


def publishers(conn: ConnectionTracker, ev: Evidence) -> list[Diagnosis]:
    out = []
    for epoch in _epochs(conn):
        out += nacked(conn, epoch)
        out += slow_confirms(conn, epoch)
    for epoch in _epochs(conn):
        for entry in epoch.returned:
            returned = ev.on_frame(conn.conn, entry.get("frame"))
            name, cause, check = reply_cause(entry.get("reply-code"), entry.get("reply-text"))
            out.append(
                make(
                    "publish.returned",
                    f"A publish to exchange {entry['exchange']!r} with routing key"
                    f" {entry['routing-key']!r} came back: {entry['reply-code']} {name}",
                    f"The broker returned a mandatory publish (basic.return): {cause}. Check"
                    f" {check}.",
                    conn=conn.conn,
                    channel=epoch.number,
                    start=returned.frame.ts if returned else None,
                    evidence=[entry.get("publish-frame") or 0, entry.get("frame") or 0],
                )
            )
    blocked = ev.found(conn.conn, "amqp091.blocked")
    for period, placed in zip(conn.blocked, blocked, strict=False):
        seconds = float(period.get("seconds") or 0.0)
        unblocked = period.get("unblocked-frame")
        out.append(
            make(
                "publish.blocked",
                f"Publishing blocked by the broker for {seconds:.1f} s: {period.get('reason')}",
                "The broker sent connection.blocked: a resource alarm (memory or disk) stops"
                " every publishing connection; its publishes wait in TCP buffers."
                + (
                    f" connection.unblocked came in frame {unblocked}."
                    if unblocked
                    else " It was still blocked at the end."
                )
                + " Check the broker's memory and disk alarms and the queues that fill up.",
                conn=conn.conn,
                start=placed.frame.ts,
                duration=seconds,
                evidence=[period.get("frame") or 0, unblocked or 0],
                ongoing=not unblocked,
            )
        )
    return out


def liveness(conn: ConnectionTracker, ev: Evidence) -> list[Diagnosis]:
    out = []
    interval = conn.heartbeat
    end = ev.ends.get(conn.conn)
    # silences that ended with a frame (the tracker's findings), the longest per direction
    longest: dict[str, tuple[float, Placed]] = {}
    for placed in ev.found(conn.conn, "amqp091.heartbeat-missed"):
        previous = placed.previous
        if previous is None:
            continue
        gap = placed.frame.ts - previous.ts
        direction = placed.frame.direction
        if direction not in longest or gap > longest[direction][0]:
            longest[direction] = (gap, placed)
    silences = [(gap, p.frame.direction, p.previous, p.frame, False) for gap, p in longest.values()]
    # a side that fell silent for good: from its last frame to the TCP end
    if interval and end is not None:
        for direction in (C2S, "s2c"):
            last = ev.last_sent.get((conn.conn, direction))
            if last is None or direction in longest:
                continue
            gap = end.ts - last.ts
            if gap > causes.HEARTBEAT_INTERVALS * interval:
                silences.append((gap, direction, last, end, True))
    for gap, direction, last, after, for_good in silences:
        who = _side(direction)
        check = (
            "Check for a paused or overloaded process (GC, a blocked event loop, SIGSTOP) or a"
            " network stall."
        )
        product = str((conn.client_product or {}).get("product")) if direction == C2S else ""
        if product in causes.HEARTBEAT_ON_DEMAND:  # the client's library waits to be asked
            check = (
                f"Check how often the application lets {product} send:"
                f" {causes.HEARTBEAT_ON_DEMAND[product]}; else a paused process or a network"
                " stall."
            )
        out.append(
            make(
                "liveness.heartbeat-missed",
                f"The {who} sent nothing for {gap:.1f} s against a heartbeat of {interval} s",
                f"After frame {last.number if last else '?'} the {who} was silent for"
                f" {gap:.1f} s, {gap / interval:.1f} heartbeat intervals"
                + (
                    f"; the connection then ended ({(end.fields.get('event') if end else '')}"
                    f" by {end.fields.get('by') if end else '?'})."
                    if for_good
                    else "."
                )
                + f" Its peer may declare the connection dead after {causes.HEARTBEAT_INTERVALS}"
                f" intervals. {check}",
                conn=conn.conn,
                start=last.ts if last else None,
                duration=gap,
                evidence=[last.number if last else 0, after.number],
            )
        )
    if conn.dropped and end is not None:
        what = end.fields
        left = sum(e.unacked for e in _epochs(conn) if e.ended == "transport")
        pending = sum(len(e.left_unconfirmed) for e in _epochs(conn) if e.ended == "transport")
        flight = f"{left} deliveries unacked, {pending} publishes unconfirmed"
        recent = ev.recent.get(conn.conn)
        # the last frame before the end (a side may still send after the other's FIN)
        before = next((f.number for f in reversed(recent or ()) if f.ts <= end.ts), 0)
        ender = C2S if what.get("by") == "client" else "s2c"
        # the other side's silence that was going on when the TCP end came (it may have spoken
        # again later, not knowing: a client that wakes and publishes after the broker's FIN)
        silent = [
            (end.ts - last.ts, direction)
            for _gap, direction, last, after, for_good in silences
            if direction != ender
            and last is not None
            and last.ts < end.ts <= (end.ts if for_good else after.ts)
            and end.ts - last.ts > causes.HEARTBEAT_INTERVALS * (interval or 0)
        ]
        held = _held_to_proposal(conn, end, recent) if ender != C2S and not silent else None
        why = (
            f" It came after the {_side(silent[0][1])}'s silence of {silent[0][0]:.1f} s: its"
            " peer gave up on it (missed heartbeats)."
            if silent
            else held[0]
            if held is not None
            else causes.DROPPED_BY.get(
                str(what.get("by")),
                " A killed or crashed client, a broker dropping a connection it thought dead,"
                " or a network device closing it; check the client's process and the broker's"
                " log.",
            )
        )
        out.append(
            make(
                "liveness.dropped",
                f"TCP ended ({what.get('event')} by {what.get('by')}) with the connection open",
                f"No connection.close was sent: the {what.get('by')} ended the TCP connection"
                f" ({what.get('event')}) first, with {flight} in flight." + why,
                conn=conn.conn,
                start=end.ts,
                evidence=sorted({before, end.number, *([held[1]] if held else [])}),
            )
        )
    return out


def _held_to_proposal(conn: ConnectionTracker, end: Seen, recent: Any) -> tuple[str, int] | None:
    """Why the broker dropped a client that kept the negotiated heartbeat but not the broker's
    own: the client's tune-ok chose more than connection.tune proposed, and the client was
    silent for over HEARTBEAT_INTERVALS of the proposal (not of what was negotiated): the words
    and the client's last frame; None otherwise. Why: aiormq answers tune with its own 60 s
    whatever the broker proposed, and garagemq keeps to the 10 s it proposed
    (091-aiormq-idle-gmq)."""
    proposed = (conn.proposed or {}).get("heartbeat")
    chosen = conn.heartbeat
    if not isinstance(proposed, int) or not 0 < proposed < chosen or not recent:
        return None
    last = next((f for f in reversed(recent) if f.direction == C2S and f.ts <= end.ts), None)
    if last is None:
        return None
    gap = end.ts - last.ts
    intervals = causes.HEARTBEAT_INTERVALS
    if not intervals * proposed < gap <= intervals * chosen:
        return None
    return (
        f" It came after the client's silence of {gap:.1f} s (from frame {last.number}):"
        f" {gap / proposed:.1f} of the {proposed} s heartbeat the broker proposed in"
        f" connection.tune, though the client's tune-ok chose {chosen} s, within which the"
        " client was not late: what a broker holding to its own proposal does. Clients"
        " conventionally take the lesser of the two; set the client's heartbeat at or below the"
        " broker's."
    ), last.number


def _in_a_hole(conn: ConnectionTracker, frame: Seen) -> bool:
    """An ack of a tag not seen delivered, read while the server was sending bytes the capture
    lost (known only at its next frame): the delivery was most likely in them, unless the
    broker closed the channel for it (its close names the ack)."""
    ts = frame.ts
    if not any(start <= ts <= end for start, end in conn.s2c_holes):
        return False
    return not any(
        e.close is not None and e.close.get("cause-frame") == frame.number for e in _epochs(conn)
    )


def violations(conn: ConnectionTracker, ev: Evidence) -> list[Diagnosis]:
    out = []
    for code, (rule, section) in causes.VIOLATIONS.items():
        if not code.startswith("amqp091."):
            continue
        for placed in ev.found(conn.conn, code):
            if code == "amqp091.unknown-delivery-tag" and _in_a_hole(conn, placed.frame):
                continue
            who = _side(placed.frame.direction)
            doubt, lost = lost_line(ev, conn.conn, placed.frame.number)
            diagnosis = make(
                "spec.violation",
                f"The {who} broke a rule: {placed.frame.name} on channel"
                f" {placed.frame.channel}" + (", or the log lost a frame" if doubt else ""),
                f"{placed.finding.message}. Rule: {rule} ({section}). The {who} sent the"
                + (" frame." + doubt if doubt else " frame, so the bug is on its side."),
                conn=conn.conn,
                channel=placed.frame.channel or None,
                start=placed.frame.ts,
                evidence=sorted({*lost, placed.frame.number}),
            )
            if doubt:
                diagnosis.severity = INFO
            out.append(diagnosis)
    return out


RULES: Final[tuple[Callable[[ConnectionTracker, Evidence], list[Diagnosis]], ...]] = (
    stalled_consumers,
    consumer_events,
    left_at_end,
    no_ack_dropped,
    redeliveries,
    closes,
    unanswered,
    publishers,
    liveness,
    violations,
)
