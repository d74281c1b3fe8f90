"""Hatch build hook: compile the hot modules with mypyc into the wheel, wherever it can.

Every wheel build (`pip install .`, `pip install` of the sdist, `python -m build`, `make
install`) compiles when a C compiler and the Python headers are found; elsewhere the wheel is the
pure-Python build, and the build says so in one line (on stderr: `pip install -v` shows it) and
in the wheel's `amqpscope/_build.txt`, which `amqpscope --version` reads. The editable install
(`make dev`) is always pure: what developers edit is what runs. The modules compiled are the
files `[tool.mypy] files` lists in pyproject.toml: one list, so what mypy checks in `make lint`
is what mypyc compiles (mypyc enforces annotations at run time; mypy proves them first).

AMQPSCOPE_BUILD=pure skips the compiler; AMQPSCOPE_BUILD=compiled makes a failed compile an
error instead of a fallback (`tools/compiled.py`, the tests). Without it, a compiler that is
found but fails falls back to pure Python too, with the compiler's last line.

The build runs in a temporary copy of the package, never in the source tree: an extension module
left beside its .py file would shadow every later edit of an editable install.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

#: the C optimisation level (gcc -O), MYPYC_OPT_LEVEL as for mypyc's own command; chosen by
#: measurement (docs/developer/first-run.md): compile time against bench/run.py's ratios
OPT_LEVEL = "3"

#: the build script run in the work copy. mypycify type-checks and writes the C (one process);
#: the C files of the one shared library (one setuptools Extension) are then compiled on every
#: core: setuptools' `build_ext --parallel` only runs Extensions side by side, and compiles an
#: Extension's sources one after the other, so `compile` is replaced by one that hands each
#: source to a pool; a semaphore keeps the compilers running at once to `jobs` across both pools.
#: With AMQPSCOPE_BUILD_TIMES=FILE, each stage's wall and CPU seconds are appended to FILE.
SETUP = """\
import json, os, resource, threading, time
from concurrent.futures import ThreadPoolExecutor

import setuptools  # first: distutils is then setuptools' own, as mypyc's build_setup.py has it
from distutils import ccompiler
from setuptools import setup

JOBS = {jobs}
_slots = threading.BoundedSemaphore(JOBS)


def spawn(self, cmd, **kwargs):
    with _slots:
        _spawn(self, cmd, **kwargs)  # mypyc's spawn (build_setup.py), kept below


def compile(self, sources, output_dir=None, macros=None, include_dirs=None, debug=False,
            extra_preargs=None, extra_postargs=None, depends=None):
    macros, objects, extra_postargs, pp_opts, build = self._setup_compile(
        output_dir, macros, include_dirs, sources, depends, extra_postargs)
    cc_args = self._get_cc_args(pp_opts, debug, extra_preargs)
    todo = [obj for obj in objects if obj in build]
    def one(obj):
        src, ext = build[obj]
        self._compile(obj, src, ext, cc_args, extra_postargs, pp_opts)
    with ThreadPoolExecutor(JOBS) as pool:
        list(pool.map(one, todo))  # re-raises the first CompileError
    return objects


def _times():
    own, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return time.monotonic(), own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def _say(stage, start, end):
    where = os.environ.get("AMQPSCOPE_BUILD_TIMES")
    if where:
        with open(where, "a") as f:
            f.write(json.dumps({{"stage": stage, "wall": round(end[0] - start[0], 2),
                                "cpu": round(end[1] + end[2] - start[1] - start[2], 2),
                                "jobs": JOBS, "opt": {opt!r}}}) + "\\n")


start = _times()
from mypyc.build import mypycify

ext_modules = mypycify({args!r}, opt_level={opt!r}, debug_level="0", multi_file=True)
generated = _times()
_say("mypyc: type check and C generation", start, generated)
_spawn = ccompiler.CCompiler.spawn
ccompiler.CCompiler.spawn = spawn
ccompiler.CCompiler.compile = compile
setup(name="amqpscope-compiled", ext_modules=ext_modules)
_say("C compile and link (gcc)", generated, _times())
"""

#: the smallest extension source: compiles only where the compiler and Python.h both work
PROBE = "#include <Python.h>\nint amqpscope_probe(void) { return Py_IsInitialized(); }\n"


def compiler_problem(work: Path) -> str | None:
    """Why no extension can be compiled here (no compiler, no Python headers), or None.

    Uses the compiler setuptools' build_ext would use: $CC, else the one Python was built with."""
    command = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    if not command or shutil.which(command[0]) is None:
        return f"no C compiler ({command[0] if command else 'cc'}) found"
    include = sysconfig.get_paths()["include"]
    if not (Path(include) / "Python.h").exists():
        return f"no Python headers (Python.h) in {include}"
    source = work / "probe.c"
    source.write_text(PROBE)
    try:
        result = subprocess.run(
            [*command, "-c", str(source), "-I", include, "-o", str(work / "probe.o")],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the C compiler ({command[0]}) cannot run: {exc}"
    if result.returncode:
        said = result.stdout.strip().splitlines()
        return f"the C compiler ({command[0]}) fails" + (f": {said[-1]}" if said else "")
    return None


def _last_error(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()]
    return (errors or lines or ["no output"])[-1].strip()


class MypycHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        wanted = os.environ.get("AMQPSCOPE_BUILD", "")
        self._work = Path(tempfile.mkdtemp(prefix="amqpscope-mypyc-"))
        if wanted == "pure":
            self._pure(build_data, "AMQPSCOPE_BUILD=pure")
            return
        problem = compiler_problem(self._work)
        if problem:
            if wanted == "compiled":
                raise RuntimeError(f"AMQPSCOPE_BUILD=compiled, but {problem}")
            self._pure(build_data, problem)
            return
        output = self._compile()
        if output is not None:
            if wanted == "compiled":
                raise RuntimeError(f"mypyc failed:\n{output[-6000:]}")
            self._pure(build_data, f"mypyc failed: {_last_error(output)}")
            return
        suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
        # the package's modules, and the one library they share at the top level
        built_files = [
            *(self._work / "amqpscope").rglob(f"*{suffix}"),
            *self._work.glob(f"*{suffix}"),
        ]
        for built in built_files:
            build_data["force_include"][str(built)] = str(built.relative_to(self._work))
        self._note(build_data, "compiled with mypyc")
        build_data["pure_python"] = False
        build_data["infer_tag"] = True

    def _compile(self) -> str | None:
        """Compile the copy in the work folder; None when it worked, else the build's output."""
        root = Path(self.root)
        with open(root / "pyproject.toml", "rb") as f:
            files = list(tomllib.load(f)["tool"]["mypy"]["files"])
        args = ["--config-file", str(root / "pyproject.toml")]  # mypy's settings, as in lint
        shutil.copytree(
            root / "amqpscope",
            self._work / "amqpscope",
            ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd"),
        )
        jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0
        jobs = jobs or os.cpu_count() or 1
        opt = os.environ.get("MYPYC_OPT_LEVEL") or OPT_LEVEL
        setup = SETUP.format(args=[*args, *files], jobs=jobs, opt=opt)
        (self._work / "setup.py").write_text(setup)
        result = subprocess.run(
            [sys.executable, "setup.py", "build_ext", "--inplace", "--parallel", str(jobs)],
            cwd=self._work,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        return result.stdout if result.returncode else None

    def _pure(self, build_data: dict[str, Any], why: str) -> None:
        print(f"amqpscope: {why}: building the pure-Python amqpscope (slower)", file=sys.stderr)
        self._note(build_data, f"pure Python: {why}")

    def _note(self, build_data: dict[str, Any], text: str) -> None:
        """What the wheel holds, in the wheel, for `amqpscope --version` to say."""
        note = self._work / "_build.txt"
        note.write_text(text + "\n")
        build_data["force_include"][str(note)] = "amqpscope/_build.txt"

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        work = getattr(self, "_work", None)
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
