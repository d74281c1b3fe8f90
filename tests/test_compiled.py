"""The mypyc-compiled build (`tools/compiled.py`, `make compiled`) says what the pure one says.

mypyc turns annotations into checks at run time and classes into C structs: a wrong annotation
or a dynamic trick that the interpreter forgives becomes a TypeError or AttributeError only in
the compiled build. So both builds run the CLI over every bundled capture, every damaged
capture (`tools/damage.py`) and every mutation of one (`test_mutation.mutations`), with
`read --json`, `summary --json` and the terminal timeline (uncoloured, and coloured as the ANSI
sink writes it), and everything they write (stdout, stderr, exit status) must be the same, byte
for byte.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import compiled  # noqa: E402  (tools/compiled.py)

from tests.conftest import installed_env  # noqa: E402


def env_for(python: str) -> dict[str, str] | None:
    """This interpreter runs the working tree (PYTHONPATH, tests/conftest.py); the compiled
    build's runs without it, or they would import the working tree's pure sources."""
    return None if python == sys.executable else installed_env()


CAPTURES = sorted(str(p) for p in (ROOT / "captures").glob("*.pcap*"))
#: frame-trace logs (logs/: the reader and Proton grammar are compiled too)
LOGS = sorted(str(p) for p in (ROOT / "captures").glob("log-*.log"))

#: run by each build's interpreter: the CLI in-process over every capture, as JSON
DUMP = r"""
import json, sys
from click.testing import CliRunner
from amqpscope import build
from amqpscope.cli import main

out = {"build": build()}
runner = CliRunner()
for path in sys.argv[1:]:
    for args in (["read", "--json", path], ["summary", "--json", path],
                 ["read", path, "--width", "160", "--color", "never"],
                 ["read", path, "--width", "100", "--color", "always"]):
        result = runner.invoke(main, args)
        out[" ".join(args)] = [result.exit_code, result.stdout, result.stderr]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def script() -> Path:
    try:
        return compiled.install()
    except compiled.BuildError as exc:
        pytest.fail(f"the compiled build failed: {exc}")


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    from tests.test_damaged import damage  # tools/damage.py, loaded there

    out = tmp_path_factory.mktemp("damaged")
    return sorted(str(out / case.file) for case in damage.build(out))


@pytest.fixture(scope="module")
def mutated(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Every capture's deterministic mutations (`test_mutation.mutations`): the error paths."""
    from tests.test_mutation import FILES, mutations

    out = tmp_path_factory.mktemp("mutated")
    paths = []
    for source in FILES:
        for i, (_, data) in enumerate(mutations(source)):
            path = out / f"{source.stem}-{i}{source.suffix}"
            path.write_bytes(data)
            paths.append(str(path))
    return paths


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The recorded logs, each also damaged (lines cut short, wrapped, joined, the last one
    unterminated), and lines at the edges of the direct path and of the Proton cache."""
    from tests.test_logs_direct import ALIKE, EDGES

    out = tmp_path_factory.mktemp("logs")
    paths = list(LOGS)
    for source in LOGS:
        lines = Path(source).read_text().splitlines(keepends=True)
        damaged = []
        for i, line in enumerate(lines):
            if i % 7 == 3:
                line = line[: len(line) // 2] + "\n"  # cut short
            elif i % 11 == 5:
                line = line[: len(line) // 3] + "\n    " + line[len(line) // 3 :]  # wrapped
            damaged.append(line)
        path = out / f"damaged-{Path(source).name}"
        path.write_text("".join(damaged).rstrip("\n")[:-5])
        paths.append(str(path))
    edges = out / "edges.log"
    lines = [*EDGES, *(line for group in ALIKE for line in group)]
    edges.write_text("".join(line + "\n" for line in lines + lines))
    return [*paths, str(edges)]


def dump(python: str, paths: list[str]) -> dict[str, Any]:
    result = subprocess.run(
        [python, "-c", DUMP, *paths],
        capture_output=True,
        text=True,
        cwd="/",
        check=False,
        env=env_for(python),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def test_the_compiled_build_is_compiled(script: Path) -> None:
    version = subprocess.run(
        [script, "--version"], capture_output=True, text=True, cwd="/", env=installed_env()
    )
    assert version.stdout.strip().endswith("(compiled with mypyc)")
    where = subprocess.run(
        [
            script.parent / "python",
            "-c",
            "import amqpscope.codec.connection as m; print(m.__file__)",
        ],
        capture_output=True,
        text=True,
        cwd="/",
        env=installed_env(),
    )
    assert where.stdout.strip().endswith(".so") and str(script.parent.parent) in where.stdout


def test_both_builds_say_the_same(
    script: Path, damaged: list[str], mutated: list[str], logs: list[str]
) -> None:
    paths = CAPTURES + damaged + mutated + logs
    pure = dump(sys.executable, paths)
    fast = dump(str(script.parent / "python"), paths)
    assert (pure.pop("build"), fast.pop("build")) == ("pure", "compiled")
    assert pure.keys() == fast.keys() and len(pure) == 4 * len(paths)
    differ = [key for key in pure if pure[key] != fast[key]]
    assert not differ, f"{len(differ)} differ, first: {differ[0]}: {fast[differ[0]][2][-2000:]}"
    # the runs did work: frames decoded, findings reported on the damaged captures
    lines = sum(pure[f"read --json {p}"][1].count("\n") for p in CAPTURES)
    assert lines > 20 * len(CAPTURES)
    assert all(pure[f"read --json {p}"][1].count("\n") >= 3 for p in LOGS)  # pika's: few
    said = [pure[f"read --json {p}"][1] + pure[f"read --json {p}"][2] for p in logs]
    assert sum(1 for text in said if "bad-line" in text or "cut-line" in text) > 2
    assert sum(1 for p in damaged if "amqpscope: " in pure[f"read --json {p}"][2]) > 5


def test_the_bench_runs_the_compiled_build(script: Path, tmp_path: Path) -> None:
    args = ["--messages-091", "40", "--messages-10", "20", "--no-tshark", "--builds", "compiled"]
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), *args, "--keep", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("| 0-9-1 |")]
    assert len(rows) == 4 and all("| compiled |" in row for row in rows)


#: run by each build's interpreter: a connection cut across two files stitched without Spark
#: (stage 1 per file, `stitch.groups`, stage 3), which stages the edge packets with pickle
STITCH = r"""
import json, sys
from amqpscope.spark import stitch, tasks
first, second, out = sys.argv[1:4]
records = list(tasks.decode_files([(p, p, None) for p in (first, second)], out, "t", {}))
metas = [value for kind, value in records if kind == "meta"]
edges = [value for kind, value in records if kind == "edge"]
order = {m["capture"]: i for i, m in enumerate(sorted(metas, key=lambda m: m["first_ts"]))}
for edge in edges:
    edge.order = order[edge.capture]
groups = stitch.groups(edges, stitch.MAX_GAP)
done = list(tasks.finish([("group", (f"g{i}", g)) for i, g in enumerate(groups)], out, "t", {}))
print(json.dumps({"groups": [[(e.capture, e.conn) for e in g] for g in groups], "rows": done}))
"""


def test_both_builds_stitch_a_connection_cut_across_files(script: Path, tmp_path: Path) -> None:
    """The staged packets of an edge connection cross processes by pickle: a compiled
    `RawPacket` (a C struct) must not be what is pickled."""
    pytest.importorskip(
        "pyarrow", reason="pyarrow comes with the spark extra (make install installs it)"
    )
    from tests.test_spark import SPLIT, split_pcap

    first, second = tmp_path / "cap.pcap0", tmp_path / "cap.pcap1"
    split_pcap(SPLIT, first, second)
    said = {}
    for build, python in (("pure", sys.executable), ("compiled", str(script.parent / "python"))):
        args = [python, "-c", STITCH, str(first), str(second), str(tmp_path / build)]
        result = subprocess.run(
            args, capture_output=True, text=True, cwd="/", check=False, env=env_for(python)
        )
        assert result.returncode == 0, (build, result.stderr[-3000:])
        said[build] = json.loads(result.stdout)
    assert said["pure"] == said["compiled"]
    assert said["pure"]["groups"] == [[[str(first), 1], [str(second), 1]]]
    assert said["pure"]["rows"][0]["frames"] > 0


#: run by each build's interpreter: every record the Spark workers make of each capture (the
#: pipeline's rows, deliveries and tables modules are compiled too), hashed per capture
ROWS = r"""
import hashlib, json, sys
from amqpscope.spark import rows, tables
out = {}
for path in sys.argv[1:]:
    digest = hashlib.sha256()
    for kind, value in rows.decode_file(path):
        if kind == "packets":
            value = (value[0], value[1], [tuple(p.data) for p in value[2]])
        elif kind == "meta":
            value = sorted(value.items())
        digest.update(repr((kind, value)).encode())
    out[path] = digest.hexdigest()
print(json.dumps(out))
"""


def test_both_builds_make_the_same_table_rows(
    script: Path, damaged: list[str], mutated: list[str]
) -> None:
    pytest.importorskip(
        "pyarrow", reason="pyarrow comes with the spark extra (make install installs it)"
    )
    paths = CAPTURES + damaged + mutated
    said = {}
    for build, python in (("pure", sys.executable), ("compiled", str(script.parent / "python"))):
        result = subprocess.run(
            [python, "-c", ROWS, *paths],
            capture_output=True,
            text=True,
            cwd="/",
            check=False,
            env=env_for(python),
        )
        assert result.returncode == 0, (build, result.stderr[-3000:])
        said[build] = json.loads(result.stdout)
    differ = [p for p in paths if said["pure"][p] != said["compiled"][p]]
    assert len(said["pure"]) == len(set(paths)) and not differ, differ[:3]
