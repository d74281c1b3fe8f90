"""AMQP 1.0 error composites as findings and summaries say them (condition, description, info).

Its own module so that every level, and the transactions, read errors without importing each
other (`delivery.py` re-exports both names).
"""

from __future__ import annotations

from typing import Any


def error_of(value: Any) -> dict[str, Any] | None:
    """`{condition, description}` of an error composite (or None)."""
    if not isinstance(value, dict):
        return None
    condition = value.get("condition")
    if condition is None:
        return None
    out: dict[str, Any] = {"condition": condition, "description": value.get("description")}
    if value.get("info"):
        out["info"] = value["info"]
    return out


def error_text(error: dict[str, Any]) -> str:
    description = error.get("description")
    return f"{error['condition']}" + (f": {description}" if description else "")
