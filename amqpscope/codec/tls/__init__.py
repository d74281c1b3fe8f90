"""TLS under AMQP (sans-IO): record layer, handshake facts, key logs and record decryption.

Importing this package registers the TLS layer's detector (`codec/layers.py`): a direction whose
first bytes are a TLS handshake record (`16 03 0x`, a ClientHello or ServerHello) is TLS, on any
port; after the AMQP 1.0 header `AMQP 2 1 0 0` the codec pushes this layer by name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from amqpscope.codec import layers
from amqpscope.codec.tls.keylog import KeyLog

if TYPE_CHECKING:
    from amqpscope.codec.tls.layer import TlsLayer

__all__ = ["KeyLog", "TlsLayer", "match"]


def __getattr__(name: str) -> Any:
    """`TlsLayer` (and the cryptography it needs) is imported when first asked for: a capture
    without TLS never loads it."""
    if name == "TlsLayer":
        from amqpscope.codec.tls.layer import TlsLayer

        return TlsLayer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def match(direction: str, head: bytes) -> str:
    """A TLS handshake record starting a ClientHello or ServerHello."""
    if len(head) < 6:
        prefix = bytes([22, 3])
        return layers.MORE if prefix.startswith(head[:2]) else layers.NO
    if head[0] == 22 and head[1] == 3 and head[2] <= 4 and head[5] in (1, 2):
        return layers.MATCH
    return layers.NO


def _make(context: layers.LayerContext) -> TlsLayer:
    from amqpscope.codec.tls.layer import TlsLayer

    return TlsLayer(context.keylog)


layers.register(layers.Detector("tls", match, _make))
