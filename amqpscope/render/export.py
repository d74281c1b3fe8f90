"""`amqpscope export`: the whole analysis as one JSON document, or as NDJSON records.

The document (schema `export`) holds the capture's metadata, every frame with its decoded fields
and messages, the connections with their tracked state, and the findings. It is written as it
goes, so a large capture never has to sit in memory as one object: frames stream out as they are
decoded, the tracked state follows when the capture ends.

NDJSON puts one record per line, each with a `record` key: `capture`, then one `frame` per
frame, then one `connection` per connection, one `finding` per finding, and a last `summary`
(request/reply pairs and message journeys).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import IO, Any

from amqpscope import __version__
from amqpscope.codec.frames import Frame

SCHEMA_VERSION = 1


def _dump(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def capture_metadata(capture: Any, path: str) -> dict[str, Any]:
    """What the file says of itself (format, interfaces), from the capture reader."""
    return {
        "file": path,
        "format": capture.format,
        "compressed": capture.compressed,
        "interfaces": [
            {"index": i.index, "linktype": i.linktype, "ts-resolution": i.ts_resolution}
            for i in capture.interfaces
        ],
    } | _pieces(capture)


def _pieces(capture: Any) -> dict[str, Any]:
    """The files of a rotated capture read as one (`capture.rotated.CaptureSet`), in the
    order they were read."""
    pieces = getattr(capture, "pieces", None)
    if pieces is None:
        return {}
    return {
        "files": [{"file": p.path, "format": p.format, "compressed": p.compressed} for p in pieces]
    }


class ExportWriter:
    """Writes the export to `out` while frames stream through `frames()`; `close()` adds the
    tracked state, the findings and the capture's totals."""

    def __init__(self, out: IO[str], capture: dict[str, Any], ndjson: bool = False) -> None:
        self.out = out
        self.ndjson = ndjson
        self.capture = dict(capture)
        self.count = 0
        self.first_ts: float | None = None
        self.last_ts: float | None = None
        if ndjson:
            return
        head = {"schema": "amqpscope-export", "schema-version": SCHEMA_VERSION}
        head["amqpscope"] = __version__
        out.write(_dump(head)[:-1] + ',"frames":[')

    def frames(self, frames: Iterable[Frame]) -> Iterable[Frame]:
        """Pass frames through, writing each (a generator, so the caller can also track them)."""
        for frame in frames:
            self.frame(frame)
            yield frame

    def frame(self, frame: Frame) -> None:
        record = frame.to_json()
        ts = record["ts"]  # null for a log line without a timestamp: no time, not 0.0
        if ts is not None:
            if self.first_ts is None:
                self.first_ts = ts
            self.last_ts = ts
        if self.ndjson:
            if self.count == 0:
                self._capture_record()
            self.out.write(_dump({"record": "frame", **record}) + "\n")
        else:
            self.out.write(("," if self.count else "") + "\n" + _dump(record))
        self.count += 1

    def close(
        self,
        summary: dict[str, Any],
        findings: list[dict[str, Any]],
        diagnoses: list[dict[str, Any]] | None = None,
    ) -> None:
        """Finish the document with the tracked `summary`, the findings no frame carried and
        the `diagnoses` (`Diagnosis.to_json()`, ranked)."""
        self.capture.update(
            {"frames": self.count, "first-ts": self.first_ts, "last-ts": self.last_ts}
        )
        every_finding = list(summary.get("findings", [])) + findings
        extras = {k: v for k, v in summary.items() if k not in ("connections", "findings")}
        if self.ndjson:
            if self.count == 0:
                self._capture_record()
            for conn in summary.get("connections", []):
                self.out.write(_dump({"record": "connection", **conn}) + "\n")
            for found in every_finding:
                self.out.write(_dump({"record": "finding", **found}) + "\n")
            for diagnosis in diagnoses or ():
                self.out.write(_dump({"record": "diagnosis", **diagnosis}) + "\n")
            self.out.write(_dump({"record": "summary", **extras, "capture": self.capture}) + "\n")
            return
        tail = {
            "capture": self.capture,
            "connections": summary.get("connections", []),
            "findings": every_finding,
            **extras,
        }
        if diagnoses is not None:
            tail["diagnoses"] = diagnoses
        self.out.write("\n]," + _dump(tail)[1:] + "\n")

    def _capture_record(self) -> None:
        meta = {"schema-version": SCHEMA_VERSION, "amqpscope": __version__, **self.capture}
        self.out.write(_dump({"record": "capture", **meta}) + "\n")
