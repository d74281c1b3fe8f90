"""What a user installs is the compiled build; where no C compiler works, the pure one, saying so.

Installed as a user would, into throwaway virtualenvs (they see this interpreter's packages for
the dependencies, and nothing of this tree: PYTHONPATH is dropped): the sdist built from this
tree, made into a wheel in an isolated build environment (what `python -m build` does), and
`make install`, the README's install. The compiled build must then say so in `--version`, load
its hot path from extension modules, and print what the working tree prints; with a compiler
that does not exist, the pure build must install and the build say why in one line.

`make install` builds that wheel (`python -m build`: the sdist, then the wheel from it) and
keeps it in build/dist with the digest of its sdist; when the sdist this test builds holds the
same files, that wheel is the one tested instead of compiling the same sources again.
"""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.conftest import installed_env

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import compiled  # noqa: E402  (tools/compiled.py)

CAPTURE = ROOT / "captures" / "091-ack-nack-reject.pcap"
WHERE = "import amqpscope.stream.tcp as m; print(m.__file__)"


def run(cmd: list[str], cwd: Path = Path("/"), **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd, capture_output=True, text=True, cwd=cwd, env=installed_env(**extra), timeout=1200
    )


def make_venv(where: Path) -> Path:
    """A virtualenv that sees this interpreter's packages (the dependencies), so installs into
    it take --force-reinstall: the amqpscope `make install` put there is the same version, and
    pip would otherwise call it satisfied and install nothing."""
    venv.create(where, system_site_packages=True, with_pip=True)
    return where / "bin"


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sdist")
    hatchling = [sys.executable, "-m", "hatchling", "build", "-t", "sdist", "-d", str(out)]
    built = run(hatchling, cwd=ROOT)
    assert built.returncode == 0, built.stderr[-3000:]
    (path,) = out.glob("amqpscope-*.tar.gz")
    return path


def timeline(cmd: list[str], **extra: str) -> str:
    shown = run([*cmd, "read", str(CAPTURE), "--width", "160"], **extra)
    assert shown.returncode == 0, shown.stderr[-3000:]
    return shown.stdout


def assert_compiled(bin_dir: Path) -> None:
    version = run([str(bin_dir / "amqpscope"), "--version"])
    assert version.stdout.strip() == "amqpscope 0.1.0 (compiled with mypyc)", version
    where = run([str(bin_dir / "python"), "-c", WHERE]).stdout.strip()
    assert where.startswith(str(bin_dir.parent)) and where.endswith(".so"), where
    ours = subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", "read", str(CAPTURE), "--width", "160"],
        capture_output=True,
        text=True,
    ).stdout
    assert timeline([str(bin_dir / "amqpscope")]) == ours and ours.count("\n") > 20


def sdist_wheel(sdist: Path, wheels: Path) -> Path:
    """The wheel of `sdist`, built by pip in an isolated environment; or `make install`'s, when
    it was built (by `python -m build`, the same way) from an sdist that held the same files."""
    made = compiled.built_wheel()
    if made is not None and made[1]["sdist_digest"] == compiled.sdist_digest(sdist):
        return made[0]
    built = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(wheels), str(sdist)])
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = wheels.glob("*.whl")
    return wheel


def test_the_wheel_built_from_the_sdist_is_the_compiled_build(sdist: Path, tmp_path: Path) -> None:
    wheel = sdist_wheel(sdist, tmp_path / "wheels")
    assert not wheel.name.endswith("-none-any.whl"), wheel.name  # a platform wheel
    bin_dir = make_venv(tmp_path / "venv")
    installed = run(
        [
            str(bin_dir / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--force-reinstall",
            str(wheel),
        ]
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    assert_compiled(bin_dir)


def test_without_a_c_compiler_the_pure_build_installs_and_says_why(
    sdist: Path, tmp_path: Path
) -> None:
    bin_dir = make_venv(tmp_path / "venv")
    pip = [
        str(bin_dir / "python"),
        "-m",
        "pip",
        "install",
        "-v",
        "--no-deps",
        "--force-reinstall",
        str(sdist),
    ]
    installed = run(pip, CC="amqpscope-no-such-cc")
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    said = (installed.stdout + installed.stderr).splitlines()
    why = "no C compiler (amqpscope-no-such-cc) found"
    lines = [line.strip() for line in said if line.strip().startswith("amqpscope: ")]
    assert lines == [f"amqpscope: {why}: building the pure-Python amqpscope (slower)"], lines
    version = run([str(bin_dir / "amqpscope"), "--version"])
    assert version.stdout.strip() == f"amqpscope 0.1.0 (pure Python: {why})", version
    where = run([str(bin_dir / "python"), "-c", WHERE]).stdout.strip()
    assert where.startswith(str(bin_dir.parent)) and where.endswith("tcp.py"), where
    ours = subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", "read", str(CAPTURE), "--width", "160"],
        capture_output=True,
        text=True,
    ).stdout
    assert timeline([str(bin_dir / "amqpscope")]) == ours


def test_make_install_installed_the_compiled_build() -> None:
    """The README's install (`make demo` and `make test` run `make install`, which `make test`
    ran before this suite): this interpreter's installed amqpscope is the compiled build, read
    from outside the tree. Building it once more here would only repeat that install."""
    where = run([sys.executable, "-c", WHERE]).stdout.strip()
    if where.startswith(str(ROOT)):
        pytest.skip(reason="an editable install (make dev): the working tree, pure Python")
    version = run([sys.executable, "-m", "amqpscope.cli", "--version"])
    assert version.stdout.strip() == "amqpscope 0.1.0 (compiled with mypyc)", version
    assert where.endswith(".so"), where
