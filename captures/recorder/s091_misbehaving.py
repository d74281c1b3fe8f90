"""AMQP 0-9-1 clients that misbehave: hostile names, consumers killed with deliveries unacked."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from typing import Any

import pika
import pika.exceptions

from recorder.amqp091 import (
    channel_with_queue,
    missing_then_delete,
    pika_params,
    publish_plain,
)
from recorder.harness import HERE, Counts, Ctx, scenario

#: what would drive a terminal printed raw: an OSC window title, a colour, a screen clear, a
#: right-to-left override and rich markup (amqpscope must print all of it escaped or literal)
HOSTILE = "\x1b]0;pwned\x07\x1b[31mred\x1b[0m\x1b[2J\u202e[bold red]x[/]"


@scenario(
    "091-hostile-names",
    "0-9-1",
    "Strings that would drive a terminal: a queue whose name holds escape sequences (an OSC "
    "window title, a colour, a screen clear), a right-to-left override and rich markup is "
    "declared; a text/plain message whose body holds them too is published and fetched with "
    "basic.get; a passive declare of a missing queue so named gets channel.close 404, whose reply "
    "text repeats the name; the queue is deleted on a second channel.",
    queues=(HOSTILE, "missing" + HOSTILE),
)
def s_hostile_names(ctx: Ctx) -> dict[str, Any]:
    """Terminal safety: captured strings with escape sequences, from a real broker."""
    n = Counts()
    conn, ch, q = channel_with_queue(ctx, n, HOSTILE)
    n["queue"] = q
    body = f"body {HOSTILE}".encode()
    publish_plain(ch, n, q, body)
    method, _props, got = ch.basic_get(q, auto_ack=True)
    n.inc("gets")
    if method is None or got != body:
        raise RuntimeError("basic.get did not return the message")
    n.inc("get_ok")
    n["body"] = got.decode()
    missing_then_delete(ctx, conn, ch, n, q, HOSTILE)
    return n


#: how a killed consumer's process starts: arguments record.py's folder, the queue, a name
KILLED_PROLOGUE = """
import json, sys, time
import pika
sys.path.insert(0, sys.argv[1])
from recorder.amqp091 import pika_params
q, name = sys.argv[2], sys.argv[3]
n = {"connections": 1, "channels": 1}
conn = pika.BlockingConnection(pika_params(name=name))
ch = conn.channel()
ch.queue_declare(q)
n["queue_declares"] = 1
"""


#: the consumer killed by 091-killed-consumer: a process of its own, so SIGKILL ends it the way
#: an OOM kill or `kill -9` does (the kernel closes its socket; no connection.close is sent)
KILLED_CONSUMER = (
    KILLED_PROLOGUE
    + """
ch.basic_qos(prefetch_count=5)
n["prefetch_count"] = 5
for i in range(20):
    ch.basic_publish("", q, f"work item {i}".encode(),
                     pika.BasicProperties(content_type="text/plain", message_id=f"w{i}"))
n["publishes"] = 20
got = []
ch.basic_consume(q, lambda c, m, p, b: got.append(m.delivery_tag))
n["consumers"] = 1
deadline = time.monotonic() + 15
while len(got) < 5 and time.monotonic() < deadline:
    conn.process_data_events(time_limit=0.05)
conn.process_data_events(time_limit=0.3)  # the broker sends no more: prefetch is reached
n["deliveries"] = len(got)
n["unacked_when_killed"] = len(got)
print(json.dumps(n), flush=True)
time.sleep(60)  # stuck: a consumer that never acks, until it is killed
"""
)


@scenario(
    "091-killed-consumer",
    "0-9-1",
    "A consumer stuck at its prefetch is killed: one pika process declares the queue, sets "
    "basic.qos prefetch_count=5, publishes 20 messages, consumes without ever acking, and once "
    "the 5 deliveries the prefetch allows have arrived it is killed with SIGKILL. No "
    "connection.close is sent: the capture ends with the kernel closing the client's socket and "
    "the broker dropping the connection (its 5 unacked deliveries are requeued).",
)
def s_killed_consumer(ctx: Ctx) -> dict[str, Any]:
    """The client vanishes: TCP ends while the AMQP connection is open."""
    return killed(ctx, KILLED_CONSUMER, deliveries=5)


def killed(ctx: Ctx, script: str, deliveries: int) -> Counts:
    """Run a consumer `script` in a process of its own, wait for its counts (printed once it
    has its `deliveries`), and kill it with SIGKILL: no connection.close is sent."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(HERE), ctx.q(), f"amqpscope {ctx.name}"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line:
            raise RuntimeError("the consumer process ended before it was ready")
        n = Counts(json.loads(line))
        if n["deliveries"] != deliveries:
            raise RuntimeError(
                f"expected {deliveries} deliveries before the kill, got {n['deliveries']}"
            )
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        n["killed_with"] = "SIGKILL"
        n["connection_closes"] = 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    return n


#: the auto-ack consumer killed by 091-killed-autoack-consumer: every message is delivered to
#: it (a worker's in-memory buffer) and it is killed before it handles any
KILLED_AUTOACK_CONSUMER = (
    KILLED_PROLOGUE
    + """
for i in range(20):
    ch.basic_publish("", q, f"order {i}".encode(),
                     pika.BasicProperties(content_type="text/plain", message_id=f"o{i}"))
n["publishes"] = 20
got = []
ch.basic_consume(q, lambda c, m, p, b: got.append(m.delivery_tag), auto_ack=True)
n["consumers"] = 1
deadline = time.monotonic() + 15
while len(got) < 20 and time.monotonic() < deadline:
    conn.process_data_events(time_limit=0.05)
n["deliveries"] = len(got)
n["acks"] = 0
print(json.dumps(n), flush=True)
time.sleep(60)  # buffered, not yet handled, until it is killed
"""
)


@scenario(
    "091-killed-autoack-consumer",
    "0-9-1",
    "An auto-ack consumer is killed: one pika process declares the queue, publishes 20 "
    "messages and consumes them with auto_ack=True (no-ack); the broker delivers all 20 at once "
    "(no prefetch limit applies to no-ack) and forgets each as it sends it; once all 20 are in "
    "the client's memory, before it handles any, the process is killed with SIGKILL. No "
    "connection.close is sent. A second connection then declares the queue passively: it is "
    "empty (messages=0), nothing was requeued, the 20 messages are lost.",
)
def s_killed_autoack_consumer(ctx: Ctx) -> dict[str, Any]:
    """Messages that vanish: delivered with no-ack to a client that dies."""
    n = killed(ctx, KILLED_AUTOACK_CONSUMER, deliveries=20)
    # a second connection, in the capture too: the queue is empty, nothing was requeued
    conn = pika.BlockingConnection(pika_params(name=f"amqpscope {ctx.name} check"))
    left = conn.channel().queue_declare(ctx.q(), passive=True).method.message_count
    conn.close()
    for key in ("connections", "channels", "queue_declares", "connection_closes"):
        n.inc(key)
    n["left_in_queue"] = left
    if left != 0:
        raise RuntimeError(f"expected the queue empty after the kill, it holds {left}")
    return n
