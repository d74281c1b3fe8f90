"""The `amqpscope` command: wires capture, dissection and rendering; the only place that prints.

One module per command; what they share (the group, options, output sinks, the exit-code
promise) is in `common`. Exit codes: 0 success (findings in the traffic are output, not
failure), 1 unreadable input, 2 bad usage. No traceback reaches the user: unexpected errors
become one line on stderr.
"""

from __future__ import annotations

# each command's module is imported when the command is asked for (`common.Program`)
from amqpscope.cli.common import PIPED_WIDTH, main

__all__ = ["PIPED_WIDTH", "main"]
