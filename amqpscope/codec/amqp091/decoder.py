"""AMQP 0-9-1 field decoding: fills `fields` (and `message`) of the frames of one direction.

One `Decoder` per connection direction: it keeps what spans frames (deliveries assembled across
content frames, per channel). It never raises; damage becomes findings on the frame.
"""

from __future__ import annotations

from amqpscope.codec.frames import Frame


class Decoder:
    def __init__(self, version: str = "0-9-1", show_secrets: bool = False) -> None:
        self.version = version  # "0-9-1", or "0-9" / "0-8" (decoded where they agree)
        self.show_secrets = show_secrets

    def decode(self, frame: Frame) -> None:
        """Fill `frame.fields` (and `frame.message` on the frame that completes a message)."""

    def end(self) -> list:
        """The direction ended: findings for messages left incomplete."""
        return []
