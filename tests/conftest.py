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
from pathlib import Path

ROOT = str(Path(__file__).resolve().parent.parent)
_paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
os.environ["PYTHONPATH"] = os.pathsep.join([ROOT, *(p for p in _paths if p != ROOT)])


def installed_env(**extra: str) -> dict[str, str]:
    """The environment for running an installed build: without this tree on PYTHONPATH."""
    env = {**os.environ, **extra}
    env.pop("PYTHONPATH", None)
    return env
