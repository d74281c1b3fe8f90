"""A frame's time as the line writer writes it (its head's text, cached per packet) is the
record's, orjson's text of the float, at every magnitude."""

from __future__ import annotations

import random

import orjson

from amqpscope.codec.frames import PERFORMATIVE, Frame
from amqpscope.render.lines import LineWriter, record_ndjson

EDGES = (0.0, -1.5, 1e-5, 1e-4, 0.0001234, 1.0, 5e-324, 1e15, 9999999999999998.0, 1e16, 2.5e17)


def _frame(number: int, ts: float) -> Frame:
    frame = Frame("1.0", PERFORMATIVE, "flow", 0, b"\0" * 8)
    frame.number, frame.packet, frame.ts = number, number, ts
    frame.conn, frame.src, frame.dst, frame.direction = 1, "a:1", "b:2", "c2s"
    frame.fields = {"handle": 0}
    return frame


def test_times_are_written_as_orjson_writes_them() -> None:
    rng = random.Random(24)
    times = list(EDGES)
    times += [rng.uniform(1e9, 2e9) for _ in range(3000)]  # capture times
    times += [rng.randrange(0, 4 * 10**15) / 1e6 for _ in range(3000)]  # microseconds
    times += [10 ** rng.uniform(-6, 17) for _ in range(3000)]  # every magnitude
    writer = LineWriter()
    for number, ts in enumerate(times, 1):
        frame = _frame(number, ts)
        assert writer.line(frame) == record_ndjson(frame), ts
        assert f'"ts":{orjson.dumps(ts).decode()},' in writer.line(frame).decode()
