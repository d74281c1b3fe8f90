"""Time a newcomer's first minutes: `make demo` (and `make test`) on fresh clones, stage by stage.

For each git REF (default HEAD; give the commit before and after a change to compare them in
one run, interleaved), this clones the repository into a temporary folder and runs

    make demo PYTHON=<a new virtualenv's python>     (no package installed yet: pip resolves,
                                                      downloads or takes from its cache, and
                                                      installs every dependency)

timing every line the run prints, and reads the build's own stage times (tools/mypyc_hook.py
and tools/compiled.py append them to $AMQPSCOPE_BUILD_TIMES). It prints, per ref: seconds until
the timeline's first line, and the shares of apt (build-deps), `python -m build` (of which
mypy's type check with mypyc's C generation, and gcc; the rest is the two isolated build
environments), pip's installs, and the demo's `read`; plus the CPU seconds of the two compile
stages, which a loaded machine does not inflate as it does wall time.

    python3 tools/time_first_run.py [REF ...] [--no-cache] [--test] [--opt-levels 1,2,3]

--no-cache     pip without its cache (PIP_NO_CACHE_DIR), as on a fresh machine: downloads
               counted too
--wheel-cache  let the clone take a compiled wheel kept by an earlier clone of the same sources
               (~/.cache/amqpscope/wheels; off by default: a first clone compiles)
--test         then `make test` in the same clone (system python, as CI runs it), with
               `--durations=25`; its log is kept and its last lines printed
--opt-levels   instead: for each C optimisation level (MYPYC_OPT_LEVEL), bench/run.py
               (--bench-args) on this tree compiled at that level (built first, in the work
               folder), then the compile's stage times: compile CPU seconds against ratios
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed_run(cmd: list[str], cwd: Path, env: dict[str, str], log: Path) -> list[tuple[float, str]]:
    """Run `cmd`, every output line with the seconds since the start, into `log` and returned."""
    start = time.monotonic()
    lines: list[tuple[float, str]] = []
    with open(log, "w") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            at = time.monotonic() - start
            lines.append((at, line.rstrip("\n")))
            out.write(f"{at:8.1f} {line}")
            out.flush()  # to follow a run with tail -f
        proc.wait()
        lines.append((time.monotonic() - start, f"(exit {proc.returncode})"))
    return lines


def first(lines: list[tuple[float, str]], needle: str) -> float | None:
    return next((at for at, line in lines if needle in line), None)


def demo(
    ref: str, no_cache: bool, work: Path, keep_test: bool, wheel_cache: bool
) -> dict[str, object]:
    """One fresh clone of `ref`, `make demo` in a new virtualenv; the stage times."""
    clone = work / f"clone-{ref.replace('/', '_')}"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", ref], check=True)
    venv = work / f"venv-{ref.replace('/', '_')}"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    times = work / f"build-times-{ref.replace('/', '_')}.jsonl"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYC_OPT_LEVEL")}
    env["AMQPSCOPE_BUILD_TIMES"] = str(times)
    if not wheel_cache:  # a first clone on this machine: no wheel kept from another clone
        env["AMQPSCOPE_WHEEL_CACHE"] = "off"
    if no_cache:
        env["PIP_NO_CACHE_DIR"] = "1"
    log = work / f"demo-{ref.replace('/', '_')}.log"
    python = str(venv / "bin" / "python")
    lines = timed_run(["make", "demo", f"PYTHON={python}"], clone, env, log)
    said = [json.loads(line) for line in times.read_text().splitlines()] if times.exists() else []
    stage = {s["stage"].split(":")[0].split(" (")[0]: s for s in said}
    read_at = first(lines, "== amqpscope read")
    shown = next((at for at, line in lines if read_at and at > read_at and line.strip()), None)
    build_at = first(lines, "tools/compiled.py --wheel")
    result: dict[str, object] = {
        "ref": ref,
        "first timeline line (s)": shown,
        "apt, build-deps (s)": first(lines, "install -q 'build"),
        "python -m build (s)": stage.get("python -m build", {}).get("wall"),
        "  mypy + C generation (s)": stage.get("mypyc", {}).get("wall"),
        "  gcc (s)": stage.get("C compile and link", {}).get("wall"),
        "  mypy + C generation CPU (s)": stage.get("mypyc", {}).get("cpu"),
        "  gcc CPU (s)": stage.get("C compile and link", {}).get("cpu"),
        "wheel build started at (s)": build_at,
        "read started at (s)": read_at,
        "exit": lines[-1][1],
        "log": str(log),
    }
    if keep_test:
        test_log = work / f"test-{ref.replace('/', '_')}.log"
        test_env = {**env, "PYTEST_ADDOPTS": "--durations=25", "CI": "true"}
        test_env.pop("AMQPSCOPE_BUILD_TIMES")
        tested = timed_run(["make", "test"], clone, test_env, test_log)
        result["make test after the demo (s)"] = round(tested[-1][0], 1)
        result["make test exit"] = tested[-1][1]
        result["make test log"] = str(test_log)
    return result


def opt_levels(levels: list[str], bench_args: list[str], work: Path) -> None:
    """Each C optimisation level: the compile's CPU seconds, then the bench's ratios."""
    for level in levels:
        times = work / f"O{level}.jsonl"
        env = {**os.environ, "MYPYC_OPT_LEVEL": level, "AMQPSCOPE_BUILD_TIMES": str(times)}
        env.pop("PYTHONPATH", None)
        target = work / f"compiled-O{level}"
        # bench/run.py builds it (tools/compiled.py: a key of its own for each level)
        bench = [sys.executable, str(ROOT / "bench" / "run.py"), "--builds", "compiled"]
        bench += ["--compiled-dir", str(target), *bench_args]
        subprocess.run(bench, env=env, check=False)
        for line in times.read_text().splitlines():
            print(f"-O{level}", line, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("refs", nargs="*", default=["HEAD"])
    parser.add_argument("--no-cache", action="store_true")
    parser.add_argument("--test", action="store_true")
    parser.add_argument("--wheel-cache", action="store_true")
    parser.add_argument("--opt-levels", metavar="1,2,3")
    parser.add_argument(
        "--bench-args",
        default="--messages-091 20000 --messages-10 8000 --repeat 3",
        help="bench/run.py's arguments for --opt-levels",
    )
    parser.add_argument("--keep", type=Path, metavar="DIR", help="work in DIR and keep it")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="amqpscope-first-run-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"work folder: {work} (nproc {os.cpu_count()}, load {os.getloadavg()})", flush=True)
    try:
        if args.opt_levels:
            opt_levels(args.opt_levels.split(","), args.bench_args.split(), work)
            return 0
        for ref in args.refs:
            result = demo(ref, args.no_cache, work, args.test, args.wheel_cache)
            for key, value in result.items():
                print(f"{key:32} {value}", flush=True)
            print(flush=True)
    finally:
        if args.keep is None and not args.test:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
