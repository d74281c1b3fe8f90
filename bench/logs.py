"""Rate of reading frame-trace logs: log lines a second, per format, in the default (mypyc
compiled) build and the pure one.

The logs are made at run time (never committed) from the recorded ones in captures/:

- `proton`: captures/log-proton-broker.log's handshake and attach, then `--messages` transfers
  built on the trace's own transfer line (delivery ids and tags counted up, the payload as
  recorded), each answered by the broker's disposition as the trace has it, a flow every 1,000
  to keep credit, and the trace's detach and close. The tracker must find it clean, or the
  numbers would be of error paths.
- `proton+noise`: the same with `--noise` unrelated lines per frame line (a chatty application
  log around the trace).
- `router`: the same frames behind a Qpid Dispatch router's prefix (`2024-01-31
  12:00:00.123456 +0000 PROTOCOL (trace) [C1]:0 -> ...`): a timestamp to read on every line.
- `rhea`: captures/log-rhea-broker.log's start, then `--messages` transfers and dispositions
  as rhea prints them (JSON of the non-default fields), and its end.
- `proton-j`, `amqpnetlite`, `pyamqp`: captures/log-proton-broker.pcap's conversation as each
  library prints it (the printers tests/test_logs_<format>.py hold its grammar to, written from
  the library's formatting code), its first transfer and disposition repeated `--messages` times
  with delivery ids and tags counted up.
- `go-amqp`: a sender's debug log (handshake, `--messages` transfers and dispositions, end) as
  go-amqp's `frames.go` prints it.
- `pika (frame lines)`: `--messages` deliveries (method, header, body) as pika reads and prints
  them.
- `pika`: captures/log-pika-broker.log (a DEBUG log: most lines are pika's own chatter, few
  are frames) repeated to about the same number of lines.

    python3 bench/logs.py [--messages N] [--noise K] [--repeat R] [--builds compiled,pure]
                          [--keep DIR] [--only pika,rhea]

Each build reads each log in a process of its own: CPU seconds (median of R runs; the machine
is shared, so CPU, not wall time) of the LogReader alone and of LogReader and Tracker, no
start-up, no output; then `amqpscope summary` and `read --json` of the Proton log as whole
processes (start-up included). `compiled` is the default install (tools/compiled.py builds it
into build/compiled, as `make install` would); `pure` is this tree's sources; `NAME=FOLDER` is
another compiled build (`python3 tools/compiled.py FOLDER` of another commit: a baseline, run
alternately with this tree's so both see the same load). No target is
asserted here: the README quotes the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Final

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RECORDED = ROOT / "captures" / "log-proton-broker.log"


def synthesize(path: Path, messages: int, noise: int = 0) -> int:
    """Write the log; return its line count."""
    lines = RECORDED.read_text().splitlines()
    first_transfer = next(i for i, line in enumerate(lines) if "-> @transfer" in line)
    head = lines[:first_transfer]
    transfer = lines[first_transfer]
    disposition = next(line for line in lines if "<- @disposition" in line)
    flow = next(line for line in lines if "<- @flow" in line)
    close = [line for line in lines if "-> @close" in line or "<- @close" in line]
    detach = next(line for line in lines if "-> @detach" in line and "handle=0x0" in line)
    chatter = "2026-01-31 12:00:00,123 INFO app.worker: processed order 12345 in 3 ms"
    out = [*head]
    for i in range(messages):
        out.append(
            re.sub(
                r"delivery-id=0x[0-9a-f]+, delivery-tag=b\"[^\"]*\"",
                f'delivery-id=0x{i:x}, delivery-tag=b"{i}"',
                transfer,
            )
        )
        out.extend([chatter] * noise)
        out.append(
            re.sub(
                r"first=0x[0-9a-f]+(, last=0x[0-9a-f]+)?",
                f"first=0x{i:x}",
                disposition.replace("state=@accepted(36) []", "state=@accepted(36) []"),
            )
        )
        if i % 1000 == 999:
            out.append(re.sub(r"delivery-count=0x[0-9a-f]+", f"delivery-count=0x{i + 1:x}", flow))
    out.extend([detach, *close])
    path.write_text("\n".join(out) + "\n")
    return len(out)


def router(source: Path, path: Path) -> int:
    """The Proton log's frames as a Qpid Dispatch router logs them (`[C1]:0 -> ...`)."""
    out = []
    for i, line in enumerate(source.read_text().splitlines()):
        m = re.match(r"\[[^\]]+\]: (?:AMQP|SASL):FRAME:(\d*) *(->|<-) (.*)$", line)
        if m is None:
            out.append(line)
            continue
        channel, arrow, text = m.groups()
        minute, second, micro = i // 60_000_000 % 60, i // 1_000_000 % 60, i % 1_000_000
        stamp = f"2024-01-31 12:{minute:02d}:{second:02d}.{micro:06d}"
        body = f"[C1]:{channel} {arrow} {text}" if channel else f"[C1]:  {arrow} {text}"
        out.append(f"{stamp} +0000 PROTOCOL (trace) {body}")
    path.write_text("\n".join(out) + "\n")
    return len(out)


def rhea(path: Path, messages: int) -> int:
    """rhea's `DEBUG=rhea:frames` trace of `messages` sent and accepted."""
    lines = (ROOT / "captures" / "log-rhea-broker.log").read_text().splitlines()
    first = next(i for i, line in enumerate(lines) if "transfer#14" in line)
    head = lines[:first]
    transfer = lines[first]
    disposition = next(line for line in lines if "<- disposition#15" in line)
    end = [line for line in lines if "detach#16" in line or "close#18" in line]
    out = [*head]
    for i in range(messages):
        tag = ",".join(str(b) for b in str(i).encode())
        fields = (
            f'"delivery_id":{i},' if i else ""
        ) + f'"delivery_tag":{{"type":"Buffer","data":[{tag}]}}'
        out.append(
            re.sub(r"transfer#14 \{.*?\}\} ", f"transfer#14 {{{fields}}} ", transfer, count=1)
        )
        state = f'"first":{i},' if i else ""
        out.append(disposition.replace('{"role":true,', '{"role":true,' + state))
    out.extend(end)
    path.write_text("\n".join(out) + "\n")
    return len(out)


#: go-amqp's debug log of a sender (`conn.go`'s `TX (connWriter %p)` / `RX (connReader %p)`,
#: `internal/frames/frames.go`'s bodies): its handshake, the loop's transfer and disposition
#: (`{i}`, `{tag}`: the delivery's number and tag), and its end
_GO_FRAME: Final = "Frame{{Type: AMQP, Channel: 0, Body: "
_GO_TX: Final = "10:11:12.123456 TX (connWriter 0xc0001a2000): " + _GO_FRAME
_GO_RX: Final = "10:11:12.123456 RX (connReader 0xc0001a2000): " + _GO_FRAME
_GO_SOURCE: Final = (
    "source{{Address: , Durable: 0, ExpiryPolicy: , Timeout: 0, Dynamic: false, "
    "DynamicNodeProperties: map[], DistributionMode: , Filter: map[], DefaultOutcome: <nil> "
    "Outcomes: [], Capabilities: []}}"
)
_GO_TARGET: Final = (
    "source{{Address: q, Durable: 0, ExpiryPolicy: , Timeout: 0, Dynamic: false, "
    "DynamicNodeProperties: map[], Capabilities: []}}"
)
_GO_ATTACH: Final = (
    "Attach{{Name: l1, Handle: 0, Role: {role}, SenderSettleMode: <nil>, "
    f"ReceiverSettleMode: <nil>, Source: {_GO_SOURCE}, Target: {_GO_TARGET}, "
    "Unsettled: map[], IncompleteUnsettled: false, InitialDeliveryCount: 0, MaxMessageSize: 0, "
    "OfferedCapabilities: [], DesiredCapabilities: [], Properties: map[]}}"
)
_GO_HEAD: Final = (
    _GO_TX + "Open{{ContainerID : go-1, Hostname: localhost, MaxFrameSize: 65536, "
    "ChannelMax: 65535, IdleTimeout: 0s, OutgoingLocales: [], IncomingLocales: [], "
    "OfferedCapabilities: [], DesiredCapabilities: [], Properties: map[]}}}}",
    _GO_RX + "Open{{ContainerID : rabbit@vm, Hostname: , MaxFrameSize: 65536, "
    "ChannelMax: 2047, IdleTimeout: 1m0s, OutgoingLocales: [], IncomingLocales: [], "
    "OfferedCapabilities: [], DesiredCapabilities: [], Properties: map[]}}}}",
    _GO_TX + "Begin{{RemoteChannel: <nil>, NextOutgoingID: 0, IncomingWindow: 5000, "
    "OutgoingWindow: 4294967295, HandleMax: 4294967295, OfferedCapabilities: [], "
    "DesiredCapabilities: [], Properties: map[]}}}}",
    _GO_RX + "Begin{{RemoteChannel: 0, NextOutgoingID: 0, IncomingWindow: 65535, "
    "OutgoingWindow: 65535, HandleMax: 255, OfferedCapabilities: [], "
    "DesiredCapabilities: [], Properties: map[]}}}}",
    _GO_TX + _GO_ATTACH.replace("{role}", "Sender") + "}}",
    _GO_RX + _GO_ATTACH.replace("{role}", "Receiver") + "}}",
    _GO_RX + "Flow{{NextIncomingID: 0, IncomingWindow: 65535, NextOutgoingID: 0, "
    "OutgoingWindow: 65535, Handle: 0, DeliveryCount: 0, LinkCredit: 4294967295, "
    "Available: <nil>, Drain: false, Echo: false, Properties: map[]}}}}",
)
_GO_LOOP: Final = (
    _GO_TX + "Transfer{{Handle: 0, DeliveryID: {i}, DeliveryTag: {tag}, MessageFormat: 0, "
    "Settled: false, More: false, ReceiverSettleMode: <nil>, State: <nil>, Resume: false, "
    "Aborted: false, Batchable: false, Payload [size]: 49}}}}",
    _GO_RX + "Disposition{{Role: Receiver, First: {i}, Last: <nil>, Settled: true, "
    "State: StateAccepted{{}}, Batchable: false}}}}",
)
_GO_END: Final = (
    _GO_TX + "Detach{{Handle: 0, Closed: true, Error: *Error(nil)}}}}",
    _GO_RX + "Detach{{Handle: 0, Closed: true, Error: *Error(nil)}}}}",
    _GO_TX + "Close{{Error: *Error(nil)}}}}",
    _GO_RX + "Close{{Error: *Error(nil)}}}}",
)


def goamqp(path: Path, messages: int) -> int:
    """go-amqp's debug log of `messages` sent and accepted."""
    out = [line.format() for line in _GO_HEAD]
    for i in range(messages):
        tag = str(i).encode().hex().upper()
        out.extend(line.format(i=i, tag=tag) for line in _GO_LOOP)
    out.extend(line.format() for line in _GO_END)
    path.write_text("\n".join(out) + "\n")
    return len(out)


#: a format's transfer and disposition as its printer writes them -> the numbers put in
#: ((pattern, replacement of message i), ...) for the transfer, then for the disposition
_COUNTED: Final[dict[str, tuple[tuple[tuple[str, Callable[[int], str]], ...], ...]]] = {
    "proton-j": (
        (
            (r"deliveryId=\d+", lambda i: f"deliveryId={i}"),
            (r'deliveryTag="[^"]*"', lambda i: f'deliveryTag="{i}"'),
        ),
        ((r"first=\d+, last=\w+", lambda i: f"first={i}, last=null"),),
    ),
    "amqpnetlite": (
        (
            (r"delivery-id:\d+", lambda i: f"delivery-id:{i}"),
            (r"delivery-tag:[0-9A-F]+", lambda i: f"delivery-tag:{str(i).encode().hex().upper()}"),
        ),
        ((r"first:\d+,last:\d+", lambda i: f"first:{i}"),),
    ),
    "pyamqp": (
        (
            (r"delivery_id=\d+", lambda i: f"delivery_id={i}"),
            (r"delivery_tag=b'[^']*'", lambda i: f"delivery_tag=b'{i}'"),
        ),
        ((r"first=\d+, last=\w+", lambda i: f"first={i}, last=None"),),
    ),
}


def printed(fmt: str, path: Path, messages: int) -> int:
    """The recorded Proton conversation (captures/log-proton-broker.pcap) as `fmt` prints it,
    by the printers the tests hold that grammar to (tests/test_logs_<format>.py, written from
    the library's formatting code), its first link's transfer and disposition repeated
    `messages` times with delivery ids and tags counted up."""
    sys.path.insert(0, str(ROOT))
    if fmt == "proton-j":
        from tests import test_logs_protonj as pj

        wire = pj.captured("log-proton-broker")
        lines = [pj.line(f, "->" if f.direction == "c2s" else "<-").rstrip("\n") for f in wire]
    elif fmt == "amqpnetlite":
        from tests import test_logs_amqpnetlite as nl

        lines = [nl.line(f).rstrip("\n") for f in nl.captured("log-proton-broker")]
    elif fmt == "pyamqp":
        from tests import test_logs_pyamqp as pa

        wire = pa.captured("log-proton-broker")
        lines = [pa.received_line(f.data[f.data[4] * 4 :]).rstrip("\n") for f in wire]
    else:
        raise ValueError(fmt)
    first = next(i for i, line in enumerate(lines) if "ransfer" in line)
    last = next(i for i, line in enumerate(lines) if "isposition" in line)
    transfer, disposition = lines[first], lines[last]
    out = lines[:first]
    for i in range(messages):
        for line, counted in zip((transfer, disposition), _COUNTED[fmt], strict=True):
            for pattern, number in counted:
                line = re.sub(pattern, number(i), line, count=1)
            out.append(line)
    out.extend(lines[last + 1 :])
    path.write_text("\n".join(out) + "\n")
    return len(out)


def pika_frames(path: Path, messages: int) -> int:
    """Nothing but frame lines for pika: `messages` deliveries (method, header, body) as pika
    reads them off the wire and its `repr` prints them (pika's DEBUG log prints few frames; this
    is the rate of the frame lines themselves)."""
    from pika import frame, spec

    prefix = "2026-11-26 06:51:38,549 DEBUG pika.channel Discarding frame "
    properties = spec.BasicProperties(content_type="text/plain", delivery_mode=2)
    out = []
    for i in range(messages):
        body = f"log message {i}".encode()
        deliver = spec.Basic.Deliver("ctag1.1161d78c", i + 1, False, "", "q")
        for sent in (
            frame.Method(1, deliver),
            frame.Header(1, len(body), properties),
            frame.Body(1, body),
        ):
            out.append(f"{prefix}{frame.decode_frame(sent.marshal())[1]!r}")
    path.write_text("\n".join(out) + "\n")
    return len(out)


def pika(path: Path, lines: int) -> int:
    """The recorded pika DEBUG log, repeated to about `lines` lines."""
    text = (ROOT / "captures" / "log-pika-broker.log").read_text()
    count = text.count("\n")
    times = max(1, lines // count)
    path.write_text(text * times)
    return count * times


#: run by each build's interpreter: the reader (and tracker) over one log, CPU seconds
RUN = r"""
import json, statistics, sys, time
from amqpscope.logs import proton
from amqpscope.logs.reader import LogReader
from amqpscope.track.tracker import Tracker

path, fmt, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
out = {}
caches = []
for module in list(sys.modules.values()):  # the grammars' caches (`logs/shapes.py`), times
    if not module.__name__.startswith("amqpscope.logs."):
        continue
    for name in ("_CACHE", "_OLD_CACHE", "_SHAPES"):  # those of this tree and of older builds
        found = getattr(module, name, None)
        if name == "_CACHE" and isinstance(found, dict):  # pika's: its entries by key
            caches.append(found)
            continue
        for cache in found.values() if isinstance(found, dict) else [found]:  # rhea's by code
            cache = getattr(cache, "cache", cache)
            if cache is not None:
                caches += [cache.entries, getattr(cache, "recent", [])]
    for name in ("_MINUTES", "_SECONDS"):
        if isinstance(getattr(module, name, None), dict):
            caches.append(getattr(module, name))
for track in (False, True):
    took = []
    for _ in range(repeat):
        for cache in caches:  # every run starts cold
            cache.clear()
        start = time.process_time()
        reader = LogReader(path, fmt, messages=False)
        tracker = Tracker(journeys=False) if track else None
        with open(path, encoding="utf-8") as log:
            for number, line in enumerate(log, 1):
                for frame in reader.feed(line, number):
                    if tracker is not None:
                        tracker.feed(frame)
        for frame in reader.flush():
            if tracker is not None:
                tracker.feed(frame)
        reader.finish()
        if tracker is not None:
            tracker.finish()
        took.append(time.process_time() - start)
    out["tracker" if track else "reader"] = statistics.median(took)
    out["frames"] = reader.number
    out["findings"] = [f.code for f in reader.findings][:3]
    if tracker is not None:
        out["bad"] = [f.code for f in tracker.findings if f.severity != "info"][:3]
print(json.dumps(out))
"""


def builds(names: list[str]) -> dict[str, tuple[list[str], dict[str, str]]]:
    """Each build's interpreter and environment."""
    out: dict[str, tuple[list[str], dict[str, str]]] = {}
    for name in names:
        if name == "pure":
            out[name] = ([sys.executable], {**os.environ, "PYTHONPATH": str(ROOT)})
        elif "=" in name:  # another compiled build, kept as a baseline: name=its folder
            label, folder = name.split("=", 1)
            env = dict(os.environ)
            env.pop("PYTHONPATH", None)
            out[label] = ([str(Path(folder) / "bin" / "python")], env)
        elif name == "compiled":
            sys.path.insert(0, str(ROOT / "tools"))
            import compiled

            script = compiled.install()
            env = dict(os.environ)
            env.pop("PYTHONPATH", None)  # the build's own amqpscope, not this tree's
            out[name] = ([str(script.parent / "python")], env)
        else:
            raise SystemExit(f"logs.py: no build {name!r} (compiled, pure, NAME=FOLDER)")
    return out


def child_cpu(cmd: list[str], env: dict[str, str], repeat: int) -> float:
    """Median CPU seconds of a whole process (start-up included)."""
    took = []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(
            cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd="/"
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        took.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(took)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--noise", type=int, default=4, help="unrelated lines per frame line")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--builds", default="compiled,pure")
    parser.add_argument("--keep", type=Path, help="write the logs here and keep them")
    parser.add_argument(
        "--only", help="these formats' logs only (comma-separated, e.g. pika,rhea), no processes"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        logs: list[tuple[str, str, Path, int]] = []
        plain = folder / f"proton-{args.messages}.log"
        logs.append(("proton", "proton", plain, synthesize(plain, args.messages)))
        noisy = folder / f"proton-{args.messages}-noise{args.noise}.log"
        count = synthesize(noisy, args.messages, args.noise)
        logs.append((f"proton+noise ({args.noise}/frame)", "proton", noisy, count))
        routed = folder / f"router-{args.messages}.log"
        logs.append(("router", "router", routed, router(plain, routed)))
        rhea_log = folder / f"rhea-{args.messages}.log"
        logs.append(("rhea", "rhea", rhea_log, rhea(rhea_log, args.messages)))
        for fmt in ("proton-j", "amqpnetlite", "pyamqp"):
            path = folder / f"{fmt}-{args.messages}.log"
            logs.append((fmt, fmt, path, printed(fmt, path, args.messages)))
        go_log = folder / f"go-amqp-{args.messages}.log"
        logs.append(("go-amqp", "go-amqp", go_log, goamqp(go_log, args.messages)))
        pika_log = folder / "pika-frames.log"
        logs.append(("pika (frame lines)", "pika", pika_log, pika_frames(pika_log, args.messages)))
        pika_log = folder / "pika.log"
        logs.append(("pika (DEBUG log)", "pika", pika_log, pika(pika_log, 2 * args.messages)))
        if args.only:
            logs = [log for log in logs if log[1] in args.only.split(",")]
        print(f"{args.messages:,} messages; CPU seconds, median of {args.repeat}")
        print(
            f"| {'log':<24} | {'build':<8} | {'lines':>9} | {'frames':>7} "
            f"| {'reader lines/s':>14} | {'+tracker lines/s':>16} |"
        )
        print(f"|{'-' * 26}|{'-' * 10}|{'-' * 11}|{'-' * 9}|{'-' * 16}|{'-' * 18}|")
        interpreters = builds(args.builds.split(","))
        for label, fmt, path, lines in logs:
            for build, (python, env) in interpreters.items():
                result = subprocess.run(
                    [*python, "-c", RUN, str(path), fmt, str(args.repeat)],
                    capture_output=True,
                    text=True,
                    env=env,
                    cwd="/",
                )
                if result.returncode:
                    raise SystemExit(f"logs.py: {build} on {label}: {result.stderr[-2000:]}")
                said = json.loads(result.stdout)
                if said["findings"] or (fmt == "proton" and said.get("bad")):
                    raise SystemExit(f"logs.py: {label} is not clean: {said}")
                print(
                    f"| {label:<24} | {build:<8} | {lines:>9,} | {said['frames']:>7,} "
                    f"| {lines / said['reader']:>14,.0f} | {lines / said['tracker']:>16,.0f} |"
                )
        if args.only:
            return 0
        print()
        print(
            f"| {'whole process (Proton log)':<34} | {'build':<8} | {'CPU s':>6} | {'lines/s':>9} |"
        )
        print(f"|{'-' * 36}|{'-' * 10}|{'-' * 8}|{'-' * 11}|")
        lines = logs[0][3]
        for build, (python, env) in interpreters.items():
            cli = [*python, "-m", "amqpscope.cli"]
            for what, extra in (("amqpscope summary", []), ("amqpscope read --json", ["--json"])):
                verb = "summary" if what.endswith("summary") else "read"
                seconds = child_cpu([*cli, verb, str(plain), *extra], env, args.repeat)
                print(f"| {what:<34} | {build:<8} | {seconds:6.2f} | {lines / seconds:9,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
