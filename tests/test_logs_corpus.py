"""Issue 42's bar on a corpus of trace-log excerpts in the forms people post
(tests/corpus/logs/, scored by bench/logs_corpus.py): at least 98% of the frames a person counts
found, at least 97% of the field values they read agreeing; the format each is in named by its
content; and every line of every excerpt a frame's, a finding's, a wrapped frame's rest or a
counted skipped line, none that looks like a frame passed over in silence.

The sidecars' frames and fields were typed by hand from reading each excerpt; the excerpts are
cut from the recorded logs in captures/ (Proton, rhea, pika, uamqp) or written in the printed
form of a library no version of which runs here (proton-j/qpid-jms, amqpnetlite, go-amqp,
pyamqp), each sidecar's `source` saying which.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

from amqpscope.logs import detect as detect_module
from amqpscope.logs import reader as reader_module
from amqpscope.logs.formats import FORMATS
from amqpscope.logs.reader import LogReader
from amqpscope.logs.unwrap import respace, unwrap

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))
import logs_corpus  # noqa: E402  (bench/logs_corpus.py)

EXCERPTS = logs_corpus.corpus()
FRAMES_BAR, FIELDS_BAR = 0.98, 0.97


def truth(path: Path) -> dict[str, object]:
    loaded: dict[str, object] = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
    return loaded


def test_the_corpus_is_forty_excerpts_of_every_format_and_form() -> None:
    assert len(EXCERPTS) >= 40
    sides = [truth(path) for path in EXCERPTS]
    assert all(side["source"] and side["frames"] for side in sides)
    formats = Counter(str(side["format"]) for side in sides)
    assert set(formats) == {"proton", "rhea", "pika", "uamqp", "proton-j", "amqpnetlite"} | {
        "go-amqp",
        "pyamqp",
    }
    forms = Counter(str(side["form"]) for side in sides)
    assert forms["cut"] >= 6 and sum(n for form, n in forms.items() if form != "plain") >= 30
    recorded = [side for side in sides if str(side["source"]).startswith("recorded:")]
    assert len(recorded) >= 25  # from the libraries that run here


@pytest.mark.parametrize("path", EXCERPTS, ids=lambda p: p.stem)
def test_each_excerpts_format_is_named_by_its_content(path: Path) -> None:
    assert logs_corpus.score(path).fmt == truth(path)["format"]


def test_frames_found_and_field_values_agreeing() -> None:
    scores = [logs_corpus.score(path) for path in EXCERPTS]
    frames, fields, *_ = logs_corpus.shares(scores)
    misses = {s.name: s.misses for s in scores if s.misses}
    assert frames >= FRAMES_BAR, misses
    assert fields >= FIELDS_BAR, misses


def test_a_broken_reader_falls_below_the_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bar can fail: a reader that peels no wrapper (JSON, bytes reprs) misses the wrapped
    excerpts' frames, one that loses the last field of every frame misses field values."""

    def nothing_peeled(line: str) -> tuple[str, str]:
        return line, ""

    with monkeypatch.context() as patch:
        patch.setattr(reader_module, "unwrap", nothing_peeled)
        patch.setattr(detect_module, "unwrap", nothing_peeled)
        frames, _, *_ = logs_corpus.shares(logs_corpus.score(path) for path in EXCERPTS)
    assert frames < FRAMES_BAR

    class Forgetful(LogReader):
        def _emit(self, logged, line, number):  # type: ignore[no-untyped-def]
            out = super()._emit(logged, line, number)
            for record in out:
                if record.fields:
                    record.fields.pop(list(record.fields)[-1])
            return out

    scores = [logs_corpus.score(path, lambda name, fmt: Forgetful(name, fmt)) for path in EXCERPTS]
    _, fields, *_ = logs_corpus.shares(scores)
    assert fields < FIELDS_BAR


_AT = re.compile(r"^[^:]+:(\d+):")


RECORDED = sorted((Path(__file__).resolve().parent.parent / "captures").glob("log-*.log"))


@pytest.mark.parametrize("path", EXCERPTS + RECORDED, ids=lambda p: p.stem)
def test_every_line_is_a_frame_a_finding_or_counted(path: Path) -> None:
    """Item 5, on every excerpt and every recorded log: the lines that start a record, the
    lines findings name (`log.bad-line`, `log.cut-line`), the lines read as the rest of a
    wrapped frame (`joined`), the transport's ends Proton logs and the skipped lines add up to
    the log's lines; a line that looks
    like a frame of any format is among the first four, or a frame printed again (go-amqp),
    never a skipped one."""
    fmt, reader, records = logs_corpus.read(path)
    assert fmt is not None
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    accounted = {r.source["line"] for r in records}
    for found in reader.findings:
        m = _AT.match(found.message)
        if m is not None and found.code in ("log.bad-line", "log.cut-line"):
            accounted.add(int(m.group(1)))
    assert reader.lines == len(lines)
    # `ends`: Proton's `-> EOS` and a listener's accepted connection, lines of no frame
    total = len(accounted) + reader.joined + reader.skipped + reader.ends
    assert total == reader.lines, (sorted(accounted), reader.joined, reader.skipped, reader.ends)
    looking = [
        n
        for n, line in enumerate(lines, 1)
        if n not in accounted
        and any(f.looks_like(respace(unwrap(line)[0])) for f in FORMATS.values())
    ]
    assert len(looking) <= reader.joined + reader.printed_again + reader.ends, looking
