"""What a run reads, found without the decoder: the inputs listed (local files, folders, globs;
URIs kept for later), captures told by their first bytes, and the decoder's options checked.

The `amqp` data source's planning worker (Spark's `plan_data_source_read`, a Python process of
its own on a session's first query) needs only these and the scans (`plan`, `lightscan`):
imported from here it does not load the decoder, pyarrow or the job (`spark.spark`, which
took ~0.2 CPU s of that process's start). `spark.spark` keeps these names too.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterable
from typing import Any

from amqpscope.capture.files import CAPTURE_MAGICS, GZIP_MAGIC, CaptureError

URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
GLOB = re.compile(r"[*?\[]")

#: the first bytes of what `open_capture` reads (pcap either way and resolution, pcapng, gzip)
MAGICS = (*CAPTURE_MAGICS, GZIP_MAGIC)
#: names a folder's frame-trace logs have (a folder's other text files are left alone; a file
#: named outright is read whatever its name)
LOG_SUFFIXES = tuple(
    f"{stem}{z}" for stem in (".log", ".trace") for z in ("", ".gz", ".xz", ".bz2")
)


def looks_like_capture(head: bytes) -> bool:
    return head[:4] in CAPTURE_MAGICS or head[:2] == GZIP_MAGIC


def looks_like_log(name: str) -> bool:
    return name.lower().endswith(LOG_SUFFIXES)


class PipelineError(Exception):
    """Bad input or a missing prerequisite: one line for the user."""


def list_inputs(inputs: Iterable[str]) -> tuple[list[str], list[str]]:
    """(local capture files, Hadoop URIs). Local folders are walked (hidden entries skipped) and
    keep only files that start like a capture; files named outright are all kept (an unreadable
    one becomes a finding). URIs (`file://` too) are listed later, by Hadoop
    (`spark.hadoop_files`)."""
    local: list[str] = []
    remote: list[str] = []
    for item in inputs:
        if URI.match(item):
            remote.append(item)
            continue
        if GLOB.search(item):
            matched = sorted(glob.glob(item, recursive=True))
            if not matched:
                raise PipelineError(f"{item}: no such files")
            for path in matched:
                local.extend(_walk(path) if os.path.isdir(path) else [os.path.abspath(path)])
        elif os.path.isdir(item):
            local.extend(_walk(item))
        elif os.path.exists(item):
            local.append(os.path.abspath(item))
        else:
            raise PipelineError(f"{item}: no such file or folder")
    seen: set[str] = set()
    local = [p for p in local if not (p in seen or seen.add(p))]  # type: ignore[func-returns-value]
    return local, remote


def _walk(folder: str) -> list[str]:
    out = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            path = os.path.join(root, name)
            if name.startswith("."):
                continue
            try:
                with open(path, "rb") as f:
                    head = f.read(4)
            except OSError:
                continue
            if looks_like_capture(head) or _is_log(path, name):
                out.append(os.path.abspath(path))
    return out


def _is_log(path: str, name: str) -> bool:
    """A folder's file named like a log (`LOG_SUFFIXES`) whose lines are frames in a
    format amqpscope reads: a folder's other logs and text files are left alone."""
    if not looks_like_log(name):
        return False
    from amqpscope.sources import input_kind

    try:
        return input_kind(path)[0] == "log"
    except (CaptureError, OSError):
        return False


def dissector_options(
    show_secrets: bool = False, redact_bodies: bool = False, keylog: str | None = None
) -> dict[str, Any]:
    """The `Dissector` keywords the executors decode with (the CLI's `--show-secrets`,
    `--redact-bodies`, `--keylog`: the key log is read here, on the driver, and its secrets
    travel with the tasks, so the executors need not see the file)."""
    options: dict[str, Any] = {}
    if show_secrets:
        options["show_secrets"] = True
    if keylog:
        from amqpscope.codec.tls import KeyLog

        try:
            with open(keylog, encoding="utf-8", errors="replace") as f:
                options["keylog"] = KeyLog(f.read())
        except OSError as exc:
            raise PipelineError(f"--keylog {keylog}: {exc.strerror or exc}") from None
    if redact_bodies:
        import inspect

        from amqpscope.dissect import Dissector

        if "redact_bodies" not in inspect.signature(Dissector).parameters:
            raise PipelineError("--redact-bodies: this amqpscope's decoder cannot drop bodies yet")
        options["redact_bodies"] = True
    return options
