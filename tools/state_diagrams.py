"""Write docs/developer/state-machines.md, the trackers' state diagrams drawn from their tables
(`amqpscope.track.diagrams`); `--check` writes nothing and exits 1 when the page differs.

    python3 tools/state_diagrams.py [--check]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from amqpscope.track.diagrams import page  # noqa: E402

PAGE = ROOT / "docs" / "developer" / "state-machines.md"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the page differs")
    args = parser.parse_args()
    text = page()
    if args.check:
        if not PAGE.exists() or PAGE.read_text(encoding="utf-8") != text:
            print(f"{PAGE.relative_to(ROOT)} differs from the tables: run {__file__}")
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
