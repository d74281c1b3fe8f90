"""`f` on the frames its help lists and on a publish: a content header or body is followed as
the deliver or publish it is the content of, and a basic.publish is followed to its return,
its confirm and the deliveries of the message it published (both were refused: "not a frame
of a delivery")."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("textual", reason="the TUI needs the tui extra (make install installs it)")

from textual.pilot import Pilot

from tests.test_tui import filter_with, opened, shown, truth


async def followed(pilot: Pilot[Any], expression: str, row: int = 0) -> list[dict[str, Any]]:
    """The frames `f` shows from row `row` of the frames `expression` accepts."""
    app = pilot.app
    await filter_with(pilot, expression)
    app.frames.go(row)
    await pilot.press("f")
    await app.workers.wait_for_complete()
    await pilot.pause()
    return shown(app)


def named(records: list[dict[str, Any]]) -> list[tuple[str, str, Any]]:
    return [(r["name"], r["dir"], r["fields"].get("delivery-tag")) for r in records]


def test_f_on_a_deliveries_content_follows_the_delivery() -> None:
    async def run() -> tuple[list[Any], list[Any], list[Any]]:
        async with opened("091-publish-consume.pcap") as pilot:
            deliver = 'name == "basic.deliver" and fields.delivery-tag == 4'
            whole = await followed(pilot, deliver)
            header = await followed(pilot, 'name == "content-header" and dir == "s2c"', 3)
            body = await followed(pilot, 'name == "content-body" and dir == "s2c"', 3)
            return named(whole), named(header), named(body)

    whole, header, body = asyncio.run(run())
    assert whole == [
        ("basic.deliver", "s2c", 4),
        ("content-header", "s2c", None),
        ("content-body", "s2c", None),
        ("basic.ack", "c2s", 4),
    ]
    assert header == body == whole


def test_f_on_a_publish_follows_its_message_to_its_delivery_and_ack() -> None:
    """The fourth publish of 091-publish-consume (message-id m3): its content, and the
    delivery of that message (the client logged it as delivered, and acked it)."""

    async def run() -> list[dict[str, Any]]:
        async with opened("091-publish-consume.pcap") as pilot:
            return await followed(pilot, 'name == "basic.publish"', 3)

    records = asyncio.run(run())
    assert truth("091-publish-consume")["acks"] == truth("091-publish-consume")["deliveries"]
    assert [(r["name"], r["dir"]) for r in records] == [
        ("basic.publish", "c2s"),
        ("content-header", "c2s"),
        ("content-body", "c2s"),
        ("basic.deliver", "s2c"),
        ("content-header", "s2c"),
        ("content-body", "s2c"),
        ("basic.ack", "c2s"),
    ]
    published, delivered = records[1], records[4]
    assert published["fields"]["properties"]["message-id"] == "m3"
    assert delivered["fields"]["properties"]["message-id"] == "m3"


def test_f_on_a_returned_publish_shows_its_return_and_confirm() -> None:
    """091-confirms-return: ten confirmed publishes, then a mandatory one to no queue that the
    broker returned (312 NO_ROUTE) and then confirmed, tag 11 (the client's own counts)."""
    expect = truth("091-confirms-return")

    async def run() -> tuple[list[Any], list[Any]]:
        async with opened("091-confirms-return.pcap") as pilot:
            first = await followed(pilot, 'name == "basic.publish"')
            last = await followed(pilot, 'name == "content-body" and dir == "c2s"', 10)
            return first, last

    first, last = asyncio.run(run())
    assert expect["publishes"] == expect["confirms_acked"] == 11 and expect["returns"] == 1
    assert named(first) == [
        ("basic.publish", "c2s", None),
        ("content-header", "c2s", None),
        ("content-body", "c2s", None),
        ("basic.ack", "s2c", 1),
    ]
    assert named(last) == [
        ("basic.publish", "c2s", None),
        ("content-header", "c2s", None),
        ("content-body", "c2s", None),
        ("basic.return", "s2c", None),
        ("content-header", "s2c", None),
        ("content-body", "s2c", None),
        ("basic.ack", "s2c", 11),
    ]
    (detail,) = expect["return_details"]
    assert last[3]["fields"]["reply-code"] == detail["reply_code"]
    assert last[0]["fields"]["routing-key"] == detail["routing_key"]
