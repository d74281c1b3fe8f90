"""`Redeliveries` takes records from anywhere (`feed`: a `read --json` line), so a value of an
unexpected shape is no crash: a fuzz found a message whose `method` was a list (unhashable, a
TypeError in `_frame091`). Not reachable from a capture or a log: a message record is made only
by the 0-9-1 decoder's assembler (`codec/amqp091/content.py`, its method a `str`), and every log
reader encodes a 0-9-1 line back into bytes and decodes it (pika's DEBUG logs show no delivery
at all); a `read --json` record fed from elsewhere can hold anything."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from amqpscope.cli import main
from amqpscope.diagnose.redelivery import Redeliveries, link_redeliveries

CAPTURES = Path(__file__).resolve().parent.parent / "captures"


def records(name: str) -> list[dict[str, Any]]:
    result = CliRunner().invoke(main, ["read", str(CAPTURES / name), "--json"])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_a_message_method_of_another_shape_is_no_crash() -> None:
    real = records("091-redelivered.pcap")
    assert link_redeliveries(real)  # the capture's redeliveries are linked
    odd = json.loads(json.dumps(real))
    changed = 0
    for record in odd:
        message = record.get("message")
        if isinstance(message, dict) and "method" in message:
            message["method"] = [message["method"]]
            changed += 1
    assert changed
    matcher = Redeliveries()
    for record in odd:
        matcher.feed(record)  # raised TypeError: unhashable type: 'list'
    assert matcher.links == {}  # not deliveries as far as it can tell: nothing linked
