"""One connection's state, fed its frames in capture order (STUB: being written)."""

from __future__ import annotations

from typing import Any

from amqpscope.codec.frames import Frame
from amqpscope.findings import Finding


class ConnectionTracker:
    """Frames of one connection in; state, and findings about what the frames mean, out."""

    def __init__(self, conn: int, client: str, server: str, version: str) -> None:
        self.conn = conn
        self.client = client
        self.server = server
        self.version = version

    def feed(self, frame: Frame) -> list[Finding]:
        """Apply one frame; return the findings it raises (the caller puts them on the frame)."""
        return []

    def finish(self) -> list[Finding]:
        """The capture ended: findings for what was left open (unsettled, unacked, ...)."""
        return []

    def summary(self) -> dict[str, Any]:
        """The connection as `amqpscope summary --json` shows it."""
        return {
            "id": self.conn,
            "version": self.version,
            "client": self.client,
            "server": self.server,
        }
