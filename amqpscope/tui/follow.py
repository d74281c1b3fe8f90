"""Follow a delivery: every frame of one message's delivery, from the frame chosen in the list.

AMQP 1.0: the transfer(s) carrying delivery-id D on a session (continuation transfers of a
multi-frame delivery follow on the same handle while `more` is set, with the id repeated or
left out, as the spec allows), and the
dispositions whose first..last range covers D, from the receiver (the session's other side,
whose channel number is its own) or the sender. 0-9-1: the basic.deliver / basic.get-ok with
delivery-tag T on a channel, its content header and bodies, and the ack, nack or reject that
settles it (by its tag, or `multiple` up to it). A tag or id is reused (channels reopen, ids
wrap), so the frames are cut into one group per delivery and the group holding the chosen frame
is the answer. Records in, frame indexes out: no terminal, no files.

A redelivery is the same message delivered again: `same_message` walks the links the diagnose
layer makes (`diagnose.redelivery`: each redelivery's frame to its earlier delivery's) both
ways, so following any delivery of a message follows all of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

OTHER = {"c2s": "s2c", "s2c": "c2s"}
DELIVERIES_091 = ("basic.deliver", "basic.get-ok")
SETTLES_091 = ("basic.ack", "basic.nack", "basic.reject")
CONTENT = ("content-header", "content-body")

#: (conn, direction, channel) → the channel number the other side uses for that session
PeerChannels = dict[tuple[int, str, int], int]


@dataclass(frozen=True)
class Delivery:
    """Which delivery to follow: on `conn`, sent in `direction` on `channel`, id or tag `key`."""

    version: str
    conn: int
    direction: str
    channel: int
    key: int

    def label(self) -> str:
        word = "delivery-id" if self.version == "1.0" else "delivery-tag"
        return f"follow c{self.conn} ch{self.channel} {self.direction} {word} {self.key}"


def peer_channels(summary: dict[str, Any]) -> PeerChannels:
    """Each 1.0 session's two channel numbers, both ways, from a tracker summary."""
    out: PeerChannels = {}
    for connection in summary.get("connections") or []:
        for session in connection.get("sessions") or []:
            client, server = session.get("channel"), session.get("remote-channel")
            if client is None or server is None:
                continue
            out[(connection.get("id", 0), "c2s", client)] = server
            out[(connection.get("id", 0), "s2c", server)] = client
    return out


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def delivery_of(record: dict[str, Any], peers: PeerChannels) -> Delivery | None:
    """The delivery a frame belongs to, or None when it is not part of one."""
    name, fields = record.get("name"), record.get("fields") or {}
    conn, direction, channel = record.get("conn", 0), record.get("dir", ""), record.get("channel")
    if channel is None or direction not in OTHER:
        return None
    if record.get("version") == "1.0":
        if name == "transfer" and _int(fields.get("delivery-id")) is not None:
            return Delivery("1.0", conn, direction, channel, fields["delivery-id"])
        first = _int(fields.get("first"))
        if name == "disposition" and first is not None:
            if fields.get("role") == "sender":  # settling what it sent itself
                return Delivery("1.0", conn, direction, channel, first)
            peer = peers.get((conn, direction, channel))
            if peer is None:
                return None
            return Delivery("1.0", conn, OTHER[direction], peer, first)
        return None
    tag = _int(fields.get("delivery-tag"))
    if tag is None:
        return None
    if name in DELIVERIES_091:
        return Delivery(record.get("version", ""), conn, direction, channel, tag)
    if name in SETTLES_091 and direction == "c2s":
        return Delivery(record.get("version", ""), conn, "s2c", channel, tag)
    return None


def _covers_10(fields: dict[str, Any], key: int) -> bool:
    first = _int(fields.get("first"))
    if first is None:
        return False
    last = _int(fields.get("last"))
    return first <= key <= (first if last is None else last)


def _covers_091(fields: dict[str, Any], key: int) -> bool:
    tag = _int(fields.get("delivery-tag"))
    if tag is None:
        return False
    if fields.get("multiple"):
        return tag == 0 or tag >= key
    return tag == key


def follow(
    delivery: Delivery,
    chosen: int,
    records: Iterable[tuple[int, dict[str, Any]]],
    peers: PeerChannels,
) -> list[int]:
    """The indexes of the frames of the delivery that holds frame index `chosen`; `records`
    are (index, record) in capture order. Empty when no group holds it."""
    groups: list[list[int]] = []
    current: list[int] | None = None
    continuing = False  # the group's last transfer said `more` / a 0-9-1 content follows
    handle: Any = None
    key, conn, sent = delivery.key, delivery.conn, delivery.direction
    receiver_channel = peers.get((conn, sent, delivery.channel))
    is_10 = delivery.version == "1.0"
    for index, record in records:
        if record.get("conn") != conn:
            continue
        direction, channel = record.get("dir"), record.get("channel")
        name, fields = record.get("name"), record.get("fields") or {}
        if direction == sent and channel == delivery.channel:
            if is_10 and name == "transfer":
                number = _int(fields.get("delivery-id"))
                same = fields.get("handle") == handle
                if continuing and same and current is not None and number in (None, key):
                    current.append(index)  # a continuation, with its id repeated or not
                    continuing = bool(fields.get("more"))
                elif number == key:
                    current = [index]
                    groups.append(current)
                    continuing, handle = bool(fields.get("more")), fields.get("handle")
                elif same:
                    continuing = False
                continue
            if not is_10:
                if name in DELIVERIES_091:
                    continuing = False
                    if _int(fields.get("delivery-tag")) == key:
                        current = [index]
                        groups.append(current)
                        continuing = True
                    continue
                if record.get("kind") in CONTENT:
                    if continuing and current is not None:
                        current.append(index)
                    continue
                if record.get("kind") == "method":
                    continuing = False
        if current is None:
            continue
        if is_10 and name == "disposition" and _covers_10(fields, key):
            mine = fields.get("role") == "sender" and direction == sent
            mine = mine and channel == delivery.channel
            theirs = fields.get("role") == "receiver" and direction == OTHER[sent]
            theirs = theirs and (receiver_channel is None or channel == receiver_channel)
            if mine or theirs:
                current.append(index)
        elif not is_10 and direction == OTHER[sent] and channel == delivery.channel:
            if name in SETTLES_091 and _covers_091(fields, key):
                current.append(index)
                current = None  # settled: a later tag of that number is another delivery
            elif name in ("channel.open", "channel.close"):
                current = None
    for group in groups:
        if chosen in group:
            return group
    return []


def same_message(first: int, links: Mapping[int, Any]) -> list[int]:
    """The frame numbers of every delivery of the message delivered at frame `first` (a
    delivery's first frame), in order: `links` maps a redelivery's frame to its `Redelivery`
    (whose `earlier` is the frame of the delivery before it, 0 when not captured)."""
    later: dict[int, list[int]] = {}
    for frame, link in links.items():
        if link.earlier:
            later.setdefault(link.earlier, []).append(frame)
    seen, todo = {first}, [first]
    while todo:
        frame = todo.pop()
        link = links.get(frame)
        near = [link.earlier] if link is not None and link.earlier else []
        for other in near + later.get(frame, []):
            if other not in seen:
                seen.add(other)
                todo.append(other)
    return sorted(seen)


def owner_of(chosen: dict[str, Any], before: Iterable[tuple[int, dict[str, Any]]]) -> int | None:
    """The index of the method a 0-9-1 content frame (`chosen`) carries the content of: the
    last method before it sent the same way on the same channel. `before` are (index, record)
    going back from it; None when a frame of another kind comes first, or none is found."""
    if chosen.get("version") == "1.0" or chosen.get("kind") not in CONTENT:
        return None
    where = (chosen.get("conn"), chosen.get("dir"), chosen.get("channel"))
    for index, record in before:
        if (record.get("conn"), record.get("dir"), record.get("channel")) != where:
            continue
        if record.get("kind") in CONTENT:
            continue
        return index if record.get("kind") == "method" else None
    return None


@dataclass(frozen=True)
class Publish:
    """A 0-9-1 basic.publish to follow: on `conn` and `channel`, at store index `index`."""

    conn: int
    channel: int
    index: int

    def label(self) -> str:
        return f"follow c{self.conn} ch{self.channel} publish"


def publish_of(record: dict[str, Any], index: int) -> Publish | None:
    """The publish a frame is, or None (a content frame is followed through `owner_of`)."""
    if record.get("version") == "1.0" or record.get("name") != "basic.publish":
        return None
    channel = record.get("channel")
    if record.get("dir") != "c2s" or channel is None:
        return None
    return Publish(record.get("conn", 0), channel, index)


def follow_publish(
    publish: Publish, records: Iterable[tuple[int, dict[str, Any]]]
) -> tuple[list[int], dict[str, Any] | None]:
    """The frames of a publish on its own channel: the method, its content, the broker's
    basic.return of it (and that content) and its confirm (the basic.ack or nack whose tag,
    or `multiple` up to it, covers the publish's number since confirm.select); and the
    message it completed (None when its content was not seen whole). `records` are the
    publisher's connection's (index, record) in capture order."""
    from amqpscope.track.amqp091.journeys import message_key

    group: list[int] = []
    message: dict[str, Any] | None = None
    confirming, number, mine = False, 0, 0
    content = False  # the frames after the publish (or its return) are its content
    returned: list[int] = []  # a basic.return and its content, kept if it is this message
    for index, record in records:
        if record.get("conn") != publish.conn or record.get("channel") != publish.channel:
            continue
        name, kind, fields = record.get("name"), record.get("kind"), record.get("fields") or {}
        if record.get("dir") == "c2s":
            if name == "confirm.select":
                confirming, number = True, 0
            elif name == "channel.open":
                confirming, number = False, 0
                if group:
                    break
            elif name == "basic.publish":
                number += confirming
                if index == publish.index:
                    group, mine, content = [index], number, True
                    continue
            if kind in CONTENT and content and record.get("dir") == "c2s":
                group.append(index)
                message = record.get("message") or message
            elif kind == "method":
                content = False
            continue
        if not group:
            continue
        if name == "basic.return":
            returned, content = [index], False
            continue
        if kind in CONTENT and returned:
            returned.append(index)
            back = record.get("message")
            if back is not None:
                if message is not None and message_key(back) == message_key(message):
                    group += returned
                returned = []
            continue
        if name in ("basic.ack", "basic.nack") and mine and _covers_091(fields, mine):
            group.append(index)
            break
        if name in ("channel.close", "channel.close-ok"):
            break
    return group, message


def deliveries_of(
    message: dict[str, Any], publish: int, records: Iterable[tuple[int, dict[str, Any]]]
) -> list[int]:
    """The indexes of the basic.deliver / get-ok frames that delivered `message`, published
    at index `publish`, first (not redelivered: `same_message` links a redelivery to the
    delivery before it), matched as the journeys match them (`message_key`: its message-id,
    else exchange, routing key, body size and body). An identical message published more than
    once: the n-th publish is the n-th delivery (one queue, in order, as the journeys count)."""
    from amqpscope.track.amqp091.journeys import message_key

    key = message_key(message)
    last: dict[tuple[Any, Any, Any], int] = {}  # the deliver before the content, per channel
    found: list[int] = []
    published = rank = 0
    for index, record in records:
        where = (record.get("conn"), record.get("dir"), record.get("channel"))
        if record.get("name") in DELIVERIES_091:
            last[where] = index
            continue
        carried = record.get("message")
        if carried is None or message_key(carried) != key:
            continue
        if carried.get("method") == "basic.publish":
            published += 1
            rank += index < publish
        elif carried.get("method") in DELIVERIES_091 and where in last:
            redelivered = (carried.get("arguments") or {}).get("redelivered")
            found += [] if redelivered else [last.pop(where)]
    return found if published <= 1 else found[rank : rank + 1]
