"""One row per delivery (1.0) or message (0-9-1), from the frames of one connection (sans-IO).

The trackers keep tallies and bounded latency samples, not every delivery; the `deliveries`
table wants every one, so this follows the few frames that matter, with the spec's rules:

1.0   a transfer with a delivery-id starts a delivery (continuations add their bytes); a
      disposition settles or states first..last of the deliveries the *other* role sent (role
      receiver: those the peer sent as sender); sessions are paired by begin's remote-channel.
      outcome: accepted, rejected, released, modified, presettled, or the last non-terminal
      state; latency: first transfer to settlement.
0-9-1 a completed basic.publish is a row (with confirms on: numbered from 1 per channel, settled
      by the broker's ack/nack, `multiple` and tag 0 expanded: outcome confirmed/nacked); a
      completed basic.deliver / get-ok is a row settled by the client's ack/nack/reject
      (outcome ack/nack/reject, requeue), or at once for no-ack consumers and gets (auto-ack).
      channel.open starts a channel afresh. latency: message complete to settlement. A publish
      without confirms has settled null (nothing settles it on the wire).
Settled rows are handed out as they settle (`take`), so a long connection's rows never pile
up; unsettled ones come out at `finish()` with settled false.
"""

from __future__ import annotations

from typing import Any

from amqpscope.codec.frames import Frame
from amqpscope.codec.typed import typed_fields
from amqpscope.track.amqp091.rules import name as text_key

OUTCOMES_10 = ("accepted", "rejected", "released", "modified")


def _other(direction: str) -> str:
    return "s2c" if direction == "c2s" else "c2s"


class DeliveryLog:
    """One connection's frames in, in capture order; out, dicts of `deliveries` columns: the
    settled ones so far (`take`, or `rows` while they wait) and at the end the rest (`finish`).
    Most frames matter to no row: `feed` looks a frame's name up once (`_HANDLERS`) and is done."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        # 1.0
        self.remote: dict[int, int] = {}  # server channel -> client channel
        self.links: dict[tuple[int, str, int], str | None] = {}  # (session, dir, handle) -> name
        self.current: dict[tuple[int, str, int], dict[str, Any]] = {}
        self.pending10: dict[tuple[int, str], dict[int, dict[str, Any]]] = {}
        # 0-9-1
        self.confirm: dict[int, int] = {}  # channel -> next publish sequence (confirm mode)
        self.unconfirmed: dict[int, dict[int, dict[str, Any]]] = {}
        self.unacked: dict[int, dict[int, dict[str, Any]]] = {}
        self.consume: dict[int, tuple[bool, str | None]] = {}  # channel -> (no-ack, queue) asked
        self.consumers: dict[str, tuple[bool, str | None]] = {}  # consumer tag -> (no-ack, queue)
        self.get: dict[int, tuple[bool, str | None]] = {}

    def feed(self, frame: Frame) -> None:
        handler = _HANDLERS.get(frame.name)
        if handler is not None and frame.kind == handler[0]:
            handler[1](self, frame)
        elif frame.message is not None and frame.version != "1.0":  # a 0-9-1 message completes
            self._message(frame, frame.channel or 0)

    def take(self) -> list[dict[str, Any]]:
        """The rows settled since the last `take` (in the order they settled)."""
        out, self.rows = self.rows, []
        return out

    def finish(self) -> list[dict[str, Any]]:
        """What `take` has not handed out, then every row still unsettled (in frame order)."""
        out = self.take()
        unsettled = [row for pending in self.pending10.values() for row in pending.values()]
        for table in (self.unconfirmed, self.unacked):
            for pending in table.values():
                unsettled.extend(pending.values())
        self.pending10.clear()
        self.unconfirmed.clear()
        self.unacked.clear()
        unsettled.sort(key=lambda r: r["frame"])
        return out + unsettled

    # -- 1.0 -----------------------------------------------------------------------------------
    def _session(self, frame: Frame) -> int:
        channel = frame.channel or 0
        return channel if frame.direction == "c2s" else self.remote.get(channel, channel)

    def _begin(self, frame: Frame) -> None:
        f = typed_fields(frame)
        if frame.direction == "s2c" and f.get("remote-channel") is not None:
            self.remote[frame.channel or 0] = f["remote-channel"]

    def _attach(self, frame: Frame) -> None:
        f = typed_fields(frame)
        self.links[(self._session(frame), frame.direction, f.get("handle", 0))] = f.get("name")

    def _transfer(self, frame: Frame) -> None:
        session = self._session(frame)
        f = typed_fields(frame)
        handle = f.get("handle", 0)
        key = (session, frame.direction, handle)
        row = self.current.get(key)
        if f.get("delivery-id") is not None and (
            row is None or row["delivery_id"] != f["delivery-id"]
        ):
            row = {
                "version": frame.version,
                "kind": "transfer",
                "dir": frame.direction,
                "channel": session,
                "link": self.links.get(key),
                "handle": handle,
                "delivery_id": f["delivery-id"],
                "tag": f.get("delivery-tag"),
                "frame": frame.number,
                "ts": frame.ts,
                "size": 0,
                "settled": False,
            }
            self.pending10.setdefault((session, frame.direction), {})[f["delivery-id"]] = row
        if row is None:
            return  # a continuation whose first transfer the capture missed
        row["size"] += frame.size
        if frame.message is not None:  # the delivery is complete: its payload size, its id
            row["size"] = frame.message.get("size", row["size"])
            row["message_id"] = (frame.message.get("properties") or {}).get("message-id")
        if f.get("aborted"):
            row["outcome"] = "aborted"
        if f.get("settled"):
            self._settle10(row, frame, "presettled" if row["frame"] == frame.number else None)
        if f.get("more"):
            self.current[key] = row
        else:
            self.current.pop(key, None)

    def _disposition(self, frame: Frame) -> None:
        session = self._session(frame)
        f = typed_fields(frame)
        # a receiver's disposition is about what the other side sent; a sender's, its own
        sender = _other(frame.direction) if f.get("role") == "receiver" else frame.direction
        pending = self.pending10.get((session, sender))
        if not pending or f.get("first") is None:
            return
        first = f["first"]
        last = f.get("last")
        last = first if last is None else last
        state = f.get("state")
        outcome = state.get("type") if isinstance(state, dict) else None
        if last - first < len(pending):
            ids = [i for i in range(first, last + 1) if i in pending]
        else:
            ids = sorted(i for i in pending if first <= i <= last)
        for delivery_id in ids:
            row = pending[delivery_id]
            if outcome:
                row["outcome"] = outcome
            if f.get("settled"):
                self._settle10(row, frame, None)

    def _settle10(self, row: dict[str, Any], frame: Frame, outcome: str | None) -> None:
        if outcome:
            row["outcome"] = outcome
        row["settled"] = True
        row["settled_ts"] = frame.ts
        row["latency_ms"] = round((frame.ts - row["ts"]) * 1000.0, 3)
        self.rows.append(row)
        pending = self.pending10.get((row["channel"], row["dir"]))
        if pending is not None:
            pending.pop(row["delivery_id"], None)

    # -- 0-9-1 ---------------------------------------------------------------------------------
    def _method(self, frame: Frame) -> None:
        """A 0-9-1 method that matters (a content method's message is `_message`'s)."""
        channel = frame.channel or 0
        name = frame.name
        f = typed_fields(frame)
        c2s = frame.direction == "c2s"
        if frame.message is not None:
            self._message(frame, channel)
        if name == "channel.open" and c2s:
            for table in (self.unconfirmed, self.unacked):
                self.rows.extend(table.pop(channel, {}).values())
            self.confirm.pop(channel, None)
        elif name == "confirm.select" and c2s:
            self.confirm.setdefault(channel, 1)
        elif name == "basic.consume" and c2s:
            self.consume[channel] = (bool(f.get("no-ack")), text_key(f.get("queue")))
            if f.get("consumer-tag"):
                self.consumers[text_key(f["consumer-tag"])] = self.consume[channel]
        elif name == "basic.consume-ok" and not c2s and channel in self.consume:
            self.consumers[text_key(f.get("consumer-tag", ""))] = self.consume.pop(channel)
        elif name == "basic.get" and c2s:
            self.get[channel] = (bool(f.get("no-ack")), text_key(f.get("queue")))
        elif name in _SETTLES:
            table = self.unacked if c2s else self.unconfirmed
            self._settle091(table.get(channel), frame, _SETTLES[name][c2s])

    def _message(self, frame: Frame, channel: int) -> None:
        message = frame.message or {}
        method = message.get("method")
        args = message.get("arguments") or {}
        props = message.get("properties") or {}
        row: dict[str, Any] = {
            "version": frame.version,
            "dir": frame.direction,
            "channel": channel,
            "frame": frame.number,
            "ts": frame.ts,
            "size": message.get("body-size", message.get("size")),
            "exchange": args.get("exchange"),
            "routing_key": args.get("routing-key"),
            "message_id": props.get("message-id"),
            "settled": False,
        }
        if method == "basic.publish" and frame.direction == "c2s":
            row["kind"] = "publish"
            seq = self.confirm.get(channel)
            if seq is None:  # no confirms: settlement does not apply
                row["settled"] = None
                self.rows.append(row)
                return
            row["delivery_id"] = seq
            self.confirm[channel] = seq + 1
            self.unconfirmed.setdefault(channel, {})[seq] = row
        elif method in ("basic.deliver", "basic.get-ok") and frame.direction == "s2c":
            tag = args.get("delivery-tag")
            row["kind"] = "deliver" if method == "basic.deliver" else "get"
            row["delivery_id"] = tag
            row["redelivered"] = bool(args.get("redelivered"))
            if method == "basic.deliver":
                tag_key = text_key(args.get("consumer-tag", ""))
                no_ack, queue = self.consumers.get(tag_key, (False, None))
            else:
                no_ack, queue = self.get.pop(channel, (False, None))
            row["queue"] = queue
            if no_ack:
                row.update(settled=True, outcome="auto-ack", settled_ts=frame.ts, latency_ms=0.0)
                self.rows.append(row)
            elif isinstance(tag, int):
                self.unacked.setdefault(channel, {})[tag] = row

    def _settle091(
        self, pending: dict[int, dict[str, Any]] | None, frame: Frame, outcome: str
    ) -> None:
        tag = frame.fields.get("delivery-tag")
        if not pending or not isinstance(tag, int):
            return
        if frame.fields.get("multiple") and (tag == 0 or tag in pending):
            tags = [t for t in pending if tag == 0 or t <= tag]  # not outstanding: none (RabbitMQ)
        else:
            tags = [tag] if tag in pending else []
        requeue = frame.fields.get("requeue") if outcome in ("nack", "reject") else None
        for t in tags:
            row = pending.pop(t)
            row.update(
                settled=True,
                outcome=outcome,
                requeue=requeue,
                settled_ts=frame.ts,
                latency_ms=round((frame.ts - row["ts"]) * 1000.0, 3),
            )
            self.rows.append(row)


#: a 0-9-1 settling method -> its outcome (by the client, by the broker)
_SETTLES: dict[str, dict[bool, str]] = {
    "basic.ack": {True: "ack", False: "confirmed"},
    "basic.nack": {True: "nack", False: "nacked"},
    "basic.reject": {True: "reject", False: "nacked"},
}

#: the frames a row depends on: name -> (the frame kind it must be, handler); any other frame
#: matters only if it completes a 0-9-1 message (`feed`)
_HANDLERS: dict[str, tuple[str, Any]] = {
    "begin": ("performative", DeliveryLog._begin),
    "attach": ("performative", DeliveryLog._attach),
    "transfer": ("performative", DeliveryLog._transfer),
    "disposition": ("performative", DeliveryLog._disposition),
    **dict.fromkeys(
        (
            "channel.open",
            "confirm.select",
            "basic.consume",
            "basic.consume-ok",
            "basic.get",
            *_SETTLES,
        ),
        ("method", DeliveryLog._method),
    ),
}
