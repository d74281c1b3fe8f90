"""Reading frames for the TUI, in a worker thread: capture → dissect → track → `FrameStore`.

The same wiring as `read` (a file) and `live` (an interface), batched: frames go to the store in
runs of `BATCH`, and every `SUMMARY_SECONDS` the tracker's summary is taken here, in the thread
that owns the tracker, for the UI to build its tree from. The UI polls `Loading` (no call from
this thread into the UI's: a blocked UI never blocks reading). `stop()` ends either source.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from amqpscope.codec.frames import Frame
from amqpscope.findings import Finding
from amqpscope.tui.store import FrameStore

if TYPE_CHECKING:
    from amqpscope.sources import Input

BATCH = 2000
SUMMARY_SECONDS = 2.0
#: live frames reach the store at least this often while packets keep coming
LIVE_BATCH_SECONDS = 0.1


@dataclass
class Loading:
    """What the worker has done so far; read by the UI, written by the worker."""

    store: FrameStore = field(default_factory=FrameStore)
    summary: dict[str, Any] | None = None
    summary_version: int = 0
    findings: list[Finding] = field(default_factory=list)  # carried by no frame
    #: `Diagnosis.to_json()` of every diagnosis, once the whole input is read (None before)
    diagnoses: list[dict[str, Any]] | None = None
    #: live: the stalls `live --diagnose` reports while they happen (`diagnose.Watch`), ended
    #: ones then those still on, as `Diagnosis.to_json()`; replaced whole, never changed
    stalls: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False
    error: str = ""
    position: tuple[int, int] = (0, 0)  # bytes read, file size
    stopping: threading.Event = field(default_factory=threading.Event)
    on_batch: Callable[[], None] | None = None  # e.g. the view's catch-up, in this thread

    def stop(self) -> None:
        self.stopping.set()

    def _publish(self, summary: dict[str, Any]) -> None:
        self.summary = summary
        self.summary_version += 1

    def _add(self, frames: list[Frame]) -> None:
        self.store.extend(frames)
        if self.on_batch is not None:
            self.on_batch()


def load_file(
    loading: Loading,
    path: str | tuple[str, ...],
    show_secrets: bool = False,
    keylog: Any = None,
    fmt: str | None = None,
    redact_bodies: bool = False,
    opened: tuple[Input, contextlib.ExitStack] | None = None,
) -> None:
    """Read the capture or frame-trace log at `path` (or the files of a rotated capture; `fmt`:
    the log's format, else told from its content) into `loading` (run in a worker thread).
    `opened`: the input already open (`sources.open_source`, entered on the `ExitStack`, which
    this closes once read): `amqpscope tui` opened it to say at once when it cannot be read."""
    from amqpscope.capture.files import CaptureError
    from amqpscope.sources import open_source

    try:
        with contextlib.ExitStack() as stack:
            if opened is not None:
                source = opened[0]
                stack.push(opened[1])
            else:
                source = stack.enter_context(open_source(path, fmt))
            _read(loading, source, show_secrets, keylog, redact_bodies)
    except CaptureError as exc:  # a `sources.SourceError` too
        loading.error = str(exc)
    except OSError as exc:
        loading.error = f"{path}: {exc.strerror or exc}"
    finally:
        loading.done = True


def _read(
    loading: Loading, source: Input, show_secrets: bool, keylog: Any, redact_bodies: bool
) -> None:
    """`load_file`'s loop over the open `source`: frames tracked, diagnosed and stored."""
    from amqpscope.diagnose import Diagnoser
    from amqpscope.track.tracker import Tracker

    tracker = Tracker()
    diagnoser = Diagnoser()
    batch: list[Frame] = []
    next_summary = time.monotonic() + SUMMARY_SECONDS
    try:
        tracker.source = source.source  # before its first frame
        for frame in source.frames(show_secrets, redact_bodies, keylog=keylog):
            tracker.feed(frame)
            diagnoser.feed(frame)
            batch.append(frame)
            if len(batch) >= BATCH:
                loading._add(batch)
                batch = []
                loading.position = source.file.position()
                if loading.stopping.is_set():
                    return
                if time.monotonic() >= next_summary:
                    loading._publish(tracker.summary())
                    next_summary = time.monotonic() + SUMMARY_SECONDS * 4
        loading._add(batch)
        batch = []
        placed = len(tracker.findings)
        tracker.finish()
        loading.findings = source.findings + tracker.findings[placed:]
        loading.diagnoses = [d.to_json() for d in diagnoser.diagnoses(tracker)]
        loading._publish(tracker.summary())
    finally:
        if batch:
            loading._add(batch)


def load_live(
    loading: Loading,
    capture: Any,
    idle: float = 600.0,
    show_secrets: bool = False,
    redact_bodies: bool = False,
    keylog: Any = None,
) -> None:
    """Decode a started `LiveCapture` into `loading` until it stops (run in a worker thread);
    `keylog` a loaded key log (`load_keylog`, re-read as a client appends to it)."""
    from amqpscope.diagnose import Diagnoser, Watch
    from amqpscope.diagnose.watch import ENDED
    from amqpscope.live_decode import KEEP_FINDINGS, LiveDecoder

    diagnoser, watch = Diagnoser(), Watch()
    pipeline = LiveDecoder(
        show_secrets, idle, redact_bodies=redact_bodies, diagnoser=diagnoser, watch=watch
    )
    pipeline.dissector.context.keylog = keylog
    ended: deque[dict[str, Any]] = deque(maxlen=KEEP_FINDINGS)

    def watched(now: float) -> None:
        """The stalls as `live --diagnose` checks them: after frames, at their time, and on
        each tick (a stall goes on while the wire is quiet)."""
        events, pipeline.watched = pipeline.watched, []  # of connections just forgotten
        changed = bool(events)
        for event, diagnosis in events + watch.check(pipeline.tracker, now):
            changed = True
            if event == ENDED:
                ended.append(diagnosis.to_json())
        if changed or watch.latest:
            loading.stalls = [*ended, *(d.to_json() for d in watch.ongoing())]

    last_tick = time.monotonic()
    next_summary = last_tick
    next_batch = last_tick + LIVE_BATCH_SECONDS
    pending: list[Frame] = []
    try:
        for pkt in capture.packets():
            if pkt is not None:
                frames = pipeline.feed(pkt)
                if frames:
                    pending.extend(frames)
                    watched(frames[-1].ts)
            now = time.monotonic()
            if now - last_tick >= 1.0:
                last_tick = now
                wall = time.time()
                pending.extend(pipeline.tick(wall))
                watched(wall)
            # to the screen when the wire pauses, a batch is full, or a tenth of a second passed
            if pending and (pkt is None or len(pending) >= BATCH or now >= next_batch):
                loading._add(pending)
                pending = []
                next_batch = now + LIVE_BATCH_SECONDS
            if now >= next_summary:
                loading._publish(pipeline.summary())
                loading.findings = list(pipeline.findings)
                next_summary = now + SUMMARY_SECONDS
            if loading.stopping.is_set():
                capture.stop()
        pending.extend(pipeline.finish())
        loading._add(pending)
        pending = []
        loading.findings = list(pipeline.findings)
        watched(time.time())
        # once the capture stopped: a diagnosis of what was open speaks of the end
        loading.diagnoses = [d.to_json() for d in diagnoser.diagnoses(pipeline.tracker)]
        loading._publish(pipeline.summary())
        if capture.error:
            loading.error = f"capture ended: {capture.error}"
    finally:
        if pending:
            loading._add(pending)
        loading.done = True
