"""Every connection's summary, for `summary --json` and `summary --all`, without holding them all.

A retired connection's summary (`Tracker.on_retire`) is pickled as it comes: in memory up to
`MEMORY` bytes, then in an unnamed temporary file, with its offset kept by its order (its first
frame's among the tracked connections). `summaries` gives them back in that order, with the
connections still open at the end, so the document is the one `Tracker.summary` makes when it
keeps every connection. `write_json` writes such a document as `json.dumps(doc, indent=2)` would,
a connection at a time (the whole text of 200,000 connections, and the encoder's pieces of it,
are gigabytes).
"""

from __future__ import annotations

import json
import pickle
from array import array
from collections.abc import Iterable, Iterator
from typing import IO, Any

#: bytes of pickled summaries held in memory before they go to a temporary file
MEMORY = 8 << 20


class Spool:
    def __init__(self) -> None:
        self.offsets = array("q")  # order -> offset of its pickle (-1: not here)
        self.sizes = array("l")
        self.memory: list[bytes] = []  # the pickles, while in memory
        self.held = 0
        self.file: IO[bytes] | None = None
        self.count = 0

    def add(self, order: int, summary: dict[str, Any]) -> None:
        data = pickle.dumps(summary, protocol=pickle.HIGHEST_PROTOCOL)
        if len(self.offsets) <= order:
            grow = order + 1 - len(self.offsets) + len(self.offsets) // 2
            self.offsets.extend([-1] * grow)
            self.sizes.extend([0] * grow)
        self.count += 1
        if self.file is None and self.held + len(data) > MEMORY:
            import tempfile

            self.file = tempfile.TemporaryFile()  # noqa: SIM115 (closed in `close`)
            for chunk in self.memory:
                self.file.write(chunk)
            self.memory = []
        if self.file is None:
            self.offsets[order] = self.held
            self.memory.append(data)
        else:
            self.offsets[order] = self.file.seek(0, 2)
            self.file.write(data)
        self.sizes[order] = len(data)
        self.held += len(data)

    def summaries(self, live: Iterable[tuple[int, dict[str, Any]]]) -> Iterator[dict[str, Any]]:
        """Every connection's summary in order: those spooled, and `live` ((order, summary) of
        the connections open at the end, in order) among them."""
        data = b"".join(self.memory) if self.file is None else None
        positions = self.offsets
        order = 0
        for at, summary in [*live, (len(positions), None)]:
            for spooled in range(order, min(at, len(positions))):
                offset = positions[spooled]
                if offset < 0:
                    continue
                size = self.sizes[spooled]
                if data is not None:
                    chunk = data[offset : offset + size]
                else:
                    assert self.file is not None
                    self.file.seek(offset)
                    chunk = self.file.read(size)
                yield pickle.loads(chunk)
            order = at + 1
            if summary is not None:
                yield summary

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None


def write_json(out: IO[str], document: dict[str, Any], lists: dict[str, Iterable[Any]]) -> None:
    """`document` as `json.dumps(document, indent=2, ensure_ascii=False)` + a newline, with the
    values of the keys in `lists` (in `document`, as placeholders) written an item at a time."""
    encoder = json.JSONEncoder(indent=2, ensure_ascii=False)
    if not document:
        out.write("{}\n")
        return
    out.write("{")
    first = True
    for key, value in document.items():
        out.write(("\n" if first else ",\n") + "  " + encoder.encode(str(key)) + ": ")
        first = False
        if key not in lists:
            out.write(encoder.encode(value).replace("\n", "\n  "))
            continue
        empty = True
        for item in lists[key]:
            out.write(("[" if empty else ",") + "\n    ")
            out.write(encoder.encode(item).replace("\n", "\n    "))
            empty = False
        out.write("[]" if empty else "\n  ]")
    out.write("\n}\n")
