"""The report's page: the data from `model.py` and the page's own template, style and script
(package data beside this module), with BokehJS inlined from the installed Bokeh: one file that
opens from disk and fetches nothing.

Deterministic: the same data gives the same bytes (no time, no random ids; BokehJS's bytes are
its installed version's). The Content-Security-Policy allows no fetch of any kind and only the
page's own scripts, by hash; the data block is JSON (`application/json`, never run), with `<`,
`>` and `&` written as escapes so that no captured string can end the block. The frames' rows,
records and detail trees go packed (pack.py) in a block of base64 of their own, which the page
inflates with the browser's DecompressionStream.

Under 5 MB: when the packed frames would pass `PAGE_BYTES` with the rest of the page, the
records lose their messages, then their fields (the page's filter then says what it cannot
see), then the last rows go; the facts say which.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import re
from importlib import resources
from typing import Any, Final

from amqpscope import __version__
from amqpscope.render.html.pack import Shredder, columns, pack, unshred

#: what inlined script text must not hold raw: it would end the script element early
_SCRIPT_END: Final = re.compile(r"</(script)|<!--", re.IGNORECASE)
_PLACEHOLDER: Final = re.compile(r"@@([A-Z]+)@@")
#: the page's bound, with room to spare under the issue's 5 MB
PAGE_BYTES: Final = 4_900_000
#: what the records keep, best first, when the page must shrink: (record keys dropped, fact)
_RECORD_CUTS: Final = (
    ((), "whole"),
    (("message",), "no messages"),
    (("message", "fields"), "frame keys only"),
)


class ReportError(RuntimeError):
    """The report cannot be made here (the `report` extra, with Bokeh, is not installed)."""


def _package_text(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _inline_script(text: str) -> str:
    return _SCRIPT_END.sub(lambda m: f"<\\/{m.group(1)}" if m.group(1) else "<\\!--", text)


@functools.cache
def bokeh_js() -> str:
    """BokehJS and its plotting API, as the installed Bokeh ships them, set to log only
    warnings and errors."""
    try:
        from bokeh.resources import Resources
    except ImportError as exc:  # the extra is not installed
        raise ReportError("the report needs Bokeh: pip install 'amqpscope[report]'") from exc
    raw = Resources(mode="inline", components=["bokeh", "bokeh-api"]).js_raw
    scripts = [text for text in raw if "BEGIN bokeh" in text[:80]]
    return "\n".join(scripts) + '\nBokeh.set_log_level("warn");\n'


def data_json(data: dict[str, Any]) -> str:
    """The data as JSON safe inside a script element: ASCII only, and no `<`, `>` or `&`."""
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _sha256(script: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() + "'"


def _frames(
    rows: list[Any], records: Shredder, details: dict[str, Any], drop: tuple[str, ...]
) -> str:
    shown = {n: tree for n, tree in details.items() if int(n) <= rows[-1][0]} if rows else {}
    return pack({"rows": columns(rows), "records": records.to_json(drop), "details": shown})


def packed_frames(data: dict[str, Any], budget: int) -> str:
    """The frames' block within `budget` bytes, trimmed as the module says; `data`'s rows,
    records (a `Shredder`, or a list) and details moved into it, its facts told what was left
    out."""
    rows, records, details = data.pop("rows"), data.pop("records"), data.pop("details")
    if not isinstance(records, Shredder):
        records = shredder(records)
    facts = data["facts"]
    for drop, fact in _RECORD_CUTS:
        block = _frames(rows, records, details, drop)
        if len(block) <= budget:
            facts["records"] = fact
            return block
    every = unshred(records.to_json(drop))
    while len(block) > budget and rows:  # the last rows go: what fits is the capture's start
        keep = int(len(rows) * budget / len(block) * 0.95)
        facts["rows-left-out"] += len(rows) - keep
        rows, every = rows[:keep], every[:keep]
        block = _frames(rows, shredder(every), details, ())
    facts["records"] = fact
    return block


def shredder(values: list[Any]) -> Shredder:
    out = Shredder()
    for value in values:
        out.add(value)
    return out


def render_page(data: dict[str, Any]) -> bytes:
    """The report as one HTML document, UTF-8."""
    bokeh = _inline_script(bokeh_js())
    report = _inline_script(_package_text("report.js"))
    filter_js = _inline_script(_package_text("filter.js"))
    csp = "; ".join(
        [
            "default-src 'none'",
            f"script-src {_sha256(bokeh)} {_sha256(filter_js)} {_sha256(report)}",
            # BokehJS styles its widgets with style elements it adds at run time
            "style-src 'unsafe-inline'",
            "img-src data: blob:",
            "font-src 'none'",
            "connect-src 'none'",
            "form-action 'none'",
            "base-uri 'none'",
        ]
    )
    data = dict(data, facts=dict(data["facts"]))  # the caller's stays whole
    parts = {
        "CSP": csp,
        "VERSION": __version__,
        "CSS": _package_text("report.css"),
        "DATA": "",
        "FRAMES": "",
        "BOKEH": bokeh,
        "FILTER": filter_js,
        "REPORT": report,
    }
    template = _package_text("template.html")
    rest = len(_PLACEHOLDER.sub(lambda m: parts[m.group(1)], template).encode("utf-8"))
    rest += len(
        data_json({k: v for k, v in data.items() if k not in ("rows", "records", "details")})
    )
    parts["FRAMES"] = packed_frames(data, PAGE_BYTES - rest - 1_000)  # facts grow a little
    parts["DATA"] = data_json(data)
    page = _PLACEHOLDER.sub(lambda m: parts[m.group(1)], template)
    return page.encode("utf-8")
