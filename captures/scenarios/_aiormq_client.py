"""The aiormq side of captures/scenarios/clients091.py, run by Debian's python3-aiormq (the asyncio
client under aio-pika) under the system python3: `python3 _aiormq_client.py MODE PORT QUEUE`
(the leading underscore keeps record.py from loading it as a scenario module).

MODE happy: declare QUEUE, publish 3 messages (aiormq's channels confirm by default: each
publish awaited until its basic.ack), consume them with manual acks (tag 1 alone, tags 2-3 by
one multiple ack), cancel, delete the queue, close the channel and the connection.
MODE no-close: declare, publish 1, and end the program without closing anything: the process
exits and the kernel ends the TCP connection.

MODE idle: connect asking for heartbeat 90 s (aiormq's tune-ok says what it is asked, 60 s by
default, whatever the broker proposed; half of it between its heartbeats) and do nothing for 40 s;
the connection's end, if the broker ends it first, is what aiormq saw.

Prints what aiormq observed as one JSON line, counts named as captures/recorder counts them.
"""

import asyncio
import json
import os
import sys
import time

import aiormq
from aiormq.abc import DeliveredMessage

mode, port, queue = sys.argv[1], int(sys.argv[2]), sys.argv[3]
MESSAGES = 3
counts: dict = {}


def inc(key: str, n: int = 1) -> None:
    counts[key] = counts.get(key, 0) + n


async def main() -> None:
    # MODE idle asks for 90 s (aiormq's first heartbeat at 45 s): its default, 60 s, sends the
    # first at 30 s, racing garagemq's 30 s limit
    query = "?heartbeat=90" if mode == "idle" else ""
    conn = await aiormq.connect(f"amqp://guest:guest@127.0.0.1:{port}/{query}")
    inc("connections")
    counts["negotiated_heartbeat"] = conn.connection_tune.heartbeat
    counts["negotiated_frame_max"] = conn.connection_tune.frame_max
    if mode == "idle":
        # nothing to do for 40 s: aiormq's heartbeats alone keep the connection
        started = time.monotonic()
        while not conn.is_closed and time.monotonic() - started < 40:
            await asyncio.sleep(0.1)
        if conn.is_closed:
            counts["lost_after_s"] = round(time.monotonic() - started, 1)
            counts["lost_with"] = type(conn.closing.exception()).__name__
        else:
            await conn.close()
            inc("connection_closes")
        print(json.dumps(counts))
        return
    ch = await conn.channel()
    inc("channels")
    counts["channel_numbers_opened"] = [ch.number]
    await ch.queue_declare(queue)
    inc("queue_declares")
    if mode == "no-close":
        body = b"left behind"
        await ch.basic_publish(body, routing_key=queue)
        inc("publishes")
        inc("body_size", len(body))
        inc("confirms_acked")
        print(json.dumps(counts), flush=True)
        os._exit(0)  # no channel.close, no connection.close: the kernel closes the socket
    for i in range(MESSAGES):
        body = f"aiormq message {i}".encode()
        confirm = await ch.basic_publish(
            body, routing_key=queue, properties=aiormq.spec.Basic.Properties(message_id=f"m{i}")
        )
        inc("publishes")
        inc("body_size", len(body))
        if isinstance(confirm, aiormq.spec.Basic.Ack):
            inc("confirms_acked")
    got: list = []
    done = asyncio.Event()

    async def on_message(message: DeliveredMessage) -> None:
        got.append(message)
        inc("deliveries")
        if len(got) == MESSAGES:
            done.set()

    consume_ok = await ch.basic_consume(queue, on_message, no_ack=False)
    inc("consumers")
    counts["consumer_tag"] = consume_ok.consumer_tag
    await asyncio.wait_for(done.wait(), 5)
    tags = [m.delivery.delivery_tag for m in got]
    counts["delivery_tags"] = tags
    await ch.basic_ack(tags[0])
    inc("acks")
    await ch.basic_ack(tags[-1], multiple=True)
    inc("acks")
    inc("acks_multiple")
    counts["acked_messages"] = MESSAGES
    counts["max_unacked"] = MESSAGES
    await ch.basic_cancel(consume_ok.consumer_tag)
    inc("cancels")
    await ch.queue_delete(queue)
    inc("queue_deletes")
    await ch.close()
    inc("channel_closes")
    await conn.close()
    inc("connection_closes")
    print(json.dumps(counts))


asyncio.run(main())
