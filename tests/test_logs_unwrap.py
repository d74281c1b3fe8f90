"""Frame-trace lines as people paste them, wrapped by other software (issue 42): each wrapped
line gives the record its unwrapped twin gives (`amqpscope/logs/unwrap.py` peels the wrapper
before any grammar reads the line).

The lines are the libraries' own: captures/log-proton-broker.log and log-rhea-broker.log were
recorded from Qpid Proton and rhea; go-amqp's, proton-j's, amqpnetlite's and pyamqp's are
printed by tests/made_logs.py's printers (written from each library's formatting code). Each
wrapper wraps them as its software does (named at each one).
"""

from __future__ import annotations

import io
import json
import logging
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from amqpscope.logs.detect import detect
from amqpscope.logs.reader import LogReader
from amqpscope.logs.unwrap import unwrap
from tests import made_logs

CAPTURES = Path(__file__).resolve().parent.parent / "captures"


def _recorded(name: str) -> list[str]:
    return (CAPTURES / name).read_text().splitlines()[:16]


def _lines(fmt: str, tmp: Path) -> list[str]:
    """A log's first frames as the library prints them (see the module's docstring)."""
    if fmt == "proton":
        return _recorded("log-proton-broker.log")
    if fmt == "rhea":
        return _recorded("log-rhea-broker.log")
    path = tmp / "made.log"
    if fmt == "go-amqp":
        made_logs.goamqp(path, 1)
    else:
        made_logs.printed(fmt, path, 1)
    return path.read_text().splitlines()


FORMATS = ("proton", "rhea", "go-amqp", "proton-j", "amqpnetlite", "pyamqp")


def records(fmt: str, lines: list[str]) -> list[dict[str, Any]]:
    """What `read --json` says of each frame, but where it was (the line's number)."""
    reader = LogReader("log", fmt)
    out = []
    for number, line in enumerate(lines, 1):
        out.extend(reader.feed(line + "\n", number))
    out.extend(reader.flush())
    reader.finish()
    assert [f.code for f in reader.findings if f.code != "log.truncated-payload"] == []
    found = [frame.to_json() for frame in out]
    for record in found:
        record.pop("source")
    return found


def _go_json(text: str) -> str:
    """A string as Go's encoding/json writes it: `<`, `>` and `&` as \\u003c, \\u003e, \\u0026
    (HTML-safe, its default; moby's json-file writer escapes them the same way)."""
    quoted = json.dumps(text)
    return quoted.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def docker(line: str) -> str:
    """Docker's json-file log driver (moby `daemon/logger/jsonfilelog/jsonlog`: `JSONLog`'s
    `log`, `stream`, `time` in that order, the line with its newline)."""
    log = _go_json(line + "\n")
    return f'{{"log":{log},"stream":"stderr","time":"2026-11-26T05:58:49.269123456Z"}}'


def json_string(line: str) -> str:
    """A frame line quoted as a JSON string, as it stands in a JSON array or a copied JSON
    log line (issue 42's `"03:10:56.648251 RX (connReader 0xc01355c180): Frame{...}"`)."""
    return "    " + _go_json(line) + ","


def zap(line: str) -> str:
    """zap's production JSON encoder (go.uber.org/zap `NewProductionEncoderConfig`: `level`,
    `ts` in epoch seconds, `caller`, `msg`), a Go service logging the frame line as its
    message."""
    return '{"level":"debug","ts":1764569929.269,"caller":"amqp/conn.go:12","msg":' + (
        _go_json(line) + "}"
    )


def journal_json(line: str) -> str:
    """`journalctl -o json`: the line under `MESSAGE` among journald's fields."""
    record = {
        "__REALTIME_TIMESTAMP": "1764569929269123",
        "_PID": "1234",
        "SYSLOG_IDENTIFIER": "app",
        "MESSAGE": line,
    }
    return json.dumps(record)


def python_bytes(line: str) -> str:
    """Python's logging of the bytes a C library wrote (`logger.debug("%s", data)` prints the
    bytes' repr, `b'...'`), as uamqp-python passes the C library's lines on: made by the
    logging module itself."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(levelname)s:%(name)s:%(message)s"))
    logger = logging.getLogger("uamqp.c_uamqp.test")
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    try:
        logger.debug("%s", line.encode())
    finally:
        logger.removeHandler(handler)
    return out.getvalue().rstrip("\n")


def nbsp(line: str) -> str:
    """A trace copied from a web page that wrote its spaces as `&nbsp;` (U+00A0)."""
    return line.replace(" ", "\xa0")


def tabs(line: str) -> str:
    """The spaces as tabs (a paste through an editor that made them so)."""
    return line.replace(" ", "\t")


def number_after(line: str) -> str:
    """A line number after the frame (the right-hand column of a side-by-side view or a
    copied table, after a tab)."""
    return f"{line}\t{len(line) % 997 + 1}"


WRAPPERS: dict[str, Callable[[str], str]] = {
    "number-after": number_after,
    "docker": docker,
    "json-string": json_string,
    "zap": zap,
    "journal-json": journal_json,
    "python-bytes": python_bytes,
    "nbsp": nbsp,
    "tabs": tabs,
}


@pytest.mark.parametrize("wrapper", WRAPPERS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_wrapped_line_gives_its_twins_record(fmt: str, wrapper: str, tmp_path: Path) -> None:
    lines = _lines(fmt, tmp_path)
    plain = records(fmt, lines)
    assert len(plain) >= 5
    wrapped = [WRAPPERS[wrapper](line) for line in lines]
    assert wrapped != lines
    got = records(fmt, wrapped)
    for record, twin in zip(got, plain, strict=False):
        if twin["ts"] is None and wrapper == "docker":
            record["ts"] = None  # Docker's time where the text has none: see below
    assert got == plain


def test_the_time_before_a_bytes_repr_is_the_frames() -> None:
    """A Python logger's time before the repr of a line with none (Proton's) is the frame's."""
    line = _recorded("log-proton-broker.log")[6]
    wrapped = "2026-11-26 05:58:49,269 uamqp.c_uamqp INFO " + repr(line.encode())
    reader = LogReader("log", "proton")
    (frame,) = reader.feed(wrapped + "\n", 1)
    assert (frame.name, frame.fields["container-id"]) == ("open", "amqpscope-log-proton-broker")
    assert frame.ts == pytest.approx(1795672729.269, abs=1e-6)


def test_a_bytes_repr_no_python_would_print_is_not_peeled() -> None:
    """`\\d` is in no `b'...'` repr (Python writes a backslash as two): text that holds one was
    cut and joined or typed, and is left as it is, whatever -W says, not read leniently as a
    backslash and a `d` (a SyntaxWarning from Python 3.12 on stderr, a finding under -W error)."""
    line = _recorded("log-proton-broker.log")[6]
    good = "2026-11-26 05:58:49,269 uamqp.c_uamqp INFO " + repr(line.encode())
    assert unwrap(good + "\n")[0] != good + "\n"
    mangled = good[:-1] + "\\d" + good[-1]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert unwrap(mangled + "\n")[0] == mangled + "\n"
    assert [str(w.message) for w in caught] == []


@pytest.mark.parametrize("wrapper", ["docker", "json-string", "python-bytes", "nbsp"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_wrapped_log_is_read_as_its_format(fmt: str, wrapper: str, tmp_path: Path) -> None:
    """Without `--format`: the wrapped log is told by its content and read as its twin."""
    lines = _lines(fmt, tmp_path)
    wrapped = [WRAPPERS[wrapper](line) for line in lines]
    found = detect([line + "\n" for line in wrapped])
    assert found == fmt
    got = records(found, wrapped)
    for record, twin in zip(got, records(fmt, lines), strict=True):
        assert (record["name"], record["fields"]) == (twin["name"], twin["fields"])


def test_a_frame_without_a_time_takes_its_docker_records() -> None:
    """Proton's trace has no time of its own; Docker's record of each line says when it was
    written: the frame takes that time (a frame whose text has a time keeps its own)."""
    line = _recorded("log-proton-broker.log")[6]
    reader = LogReader("log", "proton")
    (frame,) = reader.feed(docker(line) + "\n", 1)
    assert frame.name == "open"
    assert frame.ts == pytest.approx(1795672729.269123, abs=1e-6)
    rhea_line = _recorded("log-rhea-broker.log")[2]
    (frame,) = LogReader("log", "rhea").feed(docker(rhea_line) + "\n", 1)
    assert frame.ts == pytest.approx(1795672729.279, abs=1e-6)  # rhea's own time


def test_docker_splits_a_long_line_over_records() -> None:
    """Docker's json-file driver cuts a line past its 16 KiB buffer (moby
    `daemon/logger/copier.go`) into records whose `log` has no newline but the last's; the
    pieces are joined as one frame. (Cut here in the middle of a recorded attach.)"""
    line = _recorded("log-proton-broker.log")[8]
    assert "@attach" in line
    cut = len(line) // 2
    first = '{"log":' + _go_json(line[:cut]) + ',"stream":"stderr","time":"2026-11-26T05:58:49Z"}'
    wrapped = [first, docker(line[cut:])]
    # the plain twin: the same frame on one line
    (joined,) = _joined("proton", wrapped)
    assert joined.pop("ts") == pytest.approx(1795672729.269123, abs=1e-6)  # the last piece's
    joined["ts"] = None
    assert records("proton", [line]) == [joined]


def _joined(fmt: str, lines: list[str]) -> list[dict[str, Any]]:
    reader = LogReader("log", fmt)
    out = []
    for number, line in enumerate(lines, 1):
        out.extend(reader.feed(line + "\n", number))
    out.extend(reader.flush())
    reader.finish()
    assert [f.code for f in reader.findings] == []
    found = [frame.to_json() for frame in out]
    for record in found:
        record.pop("source")
    return found


@pytest.mark.parametrize("fmt", ["proton", "go-amqp"])
def test_a_line_journald_split_keeps_its_prefix_on_each_piece(fmt: str, tmp_path: Path) -> None:
    """journald stores a line past its `LineMax` as several entries, and `journalctl` prints
    each with its own `Nov 27 06:33:37 host app[1234]: `: the prefix repeated before the rest
    of the frame is not part of it. (Lines cut at their middle here, not at 48 KiB.)"""
    lines = _lines(fmt, tmp_path)
    prefix = "Nov 27 06:33:37 host app[1234]: "
    split = []
    for line in lines:
        if len(line) > 120:
            cut = len(line) // 2
            split += [prefix + line[:cut], prefix + line[cut:]]
        else:
            split.append(prefix + line)
    assert len(split) > len(lines)
    got = _joined(fmt, split)
    plain = _joined(fmt, [prefix + line for line in lines])
    assert got == plain


def test_plain_lines_come_back_as_they_are() -> None:
    """The libraries' own lines are not touched: the very same string, nothing peeled."""
    for line in _recorded("log-proton-broker.log") + _recorded("log-rhea-broker.log"):
        text = line + "\n"
        assert unwrap(text)[0] is text


@pytest.mark.parametrize("fmt", ["amqpnetlite", "pyamqp"])
def test_a_frame_wrapped_over_lines_is_joined(fmt: str, tmp_path: Path) -> None:
    """A logger or terminal that wraps a long line at its width: amqpnetlite's and pyamqp's
    frames (whose text has no quotes to tell a cut by) are joined with the next line as
    Proton's are, not skipped as no frame."""
    lines = _lines(fmt, tmp_path)
    wrapped = []
    for line in lines:
        if len(line) > 160:
            wrapped += [line[:120], line[120:]]
        else:
            wrapped.append(line)
    assert len(wrapped) > len(lines) + 3
    assert _joined(fmt, wrapped) == _joined(fmt, lines)
