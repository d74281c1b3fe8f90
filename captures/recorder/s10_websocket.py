"""AMQP 1.0 over WebSocket (the AMQP WebSocket Binding 1.0): both ends in one asyncio loop."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import json
import threading
from typing import Any

from recorder.harness import (
    BROKER_HOST,
    BROKER_PORT,
    WS_FRAGMENT,
    WS_PATH,
    WS_PORT,
    CaptureSpec,
    Counts,
    Ctx,
    busy_connections,
    scenario,
)
from recorder.s10_messaging import SendThenReceive


class WebSocketBridges:
    """Both ends of an AMQP WebSocket Binding 1.0 connection, in one asyncio loop on a thread.

    Why: Proton's reactor speaks TCP only. Its bytes go to a local TCP port, from there over a
    `websockets` client to ws://127.0.0.1:5674/amqp (subprotocol `amqp`), into a `websockets`
    server that hands the message payloads to RabbitMQ on 5672, and back. Only the WebSocket leg
    is captured. Each end counts what it sent and received, as the library reported it. The
    client opens with a ping and closes the WebSocket when Proton closes its socket, so who
    closes first does not depend on timing.
    """

    def __init__(self) -> None:
        self.n = Counts()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.closed = threading.Event()
        self.servers: list[Any] = []

    def start(self) -> str:
        """Start both bridges; return the URL Proton connects to."""
        self.thread.start()
        port = asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(15)
        return f"amqp://127.0.0.1:{port}"

    def stop(self) -> None:
        """Close the listeners and the loop (the connections have ended by now)."""

        async def close() -> None:
            for server in self.servers:
                server.close()
                await server.wait_closed()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    def _counting(self, base: type, side: str) -> type:
        """A websockets connection class that counts every frame its protocol object sends, by
        opcode: what the library put on the wire, not what the scenario meant to send."""
        n = self.n

        class Counting(base):  # type: ignore[misc, valid-type]
            def __init__(self, protocol: Any, *args: Any, **kw: Any) -> None:
                super().__init__(protocol, *args, **kw)
                send = protocol.send_frame

                def send_frame(frame: Any) -> None:
                    n.tally(f"{side}_frames_sent", frame.opcode.name.lower())
                    send(frame)

                protocol.send_frame = send_frame

        return Counting

    async def _start(self) -> int:
        from websockets.asyncio.server import ServerConnection, serve

        self.servers.append(
            await serve(
                self._server,
                "127.0.0.1",
                WS_PORT,
                subprotocols=["amqp"],
                compression=None,
                ping_interval=None,
                create_connection=self._counting(ServerConnection, "server"),
            )
        )
        tcp = await asyncio.start_server(self._client, "127.0.0.1", 0)
        self.servers.append(tcp)
        return int(tcp.sockets[0].getsockname()[1])

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Proton's connection: its bytes go out as fragmented binary WebSocket messages."""
        from websockets.asyncio.client import ClientConnection, connect

        n = self.n
        async with connect(
            f"ws://127.0.0.1:{WS_PORT}{WS_PATH}",
            subprotocols=["amqp"],
            compression=None,
            ping_interval=None,
            proxy=None,
            create_connection=self._counting(ClientConnection, "client"),
        ) as ws:
            n["client_subprotocol"] = ws.subprotocol
            n["path"] = WS_PATH
            await (await ws.ping(b"amqpscope"))
            n.inc("client_pings_sent")
            n.inc("client_pongs_received")

            async def up() -> None:
                while data := await reader.read(65536):
                    pieces = [data[i : i + WS_FRAGMENT] for i in range(0, len(data), WS_FRAGMENT)]
                    await ws.send(pieces if len(pieces) > 1 else data)
                    n.inc("client_messages_sent")
                    n.inc("client_fragmented_messages", int(len(pieces) > 1))
                    n.inc("amqp_bytes_c2s", len(data))
                await ws.close(1000, "amqp connection closed")

            async def down() -> None:
                async for message in ws:
                    n.inc("client_messages_received")
                    with contextlib.suppress(ConnectionError):  # Proton may have closed first
                        writer.write(message)
                        await writer.drain()
                writer.close()

            try:
                await asyncio.gather(up(), down())
                n["client_close_received"] = {"code": ws.close_code, "reason": ws.close_reason}
            finally:
                self.closed.set()

    async def _server(self, ws: Any) -> None:
        """The broker side: each message's payload to RabbitMQ, each read from it one message."""
        n = self.n
        n["server_subprotocol"] = ws.subprotocol
        n["server_request_path"] = ws.request.path
        reader, writer = await asyncio.open_connection(BROKER_HOST, BROKER_PORT)

        async def up() -> None:
            async for message in ws:
                n.inc("server_messages_received")
                with contextlib.suppress(ConnectionError):  # the broker may have closed first
                    writer.write(message)
                    await writer.drain()
            writer.close()

        async def down() -> None:
            while data := await reader.read(65536):
                await ws.send(data)
                n.inc("server_messages_sent")
                n.inc("amqp_bytes_s2c", len(data))

        await asyncio.gather(up(), down())
        n["server_close_received"] = {"code": ws.close_code, "reason": ws.close_reason}


@scenario(
    "10-websocket",
    "1.0",
    "AMQP 1.0 over WebSocket (OASIS WSB 1.0, in clear): Proton's bytes carried by a `websockets` "
    f"client to ws://127.0.0.1:{WS_PORT}{WS_PATH} (subprotocol amqp; a ping first; AMQP bytes "
    f"in binary messages fragmented into frames of {WS_FRAGMENT} bytes), and by a `websockets` "
    "server to RabbitMQ on 5672. As 10-send-receive: 10 unsettled messages accepted by the "
    "broker, received back and accepted, then close; the client closes the WebSocket with 1000. "
    "Only the WebSocket leg is captured.",
    port=WS_PORT,
    capture=CaptureSpec(bpf=f"tcp port {WS_PORT}"),
    setup=(("q", {}),),
    queues=(),
)
def s10_websocket(ctx: Ctx) -> dict[str, Any]:
    """The AMQP WebSocket binding, as Azure Service Bus offers it on 443 but in clear."""
    if busy_connections({WS_PORT}):  # (no probe connection: it would be captured)
        raise RuntimeError(f"port {WS_PORT} is already in use")
    bridges = WebSocketBridges()
    try:
        client = SendThenReceive(ctx, 10)
        client.url = bridges.start()
        n = client.run()
        if not bridges.closed.wait(10):
            raise RuntimeError(f"the WebSocket did not close: {json.dumps(bridges.n)}")
    finally:
        bridges.stop()
    n["websocket"] = {"library": f"websockets {importlib.metadata.version('websockets')}"}
    n["websocket"].update(bridges.n)
    return n
