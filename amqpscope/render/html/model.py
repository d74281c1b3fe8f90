"""The report's data: frames and tracked state in, one JSON-ready dict out (sans-IO).

`ReportBuilder.add` takes each frame after the tracker has seen it (so the findings it raised
ride it); `build` takes the finished tracker and returns what the page draws: capture facts,
connections with their peers, diagnoses, one compact row per frame (its timeline text), a detail
tree per kept frame, the links' and channels' table rows, and the series to plot.

Bounds: a report of any capture stays under 5 MB, BokehJS's 1.4 included. Every frame in scope
gets a row (the diagram and the frame list, both paged) and its record (`Frame.to_json()`, raw,
for the page's own `-Y`), up to `MAX_ROWS` (memory); page.py packs them (pack.py) and, past its
byte budget, leaves out the records' messages, then their fields, then rows, and says so. The
first frames keep a detail tree until the trees hold `DETAIL_BYTES`, and frames with a finding
or an error keep one within `EVIDENCE_BYTES` more, so evidence links land. Diagnoses,
connections and links or channels are listed up to `MAX_LISTED` each. Past every bound things
are counted, and the page says how many were left out (ask for a time range with --from/--to,
or --conn).

Every captured string shown is passed through `safe` (control and direction-override characters
as visible escapes) before it reaches the page; the page only ever sets text, never markup. The
records alone stay raw: the page's filter must see what `read -Y` sees, and never shows them.

A frame's detail is its `read -V` tree (`tree`, given by the caller, which has the dissector's
layers) with its decoded 0-9-1 message and its findings; a log's frames, which have no bytes,
show their record (`detail_tree`). The overview lists `diagnose`'s Diagnosis dicts, which the
caller passes to `build`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any, Final, cast

from amqpscope.codec.amqp10.tree import DeliveryStarts
from amqpscope.codec.frames import TRANSPORT, Frame
from amqpscope.filter import is_error
from amqpscope.findings import Finding
from amqpscope.render.html.pack import Shredder
from amqpscope.render.lines import highlights, safe, transport_name
from amqpscope.render.tree import NO_BYTES, value_tree
from amqpscope.track.tracker import Tracker

#: frames with a row (and a record) in the diagram and the frame list: what memory allows
MAX_ROWS: Final = 200_000
#: frames with a detail tree kept (the first ones), and the JSON bytes their trees may take
MAX_DETAILS: Final = 1_000
DETAIL_BYTES: Final = 1_000_000
#: the JSON bytes of trees kept past those for frames with a finding or an error
EVIDENCE_BYTES: Final = 250_000
#: diagnoses, connections, and links or channels listed (each)
MAX_LISTED: Final = 1_000
#: links and channels whose series and histograms are kept for plots (all keep a table row)
MAX_PLOTTED: Final = 24
#: points of one session-window series; later changes are counted, not kept
MAX_WINDOW_POINTS: Final = 2_000
#: bars of a latency histogram
HISTOGRAM_BINS: Final = 20
#: intervals the plots' time axis is cut into, about: one width for every plot, from the
#: capture's whole span (a power of two of seconds, as the trackers' own buckets are)
PLOT_INTERVALS: Final = 40
#: a string value in a detail tree is cut to this many characters (the JSON export keeps all)
MAX_DETAIL_TEXT: Final = 2_000

# bits of a row's flags
ERROR: Final = 1
FINDING: Final = 2
MATCH: Final = 4  # the display filter accepts the frame (all frames when there is none)
CONTENT: Final = 8  # a body piece the diagram folds into the frame before it
TRANSPORT_END: Final = 16

CONTENT_NAMES: Final = ("content-header", "content-body")


def clean(value: Any) -> Any:
    """`value` with every string (keys too) made safe to show; lists and dicts copied."""
    if isinstance(value, str):
        return safe(value)
    if isinstance(value, dict):
        return {safe(str(k)): clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def _folded(frame: Frame) -> bool:
    """A frame the diagram folds into the one before: 0-9-1 content, a 1.0 transfer's
    continuation (a later piece of a multi-frame delivery)."""
    if frame.name in CONTENT_NAMES:
        return True
    return frame.name == "transfer" and frame.fields.get("delivery-id") is None


class ReportBuilder:
    """Collects what the page needs, frame by frame, within its bounds."""

    def __init__(
        self,
        accepts: Callable[[dict[str, Any]], bool] | None = None,
        max_rows: int = MAX_ROWS,
        max_details: int = MAX_DETAILS,
        keeps: Callable[[Frame, float], bool] | None = None,
        tree: Callable[[Frame, bool], list[dict[str, Any]]] | None = None,
    ) -> None:
        """`accepts`: the display filter (-Y) over a frame's record, which marks the frames the
        list shows at first;
        `keeps`: the scope (--conn, --from, --to, ...), outside which frames get no row or
        detail (they are still tracked and plotted); `tree`: a captured frame's `-V` tree as
        `Node.to_json` dicts, given whether it continues a 1.0 delivery (without it, or for a
        frame with no bytes, the detail is the frame's record), its bodies dropped already with
        --redact-bodies (`codec.tree.redact_bodies`)."""
        self.accepts = accepts
        self.keeps = keeps
        self.tree = tree
        self.starts = DeliveryStarts()  # fed every frame: which transfers continue a delivery
        self.out_of_scope = 0
        self.max_rows = max_rows
        self.max_details = max_details
        self.first_ts: float | None = None
        self.last_ts = 0.0
        self.frames = 0
        #: a frame had a time: a capture's always, a log's line when it showed one (Proton's
        #: trace has none, so its rows show their line and nothing is plotted over time)
        self.timed = False
        self.rows: list[list[Any]] = []
        self.records = Shredder()  # as columns at once: the frames need not stay in memory
        #: (conn, channel, dir, handle) -> the name of the 1.0 link its attach gave it
        self.links: dict[tuple[int, Any, str, Any], str] = {}
        self.rows_left_out = 0
        self.matched = 0
        self.details: dict[int, list[list[Any]]] = {}
        self.detail_bytes = 0
        self.evidence_bytes = 0
        self.details_left_out = 0
        #: (conn, channel, dir) -> [[t, incoming-window], ...] from begin and flow frames
        self.windows: dict[tuple[int, int, str], list[list[float]]] = {}
        self.windows_left_out = 0
        #: (conn, dir) -> a 1.0 open's fields: the peers' container ids and properties (the
        #: summary keeps no properties)
        self.opens: dict[tuple[int, str], dict[str, Any]] = {}

    def add(self, frame: Frame) -> None:
        if self.first_ts is None:
            self.first_ts = frame.ts
        self.last_ts = max(self.last_ts, frame.ts)
        self.frames += 1
        line = _untimed_line(frame)
        if line is None:
            self.timed = True
        continues = self.starts.continues(frame) if self.tree is not None else False
        if self.keeps is not None and not self.keeps(frame, self.first_ts):
            self.out_of_scope += 1
            return
        # a line without a time shows its line number where a time would be, as `read` does
        t = round(frame.ts - self.first_ts, 6) if line is None else line
        error = is_error(frame)
        flags = (ERROR if error else 0) | (FINDING if frame.findings else 0)
        record = frame.to_json() if self.accepts or len(self.rows) < self.max_rows else None
        if self.accepts is None or self.accepts(cast(dict[str, Any], record)):  # made: accepts
            flags |= MATCH
            self.matched += 1
        if frame.kind == TRANSPORT:
            flags |= TRANSPORT_END
        elif _folded(frame):
            flags |= CONTENT
        if frame.version == "1.0" and frame.name in ("begin", "flow"):
            self._window(frame, t)
        elif frame.version == "1.0" and frame.name == "open":
            self.opens[(frame.conn, frame.direction)] = frame.fields
        if len(self.rows) < self.max_rows:
            self.rows.append(self._row(frame, t, flags))
            self.records.add(record)
        else:
            self.rows_left_out += 1
        if len(self.details) < self.max_details and self.detail_bytes < DETAIL_BYTES:
            tree = compact_tree(self._detail(frame, continues))
            self.detail_bytes += _size(tree)
            self.details[frame.number] = tree
        elif error and self.evidence_bytes < EVIDENCE_BYTES:  # evidence links must land
            tree = compact_tree(self._detail(frame, continues))
            self.evidence_bytes += _size(tree)
            self.details[frame.number] = tree
        else:
            self.details_left_out += 1

    def _detail(self, frame: Frame, continues: bool) -> list[dict[str, Any]]:
        if self.tree is None:
            return detail_tree(frame)
        nodes = self.tree(frame, continues)  # bodies already dropped with --redact-bodies
        # the record's, not the bytes': the message as decoded (bodies already dropped by the
        # dissector with --redact-bodies) and what the trackers said of the frame
        if frame.message is not None and frame.version != "1.0":  # 1.0's tree shows sections
            nodes.append(value_tree("message", frame.message, cut=MAX_DETAIL_TEXT))
        if frame.findings:
            findings = [f.to_json() for f in frame.findings]
            nodes.append(value_tree("findings", findings, cut=MAX_DETAIL_TEXT))
        return nodes

    def _row(self, frame: Frame, t: float, flags: int) -> list[Any]:
        name = transport_name(frame) if frame.kind == TRANSPORT else frame.name
        return [
            frame.number,
            t,
            frame.conn,
            frame.direction,
            frame.channel,
            safe(name),
            safe(highlights(frame)),
            flags,
            [safe(f.code) for f in frame.findings],
            self._link(frame),
        ]

    def _link(self, frame: Frame) -> str | None:
        """The 1.0 link a frame belongs to, by the name its attach gave it (a lane of its own
        in the diagram); None for session and connection frames, and for 0-9-1."""
        if frame.version != "1.0" or frame.kind == TRANSPORT:
            return None
        handle = frame.fields.get("handle")
        if not isinstance(handle, int) or isinstance(handle, bool):
            return None
        key = (frame.conn, frame.channel, frame.direction, handle)
        if frame.name == "attach":
            name = frame.fields.get("name")
            self.links[key] = safe(name if isinstance(name, str) else f"handle {handle}")
        return self.links.get(key, f"handle {handle}")

    def _window(self, frame: Frame, t: float) -> None:
        window = frame.fields.get("incoming-window")
        if not isinstance(window, int) or frame.channel is None:
            return
        points = self.windows.setdefault((frame.conn, frame.channel, frame.direction), [])
        if points and points[-1][1] == window:
            return
        if len(points) < MAX_WINDOW_POINTS:
            points.append([t, window])
        else:
            self.windows_left_out += 1

    def build(
        self,
        tracker: Tracker,
        facts: dict[str, Any],
        findings: list[Finding] | None = None,
        diagnoses: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """The page's data. `facts`: what the caller knows of the input (file name, packets,
        options); `findings`: those no frame carries (capture, TCP, connections left open);
        `diagnoses`: `Diagnosis.to_json()` dicts (`diagnose`'s; none listed without them)."""
        summary = tracker.summary()
        origin = self.first_ts or 0.0
        loose = [f.to_json() for f in findings or []]
        diagnoses = diagnoses or []
        connections = summary["connections"]
        units = [u for conn in tracker.connections.values() for u in _units(conn, origin)]
        timed = self.timed or not self.frames
        if not timed:
            units = [_untimed(u) for u in units]
        plotted = _plotted(units[:MAX_LISTED])
        # one interval for every plot, from the capture's span: a rate bucketed at 15 us beside
        # one at 0.125 s read as 100,000 a second beside nothing
        width = plot_width(self.last_ts - origin if self.frames else 0.0, plotted)
        for unit in plotted:
            unit["series"] = {k: regrid(v, width) for k, v in unit["series"].items()}
        data = clean(
            {
                "format": 2,
                "facts": {
                    **facts,
                    "frames": self.frames,
                    # none without times: the page says the log has no timestamps
                    "timed": timed,
                    "duration": (
                        (round(self.last_ts - origin, 6) if self.frames else 0.0) if timed else None
                    ),
                    "start": round(origin, 6) if timed else None,
                    "bucket-seconds": width,
                    "rows-left-out": self.rows_left_out,
                    "out-of-scope": self.out_of_scope,
                    "details-left-out": self.details_left_out,
                    "matched": self.matched,
                    "windows-left-out": self.windows_left_out,
                    "diagnoses-left-out": max(len(diagnoses) - MAX_LISTED, 0),
                    "connections-left-out": max(len(connections) - MAX_LISTED, 0),
                    "units-left-out": max(len(units) - MAX_LISTED, 0),
                },
                "diagnoses": diagnoses[:MAX_LISTED],
                # the input's own findings (a damaged capture, a log's bad lines): what `read`
                # says on stderr, which no diagnosis carries when `diagnose` made them
                "input-findings": loose[:MAX_LISTED],
                "connections": [
                    _connection(
                        c, self.opens.get((c["id"], "c2s")), self.opens.get((c["id"], "s2c"))
                    )
                    for c in connections[:MAX_LISTED]
                ],
                "undecoded": summary.get("undecoded", [])[:MAX_LISTED],
                "units": plotted,
                "columns": {
                    "link": [name for name, _ in LINK_COLUMNS],
                    "channel": [name for name, _ in CHANNEL_COLUMNS],
                },
                "windows": [
                    {"conn": c, "channel": ch, "dir": d, "points": points}
                    for (c, ch, d), points in sorted(self.windows.items())
                    if timed
                ],
                "details": {str(n): tree for n, tree in self.details.items()},
            }
        )
        data["rows"] = self.rows  # made safe as each was made (`_row`): not walked again
        data["records"] = self.records  # raw: the page's -Y sees what read -Y sees (pack.py)
        return data


#: the tables' columns: (heading, path into a link's or channel's summary; "*" joins a list)
LINK_COLUMNS: Final = (
    ("handle", "handle"),
    ("name", "name"),
    ("role", "role"),
    ("source", "source"),
    ("target", "target"),
    ("state", "state"),
    ("deliveries", "deliveries"),
    ("settled", "settled"),
    ("unsettled", "unsettled"),
    ("link-credit", "credit.link-credit"),
    ("settle p50 ms", "latency.p50"),
    ("settle p99 ms", "latency.p99"),
)
CHANNEL_COLUMNS: Final = (
    ("channel", "channel"),
    ("use", "use"),
    ("state", "state"),
    ("publishes", "publishes"),
    ("deliveries", "deliveries"),
    ("acks", "acks"),
    ("nacks", "nacks"),
    ("rejects", "rejects"),
    ("unacked", "unacked"),
    ("max unacked", "max-unacked"),
    ("prefetch", "prefetch.count"),
    ("consumer queues", "consumers.*.queue"),
    ("ack p50 ms", "ack-latency-ms.p50"),
    ("confirm p50 ms", "confirms.latency-ms.p50"),
)


def _at(value: Any, path: list[str]) -> Any:
    for i, step in enumerate(path):
        if step == "*":
            items = value if isinstance(value, list) else []
            found = [_at(item, path[i + 1 :]) for item in items]
            return ", ".join(str(v) for v in found if v is not None) or None
        if not isinstance(value, dict):
            return None
        value = value.get(step)
    return value


def _cells(row: dict[str, Any], columns: tuple[tuple[str, str], ...]) -> list[Any]:
    """A link's or channel's table row: the values `columns` name, in order."""
    return [_at(row, path.split(".")) for _, path in columns]


def _size(value: Any) -> int:
    """About the bytes `value` takes in the page's JSON (before escaping)."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str))


def _plotted(units: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Series and histograms for the first MAX_PLOTTED units that have any; the rest keep their
    table rows, marked `plotted` false."""
    kept = 0
    for unit in units:
        has = any(unit["series"].values()) or any(unit["histograms"].values())
        if has and kept < MAX_PLOTTED:
            kept += 1
            unit["plotted"] = True
            continue
        unit["plotted"] = False if has else None  # None: nothing to plot
        unit["series"], unit["histograms"] = {}, {}
    return units


def plot_width(span: float, units: list[dict[str, Any]]) -> float:
    """The plots' interval: the power of two of seconds nearest above a PLOT_INTERVALS-th of
    `span`, and no finer than any series' own buckets (which it then holds whole)."""
    widths = [s["bucket-seconds"] for u in units for s in u["series"].values() if s]
    wanted = max([span / PLOT_INTERVALS, *widths]) if span > 0 or widths else 1.0
    return float(2.0 ** math.ceil(math.log2(wanted))) if wanted > 0 else 1.0


def regrid(series: dict[str, Any] | None, width: float) -> dict[str, Any] | None:
    """A tracker series (start from the first frame, buckets of its own width) on the plots'
    grid: interval i is [i * width, (i + 1) * width) from the first frame, and each of the
    series' buckets counts in the interval that holds its middle. Counts and totals add up,
    a level keeps its extremes, a latency its longest and its mean over the samples; an
    interval with no latency sample is null in both (a gap, not a line across it)."""
    if not series:
        return series
    own = series["bucket-seconds"]
    start = series["start"]
    n = len(series.get("counts") or series.get("max") or [])
    if not n:
        return series
    slots = [int((start + (i + 0.5) * own) / width) for i in range(n)]
    first = slots[0]
    size = slots[-1] - first + 1
    # exact: a power of two times a whole number (the page adds intervals to it)
    out: dict[str, Any] = {"start": first * width, "bucket-seconds": width}
    if "max-ms" in series:  # latencies: longest, mean over the samples, how many
        counts, totals = [0] * size, [0.0] * size
        longest: list[float | None] = [None] * size
        for i, slot in enumerate(slots):
            count = series["counts"][i]
            if not count:
                continue
            j = slot - first
            counts[j] += count
            totals[j] += series["mean-ms"][i] * count
            high = series["max-ms"][i]
            longest[j] = high if longest[j] is None else max(longest[j], high)
        out["max-ms"] = longest
        pairs = zip(totals, counts, strict=True)
        out["mean-ms"] = [round(t / c, 3) if c else None for t, c in pairs]
        out["counts"] = counts
    elif "max" in series:  # a level: its extremes in each interval
        highs: list[int | None] = [None] * size
        lows: list[int | None] = [None] * size
        for i, slot in enumerate(slots):
            j = slot - first
            high, low = series["max"][i], series["min"][i]
            highs[j] = high if highs[j] is None else max(highs[j], high)
            lows[j] = low if lows[j] is None else min(lows[j], low)
        out["max"], out["min"] = highs, lows
    else:  # a rate: how many in each interval
        totals_n = [0] * size
        for i, slot in enumerate(slots):
            totals_n[slot - first] += series["counts"][i]
        out["counts"] = totals_n
    return out


def _untimed_line(frame: Frame) -> int | None:
    """The log line of a frame read from a log line without a timestamp; None for a frame
    with a time (a capture's, a timed log line's)."""
    source = frame.source
    if source is None or frame.ts:
        return None
    line = source.get("line")
    return line if isinstance(line, int) else 0


def _untimed(unit: dict[str, Any]) -> dict[str, Any]:
    """A link or channel of an input without times: no series or histograms (every event at
    time 0 would draw one bucket of a huge rate and latencies of 0 ms), no latency cells."""
    columns = LINK_COLUMNS if unit["kind"] == "link" else CHANNEL_COLUMNS
    unit["cells"] = [
        None if heading.endswith(" ms") else value
        for (heading, _), value in zip(columns, unit["cells"], strict=True)
    ]
    unit["series"] = {}
    unit["histograms"] = {}
    return unit


def _peer(product: Any, open_fields: Any) -> str:
    """A peer in a few words: 0-9-1's product and version, 1.0's container id."""
    if isinstance(product, dict):
        words = [str(product.get(k)) for k in ("product", "version") if product.get(k)]
        platform = product.get("platform")
        return " ".join(words) + (f" ({platform})" if platform else "")
    if isinstance(open_fields, dict):
        properties = open_fields.get("properties")
        words = []
        if isinstance(properties, dict):
            words = [str(properties[k]) for k in ("product", "version") if properties.get(k)]
            if properties.get("platform"):
                words.append(f"({properties['platform']})")
        container = open_fields.get("container-id")
        if container:
            words.append(f"container {container}")
        return " ".join(words)
    return ""


def _connection(
    summary: dict[str, Any], client_open: Any = None, server_open: Any = None
) -> dict[str, Any]:
    """A connection's overview line: its ends, version, state and peers."""
    opened = summary.get("open") or {}
    return {
        "id": summary["id"],
        "version": summary["version"],
        "client": summary["client"],
        "server": summary["server"],
        "state": summary.get("state"),
        "transport": summary.get("transport"),
        "client-peer": _peer(summary.get("client-product"), client_open or opened.get("client")),
        "server-peer": _peer(summary.get("server-product"), server_open or opened.get("server")),
        "user": summary.get("user"),
        "vhost": summary.get("vhost"),
        "close": summary.get("close"),
    }


def _histogram(samples: list[float]) -> dict[str, Any] | None:
    """Samples in seconds → HISTOGRAM_BINS equal bars in milliseconds over [min, max]."""
    if not samples:
        return None
    ms = [s * 1000.0 for s in samples]
    low, high = min(ms), max(ms)
    if high == low:  # one value: one bar, a tenth of it wide (a microsecond at least)
        return {"low": round(low, 3), "width": max(round(low / 10, 3), 0.001), "counts": [len(ms)]}
    width = (high - low) / HISTOGRAM_BINS
    counts = [0] * HISTOGRAM_BINS
    for value in ms:
        counts[min(int((value - low) / width), HISTOGRAM_BINS - 1)] += 1
    return {"low": round(low, 3), "width": round(width, 6), "counts": counts}


def _series(series: dict[str, Any] | None, origin: float) -> dict[str, Any] | None:
    """A tracker series (`track/stats.py`) with its start relative to the capture's first frame."""
    if not series:
        return None
    return {**series, "start": round(series["start"] - origin, 6)}


def _units(conn: Any, origin: float) -> list[dict[str, Any]]:
    """The links (1.0) or channels (0-9-1) of a connection tracker: their summary rows, their
    series and a histogram of their latency samples (settle, ack, confirm)."""
    out: list[dict[str, Any]] = []
    if conn.version == "1.0":
        for session in conn.sessions:
            for link in session.links:
                row = link.summary()
                series = row.pop("series", {})
                out.append(
                    {
                        "conn": conn.conn,
                        "kind": "link",
                        "label": f"c{conn.conn} h{row.get('handle')} {row.get('name')}",
                        "key": f"c{conn.conn} h{row.get('handle')}",  # plot titles: short
                        "cells": _cells(row, LINK_COLUMNS),
                        "series": {k: _series(v, origin) for k, v in series.items()},
                        "histograms": {"settle latency": _histogram(link.latency.samples)},
                    }
                )
        return out
    listed = list(conn.epochs) + [e for e in conn.channels.values() if not e.listed]
    for epoch in listed:
        row = epoch.to_json()
        series = row.pop("series", {})
        label = f"c{conn.conn} ch{row.get('channel')}" + (
            f" (use {row['use']})" if row.get("use", 1) != 1 else ""
        )
        out.append(
            {
                "conn": conn.conn,
                "kind": "channel",
                "label": label,
                "key": label,
                "cells": _cells(row, CHANNEL_COLUMNS),
                "series": {k: _series(v, origin) for k, v in series.items()},
                "histograms": {
                    "ack latency": _histogram(epoch.ack_latency.samples),
                    "confirm latency": _histogram(epoch.confirm_latency.samples),
                },
            }
        )
    return out


def compact_tree(nodes: list[dict[str, Any]]) -> list[list[Any]]:
    """Tree nodes as the page keeps them, a third of the size: [name, value, type, children,
    offset, length], trailing empty places left off."""
    out = []
    for node in nodes:
        children = node.get("children")
        kind = node.get("type")
        bytes_of = kind not in NO_BYTES  # a record's or layer's node has no place in the frame
        item = [
            node.get("name"),
            node.get("value"),
            kind,
            compact_tree(children) if children else None,
            node.get("offset") if bytes_of else None,
            node.get("length") if bytes_of else None,
        ]
        while item and item[-1] is None:
            item.pop()
        out.append(item)
    return out


def detail_tree(frame: Frame) -> list[dict[str, Any]]:
    """The detail of a frame no -V tree is made for (a log's, which has no bytes): its `--json`
    record as tree nodes."""
    record = frame.to_json()
    return [value_tree(key, value, cut=MAX_DETAIL_TEXT) for key, value in record.items()]
