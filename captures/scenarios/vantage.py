"""Two vantage points of the same traffic, one with a clock that is off, and a client's log
(issue 44: what `amqpscope read A B` merges into one timeline).

Two pika processes through the local RabbitMQ, as in journeys.py: a consumer process with two
competing consumers (A and B, each on its own connection, prefetch 1), A nacking with requeue
its first deliveries; and a publisher process, on a third connection, publishing with confirms
and logging at DEBUG (pika's log, `091-vantage.log`). Two tcpdumps record it: the scenario's
own (`091-vantage.pcap`, from before anything connects) and a second one started once the
consumers are ready (so it sees their connections mid-stream), whose file is then shifted by
`SHIFT` seconds with `editcap -t` (`091-vantage-b.pcap`): a second host whose clock runs ahead.
Needs: pika (the client), RabbitMQ on 127.0.0.1:5672, tcpdump and editcap (Debian's
wireshark-common).

Ground truth is the clients': which consumer got which message, what it answered, which
publishes the broker confirmed (as journeys.py), and the shift that was applied; never read
from the captures. qdrouterd (a Qpid Dispatch router, for a 1.0 hop) is not in this Debian
release's archive, so the router leg of issue 44 is not recorded here.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import recorder as record  # captures/recorder/: the harness and shared helpers

from scenarios import journeys  # loaded before this module, in name order

#: the messages published: (message-id or None, correlation-id or None, body)
MESSAGES = (
    ("v0", None, "parcel 0"),
    ("v1", None, "parcel 1"),
    ("v2", None, "parcel 2"),
    ("v3", None, "parcel 3"),
    (None, "w4", "parcel 4"),
)
#: how many first deliveries consumer A nacks (requeue=True)
NACKS = 2
#: what editcap adds to every time of the second capture: its host's clock is ahead by this
SHIFT = 1.234
NAME = "091-vantage"

#: the consumers are journeys.py's (the same competing pair, A nacking its first deliveries,
#: loaded before this module: record.py loads captures/scenarios/ in name order), saying their
#: connections' local ports when ready: the captures keep only this run's connections (other
#: recordings may share the broker meanwhile)
CONSUMERS: str = journeys.CONSUMERS.replace(
    'print("ready", flush=True)',
    'print("ready", *(c._impl._transport._sock.getsockname()[1] for c, _, _ in'
    " clients.values()), flush=True)",
)

PUBLISHER = r"""
import json, logging, sys, time
import pika

host, port, queue, name, log_path = sys.argv[1:6]
messages = json.loads(sys.argv[6])
logging.basicConfig(filename=log_path, level=logging.DEBUG,
                    format="%(asctime)s %(levelname)s %(name)s %(message)s")
conn = pika.BlockingConnection(pika.ConnectionParameters(
    host=host, port=int(port), credentials=pika.PlainCredentials("guest", "guest"),
    connection_attempts=1, socket_timeout=5, client_properties={"connection_name": name},
))
port = conn._impl._transport._sock.getsockname()[1]
chan = conn.channel()
chan.confirm_delivery()
# nothing is published yet: a get-empty, which pika's log shows (Received Basic.GetEmpty), as
# it shows none of the publishes or confirms
empty = chan.basic_get(queue)[0] is None
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


def _run_json(proc: subprocess.Popen[str], what: str) -> Any:
    out, err = proc.communicate(timeout=40)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed ({proc.returncode}): {err.strip()}")
    return json.loads(out.strip().splitlines()[-1])


#: where the scenario leaves the filter of its connections for `_keep_mine`
PORTS = f".{NAME}.ports"
_QUIET: dict[str, Any] = {"check": True, "capture_output": True}


def _only(ports: list[int]) -> str:
    """The filter of this run's connections: the broker's port and one of the clients'."""
    return f"tcp port {record.BROKER_PORT} and (" + " or ".join(f"port {p}" for p in ports) + ")"


def _keep_mine(capture: Path, out: Path, _name: str) -> None:
    """record.py's capture of the scenario, cut to this run's connections (the clients' ports
    the scenario left in `PORTS`): another recording's traffic to the shared broker is no part
    of this story."""
    ports = out / PORTS
    mine = ports.read_text()
    ports.unlink()
    kept = capture.with_name(capture.name + ".kept")
    subprocess.run(["tcpdump", "-Z", "root", "-r", str(capture), "-w", str(kept), mine], **_QUIET)
    kept.replace(capture)
    capture.chmod(0o644)


@record.scenario(
    NAME,
    "0-9-1",
    "Two vantage points of two pika processes: consumers A and B (own connections, prefetch 1)"
    f" compete on one queue, A nacks with requeue its first {NACKS} first deliveries; a"
    f" publisher on a third connection publishes {len(MESSAGES)} messages with confirms and"
    " logs at DEBUG (091-vantage.log). A second tcpdump, started once the consumers are"
    f" ready, is shifted by +{SHIFT} s with editcap -t (091-vantage-b.pcap).",
    post=_keep_mine,
)
def s_vantage(ctx: record.Ctx) -> dict[str, Any]:
    """One story seen from two captures (one late, its clock ahead) and the publisher's log."""
    editcap = shutil.which("editcap")
    if editcap is None:
        raise RuntimeError("editcap is not on PATH (Debian's wireshark-common has it)")
    out = Path(ctx.capture.path).parent
    log_path = out / f"{NAME}.log"
    log_path.unlink(missing_ok=True)
    second = record.Capture(record.CaptureSpec(), out / f"{NAME}-b.pcap.raw")
    q = ctx.q()
    where = (record.BROKER_HOST, str(record.BROKER_PORT), q)
    counts = (str(len(MESSAGES)), str(NACKS))
    consumers = subprocess.Popen(
        [sys.executable, "-c", CONSUMERS, *where, f"amqpscope {ctx.name}", *counts],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert consumers.stdout is not None
    try:
        ready = consumers.stdout.readline().split()
        if not ready or ready[0] != "ready":
            raise RuntimeError(f"consumers did not start: {consumers.communicate()[1].strip()}")
        ports = [int(p) for p in ready[1:]]
        second.start()
        publisher = subprocess.Popen(
            [
                sys.executable,
                "-c",
                PUBLISHER,
                *where,
                f"amqpscope {ctx.name} publisher",
                str(log_path),
                json.dumps(MESSAGES),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        sent = _run_json(publisher, "publisher")
        published = sent["log"]
        ports.append(int(sent["port"]))
        delivered = _run_json(consumers, "consumers")
        time.sleep(0.5)  # the connections' close handshakes reach both captures
        stats = second.stop()
    finally:
        second.kill()
        if consumers.poll() is None:
            consumers.kill()
    shifted = out / f"{NAME}-b.pcap"
    mine = _only(ports)
    kept = out / f"{NAME}-b.pcap.kept"
    subprocess.run(
        ["tcpdump", "-Z", "root", "-r", str(second.path), "-w", str(kept), mine], **_QUIET
    )
    subprocess.run([editcap, "-t", f"+{SHIFT}", str(kept), str(shifted)], **_QUIET)
    second.path.unlink()
    kept.unlink()
    (out / PORTS).write_text(mine)  # for `_keep_mine`, once record.py has the first file
    shifted.chmod(0o644)
    log_path.chmod(0o644)
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
    n["gets"] = 1
    n["get_empty"] = 1 if sent["get_empty"] else 0
    n["published"] = published
    n["delivered"] = delivered
    n["vantage"] = {
        "second": shifted.name,
        "second_command": shlex.join(second.command),
        "second_packets": stats.get("packets_captured"),
        "shift": SHIFT,
        "shift_command": f"editcap -t +{SHIFT} {second.path.name} {shifted.name}",
        "second_started": "once the consumers were ready, before the publisher connected",
        "kept": f"both files keep only this run's connections (tcpdump -r -w '{mine}')",
        "log": log_path.name,
        "log_of": "publisher",
    }
    return n
