"""The `amqpscope` command: wires capture, dissection and rendering; the only place that prints.

One module per command; what they share (the group, options, output sinks, the exit-code
promise) is in `common`. Exit codes: 0 success (findings in the traffic are output, not
failure), 1 unreadable input, 2 bad usage. No traceback reaches the user: unexpected errors
become one line on stderr.
"""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType


def _interrupted(_signum: int, _frame: FrameType | None) -> None:
    """Ctrl-C while the modules load (half a second, pure Python): the promised line and 130,
    not a KeyboardInterrupt's traceback out of whichever import it hit. At once: nothing was
    written yet, and an exception raised here may land where importlib ignores it."""
    os.write(2, b"amqpscope: interrupted\n")
    os._exit(130)


# only where Ctrl-C would raise KeyboardInterrupt (not where it is ignored: `cmd &`)
_quiet = (
    threading.current_thread() is threading.main_thread()
    and signal.getsignal(signal.SIGINT) is signal.default_int_handler
)
if _quiet:
    signal.signal(signal.SIGINT, _interrupted)
try:
    # each command's module is imported when the command is asked for (`common.Program`)
    from amqpscope.cli.common import PIPED_WIDTH, main
finally:
    if _quiet:  # from here on, `guarded` and `Program.invoke` say it
        signal.signal(signal.SIGINT, signal.default_int_handler)

__all__ = ["PIPED_WIDTH", "main"]
