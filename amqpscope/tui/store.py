"""The frames a TUI session holds: one compact record per frame, rows drawn from it on demand.

A million `Frame` objects with their field dicts would take gigabytes; a frame's `--json`
record as orjson bytes takes a few hundred bytes and is what filters, the detail pane and the
line renderer read back (one `orjson.loads` per row drawn). The frame's own bytes are kept up to
`KEEP_BYTES` (the bytes pane), and the few columns scopes and lookups need sit in arrays.
Appended by the loading worker while the UI reads: `len` only grows, and a row once appended
never changes.
"""

from __future__ import annotations

import threading
from array import array
from bisect import bisect_left
from typing import Any

import orjson

from amqpscope.codec.frames import Frame
from amqpscope.findings import Finding

#: bytes of a frame kept for the bytes pane (a 1 MB message is shown by its first 64 KiB)
KEEP_BYTES = 65536


class FrameStore:
    """Records in capture order; index i is the i-th frame read (frame numbers are kept too:
    they rise but may skip, e.g. when a source drops a frame)."""

    def __init__(self) -> None:
        self.records: list[bytes] = []
        self.data: list[bytes] = []
        self.numbers = array("q")
        self.conns = array("q")
        self.packets = array("q")  # the packet each frame completed in (0: none)
        self.first_ts: float | None = None
        self.flagged = array("q")  # indexes of frames that carry findings
        self.lock = threading.Lock()  # appends in runs, so a reader sees whole frames

    def __len__(self) -> int:
        return len(self.numbers)

    def extend(self, frames: list[Frame]) -> None:
        """Append frames (already tracked: their findings ride them)."""
        dumps = orjson.dumps
        rows: list[bytes] = []
        for frame in frames:
            try:
                # a copy of orjson's bytes, not them: its output keeps the buffer it was written
                # in (orjson 3.12 and later about 8 KB a record, 7.8 GB for a million frames;
                # 3.8 a third more than the copy takes)
                rows.append(memoryview(dumps(frame.to_json())).tobytes())
            except TypeError:  # a key orjson refuses (a non-string map key): json's text
                import json

                rows.append(json.dumps(frame.to_json(), default=str).encode())
        with self.lock:
            base = len(self.numbers)
            if self.first_ts is None and frames:
                self.first_ts = frames[0].ts
            self.records.extend(rows)
            self.data.extend([f.data[:KEEP_BYTES] for f in frames])
            self.conns.extend([f.conn for f in frames])
            self.packets.extend([f.packet or 0 for f in frames])
            self.flagged.extend([base + i for i, f in enumerate(frames) if f.findings])
            self.numbers.extend([f.number for f in frames])  # last: len() counts whole frames

    def record(self, index: int) -> dict[str, Any]:
        """The frame's `--json` record."""
        value: dict[str, Any] = orjson.loads(self.records[index])
        return value

    def frame(self, index: int) -> Frame:
        """The frame rebuilt from its record, for the line renderer (bytes as kept)."""
        return frame_from_record(self.record(index), self.data[index])

    def place(self, index: int) -> tuple[int, int]:
        """Where the frame sits in the capture: (its packet, how many frames before it completed
        in that packet). Unlike its number, a second pass over the capture file finds it there
        even when live reading made frames the file does not hold (a connection gone idle)."""
        packets = self.packets
        packet, first = packets[index], index
        while first > 0 and packets[first - 1] == packet:
            first -= 1
        return packet, index - first

    def index_of(self, number: int) -> int | None:
        """The index of frame `number`, or None when no frame has it."""
        i = bisect_left(self.numbers, number)
        return i if i < len(self.numbers) and self.numbers[i] == number else None


def frame_from_record(record: dict[str, Any], data: bytes = b"") -> Frame:
    """A `Frame` as `Frame.to_json` wrote it (the inverse, bytes aside)."""
    findings = [
        Finding(
            f.get("code", ""),
            f.get("severity", ""),
            f.get("message", ""),
            f.get("packet"),
            f.get("conn"),
            f.get("frame"),
        )
        for f in record.get("findings", ())
    ]
    return Frame(
        record.get("version", ""),
        record.get("kind", ""),
        record.get("name", ""),
        record.get("channel"),
        data,
        record.get("dir", ""),
        record.get("packet", 0),
        record.get("ts", 0.0),
        record.get("frame", 0),
        record.get("conn", 0),
        record.get("src", ""),
        record.get("dst", ""),
        record.get("fields") or {},
        findings,
        record.get("message"),
        record.get("source"),  # a frame read from a log: its file and line
    )
