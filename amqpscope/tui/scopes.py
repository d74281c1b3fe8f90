"""The tree of the left pane: connections → sessions → links (1.0), channels → consumers (0-9-1).

Built from the tracker's summary (what `summary --json` prints), each node with its state and
counts and a display filter in the `-Y` language that selects its frames: selecting a node puts
that filter in the filter bar, so what the tree scopes to is visible, editable and the same as
`read -Y` would take. Labels hold captured names: they go through `safe` before any terminal.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from amqpscope.filter import compile_filter
from amqpscope.render.lines import safe

#: connections listed in the tree; past it a last node says how many more (the frame list and
#: the filter bar still reach them)
MAX_CONNECTIONS = 5000
MAX_NAME = 48  # characters of a link, queue or consumer name on a node


@dataclass
class Node:
    label: str
    expression: str
    kind: str  # connection, session, link, channel, consumer, more
    conn: int = 0
    findings: int = 0
    children: list[Node] = field(default_factory=list)


def quoted(text: str) -> str:
    """`text` as a string literal of the filter language."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _name(value: Any) -> str:
    text = safe(str(value))
    return text if len(text) <= MAX_NAME else text[: MAX_NAME - 1] + "…"


def _sides(conn: int, client: Any, server: Any, extra: str = "") -> str:
    """Frames of one conn whose channel (and `extra` field) is `client` going c2s, `server`
    going s2c; a side the tracker never saw is left out."""
    parts = []
    for direction, value in (("c2s", client), ("s2c", server)):
        if value is None:
            continue
        test = f'dir == "{direction}" and channel == {value[0]}'
        if extra and value[1] is not None:
            test += f" and {extra} == {value[1]}"
        parts.append(f"({test})")
    if not parts:
        return f"conn == {conn}"
    return f"conn == {conn} and ({' or '.join(parts)})"


def _session_nodes(conn: int, session: dict[str, Any]) -> Node:
    client, server = session.get("channel"), session.get("remote-channel")
    links = session.get("links") or []
    label = (
        f"session ch{client if client is not None else '?'}/{server if server is not None else '?'}"
    )
    label += f"  {session.get('state', '')}  {len(links)} link{'s' if len(links) != 1 else ''}"
    node = Node(
        label,
        _sides(
            conn,
            None if client is None else (client, None),
            None if server is None else (server, None),
        ),
        "session",
        conn,
    )
    for link in links:
        handles = (link.get("handle"), link.get("remote-handle"))
        address = link.get("target") if link.get("role") == "sender" else link.get("source")
        counts = f"settled {link.get('settled', 0)} unsettled {link.get('unsettled', 0)}"
        # role and address first, the name (often a client's UUID) last: a narrow pane cuts it
        text = str(link.get("role", "?"))
        if address:
            text += (
                f" → {_name(address)}" if link.get("role") == "sender" else f" ← {_name(address)}"
            )
        text += f"  h{handles[0]}"
        expression = _sides(
            conn,
            None if client is None or handles[0] is None else (client, handles[0]),
            None if server is None or handles[1] is None else (server, handles[1]),
            "fields.handle",
        )
        name = _name(link.get("name", ""))
        node.children.append(
            Node(f"{text}  {link.get('state', '')}  {counts}  {name}", expression, "link", conn)
        )
    return node


def _channel_nodes(conn: int, channels: list[dict[str, Any]]) -> list[Node]:
    # a channel number reused: each use runs from its open to the next use's open
    opens: dict[int, list[int]] = {}
    for channel in channels:
        opens.setdefault(channel.get("channel", 0), []).append(channel.get("opened-frame") or 0)
    nodes = []
    for channel in channels:
        number = channel.get("channel", 0)
        start = channel.get("opened-frame") or 0
        later = [f for f in opens[number] if f > start]
        expression = f"conn == {conn} and channel == {number}"
        if start and len(opens[number]) > 1:
            expression += f" and frame >= {start}"
        if later:
            expression += f" and frame < {min(later)}"
        use = f" (use {channel['use']})" if channel.get("use", 1) != 1 else ""
        counts = (
            f"pub {channel.get('publishes', 0)} del {channel.get('deliveries', 0)}"
            f" ack {channel.get('acks', 0)} unacked {channel.get('unacked', 0)}"
        )
        node = Node(
            f"ch{number}{use}  {channel.get('state', '')}  {counts}", expression, "channel", conn
        )
        for consumer in channel.get("consumers") or []:
            tag = str(consumer.get("tag", ""))
            node.children.append(
                Node(
                    f"consumer {_name(tag)} q={_name(consumer.get('queue', ''))}"
                    f"  del {consumer.get('deliveries', 0)}"
                    + (
                        f"  cancelled by {consumer['cancelled-by']}"
                        if consumer.get("cancelled-by")
                        else ""
                    ),
                    f"{expression} and fields.consumer-tag == {quoted(tag)}",
                    "consumer",
                    conn,
                )
            )
        nodes.append(node)
    return nodes


def build_tree(summary: dict[str, Any]) -> list[Node]:
    """The connection nodes, children filled, from a tracker summary."""
    nodes: list[Node] = []
    connections = summary.get("connections") or []
    for connection in connections[:MAX_CONNECTIONS]:
        conn = connection.get("id", 0)
        version = connection.get("version", "")
        label = (
            f"c{conn} {safe(str(connection.get('client', '')))} → "
            f"{safe(str(connection.get('server', '')))}  AMQP {version}"
            f"  {connection.get('state', '')}"
        )
        node = Node(label, f"conn == {conn}", "connection", conn)
        if "sessions" in connection:
            node.children = [_session_nodes(conn, s) for s in connection["sessions"] or []]
        else:
            node.children = _channel_nodes(conn, connection.get("channels") or [])
        nodes.append(node)
    for entry in summary.get("undecoded") or []:
        conn = entry.get("id", 0)
        nodes.append(
            Node(
                f"c{conn} {safe(str(entry.get('client', '')))} → "
                f"{safe(str(entry.get('server', '')))}  undecoded",
                f"conn == {conn}",
                "connection",
                conn,
            )
        )
    if len(connections) > MAX_CONNECTIONS:
        more = len(connections) - MAX_CONNECTIONS
        nodes.append(Node(f"… {more} more connections (filter with conn == N)", "", "more"))
    return nodes


def walk(nodes: Iterable[Node]) -> Iterable[Node]:
    for node in nodes:
        yield node
        yield from walk(node.children)


def mark_findings(
    nodes: list[Node], flagged: Iterable[dict[str, Any]], unplaced: dict[int, int]
) -> None:
    """Count on each node the findings of its frames (`flagged`: the records that carry any),
    and on each connection those raised with no frame (`unplaced`: conn → count, e.g. what was
    left open when the capture ended)."""
    by_conn: dict[int, list[dict[str, Any]]] = {}
    for record in flagged:
        by_conn.setdefault(record.get("conn", 0), []).append(record)
    for top in nodes:
        records = by_conn.get(top.conn, [])
        for node in walk([top]):
            if not node.expression:
                continue
            matches = compile_filter(node.expression)
            node.findings = sum(len(r.get("findings", ())) for r in records if matches(r))
        top.findings += unplaced.get(top.conn, 0)
