"""An AMQP 1.0 message's journey across connections (issue 44): a Proton sender process and a
Proton receiver process, each on its own connection to RabbitMQ's AMQP 1.0 plugin, one queue.

The receiver settles per plan: releases the first delivery of one message (RabbitMQ puts it
back and delivers it again, which the receiver then accepts), rejects one, accepts the rest.
What `amqpscope follow` and `summary`'s journey paths show: the sender's transfer and the
broker's disposition on one connection, the broker's transfer and the receiver's disposition
on the other, tied by message-id (by correlation-id for the message that has none).
Needs: python-qpid-proton, RabbitMQ with the amqp1_0 plugin on 127.0.0.1:5672.

Ground truth is the clients': each process writes, as JSON on its standard output, what its
Proton callbacks saw (each send's outcome as the broker settled it; each delivery with its
first-acquirer flag and delivery-count, and what the receiver answered), with time.time().
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from typing import Any

import recorder as record  # captures/recorder/: the harness and shared helpers

#: (message-id or None, correlation-id or None, body); the last has no message-id
MESSAGES = (
    ("p0", None, "parcel 0"),
    ("p1", None, "parcel 1"),
    ("p2", None, "parcel 2"),
    ("p3", None, "parcel 3"),
    (None, "c4", "parcel 4"),
)
#: the receiver's answer to the FIRST delivery of a body; later deliveries are accepted
PLAN = {"parcel 1": "released", "parcel 2": "rejected"}

RECEIVER = r"""
import json, sys, time
from proton import Delivery
from proton.handlers import MessagingHandler
from proton.reactor import Container

url, address, cid, count, plan = sys.argv[1:6]
count, plan = int(count), json.loads(plan)
log, opened = [], []


class Receiver(MessagingHandler):
    def __init__(self):
        super().__init__(prefetch=10, auto_accept=False)
        self.done = 0

    def on_start(self, event):
        self.conn = event.container.connect(url, reconnect=False)
        event.container.create_receiver(self.conn, address)
        self.timer = event.container.schedule(30, self)

    def on_timer_task(self, event):
        sys.exit("receiver: timed out")

    def on_connection_opened(self, event):
        opened.append(event.connection.remote_container)

    def on_link_opened(self, event):
        if event.receiver:
            print("ready", flush=True)

    def on_message(self, event):
        m = event.message
        again = any(e["body"] == m.body for e in log)
        outcome = "accepted" if again else plan.get(m.body, "accepted")
        state = {"accepted": Delivery.ACCEPTED, "rejected": Delivery.REJECTED,
                 "released": Delivery.RELEASED}[outcome]
        log.append({"message_id": m.id, "correlation_id": m.correlation_id, "body": m.body,
                    "first_acquirer": m.first_acquirer, "delivery_count": m.delivery_count,
                    "outcome": outcome, "at": time.time()})
        event.delivery.update(state)
        event.delivery.settle()
        if outcome != "released":
            self.done += 1
        if self.done == count:
            self.timer.cancel()
            event.receiver.close()
            event.connection.close()


container = Container(Receiver())
container.container_id = cid
container.run()
print(json.dumps({"opened": opened, "log": log}), flush=True)
"""

SENDER = r"""
import json, sys, time
from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

url, address, cid, messages = sys.argv[1:5]
messages = json.loads(messages)
log, opened = [], []


class Deadline:
    def on_timer_task(self, event):
        sys.exit("sender: timed out")


class Sender(MessagingHandler):
    def __init__(self):
        super().__init__(auto_settle=True)
        self.next = 0
        self.settled = 0
        self.sending = {}

    def on_start(self, event):
        self.container = event.container
        self.conn = event.container.connect(url, reconnect=False)
        self.sender = event.container.create_sender(self.conn, address)
        self.deadline = event.container.schedule(30, Deadline())

    def on_timer_task(self, event):  # the next send, 50 ms after the one before
        self.send_one()

    def on_connection_opened(self, event):
        opened.append(event.connection.remote_container)

    def on_sendable(self, event):
        if self.next == 0:
            self.send_one()

    def send_one(self):
        if self.next >= len(messages) or not self.sender.credit:
            return
        message_id, correlation_id, body = messages[self.next]
        self.next += 1
        entry = {"message_id": message_id, "correlation_id": correlation_id, "body": body,
                 "sent": time.time()}
        delivery = self.sender.send(Message(id=message_id, correlation_id=correlation_id,
                                            body=body, durable=False))
        self.sending[delivery.tag] = entry
        log.append(entry)
        if self.next < len(messages):  # the next one in 50 ms, as an application sends
            self.container.schedule(0.05, self)

    def _outcome(self, event, outcome):
        entry = self.sending.pop(event.delivery.tag)
        entry["outcome"], entry["at"] = outcome, time.time()
        self.settled += 1
        if self.settled == len(messages):
            self.deadline.cancel()
            event.connection.close()

    def on_accepted(self, event):
        self._outcome(event, "accepted")

    def on_rejected(self, event):
        self._outcome(event, "rejected")

    def on_released(self, event):
        self._outcome(event, "released")


container = Container(Sender())
container.container_id = cid
container.run()
print(json.dumps({"opened": opened, "log": log}), flush=True)
"""


def _run_json(proc: subprocess.Popen[str], what: str) -> Any:
    out, err = proc.communicate(timeout=45)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed ({proc.returncode}): {err.strip()}")
    return json.loads(out.strip().splitlines()[-1])


@record.scenario(
    "10-journeys",
    "1.0",
    "Two Proton processes through RabbitMQ's AMQP 1.0 plugin, each on its own connection: a"
    " receiver on a queue (releases the first delivery of 'parcel 1', which comes back and is"
    " accepted; rejects 'parcel 2';"
    f" accepts the rest) and a sender sending {len(MESSAGES)} messages 50 ms apart (the last with a"
    " correlation-id and no message-id), each accepted by the broker.",
    setup=(("q", {}),),
    queues=(),
)
def s10_journeys(ctx: record.Ctx) -> dict[str, Any]:
    """Each message's journey (sent, accepted by the broker, delivered on the other connection,
    released and redelivered, accepted or rejected by the receiver) across two connections."""
    url = f"amqp://{record.BROKER_HOST}:{record.BROKER_PORT}"
    address = record.queue_address(ctx)
    names = {"sender": f"amqpscope-{ctx.name}-sender", "receiver": f"amqpscope-{ctx.name}-receiver"}
    receiver = subprocess.Popen(
        [
            sys.executable,
            "-c",
            RECEIVER,
            url,
            address,
            names["receiver"],
            str(len(MESSAGES)),
            json.dumps(PLAN),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert receiver.stdout is not None
    if receiver.stdout.readline().strip() != "ready":
        raise RuntimeError(f"receiver did not start: {receiver.communicate()[1].strip()}")
    sender = subprocess.Popen(
        [sys.executable, "-c", SENDER, url, address, names["sender"], json.dumps(MESSAGES)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    sending = _run_json(sender, "sender")
    receiving = _run_json(receiver, "receiver")
    sent, received = sending["log"], receiving["log"]
    time.sleep(0.2)  # the connections' close handshakes reach the capture
    n = record.Counts()
    n["connections"] = 2
    n["connections_opened"] = len(sending["opened"]) + len(receiving["opened"])
    n["container_ids"] = names
    n["address"] = address
    n["sent"] = sent
    n["received"] = received
    n["transfers_sent"] = len(sent)
    n["transfers_received"] = len(received)
    n["redeliveries"] = sum(1 for r in received if not r["first_acquirer"])
    n["sender_outcomes"] = dict(Counter(s["outcome"] for s in sent))
    n["receiver_outcomes"] = dict(Counter(r["outcome"] for r in received))
    return n
