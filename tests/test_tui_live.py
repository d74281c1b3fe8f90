"""`amqpscope tui --live` against the real broker: frames appear while a pika client runs, a
filter extends as they arrive, and the cursor stays where the reader put it. Captures on lo:
run it under the broker lock (`flock /tmp/amqpscope-broker.lock pytest ...`)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from functools import partial
from pathlib import Path

import pytest

pytest.importorskip("textual")

from amqpscope.capture.live import LiveCapture
from amqpscope.tui.app import AmqpScope
from amqpscope.tui.loader import load_live
from tests.test_tui import filter_with, shown

MESSAGES = 30


def publish_slowly(queue: str, started: threading.Event, done: threading.Event) -> None:
    """Declare `queue`, publish MESSAGES to it one every 50 ms, delete it (pika)."""
    import pika

    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", 5672))
    try:
        channel = conn.channel()
        channel.queue_declare(queue, auto_delete=False)
        started.set()
        for i in range(MESSAGES):
            channel.basic_publish("", queue, f"tui live {i}".encode())
            conn.process_data_events(0.05)
        channel.queue_delete(queue)
    finally:
        with contextlib.suppress(Exception):
            conn.close()
        done.set()


@pytest.mark.broker
def test_live_frames_appear_while_a_client_runs(tmp_path: Path) -> None:
    queue = f"amqpscope.tui-live.{uuid.uuid4().hex[:8]}"
    spool = tmp_path / "spool.pcap"
    capture = LiveCapture("lo", "tcp port 5672", None, str(spool))
    capture.start()
    started, done = threading.Event(), threading.Event()
    seen_while_running: list[int] = []

    async def run() -> None:
        app = AmqpScope(
            partial(load_live, capture=capture), capture_path=str(spool), on_exit=capture.stop
        )
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause(0.5)
            client = threading.Thread(target=publish_slowly, args=(queue, started, done))
            client.start()
            try:
                assert started.wait(20)
                await filter_with(pilot, f'fields.routing-key == "{queue}"')
                deadline = time.monotonic() + 30
                while not done.is_set() and time.monotonic() < deadline:
                    await pilot.pause(0.2)
                    if not done.is_set():
                        seen_while_running.append(app.frames.rows)
                    if app.frames.rows >= 3 and app.frames.cursor == 0:
                        app.frames.go(2)  # the reader's position, set while frames arrive
                        kept = app.frames.selected()
            finally:
                client.join(30)
            await pilot.pause(1.5)  # the last batch
            publishes = [r for r in shown(app) if r["name"] == "basic.publish"]
            assert len(publishes) == MESSAGES
            assert app.frames.cursor == 2 and app.frames.selected() == kept
            assert not app.loading.error

    try:
        asyncio.run(run())
    finally:
        capture.close()
    # frames were on the screen before the client finished, and more came after
    grown = [n for n in seen_while_running if n]
    assert grown and grown[0] < MESSAGES
