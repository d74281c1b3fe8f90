"""Spark's Python daemon for local runs (`spark.python.daemon.module`), started a little faster.

Spark starts its Python workers from a daemon it launches with `pyspark.zip` and py4j's zip first
on PYTHONPATH. Python compiles what it imports from a zip afresh every time (it writes no
bytecode cache there), which made the daemon and each forked worker take about 0.8 s to start
instead of 0.3. When those zips are the copies that ship inside the pyspark installed with this
Python (pip's layout: `.../pyspark/python/lib/pyspark.zip`), the same modules are on the path
already with their bytecode cached: the zips go to the end of the path so those are found first.

Then amqpscope's decoder and Spark's worker loop are imported once, here (`preload`), and every
worker forked from the daemon has them. pyarrow is not: it starts threads, and the daemon must
not have any when it forks.

Spark starts other Python workers with its own `pyspark.daemon`, whatever this setting says: the
planners of a Python data source (`create_data_source`, `plan_data_source_read`, one daemon and
one worker each on a session's first query). They import pyspark from the zips too, which cost
a session's first `amqp` query about 1.7 CPU seconds. `spark_home` gives a local JVM a Spark home
without the zips, so that every worker imports the installed pyspark.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
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


def spark_home(pyspark_dir: str) -> str | None:
    """A Spark home for a local JVM: links to the installed pyspark's `bin`, `jars`, ... but no
    `python/lib`, so Spark puts no zip of pyspark on its workers' path (it adds
    `$SPARK_HOME/python/lib/pyspark.zip` and py4j's zip first, and skips neither when they
    exist). Made once in the temporary folder, per pyspark install and user; None when the
    install has no such zips (not pip's layout) or the links cannot be made."""
    lib = os.path.join(pyspark_dir, "python", "lib")
    if not os.path.isfile(os.path.join(lib, "pyspark.zip")):
        return None
    key = hashlib.sha256(os.path.realpath(pyspark_dir).encode()).hexdigest()[:12]
    home = os.path.join(tempfile.gettempdir(), f"amqpscope-spark-home-{os.getuid()}-{key}")
    entries = [e for e in os.listdir(pyspark_dir) if e in ("bin", "sbin", "jars", "conf", "data")]
    if "bin" not in entries:
        return None
    if _ours(home, pyspark_dir, entries):
        return home
    try:
        made = tempfile.mkdtemp(prefix="amqpscope-spark-home-")
        for entry in entries:
            os.symlink(os.path.join(pyspark_dir, entry), os.path.join(made, entry))
        try:
            os.rename(made, home)  # atomic: another run making it at once keeps its own
        except OSError:
            for entry in entries:
                os.unlink(os.path.join(made, entry))
            os.rmdir(made)
    except OSError:
        return None
    return home if _ours(home, pyspark_dir, entries) else None


def _ours(home: str, pyspark_dir: str, entries: list[str]) -> bool:
    """Whether `home` is a folder of this user's (not a link, nor another user's in a shared
    temporary folder) holding exactly the links to `pyspark_dir`'s `entries`."""
    try:
        found = os.lstat(home)
        if not os.path.isdir(home) or os.path.islink(home) or found.st_uid != os.getuid():
            return False
        return sorted(os.listdir(home)) == sorted(entries) and all(
            os.readlink(os.path.join(home, e)) == os.path.join(pyspark_dir, e) for e in entries
        )
    except OSError:
        return False


def preload() -> None:
    """What every worker forked from the daemon would import for itself, imported once here:
    Spark's worker loop (`pyspark.worker`, ~0.1 CPU s a worker, which `pyspark.daemon` imports
    only after the fork) and the decoder. Nothing that starts a thread: the daemon forks."""
    import pyspark.worker  # noqa: F401

    import amqpscope.spark.tasks  # noqa: F401


def main() -> None:
    prefer_installed()
    from pyspark import daemon

    preload()
    daemon.manager()


if __name__ == "__main__":
    main()
