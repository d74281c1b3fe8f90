"""Codec: bytes to AMQP frames. Detection, framing, naming and (later) field decoding."""
