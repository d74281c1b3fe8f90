"""100k messages generated at run time: every publish, delivery, ack, nack and reject accounted for.

Two connections, as a capture would have them: a publisher in confirm mode (the broker confirms
each batch with one multiple ack) and a consumer with prefetch 10 that settles each batch of 10
deliveries with one multiple ack (every thousandth batch with tag 0), after rejecting one message
in a thousand and nacking another with requeue, which comes back redelivered and is acked alone.
pika encodes the frames, amqpscope's codec frames and decodes them, the tracker counts.
"""

from __future__ import annotations

import pika.frame
import pika.spec as spec

from amqpscope.track.amqp091 import journeys
from tests.test_track_amqp091 import C2S, S2C, Wire

MESSAGES = 100_000
BATCH = 10
QUEUE = "bulk.q"


def method(channel: int, m: object) -> bytes:
    return pika.frame.Method(channel, m).marshal()


def test_bulk_100k_messages_are_all_accounted_for() -> None:
    wire = Wire(keep=False)
    for conn in (1, 2):
        wire.handshake(conn)
        wire.open(conn, 1)
    wire.method(1, C2S, 1, spec.Confirm.Select())
    wire.method(1, S2C, 1, spec.Confirm.SelectOk())
    wire.method(2, C2S, 1, spec.Basic.Qos(prefetch_count=BATCH))
    wire.method(2, S2C, 1, spec.Basic.QosOk())
    wire.consume(2, 1, QUEUE, "bulk")
    props = spec.BasicProperties(content_type="text/plain")
    publish = method(1, spec.Basic.Publish(exchange="", routing_key=QUEUE))
    header = pika.frame.Header(1, 7, props).marshal()

    def deliver(tag: int, body: bytes, redelivered: bool = False) -> bytes:
        return (
            method(1, spec.Basic.Deliver("bulk", tag, redelivered, "", QUEUE))
            + header
            + pika.frame.Body(1, body).marshal()
        )

    tag = 0
    rejected = nacked = 0
    for start in range(0, MESSAGES, BATCH):
        bodies = [b"m%06d" % i for i in range(start, start + BATCH)]
        wire.write(
            1, C2S, b"".join(publish + header + pika.frame.Body(1, b).marshal() for b in bodies)
        )
        wire.write(1, S2C, method(1, spec.Basic.Ack(start + BATCH, multiple=True)))
        first = tag + 1
        wire.write(2, S2C, b"".join(deliver(first + k, b) for k, b in enumerate(bodies)), 0.0005)
        tag += BATCH
        settles = []
        requeued = []
        for k, i in enumerate(range(start, start + BATCH)):
            if i % 1000 == 7:
                settles.append(method(1, spec.Basic.Reject(first + k, requeue=False)))
                rejected += 1
            elif i % 1000 == 3:
                settles.append(method(1, spec.Basic.Nack(first + k, multiple=False, requeue=True)))
                requeued.append(bodies[k])
                nacked += 1
        last = 0 if (start // BATCH) % 1000 == 999 else tag  # tag 0: everything outstanding
        settles.append(method(1, spec.Basic.Ack(last, multiple=True)))
        wire.write(2, C2S, b"".join(settles))
        for body in requeued:
            tag += 1
            wire.write(2, S2C, deliver(tag, body, redelivered=True))
            wire.write(2, C2S, method(1, spec.Basic.Ack(tag)))
    summary = wire.summary()

    (publisher,) = summary["connections"][0]["channels"]
    (consumer,) = summary["connections"][1]["channels"]
    assert publisher["publishes"] == MESSAGES
    assert publisher["confirms"]["acked"] == MESSAGES and publisher["confirms"]["pending"] == 0
    assert publisher["confirms"]["latency-ms"]["count"] == MESSAGES
    assert consumer["deliveries"] == MESSAGES + nacked
    assert consumer["redelivered"] == nacked == MESSAGES // 1000
    assert consumer["rejects"] == rejected == MESSAGES // 1000
    assert consumer["nacks"] == nacked and consumer["requeued"] == nacked
    assert consumer["acks"] == MESSAGES - rejected - nacked + nacked
    assert consumer["unacked"] == 0 and consumer["max-unacked"] == BATCH
    assert consumer["ack-latency-ms"]["count"] == MESSAGES + nacked
    assert consumer["prefetch"]["saturations"] == MESSAGES // BATCH
    assert consumer["consumers"][0]["deliveries"] == MESSAGES + nacked
    (journey,) = summary["journeys"]
    assert (journey["queue"], journey["matched"], journey["redelivered"]) == (
        QUEUE,
        MESSAGES,
        nacked,
    )
    assert (
        journey["unmatched"] == 0 and journey["latency-ms"]["p50"] == 1.5
    )  # confirm 1 ms, deliver 0.5 ms
    codes = [f["code"] for f in summary["findings"]]
    assert codes == ["amqp091.prefetch-saturated"]
    # bounded: nothing outstanding is kept, and matching remembers at most its cap
    correlator = wire.tracker.correlator
    assert len(correlator.order) <= journeys.MAX_PUBLISHES
