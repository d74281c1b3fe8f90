"""A load for `bench/live.py` that reaches rates the broker cannot on this machine.

pika against the local RabbitMQ makes a few thousand packets a second here (broker, client and
capture share two cores); the issue's load is ~25k packets/s, and the decoder's target 100k frames
a second. This replays one AMQP 0-9-1 consumer connection over real TCP on loopback, both ends in
this process: the handshake, then `--rate` messages a second, each a publish (method, header,
body) from the client, a deliver (method, header, body) from the "broker" and an ack from the
client, with delivery tags counting up, so the trackers see a plausible session. Every frame is
encoded by pika (`pika.frame`, `pika.spec`), not by amqpscope. `--batch N` puts N messages in each
write (fewer, fuller packets: the decoder's frame rate without the packet rate).

    python3 bench/replay_load.py --port P [--seconds S] [--rate MSGS] [--batch N] [--queues Q]

`--queues Q` opens a consumer on each of Q queues and delivers from them in turn: each queue is
a label value of `live --metrics`'s queue families (bench/live.py --metrics: 10,000 series).

Prints `sent N` (messages) and `writes W` at the end; `ready` once it listens.
"""

from __future__ import annotations

import argparse
import socket
import sys
import threading
import time
from collections.abc import Callable

import pika.frame as pf
import pika.spec as ps


def drain(sock: socket.socket) -> None:
    """Read and discard what the other end writes, so neither send buffer fills."""
    while sock.recv(1 << 20):
        pass


def method(channel: int, m: object) -> bytes:
    return bytes(pf.Method(channel, m).marshal())  # type: ignore[arg-type]


def message(channel: int, frame: object, body: bytes) -> bytes:
    props = ps.BasicProperties(content_type="text/plain", delivery_mode=2)
    return (
        method(channel, frame)
        + bytes(pf.Header(channel, len(body), props).marshal())
        + bytes(pf.Body(channel, body).marshal())
    )


class Tagged:
    """One pika-encoded frame sequence whose 8-byte delivery tag is patched per message: pika
    takes ~15 us to encode a deliver, which would cost the load more CPU than the decoder. The tag's
    place is found by encoding two tags with pika, and checked against pika's bytes once."""

    def __init__(self, encode: Callable[[int], bytes]) -> None:
        low, high = encode(1), encode(0x0102030405060708)
        self.at = high.index((0x0102030405060708).to_bytes(8, "big"))
        self.head, self.tail = low[: self.at], low[self.at + 8 :]
        assert self.at == low.index((1).to_bytes(8, "big")) and self.bytes(77) == encode(77)

    def bytes(self, tag: int) -> bytes:
        return self.head + tag.to_bytes(8, "big") + self.tail


def handshake(client: socket.socket, server: socket.socket, queues: list[str]) -> None:
    """The opening of a pika consumer, as RabbitMQ answers it (one write a frame), then a
    consumer on each of `queues`."""
    steps: list[tuple[socket.socket, bytes]] = [
        (client, bytes(pf.ProtocolHeader().marshal())),
        (
            server,
            method(
                0,
                ps.Connection.Start(
                    server_properties={"product": "amqpscope bench replay", "version": "1"},
                    mechanisms="PLAIN AMQPLAIN",
                    locales="en_US",
                ),
            ),
        ),
        (
            client,
            method(
                0,
                ps.Connection.StartOk(
                    client_properties={"product": "bench/replay_load.py"},
                    mechanism="PLAIN",
                    response="\0guest\0guest",
                ),
            ),
        ),
        (server, method(0, ps.Connection.Tune(2047, 131072, 60))),
        (client, method(0, ps.Connection.TuneOk(2047, 131072, 60))),
        (client, method(0, ps.Connection.Open(virtual_host="/"))),
        (server, method(0, ps.Connection.OpenOk())),
        (client, method(1, ps.Channel.Open())),
        (server, method(1, ps.Channel.OpenOk())),
    ]
    for sock, data in steps:
        sock.sendall(data)
        time.sleep(0.001)
    for i, queue in enumerate(queues):  # a consume and its consume-ok each, in a few big writes
        client.sendall(method(1, ps.Basic.Consume(queue=queue, consumer_tag=f"ctag{i}")))
        server.sendall(method(1, ps.Basic.ConsumeOk(f"ctag{i}")))
        if i % 500 == 499:
            time.sleep(0.001)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--rate", type=float, default=8000, help="messages a second")
    ap.add_argument("--batch", type=int, default=1, help="messages in each write")
    ap.add_argument(
        "--queues", type=int, default=1, help="consumers on this many queues, delivering in turn"
    )
    args = ap.parse_args(argv)
    listener = socket.create_server(("127.0.0.1", args.port))
    print("ready", flush=True)
    client = socket.create_connection(("127.0.0.1", args.port))
    server, _ = listener.accept()
    listener.close()
    for sock in (client, server):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=drain, args=(sock,), daemon=True).start()
    queues = (
        ["bench.replay"] if args.queues == 1 else [f"bench.replay.{i}" for i in range(args.queues)]
    )
    handshake(client, server, queues)
    body = b"bench " * 20
    publish = message(1, ps.Basic.Publish(exchange="", routing_key="bench.replay"), body)
    delivers = [
        Tagged(
            lambda tag, i=i, q=q: message(1, ps.Basic.Deliver(f"ctag{i}", tag, False, "", q), body)
        )
        for i, q in enumerate(queues)
    ]
    ack = Tagged(lambda tag: method(1, ps.Basic.Ack(tag)))
    sent = writes = 0
    start = time.monotonic()
    end = start + args.seconds
    batch = max(1, args.batch)
    while (now := time.monotonic()) < end:
        due = int((now - start) * args.rate)
        if sent >= due:
            time.sleep(min(0.002, end - now))
            continue
        while sent < due:
            first = sent + 1
            client.sendall(publish * batch)
            tags = range(first, first + batch)
            server.sendall(b"".join(delivers[tag % len(delivers)].bytes(tag) for tag in tags))
            client.sendall(b"".join(ack.bytes(tag) for tag in tags))
            sent += batch
            writes += 3
    client.sendall(method(1, ps.Channel.Close(200, "OK", 0, 0)))
    server.sendall(method(1, ps.Channel.CloseOk()))
    client.sendall(method(0, ps.Connection.Close(200, "Normal shutdown", 0, 0)))
    server.sendall(method(0, ps.Connection.CloseOk()))
    time.sleep(0.05)
    client.close()
    server.close()
    print(f"sent {sent}", f"writes {writes}", f"seconds {time.monotonic() - start:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
