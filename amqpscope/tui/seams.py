"""Where the TUI meets parts of amqpscope being built alongside it: one small function each, so
the lead can wire the real one in at merge without touching the app.

- `detail_tree`: the -V detail tree (issue 23). Until it lands, the frame's `--json` fields as
  a tree, with no offsets.
- `hex_lines`: the -x bytes (issue 23). A hex/ASCII dump of the bytes the record keeps.
- `diagnoses`: `Diagnosis.to_json()` list (issue 21). Until it lands, the trackers' findings.
- `write_cut`: `read -w` (issue 23). Until it lands, `capture.cut.write_packets`.
"""

from __future__ import annotations

from typing import Any

from amqpscope.render.lines import safe

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
    children: list[DetailNode] = []
    if isinstance(value, dict):
        children = [_node(str(k), v) for k, v in value.items()]
        shown, kind = f"{{{len(value)}}}", "map"
    elif isinstance(value, list):
        children = [_node(f"[{i}]", v) for i, v in enumerate(value)]
        shown, kind = f"[{len(value)}]", "list"
    else:
        shown, kind = ("null" if value is None else str(value)), type(value).__name__
    return {
        "name": name,
        "value": shown,
        "type": kind,
        "offset": None,
        "length": None,
        "children": children,
    }


def detail_tree(record: dict[str, Any], data: bytes) -> DetailNode:
    """The frame's detail tree: its header facts, then its fields (and message, findings)."""
    root = _node(f"frame {record.get('frame')}: {record.get('name')}", None)
    root["value"] = f"{record.get('size', len(data))} bytes"
    root["children"] = [_node(key, record.get(key)) for key in _SHOWN if key in record]
    for key in ("fields", "message", "findings"):
        if record.get(key):
            root["children"].append(_node(key, record[key]))
    return root


def node_text(node: DetailNode) -> str:
    """A tree node as one line, safe for the terminal."""
    offset = "" if node.get("offset") is None else f"  @{node['offset']}+{node.get('length')}"
    return safe(f"{node['name']}: {node['value']}{offset}")


def hex_lines(data: bytes, size: int) -> list[str]:
    """The bytes as `offset  hex  |ascii|` lines (16 a line), or why there are none."""
    if not data:
        if size:
            return [f"bytes not kept ({size} bytes; this source keeps no frame bytes)"]
        return ["no bytes"]
    lines = []
    for start in range(0, min(len(data), MAX_DUMP), 16):
        chunk = data[start : start + 16]
        hexes = " ".join(f"{b:02x}" for b in chunk)
        text = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in chunk)
        lines.append(f"{start:06x}  {hexes:<47}  |{text:<16}|")
    shown = min(len(data), MAX_DUMP)
    if size > shown:
        lines.append(f"… {size - shown} more bytes not shown")
    return lines


def diagnoses(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """What the `d` list shows, in the shape of `Diagnosis.to_json()`: until the diagnose layer
    lands, one entry per tracker finding (its code, message, connection and frame)."""
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


def write_cut(source: str, packets: list[int], out: str) -> int:
    """Write the packets numbered `packets` of capture `source` to `out`; how many."""
    from amqpscope.capture.cut import write_packets

    return write_packets(source, packets, out)
