"""What a grammar makes of one log line: a `Logged` frame, still as the logger printed it.

Each grammar module (`proton.py`, ...) turns a line into a `Logged` (or None for a line that
is no frame); `reader.py` turns `Logged`s into frame records. The split keeps the grammars
about text only: no spec tables, no connection state.
"""

from __future__ import annotations

import ast
import datetime as dt
import math
import re
import time
import warnings
from collections.abc import Callable
from typing import Any, Final, final

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
        "again",
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
        #: epoch seconds from the line's timestamp, 0.0 when it has none; negative or NaN as
        #: `timestamp` gives them, for the reader's `Clock`
        self.ts = ts
        self.version = version
        self.lossy: list[str] = []  # fields the logger printed without what they need to be read
        #: the frame's fields already made (a grammar's cache of lines like this one); `value`
        #: is None then, and `made.tree()` reads it when it is wanted after all
        self.made: Made | None = None
        #: (who printed it, the frame's text) for a library that prints a frame more than once
        #: from different places (go-amqp at debug level 2): the reader counts it once; None
        #: for the others
        self.again: tuple[str, str] | None = None


#: a grammar's reader of a performative's text: (its tree, the fields it cannot show)
Read = Callable[[str], tuple[Any, list[str]]]


@final
class Made:
    """A logged performative's fields in the decoder's shapes (`direct.performative`), made
    by a grammar that has read a line like this one before (`shapes.py`); `tree()` reads the
    text after all, when the reader wants the value itself."""

    __slots__ = ("fields", "name", "read", "sasl", "text")

    def __init__(
        self, name: str, sasl: bool, fields: dict[str, Any], text: str, read: Read
    ) -> None:
        self.name = name
        self.sasl = sasl
        self.fields = fields
        self.text = text
        self.read = read

    def tree(self) -> Any:
        return self.read(self.text)[0]


def search_at(pattern: re.Pattern[str], line: str, first: str, second: str) -> re.Match[str] | None:
    """`pattern.search(line)` for a pattern each match of which starts with `first` or
    `second`: tried only where one of them stands, in order (a regex search tries every
    column, several times the cost of `str.find`, and a log line is long)."""
    one = line.find(first)
    two = line.find(second)
    while one >= 0 or two >= 0:
        if two < 0 or 0 <= one < two:
            m = pattern.match(line, one)
            if m is not None:
                return m
            one = line.find(first, one + 1)
        else:
            m = pattern.match(line, two)
            if m is not None:
                return m
            two = line.find(second, two + 1)
    return None


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
#: the first date-and-time in a prefix: what `timestamp` finds (`tests/test_logs_lines.py` holds
#: it to a search with this pattern)
_TIMESTAMP: Final = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?"
    r"\s*(Z|[+-]\d\d:?\d\d)?",
    re.ASCII,
)


#: the epoch second each minute of a timestamp starts at (-1.0: a date that does not exist)
_MINUTES: Final[dict[str, float]] = {}
#: `YYYY-MM-DD hh:mm:ss` (19 characters where a `-` is the fifth) -> its epoch second;
#: _NO_TIME: a date or second that does not exist; _NOT_HERE: not such a text
_SECONDS: Final[dict[str, float]] = {}
_NO_TIME: Final = -1.0
_NOT_HERE: Final = -2.0
_FIXED: Final = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d", re.ASCII)
_SPACES: Final = " \t\n\r\f\v"  # `\s` (ASCII)


def timestamp(prefix: str) -> float:
    """Epoch seconds of the first date-and-time in `prefix` (ISO 8601, the
    `2024-01-31 12:00:00.123456 +0000` of routers and Python logging, or C's ctime
    `Thu May 30 10:11:12 2019`), UTC unless it says a zone; 0.0 when there is none. Failing
    those, the forms `_PARTIAL` reads: epoch seconds (`1795324933.572`, Python logging's
    `%(created)f`), and a date without a year (syslog's `Nov 27 06:33:37`) or a time without a
    date (`06:33:37.123`), which only a `Clock` can place: given as negative numbers (see
    `Clock`). A prefix that holds something like a time in no form read here is NaN (the reader
    says so once: its frames carry no times).

    What `_TIMESTAMP.search` finds, without it on every line (a regex search is a good part of
    a line's reading): a match has its first `-` four characters in, so the `-`s are tried in
    order, each one's 19 characters looked up (`_SECONDS`) before they are checked."""
    size = len(prefix)
    dash = prefix.find("-", 4)
    while dash >= 0 and dash + 15 <= size:
        start = dash - 4
        key = prefix[start : dash + 15]
        second = _SECONDS.get(key)
        if second is None:
            second = _second(key)
            if len(_SECONDS) >= 100_000:
                _SECONDS.clear()
            _SECONDS[key] = second
        if second == _NO_TIME:
            return 0.0
        if second != _NOT_HERE:
            return _rest(prefix, dash + 15, second)
        dash = prefix.find("-", dash + 1)
    colon = prefix.find(":")
    while colon >= 0:  # ctime's `10:11:12 `, before its regex
        if prefix.startswith(":", colon + 3) and prefix.startswith(" ", colon + 6):
            when = _ctime(prefix)
            if when:
                return when
            break
        colon = prefix.find(":", colon + 1)
    if not prefix or not _HAS_DIGIT(prefix):
        return 0.0
    return _partial(prefix)


#: a digit anywhere (no time without one)
_HAS_DIGIT: Final = re.compile(r"\d", re.ASCII).search
#: a time of day with no date is placed after `-(ts + 1)` seconds of its day; a date with no
#: year after `-(ts + YEARLESS)` seconds of a leap year (so that Feb 29 has a place)
YEARLESS: Final = 1_000_000.0
_LEAP: Final = 2000
#: the forms a prefix's time may have besides ISO 8601 and ctime: syslog's date without a
#: year (with one after it: ctime without its weekday), a time of day alone, and epoch seconds
#: (`%(created)f`) or milliseconds (Java's, JavaScript's), the last two at the prefix's start
#: unless they have a fraction (a bare number inside a prefix is more likely a thread or pid)
_PARTIAL: Final = re.compile(
    r"(?<![\w.:])(?:"
    r"(?P<mon>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +(?P<day>\d{1,2})[ T]"
    r"(?P<sh>\d\d):(?P<sm>\d\d):(?P<ss>\d\d)(?:[.,](?P<sf>\d{1,9}))?(?: (?P<year>\d{4})(?!\d))?"
    r"|(?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)(?:[.,](?P<f>\d{1,9}))?(?![\d:])"
    r"|(?P<ms>1\d{12})(?![\w.])"
    r"|(?P<epoch>1\d{9})(?:\.(?P<ef>\d{1,9}))?(?![\w.])"
    r")",
    re.ASCII,
)
#: something like a time or a date that no form here reads (`06h33m37`, `2026/11/27`,
#: `27.11.2026 06.33.37`): frames without times, said once
_TIMELIKE: Final = re.compile(
    r"\d[:.h]\d\d[:.m]\d\d|\d{4}[-/.]\d\d?[-/.]\d\d?|\d\d?[-/.]\d\d?[-/.]\d{4}", re.ASCII
)


def _partial(prefix: str) -> float:
    """The time of `prefix` in one of the `_PARTIAL` forms (see `timestamp`), NaN when it has
    something like a time that none reads, 0.0 when it has nothing like one."""
    if prefix[2:3] == ":" and prefix[5:6] == ":":  # `hh:mm:ss` first (go-amqp's, every line)
        hour, minute, second = _two(prefix, 0), _two(prefix, 3), _two(prefix, 6)
        after = prefix[8:9]
        if 0 <= hour <= 23 and 0 <= minute <= 59 and 0 <= second <= 60 and not after.isdigit():
            fraction = 0.0
            if after in (".", ","):
                end = 9
                while end < len(prefix) and end < 18 and "0" <= prefix[end] <= "9":
                    end += 1
                if prefix[end : end + 1] in (":",) or "0" <= prefix[end : end + 1] <= "9":
                    fraction = -1.0  # not a time this reads plainly: the regex decides
                else:
                    fraction = _fraction(prefix[9:end])
            if fraction >= 0.0 and after != ":":
                return -(1.0 + hour * 3600 + minute * 60 + second + fraction)
    for m in _PARTIAL.finditer(prefix):
        at_start = not prefix[: m.start()].strip(" [")
        if m.group("mon") is not None:
            hour, minute, second = int(m.group("sh")), int(m.group("sm")), int(m.group("ss"))
            if hour > 23 or minute > 59 or second > 60:
                continue
            fraction = _fraction(m.group("sf"))
            day = int(m.group("day"))
            month = _MONTHS[m.group("mon")]
            year = m.group("year")
            try:
                when = dt.datetime(
                    int(year) if year else _LEAP, month, day, hour, minute, tzinfo=dt.UTC
                )
            except ValueError:
                continue
            if year:
                return when.timestamp() + second + fraction
            into = (when - dt.datetime(_LEAP, 1, 1, tzinfo=dt.UTC)).total_seconds()
            return -(YEARLESS + into + second + fraction)
        if m.group("h") is not None:
            hour, minute, second = int(m.group("h")), int(m.group("m")), int(m.group("s"))
            if hour > 23 or minute > 59 or second > 60:
                continue
            return -(1.0 + hour * 3600 + minute * 60 + second + _fraction(m.group("f")))
        if m.group("ms") is not None:
            if at_start:
                return int(m.group("ms")) / 1000
            continue
        if at_start or m.group("ef") is not None:
            return int(m.group("epoch")) + _fraction(m.group("ef"))
    return math.nan if _TIMELIKE.search(prefix) else 0.0


def _fraction(digits: str | None) -> float:
    return int(digits) / _SCALES[len(digits)] if digits else 0.0


class Clock:
    """Places the times `timestamp` gives on a line of time that only goes forward, for one log.

    - A time with no date (`06:33:37.123`) is on 1970-01-01, the day of epoch second 0: the
      log does not say its day, and a made-up one would pass for known. The timeline (seconds
      from the first frame, as tshark's) and every gap and timeout are right; a JSON `ts`
      says plainly that the date is unknown. A time more than 12 hours before the last one is
      the next day (the log crossed midnight); more than 12 hours after it, a line of the day
      before written late (a thread's line around midnight).
    - A date with no year (syslog's `Nov 27 06:33:37`, as journalctl prints it) is in the year
      `now` is in, or the year before when that would put it more than a day after `now` (as
      syslog readers take it: a log is read after it is written); a month more than half a
      year before the last line's is the next year (the log crossed New Year).
    - Anything else is as it is (0.0: no time; NaN, a time no form reads, is 0.0 too)."""

    __slots__ = ("day", "last_day", "last_year", "now", "year")

    def __init__(self, now: float | None = None) -> None:
        self.now = now
        self.day = 0  # days a dateless log has crossed
        self.last_day = -1.0  # the last dateless time's seconds into its day (-1: none yet)
        self.year = 0  # the year of a yearless log (0: not chosen yet)
        self.last_year = -1.0  # the last yearless time's seconds into its (leap) year

    def place(self, ts: float) -> float:
        if ts >= 0.0:
            return ts
        if ts != ts:  # NaN
            return 0.0
        if ts > -YEARLESS:
            return self._dateless(-ts - 1.0)
        return self._yearless(-ts - YEARLESS)

    def _dateless(self, into: float) -> float:
        last = self.last_day
        if last >= 0.0 and into < last - 43_200:
            self.day += 1
        elif last >= 0.0 and into > last + 43_200 and self.day > 0:
            return (self.day - 1) * 86_400 + into  # late, from before midnight
        self.last_day = into
        return self.day * 86_400 + into

    def _yearless(self, into: float) -> float:
        leap = dt.datetime(_LEAP, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=into)
        if not self.year:
            now = self.now if self.now is not None else time.time()
            this = dt.datetime.fromtimestamp(now, dt.UTC).year
            self.year = this if _in_year(leap, this) <= now + 86_400 else this - 1
        elif into < self.last_year - 183 * 86_400:
            self.year += 1
        self.last_year = into
        return _in_year(leap, self.year)


def _in_year(leap: dt.datetime, year: int) -> float:
    """The epoch second of `leap`'s month, day and time in `year` (Feb 29: Mar 1 in a year
    without one)."""
    try:
        return leap.replace(year=year).timestamp()
    except ValueError:
        return (leap.replace(year=year, day=28) + dt.timedelta(days=1)).timestamp()


def _second(text: str) -> float:
    """The epoch second of `YYYY-MM-DD hh:mm:ss` (`text`), _NO_TIME or _NOT_HERE."""
    if _FIXED.fullmatch(text) is None:
        return _NOT_HERE
    key = text[:16]  # `2024-01-31 12:00`: the date and the minute
    base = _MINUTES.get(key)
    if base is None:  # a log's lines share their minutes: each one's start is made once
        try:
            base = dt.datetime(
                int(text[0:4]),
                int(text[5:7]),
                int(text[8:10]),
                int(text[11:13]),
                int(text[14:16]),
                tzinfo=dt.UTC,
            ).timestamp()
        except ValueError:
            base = -1.0  # no such date: no time
        if len(_MINUTES) >= 100_000:
            _MINUTES.clear()
        _MINUTES[key] = base
    second = int(text[17:19])
    if base == -1.0 or second > 59:
        return _NO_TIME
    return base + second


def _rest(prefix: str, pos: int, second: float) -> float:
    """`second` with what follows it at `pos`: `[.,]` and up to 9 digits of a fraction, then
    spaces and a zone (`Z`, `+hh:mm`, `-hhmm`), as `_TIMESTAMP` reads them (by characters'
    codes: this is read on every line of a log with times)."""
    size = len(prefix)
    fraction = 0
    places = 0
    if pos < size and (prefix[pos] == "." or prefix[pos] == ","):
        end = pos + 1
        while end < size and end < pos + 10:
            digit = ord(prefix[end]) - 48
            if digit < 0 or digit > 9:
                break
            fraction = fraction * 10 + digit
            end += 1
        if end > pos + 1:
            places = end - pos - 1
            pos = end
    while pos < size and prefix[pos] in _SPACES:
        pos += 1
    offset = 0
    if pos + 4 < size and (prefix[pos] == "+" or prefix[pos] == "-"):
        hours = _two(prefix, pos + 1)
        if hours >= 0:
            minutes = _two(prefix, pos + 4) if prefix[pos + 3] == ":" else -1
            if minutes < 0:
                minutes = _two(prefix, pos + 3)
            if minutes >= 0:
                offset = (hours * 60 + minutes) * (1 if prefix[pos] == "+" else -1)
    seconds = second - offset * 60
    if places:  # both exact, so the quotient is the int division's (correctly rounded)
        seconds += fraction / _SCALES[places]
    return seconds


#: 10 ** n for the digits of a fraction (`_rest`), as floats: a power of ints was a good part of
#: a timestamp's time
_SCALES: Final = tuple(float(10**n) for n in range(10))


def _two(text: str, pos: int) -> int:
    """The number of the two ASCII digits at `pos` in `text`, -1 if there are not two."""
    if pos + 1 >= len(text):
        return -1
    high = ord(text[pos]) - 48
    low = ord(text[pos + 1]) - 48
    if high < 0 or high > 9 or low < 0 or low > 9:
        return -1
    return high * 10 + low


def _ctime(prefix: str) -> float:
    """C's ctime(), local time without a zone: read as UTC."""
    c = _CTIME.search(prefix)
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


def python_expr(text: str) -> Any:
    """`ast.parse(text, mode="eval").body`, where what the compiler only warns of (an invalid
    escape such as `\\d`, `1if`: a line cut or mangled, never a library's repr) raises
    SyntaxError whatever -W says: a log line is read the same way under every warning filter,
    and a mangled one becomes a finding, never a warning on stderr and a lenient guess."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", SyntaxWarning)
        warnings.simplefilter("error", DeprecationWarning)
        try:
            return ast.parse(text, mode="eval").body
        except (SyntaxWarning, DeprecationWarning) as exc:
            raise SyntaxError(str(exc)) from None
