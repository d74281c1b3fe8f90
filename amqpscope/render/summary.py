"""`amqpscope summary` as tables (rich): each connection, its links or channels, then findings.

Reads the summary document (`amqpscope schema summary`) and nothing else, so the tables and
`--json` never disagree. Columns that are empty for every row are left out. Links: msgs are
distinct deliveries; acc/rej/rel/mod the outcomes; latencies are p50/p99 in milliseconds.

Sparklines (`render/sparkline.py`) draw the time series on one axis per table. They only take
width the table leaves free: each is added, in the order listed, while the table's natural width
still fits the console, so on a narrow terminal they give way before any number is cut.

Uncoloured output whose every table and line fits the width as it is (a piped `summary`) is
written by `summary_text` without rich (`render/plain.py`, the same characters rich prints);
anything else is rich's to lay out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from amqpscope.render import plain, sparkline
from amqpscope.render.lines import safe

if TYPE_CHECKING:  # rich is imported when it prints (`summary_text` needs none of it)
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from amqpscope.render.digest import Digest

Row = dict[str, Any]
Column = tuple[str, Callable[[Row], Any]]

OUTCOME_STYLES = {"acc": "green", "rej": "red", "rel": "yellow", "mod": "magenta"}
SEVERITY_STYLES = {"error": "bold red", "warning": "yellow", "info": "dim"}


def _get(row: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(row, dict):
            return None
        row = row.get(key)
    return row


def _text(value: Any) -> str:
    if value is None or value == "" or value == [] or value == {}:
        return ""
    if isinstance(value, bool):
        return "yes" if value else ""
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".") if value else "0"
    if isinstance(value, (dict, list)):
        return safe(_words(value))
    return safe(str(value))  # captured strings: escape what could drive the terminal


#: the keys of a value given per direction (client to server, server to client)
DIRECTIONS = frozenset(("c2s", "s2c"))


def _words(value: Any) -> str:
    """A list or map of the summary in words, never as JSON: per-direction values as
    `16384 → / ← 4294967295` (what each direction carries), other maps as `key value, ...`
    (counts of 0 and empty values left out: `accepted 2`), lists joined by commas."""
    if isinstance(value, dict):
        if value and set(value) <= DIRECTIONS:
            c2s, s2c = _words(value.get("c2s")), _words(value.get("s2c"))
            if c2s == s2c:
                return c2s
            return " / ".join(p for p in (c2s and f"{c2s} →", s2c and f"← {s2c}") if p)
        parts = ((str(k), _words(v)) for k, v in value.items())
        return ", ".join(f"{k} {v}" if v != "yes" else k for k, v in parts if v not in ("", "0"))
    if isinstance(value, list):
        return ", ".join(w for w in (_words(v) for v in value) if w)
    return _text(value)


def _error(value: Any) -> str:
    """An error object as `condition: description` (1.0) or `code text` (0-9-1)."""
    if not isinstance(value, dict):
        return _text(value)
    if "condition" in value:
        description = str(value.get("description") or "").split("\n")[0]
        shown = f"{value['condition']}: {description}" if description else str(value["condition"])
        return safe(shown)
    if "reply-code" in value:
        code = value.get("reply-code")
        if not isinstance(code, int) or code < 300:  # 200 (or pika's 0) is a normal close
            return ""
        return safe(f"{code} {value.get('reply-text', '')}".strip())
    return _text(value)


def _latency(row: Row, key: str) -> str:
    stats = row.get(key)
    if not isinstance(stats, dict) or not stats.get("count"):
        return ""
    return f"{_text(stats.get('p50'))}/{_text(stats.get('p99'))}"


LINK_COLUMNS: list[Column] = [
    ("ch", lambda r: r["_channel"]),
    ("h", lambda r: r.get("handle")),
    ("role", lambda r: r.get("role")),
    ("address", lambda r: r.get("target") if r.get("role") == "sender" else r.get("source")),
    ("msgs", lambda r: r.get("deliveries")),
    ("presettled", lambda r: r.get("presettled")),
    ("unsettled", lambda r: r.get("unsettled")),
    ("acc", lambda r: _get(r, "outcomes", "accepted")),
    ("rej", lambda r: _get(r, "outcomes", "rejected")),
    ("rel", lambda r: _get(r, "outcomes", "released")),
    ("mod", lambda r: _get(r, "outcomes", "modified")),
    ("credit", lambda r: _get(r, "credit", "issued")),
    ("starved s", lambda r: _get(r, "credit", "starvation", "seconds")),
    ("settle ms", lambda r: _latency(r, "latency")),
    ("error", lambda r: _error(r.get("error"))),
]
CHANNEL_COLUMNS: list[Column] = [
    ("ch", lambda r: r.get("channel")),
    ("use", lambda r: r.get("use")),
    ("publishes", lambda r: r.get("publishes")),
    ("deliveries", lambda r: r.get("deliveries")),
    ("acks", lambda r: r.get("acks")),
    ("nacks", lambda r: r.get("nacks")),
    ("rejects", lambda r: r.get("rejects")),
    ("redelivered", lambda r: r.get("redelivered")),
    ("unacked", lambda r: r.get("unacked")),
    ("max unacked", lambda r: r.get("max-unacked")),
    ("prefetch", lambda r: _get(r, "prefetch", "count") or r.get("prefetch")),
    (
        "confirmed",
        lambda r: _get(r, "confirms", "acked") if _get(r, "confirms", "selected") else None,
    ),
    ("pending", lambda r: _pending(r)),
    ("returns", lambda r: r.get("returns")),
    ("commits", lambda r: _get(r, "tx", "commits")),
    ("rollbacks", lambda r: _get(r, "tx", "rollbacks")),
    ("ack ms", lambda r: _latency(r, "ack-latency-ms")),
    ("close", lambda r: _error(r.get("close"))),
]
#: transactions (1.0: one row per txn-id; 0-9-1: one per tx.commit or tx.rollback)
TX10_COLUMNS: list[Column] = [
    ("ch", lambda r: r.get("channel")),
    ("txn-id", lambda r: r.get("txn-id")),
    ("declared #", lambda r: r.get("declared-frame")),
    ("state", lambda r: r.get("state")),
    ("transfers", lambda r: r.get("transfers")),
    ("outcomes", lambda r: r.get("outcomes")),
    ("error", lambda r: _error(r.get("error"))),
]
TX091_COLUMNS: list[Column] = [
    ("ch", lambda r: r["_channel"]),
    ("#", lambda r: r["_index"]),
    ("outcome", lambda r: r.get("outcome")),
    ("frame", lambda r: r.get("frame")),
    ("publishes", lambda r: r.get("publishes")),
    ("acks", lambda r: r.get("acks")),
    ("nacks", lambda r: r.get("nacks")),
    ("rejects", lambda r: r.get("rejects")),
    ("discarded", lambda r: r.get("settles-discarded")),
]


def _transactions(conn: Row) -> tuple[list[Column], list[Row], str]:
    """A connection's transactions as table rows, and a line of their counts ("" if none)."""
    if conn.get("version") == "1.0":
        tx = conn.get("transactions")
        if not isinstance(tx, dict) or not (tx.get("declares") or tx.get("items")):
            return TX10_COLUMNS, [], ""
        keys = ("declared", "committed", "rolled-back", "failed")
        counts = ", ".join(f"{tx.get(k) or 0} {k.replace('-', ' ')}" for k in keys)
        return TX10_COLUMNS, list(tx.get("items") or []), f"transactions: {counts}"
    rows: list[Row] = []
    commits = rollbacks = 0
    for channel in conn.get("channels") or []:
        tx = channel.get("tx")
        if not isinstance(tx, dict) or not tx.get("selected"):
            continue
        commits += tx.get("commits") or 0
        rollbacks += tx.get("rollbacks") or 0
        for index, item in enumerate(tx.get("transactions") or [], start=1):
            rows.append({**item, "_channel": channel.get("channel"), "_index": index})
    if not rows and not commits and not rollbacks:
        return TX091_COLUMNS, [], ""
    return TX091_COLUMNS, rows, f"transactions: {commits} committed, {rollbacks} rolled back"


#: sparkline columns: (header, key in the row's `series`, a level's lowest rather than highest),
#: the first kept first when space is short. Credit shows its lows: running out is the point.
Spark = tuple[str, str, bool]
LINK_SPARKS: list[Spark] = [
    ("delivery rate", "deliveries", False),
    ("credit low", "link-credit", True),
    ("unsettled peak", "unsettled", False),
]
CHANNEL_SPARKS: list[Spark] = [
    ("delivery rate", "deliveries", False),
    ("unacked peak", "unacked", False),
    ("publish rate", "publishes", False),
]


def _table(
    title: str,
    columns: list[Column],
    rows: list[Row],
    console: Console | None = None,
    sparks: list[Spark] | None = None,
) -> Table | None:
    if not rows:
        return None
    from rich.measure import Measurement

    cells, keep = _cells(columns, rows)
    table = _columns(title, columns, cells, keep)
    if console is None or not sparks:
        return table
    lines = _spark_lines(rows, sparks, console.encoding)
    shown: list[tuple[str, list[str]]] = []
    unbounded = console.options.update_width(1 << 16)  # rich clamps a measure to the width
    fits = _widest(columns, cells, keep, lines) <= console.width  # then no need to measure
    for name, line in lines:  # each, while the table's natural width still fits
        if not any(line):
            continue
        wider = _columns(title, columns, cells, keep, [*shown, (name, line)])
        if not fits and Measurement.get(console, unbounded, wider).maximum > console.width:
            break
        shown.append((name, line))
        table = wider
    return table


def _pending(channel: Row) -> Any:
    """Publishes awaiting a confirm; "?" when confirm mode began before the capture and the
    broker's numbers of the publishes are not known."""
    if not _get(channel, "confirms", "selected"):
        return None
    pending = _get(channel, "confirms", "pending")
    return "?" if pending is None else pending


def _cells(columns: list[Column], rows: list[Row]) -> tuple[list[list[str]], list[int]]:
    """Each row's cells as text, and the columns to show: those not empty (or 0) in every row."""
    cells = [[_text(fn(row)) if fn(row) is not None else "" for _, fn in columns] for row in rows]
    keep = [i for i in range(len(columns)) if any(cell[i] not in ("", "0") for cell in cells)]
    return cells, keep


def _spark_lines(
    rows: list[Row], sparks: list[Spark], encoding: str
) -> list[tuple[str, list[str]]]:
    """Each sparkline column's (header, a line per row), on the table's one time axis."""
    axis = sparkline.span([_get(row, "series", key) for row in rows for _, key, _ in sparks])
    steps = sparkline.glyphs(encoding)
    return [
        (name, [sparkline.sparkline(_get(row, "series", key), axis, steps, low) for row in rows])
        for name, key, low in sparks
    ]


def _justify(name: str) -> Literal["left", "right"]:
    """Numbers to the right; text (and the role's words) to the left."""
    words = ("role", "outcome", "state")
    return "left" if _limits(name)[1] is not None or name in words else "right"


def _limits(name: str) -> tuple[int, int | None]:
    """A column's (min_width, max_width): numbers keep their header; text gives way."""
    if name in ("address", "error", "close", "txn-id", "outcomes"):
        return 6, 48
    return len(name), None


def _widest(
    columns: list[Column],
    cells: list[list[str]],
    keep: list[int],
    sparks: Sequence[tuple[str, list[str]]],
) -> int:
    """At least the natural width of the table with every sparkline, found without rich (whose
    measure of a whole table is half of a piped `summary`'s printing): a column is at most its
    max_width, or twice its longest text (a wide character takes two cells), but no less than
    its min_width; plus two cells of padding and a separator."""
    total = 0
    for i in keep:
        name = columns[i][0]
        least, most = _limits(name)
        longest = max([len(name), *(len(cell[i]) for cell in cells)])
        total += max(least, 2 * longest if most is None else most) + 3
    for name, line in sparks:
        longest = max([len(name), *(len(text) for text in line)])
        total += max(sparkline.WIDTH, 2 * longest) + 3
    return total


def _columns(
    title: str,
    columns: list[Column],
    cells: list[list[str]],
    keep: list[int],
    sparks: Sequence[tuple[str, list[str]]] = (),
) -> Table:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    for i in keep:
        name = columns[i][0]
        least, most = _limits(name)
        table.add_column(
            name,
            justify=_justify(name),
            overflow="ellipsis",
            no_wrap=name
            != "address",  # rich narrows only wrapping columns (addresses have no spaces)
            max_width=most,
            min_width=least,
            style=OUTCOME_STYLES.get(name, "red" if name in ("error", "close") else ""),
        )
    for name, _ in sparks:
        table.add_column(name, no_wrap=True, min_width=sparkline.WIDTH, style="cyan")
    for n, cell in enumerate(cells):  # Text: captured strings are never markup, on any console
        table.add_row(*(Text(cell[i]) for i in keep), *(line[n] for _, line in sparks))
    return table


def _state(conn: Row) -> str:
    """The connection's state, or `dropped (TCP RST by server, no connection.close)` when the
    tracker found TCP ended while it was open (the `*.transport-closed` finding says the same)."""
    transport = conn.get("transport")
    if not conn.get("dropped") or not isinstance(transport, str):
        return str(conn["state"])
    event, _, by = transport.partition(" by ")
    how = f"TCP {event.upper() if event in ('fin', 'rst') else event}"
    close = "close" if conn.get("version") == "1.0" else "connection.close"
    return f"dropped ({how}{' by ' + by if by else ''}, no {close})"


#: a line of text as (text, style) pieces: the first piece's style is the line's
Pieces = list[tuple[str, str]]


def _connection_line(conn: Row) -> Pieces:
    line = [(f"c{conn.get('id')}  {conn.get('client')} → {conn.get('server')}  ", "bold")]
    line.append((f"AMQP {conn.get('version')}", "bold cyan"))
    if conn.get("state"):  # first: it is what a narrow terminal must not cut
        state = _state(conn)
        line.append((f"  {state}", "bold red" if state.startswith("dropped") else "bold"))
    facts = [_layer_text(layer) for layer in conn.get("layers") or []]
    if conn.get("version") == "1.0":
        peer = _get(conn, "open", "server", "container-id")
        if peer:
            facts.append(f"server {peer}")
        mech = _get(conn, "sasl", "mechanism")
        if mech:
            facts.append(f"SASL {mech} {_get(conn, 'sasl', 'outcome') or ''}".strip())
        frame_max = _get(conn, "open", "holds", "max-frame-size")
        if isinstance(frame_max, dict):  # what each direction may carry
            sizes = {v for v in frame_max.values() if v is not None}
            # neither side's known (a log that does not show it): nothing to say
            frame_max = sizes.pop() if len(sizes) == 1 else (frame_max if sizes else None)
        if frame_max:
            facts.append(f"max-frame {_text(frame_max)}")
    else:
        product = _get(conn, "server-product", "product")
        if product:
            facts.append(f"{product} {_get(conn, 'server-product', 'version') or ''}".strip())
        for key in ("vhost", "user"):
            if conn.get(key):
                facts.append(f"{key} {conn[key]}")
        tune = _get(conn, "tune", "negotiated")
        if isinstance(tune, dict):
            facts.append(f"frame-max {tune.get('frame-max')} heartbeat {tune.get('heartbeat')}s")
    if conn.get("mid-stream") or conn.get("from-start") is False:
        facts.append("captured mid-stream")
    line.append((safe("  " + " · ".join(facts)), ""))
    close = _error(conn.get("close"))
    if close:
        line.append((f"  closed: {close}", "bold red"))
    return line


def _layer_text(layer: Row) -> str:
    """`TLS 1.3 TLS_AES_256_GCM_SHA384 decrypted`, `WebSocket /amqp`: what AMQP travels in."""
    if layer.get("name") == "tls":
        said = [layer.get("version") or "TLS", layer.get("cipher-suite")]
        if layer.get("sni"):
            said.append(f"sni={layer['sni']}")
        said.append("decrypted" if layer.get("decrypted") else "not decrypted")
        return " ".join(str(part) for part in said if part)
    if layer.get("name") == "websocket":
        return f"WebSocket {layer.get('path') or ''}".strip()
    return str(layer.get("name"))


#: why a connection's AMQP could not be read, by the finding its layer carried
UNDECODED_WHY = {
    "tls.no-key": "no key (--keylog FILE or SSLKEYLOGFILE)",
    "tls.wrong-key": "the key log's secrets do not decrypt it",
}


def _undecoded_line(conn: Row) -> Pieces:
    line = [(f"c{conn.get('id')}  {conn.get('client')} → {conn.get('server')}  ", "bold")]
    layers = conn.get("layers") or []
    line.append((safe(" over ".join(_layer_text(layer) for layer in reversed(layers))), ""))
    codes = [code for layer in layers for code in layer.get("findings") or []]
    why = next((UNDECODED_WHY[c] for c in codes if c in UNDECODED_WHY), None)
    line.append((f"  AMQP not read: {why or 'no AMQP seen inside'}", "bold yellow"))
    return line


def _finding_line(f: dict[str, Any], code_width: int) -> Pieces:
    severity = str(f.get("severity"))
    where = f"c{f.get('conn', '?')}" + (f" #{f['frame']}" if f.get("frame") else "")
    return [
        (f"  {severity:<7} ", SEVERITY_STYLES.get(severity, "")),
        (f"{f.get('code')!s:<{code_width}}  {where:<9} ", ""),
        (safe(str(f.get("message", "")).split("\n")[0]), ""),
    ]


def _journey_table(journeys: list[Row]) -> tuple[list[str], list[list[str]]]:
    """The message journeys as (headers, rows): the scalar keys of the first, then latency."""
    keys = [k for k in journeys[0] if not isinstance(journeys[0][k], (dict, list))]
    rows = []
    for row in journeys:
        latency = row.get("latency-ms") or row.get("latency") or {}
        cell = f"{_text(latency.get('p50'))}/{_text(latency.get('p99'))}" if latency else ""
        rows.append([*(_text(row.get(k)) for k in keys), cell])
    return [*keys, "latency ms p50/p99"], rows


#: the journey paths table's title, and each column's (min_width, max_width): on a narrow
#: terminal the place is cut (an ellipsis), the path and the hop times wrap, each kept this wide
PATHS_TITLE = "journey paths"
PATHS_LIMITS: dict[str, tuple[int, int | None]] = {
    "queue / address": (6, None),
    "messages": (8, None),
    "path": (24, None),
    "hop ms p50/p99": (14, None),
}


def _place(row: Row) -> str:
    """Where the row's messages went: the queue (0-9-1), the address (1.0), else the exchange
    and routing key of a publish no delivery in the input came from."""
    for key in ("queue", "address"):
        if row.get(key):
            return str(row[key])
    if "exchange" in row:
        exchange, key = (
            '""' if value == "" else str(value) for value in (row["exchange"], row["routing-key"])
        )
        return f"exchange {exchange} key {key} (no delivery in the input)"
    return "(unknown)"


Justify = Literal["left", "right"]


def _paths_table(
    rows: list[Row], untimed: bool
) -> tuple[list[tuple[str, Justify]], list[list[str]]]:
    """The journey paths as ([(header, justify)], cells): where, how many messages, the path,
    and each hop's p50/p99 in ms (left out when `untimed` or no hop has a time)."""
    timed = not untimed and any(h for row in rows for h in row.get("hop-ms") or [])
    heads: list[tuple[str, Justify]] = [
        ("queue / address", "left"),
        ("messages", "right"),
        ("path", "left"),
    ]
    if timed:
        heads.append(("hop ms p50/p99", "left"))
    cells = []
    for row in rows:
        path = " → ".join(str(step) for step in row.get("path") or [])
        if row.get("more-steps"):
            path += f" (+{row['more-steps']} more)"
        line = [safe(_place(row)), _text(row.get("messages")), safe(path)]
        if timed:
            hops = [
                f"{_text(h.get('p50'))}/{_text(h.get('p99'))}" if isinstance(h, dict) else "-"
                for h in row.get("hop-ms") or []
            ]
            line.append(" · ".join(hops))
        cells.append(line)
    return heads, cells


def _links(conn: Row) -> tuple[list[Row], list[str]]:
    """A 1.0 connection's links as table rows (each with its session's channel), and the
    lines of the sessions that ended with an error."""
    rows, ended = [], []
    for session in conn.get("sessions") or []:
        for link in session.get("links") or []:
            rows.append({**link, "_channel": session.get("channel")})
        error = _error(session.get("error"))
        if error:
            ended.append(f"  session ch{session.get('channel')} ended: {error}")
    return rows, ended


def _rich_line(pieces: Pieces) -> Text:
    from rich.text import Text

    (first, style), *rest = pieces
    text = Text(first, style=style)
    for part, part_style in rest:
        text.append(part, style=part_style)
    return text


def print_summary(
    result: dict[str, Any],
    console: Console | None = None,
    digest: Digest | None = None,
    untimed: bool = False,
) -> None:
    """Print the summary document as tables: every connection, or, given the `digest` of many,
    their totals and the busiest and most troubled of them. `untimed`: the frames had no time
    (a log without timestamps), so no column or sparkline of times and rates."""
    from rich.console import Console

    console = console or Console(markup=False, highlight=False)  # captured text is literal

    def line(pieces: Pieces) -> None:
        console.print(_rich_line(pieces), overflow="ellipsis", no_wrap=True, crop=True)

    if digest is None:
        for conn in result.get("connections", []):
            print_connection(conn, console, untimed)
    else:
        for pieces in digest.head():
            line(pieces)
        for heading, group in digest.groups():
            line(heading)
            for conn in group:
                print_connection(conn, console, untimed)
        line(digest.more())
        console.print()
    for conn in result.get("undecoded", []):
        line(_undecoded_line(conn))
    if result.get("undecoded"):
        console.print()
    journeys = result.get("journeys") or []
    if journeys:
        from rich.table import Table
        from rich.text import Text

        headers, lines = _journey_table(journeys)
        table = Table(title="message journeys", title_justify="left", show_edge=False)
        for key in headers[:-1]:
            table.add_column(key, overflow="ellipsis", no_wrap=True, max_width=40)
        table.add_column(headers[-1])
        for cells in lines:
            table.add_row(*(Text(cell) for cell in cells))
        console.print(table)
    paths = result.get("journey-paths") or []
    if paths:
        from rich.table import Table
        from rich.text import Text

        path_heads, path_rows = _paths_table(paths, untimed)
        table = Table(title=PATHS_TITLE, title_justify="left", show_edge=False)
        for key, justify in path_heads:
            least, most = PATHS_LIMITS[key]
            table.add_column(
                key,
                justify=justify,
                overflow="ellipsis" if key == "queue / address" else "fold",
                no_wrap=key == "messages",  # rich narrows only wrapping columns
                min_width=least,
                max_width=most,
            )
        for row in path_rows:
            table.add_row(*(Text(cell) for cell in row))
        console.print(table)
    if result.get("rpc"):
        line([(f"request/reply pairs: {len(result['rpc'])}", "bold")])
    for pieces in _findings_lines(result.get("findings", []), digest):
        line(pieces)


def print_connection(conn: Row, console: Console, untimed: bool = False) -> None:
    """One connection's line and tables, and a blank line after them."""

    def line(pieces: Pieces) -> None:
        console.print(_rich_line(pieces), overflow="ellipsis", no_wrap=True, crop=True)

    line(_connection_line(conn))
    if conn.get("version") == "1.0":
        rows, ended = _links(conn)
        for text in ended:
            line([(text, "red")])
        columns, sparks = _timed(LINK_COLUMNS, LINK_SPARKS, untimed)
        table = _table("links", columns, rows, console, sparks)
    else:
        channels = conn.get("channels") or []
        columns, sparks = _timed(CHANNEL_COLUMNS, CHANNEL_SPARKS, untimed)
        table = _table("channels", columns, channels, console, sparks)
    if table is not None:
        console.print(table)
    tx_columns, tx_rows, tx_counts = _transactions(conn)
    if tx_counts:
        line([(tx_counts, "bold")])
        tx_table = _table("transactions", tx_columns, tx_rows)
        if tx_table is not None:
            console.print(tx_table)
    console.print()


#: columns of times, meaningless where the frames had none (a log without timestamps)
TIMED_COLUMNS = frozenset(("starved s", "settle ms", "ack ms"))


def _timed(
    columns: list[Column], sparks: list[Spark], untimed: bool
) -> tuple[list[Column], list[Spark]]:
    """The columns and sparklines to show: without those of times when `untimed`."""
    if not untimed:
        return columns, sparks
    return [c for c in columns if c[0] not in TIMED_COLUMNS], []


def _findings_lines(findings: list[dict[str, Any]], digest: Digest | None) -> list[Pieces]:
    """The findings: every one, or with the digest of many connections, their count by code
    and the first `Digest.FINDINGS` of them."""
    if not findings:
        return [[("no findings", "green")]]
    out: list[Pieces] = [[(f"findings ({len(findings)})", "bold")]]
    shown = findings
    if digest is not None and len(findings) > digest.FINDINGS:
        out.extend(digest.finding_counts(findings))
        shown = findings[: digest.FINDINGS]
    code_width = max(len(str(f.get("code"))) for f in shown)
    out.extend(_finding_line(f, code_width) for f in shown)
    if len(shown) < len(findings):
        out.append([(f"  ... and {len(findings) - len(shown)} more (--all lists every one)", "")])
    return out


def summary_text(
    result: dict[str, Any],
    width: int,
    encoding: str,
    digest: Digest | None = None,
    untimed: bool = False,
) -> str | None:
    """The summary as `print_summary` prints it on a console of `width` columns that styles
    nothing (piped, or --color never) and writes `encoding`, when rich would print every line
    and table as it is, without cutting, wrapping or narrowing anything (with every sparkline)
    and every character takes one cell; otherwise None, and rich prints it."""
    if not encoding.startswith("utf"):  # rich draws ASCII boxes then
        return None
    sink = _PlainLines(width)
    out, line, table = sink.out, sink.line, sink.table

    if digest is None:
        for conn in result.get("connections", []):
            if not _connection_text(conn, width, encoding, line, table, untimed):
                return None
            out.append("")
    else:
        if not all(line(pieces) for pieces in digest.head()):
            return None
        for heading, group in digest.groups():
            if not line(heading):
                return None
            for conn in group:
                if not _connection_text(conn, width, encoding, line, table, untimed):
                    return None
                out.append("")
        if not line(digest.more()):
            return None
        out.append("")
    for conn in result.get("undecoded", []):
        if not line(_undecoded_line(conn)):
            return None
    if result.get("undecoded"):
        out.append("")
    journeys = result.get("journeys") or []
    if journeys:
        headers, lines = _journey_table(journeys)
        heads = [plain.Column(key, "left", 0, 40) for key in headers[:-1]]
        heads.append(plain.Column(headers[-1], "left", 0, None))
        if not table(plain.table("message journeys", heads, lines, width, pad_edge=True)):
            return None
    paths = result.get("journey-paths") or []
    if paths:
        path_heads, path_rows = _paths_table(paths, untimed)
        columns = [plain.Column(key, justify, *PATHS_LIMITS[key]) for key, justify in path_heads]
        if not table(plain.table(PATHS_TITLE, columns, path_rows, width, pad_edge=True)):
            return None
    if result.get("rpc") and not line([(f"request/reply pairs: {len(result['rpc'])}", "")]):
        return None
    if not all(line(pieces) for pieces in _findings_lines(result.get("findings", []), digest)):
        return None
    return "\n".join(out) + "\n"


def connection_text(conn: Row, width: int, encoding: str, untimed: bool = False) -> str | None:
    """One connection's lines as `print_connection` prints them uncoloured on `width` columns
    (a blank line after them), or None when rich must lay them out (see `summary_text`)."""
    if not encoding.startswith("utf"):
        return None
    sink = _PlainLines(width)
    if not _connection_text(conn, width, encoding, sink.line, sink.table, untimed):
        return None
    return "\n".join(sink.out) + "\n\n"


class _PlainLines:
    """The uncoloured summary's lines as they are made; `line` and `table` say whether rich
    would print them as they are (else the caller leaves the layout to rich)."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.out: list[str] = []

    def line(self, pieces: Pieces) -> bool:
        text = "".join(part for part, _ in pieces)
        self.out.append(text)
        return plain.fits(text, self.width)

    def table(self, lines: list[str] | None) -> bool:
        if lines is None:
            return False
        self.out.extend(lines)
        return True


def _connection_text(
    conn: Row,
    width: int,
    encoding: str,
    line: Callable[[Pieces], bool],
    table: Callable[[list[str] | None], bool],
    untimed: bool = False,
) -> bool:
    """One connection's line and tables, given to `line` and `table`; False when rich must lay
    something out."""
    if not line(_connection_line(conn)):
        return False
    if conn.get("version") == "1.0":
        rows, ended = _links(conn)
        if not all(line([(text, "")]) for text in ended):
            return False
        title = "links"
        columns, sparks = _timed(LINK_COLUMNS, LINK_SPARKS, untimed)
    else:
        rows = conn.get("channels") or []
        title = "channels"
        columns, sparks = _timed(CHANNEL_COLUMNS, CHANNEL_SPARKS, untimed)
    if rows:
        cells, keep = _cells(columns, rows)
        shown = [(n, s) for n, s in _spark_lines(rows, sparks, encoding) if any(s)]
        heads = [
            plain.Column(columns[i][0], _justify(columns[i][0]), *_limits(columns[i][0]))
            for i in keep
        ]
        heads += [plain.Column(name, "left", sparkline.WIDTH, None) for name, _ in shown]
        body = [
            [cell[i] for i in keep] + [spark[n] for _, spark in shown]
            for n, cell in enumerate(cells)
        ]
        if not table(plain.table(title, heads, body, width, pad_edge=False)):
            return False
    tx_columns, tx_rows, tx_counts = _transactions(conn)
    if tx_counts:
        if not line([(tx_counts, "")]):
            return False
        if tx_rows:
            cells, keep = _cells(tx_columns, tx_rows)
            heads = [
                plain.Column(
                    tx_columns[i][0], _justify(tx_columns[i][0]), *_limits(tx_columns[i][0])
                )
                for i in keep
            ]
            body = [[cell[i] for i in keep] for cell in cells]
            if not table(plain.table("transactions", heads, body, width, pad_edge=False)):
                return False
    return True
