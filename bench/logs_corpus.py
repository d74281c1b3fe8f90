"""Shares of a corpus of pasted trace-log excerpts that `amqpscope read` gets right (issue 42):
the frames a person counts in each excerpt that a record names, and the field values they can
read that the records agree with.

The corpus is tests/corpus/logs/: each `NN-name.log` an excerpt as people post them (wrapped in
a Docker or structured logger's JSON, a journal's, log4j's, NLog's, pm2's or kubectl's prefix,
quoted as a JSON string or a Python bytes repr, numbered by `cat -n` or an editor, with tabs or
no-break spaces, hard-wrapped, or cut mid-frame), recorded from the libraries where a version is
installable and otherwise written in the library's printed form; its `NN-name.json` names the
source, the format, and the frames in order with the fields a reader reads in them (typed by
hand from the excerpt, never from amqpscope's output: values in the JSON shapes of `read
--json`, nested fields by dotted paths, `state.type`).

Scoring: the excerpt is read as `amqpscope read` reads a file (its format detected from its
content); each expected frame is looked for among the records from where the last one matched
on, by name (protocol headers are not frames); a found frame's fields are compared value for
value; a frame not found counts all its fields as disagreeing.

    python3 bench/logs_corpus.py [--corpus DIR] [--verbose]

prints one line per excerpt that misses something (with --verbose, every excerpt) and the two
shares; exits 0. tests/test_logs_corpus.py holds the shares to 98% and 97%.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CORPUS = ROOT / "tests" / "corpus" / "logs"
sys.path.insert(0, str(ROOT))

from amqpscope.logs.detect import detect  # noqa: E402
from amqpscope.logs.reader import LogReader  # noqa: E402

#: what a reader is made from: (file name, format name) -> a LogReader
MakeReader = Callable[[str, str], LogReader]


@dataclass
class Score:
    name: str
    fmt: str | None  # the format detected
    frames: int = 0  # expected
    found: int = 0
    fields: int = 0  # expected
    agreeing: int = 0
    misses: list[str] = field(default_factory=list)
    reader: LogReader | None = None
    records: list[Any] = field(default_factory=list)


def _value(fields: dict[str, Any], path: str) -> Any:
    value: Any = fields
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


_MISSING = object()


def read(
    path: Path, make_reader: MakeReader | None = None
) -> tuple[str | None, LogReader, list[Any]]:
    """The excerpt's records as `amqpscope read` makes them (format from the content)."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    fmt = detect(lines)
    reader = (make_reader or _reader)(path.name, fmt or "proton")
    records = [r for n, line in enumerate(lines, 1) for r in reader.feed(line, n)]
    records += reader.flush()
    reader.finish()
    return fmt, reader, records


def _reader(name: str, fmt: str) -> LogReader:
    return LogReader(name, fmt)


def score(path: Path, make_reader: MakeReader | None = None) -> Score:
    """One excerpt against its sidecar."""
    truth = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
    fmt, reader, records = read(path, make_reader)
    result = Score(path.stem, fmt, reader=reader, records=records)
    frames = [r for r in records if r.kind != "protocol-header"]
    at = 0
    for want in truth["frames"]:
        result.frames += 1
        result.fields += len(want["fields"])
        match = next((i for i in range(at, len(frames)) if frames[i].name == want["name"]), None)
        if match is None:
            result.misses.append(f"no {want['name']} record")
            continue
        result.found += 1
        at = match + 1
        got = frames[match].fields
        for key, value in want["fields"].items():
            have = _value(got, key)
            if have == value:
                result.agreeing += 1
            else:
                shown = "absent" if have is _MISSING else repr(have)
                result.misses.append(f"{want['name']} {key}: {shown}, not {value!r}")
    return result


def corpus(directory: Path = CORPUS) -> list[Path]:
    return sorted(directory.glob("*.log"))


def shares(scores: Iterable[Score]) -> tuple[float, float, int, int, int, int]:
    """(frames found share, fields agreeing share, found, frames, agreeing, fields)."""
    listed = list(scores)
    frames = sum(s.frames for s in listed)
    found = sum(s.found for s in listed)
    fields = sum(s.fields for s in listed)
    agreeing = sum(s.agreeing for s in listed)
    return found / frames, agreeing / fields, found, frames, agreeing, fields


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    scores = [score(path) for path in corpus(args.corpus)]
    for s in scores:
        if s.misses or args.verbose:
            print(
                f"{s.name:32} {s.fmt or '-':12} frames {s.found}/{s.frames} fields "
                f"{s.agreeing}/{s.fields}  {'; '.join(s.misses)}"
            )
    frames, fields, found, total, agreeing, field_total = shares(scores)
    print(
        f"{len(scores)} excerpts: frames found {found}/{total} = {frames:.1%}, "
        f"field values agreeing {agreeing}/{field_total} = {fields:.1%}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
