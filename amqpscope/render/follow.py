"""`amqpscope follow`'s text: each journey as one line per hop (plain text, pasteable)."""

from __future__ import annotations

from typing import Any

from amqpscope.journeys.follow import Hop, Journey

#: characters of a body a heading shows
BODY_SHOWN = 60


def _quoted(value: Any) -> str:
    return '""' if value == "" else str(value)


def _what(hop: Hop) -> str:
    """What the hop's frame said, in a few words."""
    d = hop.details
    if hop.event == "published":
        return f"exchange {_quoted(d.get('exchange'))} routing key {_quoted(d.get('routing-key'))}"
    if hop.event in ("delivered", "redelivered"):
        words = [f"queue {d.get('queue') or '(unknown)'}"]
        if d.get("consumer-tag"):
            words.append(f"consumer {d['consumer-tag']}")
        words.append(f"delivery-tag {d.get('delivery-tag')}")
        if d.get("no-ack"):
            words.append("no-ack")
        if d.get("earlier-frame"):
            words.append(f"(again after #{d['earlier-frame']}, by {d.get('linked-by')})")
        elif d.get("linked-by"):
            words.append(f"(matched by {d['linked-by']})")
        return " ".join(words)
    if hop.event in ("nacked", "rejected"):
        return "requeue" if d.get("requeue") else "no requeue"
    if hop.event == "returned":
        return f"{d.get('reply-code')} {d.get('reply-text') or ''}".strip()
    if hop.event == "transfer":
        arrow = "client → peer" if d.get("dir") == "c2s" else "peer → client"
        words = [arrow, f"link {d.get('link')} ({d.get('address') or 'no address'})"]
        words.append(f"delivery-id {d.get('delivery-id')}")
        if d.get("settled"):
            words.append("settled")
        if d.get("earlier-frame"):
            words.append(f"(again after #{d['earlier-frame']}: {d.get('why')})")
        elif d.get("linked-by"):
            words.append(f"(matched by {d['linked-by']})")
        return " ".join(words)
    if hop.event == "disposition":
        words = [str(d.get("state") or "no outcome"), f"by the {d.get('role')}"]
        return " ".join(words + (["settled"] if d.get("settled") else []))
    if hop.event == "unacked-at-close":
        return f"channel closed by the {d.get('closed-by')}"
    if d.get("multiple"):
        return f"delivery-tag {d.get('delivery-tag')} multiple"
    return ""


def heading(journey: Journey) -> str:
    words = [f"message {journey.number}:"]
    if journey.message_id is not None:
        words.append(f"message-id {journey.message_id}")
    if journey.correlation_id is not None:
        words.append(f"correlation-id {journey.correlation_id}")
    if journey.body is not None:
        body = journey.body if len(journey.body) <= BODY_SHOWN else journey.body[:BODY_SHOWN] + "…"
        words.append(f"body {body!r}")
    if journey.body_size is not None:
        words.append(f"({journey.body_size} bytes)")
    return " ".join(words)


def journey_lines(journey: Journey, first_ts: float | None, names: dict[int, str]) -> list[str]:
    """The journey's heading, one line per hop (time, connection, frame, event, details, the
    time since the hop before) and where it ended."""
    lines = [heading(journey)]
    before: float | None = None
    for hop in journey.hops:
        at = f"{hop.ts - first_ts:11.6f}" if first_ts is not None and hop.ts else " " * 11
        where = f"c{hop.conn} ch{hop.channel}" if hop.channel is not None else f"c{hop.conn}"
        took = f"  +{(hop.ts - before) * 1000.0:.1f} ms" if before is not None and hop.ts else ""
        name = f"  [{names[hop.conn]}]" if hop.conn in names else ""
        lines.append(
            f"  {at}  #{hop.frame:<6} {where:<9} {hop.event:<17} {_what(hop)}{took}{name}".rstrip()
        )
        before = hop.ts or before
    lines.append(f"  ended: {journey.end}")
    return lines
