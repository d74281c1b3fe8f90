"""What a grammar makes of one log line: a `Logged` frame, still as the logger printed it.

Each grammar module (`proton.py`, ...) turns a line into a `Logged` (or None for a line that
is no frame); `reader.py` turns `Logged`s into frame records. The split keeps the grammars
about text only: no spec tables, no connection state.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from typing import Any, Final

#: what a logged line is
HEADER: Final = "header"  # a protocol header (`-> AMQP`, `<- SASL`); `body` is its protocol
FRAME: Final = "frame"  # a frame; `value` is its parsed body
EMPTY: Final = "empty"  # an empty frame (a heartbeat)
EOS: Final = "eos"  # the transport's end of stream (no frame)
ACCEPTED: Final = "accepted"  # the logger accepted this connection: it is its server (no frame)

SENT: Final = "->"
RECEIVED: Final = "<-"


class Logged:
    """One frame (or pseudo frame) a line shows, in the logger's terms."""

    __slots__ = (
        "channel",
        "conn",
        "direction",
        "kind",
        "lossy",
        "made",
        "payload",
        "payload_size",
        "protocol",
        "ts",
        "value",
        "version",
    )

    def __init__(
        self,
        conn: str,
        direction: str,
        kind: str,
        channel: int | None = None,
        value: Any = None,
        protocol: str = "",
        payload: bytes | None = None,
        payload_size: int = 0,
        ts: float = 0.0,
        version: str = "1.0",
    ) -> None:
        self.conn = conn  # the logger's name for the connection (`0x55d2...`, `C3`)
        self.direction = direction  # SENT or RECEIVED, from the logger's side
        self.kind = kind
        self.channel = channel
        self.value = value  # the parsed body (a grammar's own tree)
        self.protocol = protocol  # HEADER: AMQP, SASL, TLS
        self.payload = payload  # a transfer's payload bytes, when the log shows them whole
        self.payload_size = payload_size  # the payload's size as the log says it
        self.ts = ts  # epoch seconds from the line's timestamp, 0.0 when it has none
        self.version = version
        self.lossy: list[str] = []  # fields the logger printed without what they need to be read
        #: the frame's fields already made (a grammar's cache of lines like this one); `value`
        #: is None then, and `made.tree()` reads it when it is wanted after all
        self.made: Made | None = None


class Made:
    """A logged performative's fields in the decoder's shapes (`direct.performative`), made
    by a grammar that has read a line like this one before; `tree()` reads the value itself."""

    __slots__ = ("fields", "name", "sasl", "tree")

    def __init__(
        self, name: str, sasl: bool, fields: dict[str, Any], tree: Callable[[], Any]
    ) -> None:
        self.name = name
        self.sasl = sasl
        self.fields = fields
        self.tree = tree


_CTIME: Final = re.compile(
    r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +(\d{1,2}) "
    r"(\d\d):(\d\d):(\d\d) (\d{4})",
    re.ASCII,
)
_MONTHS: Final = {
    month: number
    for number, month in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1
    )
}
_TIMESTAMP: Final = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?"
    r"\s*(Z|[+-]\d\d:?\d\d)?",
    re.ASCII,
)


#: the epoch second each minute of a timestamp starts at (-1.0: a date that does not exist)
_MINUTES: Final[dict[str, float]] = {}


def timestamp(prefix: str) -> float:
    """Epoch seconds of the first date-and-time in `prefix` (ISO 8601, the
    `2024-01-31 12:00:00.123456 +0000` of routers and Python logging, or C's ctime
    `Thu May 30 10:11:12 2019`), UTC unless it says a zone; 0.0 when there is none."""
    m = _TIMESTAMP.search(prefix)
    if m is None:
        c = _CTIME.search(prefix)  # C's ctime(), local time without a zone: read as UTC
        if c is None:
            return 0.0
        try:
            when = dt.datetime(
                int(c.group(6)),
                _MONTHS[c.group(1)],
                int(c.group(2)),
                int(c.group(3)),
                int(c.group(4)),
                int(c.group(5)),
                tzinfo=dt.UTC,
            )
        except ValueError:
            return 0.0
        return when.timestamp()
    start = m.start()
    key = prefix[start : start + 16]  # `2024-01-31 12:00`: the date and the minute
    base = _MINUTES.get(key)
    if base is None:  # a log's lines share their minutes: each one's start is made once
        year, month, day, hour, minute = (int(part) for part in m.group(1, 2, 3, 4, 5))
        try:
            base = dt.datetime(year, month, day, hour, minute, tzinfo=dt.UTC).timestamp()
        except ValueError:
            base = -1.0  # no such date: no time
        if len(_MINUTES) >= 100_000:
            _MINUTES.clear()
        _MINUTES[key] = base
    second = int(m.group(6))
    if base == -1.0 or second > 59:
        return 0.0
    fraction = m.group(7)
    zone = m.group(8)
    offset = 0
    if zone and zone != "Z":
        digits = zone.replace(":", "")
        offset = (int(digits[1:3]) * 60 + int(digits[3:5])) * (1 if digits[0] == "+" else -1)
    seconds = base + second - offset * 60
    if fraction:
        seconds += int(fraction) / 10 ** len(fraction)
    return seconds
