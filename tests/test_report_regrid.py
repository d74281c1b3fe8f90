"""The report's series on one grid (`model.regrid`), against the trackers' own series as
`summary --json` prints them: nothing counted is lost or made up
by the change of interval, a level keeps its extremes, a latency its longest and its mean over
all samples, and an interval with no sample is null (the page's gap), on real captures.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from amqpscope.cli import main
from tests.test_report import CAPTURES, data_of, make

CAPTURED = ["091-ack-nack-reject", "091-publish-consume", "10-credit-starved", "10-drain"]


def summary_series(capture: str) -> list[dict]:
    result = CliRunner().invoke(main, ["summary", str(CAPTURES / capture), "--json"])
    assert result.exit_code == 0, result.output
    out = []
    for conn in json.loads(result.stdout)["connections"]:
        out += [c["series"] for c in conn.get("channels") or []]
        out += [link["series"] for s in conn.get("sessions") or [] for link in s["links"]]
    return out


def total(series: dict) -> float:
    """The milliseconds of all a latency series' samples (mean times count per bucket)."""
    pairs = zip(series["mean-ms"], series["counts"], strict=True)
    return sum(mean * count for mean, count in pairs if count)


@pytest.mark.parametrize("name", CAPTURED)
def test_one_grid_keeps_what_the_trackers_counted(tmp_path: Path, name: str) -> None:
    data = data_of(make(tmp_path, f"{name}.pcap"))
    width = data["facts"]["bucket-seconds"]
    mine = [u["series"] for u in data["units"] if u["plotted"]]
    theirs = summary_series(f"{name}.pcap")
    assert mine and len(mine) <= len(theirs)
    for grid, own in zip(mine, theirs, strict=False):
        for key, series in grid.items():
            if not series:
                continue
            source = own[key]
            assert series["bucket-seconds"] == width >= source["bucket-seconds"]
            # the grid starts at a multiple of its interval from the first frame
            assert math.isclose(series["start"] / width, round(series["start"] / width))
            if "max-ms" in series:
                assert sum(series["counts"]) == sum(source["counts"])
                longest = [v for v in series["max-ms"] if v is not None]
                assert max(longest) == max(v for v in source["max-ms"] if v is not None)
                for count, high, mean in zip(
                    series["counts"], series["max-ms"], series["mean-ms"], strict=True
                ):
                    assert (high is None) == (mean is None) == (count == 0)
                total = sum(
                    m * c for m, c in zip(source["mean-ms"], source["counts"], strict=True) if c
                )
                mean = sum(
                    m * c for m, c in zip(series["mean-ms"], series["counts"], strict=True) if c
                )
                assert math.isclose(mean, total, rel_tol=1e-3, abs_tol=1e-3)
            elif "max" in series:
                assert max(series["max"]) == max(source["max"])
                assert min(series["min"]) == min(source["min"])
            else:
                assert sum(series["counts"]) == sum(source["counts"])
