"""`read`, `summary` and `export` of a frame-trace log, told from a capture by content."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from amqpscope import schema

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
LOG = CAPTURES / "log-proton-broker.log"
PCAP = CAPTURES / "log-proton-broker.pcap"


def amqpscope(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", *args],
        capture_output=True,
        timeout=120,
        input=stdin,
    )


def records(*args: str, stdin: bytes | None = None) -> list[dict]:
    done = amqpscope("read", *args, "--json", stdin=stdin)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_read_json_validates_and_matches_the_capture() -> None:
    """Log records validate against the published schema (with `source`); beside the capture's
    records they differ only where a log has nothing to say."""
    validator = schema.validator("frame")
    logged = records(str(LOG))
    wire = [r for r in records(str(PCAP)) if r["kind"] != "transport"]
    for record in logged:
        errors = sorted(validator.iter_errors(record), key=str)
        assert not errors, errors[0].message
        assert record["source"]["file"] == str(LOG)
        assert "packet" not in record and "size" not in record and record["ts"] is None
    for record in wire:  # capture records still need what they always had
        assert not list(validator.iter_errors(record))

    def key(r: dict) -> tuple:
        return (r["dir"], r["name"], r["channel"], json.dumps(r["fields"], sort_keys=True))

    assert sorted(map(key, logged)) == sorted(map(key, wire))
    # a capture record without its packet is no longer valid: the split is real
    broken = dict(wire[0])
    del broken["packet"]
    assert list(validator.iter_errors(broken))


def test_read_timeline_numbers_lines() -> None:
    done = amqpscope("read", str(LOG), "--color", "never")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.decode().splitlines()
    assert lines[0].startswith("c1  0x") and "→ peer" in lines[0]
    assert lines[1].split()[:2] == ["1", "L1"]
    assert any(" sasl-init PLAIN user=guest" in line for line in lines)
    assert "guest\\x00guest" not in done.stdout.decode()


def test_summary_of_log_and_capture() -> None:
    def links(path: Path | str, stdin: bytes | None = None) -> list[dict]:
        done = amqpscope("summary", str(path), "--json", stdin=stdin)
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert not list(schema.validator("summary").iter_errors(result))
        return [
            {k: link[k] for k in ("name", "role", "deliveries", "settled", "outcomes")}
            for c in result["connections"]
            for s in c["sessions"]
            for link in s["links"]
        ]

    expected = links(PCAP)
    assert links(LOG) == expected
    # gzip'd, and on standard input, both by content
    packed = gzip.compress(LOG.read_bytes())
    assert links("-", stdin=packed) == expected
    assert links("-", stdin=LOG.read_bytes()) == expected


def test_export_of_log_validates(tmp_path: Path) -> None:
    out = tmp_path / "log.json"
    done = amqpscope("export", str(LOG), "-o", str(out))
    assert done.returncode == 0, done.stderr
    document = json.loads(out.read_text())
    assert not list(schema.validator("export").iter_errors(document))
    assert document["capture"]["format"] == "log"
    assert document["capture"]["log-format"] == "proton"
    assert len(document["frames"]) == len(records(str(LOG)))


def test_text_in_no_known_format_is_one_line_error(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\nthis is not a frame trace\n")
    done = amqpscope("read", str(notes))
    assert done.returncode == 1
    assert done.stdout == b""
    err = done.stderr.decode().strip().splitlines()
    assert len(err) == 1 and "proton" in err[0] and "Traceback" not in err[0]
    # forced, it is read: no frames, its lines counted as skipped
    forced = amqpscope("read", str(notes), "--format", "proton", "--json")
    assert forced.returncode == 0 and forced.stdout == b""
    assert b"log.skipped-lines" in forced.stderr and b"2 of 2 lines" in forced.stderr


def test_format_given_with_a_capture_is_a_usage_error(tmp_path: Path) -> None:
    """A capture's bytes read as a log hold no frame: not an empty output and exit 0 (with
    "N of N lines are no pika frame"), but one line saying what the file is, and 2. Also
    gzip'd and on standard input."""
    zipped = tmp_path / "cap.pcap.gz"
    zipped.write_bytes(gzip.compress(PCAP.read_bytes()))
    for command in ("read", "summary", "diagnose", "export"):
        done = amqpscope(command, str(PCAP), "--format", "pika")
        assert (done.returncode, done.stdout) == (2, b"")
        said = f"amqpscope: --format pika: {PCAP} is a pcap capture, not a frame-trace log\n"
        assert done.stderr.decode() == said
    done = amqpscope("read", str(zipped), "--format", "proton")
    assert done.returncode == 2 and b"is a pcap capture" in done.stderr
    done = amqpscope("read", "-", "--format", "rhea", stdin=PCAP.read_bytes())
    assert (
        done.returncode == 2
        and done.stderr == b"amqpscope: --format rhea: - is a pcap capture, not a frame-trace log\n"
    )
    ng = amqpscope("read", str(CAPTURES / "pcapng.pcapng"), "--format", "proton")
    assert ng.returncode == 2 and b"is a pcapng capture" in ng.stderr


@pytest.mark.parametrize("at", [3, 20, 0.5])
def test_cut_log_is_read_with_a_finding(tmp_path: Path, at: float) -> None:
    """A log copied while it was written: its last line cut short (in the prefix, inside the
    frame, halfway through the file) is a finding; every whole line before it is read, and a
    cut inside the frame is also the frame's record, marked truncated (issue 42)."""
    data = LOG.read_bytes()
    lines = data.splitlines(keepends=True)
    keep = len(lines) // 2
    whole = b"".join(lines[:keep])
    cut = int(at * len(lines[keep])) if isinstance(at, float) else at
    short = tmp_path / "cut.log"
    short.write_bytes(whole + lines[keep][:cut])
    done = amqpscope("read", str(short), "--json")
    assert done.returncode == 0, done.stderr
    read = [json.loads(line) for line in done.stdout.splitlines()]
    whole = records(str(LOG))
    if at == 0.5:  # inside the frame: what was read of it
        *read, last = read
        assert last["source"]["truncated"] is True and last["name"] == whole[keep]["name"]
    assert len(read) == keep and all("truncated" not in r["source"] for r in read)
    stderr = done.stderr.decode()
    assert "log.cut-line" in stderr and f"cut.log:{keep + 1}:" in stderr, stderr


def test_capture_errors_unchanged(tmp_path: Path) -> None:
    """Binary input that is no capture keeps the capture reader's one-line error."""
    junk = tmp_path / "junk.bin"
    junk.write_bytes(bytes(range(256)) * 4)
    done = amqpscope("read", str(junk))
    assert done.returncode == 1
    assert b"not a pcap or pcapng file" in done.stderr
    copy = tmp_path / "capture.log"  # a capture named like a log is still a capture
    shutil.copy(PCAP, copy)
    assert records(str(copy))[0]["packet"] >= 1


def test_overlong_line_is_a_finding(tmp_path: Path) -> None:
    """A line of megabytes (a dumped payload): read as far as a line can be (the frame's name
    as a truncated record, issue 42), reported, the rest of the log read."""
    lines = LOG.read_bytes().splitlines(keepends=True)
    huge = b'[0x56080b9f7cb0]: AMQP:FRAME:0 -> @open(16) [container-id="' + b"x" * (3 << 20)
    log = tmp_path / "huge.log"
    log.write_bytes(b"".join(lines[:5]) + huge + b'"]\n' + b"".join(lines[5:]))
    done = amqpscope("read", str(log), "--json")
    assert done.returncode == 0, done.stderr[:300]
    read = [json.loads(line) for line in done.stdout.splitlines()]
    cut = [r for r in read if r["source"].get("truncated")]
    assert [(r["name"], r["source"]["line"]) for r in cut] == [("open", 6)]
    assert len(read) == len(records(str(LOG))) + 1
    assert b"log.bad-line" in done.stderr and b"huge.log:6:" in done.stderr


def test_redact_bodies_drops_a_logs_bodies_as_a_captures() -> None:
    """--redact-bodies on a frame-trace log (read, and so tui FILE): each body its size only, as
    the same run's capture gives it (the log reader's decoders kept them before)."""
    logged = [r for r in records("--redact-bodies", str(LOG)) if r.get("message")]
    captured = [r for r in records("--redact-bodies", str(PCAP)) if r.get("message")]
    assert logged and len(logged) == len(captured)
    assert [r["message"]["body"] for r in logged] == [r["message"]["body"] for r in captured]
    assert all(r["message"]["body"].get("redacted") for r in logged)
    assert "log message" not in json.dumps(logged)


@pytest.mark.parametrize(
    "damage",
    ["latin-1", "nuls", "copytruncate", "utf-16"],
)
def test_a_log_with_bytes_no_utf8_text_has_is_read(tmp_path: Path, damage: str) -> None:
    """A log that is mostly UTF-8 text is a log: a Latin-1 application line among the frames,
    NULs a crash left, the hole `logrotate copytruncate` leaves at its start, or UTF-16 with a
    byte order mark (Windows PowerShell's `>`). Every frame is read; bytes that are no text
    are a `log.not-text` finding naming the first such line."""
    data = LOG.read_bytes()
    lines = data.splitlines(keepends=True)
    if damage == "latin-1":
        damaged = b"".join(lines[:5]) + "café au lait\n".encode("latin-1") + b"".join(lines[5:])
        first = 6
    elif damage == "nuls":
        damaged = b"".join(lines[:7]) + b"\0\0" + b"".join(lines[7:])
        first = 8
    elif damage == "copytruncate":
        damaged = bytes(5000) + data
        first = 1
    else:
        damaged = data.decode().encode("utf-16")
        first = 0
    log = tmp_path / "damaged.log"
    log.write_bytes(damaged)
    done = amqpscope("read", str(log), "--json")
    assert done.returncode == 0, done.stderr
    expected = records(str(LOG))
    got = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["name"] for r in got] == [r["name"] for r in expected]
    assert [r["fields"] for r in got] == [r["fields"] for r in expected]
    stderr = done.stderr.decode()
    assert "Traceback" not in stderr
    if first:
        assert f"log.not-text: {log}:{first}: 1 line(s)" in stderr, stderr
    else:
        assert "log.not-text" not in stderr, stderr


def test_frames_of_another_format_are_a_finding(tmp_path: Path) -> None:
    """Two logs in one file (`cat client.log server.log`), of two formats: the file reads as
    one of them, and the other's frames, which it does not read, are a warning naming their
    format and first line, not lines merely skipped. A wrong --format says the same."""
    rhea = (CAPTURES / "log-rhea-broker.log").read_bytes()
    both = tmp_path / "both.log"
    both.write_bytes(LOG.read_bytes() + rhea)
    done = amqpscope("read", str(both), "--json")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(b"\n") == len(records(str(CAPTURES / "log-rhea-broker.log")))
    stderr = done.stderr.decode()
    proton_lines = LOG.read_bytes().count(b"\n")
    assert f"log.other-format: {both}:1: {proton_lines} line(s) are proton frames" in stderr
    forced = amqpscope("read", str(LOG), "--format", "rhea", "--json")
    assert forced.returncode == 0 and forced.stdout == b""
    assert b"log.other-format" in forced.stderr and b"--format proton" in forced.stderr
    clean = amqpscope("read", str(CAPTURES / "log-pika-broker.log"), "--json")
    assert b"log.other-format" not in clean.stderr  # a library's own lines are no frames
