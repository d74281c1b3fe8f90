"""Frames in, the families' values over capture time out (sans-IO).

The sampler owns a `Tracker` and feeds it; it reads the families (`families.FAMILIES`) from the
trackers' state each time capture time enters a new `interval` (the state as the last frame of
the interval left it, stamped with that frame's time, so a counter steps at the time of the
frame that changed it, to within the interval), and once more at the end. Connections whose TCP
ended are retired by the tracker (constant memory on a long capture or a live interface): their
counters are folded into `retired` first, and their gauges are 0 from then on.

Label values that are application names (`families.BOUNDED`: queue, address, node) are
bounded: `chosen` names (`busiest` of a first pass over a file) keep their own value, or without
a choice the first `max_names` distinct names seen; every other one is counted under `other`.
Never a name that moves: one that left `other` would make `other`'s counter go down, which
Prometheus reads as a reset.

Diagnoses (`diagnose`'s rules) are read of a connection once it has ended (retired, or at the
end of the input): they count at that time, with the seconds each lasted.

Histograms take each `Latency`'s new durations at each sample: exact while the reservoir still
holds every duration (`stats.RESERVOIR`, 4096 per channel or link); past it, the new durations
of a sample are counted at their mean (`_count` and `_sum` stay exact).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any, Final

from amqpscope.codec.connection import LAYER_KIND
from amqpscope.codec.frames import TRANSPORT, Frame
from amqpscope.diagnose import Diagnoser
from amqpscope.metrics.families import BOUNDED, BUCKETS, BY_NAME, FAMILIES, OTHER, Family
from amqpscope.track import amqp10
from amqpscope.track.stats import Latency
from amqpscope.track.tracker import ConnTracker, Tracker

#: the tracked versions, as the protocol label names them
VERSIONS: Final = {"1.0": "1.0", "0-9-1": "0-9-1", "0-9": "0-9", "0-8": "0-8"}
#: names kept per bounded label unless asked otherwise (`--metrics-max-names`)
MAX_NAMES: Final = 100

Labels = tuple[str, ...]
#: family name -> label values -> value (histograms: cumulative bucket counts, then count, sum)
Snapshot = dict[str, dict[Labels, Any]]


class Histogram:
    """One series' cumulative buckets (per `BUCKETS` bound, then +Inf), count and sum."""

    __slots__ = ("buckets", "count", "total")

    def __init__(self) -> None:
        self.buckets = [0] * (len(BUCKETS) + 1)
        self.count = 0
        self.total = 0.0

    def observe(self, seconds: float, times: int = 1) -> None:
        for at, bound in enumerate(BUCKETS):
            if seconds <= bound:
                self.buckets[at] += times
        self.buckets[-1] += times
        self.count += times
        self.total += seconds * times

    def value(self) -> tuple[tuple[int, ...], int, float]:
        return tuple(self.buckets), self.count, self.total


class Sampler:
    """Feed frames; read `samples` (time, snapshot) and `snapshot()` at any time."""

    def __init__(
        self,
        interval: float = 1.0,
        max_names: int = MAX_NAMES,
        tracker: Tracker | None = None,
        conn_labels: bool = False,
        chosen: dict[str, set[str]] | None = None,
    ) -> None:
        """`tracker`: another's (`live`'s pipeline), which feeds it; the sampler then only
        `observe`s the frames tracked and is told of each connection it forgets (`retire`).
        Without one it feeds its own, which retires ended connections. `conn_labels`: the
        families read of connections get a `conn` label (their id, as `--conn` takes it):
        a series per connection, unbounded, so only on request."""
        self.interval = interval
        self.max_names = max_names
        self.conn_labels = conn_labels
        self.chosen = chosen
        if tracker is None:
            tracker = Tracker(retire=True, on_retire=self._retired)
        self.tracker = tracker
        self.retired: dict[str, dict[Labels, float]] = {}
        self.findings: Counter[tuple[str, str]] = Counter()
        self.diagnoser = Diagnoser()
        #: (protocol, direction) -> AMQP frames, and their bytes (a log's frames have none)
        self.frames: Counter[tuple[str, str]] = Counter()
        self.frame_bytes: Counter[tuple[str, str]] = Counter()
        self.diagnosed: Counter[tuple[str, str]] = Counter()  # (code, severity) -> diagnoses
        self.diagnosed_seconds: dict[tuple[str, str], float] = {}
        #: management / CBS requests (the diagnoser's pairs): per connection, the answered ones
        #: taken; (node, operation, status) -> answered; (node, operation) -> left unanswered
        self.requests_taken: dict[int, int] = {}
        self.requests_answered: Counter[Labels] = Counter()
        self.requests_unanswered: Counter[Labels] = Counter()
        self.histograms: dict[str, dict[Labels, Histogram]] = {
            f.name: {} for f in FAMILIES if f.kind == "histogram"
        }
        #: id of a Latency -> (it, durations taken, their total)
        self.watched: dict[int, tuple[Latency, int, float]] = {}
        self.names: dict[str, dict[str, str]] = {label: {} for label in BOUNDED}
        self.last_ts: float | None = None
        #: every sample taken, for `openmetrics`; `keep=False` (live) keeps the latest only
        self.samples: list[tuple[float, Snapshot]] = []
        self.keep = True
        #: the latest sample (replaced whole: a scrape's thread reads it as it is)
        self.latest: tuple[float, Snapshot] | None = None

    # -- frames in ---------------------------------------------------------------------------
    def feed(self, frame: Frame) -> None:
        ts = frame.ts
        last = self.last_ts
        if last is not None and ts and int(ts // self.interval) > int(last // self.interval):
            self.sample()
        self.tracker.feed(frame)
        self.observe(frame)

    def observe(self, frame: Frame) -> None:
        """A frame the tracker has been fed: its findings counted (and read as the diagnoses'
        evidence), its time the latest."""
        self.diagnoser.feed(frame)
        if frame.kind != TRANSPORT and frame.kind != LAYER_KIND and frame.version in VERSIONS:
            key = (VERSIONS[frame.version], frame.direction)
            self.frames[key] += 1
            self.frame_bytes[key] += len(frame.data)
        for found in frame.findings:
            self.findings[(found.code, found.severity)] += 1
        ts = frame.ts
        if ts and (self.last_ts is None or ts > self.last_ts):
            self.last_ts = ts

    def retire(self, conn: ConnTracker) -> None:
        """The tracker is about to forget `conn` (finished): fold what it counted."""
        self._retired(0, conn, None, 0)

    def finish(self) -> None:
        """The end of the input: the trackers' end-of-capture findings, and the last sample."""
        kept = len(self.tracker.findings)
        self.tracker.finish()
        self.count_findings(self.tracker.findings[kept:])
        for conn in self.tracker.connections.values():
            self._diagnose(conn)
            self._left_unanswered(conn.conn)
        self.sample()

    def sample(self, now: float | None = None) -> Snapshot:
        """Read every family now (by default at the last frame's time) and keep it."""
        at = (self.last_ts or 0.0) if now is None else now
        snapshot = self.snapshot(at)
        if self.keep:
            self.samples.append((at, snapshot))
        self.latest = (at, snapshot)
        return snapshot

    def count_findings(self, found: Iterable[Any]) -> None:
        """Findings no frame carries (a connection's at its end, the capture's own)."""
        for one in found:
            self.findings[(one.code, one.severity)] += 1

    # -- reading the families -----------------------------------------------------------------
    def snapshot(self, now: float) -> Snapshot:
        self._take_requests()
        out: Snapshot = {}
        for family in FAMILIES:
            if family.kind == "histogram":
                for labels, latency in self._reads(family, now):
                    self._harvest(family, labels, latency)
                out[family.name] = {k: h.value() for k, h in self.histograms[family.name].items()}
                continue
            # a gauge's series of connections retired stays, at 0 (`_retired`)
            values = dict(self.retired.get(family.name, {}))
            for labels, value in self._reads(family, now):
                values[labels] = values.get(labels, 0.0) + value
            out[family.name] = values
        return out

    def _reads(self, family: Family, now: float) -> Iterable[tuple[Labels, Any]]:
        if family.scope == "capture":
            sources: list[Any] = [self]
        else:
            sources = [c for c in self.tracker.connections.values() if _in_scope(family, c)]
        for source in sources:
            yield from self._read(family, source, now)

    def _read(self, family: Family, source: Any, now: float) -> Iterable[tuple[Labels, Any]]:
        """`family`'s pairs of one connection (or the sampler's own), names bounded, and the
        connection's id last when asked (`conn_labels`)."""
        conn = (str(source.conn),) if self.conn_labels and family.scope != "capture" else ()
        for labels, value in family.read(source, now):
            yield self._bounded(family, labels) + conn, value

    def _bounded(self, family: Family, labels: Labels) -> Labels:
        if not any(name in BOUNDED for name in family.labels):
            return labels
        out = list(labels)
        for at, name in enumerate(family.labels):
            if name in BOUNDED and self.chosen is not None:
                if out[at] not in self.chosen.get(name, ()):
                    out[at] = OTHER
            elif name in BOUNDED:
                kept = self.names[name]
                value = out[at]
                if value not in kept:
                    if len(kept) >= self.max_names:
                        out[at] = OTHER
                        continue
                    kept[value] = value
        return tuple(out)

    def _harvest(self, family: Family, labels: Labels, latency: Latency) -> None:
        """Take the durations `latency` gained since the last sample into its histogram."""
        key = id(latency)
        seen = self.watched.get(key)
        taken, total = (seen[1], seen[2]) if seen is not None and seen[0] is latency else (0, 0.0)
        new = latency.count - taken
        if new <= 0:
            return
        series = self.histograms[family.name].get(labels)
        if series is None:
            series = self.histograms[family.name][labels] = Histogram()
        if latency.count <= latency.size:
            for seconds in latency.samples[taken : latency.count]:
                series.observe(seconds)
        else:
            series.observe((latency.total - total) / new, new)
        self.watched[key] = (latency, latency.count, latency.total)

    def _retired(self, order: int, conn: ConnTracker, layers: Any, found: int) -> None:
        """A finished connection leaves the tracker: its counters stay in `retired`, its
        latencies' last durations go into the histograms, and it is watched no more."""
        now = self.last_ts or 0.0
        self._diagnose(conn)
        self._take_requests()
        self._left_unanswered(conn.conn)
        self.requests_taken.pop(conn.conn, None)
        self.diagnoser.evidence.forget(conn.conn)
        for family in FAMILIES:
            if family.scope == "capture" or not _in_scope(family, conn):
                continue
            if family.kind == "histogram":
                for labels, latency in self._read(family, conn, now):
                    self._harvest(family, labels, latency)
                    self.watched.pop(id(latency), None)
            else:  # a counter's total is kept; a gauge's series stays, at 0
                kept = self.retired.setdefault(family.name, {})
                counter = family.kind == "counter"
                for key, value in self._read(family, conn, now):
                    kept[key] = kept.get(key, 0.0) + (value if counter else 0.0)

    def busiest(self, count: int) -> dict[str, set[str]]:
        """Per bounded label, the `count` names with the most activity in the last sample (the
        sum of the counters and histogram counts that carry the name; ties by name)."""
        activity: dict[str, Counter[str]] = {label: Counter() for label in BOUNDED}
        snapshot = self.latest[1] if self.latest is not None else {}
        for family in FAMILIES:
            positions = [(at, n) for at, n in enumerate(family.labels) if n in BOUNDED]
            if not positions or family.kind == "gauge":
                continue
            for labels, value in snapshot.get(family.name, {}).items():
                amount = value[1] if family.kind == "histogram" else value
                for at, name in positions:
                    activity[name][labels[at]] += amount
        return {
            label: {n for n, _ in sorted(seen.items(), key=lambda kv: (-kv[1], kv[0]))[:count]}
            for label, seen in activity.items()
        }

    def _take_requests(self) -> None:
        """Requests answered since the last look: counted by status, timed into
        `request_seconds` (the diagnoser keeps the first MAX_ANSWERED of a connection's)."""
        histograms = self.histograms["request_seconds"]
        family = BY_NAME["request_seconds"]
        for conn, answered in self.diagnoser.evidence.requests.answered.items():
            taken = self.requests_taken.get(conn, 0)
            for request in answered[taken:]:
                labels = self._bounded(family, (request.node, request.operation))
                self.requests_answered[(*labels, str(request.status))] += 1
                series = histograms.get(labels)
                if series is None:
                    series = histograms[labels] = Histogram()
                series.observe(max(0.0, request.answer_ts - request.ts))
            self.requests_taken[conn] = len(answered)

    def _left_unanswered(self, conn: int) -> None:
        family = BY_NAME["requests_unanswered"]
        for request in self.diagnoser.evidence.requests.unanswered(conn):
            self.requests_unanswered[self._bounded(family, (request.node, request.operation))] += 1

    def _diagnose(self, conn: ConnTracker) -> None:
        for diagnosis in self.diagnoser.connection(conn):
            key = (diagnosis.code, diagnosis.severity)
            self.diagnosed[key] += 1
            self.diagnosed_seconds[key] = self.diagnosed_seconds.get(key, 0.0) + diagnosis.duration

    # -- capture-scoped readers (families.py's "capture" scope) --------------------------------
    def frames_by_direction(self) -> list[tuple[Labels, float]]:
        return [(key, float(n)) for key, n in self.frames.items()]

    def bytes_by_direction(self) -> list[tuple[Labels, float]]:
        return [(key, float(n)) for key, n in self.frame_bytes.items()]

    def requests_by_status(self) -> list[tuple[Labels, float]]:
        return [(key, float(n)) for key, n in self.requests_answered.items()]

    def requests_left(self) -> list[tuple[Labels, float]]:
        return [(key, float(n)) for key, n in self.requests_unanswered.items()]

    def no_latencies(self) -> list[tuple[Labels, Latency]]:
        """For a histogram the sampler fills itself (`request_seconds`)."""
        return []

    def diagnoses_by_code(self) -> list[tuple[Labels, float]]:
        return [(key, float(n)) for key, n in self.diagnosed.items()]

    def diagnosis_seconds_by_code(self) -> list[tuple[Labels, float]]:
        return list(self.diagnosed_seconds.items())

    def findings_by_code(self) -> list[tuple[Labels, float]]:
        return [((code, severity), float(n)) for (code, severity), n in self.findings.items()]

    def journey_latencies(self) -> list[tuple[Labels, Latency]]:
        correlator = self.tracker.correlator
        if correlator is None:
            return []
        return [((queue,), q.latency) for queue, q in correlator.queues.items()]

    def rpc_latencies(self) -> list[tuple[Labels, Latency]]:
        correlator = self.tracker.correlator
        return [((), correlator.rpc_latency)] if correlator is not None else []


def label_names(family: Family, conn_labels: bool) -> tuple[str, ...]:
    """The family's label names as the sampler gives its values."""
    if conn_labels and family.scope != "capture":
        return (*family.labels, "conn")
    return family.labels


def _in_scope(family: Family, conn: ConnTracker) -> bool:
    if family.scope == "any":
        return True
    is10 = isinstance(conn, amqp10.ConnectionTracker)
    return is10 if family.scope == "amqp10" else not is10
