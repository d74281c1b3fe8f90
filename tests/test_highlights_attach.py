"""A 1.0 attach that asks the peer to make the node (`dynamic`, 1.0 part 3 3.5.3/3.5.4) says so
on its line: its own address is empty, and the answer's address is the node the peer made
(captures/10-amq-dynamic.pcap: Proton's dynamic receiver and ActiveMQ's temp-queue)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from amqpscope.cli import main

CAPTURE = Path(__file__).resolve().parent.parent / "captures" / "10-amq-dynamic.pcap"


def test_a_dynamic_attach_and_its_answer_say_dynamic() -> None:
    runner = CliRunner()
    records = [
        json.loads(line)
        for line in runner.invoke(main, ["read", "--json", str(CAPTURE)]).stdout.splitlines()
    ]
    dynamic = {
        r["frame"]
        for r in records
        if r.get("name") == "attach"
        and any((r["fields"].get(end) or {}).get("dynamic") for end in ("source", "target"))
    }
    assert len(dynamic) >= 2  # the client's ask and the broker's answer
    lines = runner.invoke(main, ["read", str(CAPTURE)]).stdout.splitlines()
    said = {int(line.split()[0]) for line in lines if " attach " in line and " dynamic " in line}
    assert said == dynamic
