"""The live watch, replayed on recorded captures at capture time: every stall `diagnose` finds
afterwards is reported once while it is on (a second or more into it, before it ends) and once
when it ends, with the same length; nothing is reported on a happy-path capture."""

from __future__ import annotations

from pathlib import Path

import pytest

from amqpscope.capture.files import open_capture
from amqpscope.diagnose import Diagnoser, Watch
from amqpscope.diagnose.watch import BEGAN, ENDED
from amqpscope.dissect import Dissector
from amqpscope.live_decode import LiveDecoder
from amqpscope.track.tracker import Tracker

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
TICK = 0.25  # how often `live --diagnose` checks between packets
IDLE = 2.0  # seconds without a packet before live capture closes a connection


def replay(name: str) -> tuple[list[tuple[float, str, dict]], list[dict]]:
    """(capture time, event, diagnosis) as live would report them, and diagnose's list."""
    tracker, diagnoser, watch = Tracker(), Diagnoser(), Watch()
    events: list[tuple[float, str, dict]] = []
    last = None
    with open_capture(str(CAPTURES / name)) as capture:
        for frame in Dissector().run(capture):
            if last is not None:  # the quiet time before this frame, tick by tick
                now = last + TICK
                while now < frame.ts:
                    events += [(now, e, d.to_json()) for e, d in watch.check(tracker, now)]
                    now += TICK
            tracker.feed(frame)
            diagnoser.feed(frame)
            events += [(frame.ts, e, d.to_json()) for e, d in watch.check(tracker, frame.ts)]
            last = frame.ts
    tracker.finish()
    return events, [d.to_json() for d in diagnoser.diagnoses(tracker)]


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("091-stalled-consumer.pcap", "consumer.stalled"),
        ("091-blocked-publisher.pcap", "publish.blocked"),
        ("10-credit-starved.pcap", "credit.starved"),
    ],
)
def test_each_stall_reported_while_on_and_when_over(name: str, code: str) -> None:
    events, found = replay(name)
    (after,) = [d for d in found if d["code"] == code]
    assert [(e, d["code"]) for _t, e, d in events] == [(BEGAN, code), (ENDED, code)]
    (began_at, _, began), (ended_at, _, ended) = events
    assert began["ongoing"] and began["duration"] >= 1.0
    assert began_at < after["start"] + after["duration"]  # said while it was still on
    assert began_at - after["start"] < 1.0 + TICK + 1e-6  # and as soon as it counted
    assert abs(ended["duration"] - after["duration"]) < 1e-6
    assert ended["start"] == after["start"] and not ended["ongoing"]
    assert ended_at >= after["start"] + after["duration"]


@pytest.mark.parametrize("name", ["091-qos-prefetch.pcap", "091-rpc.pcap", "10-drain.pcap"])
def test_short_limits_are_not_stalls(name: str) -> None:
    events, _found = replay(name)
    assert events == []


def test_a_stall_its_connection_ends_is_reported_ended_with_it() -> None:
    """Live capture forgets a connection once it has ended (`LiveDecoder` evicts it, here
    after it went idle): a stall still on then ends with it, once, still on, as long as it was
    seen on, and not "credit came". The recorded starvation with the capture cut inside it:
    the client went quiet while its link had no credit."""
    watch = Watch()
    pipeline = LiveDecoder(idle=IDLE, watch=watch)
    with open_capture(str(CAPTURES / "10-credit-starved.pcap")) as capture:
        packets = list(capture)
    starved = next(
        i for i, pkt in enumerate(packets) if pkt.ts - packets[0].ts > 1.0
    )  # the credit that ended it, 2.5 s on, is not in the cut
    events: list[tuple[float, str, dict]] = []
    for pkt in packets[:starved]:
        pipeline.feed(pkt)
    now = packets[starved - 1].ts
    while now < packets[starved - 1].ts + IDLE + 3.0:
        now += TICK
        pipeline.tick(now)
        found, pipeline.watched = pipeline.watched, []
        events += [(now, e, d.to_json()) for e, d in found + watch.check(pipeline.tracker, now)]
    (_, _, began), (ended_at, event, ended) = events
    assert began["code"] == ended["code"] == "credit.starved" and event == ENDED
    # the tracker ends it at the connection's last frame, 3 ms in; the watch saw it on for
    # seconds after (live time runs on between frames): it says so, and no more than it saw
    assert ended["start"] == began["start"]
    assert began["duration"] < ended["duration"] <= ended_at - ended["start"]
    assert ended_at - ended["duration"] - ended["start"] <= IDLE + TICK
    assert ended["ongoing"] and "still on" in ended["title"]
    assert "credit came" not in ended["explanation"]


def _frames(name: str) -> list:
    with open_capture(str(CAPTURES / name)) as capture:
        return list(Dissector().run(capture))


def test_stall_texts_name_who_stalled_where_and_what_ended_it() -> None:
    """`live --diagnose` and `tui --live` print these texts alone: each names the consumer (its
    tag, channel, connection and queue), the blocked connection, the starved link (its name
    and address), and what the wire showed end it. They said "ended: the acked again in frame
    73", "the unblocked", "the credit came", and named no connection or queue."""
    frames = _frames("091-stalled-consumer.pcap")
    (tag,) = [f.fields["consumer-tag"] for f in frames if f.name == "basic.consume-ok"]
    (queue,) = [f.fields["queue"] for f in frames if f.name == "basic.consume"]
    events, _ = replay("091-stalled-consumer.pcap")
    (_, _, began), (_, _, ended) = events
    who = f"consumer {tag!r} on channel 1 of connection c1 (queue {queue!r})"
    assert began["title"].startswith(f"Consumer {tag!r} on channel 1 of connection c1 (queue")
    assert who in ended["title"]
    acked = min(
        f.number for f in frames if f.name == "basic.ack" and f.number > began["evidence"][0]
    )
    assert ended["explanation"].endswith(f"ended: {who} acked again in frame {acked}.")

    frames = _frames("091-blocked-publisher.pcap")
    (unblocked,) = [f.number for f in frames if f.name == "connection.unblocked"]
    events, _ = replay("091-blocked-publisher.pcap")
    (_, _, began), (_, _, ended) = events
    assert began["title"].startswith("Publishing on connection c1 blocked by the broker")
    assert ended["explanation"].endswith(
        f"ended: the broker unblocked connection c1 in frame {unblocked}."
    )

    frames = _frames("10-credit-starved.pcap")
    attach = next(  # the client's receiving link, from the queue
        f
        for f in frames
        if f.name == "attach" and f.fields["role"] == "receiver" and "address" in f.fields["source"]
    )
    link, address = attach.fields["name"], attach.fields["source"]["address"]
    events, _ = replay("10-credit-starved.pcap")
    (_, _, began), (_, _, ended) = events
    who = f"link {link!r} (handle 1/1) from {address!r} on channel 0 of connection c1"
    assert began["title"].startswith(f"Link {link!r} (handle 1/1) from {address!r}")
    assert ended["explanation"].endswith(f"ended: {who} was granted credit.")
