"""The frames' part of the report's data, packed small (sans-IO): rows, records and detail trees
as columns, deflated, in base64.

The page filters the frame list with `-Y` itself (filter.js), so it holds every listed frame's
record (`Frame.to_json()`, raw: the filter sees what `read -Y` sees) besides its row. Records
are shredded into columns: the dicts at each path (fields, fields.properties, message ...)
become a list of their key sets, a shape index per value, and one column per key, recursively;
a column of integers (frame numbers, delivery ids) or of times in whole microseconds is stored
as differences. Neighbouring values of one key then sit together, which deflate packs ten times
better than the records one by one (a 100,000-frame AMQP 1.0 capture: 78 MB of records, 0.8 MB
packed). report.js undoes it (`unshred`).

JSON cannot hold every value a record may: integers past 2**53 (a JavaScript number would round
them) and infinite or NaN floats go as `{"\\u0000": [kind, text]}`; a real key that starts with
NUL gets one more, which the page takes off.

Deterministic: the same data gives the same bytes (insertion-ordered shapes, zlib at one level).
"""

from __future__ import annotations

import base64
import json
import math
import zlib
from array import array
from typing import Any, Final

#: integers a JavaScript number holds exactly, and those whose differences it does
SAFE: Final = 2**53
HALF: Final = 2**52
TAG: Final = "\x00"
LEVEL: Final = 6


def tagged(value: Any) -> Any:
    """`value` as JSON can carry it to the page (see the module's docstring)."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    if kind is int:
        return value if -SAFE < value < SAFE else {TAG: ["i", str(value)]}
    if isinstance(value, float):
        return value if math.isfinite(value) else {TAG: ["f", repr(value)]}
    if isinstance(value, dict):
        return {(TAG + k if k.startswith(TAG) else k): tagged(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [tagged(v) for v in value]
    return str(value)


def _leaf(values: list[Any]) -> dict[str, Any]:
    """A column of values that are not dicts: differences when all are safe integers or times
    in whole microseconds, else the values."""
    if values and all(type(v) is int and -HALF < v < HALF for v in values):
        out, prev = [], 0
        for v in values:
            out.append(v - prev)
            prev = v
        return {"i": out}
    if values and all(type(v) is float and math.isfinite(v) for v in values):
        micros = [round(v * 1e6) for v in values]
        # exact: the page's micros / 1e6 is the same double (one IEEE division each side)
        if all(abs(m) < HALF and m / 1e6 == v for m, v in zip(micros, values, strict=True)):
            out, prev = [], 0
            for m in micros:
                out.append(m - prev)
                prev = m
            return {"u": out}
    return {"v": [v if type(v) is str else tagged(v) for v in values]}


class Shredder:
    """Values as columns, taken one at a time (a record as each frame is read: the frames need
    not stay in memory): `to_json` gives `s` the key sets of the (non-empty) dicts among them,
    `x` each value's key set (-1: not such a dict, the next of `o`), `d` a column per key."""

    __slots__ = ("children", "others", "shape_of", "shapes")

    def __init__(self) -> None:
        self.shapes: dict[tuple[str, ...], int] = {}
        self.shape_of = array("i")  # 4 bytes a value, not a list's 8
        self.others: list[Any] = []
        self.children: dict[str, Shredder] = {}

    def add(self, value: Any) -> None:
        if isinstance(value, dict) and value:
            keys = tuple(value)
            shape = self.shapes.get(keys)
            if shape is None:
                shape = self.shapes[keys] = len(self.shapes)
            self.shape_of.append(shape)
            children = self.children
            for key, child in value.items():
                kid = children.get(key)
                if kid is None:
                    kid = children[key] = Shredder()
                if type(child) is dict and child:
                    kid.add(child)
                else:  # most values: no call
                    kid.shape_of.append(-1)
                    kid.others.append(child)
        else:
            self.shape_of.append(-1)
            self.others.append(value)

    def to_json(self, drop: tuple[str, ...] = ()) -> dict[str, Any]:
        """The columns; `drop`: keys left out of the top level's dicts."""
        if not self.shapes:
            return _leaf(self.others)
        shapes: dict[tuple[str, ...], int] = {}
        renumber = []
        for keys in self.shapes:
            kept = tuple(k for k in keys if k not in drop)
            renumber.append(shapes.setdefault(kept, len(shapes)))
        out: dict[str, Any] = {
            "s": [list(keys) for keys in shapes],
            "x": [renumber[s] if s >= 0 else -1 for s in self.shape_of],
            "d": {k: kid.to_json() for k, kid in self.children.items() if k not in drop},
        }
        if self.others:
            out["o"] = _leaf(self.others)
        return out


def columns(rows: list[list[Any]]) -> list[dict[str, Any]]:
    """Rows (lists of one length) as leaf columns."""
    if not rows:
        return []
    return [_leaf([row[i] for row in rows]) for i in range(len(rows[0]))]


def pack(payload: dict[str, Any]) -> str:
    """A JSON-ready dict, deflated (zlib's format, which the page's DecompressionStream
    "deflate" reads), in base64."""
    text = json.dumps(payload, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return base64.b64encode(zlib.compress(text.encode("ascii"), LEVEL)).decode("ascii")


# ---- the way back, as report.js goes it: for tests and bench/report.py ----


def _untag(value: Any) -> Any:
    if isinstance(value, list):
        return [_untag(v) for v in value]
    if not isinstance(value, dict):
        return value
    if list(value) == [TAG]:
        kind, text = value[TAG]
        return int(text) if kind == "i" else float(text)
    return {(k[1:] if k.startswith(TAG) else k): _untag(v) for k, v in value.items()}


def _unleaf(node: dict[str, Any]) -> list[Any]:
    out, at = [], 0
    if "i" in node or "u" in node:
        for step in node.get("i") or node["u"]:
            at += step
            out.append(at if "i" in node else at / 1e6)
        return out
    return [_untag(v) for v in node["v"]]


def unshred(node: dict[str, Any]) -> list[Any]:
    if "s" not in node:
        return _unleaf(node)
    kids = {key: iter(unshred(child)) for key, child in node["d"].items()}
    others = iter(_unleaf(node["o"])) if "o" in node else iter(())
    return [
        next(others) if shape < 0 else {key: next(kids[key]) for key in node["s"][shape]}
        for shape in node["x"]
    ]


def unpack(block: str) -> dict[str, Any]:
    """The frames' block back to {rows, records, details}."""
    frames = json.loads(zlib.decompress(base64.b64decode(block)))
    columns = [_unleaf(column) for column in frames["rows"]]
    rows = [list(row) for row in zip(*columns, strict=True)]
    return {"rows": rows, "records": unshred(frames["records"]), "details": frames["details"]}
