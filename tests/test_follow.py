"""`amqpscope follow` on a recording of two pika processes (captures/091-journeys): every
message's journey, as the follower reads it from the capture, is the one the clients saw
(which consumer got it, redelivered or not, what it answered; whether the publish was
confirmed). The ground truth is the clients' callbacks (captures/scenarios/journeys.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from amqpscope import schema

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
CAPTURE = CAPTURES / "091-journeys.pcap"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", "follow", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def follow_json(*args: str) -> dict[str, Any]:
    done = run(str(CAPTURE), "--json", *args)
    assert done.returncode == 0, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    errors = list(schema.validator("follow").iter_errors(document))
    assert not errors, errors[0].message
    return document


@pytest.fixture(scope="module")
def truth() -> dict[str, Any]:
    expect: dict[str, Any] = json.loads(CAPTURE.with_suffix(".json").read_text())["expect"]
    return expect


def expected_hops(truth: dict[str, Any], body: str) -> list[tuple[Any, ...]]:
    """The hops of the message with this body, as the clients saw them: (event, who,
    delivery-tag, requeue)."""
    [sent] = [p for p in truth["published"] if p["body"] == body]
    hops: list[tuple[Any, ...]] = [("published", "publisher", None, None)]
    if sent["confirmed"]:
        hops.append(("confirmed", "publisher", None, None))
    for got in (d for d in truth["delivered"] if d["body"] == body):
        event = "redelivered" if got["redelivered"] else "delivered"
        who, tag = got["consumer"], got["delivery_tag"]
        hops.append((event, who, tag, None))
        if got["outcome"] == "ack":
            hops.append(("acked", who, tag, None))
        else:
            hops.append(("nacked", who, tag, True))
    return hops


def seen_hops(journey: dict[str, Any], roles: dict[str, str]) -> list[tuple[Any, ...]]:
    out = []
    for hop in journey["hops"]:
        who = roles[hop["connection-name"]]
        tag = hop.get("delivery-tag") if hop["event"] != "confirmed" else None
        out.append((hop["event"], who, tag, hop.get("requeue")))
    return out


def test_every_journey_is_the_clients(truth: dict[str, Any]) -> None:
    roles = {name: role for role, name in truth["connection_names"].items()}
    journeys = follow_json()["journeys"]
    assert [j["body"] for j in journeys] == [p["body"] for p in truth["published"]]
    nacked = 0
    for journey, sent in zip(journeys, truth["published"], strict=True):
        assert journey["message-id"] == sent["message_id"]
        assert journey["correlation-id"] == sent["correlation_id"]
        assert journey["confirmed"] is sent["confirmed"]
        assert seen_hops(journey, roles) == expected_hops(truth, sent["body"]), sent["body"]
        assert journey["end"] == "acked"
        nacked += sum(1 for hop in journey["hops"] if hop["event"] == "nacked")
        for hop in journey["hops"]:
            if hop["event"] in ("delivered", "redelivered"):
                assert hop["queue"] == "amqpscope.091-journeys.q"
    # the recording did what it is for: nacks, and redeliveries on the other connection
    assert nacked == truth["nacks"] >= 1
    assert truth["redeliveries"] >= 1


def test_each_criterion_finds_its_message(truth: dict[str, Any]) -> None:
    whole = follow_json()["journeys"]
    nacked = next(j for j in whole if any(h["event"] == "nacked" for h in j["hops"]))
    redelivery = next(h for h in nacked["hops"] if h["event"] == "redelivered")
    assert redelivery["earlier-frame"] == next(
        h["frame"] for h in nacked["hops"] if h["event"] == "delivered"
    )
    assert follow_json("--message-id", nacked["message-id"])["journeys"] == [nacked]
    for hop in nacked["hops"]:  # any frame of its journey: the publish, the nack, the ack...
        assert follow_json("--frame", str(hop["frame"]))["journeys"] == [nacked]
    by_body = [j for j in whole if j["message-id"] is None]
    assert follow_json("--correlation-id", "c5")["journeys"] == by_body
    assert follow_json("--body-match", "order 5")["journeys"] == by_body
    assert by_body[0]["hops"][2]["linked-by"] == "body"
    assert follow_json("--message-id", "nothing-such")["journeys"] == []


def test_text_names_each_hop_and_connection(truth: dict[str, Any]) -> None:
    first = truth["delivered"][0]  # A's nack of m0, then B's redelivery
    done = run(str(CAPTURE), "--message-id", first["message_id"])
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    events = [line.split()[4] for line in lines[1:-1]]
    assert events == ["published", "confirmed", "delivered", "nacked", "redelivered", "acked"]
    assert f"consumer {first['consumer']}" in lines[3] and "consumer B" in lines[5]
    assert lines[-1].strip() == "ended: acked"


def test_bad_usage_and_input(tmp_path: Path) -> None:
    done = run(str(CAPTURE), "--json", "--mermaid")
    assert done.returncode == 2 and "choose one" in done.stderr
    done = run(str(tmp_path / "missing.pcap"), "--message-id", "m0")
    assert done.returncode == 1
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr


def test_a_10_message_redelivered_to_another_link() -> None:
    """captures/10-redelivered: receiver A takes 3 messages, detaches without settling them;
    receiver B gets them again (first-acquirer false) and accepts them. Each journey: the
    client's transfer (accepted and settled by the broker), A's delivery, B's, B's accept."""
    capture = CAPTURES / "10-redelivered.pcap"
    expect = json.loads(capture.with_suffix(".json").read_text())["expect"]
    done = run(str(capture), "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert not list(schema.validator("follow").iter_errors(document))
    journeys = {j["body"]: j for j in document["journeys"]}
    links = {"A": "amqpscope-first", "B": "amqpscope-second"}
    bodies = list(dict.fromkeys(d["body"] for d in expect["deliveries"]))
    assert sorted(journeys) == sorted(bodies)
    for body in bodies:
        journey = journeys[body]
        got = [d for d in expect["deliveries"] if d["body"] == body]
        assert journey["message-id"] == got[0]["message_id"]
        transfers = [h for h in journey["hops"] if h["event"] == "transfer"]
        assert [(h["dir"], h["link"]) for h in transfers[1:]] == [
            ("s2c", links[d["receiver"]]) for d in got
        ]
        assert transfers[0]["dir"] == "c2s"
        # the redelivery is the one the client saw with first-acquirer false
        assert [h.get("why") for h in transfers[1:]] == [
            None if d["first_acquirer"] else "first-acquirer false" for d in got
        ]
        outcomes = [(h["role"], h["state"]) for h in journey["hops"] if h["event"] == "disposition"]
        assert outcomes == [("receiver", "accepted")] * 2  # the broker's of the send, B's
        assert journey["end"] == "accepted and settled"


@pytest.mark.parametrize("doc", ["docs/guide/follow.md", "docs/follow.md"])
def test_the_docs_show_what_follow_prints(doc: str) -> None:
    """The documented example is the command's output on the recording, as it is now."""
    text = (CAPTURES.parent / doc).read_text()
    command = "$ amqpscope follow captures/091-journeys.pcap --message-id m0\n"
    shown = text[text.index(command) + len(command) :].split("```", 1)[0]
    done = run(str(CAPTURE), "--message-id", "m0")
    assert done.returncode == 0, done.stderr
    assert shown == done.stdout
    if doc == "docs/follow.md":  # the guide links the diagram, the page draws it
        mermaid = run(str(CAPTURE), "--message-id", "m0", "--mermaid").stdout
        assert mermaid[mermaid.index("```mermaid") :] in text


ALL = sorted(p for p in CAPTURES.iterdir() if p.suffix in (".pcap", ".pcapng"))


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_every_capture_s_journeys_validate(path: Path) -> None:
    """Whatever a capture holds (1.0, 0-9-1, damaged, hostile names), its journeys are records
    the schema describes, and every hop's frame is one of the capture's."""
    from amqpscope.capture.files import open_capture
    from amqpscope.dissect import Dissector
    from amqpscope.journeys import Follower
    from tests.oracle import keylog_for

    follower = Follower()
    numbers = set()
    with open_capture(str(path)) as capture:
        for frame in Dissector(keylog=keylog_for(path)).run(capture):
            follower.feed(frame)
            numbers.add(frame.number)
    names = follower.names
    document = {"journeys": [j.to_json(follower.first_ts, names) for j in follower.journeys]}
    document = json.loads(json.dumps(document))
    errors = list(schema.validator("follow").iter_errors(document))
    assert not errors, errors[0].message
    assert {h["frame"] for j in document["journeys"] for h in j["hops"]} <= numbers
