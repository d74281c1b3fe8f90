"""Across connections: request/reply pairs and message journeys (STUB: being written)."""

from __future__ import annotations

from typing import Any

from amqpscope.codec.frames import Frame


class Correlator:
    """Every 0-9-1 frame of the capture in; RPC pairs and per-queue journeys out."""

    def feed(self, frame: Frame) -> None:
        """Note one frame (only those that complete a message matter)."""

    def summary(self) -> dict[str, Any]:
        return {"rpc": [], "journeys": []}
