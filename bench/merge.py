"""Merging two vantage points against reading them one after the other (issue 44).

Two captures of the same traffic are made at run time (never committed): `synth.build_091`'s
long 0-9-1 connection (publish, deliver, ack; about seven frames a message) of `--frames`
frames, and a copy of it whose every time is `--shift` seconds later (a second host's capture
of the same packets, its clock ahead, as `editcap -t` makes one). Side by side, in rounds (a
shared machine's load then moves both sides of a ratio):

    amqpscope CMD A; amqpscope CMD B        one after the other (two runs, their times added)
    amqpscope CMD A B                       merged: told apart as vantage points by content,
                                            every frame matched, B's offset estimated

for CMD `summary` and `read --json` (output to /dev/null), with wall time (median of the
rounds' ratios) and peak memory. The issue's bar: merging costs at most 1.3 times reading
them one after the other.

What runs is this tree's sources (`--builds pure`, the default: the installed build may not
have the merge yet) or the tree compiled by tools/compiled.py (`compiled`).

    python3 bench/merge.py [--frames 100000] [--shift 0.25] [--repeat 3]
                           [--builds pure,compiled] [--keep DIR]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import struct
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import run  # noqa: E402  (the harness: builds, run_once, machine)
import synth  # noqa: E402  (a sibling script, not a package)

#: frames a message makes in `synth.build_091`: publish, header, body, deliver, header, body, ack
FRAMES_A_MESSAGE = 7
#: what each CMD runs (after the build's command), the files appended
COMMANDS = (("summary", ["summary"]), ("read --json", ["read", "--json"]))


def shifted(source: Path, target: Path, seconds: float) -> int:
    """`source` (pcap) written to `target` with every packet `seconds` later; packets written."""
    data = source.read_bytes()
    endian, units = {
        b"\xd4\xc3\xb2\xa1": ("<", 1_000_000),
        b"\xa1\xb2\xc3\xd4": (">", 1_000_000),
        b"\x4d\x3c\xb2\xa1": ("<", 1_000_000_000),
        b"\xa1\xb2\x3c\x4d": (">", 1_000_000_000),
    }[data[:4]]
    record = struct.Struct(endian + "IIII")
    shift = round(seconds * units)
    out = bytearray(data[:24])
    at = 24
    packets = 0
    while at + record.size <= len(data):
        sec, frac, caplen, wirelen = record.unpack_from(data, at)
        whole = sec * units + frac + shift
        out += record.pack(whole // units, whole % units, caplen, wirelen)
        out += data[at + record.size : at + record.size + caplen]
        at += record.size + caplen
        packets += 1
    target.write_bytes(bytes(out))
    return packets


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--shift", type=float, default=0.25)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--builds", default="pure")
    parser.add_argument("--keep", type=Path, help="write the captures here and keep them")
    args = parser.parse_args(argv)
    work = args.keep or Path(tempfile.mkdtemp(prefix="amqpscope-merge-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        first, second = work / "vantage-a.pcap", work / "vantage-b.pcap"
        packets = synth.build_091(first, max(1, args.frames // FRAMES_A_MESSAGE))
        shifted(first, second, args.shift)
        print(f"{run.machine()}; two captures of {packets:,} packets (~{args.frames:,} frames)")
        print("| build | command | A then B (s) | merged (s) | ratio | peak MB (one / merged) |")
        print("|---|---|---:|---:|---:|---:|")
        for name in args.builds.split(","):
            build = run.make_build(name)
            for label, words in COMMANDS:
                base = [*build.command, *words]
                ratios, apart, together, peaks = [], [], [], []
                for _ in range(args.repeat):
                    one = run.run_once([*base, str(first)], build.env)
                    two = run.run_once([*base, str(second)], build.env)
                    both = run.run_once([*base, str(first), str(second)], build.env)
                    apart.append(one[0] + two[0])
                    together.append(both[0])
                    ratios.append(both[0] / (one[0] + two[0]))
                    peaks.append((max(one[2], two[2]), both[2]))
                peak_one = max(p[0] for p in peaks)
                peak_both = max(p[1] for p in peaks)
                print(
                    f"| {build.label()} | `{label}` | {statistics.median(apart):.2f} |"
                    f" {statistics.median(together):.2f} | {statistics.median(ratios):.2f} |"
                    f" {peak_one:.0f} / {peak_both:.0f} |"
                )
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
