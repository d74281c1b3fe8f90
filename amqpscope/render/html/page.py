"""The report's page: the data from `model.py` and the page's own template, style and script
(package data beside this module), with BokehJS inlined from the installed Bokeh: one file that
opens from disk and fetches nothing.

Deterministic: the same data gives the same bytes (no time, no random ids; BokehJS's bytes are
its installed version's). The Content-Security-Policy allows no fetch of any kind and only the
page's own scripts, by hash; the data block is JSON (`application/json`, never run), with `<`,
`>` and `&` written as escapes so that no captured string can end the block.
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

#: what inlined script text must not hold raw: it would end the script element early
_SCRIPT_END: Final = re.compile(r"</(script)|<!--", re.IGNORECASE)
_PLACEHOLDER: Final = re.compile(r"@@([A-Z]+)@@")


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


def render_page(data: dict[str, Any]) -> bytes:
    """The report as one HTML document, UTF-8."""
    bokeh = _inline_script(bokeh_js())
    report = _inline_script(_package_text("report.js"))
    csp = "; ".join(
        [
            "default-src 'none'",
            f"script-src {_sha256(bokeh)} {_sha256(report)}",
            # BokehJS styles its widgets with style elements it adds at run time
            "style-src 'unsafe-inline'",
            "img-src data: blob:",
            "font-src 'none'",
            "connect-src 'none'",
            "form-action 'none'",
            "base-uri 'none'",
        ]
    )
    parts = {
        "CSP": csp,
        "VERSION": __version__,
        "CSS": _package_text("report.css"),
        "DATA": data_json(data),
        "BOKEH": bokeh,
        "REPORT": report,
    }
    page = _PLACEHOLDER.sub(lambda m: parts[m.group(1)], _package_text("template.html"))
    return page.encode("utf-8")
