"""Many short connections: peak memory and time of `read`, `summary` and `diagnose` as they grow.

The capture is synthesised at run time (never committed) from the bundled recordings, as
`synth.py` builds its long ones: clients that connect, declare, publish a few messages and
disconnect, thousands a minute, a few at once. Most speak 0-9-1 (pika's recorded handshake,
`--publishes` messages each with a message-id and body of its own, channel.close and
connection.close, a FIN each way); a share speak AMQP 1.0 (Proton's recorded handshake, a sender
link, the transfers, RabbitMQ's disposition, the recorded detach, end and close); and a small
share of the 0-9-1 clients vanish after publishing (a FIN and no connection.close: the
connection-level finding `summary` and `diagnose` report). Each client has an address and port of
its own; one starts every `INTERVAL` seconds and lasts a few, so a handful overlap.

    python3 bench/churn.py [--connections 50000,100000,200000] [--keep DIR]
                           [--builds installed,pure,compiled] [--no-tshark]

prints a table: per capture size and command, wall and CPU seconds, peak memory (GNU time's
maximum RSS), CPU microseconds per connection (linear time: the same at every size) and the
machine's one-minute load average when the run began (the cores are shared: wall time is CPU
time only on an idle machine).
"""

from __future__ import annotations

import argparse
import heapq
import os
import shutil
import struct
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import run  # noqa: E402  (the harness: builds, measure, machine)
import synth  # noqa: E402  (a sibling script, not a package)

from amqpscope.codec.frames import Frame  # noqa: E402

SOURCE_091 = synth.CAPTURES / "091-publish-consume.pcap"
SOURCE_10 = synth.CAPTURES / "10-send-receive.pcap"
#: a new client every INTERVAL seconds (3,000 a minute); its packets GAP apart
INTERVAL = 0.02
GAP = 0.004
SERVER = (b"\x0a\x00\x00\x01", 5672)
#: the default shares of AMQP 1.0 clients and of 0-9-1 clients that vanish without a close
SHARE_10 = 0.2
VANISH = 0.01

Write = tuple[str, bytes]  # (direction, what one write of that side sends)


class Packets:
    """What `synth.Conversation` writes, collected with times instead of written to a file."""

    def __init__(self, start: float) -> None:
        self.ts = start
        self.out: list[tuple[float, bytes]] = []

    def packet(self, src: tuple[bytes, int], dst: tuple[bytes, int], tcp: bytes) -> None:
        ip = struct.pack(
            ">BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0x4000, 64, 6, 0, src[0], dst[0]
        )
        self.out.append((self.ts, b"\x00" * 12 + b"\x08\x00" + ip + tcp))
        self.ts += GAP


class Client(synth.Conversation):
    """A TCP connection from a client address and port of its own to the broker."""

    def __init__(self, pcap: Packets, client: tuple[bytes, int]) -> None:
        self.pcap = pcap  # type: ignore[assignment]
        self.ends = {"c2s": (client, SERVER), "s2c": (SERVER, client)}
        self.seq = {"c2s": 1_000_000, "s2c": 3_000_000_000}
        self._segment("c2s", self.SYN, b"", ack=False)
        self._segment("s2c", self.SYN | self.ACK, b"")
        self._segment("c2s", self.ACK, b"")


def _writes(frames: list[Frame]) -> list[Write]:
    """Recorded frames as the writes that sent them: the frames of one packet in one write."""
    out: list[Write] = []
    group: list[Frame] = []
    for frame in frames:
        if group and (frame.packet != group[0].packet or frame.direction != group[0].direction):
            out.append((group[0].direction, b"".join(f.data for f in group)))
            group = []
        group.append(frame)
    if group:
        out.append((group[0].direction, b"".join(f.data for f in group)))
    return out


class Scripts:
    """Each kind of client as writes: the recorded handshake and teardown around `publishes`
    messages of their own (numbered from `number`, so that every message-id differs)."""

    def __init__(self, publishes: int) -> None:
        self.publishes = publishes
        frames = synth.recorded(SOURCE_091)
        names = [f.name for f in frames]
        publish = names.index("basic.publish")
        self.hello_091 = _writes(frames[:publish])  # up to the queue's declare-ok
        self.publish = frames[publish].data
        self.header = frames[publish + 1]
        self.bye_091 = _writes(frames[names.index("channel.close") :])
        frames = synth.recorded(SOURCE_10)
        pairs = [(f.name, f.direction) for f in frames]
        send_flow = pairs.index(("flow", "s2c"))  # RabbitMQ grants the sender its credit
        self.hello_10 = _writes(frames[: send_flow + 1])
        sent = next(f for f in frames if f.name == "transfer" and f.direction == "c2s")
        self.payload_10 = synth._payload(sent)
        teardown = pairs.index(("detach", "c2s"))
        self.bye_10 = _writes(  # the sender's detach, end and close: no receiver link here
            [
                f
                for f in frames[teardown:]
                if f.name != "disposition" and not (f.name == "detach" and f.fields["handle"])
            ]
        )

    def amqp091(self, number: int, vanish: bool) -> Iterator[Write]:
        yield from self.hello_091
        for n in range(number, number + self.publishes):
            yield "c2s", self.publish + synth._content(self.header, n)
        if not vanish:
            yield from self.bye_091

    def amqp10(self, number: int) -> Iterator[Write]:
        yield from self.hello_10
        count = self.publishes
        yield (
            "c2s",
            b"".join(
                synth._transfer(
                    0, i, str(i).encode(), synth._message10(self.payload_10, number + i)
                )
                for i in range(count)
            ),
        )
        yield "s2c", synth._disposition(0, count - 1)
        yield from self.bye_10


def kind_of(index: int, share_10: float, vanish: float) -> str:
    """Client `index`'s kind, spread evenly: "10", "vanish" (0-9-1 without a close) or "091"."""
    if share_10 and int((index + 1) * share_10) != int(index * share_10):
        return "10"
    shifted = index + 2  # not in step with the 1.0 clients
    if vanish and int((shifted + 1) * vanish) != int(shifted * vanish):
        return "vanish"
    return "091"


def build(
    path: Path,
    connections: int,
    publishes: int = 3,
    share_10: float = SHARE_10,
    vanish: float = VANISH,
    start: float = 1_795_000_000.0,
) -> int:
    """Write `connections` short clients into a microsecond pcap; returns the packets written."""
    scripts = Scripts(publishes)
    pending: list[tuple[float, int, int, bytes]] = []  # (ts, client, order, packet): a heap
    written = 0
    with path.open("wb") as out:
        out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))

        def flush(before: float) -> None:
            nonlocal written
            while pending and pending[0][0] < before:
                ts, _, _, frame = heapq.heappop(pending)
                sec = int(ts)
                usec = round((ts - sec) * 1e6)
                if usec == 1_000_000:
                    sec, usec = sec + 1, 0
                out.write(struct.pack("<IIII", sec, usec, len(frame), len(frame)) + frame)
                written += 1

        for index in range(connections):
            begins = start + index * INTERVAL
            flush(begins)
            address = struct.pack(">BBH", 10, 1, index // 40_000)
            client = Client(Packets(begins), (address, 20_000 + index % 40_000))
            kind = kind_of(index, share_10, vanish)
            number = index * publishes
            script = scripts.amqp10(number) if kind == "10" else scripts.amqp091(
                number, kind == "vanish"
            )  # fmt: skip
            for direction, data in script:
                client.send(direction, data)
            client.close()
            packets: list[tuple[float, bytes]] = client.pcap.out  # type: ignore[attr-defined]
            for order, (ts, frame) in enumerate(packets):
                heapq.heappush(pending, (ts, index, order, frame))
        flush(float("inf"))
    return written


def count_packets(path: Path) -> int:
    """The packets of a microsecond pcap written by `build`."""
    count = 0
    with path.open("rb") as data:
        data.seek(24)
        while header := data.read(16):
            data.seek(struct.unpack("<IIII", header)[2], 1)
            count += 1
    return count


#: (label, the command's arguments after the build's command)
COMMANDS: tuple[tuple[str, Callable[[Path], list[str]]], ...] = (
    ("`read` (piped)", lambda p: ["read", str(p)]),
    ("`summary`", lambda p: ["summary", str(p)]),
    ("`diagnose`", lambda p: ["diagnose", str(p)]),
    ("`summary --json`", lambda p: ["summary", "--json", str(p)]),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", default="50000,100000,200000", metavar="N,N,...")
    parser.add_argument("--publishes", type=int, default=3, metavar="N")
    parser.add_argument("--repeat", type=int, default=1, metavar="K")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="keep the captures in DIR")
    parser.add_argument("--builds", default="installed", help="installed, pure, compiled")
    parser.add_argument("--no-tshark", action="store_true", help="time amqpscope only")
    parser.add_argument(
        "--commands", type=int, default=len(COMMANDS), metavar="N", help="the first N commands"
    )
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.connections.split(",")]
    builds = [run.make_build(name) for name in args.builds.split(",")]
    tshark = None if args.no_tshark else shutil.which("tshark")
    print(f"machine: {run.machine()}")
    for me in builds:
        print(f"{me.name}: {me.version()} ({' '.join(me.command)})")
    if tshark:
        print(f"against: {run.tshark_version(tshark)}")
    print()
    print(
        "| connections | packets | command | build | s (CPU s) | peak | CPU µs a connection"
        " | load |"
    )
    print("| ---: | ---: | --- | --- | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep or Path(scratch)
        tmp.mkdir(parents=True, exist_ok=True)
        for size in sizes:
            path = tmp / f"churn-{size}-{args.publishes}.pcap"
            if not path.exists():
                part = path.with_suffix(".part")
                build(part, size, args.publishes)
                part.rename(path)
            packets = count_packets(path)
            runs: list[tuple[str, str, list[str], dict[str, str]]] = []
            if tshark:
                cmd = [tshark, "-r", str(path), "-Y", "amqp"]
                runs.append(("`tshark -Y amqp`", "tshark", cmd, run._without_pythonpath()))
            for label, command in COMMANDS[: args.commands]:
                for me in builds:
                    runs.append((label, me.label(), [*me.command, *command(path)], me.env))
            for label, who, cmd, env in runs:
                load = os.getloadavg()[0]
                wall, cpu, peak = run.measure(cmd, args.repeat, env)
                print(
                    f"| {size:,} | {packets:,} | {label} | {who} | {wall:.1f} s ({cpu:.1f}) |"
                    f" {peak:.0f} MB | {cpu / size * 1e6:.0f} | {load:.1f} |",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
