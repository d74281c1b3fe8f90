"""`as_text`: which bodies are text, by their content-type, read once per content-type."""

from __future__ import annotations

import pytest

from amqpscope.codec import body
from amqpscope.codec.body import as_text

CASES = [
    # (body, content-type, content-encoding, text or None)
    (b"hello", "text/plain", None, "hello"),
    (b"hello", "TEXT/Plain", None, "hello"),
    (b"{}", "application/json", None, "{}"),
    (b"{}", "application/vnd.x+json", None, "{}"),
    (b"<a/>", "application/atom+xml; charset=utf-8", None, "<a/>"),
    (b"hello", "application/octet-stream", None, None),
    (b"hello", "image/png", None, None),
    ("é".encode("latin-1"), "text/plain; charset=latin-1", None, "é"),
    ("é".encode("latin-1"), 'text/plain; charset="latin-1"', None, "é"),
    ("é".encode("latin-1"), "text/plain", None, None),  # not UTF-8
    (b"hello", "text/plain; charset=no-such-charset", None, None),
    (b"hello", 'text/plain; charset=""', None, None),
    (b"hello", "text/plain", "gzip", None),
    (b"hello", "text/plain", "identity", "hello"),
    (b"hello", "text/plain", "", "hello"),
    (b"hello", None, None, "hello"),
    (b"hello", "", None, "hello"),
    (b"; charset", "; charset=latin-1", None, "; charset"),  # no media type: untyped
    (b"a\x01b", None, None, None),  # untyped, a control character: binary
    (b"a\x01b", "", None, None),
    (b"a\x01b", "; charset=utf-8", None, None),
    (b"a\x01b", "text/plain", None, "a\x01b"),  # typed text keeps its controls (shown safe)
    (b"a\tb\r\n", None, None, "a\tb\r\n"),
    (b"\xff", None, None, None),
    (b"hello", 5, None, "hello"),  # a content-type that is no string: untyped
]


@pytest.mark.parametrize(("raw", "content_type", "encoding", "text"), CASES)
def test_a_body_is_text_by_its_content_type(
    raw: bytes, content_type: object, encoding: object, text: str | None
) -> None:
    body._TYPES.clear()
    assert as_text(raw, content_type, encoding) == text
    assert as_text(memoryview(raw), content_type, encoding) == text  # read again: kept
    if isinstance(content_type, str) and encoding != "gzip":
        assert content_type in body._TYPES


def test_the_content_types_kept_are_forgotten_whole_when_full() -> None:
    body._TYPES.clear()
    for n in range(body.TYPES_KEPT + 3):
        assert as_text(b"x", f"text/x-{n}", None) == "x"
    assert 0 < len(body._TYPES) <= body.TYPES_KEPT
    assert as_text(b"x", "image/x-1", None) is None
