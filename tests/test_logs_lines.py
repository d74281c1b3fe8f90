"""`logs/lines.timestamp`: a line's date and time as epoch seconds, held to Python's own
reading of the same text (`datetime.fromisoformat`), its minutes cached across lines."""

from __future__ import annotations

import datetime as dt
import math
import re

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from amqpscope.logs import lines
from amqpscope.logs.lines import search_at, timestamp


@pytest.mark.parametrize(
    ("prefix", "iso"),
    [
        ("2024-01-31 12:00:00.000039 +0000 PROTOCOL (trace) ", "2024-01-31T12:00:00.000039+00:00"),
        ("2026-01-31 12:00:00,250 TRACE [x] ", "2026-01-31T12:00:00.250+00:00"),
        ("2026-11-26T05:58:49.360Z rhea:frames ", "2026-11-26T05:58:49.360+00:00"),
        ("[2026-11-26T05:58:49+02:00] ", "2026-11-26T05:58:49+02:00"),
        ("2026-11-26 05:58:59-0130 x ", "2026-11-26T05:58:59-01:30"),
        # the same minute written with a `T` and with a space, one second apart
        ("2026-11-26T05:58:01 ", "2026-11-26T05:58:01+00:00"),
        ("2026-11-26 05:58:02 ", "2026-11-26T05:58:02+00:00"),
    ],
)
def test_timestamps_read_as_python_reads_them(prefix: str, iso: str) -> None:
    assert timestamp(prefix) == pytest.approx(dt.datetime.fromisoformat(iso).timestamp())


@pytest.mark.parametrize(
    "prefix", ["no time here ", "2026-02-30 12:00:00 x ", "2026-01-31 12:00:61 "]
)
def test_no_time(prefix: str) -> None:
    assert timestamp(prefix) == 0.0


def _by_search(prefix: str) -> float:
    """What `timestamp` gives, read by searching `lines._TIMESTAMP` (and `_CTIME`) as it once
    did on every line."""
    m = lines._TIMESTAMP.search(prefix)
    if m is None:
        c = lines._CTIME.search(prefix)
        if c is None:
            return 0.0
        try:
            year, day, hour, minute, second = (int(c.group(i)) for i in (6, 2, 3, 4, 5))
            month = lines._MONTHS[c.group(1)]
            when = dt.datetime(year, month, day, hour, minute, second, tzinfo=dt.UTC)
        except ValueError:
            return 0.0
        return when.timestamp()
    year, month, day, hour, minute, second = (int(part) for part in m.group(1, 2, 3, 4, 5, 6))
    try:
        base = dt.datetime(year, month, day, hour, minute, tzinfo=dt.UTC).timestamp()
    except ValueError:
        return 0.0
    if second > 59:
        return 0.0
    offset = 0
    zone = m.group(8)
    if zone and zone != "Z":
        digits = zone.replace(":", "")
        offset = (int(digits[1:3]) * 60 + int(digits[3:5])) * (1 if digits[0] == "+" else -1)
    seconds = base + second - offset * 60
    fraction = m.group(7)
    if fraction:
        seconds += int(fraction) / 10 ** len(fraction)
    return seconds


#: noise around a time, and the pieces of one (each may be wrong in a way the pattern minds)
_NOISE = st.sampled_from(["", "x ", "my-app-1 ", "[", "1", "-", "10:11:12 ", "Thu ", "T"])
_DATE = st.sampled_from(["2024-01-31", "2024-02-30", "12024-12-31", "2024-1-31", "2024-01-3"])
_SEP = st.sampled_from([" ", "T", "t", "  "])
_TIME = st.sampled_from(["12:00:00", "23:59:61", "1:00:00", "00:00:59", "12:00:0"])
_FRACTION = st.sampled_from(["", ".", ",250", ".123456", ".123456789", ".1234567890", ",x"])
_SPACE = st.sampled_from(["", " ", "\t ", "\n"])
_ZONE = st.sampled_from(["", "Z", "+0130", "-01:30", "+01:3", "+1:30", "-0130x", "+", "z"])
_CTIMES = st.sampled_from(["", "Thu May 30 10:11:12 2019 ", "Sun Feb 30 10:11:12 2019 "])


@settings(max_examples=2000, deadline=None)
@given(
    st.tuples(_NOISE, _DATE, _SEP, _TIME, _FRACTION, _SPACE, _ZONE, _NOISE, _CTIMES).map("".join)
    | st.tuples(_NOISE, _CTIMES, _NOISE, _TIME, _NOISE).map("".join)
)
def test_timestamp_is_the_regex_search(prefix: str) -> None:
    expected = _by_search(prefix)
    if not expected and lines._TIMESTAMP.search(prefix) is None:  # then the other forms'
        expected = lines._partial(prefix)
    got = timestamp(prefix)
    assert got == expected or (math.isnan(got) and math.isnan(expected))


_ARROWS = re.compile(r"(?P<dir>->|<-) (?P<call>[A-Z][a-z]*\(.*\))\s*$")


@settings(max_examples=1000, deadline=None)
@given(
    st.lists(
        st.sampled_from(["-> ", "<- ", "->", "-", "<", "Open(", "x)", ") ", "A("]), max_size=10
    ).map("".join)
)
def test_search_at_finds_what_a_search_finds(line: str) -> None:
    found = search_at(_ARROWS, line, "-> ", "<- ")
    wanted = _ARROWS.search(line)
    assert (found and (found.span(), found.groups())) == (
        wanted and (wanted.span(), wanted.groups())
    )
