"""`logs/lines.timestamp`: a line's date and time as epoch seconds, held to Python's own
reading of the same text (`datetime.fromisoformat`), its minutes cached across lines."""

from __future__ import annotations

import datetime as dt

import pytest

from amqpscope.logs.lines import timestamp


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
