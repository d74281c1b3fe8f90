"""A cross-check with an oracle (tshark, editcap, tmux, chromium, an extra's package) never drops
out silently: where the oracle is missing the test says so as a skip, and under `make test`
(AMQPSCOPE_REQUIRE_ORACLES=1), which installs every one of them, such a skip is a failure, so a
run without them cannot go green."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.conftest import REQUIRE_ORACLES

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
#: the names the tests keep an oracle's path in (None when it is not installed)
ORACLES = {"TSHARK", "EDITCAP", "TMUX", "CHROMIUM", "CHECK"}


def _names_an_oracle(test: ast.expr) -> bool:
    for node in ast.walk(test):
        if isinstance(node, ast.Name) and node.id in ORACLES:
            return True
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name == "which":
                return True
    return False


def test_no_assertion_runs_only_when_an_oracle_is_there() -> None:
    """`if TSHARK: assert ...` passes without tshark having checked anything: a cross-check
    asks for its oracle with `tests.oracle.tshark_or_skip()` (or a skipif), which reports the
    skip."""
    found = []
    for path in sorted(TESTS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.If) and _names_an_oracle(node.test):
                body = ast.Module(body=[*node.body, *node.orelse], type_ignores=[])
                if any(isinstance(inner, ast.Assert) for inner in ast.walk(body)):
                    found.append(f"{path.name}:{node.lineno}")
    assert not found, f"assertions that only run when an oracle is installed: {found}"


SKIPS = """
import pytest
from tests.oracle import missing

def test_skipped_in_the_test():
    pytest.skip(missing("tshark"))

@pytest.mark.skipif(True, reason=missing("tmux"))
def test_skipped_by_a_marker():
    pass

def test_skipped_for_another_reason():
    pytest.skip("giving a folder to another user needs root")

@pytest.mark.xfail(reason="make test installs it, but this is an expected failure")
def test_expected_to_fail():
    assert False
"""
IMPORT = """
import pytest
pytest.importorskip("no_such_module_anywhere", reason="the tui extra (make install installs it)")

def test_never_collected():
    pass
"""


def outcomes(tmp_path: Path, required: bool) -> dict[str, str]:
    """Each test's outcome in a pytest run of SKIPS and IMPORT with this suite's hooks."""
    (tmp_path / "conftest.py").write_text(
        "from tests.conftest import pytest_make_collect_report, pytest_runtest_makereport\n"
    )
    (tmp_path / "test_skips.py").write_text(SKIPS)
    (tmp_path / "test_import.py").write_text(IMPORT)
    env = {k: v for k, v in os.environ.items() if k != REQUIRE_ORACLES}
    if required:
        env[REQUIRE_ORACLES] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    report = tmp_path / "report.xml"
    command = [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:xdist"]
    command += ["-p", "no:cacheprovider", "--continue-on-collection-errors"]
    command += [f"--junitxml={report}", str(tmp_path)]
    subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, timeout=120)
    out: dict[str, str] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        kind = kinds[0] if kinds else "passed"
        if kind == "skipped" and case.find("skipped").get("type") == "pytest.xfail":
            kind = "xfail"
        out[case.get("name")] = kind
    return out


def test_a_missing_oracle_is_a_skip_and_under_make_test_a_failure(tmp_path: Path) -> None:
    plain = outcomes(tmp_path, required=False)
    assert plain == {
        "test_skipped_in_the_test": "skipped",
        "test_skipped_by_a_marker": "skipped",
        "test_skipped_for_another_reason": "skipped",
        "test_expected_to_fail": "xfail",
        "test_import": "skipped",
    }, plain
    required = outcomes(tmp_path, required=True)
    assert required == {
        "test_skipped_in_the_test": "failure",
        "test_skipped_by_a_marker": "error",  # in setup, where skipif is evaluated
        "test_skipped_for_another_reason": "skipped",  # not an oracle `make test` installs
        "test_expected_to_fail": "xfail",
        "test_import": "error",
    }, required


def test_make_test_requires_the_oracles_it_installs() -> None:
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^test:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe is not None
    pytest_line = next(line for line in recipe.group(1).splitlines() if "pytest" in line)
    assert f"{REQUIRE_ORACLES}=1" in pytest_line
