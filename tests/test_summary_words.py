"""The text summary says in words what the JSON holds as maps and lists: the peers' frame
limits per direction (`max-frame 4294967295 → / ← 32768`), and nothing printed as raw JSON on
any bundled capture."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from amqpscope.cli import main
from amqpscope.codec.amqp10.tree import amqp_tree
from amqpscope.render.summary import _words
from tests.crafted import CAPTURES, rewrite

JSONISH = re.compile(r'\{"|":|\["|\{\}|\[\]')


def summary(path: Path, *args: str) -> str:
    """`summary` run in this process, piped (the text is what is checked here, not the exit)."""
    result = CliRunner().invoke(main, ["summary", str(path), *args])
    assert result.exit_code == 0, (result.exit_code, result.stderr, result.exception)
    return result.stdout


def server_frame_limit(value: int):  # type: ignore[no-untyped-def]
    """The server's open with max-frame-size `value` (a uint, 0x70, in the recording)."""

    def change(frame):  # type: ignore[no-untyped-def]
        if frame.name != "open" or frame.direction != "s2c":
            return None
        tree = amqp_tree(frame.data, frame.kind)
        node = next(n for n in tree.walk() if n.name == "max-frame-size")
        assert frame.data[node.offset] == 0x70 and node.length == 5
        start = node.offset + 1
        return frame.data[:start] + value.to_bytes(4, "big") + frame.data[start + 4 :]

    return change


def test_different_frame_limits_read_in_words(tmp_path: Path) -> None:
    path = rewrite(
        CAPTURES / "10-send-receive.pcap", tmp_path / "limits.pcap", server_frame_limit(2**32 - 1)
    )
    document = json.loads(summary(path, "--json"))
    holds = document["connections"][0]["open"]["holds"]["max-frame-size"]
    assert holds == {"c2s": 2**32 - 1, "s2c": 32768}  # each direction: its receiver's limit
    text = summary(path, "--width", "200")
    assert "max-frame 4294967295 → / ← 32768" in text
    assert not JSONISH.search(text)


@pytest.mark.parametrize("path", sorted(CAPTURES.glob("*.pcap*")), ids=lambda p: p.name)
def test_no_summary_value_is_printed_as_json(path: Path) -> None:
    assert not JSONISH.search(summary(path, "--width", "250"))


def test_words_of_maps_and_lists() -> None:
    assert _words({"c2s": 1, "s2c": 1}) == "1"
    assert _words({"c2s": None, "s2c": 60000}) == "← 60000"
    assert _words({"address": "q", "durable": True, "timeout": None}) == "address q, durable"
    assert _words(["a", {"k": 2}, []]) == "a, k 2"
