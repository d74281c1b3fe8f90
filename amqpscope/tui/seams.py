"""Where the TUI meets the rest of amqpscope: one small function each, so the app never
depends on how they are made.

- `detail_tree`: the -V detail tree (issue 23's `codec.tree.frame_tree`, each field with its
  offset and length, secrets redacted); the frame's `--json` fields as a tree when it has no
  bytes to decode (a log's frame) or the tree cannot be made.
- `hex_lines`: the -x bytes: a hex/ASCII dump of the bytes the record keeps, a secret's bytes
  blanked (`**`) as `read -x` blanks them.
- `diagnoses`: while the input is still being read, the trackers' findings in the shape of
  `Diagnosis.to_json()` (the diagnoses need the whole input).
- `write_cut`: `read -w`'s pass (`writing.packets.write_new_file`).
"""

from __future__ import annotations

from typing import Any

from amqpscope.codec.tree import REDACTED
from amqpscope.render.hexdump import hexdump
from amqpscope.render.lines import safe
from amqpscope.render.tree import value_text, value_tree

#: bytes of a frame shown in the bytes pane (the rest is said, not drawn)
MAX_DUMP = 16384
#: a dump line: `offset  hex  |ascii|`, where its hex and ASCII columns start, and its width
HEX_COLUMN = 8
ASCII_COLUMN = HEX_COLUMN + 47 + 3
DUMP_WIDTH = ASCII_COLUMN + 16 + 1

#: a node of the detail tree, as the -V tree of issue 23 has it
DetailNode = dict[str, Any]  # {name, value, type, offset, length, children}

_SHOWN = ("frame", "packet", "ts", "conn", "src", "dst", "dir", "version", "channel", "kind")


def _node(name: str, value: Any) -> DetailNode:
    return value_tree(name, value, pane=True)


def detail_tree(
    record: dict[str, Any], data: bytes, show_secrets: bool = False, redact_bodies: bool = False
) -> tuple[DetailNode, list[tuple[int, int]]]:
    """The frame's detail tree, and the (offset, length) of the bytes to blank: its secrets',
    and with `redact_bodies` its message bodies' (as `read -V -x --redact-bodies`)."""
    if data and len(data) == record.get("size"):  # whole bytes: the -V tree of issue 23
        from amqpscope.codec.tree import frame_tree
        from amqpscope.codec.tree import redact_bodies as drop_bodies
        from amqpscope.tui.store import frame_from_record

        try:
            nodes = frame_tree(frame_from_record(record, data))
        except Exception:  # a tree that cannot be made: the record's fields still can
            nodes = []
        if nodes:
            bodies = drop_bodies(nodes) if redact_bodies else []
            root = _node(f"frame {record.get('frame')}: {record.get('name')}", None)
            root["value"] = f"{len(data)} bytes"
            root["children"] = [n.to_json(show_secrets) for n in nodes]
            for key in ("findings", "message"):
                if record.get(key):
                    root["children"].append(_node(key, record[key]))
            hidden = [] if show_secrets else [r for n in nodes for r in n.secrets()]
            return _fill(root), hidden + bodies
    return json_tree(record, data), []


def _fill(node: DetailNode) -> DetailNode:
    """A -V tree node as the pane draws it: a shown value, children always listed; offsets
    only for fields that are bytes of the frame (not the record's facts)."""
    node.setdefault("children", [])
    value = node.get("value")
    if value is None and node["children"]:
        node["value"] = ""
    elif value != REDACTED:  # as read -V writes a value: strings quoted, controls escaped
        node["value"] = value_text(value)
    if node.get("type") in ("record", "layer"):
        node["offset"] = node["length"] = None
    for child in node["children"]:
        _fill(child)
    return node


def json_tree(record: dict[str, Any], data: bytes) -> DetailNode:
    """The frame's `--json` record as a tree: its header facts, then its fields (and message,
    findings); no offsets."""
    root = _node(f"frame {record.get('frame')}: {record.get('name')}", None)
    root["value"] = f"{record.get('size', len(data))} bytes"
    root["children"] = [_node(key, record.get(key)) for key in _SHOWN if key in record]
    for key in ("fields", "message", "findings"):
        if record.get(key):
            root["children"].append(_node(key, record[key]))
    return root


def node_text(node: DetailNode) -> str:
    """A tree node as one line, safe for the terminal."""
    offset = "" if node.get("offset") is None else f"@{node['offset']}+{node.get('length')}"
    kind = f"  [{node['type']} {offset}]" if offset and node.get("type") else offset
    value = f": {node['value']}" if node.get("value") not in (None, "") else ""
    return safe(f"{node['name']}{value}{kind}")


def hex_lines(data: bytes, size: int, hide: list[tuple[int, int]] | None = None) -> list[str]:
    """The bytes as `offset  hex  |ascii|` lines (16 a line), or why there are none; the
    (offset, length) ranges of `hide` (secrets) blanked."""
    if not data:
        if size:
            return [f"bytes not kept ({size} bytes; this source keeps no frame bytes)"]
        return ["no bytes"]
    lines = hexdump(data[:MAX_DUMP], hide or (), indent="", pane=True)
    shown = min(len(data), MAX_DUMP)
    if size > shown:
        lines.append(f"… {size - shown} more bytes not shown")
    return lines


def diagnoses(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """What the `d` list shows while the input is still being read (the diagnoses need the
    whole of it), in the shape of `Diagnosis.to_json()`: one entry per tracker finding so far
    (its code, message, connection and frame)."""
    out = []
    for found in summary.get("findings") or []:
        frame = found.get("frame")
        out.append(
            {
                "code": found.get("code", ""),
                "severity": found.get("severity", ""),
                "title": found.get("code", ""),
                "explanation": found.get("message", ""),
                "conn": found.get("conn"),
                "start": None,
                "duration": None,
                "evidence": [frame] if frame is not None else [],
            }
        )
    return out


def refused_output(source: str | tuple[str, ...], out: str) -> str:
    """Why `out` may not take the cut of `source` (it is the capture being read, one of its
    files, through a link too), or "" when it may: the rule every writer keeps
    (amqpscope.writing.outputs), in the TUI's words."""
    from amqpscope.writing.outputs import same_file

    sources = (source,) if isinstance(source, str) else source
    if any(same_file(out, one) for one in sources):
        return f"not written: {out} is the capture being read; write the cut elsewhere"
    return ""


def write_cut(
    source: str | tuple[str, ...],
    places: set[tuple[int, int]],
    out: str,
    show_secrets: bool = False,
    keylog: str | None = None,
    overwrite: bool = False,
) -> tuple[int, int, int]:
    """Write the cut of capture `source` (or the files of a rotated one) holding the frames at
    `places` (`FrameStore.place`) to `out`, as `read -w` writes it (the frames' packets, however
    many carried each, their connections' handshakes, a pcapng's secrets); (packets, frames,
    packets lost). An `out` that exists is replaced only when `overwrite` (the user said so);
    the capture being read never. A key log that cannot be read raises (`sources`), said on the
    status line like any writer's error; nothing is printed under the screen."""
    from amqpscope.sources import load_keylog
    from amqpscope.writing.packets import write_new_file

    sources = (source,) if isinstance(source, str) else source
    refused = refused_output(sources, out)
    if refused:
        raise ValueError(refused.removeprefix("not written: "))
    last = [-1, 0]  # the packet of the frame before, and how many completed in it

    def accepts(frame: Any, _first: float | None) -> bool:
        packet = frame.packet or 0
        last[1] = last[1] + 1 if packet == last[0] else 0
        last[0] = packet
        return (packet, last[1]) in places

    written = write_new_file(sources, out, accepts, show_secrets, load_keylog(keylog), overwrite)
    return written.packets, written.frames, written.lost
