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

The router, proton-j, amqpnetlite, pyamqp, go-amqp and pika frame-line logs are made by
tests/made_logs.py (tests/test_logs_cached_shapes.py varies the same lines).

    python3 bench/logs.py [--messages N] [--noise K] [--repeat R] [--builds compiled,pure]
                          [--keep DIR] [--only pika,rhea]

Last, the shares of frames found and field values agreeing on the corpus of pasted excerpts
(bench/logs_corpus.py, tests/corpus/logs/), read by this tree's sources.

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
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RECORDED = ROOT / "captures" / "log-proton-broker.log"
sys.path.insert(0, str(ROOT))
# the logs the tests also vary (made from the printers the tests hold the grammars to)
from tests.made_logs import goamqp, pika_frames, printed, router  # noqa: E402


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
    # what the reader gets right on pasted excerpts (issue 42), beside how fast it reads
    sys.path.insert(0, str(HERE))
    import logs_corpus  # bench/logs_corpus.py

    scores = [logs_corpus.score(path) for path in logs_corpus.corpus()]
    frames, fields, found, total, agreeing, field_total = logs_corpus.shares(scores)
    print(
        f"\ncorpus of {len(scores)} pasted excerpts (tests/corpus/logs, this tree's sources):"
        f" frames found {found}/{total} = {frames:.1%},"
        f" field values agreeing {agreeing}/{field_total} = {fields:.1%}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
