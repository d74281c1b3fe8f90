"""Retiring ended connections (`Tracker(retire=True)`, `Dissector(retire=True)`) changes what is
held, never what is said: `read`, `summary` and `diagnose` print the same bytes (stdout, stderr,
exit status) as when every connection is kept to the end (AMQPSCOPE_KEEP_ENDED=1), on every
bundled capture and log, every damaged capture and every regression capture. And what is held
per ended connection is bounded: a capture of a few thousand short connections is read with
the tracker and dissector holding a handful, and memory that does not grow with them."""

from __future__ import annotations

import gc
import re
import sys
import tracemalloc
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from amqpscope.cli import main
from amqpscope.cli.inputs import open_input
from amqpscope.diagnose import Diagnoser
from amqpscope.track.tracker import Tracker

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import churn  # noqa: E402  (bench/churn.py: the many-short-connections capture)

BUNDLED = sorted(
    str(p) for p in (ROOT / "captures").iterdir() if p.suffix in (".pcap", ".pcapng", ".log")
)
REGRESSIONS = sorted(str(p) for p in (ROOT / "tests" / "regressions").iterdir())
runner = CliRunner()


def said(args: list[str], keep: bool, monkeypatch: pytest.MonkeyPatch) -> tuple:
    if keep:
        monkeypatch.setenv("AMQPSCOPE_KEEP_ENDED", "1")
    else:
        monkeypatch.delenv("AMQPSCOPE_KEEP_ENDED", raising=False)
    result = runner.invoke(main, args)
    return result.exit_code, result.stdout, result.stderr


def same(paths: list[str], commands: list[list[str]], monkeypatch: pytest.MonkeyPatch) -> int:
    """Every command on every path says the same either way; how many retired something."""
    for path in paths:
        for command in commands:
            args = [*command, path]
            kept = said(args, True, monkeypatch)
            assert said(args, False, monkeypatch) == kept, args
    return len(paths)


WIDE = ["--width", "160", "--color", "never"]


def test_bundled_captures_say_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    commands = [
        ["read", "--json"],
        ["read", *WIDE],
        ["summary", "--json"],
        ["summary", *WIDE],
        ["diagnose", "--json"],
        ["diagnose", *WIDE],
    ]
    assert same(BUNDLED, commands, monkeypatch) > 50


def test_damaged_and_regression_captures_say_the_same(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from tests.test_damaged import damage  # tools/damage.py, loaded there

    damaged = sorted(str(tmp_path / case.file) for case in damage.build(tmp_path))
    commands = [["read", "--json"], ["summary", "--json"], ["diagnose", "--json"]]
    assert same(damaged + REGRESSIONS, commands, monkeypatch) > 50


MANY = 600


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("churn") / "churn.pcap"
    churn.build(path, MANY)
    return path


def test_many_connections_say_the_same(many: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from amqpscope.cli import spool

    monkeypatch.setattr(spool, "MEMORY", 1 << 16)  # the spool goes to its file early on
    commands = [["summary", "--json"], ["summary", "--all", *WIDE], ["diagnose", "--json"]]
    same([str(many)], commands, monkeypatch)
    _, text, _ = said(["summary", *WIDE, str(many)], False, monkeypatch)
    kinds = Counter(churn.kind_of(i, churn.SHARE_10, churn.VANISH) for i in range(MANY))
    amqp10, vanished = kinds["10"], kinds["vanish"]
    assert (amqp10, vanished) == (120, 6)
    head = f"{MANY} connections: {MANY - amqp10} AMQP 0-9-1, {amqp10} AMQP 1.0 · "
    assert text.startswith(head + f"{MANY - vanished} closed, {vanished} dropped · 1800 messages")
    assert "\nthe 10 busiest connections (most messages):\nc1  " in text
    assert f"\nthe {vanished} most troubled connections (most findings):\nc98  " in text
    assert f"{MANY - 10 - vanished} more connections not listed (--all lists every one)" in text
    assert text.count("AMQP 0-9-1  dropped (TCP FIN by client") == vanished
    assert len(re.findall(r"^c\d+  ", text, re.MULTILINE)) == 10 + vanished


def held(path: Path, retire: bool) -> tuple[int, int, int]:
    """(bytes held once `path` was summarised and diagnosed as the CLI does, tracked
    connections left, dissector connections left)."""
    tracemalloc.start()
    diagnoser = Diagnoser()
    tracker = Tracker(
        retire=retire,
        on_retire=lambda order, conn, layers, found: (
            conn.summary(),
            diagnoser.connection(conn),
            diagnoser.evidence.forget(conn.conn),
        ),
    )
    with open_input(str(path)) as source:
        for frame in source.frames(messages=False, retire=retire):
            tracker.feed(frame)
            diagnoser.feed(frame)
        tracker.finish()
        assert source.dissector is not None
        left = len(source.dissector.connections)
        gc.collect()  # TCP's and 1.0's state holds cycles: garbage, not held
        now = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return now, len(tracker.connections), left


def test_memory_per_ended_connection_is_bounded(many: Path, tmp_path: Path) -> None:
    few = tmp_path / "few.pcap"
    churn.build(few, 200)
    small, _, _ = held(few, True)
    large, tracked, open_ = held(many, True)
    assert tracked <= 5 and open_ <= 5  # connections whose TCP had not ended at the last frame
    # 400 more connections: under 3 KB each (the capture-wide journeys remember publishes,
    # bounded); kept whole, each held about 20 KB
    assert large - small < (MANY - 200) * 3 * 1024, (small, large)


def test_a_log_without_times_has_no_time_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Proton's PN_TRACE_FRM lines have no time: no latency column or sparkline of rates says
    anything there. A log with times (rhea's DEBUG lines) keeps them."""
    untimed = said(
        ["summary", str(ROOT / "captures" / "log-proton-broker.log")], False, monkeypatch
    )
    timed = said(["summary", str(ROOT / "captures" / "log-rhea-broker.log")], False, monkeypatch)
    for words in ("settle ms", "delivery rate", "unsettled peak", "█"):
        assert words in timed[1]
        assert words not in untimed[1]
    assert "│    6 │   6 │   0 │  65536" in untimed[1]  # the counts are all there


def test_the_pipeline_forgets_ended_connections_but_not_its_edges(tmp_path: Path) -> None:
    """The Spark pipeline's file decode (`rows.decode_file`) forgets each connection once its
    TCP ended, keeping its ends (`Dissector(keep_ends=True)`): the edges (connections open at
    the file's start or end, with their packets) and every row are the same as when the
    dissector keeps them all, on a file cut through the middle of connections."""
    import struct

    from amqpscope.capture.files import open_capture
    from amqpscope.spark import rows

    whole, cut = tmp_path / "whole.pcap", tmp_path / "cut.pcap"
    churn.synth.multiply(ROOT / "captures" / "091-qos-prefetch.pcap", whole, 12)
    with open_capture(whole) as capture:
        packets = list(capture)[700:1500]  # from inside one connection to inside another
    with cut.open("wb") as out:
        out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
        for p in packets:
            sec = int(p.ts)
            usec = round((p.ts - sec) * 1e6)
            out.write(struct.pack("<IIII", sec, usec, len(p.data), p.wirelen) + p.data)
    made = rows.Dissector

    def decoded(keep: bool) -> list[tuple[str, str]]:
        def dissector(**options: object) -> object:
            if keep:
                options.pop("retire", None)
                options.pop("keep_ends", None)
            return made(**options)  # type: ignore[arg-type]

        rows.Dissector = dissector  # type: ignore[assignment,misc]
        try:
            return [(kind, repr(value)) for kind, value in rows.decode_file(str(cut))]
        finally:
            rows.Dissector = made  # type: ignore[misc]

    forgetting = decoded(False)
    assert [kind for kind, _ in forgetting].count("edge") == 2
    assert forgetting == decoded(True)
