"""`amqpscope summary` as tables (rich): one table per connection and its sessions or channels."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.table import Table


def _cell(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return "" if value is None else str(value)


def print_summary(result: dict[str, Any], console: Console | None = None) -> None:
    """Print the summary document: connections, then findings (a first, plain layout)."""
    console = console or Console()
    for conn in result.get("connections", []):
        table = Table(title=f"connection {conn.get('id')}  {conn.get('version')}", show_lines=False)
        table.add_column("key", style="bold")
        table.add_column("value", overflow="ellipsis", no_wrap=True)
        for key, value in conn.items():
            if key not in ("sessions", "channels", "id", "version"):
                table.add_row(key, _cell(value))
        console.print(table)
        for child_key in ("sessions", "channels"):
            children = conn.get(child_key) or []
            if children:
                keys = list(dict.fromkeys(k for child in children for k in child))
                sub = Table(title=f"{child_key} of connection {conn.get('id')}")
                for key in keys:
                    sub.add_column(key, overflow="ellipsis", no_wrap=True, max_width=40)
                for child in children:
                    sub.add_row(*(_cell(child.get(key)) for key in keys))
                console.print(sub)
    findings = result.get("findings", [])
    if findings:
        table = Table(title="findings")
        for key in ("severity", "code", "conn", "frame", "message"):
            table.add_column(key, overflow="fold" if key == "message" else "ellipsis")
        for f in findings:
            table.add_row(
                *(_cell(f.get(key)) for key in ("severity", "code", "conn", "frame", "message"))
            )
        console.print(table)
