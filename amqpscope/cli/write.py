"""`read -w OUT`: the packets that carried the selected frames, written as a capture.

The pass is `amqpscope.writing.packets.write_packets`; this is its command-line side: the rule
for OUT (`writing.outputs`), its one-line errors and exit codes, and the line on stderr that
says what the cut holds.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import IO, Any

from amqpscope.capture.writer import format_for
from amqpscope.cli.common import check_output, fail, load_keylog
from amqpscope.sources import open_captures
from amqpscope.writing.outputs import open_new
from amqpscope.writing.packets import write_packets

__all__ = ["write_cut"]


def write_cut(
    files: tuple[str, ...],
    out: str,
    accepts: Callable[[Any, float], bool],
    whole: frozenset[int],
    show_secrets: bool,
    keylog: str | None,
    count: int | None,
    force: bool = False,
) -> None:
    """Read `files`, write the cut to `out` ("-": standard output); say on stderr what it holds.
    Never over an input, nor over a file already there unless `force` (`writing.outputs`)."""
    check_output("-w", out, (*files, keylog), force)
    with open_captures(files) as capture:
        sink: IO[bytes]
        try:
            sink = sys.stdout.buffer if out == "-" else open_new(out, force)
        except FileExistsError:
            fail(f"-w {out}: that file exists; --force overwrites it", 2)
        except OSError as exc:
            fail(f"-w {out}: {exc.strerror or exc}", 1)
        try:
            fmt = format_for(out, capture.format)
            written = write_packets(
                capture, sink, fmt, accepts, whole, show_secrets, load_keylog(keylog), count
            )
        finally:
            if sink is not sys.stdout.buffer:
                sink.close()
    where = "standard output" if out == "-" else out
    lost = f"; {written.lost} packets of longer frames were no longer held" if written.lost else ""
    print(
        f"{written.packets} packets carrying {written.frames} frames written to {where}{lost}",
        file=sys.stderr,
    )
