"""Build amqpscope with its hot path compiled by mypyc, into a virtualenv of its own.

The editable install stays pure Python (what developers edit is what runs); this puts a
compiled wheel (`tools/mypyc_hook.py`) in a separate virtualenv that imports this interpreter's
packages but not the editable sources, and prints the path of its `amqpscope` script. The
build is kept while the compiled sources, the hook and mypy's version are unchanged.

    python3 tools/compiled.py [DIR]        (default build/compiled; `make compiled`)
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: where `make compiled`, the benchmarks and the tests keep the build
DEFAULT = ROOT / "build" / "compiled"


class BuildError(Exception):
    """The compiled build failed; the message holds the end of the build's output."""


def _key() -> str:
    """A digest of everything the compiled build depends on."""
    import mypy.version

    with open(ROOT / "pyproject.toml", "rb") as f:
        files = tomllib.load(f)["tool"]["mypy"]["files"]
    digest = hashlib.sha256(mypy.version.__version__.encode())
    digest.update(sys.version.encode())
    sources = [ROOT / "pyproject.toml", ROOT / "tools" / "mypyc_hook.py"]
    sources += sorted((ROOT / "amqpscope").rglob("*.py"))  # imports reach beyond `files`
    for path in sources:
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    digest.update(repr(files).encode())
    return digest.hexdigest()


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
    editable install's path to the sources stays out."""
    ours = dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))
    where = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(where) / "amqpscope-build-deps.pth").write_text("".join(f"{p}\n" for p in ours))


def install(target: Path = DEFAULT) -> Path:
    """Build (unless current) and return the compiled build's `amqpscope` script in `target`."""
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
    wheels = target / "wheel"
    for old in wheels.glob("*.whl"):
        old.unlink()
    env = {**os.environ, "AMQPSCOPE_BUILD": "compiled"}  # a failed compile is an error here
    pip = [sys.executable, "-m", "pip"]
    _run(
        [*pip, "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(ROOT)],
        env=env,
    )
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
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    try:
        print(install(target))
    except BuildError as exc:
        print(f"compiled.py: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
