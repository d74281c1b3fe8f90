"""The census of a capture with no AMQP, in words (`read` and `summary` say it)."""

from __future__ import annotations

from typing import Any

from amqpscope.census import AMQP_TLS_PORTS
from amqpscope.render.lines import safe

KEYLOG_HINT = "give its keys with --keylog FILE (an SSLKEYLOGFILE) to read the AMQP inside"


def census_lines(found: dict[str, Any], name: str) -> list[str]:
    """`no AMQP in NAME: 5 TCP connections: 2 HTTP on port 39361, ...`, and a hint per kind."""
    total = found["tcp-connections"]
    if total == 0:
        return [f"no AMQP in {safe(name)}: no TCP connection in it"]
    parts = []
    hints = []
    for other in found["other"]:
        count, protocol, port = other["connections"], other["protocol"], other["port"]
        parts.append(f"{count} {protocol} on port {port}")
        if protocol == "TLS" and port in AMQP_TLS_PORTS:
            hints.append(f"TLS on {port} is AMQP's port but was not decrypted: {KEYLOG_HINT}")
    plural = "s" if total != 1 else ""
    head = f"no AMQP in {safe(name)}: {total} TCP connection{plural}: " + ", ".join(parts)
    return [head, *hints]
