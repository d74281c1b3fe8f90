"""`amqpscope tui --live` against the real broker: frames appear while a pika client runs, a
filter extends as they arrive, and the cursor stays where the reader put it. Captures on lo:
run it under the broker lock (`flock /tmp/amqpscope-broker.lock pytest ...`)."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("textual", reason="the TUI needs the tui extra (make install installs it)")

from amqpscope.capture.files import open_capture
from amqpscope.capture.live import LiveCapture
from amqpscope.capture.packet import RawPacket
from amqpscope.cli.common import load_keylog
from amqpscope.tui.app import AmqpScope
from amqpscope.tui.loader import load_live
from tests.test_diagnose_live import broker_lock  # noqa: F401 (a fixture)
from tests.test_tui import CAPTURES, filter_with, read_w, shown, truth, write_from

MESSAGES = 30
FILTER = 'name == "content-body"'


def publish_slowly(
    queue: str, started: threading.Event, done: threading.Event, body: str = "tui live"
) -> None:
    """Declare `queue`, publish MESSAGES to it one every 50 ms, delete it (pika)."""
    import pika

    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", 5672))
    try:
        channel = conn.channel()
        channel.queue_declare(queue, auto_delete=False)
        started.set()
        for i in range(MESSAGES):
            channel.basic_publish("", queue, f"{body} {i}".encode())
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
            # the filter first: a key takes seconds on a loaded machine, the client 1.5 s
            await filter_with(pilot, f'fields.routing-key == "{queue}"')
            client = threading.Thread(target=publish_slowly, args=(queue, started, done))
            client.start()
            try:
                assert started.wait(20)
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


@pytest.mark.broker
def test_live_redact_bodies(tmp_path: Path) -> None:
    """`tui --live --redact-bodies`: the bodies pika sends are on the wire (the spool holds
    them) but in no row, record, tree or bytes pane; their sizes are. `w` cuts the spool as
    `read -Y -w` does (the frames found again by packet, not by number)."""
    queue = f"amqpscope.tui-redact.{uuid.uuid4().hex[:8]}"
    secret = f"do-not-show-{uuid.uuid4().hex[:8]}"
    spool, cut = tmp_path / "spool.pcap", tmp_path / "tui.pcap"
    capture = LiveCapture("lo", "tcp port 5672", None, str(spool))
    capture.start()
    started, done = threading.Event(), threading.Event()

    async def run() -> None:
        loader = partial(load_live, capture=capture, redact_bodies=True)
        app = AmqpScope(loader, capture_path=str(spool), on_exit=capture.stop, redact_bodies=True)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause(0.5)
            client = threading.Thread(target=publish_slowly, args=(queue, started, done, secret))
            client.start()
            try:
                assert started.wait(20) and done.wait(30)
            finally:
                client.join(30)
            await pilot.pause(1.0)  # the last batch
            await filter_with(pilot, FILTER)
            bodies = shown(app)
            assert len(bodies) == MESSAGES
            sizes = [len(f"{secret} {i}") for i in range(MESSAGES)]
            assert [r["message"]["body"] for r in bodies] == [
                {"size": size, "redacted": True} for size in sizes
            ]
            assert not any(secret.encode() in record for record in app.store.records)
            app.frames.focus()
            await pilot.press("down")
            await pilot.pause()
            screen = app.export_screenshot()
            assert f"&lt;redacted,&#160;{sizes[1]}&#160;bytes&gt;" in screen
            assert secret not in screen and "do-not" not in screen
            assert "do-not" not in str(app.bytes_pane.render())
            await write_from(pilot, cut)  # w: a second pass over the spool, as read -w's
            assert not app.loading.error

    try:
        asyncio.run(run())
    finally:
        capture.close()
    assert secret.encode() in spool.read_bytes()  # it was there to hide
    command = [sys.executable, "-m", "amqpscope.cli", "read", str(spool), "-Y", FILTER]
    subprocess.run([*command, "-w", str(tmp_path / "read.pcap")], check=True, timeout=120)
    assert cut.read_bytes() == (tmp_path / "read.pcap").read_bytes()


class Replay:
    """A recorded capture's packets, handed to `load_live` as a `LiveCapture` hands them (the
    TLS key log's use does not need the broker's TLS listener)."""

    error = None

    def __init__(self, path: Path) -> None:
        self.path = path

    def packets(self) -> Iterator[RawPacket | None]:
        with open_capture(str(self.path)) as capture:
            yield from capture

    def stop(self) -> None:
        pass


def test_live_keylog_decrypts_and_w_cuts_with_it(tmp_path: Path) -> None:
    """`tui --live --keylog`: TLS frames decrypted as they arrive, and `w` cuts the spool with
    the key log, as `read --keylog -Y -w` does."""
    capture, keys = CAPTURES / "091-tls12.pcap", CAPTURES / "091-tls12.keys"
    expression = 'name == "basic.publish"'
    cut = tmp_path / "tui.pcap"

    async def run() -> int:
        loader = partial(load_live, capture=Replay(capture), keylog=load_keylog(str(keys)))
        app = AmqpScope(loader, capture_path=str(capture), keylog=str(keys))
        async with app.run_test(size=(160, 48)) as pilot:
            for _ in range(100):
                await pilot.pause(0.05)
                if app.loading.done:
                    break
            await filter_with(pilot, expression)
            await write_from(pilot, cut)
            return len(shown(app))

    assert asyncio.run(run()) == truth("091-tls12")["publishes"]
    assert cut.read_bytes() == read_w(
        tmp_path, capture.name, expression, "read.pcap", "--keylog", str(keys)
    )


@pytest.mark.broker
@pytest.mark.usefixtures("broker_lock")  # captures on lo, which the recordings share
def test_live_d_lists_a_stalled_consumer_while_it_is_stalled_and_once_it_acks(
    tmp_path: Path,
) -> None:
    """`tui --live` on the traffic `live --diagnose` reports a stall on (test_diagnose_live's
    client: pika stops acking at its prefetch of 2 for 3 s): `d` lists the consumer stalled
    while it is, naming its tag, connection and queue, and its end once it acks; it listed
    only the trackers' findings until the capture stopped."""
    pika = pytest.importorskip("pika", reason="pika comes with the dev extra")
    queue = f"amqpscope.tui-stall.{uuid.uuid4().hex[:8]}"
    spool = tmp_path / "spool.pcap"
    capture = LiveCapture("lo", "tcp port 5672", None, str(spool))
    capture.start()

    async def run() -> tuple[list[str], list[str], str, float]:
        app = AmqpScope(
            partial(load_live, capture=capture), capture_path=str(spool), on_exit=capture.stop
        )
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause(0.5)
            conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", 5672))
            try:
                ch = conn.channel()
                ch.queue_declare(queue)
                ch.basic_qos(prefetch_count=2)
                for i in range(4):
                    ch.basic_publish("", queue, f"m{i}".encode())
                held: list[int] = []
                ch.basic_consume(queue, lambda _c, m, _p, _b: held.append(m.delivery_tag))
                tag = ch.consumer_tags[0]
                deadline = time.monotonic() + 15
                while len(held) < 2 and time.monotonic() < deadline:
                    conn.process_data_events(time_limit=0.05)
                began = time.monotonic()
                while time.monotonic() < began + 3.0:  # stalled: pika acks nothing
                    conn.process_data_events(time_limit=0.05)
                    await pilot.pause(0.05)
                during = await texts_of_d(pilot)
                ch.basic_ack(held[-1], multiple=True)
                acked = time.monotonic()
                while len(held) < 4 and time.monotonic() < acked + 15:
                    conn.process_data_events(time_limit=0.05)
                stalled = acked - began
                ch.basic_ack(held[-1], multiple=True)
                ch.queue_delete(queue)
                await pilot.pause(2.0)  # the watch's next check (a tick, or the next frame)
                after = await texts_of_d(pilot)
            finally:
                with contextlib.suppress(Exception):
                    conn.close()
            assert not app.loading.done  # still capturing
            return during, after, tag, stalled

    try:
        during, after, tag, stalled = asyncio.run(run())
    finally:
        capture.close()
    who = f"onsumer {tag!r} on channel 1 of connection c"
    (now,) = [t for t in during if who in t]
    assert f"(queue {queue!r}) stopped: 2 of 2 prefetched messages unacked for" in now
    assert "so far" in now
    (ended,) = [t for t in after if who in t]
    assert ended.startswith("warning Stall of consumer") and "acked again in frame" in ended
    seconds = float(ended.split(" ended after ")[1].split(" s")[0])
    assert abs(seconds - stalled) <= 0.2 * stalled


async def texts_of_d(pilot: Any) -> list[str]:
    """`d`'s entries, as their lines read, then closed."""
    from rich.text import Text
    from textual.widgets import OptionList

    app = pilot.app
    await pilot.press("d")
    await pilot.pause()
    texts = []
    for options in app.screen.query(OptionList):
        for i in range(options.option_count):
            prompt = options.get_option_at_index(i).prompt
            texts.append(prompt.plain if isinstance(prompt, Text) else str(prompt))
    await pilot.press("escape")
    await pilot.pause()
    return texts
