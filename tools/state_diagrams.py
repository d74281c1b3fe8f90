"""Write the trackers' state diagrams, drawn from their tables (`amqpscope.track.diagrams`), into
docs/developer/state-machines.md between its BEGIN and END lines (the rest of the page is
written by hand); `--check` writes nothing and exits 1 when the drawn part differs.

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
    old = PAGE.read_text(encoding="utf-8") if PAGE.exists() else None
    text = page(old)
    if args.check:
        if old != text:
            print(f"{PAGE.relative_to(ROOT)} differs from the tables: run {__file__}")
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
