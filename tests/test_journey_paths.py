"""`summary`'s journey paths (issue 44): per queue or address, how many messages made each path
and how long each hop took, against what the clients of the recordings saw.

- captures/091-journeys: a pika publisher with confirms, two competing pika consumers, one
  nacking with requeue (captures/scenarios/journeys.py);
- captures/10-journeys: a Proton sender and a Proton receiver, each on its own connection to
  RabbitMQ's AMQP 1.0 plugin; the receiver releases one message (redelivered) and rejects one
  (captures/scenarios/journeys10.py);
- captures/log-proton-starved.log: a Proton trace without timestamps: counts, no times.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from amqpscope import schema
from tests.cli import run

CAPTURES = Path(__file__).resolve().parent.parent / "captures"


def amqpscope(*args: str) -> str:
    return run(*args).stdout


def summary_json(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(
        amqpscope("summary", "--json", "--journeys", str(CAPTURES / name))
    )
    errors = list(schema.validator("summary").iter_errors(document))
    assert not errors, errors[0].message
    return document


def truth(name: str) -> dict[str, Any]:
    expect: dict[str, Any] = json.loads((CAPTURES / name).with_suffix(".json").read_text())
    return expect["expect"]


def counted(rows: list[dict[str, Any]], key: str) -> Counter[tuple[Any, ...]]:
    return Counter({(row.get(key), tuple(row["path"])): row["messages"] for row in rows})


def test_091_paths_are_the_clients() -> None:
    """Each message's path as the publisher's confirms and the consumers' callbacks saw it:
    4 published, confirmed, delivered, acked; 2 nacked with requeue and redelivered to the
    other consumer, acked there. Every hop has a time for every message, and the publish to
    its confirm on the wire took no longer than the publisher waited for it."""
    expect = truth("091-journeys.pcap")
    wanted: Counter[tuple[Any, ...]] = Counter()
    for sent in expect["published"]:
        path = ["published"] + (["confirmed"] if sent["confirmed"] else [])
        for got in (d for d in expect["delivered"] if d["body"] == sent["body"]):
            path.append("redelivered" if got["redelivered"] else "delivered")
            path.append("acked" if got["outcome"] == "ack" else "nacked (requeue)")
        wanted[("amqpscope.091-journeys.q", tuple(path))] += 1
    rows = summary_json("091-journeys.pcap")["journey-paths"]
    assert counted(rows, "queue") == wanted
    assert len(wanted) == 2  # the recording did what it is for: two paths
    waited = max(p["at"] - p["sent"] for p in expect["published"]) * 1000.0
    for row in rows:
        assert [hop["count"] for hop in row["hop-ms"]] == [row["messages"]] * (len(row["path"]) - 1)
        assert row["path"][:2] == ["published", "confirmed"]
        assert row["hop-ms"][0]["max"] <= waited


def test_10_paths_across_two_connections() -> None:
    """The sender's transfer and the broker's accept on one connection, the broker's transfer
    and the receiver's answer on the other, tied by message-id (correlation-id for the one
    without): as the two Proton processes saw them."""
    expect = truth("10-journeys.pcap")
    wanted: Counter[tuple[Any, ...]] = Counter()
    for sent in expect["sent"]:
        path = ["sent", sent["outcome"]]
        for got in (r for r in expect["received"] if r["body"] == sent["body"]):
            path.append("delivered" if got["first_acquirer"] else "redelivered")
            path.append(got["outcome"])
        wanted[(expect["address"], tuple(path))] += 1
    rows = summary_json("10-journeys.pcap")["journey-paths"]
    assert counted(rows, "address") == wanted
    assert len(wanted) == 3 and expect["redeliveries"] == 1
    for row in rows:
        assert [hop["count"] for hop in row["hop-ms"]] == [row["messages"]] * (len(row["path"]) - 1)


def test_10_journeys_follow_the_message_to_the_other_connection() -> None:
    """`follow`: each message's transfers on the sender's connection, then the receiver's."""
    expect = truth("10-journeys.pcap")
    names = expect["container_ids"]
    document = json.loads(amqpscope("follow", "--json", str(CAPTURES / "10-journeys.pcap")))
    journeys = {j["body"]: j for j in document["journeys"]}
    assert sorted(journeys) == sorted(s["body"] for s in expect["sent"])
    for sent in expect["sent"]:
        journey = journeys[sent["body"]]
        assert (journey["message-id"], journey["correlation-id"]) == (
            sent["message_id"],
            sent["correlation_id"],
        )
        who = [(h["event"], h["connection-name"]) for h in journey["hops"]]
        received = [r for r in expect["received"] if r["body"] == sent["body"]]
        wanted = [("transfer", names["sender"]), ("disposition", names["sender"])]
        for _ in received:  # the broker's transfer to the receiver, the receiver's answer
            wanted += [("transfer", names["receiver"]), ("disposition", names["receiver"])]
        assert who == wanted


def test_a_log_without_times_gives_counts_alone() -> None:
    """Proton's trace has no timestamps: the paths are counted (10 sent and accepted by the
    broker, 3 of them delivered and accepted) but no hop has a time, and the table has no
    column of times."""
    expect = truth("log-proton-starved.log")
    rows = summary_json("log-proton-starved.log")["journey-paths"]
    paths = Counter({tuple(row["path"]): row["messages"] for row in rows})
    received = expect["transfers_received"]
    assert paths == {
        ("sent", "accepted"): expect["transfers_sent"] - received,
        ("sent", "accepted", "delivered", "accepted"): expect["accepted"],
    }
    assert all(hop is None for row in rows for hop in row["hop-ms"])
    text = amqpscope("summary", "--journeys", str(CAPTURES / "log-proton-starved.log"))
    table = text[text.index("journey paths") :].splitlines()
    assert "path" in table[1] and "hop ms" not in table[1]
    assert "sent → accepted → delivered → accepted" in text


def test_the_table_in_plain_text() -> None:
    """Piped, the 091 recording's table: each path with its count and a p50/p99 per hop."""
    text = amqpscope("summary", "--journeys", str(CAPTURES / "091-journeys.pcap"))
    table = text[text.index("journey paths") :].splitlines()
    heads = [head.strip() for head in table[1].split("┃")]
    assert heads == ["queue / address", "messages", "path", "hop ms p50/p99"]
    cells = [line.split("│") for line in table[3:5]]
    assert [(c[1].strip(), c[2].strip()) for c in cells] == [
        ("4", "published → confirmed → delivered → acked"),
        ("2", "published → confirmed → delivered → nacked (requeue) → redelivered → acked"),
    ]
    assert [len(c[3].split(" · ")) for c in cells] == [3, 5]


@pytest.mark.parametrize("name", ["091-journeys.pcap", "10-journeys.pcap", "10-outcomes.pcap"])
def test_the_table_as_rich_prints_it(name: str) -> None:
    """Written without rich, the table is rich's to the byte (at widths it fits as it is)."""
    from tests.test_summary_plain import WIDTHS, same

    doc = summary_json(name)
    assert doc["journey-paths"]
    written = [same(doc, width) for width in WIDTHS]
    assert written[0]  # piped: no rich needed


def test_without_the_option_the_summary_is_as_it_was() -> None:
    """The paths cost a decode and follow of every message: only when asked for."""
    document = json.loads(amqpscope("summary", "--json", str(CAPTURES / "091-journeys.pcap")))
    assert "journey-paths" not in document
    assert "journey paths" not in amqpscope("summary", str(CAPTURES / "091-journeys.pcap"))


def test_the_docs_show_what_summary_prints() -> None:
    """docs/follow.md's table is the command's on the recording, as it is now."""
    text = (CAPTURES.parent / "docs" / "follow.md").read_text()
    command = "$ amqpscope summary captures/091-journeys.pcap --journeys\n...\n"
    shown = text[text.index(command) + len(command) :].split("\n...\n", 1)[0]
    out = amqpscope("summary", "--journeys", str(CAPTURES / "091-journeys.pcap"))
    table = out[out.index("journey paths") :].split("\nfindings", 1)[0]
    assert shown == "\n".join(line.rstrip() for line in table.splitlines())


def test_returned_and_never_delivered() -> None:
    """captures/091-confirms-return: 10 publishes confirmed and left in their queue (its
    message count at delete), one mandatory publish returned NO_ROUTE and then confirmed. The
    never-delivered stop at confirmed, grouped by the exchange and routing key they were
    published to; the returned one says so."""
    expect = truth("091-confirms-return.pcap")
    rows = summary_json("091-confirms-return.pcap")["journey-paths"]
    [returned] = expect["return_details"]
    kept = expect["queue_message_count_at_delete"]
    assert {(r["exchange"], r["routing-key"], tuple(r["path"])): r["messages"] for r in rows} == {
        ("", "amqpscope.091-confirms-return.q", ("published", "confirmed")): kept,
        ("", returned["routing_key"], ("published", "returned", "confirmed")): expect["returns"],
    }
    assert all(row["queue"] is None for row in rows)
    assert sum(row["messages"] for row in rows) == expect["publishes"] == expect["confirms_acked"]
    text = amqpscope("summary", "--journeys", str(CAPTURES / "091-confirms-return.pcap"))
    assert 'exchange "" key amqpscope.091-confirms-return.q (no delivery in the input)' in text


def test_a_long_path_is_cut_and_counted() -> None:
    """A message redelivered over and over: its path keeps MAX_STEPS steps and counts the rest;
    an untimed hop (ts 0.0) gives no time; the rows are what the schema says."""
    from amqpscope.journeys import Hop, Journey, Paths
    from amqpscope.journeys.paths import MAX_STEPS

    journey = Journey(1, "m", None, None, None)
    journey.add(Hop("published", 1, 1, 1, 10.0, {"exchange": "", "routing-key": "q"}))
    for n in range(10):
        event = "redelivered" if n else "delivered"
        journey.add(Hop(event, 2 + 2 * n, 2, 1, 10.0 + n, {"queue": "q"}))
        journey.add(Hop("nacked", 3 + 2 * n, 2, 1, 0.0, {"requeue": True}))
    [row] = Paths().add_all([journey]).to_json()
    assert len(row["path"]) == MAX_STEPS and row["more-steps"] == 21 - MAX_STEPS
    assert row["path"][:4] == ["published", "delivered", "nacked (requeue)", "redelivered"]
    assert row["hop-ms"][0]["p50"] == 0.0 and row["hop-ms"][1] is None  # the nack has no time
    document = {"connections": [], "findings": [], "journey-paths": [row]}
    errors = list(schema.validator("summary").iter_errors(document))
    assert not errors, errors[0].message
