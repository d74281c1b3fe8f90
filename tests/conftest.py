"""The suite tests the working tree's code, whatever build is installed.

`make install` installs the default build (compiled with mypyc, not editable), so a subprocess
running `python -m amqpscope.cli` or the `amqpscope` script from another folder would import that
installed copy, which is only as new as the last install. PYTHONPATH names this tree first for
every subprocess; pytest already puts it first on this process's path (tests/ is a package).
Tests of an installed build (tests/test_compiled.py, tests/test_default_build.py) run it with
PYTHONPATH removed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

ROOT = str(Path(__file__).resolve().parent.parent)
_paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
os.environ["PYTHONPATH"] = os.pathsep.join([ROOT, *(p for p in _paths if p != ROOT)])


def installed_env(**extra: str) -> dict[str, str]:
    """The environment for running an installed build: without this tree on PYTHONPATH."""
    env = {**os.environ, **extra}
    env.pop("PYTHONPATH", None)
    return env


#: tests that must not run beside each other in a parallel run (`make test`: pytest-xdist with
#: `--dist loadgroup`), each group on one worker in turn. The broker tests capture on `lo`, where
#: each other's (and the recorder's) traffic to the one RabbitMQ would land, and the soak test
#: measures memory under load; the two test files of installed builds share build/compiled and
#: build/dist; the Spark tests each start JVMs (a local session, or a standalone cluster of three
#: and a Connect server) that two at a time would only slow each other down.
GROUPS = {
    "tests/test_compiled.py": "builds",
    "tests/test_default_build.py": "builds",
    "tests/test_spark.py": "spark",
    "tests/test_spark_cluster.py": "spark",
    "tests/test_spark_datasource.py": "spark",
    "tests/test_spark_submit.py": "spark",
}
#: the longest groups first, so that no worker starts one when the others are nearly done
FIRST = ("builds", "spark", "broker")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test in a group: a named one above, or else its file (a file's tests stay on one
    worker, so its module fixtures are made once). First: xdist's worker reads the groups in its
    own hook, registered after this file and so called before it unless this one asks to be."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    order: dict[pytest.Item, int] = {}
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        group = "broker" if item.get_closest_marker("broker") else GROUPS.get(path, path)
        item.add_marker(pytest.mark.xdist_group(group))
        order[item] = FIRST.index(group) if group in FIRST else len(FIRST)
    items.sort(key=order.__getitem__)  # stable: files keep their order within a rank


#: `make test` sets it: a test skipped because an oracle that `make test` installs is missing
#: (its reason says "make test installs" or "make install installs": tests/oracle.py's
#: `missing`) fails instead, so a run without tshark, tmux, chromium or an extra cannot go green
REQUIRE_ORACLES = "AMQPSCOPE_REQUIRE_ORACLES"
_INSTALLED = re.compile(r"make (?:test|install) installs")


def _oracle_required(report: pytest.TestReport | pytest.CollectReport) -> None:
    """Turn `report`, a skip for a missing oracle `make test` installs, into a failure."""
    if os.environ.get(REQUIRE_ORACLES) != "1" or not report.skipped:
        return
    if hasattr(report, "wasxfail"):
        return
    longrepr = report.longrepr
    reason = str(longrepr[2]) if isinstance(longrepr, tuple) else str(longrepr)
    if _INSTALLED.search(reason):
        report.outcome = "failed"
        report.longrepr = f"{REQUIRE_ORACLES}=1 and an oracle is missing: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    """A skip in setup (skipif) or in the test (pytest.skip) for a missing oracle."""
    outcome = yield
    _oracle_required(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, None]:
    """A module skipped as it is imported (pytest.importorskip) for a missing oracle."""
    outcome = yield
    _oracle_required(outcome.get_result())
