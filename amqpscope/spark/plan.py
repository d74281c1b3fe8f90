"""Which decode tasks a set of capture files needs, known before any file is decoded.

The `amqp` data source (`datasource.py`) plans its partitions on the driver, before it can run a
task: it cannot decode every file first and stitch afterwards as `amqpscope spark` does. So each
file is *scanned*: link layer and TCP reassembly only (the `SegmentDecoder` and `TcpReassembler`
the `Dissector` runs, so connection ids are the ones the file's own decode gives; or, for a file
clean enough, `lightscan`, which gives the same scan from the headers alone), no AMQP. The
scan finds the file's edge connections (`stitch.Edge`: open at the file's start or end, with
their TCP sequence numbers); `stitch.groups` chains them as the job does; the plan is then

- a `FileTask` per file: its own decode (`rows.decode_file`), minus the rows of the connections
  that a `GroupTask` decodes;
- a `GroupTask` per stitched connection: its parts' packets, decoded and tracked once
  (`rows.decode_group`).

A scan cannot see AMQP: a connection that opened in the file counts as AMQP when either side's
first bytes are the AMQP protocol header (the job's decode also counts AMQP found inside TLS with
its key, or by a mid-stream guess); one that started before the file may be (as in the job).

`Carry` keeps, between the batches of a stream, the chains whose last part was open at the end of
the newest file: what a later file may continue.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from amqpscope.capture.files import CaptureError, open_capture
from amqpscope.capture.linklayer import SegmentDecoder
from amqpscope.capture.packet import FIN, SYN, RawPacket
from amqpscope.spark.stitch import MAX_GAP, Edge, flow_pair, follows, groups
from amqpscope.stream.events import StreamClose, StreamData, StreamOpen
from amqpscope.stream.tcp import TcpReassembler

#: the AMQP protocol header's first bytes (either version's)
PROTOCOL_HEADER = b"AMQP"


@dataclass(slots=True)
class Part:
    """One connection's packets in one file: packets `start` <= number < `end` between its
    endpoints (the next connection on the same endpoints starts at `end`)."""

    edge: Edge
    path: str  # where the file is read (the capture's local path)
    start: int
    end: int
    #: the file's first packet's time: a stream orders files by it (`stream_tasks`)
    file_ts: float | None = None

    def to_json(self) -> dict[str, Any]:
        e = self.edge
        return {
            "capture": e.capture,
            "path": self.path,
            "conn": e.conn,
            "client": e.client,
            "server": e.server,
            "first_ts": e.first_ts,
            "last_ts": e.last_ts,
            "head_open": e.head_open,
            "tail_open": e.tail_open,
            "amqp": e.amqp,
            "order": e.order,
            "seqs": e.seqs,
            "start": self.start,
            "end": self.end,
            "file_ts": self.file_ts,
        }

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Part:
        edge = Edge(
            value["capture"],
            value["order"],
            value["conn"],
            value["client"],
            value["server"],
            value["first_ts"],
            value["last_ts"],
            value["head_open"],
            value["tail_open"],
            amqp=value["amqp"],
            seqs={k: list(v) for k, v in value["seqs"].items()},
        )
        return cls(edge, value["path"], value["start"], value["end"], value.get("file_ts"))


@dataclass(slots=True)
class Scan:
    """What one file's scan found: its first packet's time and its edge connections."""

    capture: str
    path: str
    first_ts: float | None
    parts: list[Part] = field(default_factory=list)
    error: str | None = None


#: a finding row a plan adds: (code, the file's connection or None, time, message)
Note = tuple[str, int | None, float | None, str]


@dataclass(slots=True)
class FileTask:
    """A file's own decode; rows of the connections in `without` are left out, or with `only`
    set, only theirs are kept. `notes`: findings rows the plan adds for it (a stream's part
    that came too late to be stitched: `stream_tasks`; a file changed after a stream read it),
    as (code, conn or None, time, message); `unread`: the notes' rows alone, the file not
    read."""

    capture: str
    path: str
    without: frozenset[int] = frozenset()
    only: frozenset[int] | None = None
    notes: tuple[Note, ...] = ()
    unread: bool = False


@dataclass(slots=True)
class GroupTask:
    """One connection stitched from its parts in several files."""

    parts: list[Part]


Task = FileTask | GroupTask


#: where scans of local files are kept between queries (Spark plans each query in a new
#: process: a session's later queries of the same files need not scan them again); one folder
#: a user, used only while it is that user's alone (`_scans_dir`)
SCANS = os.path.join(tempfile.gettempdir(), f"amqpscope-scans-{os.getuid()}")
_SCAN_VERSION = 1  # the light scan's are the same


def _scans_dir() -> str | None:
    """`SCANS`, made if missing, when it is a folder of this user's that no one else may write
    (not a link); else None, and scans are neither read from it nor kept: a file another user
    put in a shared temp folder would otherwise steer the plan."""
    with contextlib.suppress(OSError):
        os.makedirs(SCANS, mode=0o700, exist_ok=True)
        found = os.lstat(SCANS)
        if (
            stat.S_ISDIR(found.st_mode)
            and found.st_uid == os.getuid()
            and not found.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        ):
            return SCANS
    return None


def scan(capture: str, path: str | None = None) -> Scan:
    """Scan one capture file for its edge connections (an unreadable file: `error` set; its
    decode task says so as a finding). A local file's scan is kept in `SCANS`, keyed by its
    path, size and modification time, and taken from there while the file is unchanged."""
    local = path or capture
    key = _scan_key(capture, local)
    kept_in = _scans_dir() if key is not None else None
    if key is not None and kept_in is not None:
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            with open(os.path.join(kept_in, key), encoding="utf-8") as f:
                kept = json.load(f)
            return Scan(
                capture, local, kept["first_ts"], [Part.from_json(p) for p in kept["parts"]]
            )
    found = _scan_file(capture, local)
    if key is not None and kept_in is not None and found.error is None:
        with contextlib.suppress(OSError):
            fd, aside = tempfile.mkstemp(dir=kept_in, prefix=".")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                kept = {"first_ts": found.first_ts, "parts": [p.to_json() for p in found.parts]}
                json.dump(kept, f)
            os.replace(aside, os.path.join(kept_in, key))
    return found


def _scan_key(capture: str, local: str) -> str | None:
    """The kept scan's name for a local file as it is now (None for a URI or no file)."""
    from amqpscope.spark.remote import scheme

    if scheme(local) is not None:
        return None
    try:
        now = os.stat(local)
    except OSError:
        return None
    text = f"{_SCAN_VERSION}\0{capture}\0{os.path.abspath(local)}\0{now.st_size}\0{now.st_mtime_ns}"
    return hashlib.sha1(text.encode("utf-8", "surrogateescape")).hexdigest()


def _scan_file(capture: str, local: str) -> Scan:
    from amqpscope.spark.remote import RemoteError, local_copy

    try:
        with local_copy(local) as here:
            return _scan(capture, local, here)
    except (RemoteError, OSError) as exc:
        return Scan(capture, local, None, error=str(exc))


def _scan(capture: str, local: str, here: str) -> Scan:
    """`scan` of the file at `here` (`local` is where tasks will read it): the light way when
    the file is one it follows (`lightscan`), else through the reassembler."""
    from amqpscope.spark import lightscan

    light = lightscan.scan(capture, local, here)
    if light is not None:
        return light
    return full_scan(capture, local, here)


def full_scan(capture: str, local: str, here: str) -> Scan:
    """`scan` of the file at `here` through `SegmentDecoder` and `TcpReassembler`."""
    from amqpscope.dissect import endpoint_text  # the decoder's: not loaded by a light scan

    try:
        reader = open_capture(here)
    except (CaptureError, OSError) as exc:
        return Scan(capture, local, None, error=str(exc))
    segments = SegmentDecoder()
    decode = segments.decode
    tcp = TcpReassembler()
    feed = tcp.feed
    # conn -> [client, server, role_from, first packet, first ts, last ts, closed, amqp, Edge]
    # (the Edge only gathers the TCP sequence numbers, `rows._sequence`'s way, until `file_parts`)
    conns: dict[int, list[Any]] = {}
    latest: dict[tuple[str, str], int] = {}  # endpoint pair -> its newest connection
    # (src, dst) -> (src's text, the endpoint pair): made once a flow, not once a packet
    flows: dict[tuple[Any, Any], tuple[str, tuple[str, str]]] = {}
    # conn -> sender -> [first seq, furthest next seq]: `Edge.seqs` (`rows._sequence`, inlined:
    # this runs once a packet)
    seqs: dict[int, dict[str, list[int]]] = {}
    first_ts: float | None = None
    with contextlib.suppress(CaptureError), reader:
        for packet in reader:
            if first_ts is None:
                first_ts = packet.ts
            segment = decode(packet)
            if segment is None:
                continue
            events = feed(segment)
            if events:
                for event in events:
                    _note(conns, latest, event)
            flow = (segment.src, segment.dst)
            known = flows.get(flow)
            if known is None:
                src = endpoint_text(segment.src)
                known = flows[flow] = (src, flow_pair(src, endpoint_text(segment.dst)))
            conn = latest.get(known[1])
            if conn is None:
                continue
            flags = segment.flags
            seq = segment.seq
            sent = len(segment.payload) + segment.cut  # with what a snap length cut off
            after = (seq + sent + (flags & SYN and 1) + (flags & FIN and 1)) & _MASK
            note_sequence(seqs, conns, conn, known[0], seq, after)
        segments.flush()
        for event in tcp.flush():
            _note(conns, latest, event)
    return Scan(capture, local, first_ts, file_parts(capture, local, conns))


_MASK = (1 << 32) - 1
_HALF = 1 << 31


def note_open(
    conns: dict[int, list[Any]],
    latest: dict[tuple[str, str], int],
    conn: int,
    client: str,
    server: str,
    role_from: str,
    packet: int,
    ts: float,
) -> list[Any]:
    """A connection's entry in a scan (client, server, who opened it, its first packet, first
    and last time, how it closed, whether it spoke AMQP, its Edge), now the newest of its
    endpoints' pair."""
    info = conns[conn] = [
        client, server, role_from, packet, ts, ts, "", False,
        Edge("", 0, conn, client, server, ts, ts, False, False),
    ]  # fmt: skip
    latest[flow_pair(client, server)] = conn
    return info


def _note(conns: dict[int, list[Any]], latest: dict[tuple[str, str], int], event: Any) -> None:
    if isinstance(event, StreamOpen):
        from amqpscope.dissect import endpoint_text

        client, server = endpoint_text(event.client), endpoint_text(event.server)
        note_open(
            conns, latest, event.conn, client, server, event.role_from, event.packet, event.ts
        )
    elif isinstance(event, StreamData):
        conn = conns[event.conn]
        conn[5] = event.ts
        if not conn[7] and event.data[:4] == PROTOCOL_HEADER:
            conn[7] = True
    elif isinstance(event, StreamClose):
        conn = conns[event.conn]
        if not conn[6]:
            conn[6] = event.how


def note_sequence(
    seqs: dict[int, dict[str, list[int]]],
    conns: dict[int, list[Any]],
    conn: int,
    src: str,
    seq: int,
    after: int,
) -> None:
    """The first and furthest sequence numbers `src` sent on `conn` (its Edge's `seqs`, modulo
    2**32: a segment extends the range only when it ends past it)."""
    sent = seqs.get(conn)
    if sent is None:
        sent = seqs[conn] = conns[conn][8].seqs
    seen = sent.get(src)
    if seen is None:
        sent[src] = [seq, after]
    else:
        first = seen[0]
        if (seen[1] - first) & _MASK < (after - first) & _MASK < _HALF:
            seen[1] = after


def file_parts(capture: str, path: str, conns: dict[int, list[Any]]) -> list[Part]:
    """The edge connections, as `rows._edges` keeps them: AMQP ones open at either edge, and any
    open at the start."""
    by_pair: dict[tuple[str, str], list[int]] = {}
    for conn, info in conns.items():
        by_pair.setdefault(flow_pair(info[0], info[1]), []).append(conn)
    out: list[Part] = []
    for ids in by_pair.values():
        ids.sort(key=lambda c: conns[c][3])
        for i, conn in enumerate(ids):
            client, server, role_from, first_packet, first, last, closed, amqp, seen = conns[conn]
            head_open = role_from != "syn"
            tail_open = (closed or "eof") == "eof"
            if not (head_open or (tail_open and amqp)):
                continue
            end = conns[ids[i + 1]][3] if i + 1 < len(ids) else 1 << 62
            edge = Edge(capture, 0, conn, client, server, first, last, head_open, tail_open,
                        amqp=amqp or head_open, seqs=seen.seqs)  # fmt: skip
            out.append(Part(edge, path, first_packet, end))
    out.sort(key=lambda part: part.edge.conn)
    return out


def in_time_order(scans: Iterable[Scan]) -> list[Scan]:
    """Files by their first packet's time (unreadable and empty ones last), then by name."""
    return sorted(scans, key=lambda s: (s.first_ts is None, s.first_ts or 0.0, s.capture))


def tasks(scans: list[Scan], max_gap: float = MAX_GAP) -> list[Task]:
    """The decode tasks of a batch read of these files (stitched as `amqpscope spark` does)."""
    ordered = in_time_order(scans)
    parts: list[Part] = []
    for order, found in enumerate(ordered):
        for part in found.parts:
            part.edge.order = order
            parts.append(part)
    chains = _chains(parts, max_gap)
    stitched: dict[str, set[int]] = {}
    for chain in chains:
        for part in chain:
            stitched.setdefault(part.edge.capture, set()).add(part.edge.conn)
    out: list[Task] = [
        FileTask(s.capture, s.path, frozenset(stitched.get(s.capture, ()))) for s in ordered
    ]
    out += [GroupTask(chain) for chain in chains]
    return out


def _chains(parts: list[Part], max_gap: float) -> list[list[Part]]:
    by_edge = {id(part.edge): part for part in parts}
    return [[by_edge[id(e)] for e in g] for g in groups([p.edge for p in parts], max_gap)]


# -- a stream: files one batch at a time, the open connections carried -------------------------
#: how many decoded chains a stream remembers (`Carry.past`): a later file that would have joined
#: one of them is a finding, not silently a connection of its own
PAST = 256
#: the finding row of a file's part that came after its connection's rows were made
LATE = "capture.late-part"
#: the finding row of a file that changed after a stream read it (read once: not again)
CHANGED = "capture.changed-after-read"


@dataclass(slots=True)
class Carry:
    """What a stream keeps between batches: the chains that a later file may continue (each
    ends with a part open at its file's end); the newest chains it has decoded (`past`: their
    parts, which a file taken later may belong with); how many files it has taken; and the
    newest file's first packet's time."""

    chains: list[list[Part]] = field(default_factory=list)
    files: int = 0
    newest: float | None = None
    past: list[list[Part]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "files": self.files,
            "newest": self.newest,
            "chains": [[p.to_json() for p in c] for c in self.chains],
            "past": [[p.to_json() for p in c] for c in self.past],
        }

    @classmethod
    def from_json(cls, value: dict[str, Any] | None) -> Carry:
        if not value:
            return cls()
        chains = [[Part.from_json(p) for p in chain] for chain in value.get("chains") or []]
        past = [[Part.from_json(p) for p in chain] for chain in value.get("past") or []]
        newest = value.get("newest")
        files = int(value.get("files") or 0)
        return cls(chains, files, None if newest is None else float(newest), past)


def _file_time(part: Part) -> float:
    return part.file_ts if part.file_ts is not None else part.edge.first_ts


def _time_order(parts: Iterable[Part]) -> None:
    """Each part's `order`: its file's place among these parts' files by capture time (then
    name). Which file continues which connection is a matter of the packets' times, never of
    the files' names or of the order they arrived in."""
    when: dict[str, float] = {}
    every = list(parts)
    for part in every:
        t = _file_time(part)
        capture = part.edge.capture
        if capture not in when or t < when[capture]:
            when[capture] = t
    rank = {c: i for i, c in enumerate(sorted(when, key=lambda c: (when[c], c)))}
    for part in every:
        part.edge.order = rank[part.edge.capture]


def _belongs(part: Part, chain: list[Part], max_gap: float) -> bool:
    """Whether `part` has its place in `chain` (a connection already decoded): before its first
    part, after its last or between two, continuing and continued as `stitch` chains them."""
    edge = part.edge
    if chain[0].edge.pair != edge.pair or any(p.edge.capture == edge.capture for p in chain):
        return False
    at = sum(1 for p in chain if p.edge.order < edge.order)
    before = chain[at - 1].edge if at else None
    after = chain[at].edge if at < len(chain) else None
    return (before is None or follows(before, edge, max_gap)) and (
        after is None or follows(edge, after, max_gap)
    )


def _late_note(part: Part, chain: list[Part]) -> Note:
    """The finding of a part that came after its connection's rows were made: which files it
    belongs with, and that its rows are its own file's (the stream cannot take rows back)."""
    edge = part.edge
    ends = [name for name, open_ in (("start", edge.head_open), ("end", edge.tail_open)) if open_]
    at = " and ".join(ends)
    files = ", ".join(dict.fromkeys(os.path.basename(p.edge.capture) for p in chain))
    text = (
        f"the TCP connection {edge.client} <-> {edge.server}, open at this file's {at}, "
        f"belongs by its endpoints, TCP sequence numbers and time with the one in {files}, "
        "whose rows the stream had made before it took this file: its rows here are this "
        "file's alone, not stitched to those"
    )
    return LATE, edge.conn, edge.first_ts, text


def stream_tasks(
    carry: Carry,
    scans: list[Scan],
    max_gap: float = MAX_GAP,
    max_parts: int = 256,
    flush: bool = False,
) -> tuple[list[Task], Carry]:
    """The tasks of one stream batch (`scans`: the files new since `carry`, in any order) and
    what it carries on. Files are placed by their packets' times: a new file may continue a
    carried chain, or come before one (a file taken later than a newer one). A chain is carried
    while its last part is open at its file's end and its file is the newest, or is no more
    than `max_gap` seconds older than the newest file's start (the timeout for a connection
    that never reappears), and has fewer than `max_parts` parts; `flush` carries nothing (the
    last batch of a `trigger(availableNow=True)` query). A chain that stops is decoded now
    (one part alone: its file's rows for it, from that file decoded again). A new file's part
    that belongs with a chain decoded in an earlier batch (`past`) cannot join it: its rows
    are its file's own, with a `capture.late-part` finding (`FileTask.notes`)."""
    held_parts: list[Part] = [p for chain in carry.chains for p in chain]
    new_parts: list[Part] = []
    for found in scans:
        for part in found.parts:
            part.file_ts = found.first_ts
            new_parts.append(part)
    past = [list(chain) for chain in carry.past]
    _time_order([p for chain in past for p in chain] + held_parts + new_parts)
    newest = max(
        (t for t in [carry.newest, *(s.first_ts for s in scans)] if t is not None), default=None
    )
    notes: dict[str, list[Note]] = {}
    late: set[int] = set()
    for part in new_parts:
        for chain in past:
            if _belongs(part, chain, max_gap):
                late.add(id(part))
                notes.setdefault(part.edge.capture, []).append(_late_note(part, chain))
                break
    fresh_ids = {id(p) for p in new_parts}
    parts = held_parts + [p for p in new_parts if id(p) not in late]
    chains = _chains(parts, max_gap)
    chained = {id(p) for chain in chains for p in chain}
    # a lone part may still be continued: a chain of one
    chains += [[p] for p in parts if id(p) not in chained]
    chains.sort(key=lambda c: (c[0].edge.order, c[0].edge.conn))
    held: list[list[Part]] = []
    done: list[list[Part]] = []
    ended: list[list[Part]] = []  # lone parts of new files that stop here
    for chain in chains:
        last = chain[-1]
        tail = last.edge
        open_end = tail.tail_open and tail.amqp and len(chain) < max_parts
        in_newest = newest is None or _file_time(last) >= newest
        fresh = newest is None or newest - tail.last_ts <= max_gap
        if open_end and not flush and (in_newest or fresh):
            held.append(chain)
        elif len(chain) > 1 or id(chain[0]) not in fresh_ids:
            done.append(chain)
        else:  # a lone part of a new file that stops here: its file's own decode has its rows
            ended.append(chain)
    leave_out: dict[str, set[int]] = {}
    for chain in held + [c for c in done if len(c) > 1]:
        for part in chain:
            leave_out.setdefault(part.edge.capture, set()).add(part.edge.conn)
    out: list[Task] = [
        FileTask(
            s.capture,
            s.path,
            frozenset(leave_out.get(s.capture, ())),
            notes=tuple(notes.get(s.capture, ())),
        )
        for s in scans
    ]
    for chain in done:
        if len(chain) > 1:
            out.append(GroupTask(chain))
        else:  # carried alone, never continued: as its own file's decode has it
            part = chain[0]
            out.append(FileTask(part.edge.capture, part.path, only=frozenset((part.edge.conn,))))
    past += done + ended + [[p] for p in new_parts if id(p) in late]
    kept = Carry(held, carry.files + len(scans), newest, past[-PAST:])
    return out, kept


def part_packets(part: Part) -> list[RawPacket]:
    """A part's packets, read again from its file (link layer only, as `rows._edges` keeps
    them: IP fragments are not kept)."""
    from amqpscope.dissect import endpoint_text
    from amqpscope.spark.remote import RemoteError, local_copy

    pair = flow_pair(part.edge.client, part.edge.server)
    out: list[RawPacket] = []
    decoder = SegmentDecoder()

    with (
        contextlib.suppress(CaptureError, OSError, RemoteError),
        local_copy(part.path) as here,
        open_capture(here) as reader,
    ):
        for packet in reader:
            if not part.start <= packet.number < part.end:
                continue
            segment = decoder.decode(packet)
            if segment is None:
                continue
            if flow_pair(endpoint_text(segment.src), endpoint_text(segment.dst)) == pair:
                out.append(packet)
    return out


# -- the files of a folder, in the order a rotation writes them ---------------------------------
_DIGITS = re.compile(r"(\d+)")


def natural(name: str) -> tuple[Any, ...]:
    """A file name's sort key with its numbers compared as numbers (`cap.pcap2` before
    `cap.pcap10`; tcpdump `-G` names with `%s` or a date sort as written)."""
    return tuple(int(p) if p.isdigit() else p for p in _DIGITS.split(name))


def folder_files(folder: str) -> Iterator[tuple[str, float]]:
    """`(path, mtime)` of the visible files directly in `folder` (a writer's temporary names
    start with `.` or `_`, as Spark's own file sources skip them); a folder's URI is listed with
    pyarrow's filesystems (`remote.folder_entries`)."""
    from amqpscope.spark import remote

    if remote.scheme(folder) is not None:
        for uri, mtime, _ in remote.folder_entries(folder):
            yield uri, mtime
        return
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith((".", "_")):
            continue
        with contextlib.suppress(OSError):
            if entry.is_file():
                yield os.path.abspath(entry.path), entry.stat().st_mtime
