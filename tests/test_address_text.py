"""Addresses are written as `ipaddress` writes them (the oracle), though IPv4 ones are joined by
hand so that a capture without IPv6 never imports it."""

from __future__ import annotations

import ipaddress
import random

from amqpscope.capture.linklayer import _AddressText


def test_addresses_are_written_as_ipaddress_writes_them() -> None:
    rng = random.Random(10)
    texts = _AddressText()
    v4 = [bytes(4), b"\xff" * 4, bytes([10, 0, 0, 1]), bytes([127, 0, 0, 1])]
    v4 += [rng.randbytes(4) for _ in range(5000)]
    for packed in v4:
        assert texts[packed] == str(ipaddress.IPv4Address(packed))
    v6 = [bytes(16), bytes(15) + b"\x01", bytes(10) + b"\xff\xff\x0a\x00\x00\x01"]
    v6 += [rng.randbytes(16) for _ in range(2000)]
    for packed in v6:
        assert texts[packed] == str(ipaddress.IPv6Address(packed))
