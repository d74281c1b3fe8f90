"""Live capture under load: does `amqpscope live lo` keep up, and lose nothing?

A pika client (a process of its own) publishes to an exclusive queue and gets and acks every
message back, as fast as the local RabbitMQ allows, for `--seconds`; `amqpscope live lo -f 'tcp
port 5672' --json` runs alongside (its NDJSON read and counted here, in big chunks). Reported:

* the kernel's drops as the capture tool counts them, and what amqpscope discarded from a full
  spool (both should be 0), and the tool's packet count against the packets decoded;
* frames decoded a second, over the run and per interval; and the decoder's cost in CPU (the
  amqpscope process alone, not tcpdump): frames per CPU second is how fast it decodes flat out,
  the capacity the load did not reach;
* the decoder's lag (the capture record's `max_lag`, and the status lines on stderr);
* RSS of the amqpscope process over time (memory flat: the last third against the first).

Targets (checked at the end; missing one is exit status 1, as any drop is): at least
`--min-rate` messages a second published and got back (1,000) and RSS growth from the first
third to the end under `--max-rss-growth` MiB (8). tests/test_live.py's soak and replay tests
assert the behaviour (every packet captured is decoded, none discarded) but not these numbers,
which a loaded 2-core machine can miss.

With `--pause S`, a third of the way in amqpscope is stopped (SIGSTOP) for S seconds while tcpdump
spools on, and the time it takes to decode the backlog gives its speed flat out (the load alone
may not reach it). With `--baseline`, `tcpdump -w /dev/null` alone under the same load first.

With `--stall S`, no amqpscope: tcpdump alone writes a file under the same load with each of
`STALL_OPTIONS` in turn (`--rounds` times, alternating), stopped (SIGSTOP) for S seconds a third
of the way in, as a loaded machine starves it: the kernel drops of each are what its ring could
not hold (`capture/live/tools.py`'s choice of options).

With `--load replay`, no broker and no pika client: bench/replay_load.py plays a consumer
connection over loopback TCP (frames encoded by pika) at `--rate` messages a second (about three
packets each; 8,000 is the issue's ~25k packets/s), `--batch` of them to a write.

    python3 bench/live.py [--seconds S] [--build installed|pure|compiled] [--baseline]
                          [--interval S] [--spool-size MB] [--pause S]
                          [--load pika|replay] [--rate MSGS] [--batch N]
    python3 bench/live.py --stall S [--seconds S] [--rounds N]
    python3 bench/live.py --metrics|--compare [--scrape-interval S] [--queues Q] ...

With `--metrics`, live serves `--metrics` and a thread scrapes /metrics every
`--scrape-interval` seconds while the load runs, as Prometheus asks (OpenMetrics, gzip): each
scrape's time (target: the slowest after the first under `--max-scrape-ms`, 100; the first
renders while it waits) and the series it held (`--load replay --queues 5000`: a consumer on
each of 5,000 queues, two queue families: 10,000 series). With `--compare`, live alone and then
live --metrics under the same load: their kernel and amqpscope drops side by side (target: no
more with --metrics).

Needs root (capture on lo); with the pika load, the broker on 127.0.0.1:5672, and it takes the
broker lock.
"""

from __future__ import annotations

import argparse
import fcntl
import gzip
import json
import os
import platform
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import run  # noqa: E402  (bench/run.py: the builds)

LOCK = "/tmp/amqpscope-broker.lock"

LOAD = r"""
import sys, time, pika
seconds = float(sys.argv[1])
conn = pika.BlockingConnection(pika.ConnectionParameters(
    "127.0.0.1", 5672, client_properties={"connection_name": "amqpscope-bench-live"}))
ch = conn.channel()
q = ch.queue_declare("", exclusive=True).method.queue
body = b"bench " * 20
end = time.monotonic() + seconds
sent = got = 0
while time.monotonic() < end:
    for _ in range(50):
        ch.basic_publish("", q, body)
    sent += 50
    for _ in range(50):
        method, _props, _body = ch.basic_get(q)
        if method is None:
            break
        ch.basic_ack(method.delivery_tag)
        got += 1
while got < sent:
    method, _props, _body = ch.basic_get(q)
    if method is None:
        break
    ch.basic_ack(method.delivery_tag)
    got += 1
conn.close()
print(sent, got)
"""


def cpu_seconds(pid: int) -> float:
    """User + system CPU of one process (not its children)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def load(seconds: float, args: argparse.Namespace | None = None) -> subprocess.Popen[str]:
    """The pika client against the broker, or with `--load replay` bench/replay_load.py."""
    if args is not None and args.load == "replay":
        command = [sys.executable, str(HERE / "replay_load.py"), "--port", str(args.port)]
        command += ["--seconds", str(seconds), "--rate", str(args.rate), "--batch", str(args.batch)]
        command += ["--queues", str(args.queues)]
        return subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    return subprocess.Popen(
        [sys.executable, "-c", LOAD, str(seconds)], stdout=subprocess.PIPE, text=True
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


#: (name, tcpdump's options) compared by --stall: what `live` passed before, a ring four times
#: as large, and what it passes now (libpcap's TPACKET_V3 blocks, not immediate mode's V2 slots)
STALL_OPTIONS = (
    ("--immediate-mode -B 65536", ["--immediate-mode", "-B", "65536"]),
    ("--immediate-mode -B 262144", ["--immediate-mode", "-B", "262144"]),
    ("-B 65536 (no --immediate-mode)", ["-B", "65536"]),
)


def stall(seconds: float, pause: float, rounds: int) -> None:
    """tcpdump alone under the load, stopped `pause` s a third of the way in: its drops, with
    each of STALL_OPTIONS in turn."""
    out = Path(f"/tmp/amqpscope-bench-stall-{os.getpid()}.pcap")
    print("| round | tcpdump options | load | messages | captured | kernel drops |")
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    for turn in range(rounds):
        for name, options in STALL_OPTIONS:
            command = ["tcpdump", "-i", "lo", "-n", "-s", "0", "-U", *options]
            tool = subprocess.Popen(
                [*command, "-w", str(out), "tcp port 5672"],
                stderr=subprocess.PIPE,
                text=True,
            )
            time.sleep(1)
            client = load(seconds)
            time.sleep(seconds / 3)
            os.kill(tool.pid, signal.SIGSTOP)
            time.sleep(pause)
            os.kill(tool.pid, signal.SIGCONT)
            sent = client.communicate()[0].split()[0]
            time.sleep(1.5)  # a block not yet full is handed over after tcpdump's 1 s timeout
            tool.send_signal(signal.SIGINT)
            _, err = tool.communicate(timeout=30)
            captured = re.search(r"(\d+) packets? captured", err)
            dropped = re.search(r"(\d+) packets? dropped by kernel", err)
            print(
                f"| {turn + 1} | `{name}` | {os.getloadavg()[0]:.1f} | {int(sent):,} |"
                f" {int(captured.group(1)) if captured else -1:,} |"
                f" {int(dropped.group(1)) if dropped else -1:,} |",
                flush=True,
            )
            out.unlink(missing_ok=True)


def baseline(seconds: float) -> str:
    """tcpdump alone, writing nowhere, under the same load: its own drop count."""
    tool = subprocess.Popen(
        [
            *("tcpdump", "-i", "lo", "-n", "-s", "0", "-U", "-B", "65536"),
            *("-w", "/dev/null", "tcp port 5672"),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1)
    client = load(seconds)
    client.wait()
    tool.send_signal(signal.SIGINT)
    _, err = tool.communicate(timeout=30)
    stats = " ".join(ln for ln in err.splitlines() if "packets" in ln)
    return f"tcpdump -w /dev/null alone: {stats}"


class Counter:
    """Counts the NDJSON lines of amqpscope's stdout as they come; keeps the last record."""

    def __init__(self, stream: int) -> None:
        self.stream = stream
        self.lines = 0
        self.tail = b""
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while chunk := os.read(self.stream, 1 << 20):
            self.lines += chunk.count(b"\n")
            self.tail = (self.tail + chunk)[-65536:]

    def last(self) -> dict[str, object]:
        lines = self.tail.strip().splitlines()
        return json.loads(lines[-1]) if lines else {}


def catch_up(
    proc: subprocess.Popen[bytes], counter: Counter, err: Path, pause: float, rate: float
) -> str:
    """Stop amqpscope (SIGSTOP; tcpdump, a process of its own, goes on spooling) for `pause`
    seconds, then time how fast it decodes the backlog: the decoder's speed flat out."""
    said = err.read_text(errors="replace").count("caught up")
    os.kill(proc.pid, signal.SIGSTOP)
    time.sleep(pause)
    lines, cpu, t = counter.lines, cpu_seconds(proc.pid), time.monotonic()
    os.kill(proc.pid, signal.SIGCONT)
    end, seen = t, lines
    while err.read_text(errors="replace").count("caught up") == said:
        if time.monotonic() - t > 600 or proc.poll() is not None:
            break
        time.sleep(0.25)
        if counter.lines - seen < 2 * rate * 0.25:
            break
        end, seen = time.monotonic(), counter.lines
    frames, seconds = seen - lines, max(end - t, 1e-3)
    used = cpu_seconds(proc.pid) - cpu
    lags = re.findall(r"is ([\d.]+ s \([^)]*\)) behind", err.read_text(errors="replace"))
    return (
        f"paused {pause:.0f} s: the backlog ({lags[-1] if lags else '?'} behind) decoded in "
        f"{seconds:.1f} s: {frames:,} frames = {frames / seconds:,.0f} frames/s, "
        f"{frames / used if used else 0:,.0f} per CPU second"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--build", default="installed", choices=("installed", "pure", "compiled"))
    ap.add_argument("--interval", type=float, default=10.0, help="seconds between samples")
    ap.add_argument("--spool-size", type=int, default=256, help="MB")
    ap.add_argument("--pause", type=float, default=0, help="stop amqpscope S s: its catch-up")
    ap.add_argument("--baseline", action="store_true", help="tcpdump -w /dev/null alone first")
    ap.add_argument("--stall", type=float, default=0, help="tcpdump alone, stopped S s: drops")
    ap.add_argument("--rounds", type=int, default=2, help="--stall: turns of every option set")
    ap.add_argument(
        "--load",
        default="pika",
        choices=("pika", "replay"),
        help="pika against the broker, or bench/replay_load.py (no broker: any rate)",
    )
    ap.add_argument("--rate", type=float, default=8000, help="--load replay: messages/s")
    ap.add_argument("--batch", type=int, default=1, help="--load replay: messages a write")
    ap.add_argument("--queues", type=int, default=1, help="--load replay: consumers' queues")
    ap.add_argument("--metrics", action="store_true", help="live --metrics, scraped meanwhile")
    ap.add_argument(
        "--compare",
        action="store_true",
        help="live alone, then live --metrics under the same load: their losses side by side",
    )
    ap.add_argument("--scrape-interval", type=float, default=5.0, help="--metrics: seconds")
    ap.add_argument("--max-scrape-ms", type=float, default=100, help="target: ms at most")
    ap.add_argument("--min-rate", type=float, default=1000, help="target: messages/s at least")
    ap.add_argument("--max-rss-growth", type=float, default=8, help="target: MiB at most")
    args = ap.parse_args(argv)
    args.port = free_port() if args.load == "replay" else 5672
    build = run.make_build(args.build)
    with open(LOCK, "a") as lock:
        if args.load == "pika" or args.stall or args.baseline:  # the broker's traffic
            fcntl.flock(lock, fcntl.LOCK_EX)
        print(f"# bench/live.py: {args.seconds:.0f} s, {build.label()} ({build.version()})")
        print(f"# {run.machine()}, {platform.python_implementation()} {platform.python_version()}")
        print(f"# load average at the start: {os.getloadavg()[0]:.1f}")
        if args.load == "replay":
            print(
                f"# load: bench/replay_load.py on port {args.port}, {args.rate:.0f} messages/s,"
                f" {args.batch} a write"
            )
        if args.stall:
            stall(args.seconds, args.stall, args.rounds)
            return 0
        if args.baseline:
            print("#", baseline(min(args.seconds, 60)), flush=True)
        if not args.compare:
            return measure(build, args)
        results = []
        for with_metrics in (False, True):
            args.metrics = with_metrics
            if args.load == "replay":
                args.port = free_port()
            print(f"## live{' --metrics' if with_metrics else ''}", flush=True)
            code = measure(build, args)
            results.append((with_metrics, code, dict(LAST)))
        print("| command | messages/s | packets decoded | kernel drops | amqpscope drops |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for with_metrics, _code, got in results:
            print(
                f"| live{' --metrics' if with_metrics else ''} | {got['rate']:,.0f} |"
                f" {got['decoded']:,} | {got['kernel_drops']:,} | {got['amqpscope_drops']:,} |"
            )
        alone, served = results[0][2], results[1][2]
        lost = (served["kernel_drops"] + served["amqpscope_drops"]) - (
            alone["kernel_drops"] + alone["amqpscope_drops"]
        )
        print(
            f"target --metrics loses no more than live alone: {lost:+,}",
            "met" if lost <= 0 else "MISSED",
        )
        return max(code for _, code, _ in results) or (1 if lost > 0 else 0)


#: what Prometheus 2.x sends (OpenMetrics first, gzip), so the scrape is the one it would get
PROMETHEUS_HEADERS = {
    "Accept": "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
    "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
    "Accept-Encoding": "gzip",
}

#: what the last `measure` saw (for --compare)
LAST: dict[str, float] = {}


class Scraper:
    """Scrapes `live --metrics`'s /metrics every `interval` seconds while the load runs: how long
    each scrape took (the whole response read) and how many series it held."""

    def __init__(self, url: str, interval: float) -> None:
        self.url, self.interval = url, interval
        self.first: float | None = None  # the first scrape renders while it waits
        self.times: list[float] = []  # the others: the rendering done ahead
        self.series = 0
        self.failed = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        import urllib.request

        while not self.done.wait(self.interval):
            t = time.perf_counter()
            try:
                request = urllib.request.Request(self.url, headers=PROMETHEUS_HEADERS)
                with urllib.request.urlopen(request, timeout=10) as response:
                    text = response.read()
            except OSError:
                self.failed += 1
                continue
            took = time.perf_counter() - t
            if self.first is None:
                self.first = took
            else:
                self.times.append(took)
            lines = gzip.decompress(text).splitlines()
            self.series = max(self.series, sum(1 for ln in lines if ln and not ln.startswith(b"#")))

    def stop(self) -> None:
        self.done.set()
        self.thread.join(15)


def measure(build: run.Build, args: argparse.Namespace) -> int:
    cmd = [*build.command, "live", "lo", "-f", f"tcp port {args.port}", "--json"]
    cmd += ["--spool-size", str(args.spool_size)]
    scraper: Scraper | None = None
    if args.metrics:
        metrics_port = free_port()
        cmd += ["--metrics", f"127.0.0.1:{metrics_port}"]
        cmd += ["--metrics-max-names", str(max(args.queues, 10))]
    err_path = Path(f"/tmp/amqpscope-bench-live-{os.getpid()}.err")
    with err_path.open("wb") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=build.env, cwd="/")
    assert proc.stdout is not None
    counter = Counter(proc.stdout.fileno())
    try:
        deadline = time.monotonic() + 30
        while "capturing on" not in err_path.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"live did not start: {err_path.read_text()}")
            time.sleep(0.05)
        time.sleep(0.5)
        client = load(args.seconds, args)
        if args.metrics:
            scraper = Scraper(f"http://127.0.0.1:{metrics_port}/metrics", args.scrape_interval)
        start = time.monotonic()
        cpu0 = cpu_seconds(proc.pid)
        print("#   t s   frames/s   frames/CPU-s   RSS MB   lag s")
        samples: list[tuple[float, float]] = []
        last_t, last_lines, last_cpu = start, counter.lines, cpu0
        used = (0.0, 0)
        caught: list[str] = []
        samples_lines = counter.lines
        while client.poll() is None:
            time.sleep(min(args.interval, max(start + args.seconds + 5 - time.monotonic(), 0.5)))
            now, lines, cpu = time.monotonic(), counter.lines, cpu_seconds(proc.pid)
            rss = rss_mb(proc.pid)
            said = re.findall(r"is ([\d.]+) s \(|(caught up)", err_path.read_text(errors="replace"))
            lags = [lag for lag, up in said if not up] if said and not said[-1][1] else []
            per_cpu = (lines - last_lines) / (cpu - last_cpu) if cpu > last_cpu else 0
            print(
                f"  {now - start:5.0f} {(lines - last_lines) / (now - last_t):10,.0f} "
                f"{per_cpu:14,.0f} {rss:8.1f}   {lags[-1] if lags else '<1'}",
                flush=True,
            )
            samples.append((now - start, rss))
            last_t, last_lines, last_cpu = now, lines, cpu
            used = (cpu - cpu0, lines)
            if args.pause and not caught and now - start >= args.seconds / 3:
                rate = (lines - samples_lines) / (now - start)
                caught.append(catch_up(proc, counter, err_path, args.pause, rate))
                print(f"  {caught[0]}", flush=True)
                last_t, last_lines = time.monotonic(), counter.lines
                last_cpu = cpu_seconds(proc.pid)
        said = client.communicate()[0].splitlines()[-1].split()
        if scraper is not None:
            scraper.stop()
        elapsed = time.monotonic() - start
        if args.load == "replay":  # `sent N writes W seconds S`: its own time, not the sampling's
            told = dict(zip(said[::2], said[1::2], strict=True))
            sent = got = told["sent"]
            elapsed = float(told["seconds"])
        else:
            sent, got = said
        time.sleep(2)
        proc.send_signal(signal.SIGINT)
        proc.wait(120)
        counter.thread.join(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stderr = err_path.read_text(errors="replace")
    err_path.unlink()
    stats = counter.last().get("capture", {})
    assert isinstance(stats, dict), stats
    frames = counter.lines - 1
    third = [r for t, r in samples if t <= args.seconds / 3] or [samples[0][1]]
    print(f"messages published {sent}, got and acked {got} in {elapsed:.1f} s")
    print(f"capture: {json.dumps(stats)}")
    print(
        f"frames decoded {frames:,} = {frames / elapsed:,.0f}/s; "
        f"packets {stats.get('decoded', 0):,} = {int(stats.get('decoded', 0)) / elapsed:,.0f}/s"
    )
    if used[0]:
        print(f"decoder CPU {used[0]:.1f} s: {used[1] / used[0]:,.0f} frames per CPU second")
    print(
        f"RSS {max(third):.1f} MB in the first third, {max(r for _, r in samples):.1f} MB "
        f"at most, {samples[-1][1]:.1f} MB at the end"
    )
    print("stderr:", *[ln for ln in stderr.splitlines() if ln.startswith("amqpscope")], sep="\n  ")
    lost = int(stats.get("kernel_drops") or 0), int(stats.get("amqpscope_drops") or 0)
    LAST.update(
        rate=int(got) / elapsed,
        decoded=int(stats.get("decoded", 0)),
        kernel_drops=lost[0],
        amqpscope_drops=lost[1],
    )
    scrape_ms = None
    if scraper is not None:
        took = sorted(scraper.times)
        if took and scraper.first is not None:
            scrape_ms = took[-1] * 1000
            print(
                f"/metrics (OpenMetrics, gzip) scraped {len(took) + 1} times ({scraper.failed}"
                f" failed), {scraper.series:,} series at most: the first (rendered while it"
                f" waited) {scraper.first * 1000:.1f} ms; the others {took[0] * 1000:.1f} /"
                f" {took[len(took) // 2] * 1000:.1f} / {scrape_ms:.1f} ms (min / median / max)"
            )
        else:
            print(f"/metrics never answered ({scraper.failed} failed)")
            scrape_ms = float("inf")
    met = targets(int(got) / elapsed, samples[-1][1] - max(third), args, scrape_ms)
    return 0 if lost == (0, 0) and met else 1


def targets(
    rate: float, growth_mb: float, args: argparse.Namespace, scrape_ms: float | None = None
) -> bool:
    """Print each target against what was measured; whether every one was met."""
    checks = [
        ("messages/s", rate, f">= {args.min_rate:,.0f}", rate >= args.min_rate),
        ("RSS growth MB", growth_mb, f"< {args.max_rss_growth:g}", growth_mb < args.max_rss_growth),
    ]
    if scrape_ms is not None:
        ok = scrape_ms <= args.max_scrape_ms
        checks.append(("slowest scrape ms", scrape_ms, f"<= {args.max_scrape_ms:g}", ok))
    for what, value, target, met in checks:
        print(f"target {what} {target}: {value:,.1f} {'met' if met else 'MISSED'}")
    return all(met for *_, met in checks)


if __name__ == "__main__":
    sys.exit(main())
