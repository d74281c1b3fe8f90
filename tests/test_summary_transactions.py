"""The text summary shows what `--json` holds of transactions, as a table: 0-9-1 commits and
rollbacks per channel (each with its publishes and settles), 1.0 declared / committed / rolled
back transactions with their transfers and outcomes, through both the plain and rich paths."""

from __future__ import annotations

import io
import json
import subprocess
import sys

from rich.console import Console

from amqpscope.render.summary import print_summary, summary_text
from tests.crafted import CAPTURES
from tests.test_track_amqp10 import Wire

TRUTH = json.loads((CAPTURES / "091-tx.json").read_text())["expect"]


def summary(*args: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", "summary", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout


def test_0_9_1_commits_and_rollbacks_as_a_table() -> None:
    path = str(CAPTURES / "091-tx.pcap")
    text = summary(path)
    committed, rolled = TRUTH["tx_commits"], TRUTH["tx_rollbacks"]
    assert f"transactions: {committed} committed, {rolled} rolled back" in text
    document = json.loads(summary(path, "--json"))
    items = document["connections"][0]["channels"][0]["tx"]["transactions"]
    lines = text.splitlines()
    start = lines.index("transactions: 2 committed, 1 rolled back")
    rows = [line for line in lines[start + 1 :] if "│" in line][: len(items)]
    assert [r.split("│")[2].strip() for r in rows] == [i["outcome"] for i in items]
    assert [int(r.split("│")[3]) for r in rows] == [i["frame"] for i in items]
    assert [int(r.split("│")[4]) for r in rows] == [i["publishes"] for i in items]
    # the same table when rich draws it (colour forces rich's path)
    coloured = summary(path, "--color", "always", "--width", "200")
    assert "transactions" in coloured and "rollback" in coloured


def test_1_0_transactions_as_a_table() -> None:
    wire = Wire()  # the tracker tests' harness: frame records fed to a 1.0 connection tracker
    _replay(wire)
    result = {"connections": [wire.summary()], "findings": []}
    text = summary_text(result, 200, "utf-8")
    assert text is not None
    assert "transactions: 1 declared, 1 committed, 0 rolled back, 0 failed" in text
    (item,) = result["connections"][0]["transactions"]["items"]
    row = next(line for line in text.splitlines() if "0001" in line)
    cells = [c.strip() for c in row.split("│")]  # channel 0 in every row: not shown
    # txn-id, the declare's frame, state, transfers, outcomes in words
    assert cells == ["0001", str(item["declared-frame"]), "committed", "2", "accepted 2"]
    buffer = io.StringIO()
    print_summary(result, Console(file=buffer, width=200, color_system=None))
    assert buffer.getvalue() == text


def _replay(wire: Wire) -> None:
    """A declare, two transfers in the transaction, their outcome and a discharge (the story
    of test_track_amqp10's transaction test). RabbitMQ refuses 1.0 transactions, so no
    recording holds one (10-transaction.pcap shows the refusal)."""
    wire.open()
    wire.begin()
    wire.send(
        "c2s",
        "attach",
        name="txn",
        handle=9,
        role="sender",
        initial_delivery_count=0,
        target={"type": "coordinator", "capabilities": ["amqp:local-transactions"]},
    )
    wire.send(
        "s2c", "attach", name="txn", handle=9, role="receiver", target={"type": "coordinator"}
    )
    wire.receiver_flow(0, 10, handle=9)
    declare = {"body": {"type": "amqp-value", "value": {"type": "declare"}}}
    wire.transfer(0, handle=9, message=declare)
    declared = {"type": "declared", "txn-id": "0001"}
    wire.send("s2c", "disposition", role="receiver", first=0, settled=True, state=declared)
    wire.attach_sender(handle=1)
    wire.receiver_flow(0, 10, handle=1)
    txn = {"type": "transactional-state", "txn-id": "0001"}
    wire.transfer(1, handle=1, state=txn)
    wire.transfer(2, handle=1, state=txn)
    outcome = {**txn, "outcome": {"type": "accepted"}}
    wire.send("s2c", "disposition", role="receiver", first=1, last=2, settled=True, state=outcome)
    discharge = {"type": "discharge", "txn-id": "0001", "fail": False}
    wire.transfer(3, handle=9, message={"body": {"type": "amqp-value", "value": discharge}})
    accepted = {"type": "accepted"}
    wire.send("s2c", "disposition", role="receiver", first=3, settled=True, state=accepted)
