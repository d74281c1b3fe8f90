"""A frame's detail tree as text (`read -V`): one line a field, indented as the spec nests it.

`name: value  [type @offset+length]`, offsets within the frame (the `-x` dump's offsets). Every
string from the capture goes through `lines.safe`, so a hostile name stays escaped; on a
terminal (`width` given) a line too long is cut at its value, never when piped. A secret's
value reads `<redacted>` unless secrets are shown, and nothing under it is listed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Final

from amqpscope.codec.tree import REDACTED, Node
from amqpscope.render.lines import safe

INDENT: Final = "    "
ELLIPSIS: Final = "…"
#: node types that are the record's, not bytes of the frame: no offsets shown
NO_BYTES: Final = frozenset(("record", "layer"))


def value_text(value: Any) -> str:
    """A value as the tree shows it: strings quoted, the rest as JSON; escaped either way."""
    if value is None:
        return ""
    if isinstance(value, str):
        return safe(json.dumps(value, ensure_ascii=False))
    return safe(json.dumps(value, ensure_ascii=False, default=str))


def tree_lines(
    nodes: Iterable[Node], width: int | None = None, show_secrets: bool = False, indent: int = 1
) -> list[str]:
    """The lines of `nodes` and everything under them; `width`: cut lines to it (a terminal)."""
    out: list[str] = []
    for node in nodes:
        _lines(node, indent, width, show_secrets, out)
    return out


def _lines(node: Node, depth: int, width: int | None, show: bool, out: list[str]) -> None:
    hidden = node.secret and not show
    value = REDACTED if hidden else value_text(node.value)
    where = "" if node.type in NO_BYTES else f" @{node.offset}+{node.length}"
    kind = f"  [{safe(node.type)}{where}]" if node.type not in NO_BYTES else ""
    head = f"{INDENT * depth}{safe(node.name)}"
    if value:
        head += ": "
    if width is not None and len(head) + len(value) + len(kind) > width:
        room = width - len(head) - len(kind) - len(ELLIPSIS)
        if room >= 8:
            value = value[:room] + ELLIPSIS
        else:  # not even the value fits: the type goes first, then the value is cut
            kind = ""
            value = value[: max(0, width - len(head) - len(ELLIPSIS))] + ELLIPSIS
    out.append(head + value + kind)
    if hidden:
        return
    for child in node.children:
        _lines(child, depth + 1, width, show, out)
