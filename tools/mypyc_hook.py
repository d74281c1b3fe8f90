"""Hatch build hook: compile the hot modules with mypyc into the wheel, when asked.

`make compiled` (or `HATCH_BUILD_HOOK_ENABLE_CUSTOM=1 pip wheel .`) turns it on; otherwise, and
always for the editable install, amqpscope is pure Python. The modules compiled are the files
`[tool.mypy] files` lists in pyproject.toml: one list, so what mypy checks in `make lint` is what
mypyc compiles (mypyc enforces annotations at run time; mypy proves them first).

The build runs in a temporary copy of the package, never in the source tree: an extension module
left beside its .py file would shadow every later edit of an editable install.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SETUP = """\
from setuptools import setup
from mypyc.build import mypycify

setup(
    name="amqpscope-compiled",
    ext_modules=mypycify({args!r}, opt_level="3", debug_level="0", multi_file=True),
)
"""


class MypycHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        root = Path(self.root)
        with open(root / "pyproject.toml", "rb") as f:
            files = list(tomllib.load(f)["tool"]["mypy"]["files"])
        args = ["--config-file", str(root / "pyproject.toml")]  # mypy's settings, as in lint
        self._work = Path(tempfile.mkdtemp(prefix="amqpscope-mypyc-"))
        shutil.copytree(
            root / "amqpscope",
            self._work / "amqpscope",
            ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd"),
        )
        (self._work / "setup.py").write_text(SETUP.format(args=[*args, *files]))
        jobs = str(os.cpu_count() or 1)
        result = subprocess.run(
            [sys.executable, "setup.py", "build_ext", "--inplace", "--parallel", jobs],
            cwd=self._work,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        if result.returncode:
            raise RuntimeError(f"mypyc failed:\n{result.stdout[-6000:]}")
        suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
        # the package's modules, and the one library they share at the top level
        built_files = [
            *(self._work / "amqpscope").rglob(f"*{suffix}"),
            *self._work.glob(f"*{suffix}"),
        ]
        for built in built_files:
            build_data["force_include"][str(built)] = str(built.relative_to(self._work))
        build_data["pure_python"] = False
        build_data["infer_tag"] = True

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        work = getattr(self, "_work", None)
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
