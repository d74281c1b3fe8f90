"""A snapshot test whose snapshot is missing fails (it used to write what it printed and pass,
so it passed on any output); only AMQPSCOPE_UPDATE_SNAPSHOTS=1 writes one. Each snapshot test is
run here against an empty folder in place of tests/snapshots."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests import snapshot, test_inspect, test_timeline

#: each snapshot test with one of its cases, and the module whose SNAPSHOTS it reads
CASES: list[tuple[Any, Callable[[], None]]] = [
    (test_timeline, lambda: test_timeline.test_timeline_snapshot("10-outcomes.pcap", {}, 80)),
    (test_timeline, lambda: test_timeline.test_summary_snapshot("091-rpc.pcap", 80)),
    (
        test_inspect,
        lambda: test_inspect.test_snapshot("10-send-receive.pcap", ["-c", "14"], 80),
    ),
]


@pytest.mark.parametrize(("module", "call"), CASES, ids=["timeline", "summary", "inspect"])
def test_a_missing_snapshot_fails_and_names_the_flag(
    module: Any, call: Callable[[], None], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(module, "SNAPSHOTS", tmp_path)
    monkeypatch.delenv(snapshot.FLAG, raising=False)
    with pytest.raises(pytest.fail.Exception, match=f"{snapshot.FLAG}=1 writes it"):
        call()
    assert list(tmp_path.iterdir()) == []  # nothing written
    monkeypatch.setenv(snapshot.FLAG, "1")
    call()  # asked: written, and then it matches
    (written,) = tmp_path.iterdir()
    monkeypatch.delenv(snapshot.FLAG)
    call()
    written.write_text(written.read_text() + "changed\n")
    with pytest.raises(AssertionError):
        call()
