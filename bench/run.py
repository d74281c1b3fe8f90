"""Time amqpscope against tshark on the same big capture, in one run, and report ratios.

The big capture is made here at run time (never committed): a recorded capture's packets are
repeated with a fresh client port for each copy, so every copy is a connection of its own.

    python3 bench/run.py [--capture captures/X.pcap] [--copies N] [--repeat K]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scapy.utils import RawPcapReader

HERE = Path(__file__).resolve().parent
DEFAULT = HERE.parent / "captures" / "091-qos-prefetch.pcap"


def multiply(source: Path, target: Path, copies: int) -> int:
    """Write `copies` of `source` (Ethernet/IPv4 pcap) into `target`, each with its client port
    moved by the copy's index and its timestamps moved after the previous copy's."""
    packets = list(RawPcapReader(str(source)))
    if not packets:
        raise SystemExit(f"{source}: no packets")
    span = packets[-1][1].sec - packets[0][1].sec + 1
    with target.open("wb") as out:
        out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
        for copy in range(copies):
            for data, meta in packets:
                frame = bytearray(data)
                if len(frame) >= 38 and frame[12:14] == b"\x08\x00" and frame[23] == 6:
                    ihl = (frame[14] & 0x0F) * 4
                    tcp = 14 + ihl
                    sport, dport = struct.unpack_from(">HH", frame, tcp)
                    if sport > dport:
                        struct.pack_into(">H", frame, tcp, 20000 + (sport + copy) % 40000)
                    else:
                        struct.pack_into(">H", frame, tcp + 2, 20000 + (dport + copy) % 40000)
                sec = meta.sec + copy * span
                out.write(struct.pack("<IIII", sec, meta.usec, len(frame), meta.wirelen))
                out.write(frame)
    return copies * len(packets)


def timed(cmd: list[str], repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capture", type=Path, default=DEFAULT)
    parser.add_argument("--copies", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    tshark = shutil.which("tshark")
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "big.pcap"
        packets = multiply(args.capture, big, args.copies)
        size = big.stat().st_size / 1e6
        name = args.capture.name
        print(f"capture: {packets} packets, {size:.1f} MB ({args.copies} copies of {name})")
        ours = timed(
            [sys.executable, "-m", "amqpscope.cli", "read", "--json", str(big)], args.repeat
        )
        print(f"amqpscope read --json   {ours:8.2f} s  {packets / ours:10.0f} packets/s")
        if tshark:
            theirs = timed([tshark, "-r", str(big), "-Y", "amqp", "-T", "pdml"], args.repeat)
            print(f"tshark -Y amqp -T pdml  {theirs:8.2f} s  {packets / theirs:10.0f} packets/s")
            print(f"ratio amqpscope/tshark  {ours / theirs:8.2f}  (below 1: amqpscope is faster)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
