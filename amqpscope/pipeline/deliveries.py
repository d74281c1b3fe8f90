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
Unsettled rows come out at `finish()` with settled false.
"""

from __future__ import annotations

from typing import Any

from amqpscope.codec.frames import Frame

OUTCOMES_10 = ("accepted", "rejected", "released", "modified")


def _other(direction: str) -> str:
    return "s2c" if direction == "c2s" else "c2s"


class DeliveryLog:
    """One connection's frames in, in capture order; `rows`: dicts of `deliveries` columns."""

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
        if frame.version == "1.0":
            if frame.kind == "performative":
                self._amqp10(frame)
        elif frame.kind == "method" or frame.message is not None:
            self._amqp091(frame)

    def finish(self) -> list[dict[str, Any]]:
        for pending in self.pending10.values():
            self.rows.extend(pending.values())
        for table in (self.unconfirmed, self.unacked):
            for pending in table.values():
                self.rows.extend(pending.values())
        self.pending10.clear()
        self.unconfirmed.clear()
        self.unacked.clear()
        self.rows.sort(key=lambda r: r["frame"])
        return self.rows

    # -- 1.0 -----------------------------------------------------------------------------------
    def _session(self, frame: Frame) -> int:
        channel = frame.channel or 0
        return channel if frame.direction == "c2s" else self.remote.get(channel, channel)

    def _amqp10(self, frame: Frame) -> None:
        f = frame.fields
        name = frame.name
        if name == "begin":
            if frame.direction == "s2c" and f.get("remote-channel") is not None:
                self.remote[frame.channel or 0] = f["remote-channel"]
            return
        session = self._session(frame)
        if name == "attach":
            self.links[(session, frame.direction, f.get("handle", 0))] = f.get("name")
        elif name == "transfer":
            self._transfer(frame, session)
        elif name == "disposition":
            self._disposition(frame, session)

    def _transfer(self, frame: Frame, session: int) -> None:
        f = frame.fields
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

    def _disposition(self, frame: Frame, session: int) -> None:
        f = frame.fields
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
    def _amqp091(self, frame: Frame) -> None:
        channel = frame.channel or 0
        name = frame.name
        f = frame.fields
        c2s = frame.direction == "c2s"
        if frame.message is not None:
            self._message(frame, channel)
        if frame.kind != "method":
            return
        if name == "channel.open" and c2s:
            for table in (self.unconfirmed, self.unacked):
                self.rows.extend(table.pop(channel, {}).values())
            self.confirm.pop(channel, None)
        elif name == "confirm.select" and c2s:
            self.confirm.setdefault(channel, 1)
        elif name == "basic.consume" and c2s:
            self.consume[channel] = (bool(f.get("no-ack")), f.get("queue"))
            if f.get("consumer-tag"):
                self.consumers[f["consumer-tag"]] = self.consume[channel]
        elif name == "basic.consume-ok" and not c2s and channel in self.consume:
            self.consumers[f.get("consumer-tag", "")] = self.consume.pop(channel)
        elif name == "basic.get" and c2s:
            self.get[channel] = (bool(f.get("no-ack")), f.get("queue"))
        elif name in ("basic.ack", "basic.nack", "basic.reject"):
            table = self.unacked if c2s else self.unconfirmed
            outcome = name.split(".")[1]
            if not c2s:
                outcome = "confirmed" if outcome == "ack" else "nacked"
            self._settle091(table.get(channel), frame, outcome)

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
                no_ack, queue = self.consumers.get(args.get("consumer-tag", ""), (False, None))
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
