"""Qpid Proton's frame trace (`PN_TRACE_FRM=1`), old and new, and the same text in router logs.

Written from qpid-proton's own code (read with the `search` tool):

- new (0.34 on): `c/src/core/transport.c` logs each frame through `pn_logger` as
  `[0x55d2...]: AMQP:FRAME:0 -> @open(16) [...]` (`SASL:FRAME:` for the SASL layer,
  `IO:FRAME:` for `-> EOS`), the performative dumped by `c/src/core/value_dump.c`; a
  transfer's payload follows as ` (34) ` and its bytes quoted by `pn_quote_data`
  (`c/src/core/util.c`), without quotes; headers as `SASL:FRAME:  -> SASL`, `AMQP:FRAME:  <- AMQP`.
- old (before 0.34): `pn_do_trace` in `c/src/core/dispatcher.c` / `transport.c` writes
  `[0x55d2...]:0 -> @open(16) [...]` with `pn_inspect` (`c/src/core/codec.c`: decimal
  integers, `@PN_SYMBOL[...]` arrays), the payload as ` (34) "..."` with `... (truncated)` past
  1024 characters, `(EMPTY FRAME)` for a heartbeat, `[0x...]:  -> AMQP` for headers.
- Qpid Dispatch / Skupper routers pass Proton's text to their own log (`src/log.c`,
  `write_log`): a time (`ctime_r`'s `Thu May 30 10:11:12 2019`, or `2024-01-31 12:00:00.123456
  +0000` in later versions), `PROTOCOL (trace) `, the connection as `[C3]`, the frame text, and
  optionally ` (server.c:123)`, the source line that logged it. Many connections interleave;
  `[C3] Accepted connection to 0.0.0.0:5672 from ...` (SERVER, info) says the router is the
  server of C3.

Anything before the `[conn]:` is prefix (a timestamp there becomes `ts`); a line without
`[...]:` and an arrow is no frame. The value syntax is `proton_values.py`'s.
"""

from __future__ import annotations

import re
from typing import Any, Final

from amqpscope.codec.amqp10.frames import BODIES, TYPE_SASL
from amqpscope.logs import direct
from amqpscope.logs.lines import (
    ACCEPTED,
    EMPTY,
    EOS,
    FRAME,
    HEADER,
    RECEIVED,
    Logged,
    Made,
    timestamp,
)
from amqpscope.logs.proton_values import LogSyntaxError, Reader, unquote
from amqpscope.logs.shapes import PRINTED, PROTON, QUOTED, Cache, Entry
from amqpscope.logs.values import Described, Fields

NAME: Final = "proton"

_LINE: Final = re.compile(
    r"\[(?P<conn>[^\]\s]+)\]:\s*(?:(?P<layer>AMQP|SASL|IO):)?(?:FRAME:)?\s*(?P<ch>\d+)?\s*"
    r"(?P<dir>->|<-) ?(?P<rest>.*)$",
    re.ASCII,
)
#: a router's note that it accepted connection `[C3]` (it is that connection's server)
_ACCEPTED: Final = re.compile(r"\[(?P<conn>C\d+)\] Accepted (?:connection|incoming)", re.ASCII)
#: the source line a router may add after the text: ` (server.c:123)`
_SOURCE_SUFFIX: Final = re.compile(r"\s\([\w./-]+\.\w+:\d+\)\s*$", re.ASCII)
_PAYLOAD: Final = re.compile(r"\s*\((\d+)\) ?(.*)$", re.DOTALL)
_TRUNCATED: Final = "... (truncated)"
#: pseudo frames: headers and the end of stream
_HEADERS: Final = {"AMQP": "AMQP", "SASL": "SASL", "AMQPS": "TLS", "TLS": "TLS"}
_SASL_CODES: Final = frozenset(BODIES[TYPE_SASL])
_SASL_NAMES: Final = frozenset(BODIES[TYPE_SASL].values())


def looks_like(line: str) -> bool:
    """Cheap test used by detection: a `[...]:` connection and an arrow with a frame or header."""
    return (
        ("-> " in line or "<- " in line)
        and _LINE.search(line) is not None
        and ("@" in line or "FRAME" in line or line.rstrip().endswith(("AMQP", "SASL", "EOS")))
    )


#: what only a Proton frame line has after its prefix: a layer's `AMQP:FRAME:`, or an arrow and a
#: performative dumped with its code (`-> @open(16)`) or an empty frame
_FRAME_MARK: Final = re.compile(
    r"(?:AMQP|SASL|IO):FRAME:|(?:->|<-) ?(?:@[a-z-]+\(\d+\)|\(EMPTY FRAME\))", re.ASCII
)


def damaged(line: str) -> str | None:
    """Why a line `parse` reads as no frame is a frame line all the same, its prefix damaged
    (`[0x5581...:0 -> @open(16)` with its `]` lost, or a line cut into mid-prefix); None when
    it is not one. Asked of the lines `parse` found no frame in."""
    if ("->" not in line and "<-" not in line) or _FRAME_MARK.search(line) is None:
        return None
    return "a Proton frame line without its `[connection]:` before the arrow (damaged prefix)"


def parse(line: str) -> Logged | None:
    """The frame `line` shows, None when it shows none; LogSyntaxError when it looks like a
    frame and does not parse."""
    if "->" not in line and "<-" not in line:
        if "] Accepted" in line:
            accepted = _ACCEPTED.search(line)
            if accepted is not None:
                return Logged(accepted.group("conn"), RECEIVED, ACCEPTED)
        return None
    split = _framed(line)
    if split is None:
        return None
    start, conn, layer, digits, direction, at = split
    rest = line[at:].rstrip("\r\n")
    if rest.endswith(")") and ":" in rest:
        suffix = _SOURCE_SUFFIX.search(rest)
        if suffix is not None:
            rest = rest[: suffix.start()]
    channel = int(digits) if digits else None
    ts = timestamp(line[:start]) if start > 0 else 0.0
    if not rest.startswith("@"):  # a frame's body mostly follows the arrow at once
        body = rest.strip()
        if body in _HEADERS:
            return Logged(conn, direction, HEADER, protocol=_HEADERS[body], ts=ts)
        if body == "EOS":
            return Logged(conn, direction, EOS, ts=ts)
        if body == "(EMPTY FRAME)":
            return Logged(conn, direction, EMPTY, channel=channel or 0, ts=ts)
        if not body.startswith("@"):
            if layer is None and not body.startswith(("[", "{")):
                return None  # an arrow in some other text
            raise LogSyntaxError(at, "a frame body starts with '@'")
    old = layer is None  # no `AMQP:FRAME:`: the old form
    channel = channel if channel is not None else 0
    made = _made(rest, old)
    if made is not None:
        payload, size = _payload(made[1], at + made[2])
        logged = Logged(
            conn, direction, FRAME, channel=channel, payload=payload, payload_size=size, ts=ts
        )
        logged.made = made[0]
        return logged
    value, pos = Reader(rest, 10 if old else 16).read(0)
    payload, size = _payload(rest[pos:], at + pos)
    _learn(rest, old, value, pos)
    return Logged(
        conn,
        direction,
        FRAME,
        channel=channel,
        value=value,
        payload=payload,
        payload_size=size,
        ts=ts,
    )


#: `\s` of an ASCII pattern
_SPACE: Final = " \t\n\r\f\v"
_LAYERS: Final = ("AMQP:", "SASL:", "IO:")


def _framed(line: str) -> tuple[int, str, str | None, str | None, str, int] | None:
    """What `_LINE.search(line)` finds: where its match starts, the connection, the layer
    (None: the old form), the channel's digits (None: not shown), the arrow, and where the
    rest starts; None when it finds nothing. Read by hand at the line's first `[` (each of
    the pattern's parts reads one way only there: the regex's search and groups were a good
    part of a line's time); a line this does not read plainly goes to the regex
    (`tests/test_logs_proton.py` holds the two equal)."""
    start = line.find("[")
    if start < 0:
        return None
    size = len(line)
    pos = start + 1
    while pos < size and line[pos] != "]" and line[pos] not in _SPACE:
        pos += 1
    if pos == start + 1 or line.find("]:", pos, pos + 2) != pos:
        return _searched(line)
    conn = line[start + 1 : pos]
    pos += 2
    while pos < size and line[pos] in _SPACE:
        pos += 1
    layer: str | None = None
    for word in _LAYERS:
        if line.find(word, pos, pos + len(word)) == pos:
            layer = word[:-1]
            pos += len(word)
            break
    if line.find("FRAME:", pos, pos + 6) == pos:
        pos += 6
    while pos < size and line[pos] in _SPACE:
        pos += 1
    first = pos
    while pos < size and "0" <= line[pos] <= "9":
        pos += 1
    digits = line[first:pos] if pos > first else None
    while pos < size and line[pos] in _SPACE:
        pos += 1
    direction = line[pos : pos + 2]
    if direction != "->" and direction != "<-":
        return _searched(line)
    pos += 2
    if pos < size and line[pos] == " ":
        pos += 1
    newline = line.find("\n", pos)
    if newline >= 0 and newline != size - 1:
        return _searched(line)
    return start, conn, layer, digits, direction, pos


def _searched(line: str) -> tuple[int, str, str | None, str | None, str, int] | None:
    """`_framed` by the regex itself."""
    m = _LINE.search(line)
    if m is None:
        return None
    conn, layer, digits, direction, _ = m.groups()
    return m.start(), str(conn), layer, digits, str(direction), m.start("rest")


def _payload(tail: str, at: int) -> tuple[bytes | None, int]:
    """A transfer's payload after its performative (`at`: where `tail` is in the line): its
    bytes when the line shows them whole (else None) and the size the line says."""
    if not tail or tail.isspace():
        return None, 0
    if len(tail) < 64 and tail.strip() == "(EMPTY FRAME)":
        return None, 0
    close = tail.find(")", 2) if tail.startswith(" (") else -1
    if close > 2 and tail[2:close].isascii() and tail[2:close].isdigit():
        size = int(tail[2:close])  # the usual ` (34) ...`, read without `_PAYLOAD`
        text = tail[close + 2 :] if tail.startswith(" ", close + 1) else tail[close + 1 :]
    else:
        pm = _PAYLOAD.match(tail)
        if pm is None:
            raise LogSyntaxError(at, "text after the frame body")
        size = int(pm.group(1))
        text = pm.group(2)
    text = text.rstrip()
    cut = text.endswith(_TRUNCATED)
    if cut:
        text = text[: -len(_TRUNCATED)]
    if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
        text = text[1:-1]  # the old form quotes the payload
    raw = unquote(text)
    return (raw if not cut and len(raw) == size else None), size


# -- lines like lines read before (`shapes.py`) ------------------------------------------------
#: the top-level fields whose values a trace's lines of one link tell apart (a uint each, or a
#: delivery tag): a line is looked up with their values taken out
_VALUE: Final = r'0x[0-9a-fA-F]+|\d+|b"[^"\\]*"'
_SLOT: Final = re.compile(
    r"(?<=[\[ ])(handle|delivery-id|delivery-tag|first|last|next-incoming-id|incoming-window|"
    r"next-outgoing-id|outgoing-window|delivery-count|link-credit|available|message-format)"
    rf"=({_VALUE})(?=[,\]])",
    re.ASCII,
)
#: where a transfer's performative ends and its payload begins
_PAYLOAD_START: Final = "] ("
_UINT_MAX: Final = 0xFFFFFFFF


def _read_new(text: str) -> tuple[Any, list[str]]:
    """A cached line's value after all (`Made.tree`), in the new form (hex numbers)."""
    return Reader(text, 16).read(0)[0], []


def _read_old(text: str) -> tuple[Any, list[str]]:
    return Reader(text, 10).read(0)[0], []


#: Lines of one link differ in a few numbers (handle, delivery id and tag, window and credit,
#: first and last): a performative's text with those values taken out is the key to the
#: fields `direct.performative` made of the first line like it, and a line that finds its key
#: gets them with its own values put in, without being read. One cache per form (the old
#: form's numbers are decimal: the same text reads otherwise).
#:
#: A key is kept only when that is safe: each value taken out is a top-level field of the
#: performative (checked by reading the line again with other values in their places and
#: seeing those fields, and only those, change to them), a uint or a binary read as it is (no
#: choice: `direct.plain_type`), and the line reads cleanly by the direct path.
_CACHE: Final = Cache()
_OLD_CACHE: Final = Cache()


def _split(rest: str) -> tuple[str, str]:
    """A frame's text: its performative, and its payload's text (a transfer's)."""
    cut = rest.find(_PAYLOAD_START)
    return (rest, "") if cut < 0 else (rest[: cut + 1], rest[cut + 1 :])


def _key(pieces: list[str]) -> str:
    """A performative's text split by `_SLOT` (text, name, value, text, ...) as a key: the
    text with a NUL where each value was, then the slots' names."""
    return "\x00".join(pieces[0::3]) + "\x01" + " ".join(pieces[1::3])


def _made(rest: str, old: bool) -> tuple[Made, str, int] | None:
    """The fields of `rest` if a line like it was read before: (them, the payload's text,
    where it starts), None when the line must be read."""
    head, tail = _split(rest)
    cache = _OLD_CACHE if old else _CACHE
    hit = cache.recalled(head)  # patterns hold no NUL
    if hit is None:
        if "\x00" in head:
            return None
        pieces = _SLOT.split(head)
        if len(pieces) == 1:
            return None
        entry = cache.found(_key(pieces))
        if entry is None:
            return None
        fields = entry.fill(pieces[2::3])
    else:
        entry = hit[0]
        fields = entry.fill(hit[1])
    if fields is None:
        return None
    made = Made(entry.name, entry.sasl, fields, rest, _read_old if old else _read_new)
    return made, tail, len(head)


def _learn(rest: str, old: bool, value: Any, pos: int) -> None:
    """Keep what `rest` (read as `value`, which ends at `pos`) makes, when that is safe."""
    head, tail = _split(rest)
    if len(head) != pos and (tail or rest[pos:].strip()):
        return  # the payload's start is not where the performative ends
    pieces = _SLOT.split(head)
    if len(pieces) == 1 or "\x00" in head:
        return
    key = _key(pieces)
    cache = _OLD_CACHE if old else _CACHE
    if key not in cache.entries:
        cache.keep(key, _entry(pieces, old, value))


def _entry(pieces: list[str], old: bool, value: Any) -> Entry | None:
    """The cache entry of a performative's text (split by `_SLOT`) read as `value`, or None
    when its values cannot safely be put back (see `_CACHE`)."""
    if not isinstance(value, Described) or not isinstance(value.value, Fields):
        return None
    sasl = value.descriptor in _SASL_CODES or value.name in _SASL_NAMES
    made = direct.performative(value, sasl)
    if made is None or made[0] != value.name:
        return None
    name, fields = made
    slots = pieces[1::3]
    if len(set(slots)) != len(slots):
        return None
    # read again with other values in their places: exactly those fields must change to them
    others: list[Any] = []
    hows: list[int] = []
    text = [pieces[0]]
    for i, slot in enumerate(slots):
        printed = pieces[3 * i + 2]
        binary = printed[0] == "b"
        if direct.plain_type(name, slot) != ("binary" if binary else "uint"):
            return None
        if binary:
            other: Any = unquote(f"~{printed[2:-1]}~").hex()
            text.append(f'{slot}=b"~{printed[2:-1]}~"')
        else:
            other = (int(printed, 0 if printed.startswith("0x") else 10) + 1) & _UINT_MAX
            text.append(f"{slot}=0x{other:x}")
        others.append(other)
        hows.append(QUOTED if binary else PRINTED)
        text.append(pieces[3 * i + 3])
    try:
        again = Reader("".join(text), 10 if old else 16).read(0)[0]
    except LogSyntaxError:
        return None
    remade = direct.performative(again, sasl) if isinstance(again, Described) else None
    if remade is None or list(remade[1]) != list(fields):
        return None
    for slot, other in zip(slots, others, strict=True):
        if remade[1].get(slot) != other or type(fields.get(slot)) is not type(other):
            return None
    for key, kept in fields.items():
        if key not in slots and remade[1].get(key) != kept:
            return None
    # the shape itself (`Cache.recalled` tries it first)
    pattern, literals = shape(pieces[0::3], slots)
    largest = [_UINT_MAX] * len(slots)
    return Entry(name, sasl, fields, slots, hows, largest, [], pattern, literals, PROTON)


def shape(texts: list[str], slots: list[str]) -> tuple[re.Pattern[str], list[str]]:
    """A shape's text: `texts[0]`, then each slot's `name=value` and the text after it, as a
    pattern (each value a group) and as the text between the values (`Entry.literals`)."""
    pattern = [re.escape(texts[0])]
    literals = [texts[0]]
    for slot, between in zip(slots, texts[1:], strict=True):
        pattern.append(f"{re.escape(slot)}=({_VALUE}){re.escape(between)}")
        literals[-1] += f"{slot}="
        literals.append(between)
    return re.compile("".join(pattern), re.ASCII), literals
