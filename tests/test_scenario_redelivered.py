"""The redelivery scenario's ground truth: one builder of the delivery record both consumers
use (captures/scenarios/diagnose.py), holding what the bundled recording's record holds."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pika.spec

CAPTURES = Path(__file__).resolve().parent.parent / "captures"


def test_both_consumers_note_a_delivery_alike() -> None:
    sys.path.insert(0, str(CAPTURES))
    try:
        import recorder  # noqa: F401  (loads captures/scenarios/*.py)
    finally:
        sys.path.remove(str(CAPTURES))
    scenarios = sys.modules["scenarios.diagnose"]
    truth = json.loads((CAPTURES / "091-redelivered.json").read_text())["expect"]
    for noted in truth["deliveries_log"]:
        method = pika.spec.Basic.Deliver(
            "ctag", noted["delivery_tag"], noted["redelivered"], "", "q"
        )
        props = pika.spec.BasicProperties(message_id=noted["message_id"])
        made = scenarios.delivery_091(noted["consumer"], method, props, noted["body"].encode())
        assert made.keys() == noted.keys()
        assert {**made, "at": noted["at"]} == noted
        assert made["at"] > noted["at"]  # stamped now, after the recording
