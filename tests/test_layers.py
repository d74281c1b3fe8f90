"""The one-way flow, checked on the code: capture → stream → codec → track → diagnose → the
faces (docs/developer/architecture.md, ../shared/design/ARCHITECTURE.md).

Every `import` in every module of the package is read with `ast` (at module level, inside a
function, under `TYPE_CHECKING`: each says what the module leans on) and must point at its own
part of the package or at a part of a lower rank in `RANKS`. Parts of one rank never import
each other: so the faces (the TUI, the Spark job, the metrics, the HTML report) never lean on
one another, and nothing but the CLI (the front door, which starts every face) imports the CLI.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: the package's parts in the order the data flows; a part imports only from lower ranks
RANKS: tuple[tuple[str, ...], ...] = (
    ("amqpscope", "findings"),  # the package's identity (version, build); the findings' codes
    ("capture",),  # files, interfaces, link layers → TCP segments (the only I/O)
    ("stream",),  # reassembly
    ("codec",),  # detection, framing, decoding
    ("logs", "census"),  # frame-trace logs → frame records; what a non-AMQP capture holds
    ("dissect",),  # capture → stream → codec, per packet
    ("merge",),  # several inputs' frames → one timeline: frames matched, clock offsets
    ("sources",),  # open any input (a capture through dissect, a log through logs)
    ("track",),  # per-connection state
    ("filter", "diagnose"),  # -Y over records and tracked state; rules over tracked state
    ("live_decode", "journeys"),  # dissect + track + diagnose for live; a message's path
    ("render", "writing", "schema"),  # what every face draws and writes with
    ("tui", "spark", "metrics", "render.html"),  # the faces: none leans on another
    ("cli",),  # the front door: click commands that start every face
    ("__main__",),  # `python -m amqpscope`: the front door by another name
)

#: imports that cross the flow on purpose, each with why
ALLOWED: dict[tuple[str, str], str] = {
    # `build()` looks at whether the hot path's module is compiled (--version says it)
    ("amqpscope", "stream"): "amqpscope.build() asks how stream/tcp.py was built",
}

RANK = {part: n for n, parts in enumerate(RANKS) for part in parts}


def part_of(module: str) -> str | None:
    """The part of the package `module` belongs to (its `RANKS` name), None outside it."""
    names = module.split(".")
    if names[0] != "amqpscope":
        return None
    if len(names) == 1:
        return "amqpscope"
    if names[1] == "render" and len(names) > 2 and names[2] == "html":
        return "render.html"
    return names[1]


def module_name(path: Path, root: Path) -> str:
    names = list(path.relative_to(root).with_suffix("").parts)
    if names[-1] == "__init__":
        names.pop()
    return ".".join(names)


def is_module(name: str, root: Path) -> bool:
    """Whether `name` (dotted) is a module or package of the tree at `root`."""
    where = root.joinpath(*name.split("."))
    return where.with_suffix(".py").is_file() or (where / "__init__.py").is_file()


def imports(path: Path, root: Path) -> Iterator[tuple[int, str]]:
    """Every module `path` imports, wherever in it (line, dotted name): for `from X import Y`,
    X.Y when that is a module, else X."""
    here = module_name(path, root)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([base] if base else [])])
            for alias in node.names:
                full = f"{base}.{alias.name}"
                yield node.lineno, full if is_module(full, root) else base


def violations(root: Path) -> list[str]:
    """What in the package at `root` imports against the flow, one line each."""
    found = []
    for path in sorted((root / "amqpscope").rglob("*.py")):
        importer = part_of(module_name(path, root))
        assert importer is not None
        if importer not in RANK:
            found.append(f"{path.relative_to(root)}: part {importer!r} has no rank in RANKS")
            continue
        for line, name in sorted(set(imports(path, root))):
            imported = part_of(name)
            if imported is None or imported == importer or (importer, imported) in ALLOWED:
                continue
            where = f"{path.relative_to(root)}:{line}: imports {name}"
            if imported == "cli" and importer != "__main__":
                found.append(f"{where}: only the CLI imports the CLI")
            elif imported not in RANK:
                found.append(f"{where}: part {imported!r} has no rank in RANKS")
            elif RANK[imported] == RANK[importer]:
                found.append(f"{where}: {importer} and {imported} are side by side, neither "
                             "leans on the other")  # fmt: skip
            elif RANK[imported] > RANK[importer]:
                found.append(f"{where}: {imported} comes after {importer} in the flow")
    return found


def test_every_import_runs_with_the_flow() -> None:
    assert violations(ROOT) == []


def test_every_part_has_a_rank() -> None:
    """A new package or top-level module gets a place in the flow, not a pass."""
    parts = {part_of(module_name(p, ROOT)) for p in (ROOT / "amqpscope").rglob("*.py")}
    assert parts - set(RANK) == set()


@pytest.mark.parametrize(
    ("source", "wrong"),
    [
        ("from amqpscope.cli.common import fail\n", "only the CLI imports the CLI"),
        ("def f():\n    from amqpscope.tui import app\n", "side by side"),
        ("from .. import diagnose\n", "comes after track"),
    ],
)
def test_the_check_sees_an_import_against_the_flow(tmp_path: Path, source: str, wrong: str) -> None:
    """The check itself: a module-level, a function-level and a relative import that run the
    wrong way are each found (in a copy of a tracker module with the import added)."""
    package = tmp_path / "amqpscope"
    for part in ("", "track", "tui", "cli", "diagnose", "spark"):
        (package / part).mkdir(parents=True, exist_ok=True)
        (package / part / "__init__.py").write_text("")
    (package / "tui" / "app.py").write_text("")
    (package / "cli" / "common.py").write_text("")
    where = package / ("spark" if "tui" in source else "track") / "rules.py"
    where.write_text(source)
    found = violations(tmp_path)
    assert len(found) == 1 and wrong in found[0], found
