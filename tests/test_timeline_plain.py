"""The timeline written without rich (`Timeline(out=...)`, what a piped `read` uses) is what rich
prints, byte for byte: rich itself is the oracle. Both sinks get the same lines (one layout, as
pieces); rich prints them on a console that is no terminal (uncoloured, nothing cut), the plain
sink joins them, and hands rich only a line rich would change. Held on every bundled and every
damaged capture, with every option of the timeline and of the decoder, through the CLI with
selections, and on frames holding hostile strings (tabs, controls, line breaks, wide and
combining characters, lone surrogates, trailing spaces) in every place a line shows text, on a
UTF-8 and an ASCII output.
"""

from __future__ import annotations

import copy
import io
import os
import select
import struct
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rich.console import Console

from amqpscope.capture.files import open_capture
from amqpscope.cli import main
from amqpscope.codec.frames import Frame
from amqpscope.dissect import Dissector
from amqpscope.findings import Finding
from amqpscope.render.timeline import RICH_CHANGES, Timeline
from amqpscope.track.tracker import Tracker

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = sorted(ROOT.glob("captures/*.pcap*"))
#: the timeline's own options, as `read` passes them (--collapse, --body) and a caller may
OPTIONS: list[dict[str, Any]] = [
    {},
    {"collapse": True},
    {"body": True},
    {"collapse": True, "body": True},
    {"legend": False},
]
#: the decoder's options that change what lines say
DECODERS: list[dict[str, Any]] = [{}, {"show_secrets": True}, {"redact_bodies": True}]


def frames_of(path: Path, **decoder: Any) -> list[Frame]:
    """Every frame of a capture as `read` has it: decoded, then fed to the tracker (whose
    findings ride the frames), with the records of how each connection ended."""
    tracker = Tracker()
    frames = []
    with open_capture(str(path)) as capture:
        for frame in Dissector(**decoder).run(capture):
            tracker.feed(frame)
            frames.append(frame)
    tracker.finish()
    return frames


def _stream(encoding: str) -> io.TextIOWrapper:
    """An output like a piped stdout after `cli._replace_unencodable`."""
    return io.TextIOWrapper(io.BytesIO(), encoding=encoding, errors="replace")


def _console(out: io.TextIOWrapper, kind: type[Console] = Console) -> Console:
    """The console `cli._console` makes, writing to what is no terminal (so: no colour)."""
    return kind(
        file=out,
        width=80,  # a pipe's default: lines far longer are printed whole all the same
        color_system="auto",
        highlight=False,
        emoji=False,
        markup=False,
    )


def _run(timeline: Timeline, frames: Iterable[Frame], out: io.TextIOWrapper) -> bytes:
    for frame in frames:
        timeline.frame(frame)
    timeline.finish()
    out.flush()
    return out.buffer.getvalue()  # type: ignore[attr-defined]


def rich_bytes(frames: list[Frame], encoding: str = "utf-8", **options: Any) -> bytes:
    """What rich prints: every line through `Console.print`, as before the plain sink."""
    out = _stream(encoding)
    timeline = Timeline(_console(out), **options)
    assert not timeline.fit and not timeline.console.is_terminal
    return _run(timeline, frames, out)


def plain_bytes(frames: list[Frame], encoding: str = "utf-8", **options: Any) -> tuple[bytes, int]:
    """What the plain sink writes, and how many lines it left to rich."""
    out = _stream(encoding)
    printed = [0]

    class Counting(Console):
        def print(self, *args: Any, **kwargs: Any) -> None:
            printed[0] += 1
            super().print(*args, **kwargs)

    timeline = Timeline(lambda: _console(out, Counting), out=out, **options)
    return _run(timeline, frames, out), printed[0]


def same(frames: list[Frame], encoding: str = "utf-8", **options: Any) -> int:
    """Assert both sinks write the same bytes; the lines the plain one left to rich."""
    plain, to_rich = plain_bytes(frames, encoding, **options)
    assert plain == rich_bytes(frames, encoding, **options)
    return to_rich


@pytest.mark.parametrize("path", CAPTURES, ids=[p.name for p in CAPTURES])
def test_every_capture_as_rich_prints_it(path: Path) -> None:
    for decoder in DECODERS:
        frames = frames_of(path, **decoder)
        for options in OPTIONS:
            assert same(frames, **options) == 0, "a recorded capture needs no rich"


def test_every_damaged_capture_as_rich_prints_it(tmp_path: Path) -> None:
    from tests.test_damaged import damage  # tools/damage.py, loaded there

    cases = damage.build(tmp_path)
    assert cases
    for case in cases:
        frames = frames_of(tmp_path / case.file)
        for options in ({}, {"collapse": True, "body": True}):
            same(frames, "utf-8", **options)


#: text rich writes otherwise than as it is (tabs, line breaks, the controls it drops), text a
#: terminal could act on, and text whose width is not its length (wide, combining, zero-width,
#: lone surrogates, which a UTF-8 output cannot encode), spaces at the end of a long line,
#: rich markup
HOSTILE = [
    "tab\there",
    "cr\rhere",
    "bell\x07",
    "back\x08space",
    "vt\x0bff\x0c",
    "two\nlines",
    "\x1b]0;title\x07\x1b[31mred",
    "nel\x85 del\x7f",
    "\u2028sep\u2029",
    "\u202eoverride",
    "队列名称",
    "e\u0301 combining",
    "zero\u200bwidth\u200d",
    "lone \udcff surrogate \ud800",
    "emoji 🐇 flag 🇫🇷",
    "\ufeffbom",
    "nul\x00",
    "ideographic space\u3000",
    "no-break\xa0",
    "trailing   ",
    "x" * 300 + "   ",
    "[bold red]markup[/]",
    "",
]


def _hostile_fields(value: Any, text: str) -> Any:
    if isinstance(value, str):
        return text
    if isinstance(value, dict):
        return {k: _hostile_fields(v, text) for k, v in value.items()}
    if isinstance(value, list):
        return [_hostile_fields(v, text) for v in value]
    return value


def with_text(frames: list[Frame], text: str, names: bool) -> list[Frame]:
    """Copies of `frames` with `text` in every string a line shows: field values (wherever
    they are nested), the body, addresses and findings; or, with `names`, in what comes from
    the decoder rather than the wire (the frame's name, its version, a finding's code)."""
    out = []
    for frame in frames:
        f = copy.copy(frame)
        if names:
            f.name, f.version = text, text
            f.findings = [Finding(text, x.severity, x.message) for x in frame.findings]
        else:
            f.fields = _hostile_fields(frame.fields, text)
            f.message = _hostile_fields(frame.message, text)
            f.src, f.dst = f"{text}:5672", text
            f.findings = [Finding(x.code, x.severity, text) for x in frame.findings]
        out.append(f)
    return out


HOSTILE_CAPTURES = [
    "091-channel-errors.pcap",
    "10-outcomes.pcap",
    "091-hostile-names.pcap",
    "10-send-receive.pcap",
    "091-publish-consume.pcap",
]


@pytest.mark.parametrize("name", HOSTILE_CAPTURES)
def test_hostile_text_anywhere_is_written_as_rich_writes_it(name: str) -> None:
    frames = frames_of(ROOT / "captures" / name)
    if not any(f.findings for f in frames):  # a finding note on a line too
        frames[-1] = copy.copy(frames[-1])
        frames[-1].findings = [Finding("test.note", "warning", "a note")]
    for text in HOSTILE:
        for names in (False, True):
            changed = with_text(frames, text, names)
            for encoding in ("utf-8", "ascii"):
                for options in ({}, {"collapse": True, "body": True}):
                    to_rich = same(changed, encoding, **options)
                    # only what rich would change goes to rich: the rest is written plain
                    assert (to_rich > 0) == bool(RICH_CHANGES.search(text)), (text, names)


def read(*args: str, rich: bool = False) -> tuple[str, str]:
    """`amqpscope read` piped; `rich`: through rich, made no terminal by TTY_COMPATIBLE=0 (the
    plain sink is used only when nothing but a pipe decides rich's console)."""
    env = {"TTY_COMPATIBLE": "0"} if rich else {}
    result = CliRunner().invoke(main, ["read", *args], env=env)
    assert result.exit_code == 0, result.output
    return result.stdout, result.stderr


CLI_ARGS = [
    [],
    ["--collapse", "--body"],
    ["--show-secrets"],
    ["--redact-bodies", "--body"],
    ["--errors"],
    ["--conn", "2", "--collapse"],
    ["-Y", 'kind == "method" or kind == "performative"', "-c", "7"],
    ["-Y", "findings", "--body"],
    ["--from", "0.01"],
]


@pytest.mark.parametrize("path", CAPTURES, ids=[p.name for p in CAPTURES])
def test_read_piped_prints_what_rich_printed(path: Path) -> None:
    for args in CLI_ARGS:
        assert read(*args, str(path)) == read(*args, str(path), rich=True)


CLI = [sys.executable, "-m", "amqpscope.cli"]


def test_a_piped_timeline_imports_no_rich() -> None:
    code = (
        "import sys\n"
        "from amqpscope.cli import main\n"
        "try:\n"
        "    main(['read', sys.argv[1]])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('rich.console' in sys.modules, file=sys.stderr)\n"
    )
    capture = str(ROOT / "captures" / "091-channel-errors.pcap")
    result = subprocess.run(
        [sys.executable, "-c", code, capture], capture_output=True, text=True, check=True
    )
    assert result.stderr.splitlines()[-1] == "False"
    assert result.stdout == read(capture, rich=True)[0]


def test_the_quick_exit_writes_every_line(tmp_path: Path) -> None:
    """Run as the program, `read` ends with `os._exit` once stdout is flushed: every line of a
    timeline far longer than stdout's buffer is written (and the findings after it)."""
    from tests.bigcapture import multiply
    from tests.test_quick_exit import run

    path = tmp_path / "long.pcap"
    multiply(ROOT / "captures" / "091-channel-errors.pcap", path, 40)
    result = run("read", str(path))
    stdout, stderr = read(str(path), rich=True)
    assert result.returncode == 0
    assert len(result.stdout) > 100_000 and result.stdout == stdout
    assert result.stderr == stderr and "teardown" not in result.stderr


def _packets(name: str) -> tuple[bytes, list[bytes]]:
    data = (ROOT / "captures" / name).read_bytes()
    head, pos, packets = data[:24], 24, []
    while pos < len(data):
        caplen = struct.unpack_from("<I", data, pos + 8)[0]
        packets.append(data[pos : pos + 16 + caplen])
        pos += 16 + caplen
    return head, packets


def _ready(stream: Any, seconds: float = 60) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if select.select([stream], [], [], 1)[0]:
            return True
    return False


def test_lines_come_out_while_the_capture_is_still_being_written() -> None:
    """`tcpdump -w - | amqpscope read - | grep`: read from a pipe, each line is written as its
    frame arrives, as rich wrote it (flushed per line), not when a buffer fills."""
    head, packets = _packets("091-ack-nack-reject.pcap")
    child = subprocess.Popen([*CLI, "read", "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    try:
        child.stdin.write(head + b"".join(packets[: len(packets) // 2]))
        child.stdin.flush()
        assert _ready(child.stdout), "no line printed before the input ended"
        assert child.stdout.readline().startswith(b"c1  ")  # the legend
    finally:
        child.stdin.close()
        child.wait(timeout=60)
    assert child.returncode == 0


def test_flushed_per_line_for_live() -> None:
    """`live` writes through a Timeline with `flush`: each line is in the pipe as soon as its
    frame has been given, though the stream holds a block buffer."""
    frames = frames_of(ROOT / "captures" / "091-publish-consume.pcap")
    read_end, write_end = os.pipe()
    with os.fdopen(write_end, "w", buffering=1 << 16) as out, os.fdopen(read_end, "rb") as pipe:
        timeline = Timeline(_never, out=out, flush=True)
        for frame in frames[:5]:
            timeline.frame(frame)
            assert _ready(pipe, 5), "the frame's line is still buffered"
            os.read(pipe.fileno(), 1 << 16)
        quiet = Timeline(_never, out=out)  # reading a file: written in blocks
        quiet.frame(frames[5])
        assert not select.select([pipe], [], [], 0.2)[0]
        quiet.finish()
        assert _ready(pipe, 5)


def _never() -> Console:
    raise AssertionError("no line here needs rich")


def test_a_line_rich_would_change_is_left_to_it() -> None:
    frames = frames_of(ROOT / "captures" / "091-publish-consume.pcap")[:3]
    tabbed = with_text(frames, "a\tb", names=True)
    out = _stream("utf-8")
    made: list[Console] = []

    def make() -> Console:
        made.append(_console(out))
        return made[-1]

    text = _run(Timeline(make, out=out), tabbed, out).decode()
    assert len(made) == 1  # made once, when first needed
    assert "\t" not in text  # rich expanded each tab to its tab stop
    assert text == rich_bytes(tabbed).decode()
