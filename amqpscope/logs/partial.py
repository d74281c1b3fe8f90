"""What a frame's text cut short still says: the text closed after its last whole field, for
the format's own grammar to read (issue 42: a cut frame is a record of what was read, marked
truncated, as tshark shows a partial dissection).

Every text format amqpscope reads nests its values in brackets (`[...]`, `{...}`, `(...)`)
and separates them with commas; strings are quoted (`"..."`, `'...'`) or, in amqpnetlite's
and go-amqp's text, bare. So a frame cut at any point reads as far as its last comma outside a
string: the text up to that comma, with the brackets still open closed in reverse order, is
the frame with the fields before the cut. The grammar decides whether it is one (a candidate
that does not read is passed over); the later candidates keep more of the text.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

_CLOSERS: Final = {"[": "]", "{": "}", "(": ")"}
#: commas tried from the cut backwards (a cut in a long list of deliveries is still read, and
#: a text no closing reads costs at most this many attempts)
MOST: Final = 24


def closings(text: str) -> Iterator[str]:
    """`text` (a frame's, cut short) closed after each of its last `MOST` commas between the
    frame's fields (outside strings, and outside the values the fields nest: a list or a
    described value the cut went into is left out whole, not shown shorter than it was), the
    latest first; the first is the whole text closed when it ends with a whole field (a
    bracket or quote closed: a number or a bare word that ends it may be cut), the last the
    text closed right after the bracket the frame's fields open with (no field); then the same
    one level in, when a bracket is open there (a frame's fields inside a wrapper's, go-amqp's
    `Frame{Type: AMQP, Channel: 0, Body: Attach{...`)."""
    stack: list[str] = []
    opened: list[int] = []  # where each bracket on the stack opened
    commas: list[tuple[int, int]] = []  # (where, the bracket the fields are in)
    quote = ""
    escaped = False
    for at, char in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
            continue
        if char == '"' or char == "'":
            quote = char
        elif char in _CLOSERS:
            stack.append(_CLOSERS[char])
            opened.append(at)
        elif char == "]" or char == "}" or char == ")":
            if stack and stack[-1] == char:
                stack.pop()
                opened.pop()
        elif char == "," and 0 < len(stack) <= 2:
            commas.append((at, opened[-1]))
    if not stack:
        return
    body, closer = opened[0], stack[0]
    end = text.rstrip()
    if not quote and len(stack) == 1 and end.endswith(("]", "}", ")", '"', "'")):
        yield end + closer
    fields = [at for at, bracket in commas if bracket == body]
    for at in reversed(fields[-MOST:]):
        yield text[:at] + closer
    yield text[: body + 1] + closer  # cut in its first field: the frame's name, no field
    if len(stack) < 2:
        return
    # none of those read: the frame's fields may be one level in, closed as the outer ones were
    inner, closers = opened[1], stack[1] + closer
    if not quote and len(stack) == 2 and end.endswith(("]", "}", ")", '"', "'")):
        yield end + closers
    fields = [at for at, bracket in commas if bracket == inner]
    for at in reversed(fields[-MOST:]):
        yield text[:at] + closers
    yield text[: inner + 1] + closers
