"""The py-amqp side of captures/scenarios/clients091.py, run by Debian's python3-amqp (celery's and
kombu's client) under the system python3: `python3 _pyamqp_client.py MODE PORT QUEUE`
(the leading underscore keeps record.py from loading it as a scenario module).

MODE happy: declare QUEUE, publish 3 messages with publisher confirms (py-amqp's
confirm_publish: confirm.select on the first publish, each publish waits for its basic.ack),
consume them with manual acks (tag 1 acked alone, tags 2-3 by one multiple ack), cancel, delete
the queue, close the channel and the connection as py-amqp closes them.
MODE missing-exchange: publish with confirms to an exchange that does not exist; the broker
closes the channel (404), py-amqp answers close-ok, reopens the channel (same number) and raises
NotFound; the connection is closed (py-amqp's connection.close says reply-code 0).

MODE heartbeats: heartbeat 2 s asked for; the connection idles 7 s while the client calls
drain_events and heartbeat_tick as kombu does (py-amqp sends a heartbeat once `heartbeat` s passed
with nothing sent), then closes. MODE heartbeat-silent: heartbeat 2 s, then 8 s with neither
call: py-amqp sends nothing, and the broker drops the connection; the client's close fails.

Prints what py-amqp observed as one JSON line: counts named as captures/recorder counts them.
"""

import contextlib
import json
import sys
import time

import amqp

mode, port, queue = sys.argv[1], int(sys.argv[2]), sys.argv[3]
MESSAGES = 3
counts: dict = {"client_library": {"py-amqp": amqp.__version__}}


def inc(key: str, n: int = 1) -> None:
    counts[key] = counts.get(key, 0) + n


HEARTBEAT = 2  # seconds, what MODE heartbeats and heartbeat-silent ask for
conn = amqp.Connection(
    f"127.0.0.1:{port}",
    userid="guest",
    password="guest",
    confirm_publish=True,
    client_properties={"connection_name": f"amqpscope {mode}"},
    heartbeat=HEARTBEAT if mode.startswith("heartbeat") else 0,
)
conn.connect()
inc("connections")
if mode.startswith("heartbeat"):  # count the heartbeat frames py-amqp sends and receives
    send_heartbeat, on_frame = conn.send_heartbeat, conn.on_inbound_frame

    def counted_send() -> None:
        inc("heartbeats_sent_by_client")
        send_heartbeat()

    def counted_frame(frame: tuple) -> object:
        if frame[0] == 8:
            inc("heartbeats_received_by_client")
        return on_frame(frame)

    conn.send_heartbeat = counted_send
    conn.on_inbound_frame = counted_frame
    counts["heartbeats_sent_by_client"] = counts["heartbeats_received_by_client"] = 0
counts["negotiated_heartbeat"] = conn.heartbeat
counts["negotiated_frame_max"] = conn.frame_max
ch = conn.channel()
inc("channels")
counts["channel_numbers_opened"] = [ch.channel_id]

if mode == "happy":
    ch.queue_declare(queue, auto_delete=False)
    inc("queue_declares")
    for i in range(MESSAGES):
        body = f"py-amqp message {i}".encode()
        ch.basic_publish(amqp.Message(body, message_id=f"m{i}"), exchange="", routing_key=queue)
        inc("publishes")
        inc("body_size", len(body))
        inc("confirms_acked")  # confirm_publish: basic_publish returned once the broker acked
    got: list = []

    def on_message(message: amqp.Message) -> None:
        got.append(message)
        inc("deliveries")

    tag = ch.basic_consume(queue, callback=on_message, no_ack=False)
    inc("consumers")
    counts["consumer_tag"] = tag
    while len(got) < MESSAGES:
        conn.drain_events(timeout=5)
    tags = [m.delivery_info["delivery_tag"] for m in got]
    counts["delivery_tags"] = tags
    ch.basic_ack(tags[0])
    inc("acks")
    ch.basic_ack(tags[-1], multiple=True)
    inc("acks")
    inc("acks_multiple")
    counts["acked_messages"] = MESSAGES
    counts["max_unacked"] = MESSAGES
    ch.basic_cancel(tag)
    inc("cancels")
    ch.queue_delete(queue)
    inc("queue_deletes")
    ch.close()
    inc("channel_closes")
elif mode == "heartbeats":
    # an idle connection kept alive as kombu keeps it: drain_events, heartbeat_tick, for 7 s
    end = time.monotonic() + 7
    while time.monotonic() < end:
        with contextlib.suppress(TimeoutError):  # socket.timeout: nothing came in 0.25 s
            conn.drain_events(timeout=0.25)
        conn.heartbeat_tick()
    counts["idle_s"] = 7
elif mode == "heartbeat-silent":
    # heartbeats negotiated, and then nothing: no heartbeat_tick, no drain_events (a worker
    # busy in a long task); the broker gives up on the connection
    time.sleep(8)
    counts["silent_s"] = 8
    del counts["heartbeats_received_by_client"]  # it read nothing: what came is not its to count
    try:
        conn.close()
    except (OSError, amqp.exceptions.AMQPError) as err:
        counts["close_failed"] = type(err).__name__
        counts["connection_closes"] = 0
    print(json.dumps(counts))
    raise SystemExit(0)
else:
    exchange = f"{queue}.missing"
    counts["missing_exchange"] = exchange
    on_close = ch._callbacks[amqp.spec.Channel.Close]

    def channel_closed(reply_code: int, reply_text: str, *rest: object) -> object:
        """The broker's channel.close as py-amqp is told it (it then revives the channel)."""
        counts["channel_errors"] = [{"channel": 1, "code": reply_code, "text": reply_text}]
        return on_close(reply_code, reply_text, *rest)

    ch._callbacks[amqp.spec.Channel.Close] = channel_closed
    revive = ch._do_revive

    def reopened() -> object:
        """py-amqp revives a channel the broker closed: channel.open again, same number."""
        inc("channels")
        counts["channel_numbers_opened"].append(ch.channel_id)
        return revive()

    ch._do_revive = reopened
    try:
        ch.basic_publish(amqp.Message(b"to nowhere"), exchange=exchange, routing_key=queue)
    except amqp.exceptions.NotFound:
        pass  # RabbitMQ: the 404, after the channel was opened again
    except amqp.exceptions.ConnectionError as err:
        # garagemq: the 404, and then a 501 for the content of the publish in flight, which
        # reached it after its channel.close: the connection closed by the broker
        counts["connection_errors"] = [{"code": err.reply_code, "text": err.reply_text}]
    else:
        raise SystemExit("a publish to a missing exchange was confirmed")
    inc("publishes")
    inc("body_size", len(b"to nowhere"))
    if "connection_errors" in counts:
        print(json.dumps(counts))
        raise SystemExit(0)
conn.close()
inc("connection_closes")
print(json.dumps(counts))
