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

import shlex
import shutil
import subprocess
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
    consumers, ready = journeys.start_consumers(ctx, len(MESSAGES), NACKS, CONSUMERS)
    try:
        ports = [int(p) for p in ready]
        second.start()
        sent = journeys.publish(ctx, MESSAGES, str(log_path))
        published = sent["log"]
        ports.append(int(sent["port"]))
        delivered = journeys.run_json(consumers, "consumers")
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
    n = journeys.journey_counts(
        ctx,
        published,
        delivered,
        gets=1,
        get_empty=1 if sent["get_empty"] else 0,
    )
    n["vantage"] = {
        "second": shifted.name,
        "second_command": shlex.join(
            a.replace(str(second.path), second.path.name) for a in second.command
        ),
        "second_packets": stats.get("packets_captured"),
        "shift": SHIFT,
        "shift_command": f"editcap -t +{SHIFT} {second.path.name} {shifted.name}",
        "second_started": "once the consumers were ready, before the publisher connected",
        "kept": f"both files keep only this run's connections (tcpdump -r -w '{mine}')",
        "log": log_path.name,
        "log_of": "publisher",
    }
    return n
