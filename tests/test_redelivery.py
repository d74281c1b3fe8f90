"""`diagnose.redelivery`: each redelivery linked to the earlier delivery of the same message.

On recorded captures the link is checked against what the recording client saw (the bodies it
got, which one came back); the matching rules (id, then body; a broker-unmarked 1.0 redelivery
only after the earlier delivery came back) on small hand-made record streams.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from amqpscope.cli import main
from amqpscope.cli.inputs import open_input
from amqpscope.diagnose.redelivery import Redeliveries, link_redeliveries

CAPTURES = Path(__file__).resolve().parent.parent / "captures"


@cache
def records(stem: str) -> tuple[dict[str, Any], ...]:
    result = CliRunner().invoke(main, ["read", str(CAPTURES / f"{stem}.pcap"), "--json"])
    assert result.exit_code == 0, result.output
    return tuple(json.loads(line) for line in result.stdout.splitlines())


def expect(stem: str) -> dict[str, Any]:
    return json.loads((CAPTURES / f"{stem}.json").read_text())["expect"]


def message_of(stem: str, first: int) -> dict[str, Any]:
    """The message of the delivery whose first frame is `first` (it rides a later frame)."""
    start = next(r for r in records(stem) if r["frame"] == first)
    for record in records(stem):
        if record["frame"] >= first and record.get("message") and record["conn"] == start["conn"]:
            return dict(record["message"])
    raise AssertionError(f"no message after frame {first}")


def test_091_requeued_message_linked_to_its_first_delivery() -> None:
    stem = "091-ack-nack-reject"
    log = expect(stem)["delivery_log"]
    again = [d for d in log if d["redelivered"]]
    links = link_redeliveries(records(stem))
    assert len(links) == len(again) == 1
    (link,) = links.values()
    frames = {r["frame"]: r for r in records(stem)}
    redelivery, earlier = frames[link.frame], frames[link.earlier]
    assert redelivery["name"] == earlier["name"] == "basic.deliver"
    assert redelivery["fields"]["redelivered"] is True
    assert redelivery["fields"]["delivery-tag"] == again[0]["delivery_tag"]
    (first,) = [d for d in log if d["body"] == again[0]["body"] and not d["redelivered"]]
    assert earlier["fields"]["delivery-tag"] == first["delivery_tag"]
    assert message_of(stem, link.frame)["body"]["text"] == again[0]["body"]
    assert (link.how, link.why) == ("message-id", "redelivered")
    assert link.queue == "amqpscope.091-ack-nack-reject.q"


def test_10_released_message_linked_by_its_message_id() -> None:
    stem = "10-outcomes"
    truth = expect(stem)["deliveries"]
    (again,) = [d for d in truth if d["redelivery"]]
    (link,) = link_redeliveries(records(stem)).values()
    frames = {r["frame"]: r for r in records(stem)}
    assert frames[link.frame]["name"] == frames[link.earlier]["name"] == "transfer"
    assert frames[link.frame]["dir"] == frames[link.earlier]["dir"] == "s2c"
    assert message_of(stem, link.frame)["properties"]["message-id"] == again["id"]
    assert message_of(stem, link.earlier)["properties"]["message-id"] == again["id"]
    assert message_of(stem, link.earlier)["header"]["first-acquirer"] is True
    assert link.why == "first-acquirer false" and link.how == "message-id"


def test_happy_paths_have_no_redelivery() -> None:
    for stem in ("091-publish-consume", "10-send-receive", "091-rpc", "10-peer-to-peer"):
        assert link_redeliveries(records(stem)) == {}, stem


def test_frames_give_what_records_give() -> None:
    for stem in ("091-ack-nack-reject", "10-outcomes"):
        matcher = Redeliveries()
        with open_input(str(CAPTURES / f"{stem}.pcap")) as source:
            for frame in source.frames():
                matcher.feed_frame(frame)
        assert matcher.links == link_redeliveries(records(stem))


# -- the rules, on hand-made records -------------------------------------------------------------
def deliver(
    n: int, tag: int, body: str, redelivered: bool = False, props: dict | None = None
) -> list[dict]:
    fields = {"consumer-tag": "c", "delivery-tag": tag, "redelivered": redelivered}
    fields |= {"exchange": "", "routing-key": "q"}
    method = {"frame": n, "conn": 1, "dir": "s2c", "version": "0-9-1", "channel": 1}
    message = {"method": "basic.deliver", "arguments": fields, "properties": props or {}}
    message["body"] = {"text": body, "size": len(body)}
    return [
        method | {"name": "basic.deliver", "fields": fields},
        method | {"frame": n + 1, "name": "content-body", "fields": {}, "message": message},
    ]


def test_id_reused_for_another_body_is_matched_by_body() -> None:
    x = {"message-id": "x"}
    stream = deliver(1, 1, "a", props=x) + deliver(3, 2, "b", props=x)
    stream += deliver(5, 3, "a", True, x)
    (link,) = link_redeliveries(stream).values()
    assert (link.frame, link.earlier, link.how) == (5, 1, "body")
    assert link.queue == "/q"  # no consume seen: the exchange and routing key


def test_correlation_id_and_the_latest_earlier_delivery() -> None:
    cid = {"correlation-id": "r1"}
    stream = deliver(1, 1, "a", props=cid) + deliver(3, 2, "a", True, cid)
    stream += deliver(5, 3, "a", True, cid)
    links = link_redeliveries(stream)
    assert [(k, v.earlier, v.how) for k, v in links.items()] == [
        (3, 1, "correlation-id"),
        (5, 3, "correlation-id"),
    ]


def test_unmatched_redelivery_is_kept_without_earlier() -> None:
    stream = deliver(1, 1, "a") + deliver(3, 2, "b", True)
    (link,) = link_redeliveries(stream).values()
    assert (link.frame, link.earlier, link.how) == (3, 0, "")


def ten(n: int, direction: str, name: str, channel: int, fields: dict, **extra: Any) -> dict:
    record = {"frame": n, "conn": 1, "dir": direction, "version": "1.0", "channel": channel}
    return record | {"name": name, "fields": fields} | extra


def link10(base: int, handle: int, name: str) -> list[dict]:
    """The broker (channel 5) attaches as sender of `name`, the client (channel 0) receives."""
    sender = {"name": name, "handle": handle + 10, "role": "sender"}
    return [
        ten(base, "c2s", "attach", 0, {"name": name, "handle": handle, "role": "receiver"}),
        ten(base + 1, "s2c", "attach", 5, sender | {"source": {"address": "/queues/q"}}),
    ]


def transfer(n: int, handle: int, delivery_id: int, body: str, **header: Any) -> dict:
    message = {"delivery-id": delivery_id, "header": header, "properties": {}}
    message["body"] = {"type": "amqp-value", "value": body}
    fields = {"handle": handle, "delivery-id": delivery_id, "settled": False}
    return ten(n, "s2c", "transfer", 5, fields, message=message)


SESSION = [
    ten(1, "c2s", "begin", 0, {}),
    ten(2, "s2c", "begin", 5, {"remote-channel": 0}),
]


def dispose(n: int, first: int, outcome: str) -> dict:
    fields = {"role": "receiver", "first": first, "settled": True, "state": {"type": outcome}}
    return ten(n, "c2s", "disposition", 0, fields)


def test_10_unmarked_message_after_release_or_detach_is_a_redelivery() -> None:
    stream = SESSION + link10(3, 0, "a")
    stream += [transfer(10, 10, 0, "m"), transfer(11, 10, 1, "n"), transfer(12, 10, 2, "o")]
    stream += [dispose(13, 0, "accepted"), dispose(14, 1, "released")]
    stream += [ten(15, "c2s", "detach", 0, {"handle": 0, "closed": True})]  # "o" unsettled
    stream += link10(20, 1, "b")
    stream += [transfer(30, 11, 3, "m"), transfer(31, 11, 4, "n"), transfer(32, 11, 5, "o")]
    links = link_redeliveries(stream)
    assert [(k, v.earlier, v.how, v.why) for k, v in links.items()] == [
        (31, 11, "body", "released"),
        (32, 12, "body", "detached"),
    ]  # "m" was accepted: sent again, it is another message with the same body
    assert links[31].queue == "/queues/q"


def test_10_marked_redelivery_linked_whatever_became_of_the_first() -> None:
    stream = SESSION + link10(3, 0, "a") + [transfer(10, 10, 0, "m"), dispose(11, 0, "accepted")]
    stream += [transfer(12, 10, 1, "m", **{"delivery-count": 1})]
    (link,) = link_redeliveries(stream).values()
    assert (link.frame, link.earlier, link.why) == (12, 10, "delivery-count 1")


def test_damaged_records_raise_nothing() -> None:
    matcher = Redeliveries()
    junk: list[Any] = [None, [], "x", {"a": 1}, 1.5]
    for value in junk:
        for name in ("transfer", "disposition", "attach", "begin", "detach", "end", "close"):
            fields = {k: value for k in ("handle", "first", "last", "name", "role", "state")}
            matcher.feed(ten(1, "s2c", name, 0, fields, message={"header": value, "body": value}))
            matcher.feed(ten(1, "s2c", name, 0, fields | {"delivery-id": 1}, message=value))
        matcher.feed({"frame": value, "channel": value, "fields": value, "message": value})
        for record in deliver(1, 1, "a", True):
            matcher.feed(record | {"fields": {"consumer-tag": value, "queue": value}})
    whole = {"first": 0, "last": 4_000_000_000, "role": "receiver"}
    matcher.feed(ten(2, "c2s", "disposition", 0, whole))  # a range not walked


def test_a_forgotten_connection_still_holds_the_earlier_delivery() -> None:
    matcher = Redeliveries(keep=False)
    for record in deliver(1, 1, "a", props={"message-id": "m"}):
        matcher.feed(record)
    matcher.forget(1)  # its channel closed, the connection ended (live capture)
    found = [matcher.feed(r | {"conn": 2}) for r in deliver(9, 1, "a", True, {"message-id": "m"})]
    link = found[-1]
    assert link is not None and (link.earlier, link.earlier_conn, link.conn) == (1, 1, 2)
    assert matcher.links == {}  # kept by the caller
