"""orjson's output keeps the buffer it was written in (3.12 and later about 8 KB a value, 3.8 a
third more than its length): what amqpscope keeps of it by the million (the TUI's records, the
Spark rows' JSON columns) is a copy the size of its text. Measured with tracemalloc, which sees
every allocation orjson makes through Python's allocator."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from amqpscope.capture.files import open_capture
from amqpscope.dissect import Dissector
from amqpscope.spark.rows import _json
from amqpscope.track.tracker import Tracker
from amqpscope.tui.store import FrameStore

CAPTURES = Path(__file__).resolve().parent.parent / "captures"


def frames_of(name: str) -> list:
    tracker = Tracker()
    with open_capture(CAPTURES / name) as packets:
        frames = list(Dissector().run(packets))
    for frame in frames:
        tracker.feed(frame)
    return frames


def kept(make) -> tuple[int, int]:
    """Bytes allocated while `make()` runs and is kept, and the bytes of text it holds."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        value, text = make()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del value
    return after - before, text


def test_the_tui_store_keeps_records_the_size_of_their_text() -> None:
    frames = frames_of("091-qos-prefetch.pcap") * 20

    def make():
        store = FrameStore()
        store.extend(frames)
        return store, sum(len(r) for r in store.records)

    allocated, text = kept(make)
    # the records (text plus a bytes object's 33 bytes each), the list and arrays around them
    assert allocated < text + 33 * len(frames) + 200 * len(frames), (allocated, text, len(frames))


def test_json_columns_are_kept_the_size_of_their_text() -> None:
    records = [f.to_json()["fields"] for f in frames_of("10-outcomes.pcap")] * 50

    def make():
        values = [_json(r) for r in records]
        return values, sum(len(v) for v in values)

    allocated, text = kept(make)
    assert allocated < text + 33 * len(records) + 16 * len(records), (allocated, text)
