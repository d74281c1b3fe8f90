"""`amqpscope report`: one self-contained HTML page of a capture (model.py its data, sans-IO;
page.py the page, with its template, style and script as package data beside them)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from amqpscope.codec.frames import Frame
from amqpscope.findings import Finding
from amqpscope.render.html.model import ReportBuilder
from amqpscope.track.tracker import Tracker


def report_data(
    frames: Iterable[Frame],
    facts: dict[str, Any],
    accepts: Callable[[dict[str, Any]], bool] | None = None,
    loose: Callable[[], list[Finding]] | None = None,
    tracker: Tracker | None = None,
    keeps: Callable[[Frame, float], bool] | None = None,
    diagnose: Callable[[Tracker], list[dict[str, Any]]] | None = None,
    tree: Callable[[Frame, bool], list[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """Track `frames` and gather the page's data. `loose` gives, once the frames are read, the
    findings no frame carries (the capture's and the dissector's). `diagnose` turns the
    finished tracker into `Diagnosis.to_json()` dicts, which the overview lists (none without
    it)."""
    tracker = tracker or Tracker()
    builder = ReportBuilder(accepts, keeps=keeps, tree=tree)
    for frame in frames:
        tracker.feed(frame)  # first: the findings it raises ride the frame
        builder.add(frame)
    tracker.finish()
    diagnoses = diagnose(tracker) if diagnose is not None else None
    return builder.build(tracker, facts, loose() if loose else [], diagnoses)
