"""`make check`'s selection (issue 45's fast loop): what tests/slow.py leaves out still names
tests that exist, nothing but `slow` separates it from `make check-all`, `make test` selects
everything, and the fast loop keeps a test of every layer and a case of every corpus sweep."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

from tests import slow

ROOT = Path(__file__).resolve().parent.parent
MAKEFILE = (ROOT / "Makefile").read_text()
#: the package's layers (docs/developer/architecture.md), each a package or a module
LAYERS = ("capture", "stream", "codec", "track", "diagnose", "render", "logs", "merge", "sources")


def recipe(target: str) -> str:
    """The commands of `target` in the Makefile."""
    match = re.search(rf"^{re.escape(target)}:[^\n]*\n((?:\t[^\n]*\n)+)", MAKEFILE, re.M)
    assert match, f"no target {target} in the Makefile"
    return match.group(1)


def selection(target: str) -> str | None:
    """The marker expression (`-m`) of `target`'s pytest, with CHECK_MARKERS substituted."""
    markers = re.search(r"^CHECK_MARKERS\s*:?=\s*(.*)$", MAKEFILE, re.M)
    assert markers
    found = re.search(r'-m "([^"]*)"', recipe(target))
    if found is None:
        return None
    return found.group(1).replace("$(CHECK_MARKERS)", markers.group(1).strip())


def defined(test: str) -> bool:
    """Whether tests/...py::name is a test function of that file."""
    path, _, name = test.partition("::")
    tree = ast.parse((ROOT / path).read_text())
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name
        for node in tree.body
    )


def test_every_slow_entry_names_a_test_that_exists() -> None:
    for path in slow.FILES:
        assert (ROOT / path).is_file(), path
    stale = sorted(t for t in slow.SWEEPS | slow.TESTS if not defined(t))
    assert not stale, f"tests/slow.py names tests that are gone: {stale}"
    assert not slow.SWEEPS & slow.TESTS


def test_is_slow_reads_files_tests_and_sweep_cases() -> None:
    sweep = sorted(slow.SWEEPS)[0]
    assert slow.is_slow(sorted(slow.FILES)[0] + "::test_anything[x]")
    assert slow.is_slow(sorted(slow.TESTS)[0] + "[any-case]")
    assert slow.is_slow(sweep + "[091-rpc.pcap]")
    assert not slow.is_slow(sweep + f"[{slow.SAMPLE[0]}.pcap]")
    assert not slow.is_slow("tests/test_filter.py::test_x")


def test_check_is_check_all_without_the_slow_tests_and_make_test_runs_everything() -> None:
    everything = selection("check-all")
    assert everything and "slow" not in everything
    assert selection("check") == f"{everything} and not slow"
    assert selection("test") is None
    assert not re.search(r" -k |--deselect|--ignore", recipe("test") + recipe("check"))
    assert "slow" not in selection("unit")  # type: ignore[operator]


def layers_imported(path: Path) -> set[str]:
    """The layers a test file imports (amqpscope.LAYER..., from amqpscope import LAYER), and
    `cli` where it runs or imports the command."""
    text = path.read_text()
    found = {"cli"} if "amqpscope.cli" in text else set()
    for node in ast.walk(ast.parse(text)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "amqpscope" and len(parts) > 1 and parts[1] in LAYERS:
                found.add(parts[1])
    return found


def test_make_check_selects_a_test_of_every_layer_and_sweep() -> None:
    """Collects the suite as `make check` does: each layer and sweep keeps a selected test."""
    markers = selection("check")
    assert markers
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist", "-m", markers],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert collected.returncode == 0, collected.stdout[-2000:] + collected.stderr[-2000:]
    selected = [line for line in collected.stdout.splitlines() if "::" in line]
    assert len(selected) > 1000
    files = {line.split("::", 1)[0] for line in selected}
    covered: set[str] = set()
    for file in files:
        covered |= layers_imported(ROOT / file)
    missing = sorted({*LAYERS, "cli"} - covered)
    assert not missing, f"make check selects no test of the layers {missing}"
    for sweep in slow.SWEEPS:
        assert any(line.startswith(sweep + "[") for line in selected), f"{sweep}: no case kept"
    assert not any(slow.is_slow(line) for line in selected)
