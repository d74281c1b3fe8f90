"""A fresh clone of sources this machine has compiled takes the kept wheel instead of compiling.

`tools/compiled.py --wheel` (`make install`, `make demo`) keeps each compiled wheel per user, by
the key of its sources (~/.cache/amqpscope/wheels, or $AMQPSCOPE_WHEEL_CACHE). No compiler runs
here: the build is replaced by one that fails, so only the kept wheel can answer.
"""

from __future__ import annotations

import json
import os
import sys
import time
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import compiled  # noqa: E402  (tools/compiled.py)


def no_build(cmd: list[str], env: dict[str, str] | None = None) -> None:
    raise compiled.BuildError(f"a build ran: {cmd[:4]}")


def kept_build(cache: Path, key: str, build: str = "compiled with mypyc") -> bytes:
    """A wheel and its stamp as build_wheel keeps them, in `cache`; the wheel's bytes."""
    folder = cache / key
    folder.mkdir(parents=True)
    wheel = folder / "amqpscope-0.1.0-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("amqpscope/_build.txt", build + "\n")
    (folder / "amqpscope-0.1.0.tar.gz").write_bytes(b"sdist")
    stamp = {"key": key, "wheel": wheel.name, "sdist": "amqpscope-0.1.0.tar.gz", "build": build}
    (folder / "build.json").write_text(json.dumps(stamp))
    return wheel.read_bytes()


def test_a_kept_wheel_of_the_same_sources_is_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AMQPSCOPE_WHEEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("AMQPSCOPE_BUILD", raising=False)
    monkeypatch.setattr(compiled, "_run", no_build)
    kept = kept_build(tmp_path / "cache", compiled._wheel_key())
    wheel = compiled.build_wheel(tmp_path / "dist")
    assert wheel.parent == tmp_path / "dist" and wheel.read_bytes() == kept
    assert compiled.built_wheel(tmp_path / "dist") is not None


def test_a_wheel_of_other_sources_or_a_cache_turned_off_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AMQPSCOPE_WHEEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("AMQPSCOPE_BUILD", raising=False)
    monkeypatch.setattr(compiled, "_run", no_build)
    kept_build(tmp_path / "cache", "0" * 64)
    with pytest.raises(compiled.BuildError, match="a build ran"):
        compiled.build_wheel(tmp_path / "dist")
    kept_build(tmp_path / "cache", compiled._wheel_key())
    monkeypatch.setenv("AMQPSCOPE_WHEEL_CACHE", "off")
    with pytest.raises(compiled.BuildError, match="a build ran"):
        compiled.build_wheel(tmp_path / "dist2")


def test_the_cache_keeps_the_newest_builds(tmp_path: Path) -> None:
    files = [tmp_path / "a.whl", tmp_path / "build.json"]
    for path in files:
        path.write_text(path.name)
    cache = tmp_path / "cache"
    past = time.time() - 1000
    for i in range(compiled.CACHE_KEEP + 2):
        compiled._keep(cache, f"key{i}", files)
        os.utime(cache / f"key{i}", (past + i, past + i))  # each older than the next
    kept = sorted(d.name for d in cache.iterdir())
    assert kept == [f"key{i}" for i in range(2, compiled.CACHE_KEEP + 2)], kept
    assert (cache / "key4" / "a.whl").read_text() == "a.whl"
