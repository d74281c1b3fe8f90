"""The terminal report of `amqpscope diagnose`: one block per diagnosis, its proof under it.

    ERROR  close.channel  Channel 1 closed by the server: 406 PRECONDITION_FAILED on queue.declare
           c1 ch1  at 0.012 s
           PRECONDITION_FAILED - inequivalent arg ... Likely cause: ... Check ...
             14   0.011851 c1 → ch1  queue.declare ...
             15   0.012009 c1 ← ch1  channel.close 406 ...

The evidence lines are the timeline's (`render.timeline`), so they read as `amqpscope read`
shows the same frames; a frame the caller could not keep is named by its number alone.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import IO

from amqpscope.codec.frames import Frame
from amqpscope.diagnose.model import Diagnosis
from amqpscope.render.lines import safe
from amqpscope.render.timeline import Timeline

#: the column the block's text starts at, and the width explanations wrap to
INDENT = 7
WRAP = 100


def where(diagnosis: Diagnosis, first_ts: float | None) -> str:
    """`c1 ch1 link 'x' queue 'q'  at 0.012 s for 3.0 s` of a diagnosis."""
    parts = []
    if diagnosis.conn is not None:
        parts.append(f"c{diagnosis.conn}")
    if diagnosis.channel is not None:
        parts.append(f"ch{diagnosis.channel}")
    if diagnosis.link:
        parts.append(f"link {diagnosis.link!r}")
    if diagnosis.queue:
        parts.append(f"queue {diagnosis.queue!r}")
    text = " ".join(parts)
    if diagnosis.start is not None and first_ts is not None:
        text += f"  at {diagnosis.start - first_ts:.3f} s"
    if diagnosis.duration:
        text += f" for {diagnosis.duration:.3f} s"
    if diagnosis.ongoing:
        text += " (still so at the end)"
    return safe(text)


def write_diagnoses(
    diagnoses: list[Diagnosis],
    frames: dict[int, Frame],
    first_ts: float | None,
    out: IO[str],
    timeline: Callable[[], Timeline],
    what: str = "this capture",
) -> None:
    """The report: each diagnosis's block, with its evidence frames as timeline lines. `what`
    names what was diagnosed, for the line that says nothing was found in it."""
    if not diagnoses:
        out.write(f"No diagnosis: nothing in {what} looks wrong to amqpscope.\n")
        return
    pad = " " * INDENT
    for diagnosis in diagnoses:
        head = f"{diagnosis.severity.upper():<{INDENT - 1}} {diagnosis.code}  "
        out.write(head + safe(diagnosis.title) + "\n")
        out.write(pad + where(diagnosis, first_ts) + "\n")
        for line in textwrap.wrap(safe(diagnosis.explanation), WRAP - INDENT):
            out.write(pad + line + "\n")
        if diagnosis.evidence:
            out.write(pad + "evidence: frames " + ", ".join(map(str, diagnosis.evidence)) + "\n")
            out.flush()
            lines = timeline()
            lines.first_ts = first_ts
            for number in diagnosis.evidence:
                frame = frames.get(number)
                if frame is not None:
                    lines.frame(frame)
            lines.finish()
        out.write("\n")
    out.flush()
