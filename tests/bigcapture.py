"""Big captures made at run time (never committed) from a recorded one, for tests that need a
run long enough to matter (progress bar, closed pipes): `bench/synth.py`'s `multiply`."""

from __future__ import annotations

import sys
from pathlib import Path

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
sys.path.insert(0, str(CAPTURES.parent / "bench"))

from synth import build_091, multiply  # noqa: E402

__all__ = ["CAPTURES", "build_091", "multiply"]
