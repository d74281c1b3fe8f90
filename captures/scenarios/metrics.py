"""Recordings for the metrics face (`amqpscope metrics`): traffic whose shape the Prometheus
families must keep under bounded labels."""

from __future__ import annotations

from typing import Any

import recorder as record  # captures/recorder/: the harness and shared helpers

#: (queue suffix, messages), in the order the queues are declared, filled and consumed: the
#: first seen is the quietest, the busiest comes second
QUEUES = (("quiet", 1), ("busy", 6), ("middle", 3))


@record.scenario(
    "091-busy-queues",
    "0-9-1",
    "Three queues on one channel, declared, filled and consumed (manual acks, one consumer "
    "each, cancelled once it has its messages) in this order: 'quiet' with 1 message, 'busy' "
    "with 6, 'middle' with 3; then deleted. The first queue seen is not the busiest.",
    queues=tuple(name for name, _ in QUEUES),
)
def s_busy_queues(ctx: record.Ctx) -> dict[str, Any]:
    n = record.Counts()
    conn = record.connect_091(ctx, n)
    ch = conn.channel()
    n.inc("channels")
    delivered: dict[str, int] = {}
    order: list[str] = []
    for suffix, count in QUEUES:
        q = ctx.q(suffix)
        ch.queue_declare(q)
        n.inc("queue_declares")
        order.append(q)
        for i in range(count):
            record.publish_plain(ch, n, q, f"{suffix} {i}".encode())
        got = 0
        for method, _props, _body in ch.consume(q, inactivity_timeout=5):
            if method is None:
                break
            ch.basic_ack(method.delivery_tag)
            n.inc("acks")
            got += 1
            if got == count:
                break
        ch.cancel()
        n.inc("cancels")
        delivered[q] = got
        n.inc("deliveries", got)
    for q in order:
        ch.queue_delete(q)
        n.inc("queue_deletes")
    n["queues_in_order"] = order
    n["deliveries_by_queue"] = delivered
    record.close_091(conn, n)
    return n
