"""The Spark planner's kept scans (`spark/plan.SCANS`) are read only from a folder of this
user's that no one else may write: a scan planted in a shared temp folder must not steer a plan."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from amqpscope.spark import plan

CAPTURE = str(Path(__file__).resolve().parent.parent / "captures" / "091-publish-consume.pcap")
PLANTED = {"first_ts": 12345.0, "parts": []}  # a complete capture has no edge parts


def _plant(folder: Path) -> None:
    key = plan._scan_key(CAPTURE, CAPTURE)
    assert key is not None
    (folder / key).write_text(json.dumps(PLANTED))


def test_a_scan_kept_in_our_own_folder_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "scans"
    monkeypatch.setattr(plan, "SCANS", str(folder))
    fresh = plan.scan(CAPTURE)
    assert fresh.first_ts is not None and fresh.first_ts != PLANTED["first_ts"]
    assert oct(folder.stat().st_mode & 0o777) == oct(0o700)
    assert len(list(folder.iterdir())) == 1  # kept
    _plant(folder)
    assert plan.scan(CAPTURE).first_ts == PLANTED["first_ts"]  # read back


@pytest.mark.parametrize("how", ["others may write", "a link", "another user's"])
def test_a_folder_not_ours_alone_is_neither_read_nor_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    folder = real
    if how == "others may write":
        real.chmod(0o777)
    elif how == "a link":
        folder = tmp_path / "scans"
        folder.symlink_to(real)
    else:
        if os.getuid() != 0:
            pytest.skip("giving a folder to another user needs root (make test runs as root)")
        os.chown(real, 65534, 65534)
    _plant(real)
    monkeypatch.setattr(plan, "SCANS", str(folder))
    got = plan.scan(CAPTURE)
    assert got.first_ts is not None and got.first_ts != PLANTED["first_ts"]
    assert len(list(real.iterdir())) == 1  # only the planted file: nothing kept there
