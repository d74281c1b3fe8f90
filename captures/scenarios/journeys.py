"""Recordings of messages' journeys across connections (issue 44): what `amqpscope follow`
answers.

Two pika processes through the local RabbitMQ: a consumer process with two competing consumers
(A and B, each on its own connection, prefetch 1), of which A nacks with requeue the first
deliveries it gets; and a publisher process, on a third connection, publishing with confirms.
Needs: pika (the client), RabbitMQ on 127.0.0.1:5672.

Ground truth is the clients': each process writes, as JSON on its standard output, what its
callbacks saw (which consumer got which message, whether pika said it was redelivered, what
the consumer answered; which publishes the broker confirmed), never read from the capture.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import recorder as record  # captures/recorder/: the harness and shared helpers

#: the messages published: (message-id or None, correlation-id or None, body); the last has no
#: message-id, so its journey is matched by its body (and found by its correlation-id)
MESSAGES = (
    ("m0", None, "order 0"),
    ("m1", None, "order 1"),
    ("m2", None, "order 2"),
    ("m3", None, "order 3"),
    ("m4", None, "order 4"),
    (None, "c5", "order 5"),
)
#: how many first deliveries consumer A nacks (requeue=True) before it acks what it gets
NACKS = 2

CONSUMERS = r"""
import json, sys, time
import pika

host, port, queue, name, count, nacks = sys.argv[1:7]
count, nacks = int(count), int(nacks)
log, acked, clients = [], set(), {}


def params(who):
    return pika.ConnectionParameters(
        host=host, port=int(port), credentials=pika.PlainCredentials("guest", "guest"),
        connection_attempts=1, socket_timeout=5, client_properties={"connection_name": who},
    )


def on_message(who, chan, method, props, body):
    entry = {
        "consumer": who, "delivery_tag": method.delivery_tag, "redelivered": method.redelivered,
        "message_id": props.message_id, "correlation_id": props.correlation_id,
        "body": body.decode(), "at": time.time(),
    }
    nacked = sum(1 for e in log if e["outcome"] == "nack-requeue")
    if who == "A" and not method.redelivered and nacked < nacks:
        chan.basic_nack(method.delivery_tag, requeue=True)
        entry["outcome"] = "nack-requeue"
    else:
        chan.basic_ack(method.delivery_tag)
        entry["outcome"] = "ack"
        acked.add(entry["body"])
    log.append(entry)


for who in ("A", "B"):
    conn = pika.BlockingConnection(params(f"{name} consumer {who}"))
    chan = conn.channel()
    chan.queue_declare(queue)
    chan.basic_qos(prefetch_count=1)
    tag = chan.basic_consume(queue, lambda c, m, p, b, who=who: on_message(who, c, m, p, b))
    clients[who] = (conn, chan, tag)
print("ready", flush=True)
deadline = time.monotonic() + 30
while len(acked) < count:
    if time.monotonic() > deadline:
        sys.exit("consumers: timed out")
    for conn, _, _ in clients.values():
        conn.process_data_events(time_limit=0.01)
for conn, chan, tag in clients.values():
    chan.basic_cancel(tag)
    conn.close()
print(json.dumps(log), flush=True)
"""

#: the publisher: with confirms, one connection; with a log path (091-vantage), pika's log at
#: DEBUG, and first a basic.get on the still empty queue, since that log shows its get-empty and
#: none of the publishes or confirms; says its connection's local port with what it published
PUBLISHER = r"""
import json, logging, sys, time
import pika

host, port, queue, name, messages, log_path = sys.argv[1:7]
messages = json.loads(messages)
if log_path:
    logging.basicConfig(filename=log_path, level=logging.DEBUG,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
conn = pika.BlockingConnection(pika.ConnectionParameters(
    host=host, port=int(port), credentials=pika.PlainCredentials("guest", "guest"),
    connection_attempts=1, socket_timeout=5, client_properties={"connection_name": name},
))
port = conn._impl._transport._sock.getsockname()[1]
chan = conn.channel()
chan.confirm_delivery()
empty = bool(log_path) and chan.basic_get(queue)[0] is None
log = []
for message_id, correlation_id, body in messages:
    sent = time.time()
    props = pika.BasicProperties(
        content_type="text/plain", message_id=message_id, correlation_id=correlation_id
    )
    try:  # with confirms on, returns once the broker acked it; raises if it nacked
        chan.basic_publish("", queue, body.encode(), props)
        confirmed = True
    except pika.exceptions.NackError:
        confirmed = False
    log.append({"message_id": message_id, "correlation_id": correlation_id, "body": body,
                "sent": sent, "confirmed": confirmed, "at": time.time()})
    time.sleep(0.05)  # let both consumers take their turns
conn.close()
print(json.dumps({"port": port, "log": log, "get_empty": empty}), flush=True)
"""


def _python(script: str, *args: str) -> subprocess.Popen[str]:
    """One of the scenario's pika processes, its standard output read as text."""
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_json(proc: subprocess.Popen[str], what: str) -> Any:
    """The JSON a process printed last, once it ended well."""
    out, err = proc.communicate(timeout=40)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed ({proc.returncode}): {err.strip()}")
    return json.loads(out.strip().splitlines()[-1])


def _where(ctx: record.Ctx) -> tuple[str, str, str]:
    return record.BROKER_HOST, str(record.BROKER_PORT), ctx.q()


def start_consumers(
    ctx: record.Ctx, count: int, nacks: int, script: str = CONSUMERS
) -> tuple[subprocess.Popen[str], list[str]]:
    """The consumers' process, once it is ready (the words it said after "ready" too): the
    publisher must not start before both consumers are there to compete."""
    proc = _python(script, *_where(ctx), f"amqpscope {ctx.name}", str(count), str(nacks))
    assert proc.stdout is not None
    ready = proc.stdout.readline().split()
    if not ready or ready[0] != "ready":
        raise RuntimeError(f"consumers did not start: {proc.communicate()[1].strip()}")
    return proc, ready[1:]


def publish(ctx: record.Ctx, messages: Any, log_path: str = "") -> Any:
    """Run the publisher to its end: its port, what it published and whether the broker
    confirmed each, whether its basic.get found the queue empty."""
    name = f"amqpscope {ctx.name} publisher"
    proc = _python(PUBLISHER, *_where(ctx), name, json.dumps(messages), log_path)
    return run_json(proc, "publisher")


def journey_counts(
    ctx: record.Ctx, published: list[Any], delivered: list[Any], **more: Any
) -> record.Counts:
    """The ground truth of the clients' logs (`more`: a scenario's own, before the logs)."""
    n = record.Counts()
    n["connections"] = 3
    n["publishes"] = len(published)
    n["confirms"] = sum(1 for p in published if p["confirmed"])
    n["deliveries"] = len(delivered)
    n["acks"] = sum(1 for d in delivered if d["outcome"] == "ack")
    n["nacks"] = sum(1 for d in delivered if d["outcome"] == "nack-requeue")
    n["redeliveries"] = sum(1 for d in delivered if d["redelivered"])
    n["connection_names"] = {
        "publisher": f"amqpscope {ctx.name} publisher",
        "A": f"amqpscope {ctx.name} consumer A",
        "B": f"amqpscope {ctx.name} consumer B",
    }
    n.update(more)
    n["published"] = published
    n["delivered"] = delivered
    return n


@record.scenario(
    "091-journeys",
    "0-9-1",
    "Two pika processes: consumers A and B (each its own connection, prefetch 1) compete on one"
    f" queue, A nacks with requeue its first {NACKS} first deliveries and acks the rest, B acks"
    f" all; a publisher process on a third connection publishes {len(MESSAGES)} messages with"
    " confirms (the last with a correlation-id and no message-id).",
)
def s_journeys(ctx: record.Ctx) -> dict[str, Any]:
    """Each message's journey (published, confirmed, delivered, nacked, redelivered, acked)
    across three connections of two processes."""
    consumers, _ = start_consumers(ctx, len(MESSAGES), NACKS)
    published = publish(ctx, MESSAGES)["log"]
    delivered = run_json(consumers, "consumers")
    time.sleep(0.2)  # the connections' close handshakes reach the capture
    return journey_counts(ctx, published, delivered)
