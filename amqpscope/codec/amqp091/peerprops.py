"""The entries of connection.start's server-properties and start-ok's client-properties that
amqpscope reads (the summary's product line, the connection's name), and the field-table type
each has: longstr text, or a table for capabilities. RabbitMQ's broker
(`rabbit_reader:server_properties/1`) and its clients (pika's `connection.py`, the Java client's
`ClientProperties`) send them so; the 0-9-1 spec leaves the tables' contents open, so this is the
one place that says what they hold.

A peer may send anything in a table: an entry of another type is an `amqp091.bad-field-type`
finding; the frame shows it as sent, and `well_typed` gives the tracker the table without it.
"""

from __future__ import annotations

from typing import Any, Final

#: entry -> (the Python type the decoder gives a well-typed value, the field-table type's name)
PEER_PROPERTIES: Final[dict[str, tuple[type, str]]] = {
    **dict.fromkeys(
        (
            "product",
            "version",
            "platform",
            "copyright",
            "information",
            "cluster_name",
            "connection_name",
        ),
        (str, "longstr"),
    ),
    "capabilities": (dict, "table"),
}

#: the Python type of a decoded field-table value -> the field-table type's name, for a finding
_FOUND: Final[dict[type, str]] = {
    bool: "boolean",
    int: "integer",
    float: "float",
    str: "longstr",
    dict: "table",
    list: "array",
    type(None): "void",
}


def _is_hex(value: Any) -> bool:
    """A byte array, or a longstr that is no UTF-8: the decoder shows both as {"hex": ...}."""
    return type(value) is dict and len(value) == 1 and "hex" in value


def found_type(value: Any) -> str:
    """The field-table type `value` was decoded from, as a finding names it."""
    if _is_hex(value):
        return "byte array or non-UTF-8 longstr"
    return _FOUND.get(type(value), type(value).__name__)


def ill_typed(table: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(entry, type found, type expected) for each entry of `table` of a type its name does not
    have (a {"hex"} text, not UTF-8, is no well-typed longstr: it cannot be shown as one)."""
    out = []
    for key, (kind, expected) in PEER_PROPERTIES.items():
        if key in table:
            value = table[key]
            if type(value) is not kind or (kind is dict and _is_hex(value)):
                out.append((key, found_type(value), expected))
    return out


def well_typed(table: Any) -> dict[str, Any]:
    """`table` without the entries `ill_typed` names ({} for what is not a table)."""
    if type(table) is not dict:
        return {}
    bad = {key for key, _, _ in ill_typed(table)}
    return {k: v for k, v in table.items() if k not in bad} if bad else table
