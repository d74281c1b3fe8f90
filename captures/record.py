#!/usr/bin/env python3
"""Record real AMQP 0-9-1 and AMQP 1.0 traffic into pcap files with ground truth.

Why this exists: amqpscope's decoders and trackers must be tested against what
real brokers and client libraries put on the wire, not against hand-made bytes.
Each scenario drives pika (0-9-1) or Qpid Proton (1.0) against a local RabbitMQ
while tcpdump/dumpcap records loopback, and writes NAME.json next to the capture
with counts that the *client library* observed while the scenario ran (never
derived from the capture itself), so tests can compare the analyzer against them.

Usage:
    python3 captures/record.py                  # record every scenario
    python3 captures/record.py --only 091-get 10-drain
    python3 captures/record.py --list
    python3 captures/record.py --out /tmp/caps  # write somewhere else

Needs root (packet capture), tcpdump, dumpcap (for the pcapng capture), and a
RabbitMQ 3.x install; the broker is started and its plugins enabled if needed.
Each scenario runs in its own process group with a timeout so a hang cannot
stall the whole run; the exit status is non-zero if any scenario failed.

The recorder is the package captures/recorder/ (the harness, the brokers, TLS, the scenarios by
family, the runner); this file is its command line. A scenario module imports the package
(`import recorder as record`); `import record` gives the same names, for modules written before.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

import recorder


def __getattr__(name: str) -> Any:
    """`record.NAME` for a module that says `import record`: the package's NAME, or a module's."""
    modules: list[ModuleType] = [
        recorder,
        *(m for k, m in sys.modules.items() if k.startswith("recorder.")),
    ]
    for module in modules:
        if hasattr(module, name):
            return getattr(module, name)
    raise AttributeError(f"module 'record' (captures/recorder/) has no attribute {name!r}")


if __name__ == "__main__":
    sys.exit(recorder.main())
