"""What the executors run (pure Python, sans-IO below the file read): capture files, or the
packets of one stitched connection, in; rows of the tables (`tables.COLUMNS`) out.

The decode is exactly the CLI's: `open_capture` → `Dissector` → `Tracker` (`feed`, `finish`,
`summary`), plus `DeliveryLog` for the per-delivery rows. Output is a stream of records
`(kind, value)`: kind is a table name (value: a list of row tuples, up to `CHUNK` frames or
`CHUNK_BYTES` of their JSON at a time), "edge" (a `stitch.Edge`), "packets"
(`(capture, conn, [RawPacket])` of an edge connection) or "meta" (one dict per file).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from amqpscope.capture.files import CaptureError, open_capture
from amqpscope.capture.linklayer import SegmentDecoder
from amqpscope.capture.packet import FIN, SYN, RawPacket, Segment
from amqpscope.codec.frames import TRANSPORT, Frame
from amqpscope.dissect import Dissector, endpoint_text
from amqpscope.findings import Finding
from amqpscope.sources import NotALog, input_kind  # what the file is, as every face tells it
from amqpscope.spark.deliveries import DeliveryLog
from amqpscope.spark.inputs import (  # noqa: F401  (also this module's names, as before)
    LOG_SUFFIXES,
    MAGICS,
    looks_like_capture,
    looks_like_log,
)
from amqpscope.spark.stitch import Edge, flow_pair
from amqpscope.spark.tables import UNDATED, frame_text_bytes, row
from amqpscope.track.tracker import Tracker

Record = tuple[str, Any]

_DAYS: dict[int, str] = {}
#: frame rows handed on at a time (a record per frame cost a tenth of a worker's time in passing
#: rows from here to the writer), or fewer when their JSON texts hold this many bytes (big
#: messages): what a worker holds stays bounded
CHUNK = 1024
CHUNK_BYTES = 4 << 20
#: rows of connections that ended handed on at a time (each carries its summary's JSON)
CONNECTION_ROWS = 64


def day(ts: float | None) -> str:
    """The UTC day of `ts` (`YYYY-MM-DD`), or `UNDATED` for no time (`tables.UNDATED`)."""
    if ts is None:
        return UNDATED
    key = int(ts // 86400)
    text = _DAYS.get(key)
    if text is None:
        text = _DAYS[key] = time.strftime("%Y-%m-%d", time.gmtime(key * 86400))
    return text


def _json(value: Any) -> bytes:
    """Compact JSON in UTF-8 (a string column takes the bytes as they are): orjson, ten times
    faster than `json`, falling back to it for what orjson refuses (an integer past 64 bits).
    Plain `dumps` first: the same bytes whenever it succeeds (keys all strings, every value
    JSON's), and a third faster than with a `default` and non-string keys allowed. A copy of
    orjson's bytes, not them: a row is kept (a batch of 8,192, a file's rows), and orjson's
    output keeps the buffer it was written in (orjson 3.12 and later about 8 KB a value)."""
    try:
        return memoryview(orjson.dumps(value)).tobytes()
    except TypeError:
        pass
    try:
        return memoryview(
            orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS)
        ).tobytes()
    except TypeError:  # orjson.JSONEncodeError is one
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str).encode()


def file_key(capture: str, conn: int) -> str:
    """The `conn_key` of connection `conn` of `capture`'s own decode."""
    return f"{capture}#{conn}"


@dataclass(slots=True)
class Place:
    """Where a decode run's packets and connections belong in the run as a whole.

    A file's own decode maps every packet and connection to itself; a stitched connection's
    decode maps its packets back to their files and its connection to the key of its first part.
    """

    capture: str
    #: run packet number -> (capture, packet number in that file); None: the identity
    packets: list[tuple[str, int]] | None = None
    #: capture -> that file's connection id (stitched runs)
    conns: dict[str, int] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    keys: dict[int, str] = field(default_factory=dict)  # conn -> key, made once
    #: a trace log's decode: frames have a `source` line, and a time of 0.0 is none logged
    logged: bool = False

    def when(self, ts: float | None) -> float | None:
        """A time as the rows have it: a log line without a timestamp has none (null, as
        `read --json` prints it), not the epoch."""
        return None if self.logged and not ts else ts

    @property
    def stitched(self) -> bool:
        return self.packets is not None

    def packet(self, number: int | None) -> tuple[str, int | None]:
        if self.packets is None or number is None or not 0 < number <= len(self.packets):
            return self.capture, number
        return self.packets[number - 1]

    def conn(self, capture: str, conn: int | None) -> int | None:
        """The connection's id in `capture`'s own decode (what `read` shows for that file)."""
        if conn is None or self.packets is None:
            return conn
        return self.conns.get(capture, conn)

    def key(self, conn: int | None) -> str | None:
        """The connection's key across the whole run."""
        if conn is None:
            return None
        if self.packets is None:
            key = self.keys.get(conn)
            if key is None:
                key = self.keys[conn] = file_key(self.capture, conn)
            return key
        first = file_key(self.capture, self.conns[self.capture])
        return first if conn == 1 else f"{first}+{conn}"


#: the tables whose rows come from a connection's summary (made when it is retired or at the end)
CONNECTION_TABLES = frozenset(("connections", "links", "channels"))


def decode(
    frames: Iterable[Frame],
    place: Place,
    capture_findings: Callable[[], list[Finding]],
    dissector: Dissector | None,
    tables: frozenset[str] | None = None,
) -> Iterator[Record]:
    """Decode one stream of frame records (`dissector.run` of packets, or a log's records, with
    no dissector) into table rows: frames, settled deliveries and the frames' findings as they
    come (a chunk at a time, so a worker's memory stays bounded), the rest at the end.

    `tables`: the only tables wanted (None: all). The rows of the others are not made (the data
    source reads one table: a `frames` query built every frame's delivery log, and every other
    query every frame's row); the decode and the tracking run as for all, so the rows that are
    made are the same."""
    want_frames = tables is None or "frames" in tables
    want_deliveries = tables is None or "deliveries" in tables
    want_conns = tables is None or not CONNECTION_TABLES.isdisjoint(tables)
    # the findings' rows, and their counts (which the connection rows show)
    want_findings = want_conns or "findings" in tables  # type: ignore[operator]
    tracker = Tracker(journeys=False)  # journeys and RPC pairs are not tables
    broken: str | None = None
    # conn -> [frames, first ts, last ts, its DeliveryLog, its key]
    spans: dict[int, list[Any]] = {}
    findings: list[dict[str, Any]] = []
    ended: list[tuple[Any, ...]] = []  # deliveries rows of connections that ended
    counted: dict[int | None, int] = {}  # findings per connection, for its row
    chunk: list[tuple[Any, ...]] = []
    held = 0  # bytes of the chunk's JSON texts
    layers = _LayerFindings(dissector) if dissector is not None else None
    retired: set[int] = set()  # connections whose rows are out (their TCP ended)
    retired_rows: dict[str, list[tuple[Any, ...]]] = {}  # theirs, on the way out
    last_ts = 0.0
    for frame in frames:
        if broken is None:
            try:
                tracker.feed(frame)
            except Exception as exc:  # a tracker bug must not lose the file's frames
                broken = f"{type(exc).__name__}: {exc}"
        span = spans.get(frame.conn)
        if span is None:
            if frame.conn in retired:  # cannot be: a connection's TCP end is its last frame
                span = [0, frame.ts, frame.ts, DeliveryLog(), place.key(frame.conn)]
            else:
                span = spans[frame.conn] = [
                    0, frame.ts, frame.ts, DeliveryLog(), place.key(frame.conn)
                ]  # fmt: skip
        span[0] += 1
        span[2] = frame.ts
        log = span[3]
        if want_deliveries:
            log.feed(frame)
            if (
                len(log.rows) >= CHUNK
            ):  # settled: out now, so a long connection's rows never pile up
                yield "deliveries", _deliveries(log.take(), place, frame.conn)
        if want_frames:
            values = _frame_row(frame, place, span[4])
            chunk.append(values)
            held += frame_text_bytes(values)
            if len(chunk) >= CHUNK or held >= CHUNK_BYTES:
                yield "frames", chunk
                chunk, held = [], 0
        if frame.findings and want_findings:
            for f in frame.findings:
                findings.append(_finding(f, place, "frame", frame.ts, frame.conn))
            counted[frame.conn] = counted.get(frame.conn, 0) + len(frame.findings)
        if frame.kind == TRANSPORT and frame.conn not in tracker.half_closed:
            # its TCP ended (a reset, idle, the second FIN: after the first the other side may
            # still send): its rows go now and its trackers forget it, so a capture of many
            # connections is held a connection at a time, not whole
            if want_deliveries:
                ended += _deliveries(log.finish(), place, frame.conn)
                span[3] = DeliveryLog()
                if len(ended) >= CHUNK:
                    yield "deliveries", ended
                    ended = []
            if broken is None and frame.conn in tracker.connections:
                try:
                    done = _retire(frame.conn, tracker, span, place, counted, layers, want_conns)
                except Exception as exc:  # as at the file's end: the internal-error finding
                    broken = f"{type(exc).__name__}: {exc}"
                    done = None
                if done is not None:
                    if want_findings:
                        findings += done[0]
                    for table, values in done[1]:
                        out = retired_rows.setdefault(table, [])
                        out.append(values)
                        if len(out) >= CONNECTION_ROWS:
                            yield table, retired_rows.pop(table)
                    retired.add(frame.conn)
                    del spans[frame.conn]
                    last_ts = max(last_ts, span[2])
        if len(findings) >= CHUNK:  # a hostile capture may have a finding on every frame
            yield "findings", [row("findings", f) for f in findings]
            findings = []
    if chunk:
        yield "frames", chunk
    yield from retired_rows.items()
    if ended:
        yield "deliveries", ended
    summary: dict[str, Any] = {"connections": [], "findings": []}
    if broken is None:
        try:
            tracker.finish()
            summary = tracker.summary()
        except Exception as exc:
            broken = f"{type(exc).__name__}: {exc}"
    later = len(findings)  # the frames' findings are counted already
    if broken is not None:
        findings.append(_internal(place, f"the tracker failed on this capture: {broken}"))
    tracked = {c.get("id"): c for c in summary.get("connections", [])}
    last_ts = max([last_ts, *(s[2] for s in spans.values())])
    for f in tracker.findings if broken is None else []:
        if f.frame is None:
            when = spans.get(f.conn, [0, last_ts, last_ts])[2] if f.conn is not None else last_ts
            findings.append(_finding(f, place, "tracker", when, f.conn))
    layer_findings = dissector.findings if dissector is not None else []
    for f in [*capture_findings(), *layer_findings]:
        findings.append(_finding(f, place, "capture", last_ts, f.conn))
    for entry in findings[later:]:
        counted[entry["_conn"]] = counted.get(entry["_conn"], 0) + 1
    if findings and want_findings:
        yield "findings", [row("findings", f) for f in findings]
    by_table: dict[str, list[tuple[Any, ...]]] = {}
    for conn, connection in tracked.items() if want_conns else ():
        if not isinstance(conn, int) or conn not in spans:
            continue
        for table, values in _connection_rows(
            conn, connection, spans[conn], place, counted.get(conn, 0)
        ):
            by_table.setdefault(table, []).append(values)
    for entry in (summary.get("undecoded") or []) if want_conns else ():  # TLS without its key
        conn = entry.get("id")
        if isinstance(conn, int) and conn in spans:
            for table, values in _connection_rows(
                conn, entry, spans[conn], place, counted.get(conn, 0)
            ):
                by_table.setdefault(table, []).append(values)
    yield from by_table.items()
    for conn, span in spans.items() if want_deliveries else ():
        delivered = _deliveries(span[3].finish(), place, conn)
        if delivered:
            yield "deliveries", delivered


class _LayerFindings:
    """Findings of the layers under the trackers (codecs, TCP) per connection, gathered as they
    come: a connection's row made when its TCP ends counts what the file's end would count
    (the TCP findings `Dissector.reported` says are reported)."""

    def __init__(self, dissector: Dissector) -> None:
        self.dissector = dissector
        self.codec = 0  # of `dissector.findings`, tallied so far
        self.tcp = 0  # of `dissector.tcp.findings`, gathered so far
        self.tally: dict[int | None, int] = {}
        self.tcp_found: dict[int | None, list[Finding]] = {}
        #: the TCP findings gathered (by identity; the reassembler's list holds them): at the
        #: input's end `Dissector.finish` puts the reported ones in `findings` too, and a
        #: connection the end closes is retired after that: counted once, as a TCP finding
        self.tcp_ids: set[int] = set()

    def take(self, conn: int) -> int:
        """The count for `conn`, which has ended (what was gathered for it is forgotten)."""
        dissector = self.dissector
        found = dissector.tcp.findings
        for f in found[self.tcp :]:
            self.tcp_found.setdefault(f.conn, []).append(f)
            self.tcp_ids.add(id(f))
        self.tcp = len(found)
        tcp_ids = self.tcp_ids
        for f in dissector.findings[self.codec :]:
            if id(f) not in tcp_ids:
                self.tally[f.conn] = self.tally.get(f.conn, 0) + 1
        self.codec = len(dissector.findings)
        tcp = sum(map(dissector.reported, self.tcp_found.pop(conn, [])))
        return self.tally.pop(conn, 0) + tcp


def _retire(
    conn: int,
    tracker: Tracker,
    span: list[Any],
    place: Place,
    counted: dict[int | None, int],
    layers: _LayerFindings | None,
    rows: bool = True,
) -> tuple[list[dict[str, Any]], list[Record]] | None:
    """A connection whose TCP ended, out of the tracker: its end's findings (as findings rows
    to be) and its `connections`, `links` and `channels` rows, a (table, row) each (none unless
    `rows`). None: nothing to retire."""
    before = len(tracker.findings)
    summary = tracker.evict(conn)
    if summary is None:
        return None
    ended = [_finding(f, place, "tracker", span[2], conn) for f in tracker.findings[before:]]
    del tracker.findings[before:]  # out with the connection, not again at the file's end
    count = counted.pop(conn, 0) + len(ended) + (layers.take(conn) if layers else 0)
    return ended, list(_connection_rows(conn, summary, span, place, count)) if rows else []


def _deliveries(logged: list[dict[str, Any]], place: Place, conn: int) -> list[tuple[Any, ...]]:
    """`DeliveryLog` rows as `deliveries` rows, filed under the connection's (first) capture."""
    capture = place.capture
    key = place.key(conn)
    number = place.conn(capture, conn)
    out = []
    for values in logged:
        values["capture"] = capture
        if place.logged:
            values["ts"] = place.when(values["ts"])
            values["settled_ts"] = place.when(values.get("settled_ts"))
        values["date"] = day(values["ts"])
        values["conn_key"] = key
        values["conn"] = number
        out.append(row("deliveries", values))
    return out


_BASENAMES: dict[str, str] = {}
_NONE = ()  # a frame's findings when it has none (one shared value, not a list a row)


def _frame_row(frame: Frame, place: Place, key: str | None) -> tuple[Any, ...]:
    """The `frames` row, built straight in `tables.COLUMNS["frames"]` order (this runs once per
    frame: no dict, no per-value coercion; every value here already has its column's type).
    `key` is the connection's `place.key`, looked up once per connection."""
    packet: int | None
    conn: int | None
    if place.packets is None:  # a file's own decode: every number is the file's
        capture, packet, conn = place.capture, frame.packet, frame.conn
    else:
        capture, packet = place.packet(frame.packet)
        conn = place.conn(capture, frame.conn)
    findings = None
    if frame.findings:
        findings = []
        for f in frame.findings:
            _, fpacket = place.packet(f.packet)
            findings.append(
                {
                    "code": f.code,
                    "severity": f.severity,
                    "message": f.message,
                    "packet": fpacket,
                    "conn": place.conn(capture, f.conn),
                    "frame": f.frame,
                }
            )
    base = _BASENAMES.get(capture)
    if base is None:
        base = _BASENAMES[capture] = os.path.basename(capture.rstrip("/")) or capture
    message = frame.message
    ts = frame.ts
    source = frame.source
    if source is not None:  # a log's: its line, no packet, endpoints or size; maybe no time
        return _logged_row(frame, capture, base, key, findings or _NONE)
    date = _DAYS.get(int(ts // 86400))  # `day`, inlined: this runs once per frame
    return (
        capture,
        base,
        date if date is not None else day(ts),
        key,
        place.packets is not None,
        frame.number,
        packet,
        None,  # line: a log's
        frame.ts,
        None,  # time: made from ts when the rows are written (store.Layout)
        conn,
        frame.src,
        frame.dst,
        frame.direction,
        frame.version,
        frame.channel,
        frame.kind,
        frame.name,
        frame.size,
        _json(frame.fields),
        None if message is None else _json(message),
        findings or _NONE,
    )


def _logged_row(
    frame: Frame, capture: str, base: str, key: str | None, findings: Any
) -> tuple[Any, ...]:
    """The `frames` row of a frame read from a log, as `read --json` prints it: `line` for
    packet, no endpoints or size, `ts` null when the line had no timestamp."""
    ts = frame.ts or None
    message = frame.message
    return (
        capture,
        base,
        day(ts),
        key,
        False,
        frame.number,
        None,
        (frame.source or {}).get("line"),
        ts,
        None,
        frame.conn,
        None,
        None,
        frame.direction,
        frame.version,
        frame.channel,
        frame.kind,
        frame.name,
        None,
        _json(frame.fields),
        None if message is None else _json(message),
        findings,
    )


def _finding(
    f: Finding, place: Place, origin: str, ts: float | None, conn: int | None
) -> dict[str, Any]:
    capture, packet = place.packet(f.packet)
    if place.stitched and f.packet is None:
        capture = place.files[-1] if place.files else place.capture
    return {
        "capture": capture,
        "date": day(place.when(ts)),
        "conn_key": place.key(conn),
        "conn": place.conn(capture, conn),
        "frame": f.frame,
        "packet": packet,
        "code": f.code,
        "severity": f.severity,
        "message": f.message,
        "origin": origin,
        "_conn": conn,
    }


def _internal(place: Place, message: str) -> dict[str, Any]:
    return {
        "capture": place.capture,
        "date": UNDATED,
        "code": "pipeline.internal-error",
        "severity": "error",
        "message": message,
        "origin": "capture",
        "_conn": None,
    }


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _get(value: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _error_text(close: Any) -> str | None:
    """A connection's or channel's close as one string, when it was an error."""
    if not isinstance(close, dict):
        return None
    if close.get("condition"):
        description = close.get("description")
        return f"{close['condition']}" + (f": {description}" if description else "")
    code = close.get("reply-code")
    if isinstance(code, int) and code >= 300:  # 200 is success; pika closes with 0
        return f"{code} {close.get('reply-text') or ''}".strip()
    return None


def _undecoded_text(layers: Any) -> str:
    """Why a connection with layers has no AMQP: the layers' findings (`tls.no-key`, ...)."""
    codes = [
        code
        for layer in layers or []
        if isinstance(layer, dict)
        for code in layer.get("findings") or []
    ]
    return "AMQP not read: " + (", ".join(codes) if codes else "no AMQP seen inside")


def _connection_rows(
    conn: int, summary: dict[str, Any], span: list[Any], place: Place, findings: int
) -> Iterator[Record]:
    sessions = summary.get("sessions") or []
    channels = summary.get("channels") or []
    links = [(s, link) for s in sessions if isinstance(s, dict) for link in (s.get("links") or [])]
    first_ts, last_ts = place.when(span[1]), place.when(span[2])
    common = {
        "capture": place.capture,
        "date": day(first_ts),
        "conn_key": place.key(conn),
        "conn": place.conn(place.capture, conn),
    }
    yield (
        "connections",
        row(
            "connections",
            {
                **common,
                "version": summary.get("version"),
                "client": summary.get("client"),
                "server": summary.get("server"),
                "first_ts": first_ts,
                "last_ts": last_ts,
                "frames": span[0],
                "stitched": place.stitched,
                "files": place.files or [place.capture],
                "sessions": len(sessions),
                "links": len(links),
                "channels": len(channels),
                "error": _error_text(summary.get("close"))
                if "version" in summary
                else _undecoded_text(summary.get("layers")),
                "layers": summary.get("layers"),
                "findings": findings,
                "summary": _json(summary),
            },
        ),
    )
    for session, link in links:
        if not isinstance(link, dict):
            continue
        starvation = _get(link, "credit", "starvation")
        error = _dict(link.get("error"))
        outcomes = _dict(link.get("outcomes"))
        yield (
            "links",
            row(
                "links",
                {
                    **common,
                    "session": session.get("channel"),
                    "name": link.get("name"),
                    "handle": link.get("handle"),
                    "remote_handle": link.get("remote-handle"),
                    "role": link.get("role"),
                    "source": link.get("source"),
                    "target": link.get("target"),
                    "snd_settle_mode": link.get("snd-settle-mode"),
                    "rcv_settle_mode": link.get("rcv-settle-mode"),
                    "state": link.get("state"),
                    "deliveries": link.get("deliveries"),
                    "presettled": link.get("presettled"),
                    "settled": link.get("settled"),
                    "unsettled": link.get("unsettled"),
                    **{
                        k: outcomes.get(k) for k in ("accepted", "rejected", "released", "modified")
                    },
                    "credit_issued": _get(link, "credit", "issued"),
                    "starvation_episodes": _get(starvation, "episodes"),
                    "starvation_s": _get(starvation, "seconds")
                    if isinstance(starvation, dict)
                    else starvation,
                    "latency_count": _get(link, "latency", "count"),
                    "latency_p50_ms": _get(link, "latency", "p50"),
                    "latency_p99_ms": _get(link, "latency", "p99"),
                    "latency_max_ms": _get(link, "latency", "max"),
                    "error_condition": error.get("condition"),
                    "error_description": error.get("description"),
                    "summary": _json(link),
                },
            ),
        )
    for channel in channels:
        if not isinstance(channel, dict):
            continue
        close = _dict(channel.get("close"))
        yield (
            "channels",
            row(
                "channels",
                {
                    **common,
                    **{
                        k.replace("-", "_"): channel.get(k)
                        for k in (
                            "channel",
                            "use",
                            "state",
                            "publishes",
                            "deliveries",
                            "acks",
                            "nacks",
                            "rejects",
                            "requeued",
                            "redelivered",
                            "unacked",
                            "max-unacked",
                            "returns",
                        )
                    },
                    "confirms_acked": _get(channel, "confirms", "acked"),
                    "confirms_nacked": _get(channel, "confirms", "nacked"),
                    "confirms_pending": _get(channel, "confirms", "pending"),
                    "tx_commits": _get(channel, "tx", "commits"),
                    "tx_rollbacks": _get(channel, "tx", "rollbacks"),
                    "consumers": len(channel.get("consumers") or []),
                    "prefetch_count": _get(channel, "prefetch", "count"),
                    "ack_p50_ms": _get(channel, "ack-latency-ms", "p50"),
                    "ack_p99_ms": _get(channel, "ack-latency-ms", "p99"),
                    "confirm_p50_ms": _get(channel, "confirms", "latency-ms", "p50"),
                    "confirm_p99_ms": _get(channel, "confirms", "latency-ms", "p99"),
                    "close_code": close.get("reply-code"),
                    "close_text": close.get("reply-text"),
                    "close_method": close.get("class-method"),
                    "summary": _json(channel),
                },
            ),
        )


# -- one capture file ----------------------------------------------------------------------------
def decode_file(
    capture: str,
    path: str | None = None,
    data: bytes | None = None,
    options: dict[str, Any] | None = None,
    tables: frozenset[str] | None = None,
    edges: bool = True,
) -> Iterator[Record]:
    """Everything about one capture file: its rows, its edge connections with their packets, and
    a "meta" record. `path` is a local file or a URI `remote` reads (fetched first); `data` the
    file's bytes (from a Hadoop filesystem). `options` are the `Dissector`'s (`show_secrets`,
    `redact_bodies`), as the CLI passes them. `tables`: only these tables' rows (`decode`);
    `edges=False`: no edge records (the data source plans its stitching from scans: the
    edges' packets took a second pass over a file that has any)."""
    from amqpscope.spark import remote

    if path is not None and remote.scheme(path) is not None:
        with contextlib.ExitStack() as stack:
            try:
                here = stack.enter_context(remote.local_copy(path))
            except (remote.RemoteError, OSError) as exc:
                why = str(exc).removeprefix("amqp: ")
                yield "findings", [row("findings", unreadable(capture, why))]
                yield "meta", {"capture": capture, "first_ts": None, "packets": 0, "frames": 0,
                               "error": why}  # fmt: skip
                return
            yield from decode_file(capture, here, options=options, tables=tables, edges=edges)
        return
    if data is not None:
        with tempfile.NamedTemporaryFile(prefix="amqpscope-", suffix=".cap") as tmp:
            tmp.write(data)
            tmp.flush()
            yield from decode_file(capture, tmp.name, options=options, tables=tables, edges=edges)
        return
    local = path or capture
    meta: dict[str, Any] = {"capture": capture, "first_ts": None, "packets": 0, "frames": 0}
    try:
        meta["bytes"] = os.path.getsize(local)
        kind, fmt = input_kind(local)
        if kind == "text":
            raise NotALog(
                f"{capture}: not a pcap or pcapng file, nor a frame-trace log amqpscope reads"
            )
        if fmt is not None:
            yield from decode_log(capture, local, fmt, options, meta, tables)
            return
        reader = open_capture(local)
    except (CaptureError, OSError) as exc:
        meta["error"] = str(exc)
        yield "findings", [row("findings", unreadable(capture, str(exc)))]
        yield "meta", meta
        return
    place = Place(capture)
    # each connection forgotten once its TCP ended, but for its ends (the edges read them)
    dissector = Dissector(**(options or {}), retire=True, keep_ends=True)
    dissector.take_secrets(reader.secrets)  # a pcapng's TLS secrets (Decryption Secrets Blocks)

    with reader:
        source: Iterator[RawPacket] = iter(reader)
        first = next(source, None)
        if first is not None:  # the first packet's time orders the files for stitching
            meta["first_ts"] = first.ts
            source = itertools.chain((first,), source)
        frames = dissector.run(source)
        yield from decode(frames, place, lambda: reader.findings, dissector, tables)
    meta["packets"] = dissector.packets
    meta["frames"] = dissector.frames
    if edges:
        yield from _edges(capture, local, dissector)
    yield "meta", meta


def decode_log(
    capture: str,
    local: str,
    fmt: str,
    options: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
    tables: frozenset[str] | None = None,
) -> Iterator[Record]:
    """A frame-trace log's rows (`logs.reader.LogReader`, as `read`/`summary` of the log read
    it). A log is never stitched: its connections are whole in it, so it has no edges."""
    from amqpscope.capture.textlog import LogFile, head_of, open_stream
    from amqpscope.logs.reader import LogReader

    options = options or {}
    meta = meta if meta is not None else {"capture": capture, "first_ts": None, "packets": 0}
    reader = LogReader(
        capture,
        fmt,
        show_secrets=bool(options.get("show_secrets")),
        messages=options.get("messages", True),
    )
    stream = open_stream(local)
    _, compressed = head_of(stream, local)
    with LogFile(local, stream, compressed) as log:

        def frames() -> Iterator[Frame]:
            feed = reader.feed
            for number, line in enumerate(log, 1):
                yield from feed(line, number)
            yield from reader.flush()
            reader.finish()

        def found() -> list[Finding]:
            skipped = reader.skipped_finding()
            return [*reader.findings, *log.findings, *([skipped] if skipped else [])]

        yield from decode(frames(), Place(capture, logged=True), found, None, tables)
    meta["frames"] = reader.number
    meta["log"] = fmt
    yield "meta", meta


def _edges(capture: str, local: str, dissector: Dissector) -> Iterator[Record]:
    """The file's edge connections, each with its packets (a second, link-layer-only pass).

    Kept: AMQP connections open at either edge, and any connection open at the start (its AMQP
    may only show once joined to the earlier part). IP fragments of their packets are not kept.
    """
    by_pair: dict[tuple[str, str], list[Any]] = {}
    # the connections it still follows, and what those it forgot left (`keep_ends`)
    followed: list[Any] = [*dissector.connections.values(), *dissector.ends]
    followed.sort(key=lambda c: c.conn)  # in the order they began, as when none is forgotten
    for conn in followed:
        by_pair.setdefault(flow_pair(conn.client, conn.server), []).append(conn)
    wanted: dict[tuple[str, str], list[tuple[int, int, Edge]]] = {}
    for pair, conns in by_pair.items():
        conns.sort(key=lambda c: c.first_packet)
        for i, conn in enumerate(conns):
            head_open = conn.role_from != "syn"
            tail_open = conn.closed == "eof"
            if not (head_open or (tail_open and conn.is_amqp)):
                continue
            end = conns[i + 1].first_packet if i + 1 < len(conns) else 1 << 62
            edge = Edge(
                capture,
                0,
                conn.conn,
                conn.client,
                conn.server,
                conn.first_ts,
                conn.last_ts,
                head_open,
                tail_open,
                amqp=conn.is_amqp,
            )
            wanted.setdefault(pair, []).append((conn.first_packet, end, edge))  # type: ignore[arg-type]
    if not wanted:
        return
    kept: dict[int, list[RawPacket]] = {}
    decoder = SegmentDecoder()
    with contextlib.suppress(CaptureError), open_capture(local) as reader:
        for packet in reader:
            segment = decoder.decode(packet)
            if segment is None:
                continue
            src = endpoint_text(segment.src)
            pair = flow_pair(src, endpoint_text(segment.dst))
            for start, end, edge in wanted.get(pair, ()):  # type: ignore[call-overload]
                if start <= packet.number < end:
                    kept.setdefault(edge.conn, []).append(packet)
                    _sequence(edge, src, segment)
    for entries in wanted.values():
        for _, _, edge in entries:
            yield "edge", edge
            yield "packets", (capture, edge.conn, kept.get(edge.conn, []))


def _sequence(edge: Edge, sender: str, segment: Segment) -> None:
    """Note the first and the furthest next sequence number `sender` was seen at (a payload
    the snap length cut counts whole: the sender sent it)."""
    seq, flags = segment.seq, segment.flags
    sent = len(segment.payload) + segment.cut
    after = (seq + sent + (1 if flags & SYN else 0) + (1 if flags & FIN else 0)) % (1 << 32)
    seen = edge.seqs.get(sender)
    if seen is None:
        edge.seqs[sender] = [seq, after]
        return
    first, nxt = seen
    if (nxt - first) % (1 << 32) < (after - first) % (1 << 32) < (1 << 31):
        seen[1] = after


def unreadable(capture: str, why: str) -> dict[str, Any]:
    return {
        "capture": capture,
        "date": UNDATED,
        "code": "capture.unreadable",
        "severity": "error",
        "message": why,
        "origin": "capture",
    }


# -- one stitched connection ---------------------------------------------------------------------
def decode_group(
    parts: Iterable[tuple[Edge, list[RawPacket]]],
    options: dict[str, Any] | None = None,
    tables: frozenset[str] | None = None,
) -> Iterator[Record]:
    """One connection's parts from several files, decoded and tracked as one, in time order
    (`tables`: only these tables' rows, as `decode`)."""
    ordered = sorted(parts, key=lambda part: part[0].order)
    mapping: list[tuple[str, int]] = []
    packets: list[RawPacket] = []
    for edge, part in ordered:
        for p in part:
            mapping.append((edge.capture, p.number))
            number = len(mapping)
            packets.append(RawPacket(number, p.ts, p.linktype, p.data, p.wirelen, p.interface))
    place = Place(
        ordered[0][0].capture,
        mapping,
        {edge.capture: edge.conn for edge, _ in ordered},
        [edge.capture for edge, _ in ordered],
    )
    dissector = Dissector(**(options or {}))
    yield from decode(dissector.run(packets), place, list, dissector, tables)
