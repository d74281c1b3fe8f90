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
import shutil
import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import is_hypothesis_test, settings

from tests import slow

ROOT = str(Path(__file__).resolve().parent.parent)

#: property tests: no deadline (a loaded 2-core machine runs an example slowly, which is no
#: failure of the code), no example database (a run depends on the seed alone), and a fixed
#: seed, AMQPSCOPE_HYPOTHESIS_SEED (0 unless given; --hypothesis-seed overrides it), which a
#: failure's report names
settings.register_profile("amqpscope", deadline=None, database=None)
settings.load_profile("amqpscope")
SEED_VARIABLE = "AMQPSCOPE_HYPOTHESIS_SEED"
HYPOTHESIS_SEED = os.environ.get(SEED_VARIABLE, "0")
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
    "tests/test_wheel.py": "builds",  # build/dist too, and build/wheelhouse
    "tests/test_spark.py": "spark",
    "tests/test_spark_cluster.py": "spark",
    "tests/test_spark_datasource.py": "spark",
    "tests/test_spark_submit.py": "spark",
    "tests/test_spark_stream.py": "spark",
    "tests/test_spark_readers.py": "spark",
}
#: the longest groups first, so that no worker starts one when the others are nearly done
FIRST = ("builds", "spark", "broker")
#: the groups' markers (pyproject.toml), for `make check` to leave out what takes minutes: the
#: builds compile (unless `make install`'s wheel is current) and Spark starts JVMs
MARKS = {"builds": "compiles", "spark": "spark"}


#: tests/oracle.py's SHARED (not imported here: it loads amqpscope's TLS code before any test)
TSHARK_SHARED = "AMQPSCOPE_TSHARK_SHARED"


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Every property test draws from the fixed seed (before Hypothesis's plugin reads it); the
    run's folder for tshark's outputs."""
    if config.getoption("--hypothesis-seed", None) is None:
        config.option.hypothesis_seed = HYPOTHESIS_SEED
    if not hasattr(config, "workerinput") and TSHARK_SHARED not in os.environ:
        # the run's tshark outputs (tests/oracle.py), made before xdist starts its workers
        folder = tempfile.mkdtemp(prefix="amqpscope-tshark-")
        os.environ[TSHARK_SHARED] = folder
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
        config.add_cleanup(lambda: os.environ.pop(TSHARK_SHARED, None))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test in a group: a named one above, or else its file (a file's tests stay on one
    worker, so its module fixtures are made once). First: xdist's worker reads the groups in its
    own hook, registered after this file and so called before it unless this one asks to be."""
    for item in items:
        mark = MARKS.get(GROUPS.get(item.nodeid.split("::", 1)[0], ""))
        if mark:
            item.add_marker(mark)
        if slow.is_slow(item.nodeid):  # what `make check` leaves out (tests/slow.py)
            item.add_marker("slow")
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
    report = outcome.get_result()
    _oracle_required(report)
    if report.failed and is_hypothesis_test(getattr(item, "obj", None)):
        seed = item.config.getoption("--hypothesis-seed", None)
        report.sections.append(
            (
                "hypothesis seed",
                f"drawn from seed {seed}: {SEED_VARIABLE}={seed} (or --hypothesis-seed={seed})"
                " runs it again",
            )
        )


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, None]:
    """A module skipped as it is imported (pytest.importorskip) for a missing oracle."""
    outcome = yield
    _oracle_required(outcome.get_result())
