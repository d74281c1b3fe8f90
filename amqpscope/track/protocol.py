"""What every connection tracker is, whatever its AMQP version: the one protocol `Tracker` (the
tracking layer's front door) drives, and both `amqp091.ConnectionTracker` and
`amqp10.ConnectionTracker` implement (`tracker.py` has mypy check that they do).

A connection tracker is sans-IO: frame records in, in capture order; findings out, as values the
caller places on the frame that raised them; its state read back by `summary()` and, for what is
version-specific, by the readers that know the version (diagnose, metrics).
"""

from __future__ import annotations

from typing import Any, Protocol

from amqpscope.codec.frames import Frame
from amqpscope.findings import Finding


class ConnectionTrackerProtocol(Protocol):
    """One AMQP connection's tracker."""

    conn: int  # the connection's number (the frames' `conn`)
    client: str  # endpoints, "address:port"
    server: str
    version: str  # the AMQP version its frames were decoded as
    source: str  # what findings call the input: "capture", "log"
    frames: int  # frames fed

    def feed(self, frame: Frame, out: list[Finding] | None = None) -> list[Finding]:
        """Apply one frame of this connection; return the findings it raises, appended to `out`
        when given (a caller's list, reused from frame to frame: most frames raise nothing)."""
        ...

    def transport(self, frame: Frame, gone: bool = True) -> list[Finding]:
        """The TCP connection ended (a `transport` record): `gone`, the client sends no more."""
        ...

    def finish(self) -> list[Finding]:
        """The input ended: findings for what was left open."""
        ...

    def summary(self) -> dict[str, Any]:
        """The connection as `amqpscope summary --json` shows it."""
        ...
