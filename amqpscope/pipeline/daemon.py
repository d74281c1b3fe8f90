"""Spark's Python daemon for local runs (`spark.python.daemon.module`), started a little faster.

Spark starts its Python workers from a daemon it launches with `pyspark.zip` and py4j's zip first
on PYTHONPATH. Python compiles what it imports from a zip afresh every time (it writes no
bytecode cache there), which made the daemon and each forked worker take about 0.8 s to start
instead of 0.3. When those zips are the copies that ship inside the pyspark installed with this
Python (pip's layout: `.../pyspark/python/lib/pyspark.zip`), the same modules are on the path
already with their bytecode cached: the zips go to the end of the path so those are found first.

Then amqpscope's decoder is imported once, here, and every worker forked from the daemon has it.
pyarrow is not: it starts threads, and the daemon must not have any when it forks.
"""

from __future__ import annotations

import os
import sys
from importlib.machinery import PathFinder


def prefer_installed() -> None:
    """Move Spark's zips of pyspark and py4j after the installed packages they copy."""
    rest = [entry for entry in sys.path if not entry.endswith(".zip")]
    pyspark = PathFinder.find_spec("pyspark", rest)
    if pyspark is None or not pyspark.submodule_search_locations:
        return
    if PathFinder.find_spec("py4j", rest) is None:
        return
    lib = os.path.join(next(iter(pyspark.submodule_search_locations)), "python", "lib")
    shipped = [e for e in sys.path if e.endswith(".zip") and os.path.dirname(e) == lib]
    sys.path[:] = [e for e in sys.path if e not in shipped] + shipped


def main() -> None:
    prefer_installed()
    from pyspark import daemon

    import amqpscope.pipeline.tasks  # noqa: F401  (imported once, before the workers fork)

    daemon.manager()


if __name__ == "__main__":
    main()
