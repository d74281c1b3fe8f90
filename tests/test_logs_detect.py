"""Detection by content: prose that quotes frames (this repository's logs guide) is no log, a log
whose frames are few among other lines still is."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from amqpscope.logs.detect import SAMPLE, detect
from amqpscope.logs.formats import FORMATS

ROOT = Path(__file__).resolve().parent.parent
#: the page of the docs that quotes the most frames (the README's section before issue 41)
GUIDE = ROOT / "docs" / "guide" / "logs.md"
PROTON = ROOT / "captures" / "log-proton-broker.log"
PIKA = ROOT / "captures" / "log-pika-broker.log"
PROSE = "Some documentation about AMQP and the tools that read it.\n"


def test_logs_guide_is_no_log() -> None:
    """The logs guide quotes frames of several formats (one of them whole): no format, and the
    CLI's one-line error with exit status 1."""
    lines = GUIDE.read_text().splitlines(keepends=True)
    assert any(fmt.looks_like(line) for line in lines for fmt in FORMATS.values())
    assert detect(lines) is None
    done = subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", "read", str(GUIDE)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert "not a pcap or pcapng file, nor a frame-trace log" in done.stderr


def test_one_quoted_frame_in_prose_is_no_log() -> None:
    frame = next(line for line in PIKA.read_text().splitlines() if "<METHOD(" in line)
    assert detect([frame]) == "pika"  # a log of one line
    assert detect([PROSE] * 20 + [f"| pika | `{frame}` |\n"] + [PROSE] * 20) is None


def test_few_frames_among_many_lines_are_a_log() -> None:
    frames = [line for line in PROTON.read_text().splitlines(keepends=True) if "@" in line]
    assert detect([PROSE] * (SAMPLE - 10) + frames[:2]) == "proton"
    assert detect([PROSE] * (SAMPLE - 10) + frames[:1]) is None
    assert detect(PIKA.read_text().splitlines(keepends=True)) == "pika"


def test_a_wrapped_frame_counts() -> None:
    """A frame a logger wrapped over two lines is read joined, as the reader reads it."""
    line = next(line for line in PROTON.read_text().splitlines() if "@open(" in line)
    cut = line.index("container-id") + 5
    wrapped = [line[:cut] + "\n", "    " + line[cut:] + "\n"]
    assert detect([PROSE] * 20 + wrapped * 2) == "proton"
