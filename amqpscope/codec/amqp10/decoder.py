"""AMQP 1.0 field decoding: fills `fields` (and `message`) of the frames of one direction.

One `Decoder` per connection direction: it keeps what spans frames (deliveries assembled across
transfers, per link handle). It never raises; damage becomes findings on the frame.
"""

from __future__ import annotations

from amqpscope.codec.frames import Frame


class Decoder:
    def __init__(self, show_secrets: bool = False) -> None:
        self.show_secrets = show_secrets

    def decode(self, frame: Frame) -> None:
        """Fill `frame.fields` (and `frame.message` on a delivery's last transfer)."""

    def end(self) -> list:
        """The direction ended: findings for deliveries left incomplete."""
        return []
