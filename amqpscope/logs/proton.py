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
from typing import Final

from amqpscope.logs.lines import ACCEPTED, EMPTY, EOS, FRAME, HEADER, RECEIVED, Logged, timestamp
from amqpscope.logs.proton_values import LogSyntaxError, Reader, unquote

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


def looks_like(line: str) -> bool:
    """Cheap test used by detection: a `[...]:` connection and an arrow with a frame or header."""
    return (
        ("-> " in line or "<- " in line)
        and _LINE.search(line) is not None
        and ("@" in line or "FRAME" in line or line.rstrip().endswith(("AMQP", "SASL", "EOS")))
    )


def parse(line: str) -> Logged | None:
    """The frame `line` shows, None when it shows none; LogSyntaxError when it looks like a
    frame and does not parse."""
    if "->" not in line and "<-" not in line:
        if "] Accepted" in line:
            accepted = _ACCEPTED.search(line)
            if accepted is not None:
                return Logged(accepted.group("conn"), RECEIVED, ACCEPTED)
        return None
    m = _LINE.search(line)
    if m is None:
        return None
    rest = m.group("rest").rstrip("\r\n")
    if rest.endswith(")") and ":" in rest:
        suffix = _SOURCE_SUFFIX.search(rest)
        if suffix is not None:
            rest = rest[: suffix.start()]
    conn, direction = m.group("conn"), m.group("dir")
    channel = int(m.group("ch")) if m.group("ch") else None
    ts = timestamp(line[: m.start()]) if m.start() > 0 else 0.0
    body = rest.strip()
    if body in _HEADERS:
        return Logged(conn, direction, HEADER, protocol=_HEADERS[body], ts=ts)
    if body == "EOS":
        return Logged(conn, direction, EOS, ts=ts)
    if body == "(EMPTY FRAME)":
        return Logged(conn, direction, EMPTY, channel=channel or 0, ts=ts)
    if not body.startswith("@"):
        if m.group("layer") is None and not body.startswith(("[", "{")):
            return None  # an arrow in some other text
        raise LogSyntaxError(m.start("rest"), "a frame body starts with '@'")
    reader = Reader(rest, 16 if m.group("layer") else 10)  # no `AMQP:FRAME:`: the old form
    value, pos = reader.read(0)
    tail = rest[pos:]
    payload: bytes | None = None
    size = 0
    if tail.strip():
        if tail.strip() == "(EMPTY FRAME)":
            tail = ""
        else:
            pm = _PAYLOAD.match(tail)
            if pm is None:
                raise LogSyntaxError(m.start("rest") + pos, "text after the frame body")
            size = int(pm.group(1))
            text = pm.group(2).rstrip()
            cut = text.endswith(_TRUNCATED)
            if cut:
                text = text[: -len(_TRUNCATED)]
            if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
                text = text[1:-1]  # the old form quotes the payload
            raw = unquote(text)
            payload = raw if not cut and len(raw) == size else None
    return Logged(
        conn,
        direction,
        FRAME,
        channel=channel if channel is not None else 0,
        value=value,
        payload=payload,
        payload_size=size,
        ts=ts,
    )
