"""When a message body is text: the one rule both AMQP versions use.

A textual content-type (text/*, JSON, XML, ...) is text in its charset (UTF-8 unless given);
without a content-type, valid UTF-8 free of control characters is text; anything else, and any
encoded (compressed) body, stays binary and is shown as hex.
"""

from __future__ import annotations

import re
from typing import Any, Final

#: content types shown as text besides text/*, *+json and *+xml
TEXT_TYPES: Final = frozenset(
    (
        "application/json",
        "application/xml",
        "application/javascript",
        "application/x-www-form-urlencoded",
        "application/yaml",
        "application/x-yaml",
    )
)
#: control characters that make an untyped body binary though it is valid UTF-8
_CONTROL: Final = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


#: what a content-type says of a body, read once per content-type (a connection uses a few):
#: (whether the body may be text, its charset, whether the type names no media type)
_TYPES: Final[dict[str, tuple[bool, str, bool]]] = {}
TYPES_KEPT: Final = 256


def _content_type(content_type: str) -> tuple[bool, str, bool]:
    known = _TYPES.get(content_type)
    if known is not None:
        return known
    params = content_type.lower().split(";")
    media = params[0].strip()
    if media and not (
        media.startswith("text/") or media in TEXT_TYPES or media.endswith(("+json", "+xml"))
    ):
        said = (False, "", False)
    else:
        charset = "utf-8"
        for param in params[1:]:
            key, _, value = param.strip().partition("=")
            if key == "charset" and value:
                charset = value.strip('"')
        said = (True, charset, not media)
    if len(_TYPES) >= TYPES_KEPT:
        _TYPES.clear()
    _TYPES[content_type] = said
    return said


def as_text(raw: bytes | memoryview, content_type: Any, content_encoding: Any) -> str | None:
    """The body as text, when it is text by the rule above; None when it is binary."""
    if type(content_encoding) is str and content_encoding.lower() not in ("", "identity"):
        return None
    if type(content_type) is str:
        textual, charset, untyped = _content_type(content_type)
        if not textual:
            return None
    else:
        charset, untyped = "utf-8", True
    try:
        text = str(raw, charset)
    except (UnicodeDecodeError, LookupError):
        return None
    if untyped and _CONTROL.search(text):
        return None
    return text
