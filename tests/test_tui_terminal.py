"""`amqpscope tui` in a real terminal (tmux): the screen appears, keys work, `q` and Ctrl-C
leave the terminal as it was, a dumb terminal gets a message; and a capture of a million frames
made at run time opens, scrolls to its end and quits clean. (Timings are in bench/tui_open.py.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("textual", reason="the TUI needs the tui extra (make install installs it)")

from amqpscope.capture.files import open_capture
from amqpscope.dissect import Dissector
from tests.bigcapture import CAPTURES, multiply
from tests.tuiterm import DONE, TMUX, Pane

pytestmark = pytest.mark.skipif(
    TMUX is None, reason="tmux is not installed (make test installs it)"
)

#: a row of the frame list (the tree's pane on its left), and the status line's row count
FIRST_ROW = re.compile(r"(?:^|│)\s*1\s+0\.000000 c1 ", re.MULTILINE)
AT_FIRST = re.compile(r"· row 1\s*$", re.MULTILINE)


def records_in(path: Path) -> int:
    """How many records (frames and TCP ends) amqpscope reads in `path`: the count the status
    line shows, from the decoder rather than written here."""
    with open_capture(str(path)) as capture:
        return sum(1 for _ in Dissector().run(capture))


def ended_clean(pane: Pane) -> None:
    """The command ended with 0 and the terminal is back: no alternate screen, cooked mode."""
    pane.wait(lambda s: f"{DONE}end" in s, 30)
    screen = pane.text()
    assert f"{DONE} rc=0" in screen, screen
    assert re.search(r"(?<!-)icanon (?<!-)echo|(?<!-)echo (?<!-)icanon", screen), screen
    assert not pane.alternate_screen()
    assert "Traceback" not in screen


def test_opens_helps_and_quits_with_q_and_ctrl_c() -> None:
    frames = f"{records_in(CAPTURES / '10-outcomes.pcap')} frames"
    for key in ("q", "C-c"):
        pane = Pane([str(CAPTURES / "10-outcomes.pcap")], 100, 30)
        try:
            pane.wait(lambda s: bool(FIRST_ROW.search(s)) and frames in s, 60)
            pane.press("?", lambda s: "amqpscope tui — keys" in s)
            pane.press("Escape", lambda s: "amqpscope tui — keys" not in s)
            pane.keys(key)
            ended_clean(pane)
        finally:
            pane.close()


def test_a_dumb_terminal_gets_a_message() -> None:
    pane = Pane([str(CAPTURES / "10-outcomes.pcap")], 100, 30, env="TERM=dumb")
    try:
        pane.wait(lambda s: f"{DONE}end" in s, 60)
        screen = pane.text()
        assert "amqpscope: tui needs a terminal that can draw (TERM=dumb)" in screen
        assert f"{DONE} rc=2" in screen
    finally:
        pane.close()


MILLION_COPIES = 6098  # of 091-qos-prefetch's 165 records: 1,006,170


def test_a_million_frames_open_scroll_to_the_end_and_quit(tmp_path: Path) -> None:
    big = tmp_path / "million.pcap"
    multiply(CAPTURES / "091-qos-prefetch.pcap", big, MILLION_COPIES)
    total = records_in(CAPTURES / "091-qos-prefetch.pcap") * MILLION_COPIES
    last_row = re.compile(rf"│\s*{total}\s+\d+\.\d{{6}} c{MILLION_COPIES} ", re.MULTILINE)
    pane = Pane([str(big)], 120, 40)
    try:
        pane.wait(lambda s: bool(FIRST_ROW.search(s)), 120)  # the first screen, while reading
        pane.wait(lambda s: f"{total:,} frames" in s and "reading" not in s, 1800, every=1)
        pane.press("End", lambda s: f"row {total:,}" in s and bool(last_row.search(s)), 60)
        pane.press("Home", lambda s: bool(FIRST_ROW.search(s) and AT_FIRST.search(s)), 60)
        pane.keys("q")
        ended_clean(pane)
    finally:
        pane.close()
