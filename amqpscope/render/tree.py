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


def value_text(value: Any, top: bool = True) -> str:
    """A value as the tree shows it: strings quoted, control characters escaped as the timeline
    escapes them (`lines.safe`), lists and maps written out the same way."""
    if value is None:
        return "" if top else "null"
    if isinstance(value, str):
        return '"' + safe(value) + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(value_text(v, False) for v in value) + "]"
    if isinstance(value, dict):
        items = (f"{value_text(str(k), False)}: {value_text(v, False)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    return safe(json.dumps(value, default=str))


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


def detail_lines(
    nodes: list[Node],
    data: bytes,
    tree: bool,
    dump: bool,
    width: int | None = None,
    show_secrets: bool = False,
    carriers: list[tuple[int, int, int, int]] | None = None,
    blank: list[tuple[int, int]] | None = None,
) -> list[str]:
    """What `read -V` / `-x` print under a frame's line: its tree, then its bytes (a secret's
    bytes blanked unless secrets are shown; the tree says where they are) and, for a frame
    spread over several packets (`Frame.carriers`), which packet carried which bytes. `blank`:
    spans blanked whatever is shown (the bodies --redact-bodies dropped)."""
    from amqpscope.render.hexdump import carriers_lines, hexdump

    out = tree_lines(nodes, width, show_secrets) if tree else []
    if dump and data:
        hide = [] if show_secrets else [span for node in nodes for span in node.secrets()]
        hide += blank or []
        out.extend(hexdump(data, hide))
        if carriers is not None and len(carriers) > 1:
            out.extend(carriers_lines((p, o, n) for p, o, n, _ in carriers))
    return out


def value_tree(name: str, value: Any, pane: bool = False, cut: int = 0) -> dict[str, Any]:
    """A value of a frame's record as a tree node (maps and lists open into their items): the
    detail of a frame whose bytes give no -V tree (a log's), and what the record adds to one
    (the message as decoded, the findings). The report's form: a container says how many
    ("3 entries", "2 items"), a leaf is its value (`true`, `null`; a string cut to `cut`
    characters). The TUI pane's (`pane`): "{3}", "[2]", a leaf's `str()`, and every node with
    its (empty) place in the frame and its children."""
    children: list[dict[str, Any]] = []
    if isinstance(value, dict):
        children = [value_tree(str(k), v, pane, cut) for k, v in value.items()]
        kind, shown = "map", f"{{{len(value)}}}" if pane else f"{len(value)} entries"
    elif isinstance(value, list):
        children = [value_tree(f"[{i}]", v, pane, cut) for i, v in enumerate(value)]
        kind, shown = "list", f"[{len(value)}]" if pane else f"{len(value)} items"
    elif pane:
        kind, shown = type(value).__name__, "null" if value is None else str(value)
    else:
        kind = "null" if value is None else type(value).__name__
        shown = "null" if value is None else value
        if isinstance(value, bool):
            shown = str(value).lower()
        if cut and isinstance(shown, str) and len(shown) > cut:
            shown = shown[: cut - 1] + ELLIPSIS
    if pane:
        return {
            "name": name,
            "value": shown,
            "type": kind,
            "offset": None,
            "length": None,
            "children": children,
        }
    if kind in ("map", "list"):
        return {"name": name, "type": kind, "value": shown, "children": children}
    return {"name": name, "type": kind, "value": shown}


def tree_json(nodes: list[Node], show_secrets: bool = False) -> list[dict[str, Any]]:
    """The `tree` of a frame record (`read --json -V`; the frame schema's tree-node)."""
    return [node.to_json(show_secrets) for node in nodes]
