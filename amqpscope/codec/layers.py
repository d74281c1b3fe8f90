"""Byte-transform layers between TCP and the AMQP framers (TLS, WebSocket), and how they are found.

AMQP is often wrapped: TLS on 5671, the 1.0 in-band TLS upgrade (`AMQP 2 1 0 0`, then TLS on the
same connection), WebSockets (in clear or inside TLS on 443). A `Layer` turns one connection's
outer bytes into inner bytes, both directions in one object because a wrapping protocol needs both
(TLS keys depend on the ClientHello and the ServerHello). `ConnectionCodec` keeps a stack of them:
after a layer is pushed, its inner bytes restart AMQP framing from the protocol header, and may
themselves be wrapped again (TLS, then WebSocket).

Layers are found by detectors that look at the first bytes of a direction; each layer's module
registers one with `register()` when it is imported, and `detectors()` imports the modules named
in `LAYER_MODULES` the first time it is asked.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from amqpscope.findings import Finding

#: what a detector says of a direction's first bytes
MATCH: Final = "match"  # this layer starts here
NO: Final = "no"  # not this layer
MORE: Final = "more"  # cannot tell yet: wait for more bytes

#: where an undecrypted TLS connection is taken for AMQP (IANA's amqps); elsewhere it is reported
#: only if its key decrypts it to AMQP, it followed an AMQP header, or its ALPN said "amqp"
AMQP_TLS_PORTS: Final = frozenset({5671})
#: server names whose TLS is taken for AMQP on any port, key or not: Azure Service Bus and Event
#: Hubs namespaces (public and sovereign clouds): AMQP on 5671, and over WebSockets on 443
AMQP_TLS_HOST_SUFFIXES: Final = (
    ".servicebus.windows.net",
    ".servicebus.chinacloudapi.cn",
    ".servicebus.usgovcloudapi.net",
    ".servicebus.cloudapi.de",
)
#: modules that register a detector when imported (missing ones are skipped)
LAYER_MODULES: Final = ("amqpscope.codec.tls", "amqpscope.codec.websocket")


class Layer(Protocol):
    """One wrapping protocol on one connection, both directions."""

    name: str  # "tls", "websocket"
    findings: list[Finding]  # damage, a missing or wrong key, ... (drained by the codec)

    def data(self, direction: str, data: bytes) -> bytes:
        """Outer bytes of `direction` ("c2s"/"s2c") in, the inner bytes now available out."""
        ...

    def info(self) -> dict[str, Any]:
        """What the layer knows, for the timeline, summary and JSON (version, suite, sni...)."""
        ...


@dataclass
class LayerContext:
    """What a layer may need from outside the connection: key material (a `tls.KeyLog`, or
    None), and whether secrets may be shown."""

    keylog: Any = None
    show_secrets: bool = False
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Detector:
    """`match(direction, first_bytes)` says MATCH, NO or MORE; `make(context)` builds the layer.
    `first_bytes` is everything the direction has sent at this level so far (at least 1 byte)."""

    name: str
    match: Callable[[str, bytes], str]
    make: Callable[[LayerContext], Layer]


_DETECTORS: Final[dict[str, Detector]] = {}
_loaded = False


def register(detector: Detector) -> None:
    """Make a layer findable (call it at import time of the layer's module)."""
    _DETECTORS[detector.name] = detector


def detectors() -> list[Detector]:
    """Every registered detector, in `LAYER_MODULES` order."""
    global _loaded
    if not _loaded:
        _loaded = True
        for module in LAYER_MODULES:
            try:
                importlib.import_module(module)
            except ModuleNotFoundError as exc:
                if exc.name != module:  # the module exists but something it needs does not
                    raise
    return list(_DETECTORS.values())


def detector(name: str) -> Detector | None:
    """The detector registered under `name` ("tls" for the in-band upgrade)."""
    detectors()
    return _DETECTORS.get(name)


def detect(direction: str, head: bytes) -> tuple[str, Detector | None]:
    """Which layer (if any) starts with `head`: (MATCH, detector), (MORE, None) while some
    detector needs more bytes to decide, or (NO, None)."""
    waiting = False
    for candidate in detectors():
        said = candidate.match(direction, head)
        if said == MATCH:
            return MATCH, candidate
        if said == MORE:
            waiting = True
    return (MORE if waiting else NO), None
