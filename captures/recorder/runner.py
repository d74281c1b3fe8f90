"""Running the recordings: each scenario in a child process under capture, its ground truth
JSON, the tshark check, and the command line (`python3 captures/record.py`)."""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from recorder.amqp091 import broker_housekeeping
from recorder.brokers import broker_or_error, software_versions
from recorder.harness import (
    BROKER_PORT,
    HERE,
    P2P_PORT,
    SCENARIOS,
    WS_PORT,
    Capture,
    Ctx,
    log,
    pcap_file_info,
    ports_of,
    wait_quiet,
)
from recorder.tls import TLS_PORT

#: what `--help` says first (the first line of record.py's docstring)
DESCRIPTION = "Record real AMQP 0-9-1 and AMQP 1.0 traffic into pcap files with ground truth."


def run_child(name: str, out: Path, result: Path) -> int:
    """Run one scenario under capture; write expect/capture facts to `result`."""
    sc = SCENARIOS[name]
    part = out / f"{name}.{sc.capture.ext}.part"
    ctx = Ctx(name=name, capture=Capture(sc.capture, part))
    ports = ports_of(sc.port) if sc.port else {BROKER_PORT}
    if sc.needs_broker:
        broker_housekeeping(ctx, sc, declare=True)
    if sc.prepare:
        sc.prepare(ctx)
    if leftovers := wait_quiet(ports | {BROKER_PORT}, 10):
        log(f"  WARNING: connections still open before capture, they may leak into it: {leftovers}")
    try:
        if not sc.manual_capture:
            ctx.capture.start()
        expect = sc.run(ctx)
        if not ctx.capture.started:
            raise RuntimeError("scenario never started its capture")
        time.sleep(0.5)
        capture_ports = ports_of(ctx.port) if ctx.port else ports
        if leftovers := wait_quiet(capture_ports, 5):
            log(f"  WARNING: connections still open when stopping the capture: {leftovers}")
        stats = ctx.capture.stop()
    finally:
        ctx.capture.kill()
        if sc.cleanup is not None:
            sc.cleanup(ctx)
        if sc.needs_broker:
            with contextlib.suppress(Exception):
                broker_housekeeping(ctx, sc, declare=False)
    result.write_text(
        json.dumps(
            {
                "expect": expect,
                "port": ctx.port if ctx.port is not None else sc.port,
                "capture": {
                    "tool": sc.capture.tool,
                    "command": shlex.join(ctx.capture.command),
                    "interface": sc.capture.interface,
                    "filter": ctx.capture.bpf,
                    **stats,
                },
            }
        )
    )
    return 0


def run_one(
    name: str, out: Path, recorded_with: dict[str, Any], timeout: float | None
) -> str | None:
    """Record one scenario in a child process group; return an error string or None."""
    sc = SCENARIOS[name]
    result = out / f".{name}.result.json"
    part = out / f"{name}.{sc.capture.ext}.part"
    result.unlink(missing_ok=True)
    cmd = [
        sys.executable,
        str(HERE / "record.py"),
        "--child",
        name,
        "--out",
        str(out),
        "--result",
        str(result),
    ]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, start_new_session=True)
    limit = timeout or sc.timeout
    try:
        rc = proc.wait(limit)
    except subprocess.TimeoutExpired:
        rc = None
    except KeyboardInterrupt:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    try:
        if rc is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            return f"timed out after {limit:.0f}s"
        if rc != 0 or not result.exists():
            return f"scenario process exited with {rc}"
        data = json.loads(result.read_text())
        final = out / f"{name}.{sc.capture.ext}"
        os.replace(part, final)
        final.chmod(0o644)
        if sc.post is not None:
            sc.post(final, out, name)
        doc = {
            "scenario": name,
            "description": sc.description,
            "protocol": sc.protocol,
            "port": data["port"],
            "file": final.name,
            "capture": {
                **data["capture"],
                "command": data["capture"]["command"].replace(str(part), final.name),
                **pcap_file_info(final),
            },
            "expect": data["expect"],
            "recorded_with": recorded_with,
            "recorded_at": dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat(),
        }
        (out / f"{name}.json").write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n")
        (out / f"{name}.json").chmod(0o644)
        return None
    finally:
        result.unlink(missing_ok=True)
        part.unlink(missing_ok=True)


#: scenario name -> a port of its own tshark is told is AMQP (scenario modules add to it)
DECODE_AS_AMQP: dict[str, int] = {}


def tshark_check(out: Path, name: str) -> tuple[bool, str]:
    """Independent look with tshark: the file reads cleanly and AMQP shows up where expected."""
    sc = SCENARIOS[name]
    path = out / f"{name}.{sc.capture.ext}"
    cmd = ["tshark", "-n", "-r", str(path), "-Y", "amqp", "-T", "fields", "-e", "frame.number"]
    if sc.port == P2P_PORT:
        cmd[1:1] = ["-d", f"tcp.port=={P2P_PORT},amqp"]
    elif isinstance(sc.port, int) and sc.port not in (BROKER_PORT, TLS_PORT, WS_PORT):
        cmd[1:1] = ["-d", f"tcp.port=={sc.port},amqp"]  # garagemq's: not AMQP's port either
    what = "AMQP"
    keys = out / f"{name}.keys"
    if name in DECODE_AS_AMQP:
        cmd[1:1] = ["-d", f"tcp.port=={DECODE_AS_AMQP[name]},amqp"]
    elif sc.port == TLS_PORT:
        # Wireshark decrypts with the key log (or the secrets in the pcapng). It does not follow
        # the in-band upgrade (10-tls-inband): there it sees the two `AMQP 2 1 0 0` headers.
        what = "TLS"
        cmd[cmd.index("amqp")] = "tls"
        if keys.exists():
            cmd[1:1] = ["-o", f"tls.keylog_file:{keys}"]
    elif sc.port == WS_PORT:  # Wireshark reads no AMQP inside WebSocket: check the framing
        what = "WebSocket"
        cmd[cmd.index("amqp")] = "websocket"
        cmd[1:1] = ["-d", f"tcp.port=={WS_PORT},http"]
    proc = subprocess.run(
        cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120
    )
    if proc.returncode != 0 or "cut short" in proc.stderr:
        return False, f"tshark error: {proc.stderr.strip()}"
    frames = len(proc.stdout.split())
    if sc.protocol in ("0-9-1", "1.0") and frames == 0:
        return False, f"tshark found no {what} packets"
    if sc.protocol == "none" and frames:
        return False, f"tshark found {frames} AMQP packets in a non-AMQP capture"
    return True, f"{frames} packets with {what} (tshark)"


def main(argv: list[str] | None = None) -> int:
    """CLI entry point (parent orchestration, or --child for one scenario)."""
    parser = argparse.ArgumentParser(description=DESCRIPTION)
    parser.add_argument("--only", nargs="+", metavar="NAME", help="record only these scenarios")
    parser.add_argument(
        "--out", type=Path, default=HERE, help="output directory (default: captures/)"
    )
    parser.add_argument("--list", action="store_true", help="list scenarios and exit")
    parser.add_argument(
        "--ensure-broker",
        action="store_true",
        help="only start/configure RabbitMQ and garagemq, then exit (used by `make broker`)",
    )
    parser.add_argument("--timeout", type=float, help="per-scenario timeout override, seconds")
    parser.add_argument("--no-check", action="store_true", help="skip the tshark sanity check")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    out = args.out.resolve()

    if args.child:
        # The parent's timeout sends SIGTERM; turn it into SystemExit so `finally`
        # blocks stop tcpdump and delete this scenario's queues.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(f"{args.child}: terminated (timeout)"))
        return run_child(args.child, out, args.result)
    if args.ensure_broker:
        return broker_or_error()
    if args.list:
        for sc in SCENARIOS.values():
            print(f"{sc.name:20} {sc.protocol:6} {sc.description}")
        return 0

    names = args.only or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(unknown)} (see --list)")
    tools = {"tcpdump"} | {SCENARIOS[n].capture.tool for n in names}
    if missing := [t for t in sorted(tools) if not shutil.which(t)]:
        log(f"missing capture tools: {missing}")
        return 2
    if os.geteuid() != 0:
        log("WARNING: not root; packet capture will probably fail")
    out.mkdir(parents=True, exist_ok=True)

    started = time.monotonic()
    needs_broker = any(SCENARIOS[n].needs_broker for n in names)
    if needs_broker and broker_or_error():
        return 1
    recorded_with = software_versions(with_broker=needs_broker)
    log(f"software: {json.dumps(recorded_with)}")

    failures: dict[str, str] = {}
    for name in names:
        t0 = time.monotonic()
        log(f"{name}: recording")
        if err := run_one(name, out, recorded_with, args.timeout):
            failures[name] = err
            log(f"{name}: FAILED: {err}")
        else:
            size = (out / f"{name}.{SCENARIOS[name].capture.ext}").stat().st_size
            log(f"{name}: ok ({size} bytes, {time.monotonic() - t0:.1f}s)")

    if not args.no_check and shutil.which("tshark"):
        log("sanity check with tshark:")
        for name in names:
            if name in failures:
                continue
            good, verdict = tshark_check(out, name)
            log(f"  {name:20} {verdict}")
            if not good:
                failures[name] = verdict
    ok = len(names) - len(failures)
    log(f"finished in {time.monotonic() - started:.0f}s; {ok}/{len(names)} scenarios ok")
    for name, err in failures.items():
        log(f"  FAILED {name}: {err}")
    return 1 if failures else 0
