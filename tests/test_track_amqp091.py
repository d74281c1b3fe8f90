"""The 0-9-1 state tracker on conversations built at run time.

Frames are encoded by pika (an independent implementation), framed and decoded by amqpscope's own
codec, and fed to the `Tracker` in the order they are written, as a capture would have them. Each
test writes a short conversation and checks the summary and findings it gives.
"""

from __future__ import annotations

import json
from typing import Any

import pika.frame
import pika.spec as spec
import pytest

from amqpscope.codec.connection import ConnectionCodec
from amqpscope.diagnose import Diagnoser, Diagnosis
from amqpscope.track.amqp091 import journeys, rules
from amqpscope.track.amqp091.channel import MAX_LEFT
from amqpscope.track.amqp091.deliveries import Outstanding
from amqpscope.track.stats import RESERVOIR, Latency
from amqpscope.track.tracker import Tracker

C2S, S2C = "c2s", "s2c"


class Wire:
    """Some 0-9-1 connections: pika encodes what each side writes, amqpscope's codec frames it,
    and the tracker is fed each frame with a clock that moves `dt` per write; the diagnoser
    reads each frame after the tracker, as `read --diagnose` does (a frame fed to a second
    tracker would carry its findings twice)."""

    def __init__(self, keep: bool = True) -> None:
        self.tracker = Tracker()
        self.diagnoser = Diagnoser()
        self.finished = False
        self.codecs: dict[int, ConnectionCodec] = {}
        self.ts = 1000.0
        self.number = 0
        self.packet = 0
        self.keep = keep
        self.frames: list = []

    def write(self, conn: int, direction: str, data: bytes, dt: float = 0.001) -> list:
        codec = self.codecs.get(conn)
        if codec is None:
            codec = self.codecs[conn] = ConnectionCodec(
                from_start=direction == C2S and data[:4] == b"AMQP"
            )
        self.ts += dt
        self.packet += 1
        out = codec.data(direction, data, self.packet, self.ts)
        client, server = f"10.0.0.{conn}:40000", "10.0.0.100:5672"
        for frame in out:
            self.number += 1
            frame.number = self.number
            frame.conn = conn
            frame.src, frame.dst = (client, server) if direction == C2S else (server, client)
            self.tracker.feed(frame)
            self.diagnoser.feed(frame)
        if self.keep:
            self.frames.extend(out)
        return out

    def method(self, conn: int, direction: str, channel: int, method: Any, dt: float = 0.001):
        return self.write(conn, direction, pika.frame.Method(channel, method).marshal(), dt)

    def message(
        self,
        conn: int,
        direction: str,
        channel: int,
        method: Any,
        body: bytes = b"hello",
        dt: float = 0.001,
        **properties: Any,
    ):
        props = spec.BasicProperties(**properties)
        data = (
            pika.frame.Method(channel, method).marshal()
            + pika.frame.Header(channel, len(body), props).marshal()
            + pika.frame.Body(channel, body).marshal()
        )
        return self.write(conn, direction, data, dt)

    # -- scripted pieces ----------------------------------------------------------------------
    def handshake(self, conn: int = 1, heartbeat: int = 60, refuse: bool = False) -> None:
        self.write(conn, C2S, pika.frame.ProtocolHeader().marshal())
        self.method(
            conn,
            S2C,
            0,
            spec.Connection.Start(server_properties={"product": "RabbitMQ", "version": "3.10.8"}),
        )
        self.method(
            conn,
            C2S,
            0,
            spec.Connection.StartOk(
                client_properties={"product": "test", "version": "1"},
                response="\0guest\0secret-password",
            ),
        )
        if refuse:
            self.method(
                conn, S2C, 0, spec.Connection.Close(403, "ACCESS_REFUSED - Login was refused", 0, 0)
            )
            return
        self.method(conn, S2C, 0, spec.Connection.Tune(2047, 131072, 60))
        self.method(conn, C2S, 0, spec.Connection.TuneOk(2047, 131072, heartbeat))
        self.method(conn, C2S, 0, spec.Connection.Open(virtual_host="/test"))
        self.method(conn, S2C, 0, spec.Connection.OpenOk())

    def open(self, conn: int, channel: int) -> None:
        self.method(conn, C2S, channel, spec.Channel.Open())
        self.method(conn, S2C, channel, spec.Channel.OpenOk())

    def close(self, conn: int, channel: int, code: int = 200, by: str = C2S, cause=(0, 0)):
        self.method(conn, by, channel, spec.Channel.Close(code, "text", *cause))
        self.method(conn, S2C if by == C2S else C2S, channel, spec.Channel.CloseOk())

    def consume(self, conn: int, channel: int, queue: str, tag: str, no_ack: bool = False) -> None:
        self.method(
            conn, C2S, channel, spec.Basic.Consume(queue=queue, consumer_tag=tag, no_ack=no_ack)
        )
        self.method(conn, S2C, channel, spec.Basic.ConsumeOk(consumer_tag=tag))

    def deliver(
        self,
        conn: int,
        channel: int,
        tag: int,
        tag_of: str = "c1",
        queue: str = "q",
        body: bytes = b"hello",
        redelivered: bool = False,
        **props: Any,
    ):
        method = spec.Basic.Deliver(tag_of, tag, redelivered, "", queue)
        return self.message(conn, S2C, channel, method, body, **props)

    def publish(
        self,
        conn: int,
        channel: int,
        queue: str = "q",
        body: bytes = b"hello",
        mandatory: bool = False,
        exchange: str = "",
        **props: Any,
    ):
        method = spec.Basic.Publish(exchange=exchange, routing_key=queue, mandatory=mandatory)
        return self.message(conn, C2S, channel, method, body, **props)

    def finish(self) -> None:
        """The end of the conversation, once (a second `finish` would keep its findings twice)."""
        if not self.finished:
            self.tracker.finish()
            self.finished = True

    def summary(self) -> dict[str, Any]:
        self.finish()
        out = self.tracker.summary()
        json.dumps(out)  # the contract: always serialisable
        return out

    def diagnoses(self) -> list[Diagnosis]:
        """What the diagnoser makes of the conversation so far, ended here."""
        self.finish()
        return self.diagnoser.diagnoses(self.tracker)


def codes(summary: dict[str, Any]) -> list[str]:
    return [f["code"] for f in summary["findings"]]


def channels(summary: dict[str, Any], conn: int = 0) -> list[dict[str, Any]]:
    return summary["connections"][conn]["channels"]


@pytest.fixture
def wire() -> Wire:
    w = Wire()
    w.handshake()
    w.open(1, 1)
    return w


# -- settling deliveries ---------------------------------------------------------------------------
def test_ack_multiple_and_tag_zero_expand_to_every_outstanding_delivery(wire: Wire) -> None:
    wire.consume(1, 1, "q", "c1")
    for tag in range(1, 7):
        wire.deliver(1, 1, tag)
    wire.method(1, C2S, 1, spec.Basic.Ack(3, multiple=True))  # 1-3
    wire.method(1, C2S, 1, spec.Basic.Ack(5))  # 5
    for tag in range(7, 10):
        wire.deliver(1, 1, tag)
    wire.method(1, C2S, 1, spec.Basic.Ack(0, multiple=True))  # 4, 6, 7, 8, 9
    entry = channels(wire.summary())[0]
    assert (entry["deliveries"], entry["acks"], entry["unacked"]) == (9, 9, 0)
    assert entry["max-unacked"] == 6
    assert entry["ack-latency-ms"]["count"] == 9
    assert entry["consumers"][0]["deliveries"] == 9
    assert entry["consumers"][0]["queue"] == "q"


def test_nack_and_reject_count_messages_and_requeues(wire: Wire) -> None:
    wire.consume(1, 1, "q", "c1")
    for tag in range(1, 6):
        wire.deliver(1, 1, tag)
    wire.method(1, C2S, 1, spec.Basic.Nack(2, multiple=True, requeue=True))  # 1, 2
    wire.method(1, C2S, 1, spec.Basic.Reject(3, requeue=False))
    wire.method(1, C2S, 1, spec.Basic.Nack(4, multiple=False, requeue=False))
    wire.deliver(1, 1, 6, redelivered=True)
    wire.deliver(1, 1, 7, redelivered=True)
    wire.method(1, C2S, 1, spec.Basic.Ack(7, multiple=True))  # 5, 6, 7
    entry = channels(wire.summary())[0]
    assert (entry["nacks"], entry["rejects"], entry["acks"]) == (3, 1, 3)
    assert (entry["requeued"], entry["redelivered"], entry["unacked"]) == (2, 2, 0)


def test_unknown_delivery_tag_is_a_finding_linked_to_the_406_that_follows(wire: Wire) -> None:
    wire.consume(1, 1, "q", "c1")
    wire.deliver(1, 1, 1)
    ack = wire.method(1, C2S, 1, spec.Basic.Ack(1))[0]
    again = wire.method(1, C2S, 1, spec.Basic.Ack(1))[0]  # already settled
    wire.close(1, 1, 406, by=S2C, cause=(60, 80))
    summary = wire.summary()
    assert codes(summary) == ["amqp091.unknown-delivery-tag", "amqp091.channel-error"]
    unknown, error = summary["findings"]
    assert unknown["frame"] == again.number != ack.number
    assert f"frame {again.number}" in error["message"]
    close = channels(summary)[0]["close"]
    assert close["reply-code"] == 406 and close["class-method"] == "basic.ack"
    assert close["cause-frame"] == again.number and close["by"] == "server"
    assert channels(summary)[0]["acks"] == 1


def test_a_multiple_ack_of_an_unknown_tag_settles_nothing_as_rabbitmq_does(wire: Wire) -> None:
    wire.consume(1, 1, "q", "c1")
    wire.deliver(1, 1, 1)
    wire.deliver(1, 1, 2)
    wire.method(1, C2S, 1, spec.Basic.Ack(5, multiple=True))
    summary = wire.summary()
    assert codes(summary) == ["amqp091.unknown-delivery-tag", "amqp091.unacked-at-end"]
    assert channels(summary)[0]["acks"] == 0 and channels(summary)[0]["unacked"] == 2


def test_no_ack_deliveries_are_never_outstanding(wire: Wire) -> None:
    wire.consume(1, 1, "q", "auto", no_ack=True)
    wire.deliver(1, 1, 1, tag_of="auto")
    wire.method(1, C2S, 1, spec.Basic.Ack(1))  # the broker never tracked it
    summary = wire.summary()
    assert codes(summary) == ["amqp091.unknown-delivery-tag"]
    entry = channels(summary)[0]
    assert entry["unacked"] == 0 and entry["consumers"][0]["no-ack"] is True


def test_get_ok_get_empty_and_no_ack_gets(wire: Wire) -> None:
    wire.method(1, C2S, 1, spec.Basic.Get(queue="q"))
    wire.message(1, S2C, 1, spec.Basic.GetOk(1, False, "", "q", 1))
    wire.method(1, C2S, 1, spec.Basic.Get(queue="q", no_ack=True))
    wire.message(1, S2C, 1, spec.Basic.GetOk(2, False, "", "q", 0))
    wire.method(1, C2S, 1, spec.Basic.Get(queue="q"))
    wire.method(1, S2C, 1, spec.Basic.GetEmpty())
    summary = wire.summary()
    entry = channels(summary)[0]
    assert entry["get"] == {"ok": 2, "empty": 1, "unanswered": 0}
    assert (entry["deliveries"], entry["unacked"]) == (2, 1)  # the no-ack one needs no ack
    assert codes(summary) == ["amqp091.unacked-at-end"]


def test_unacked_deliveries_at_close_are_reported_once(wire: Wire) -> None:
    wire.consume(1, 1, "q", "c1")
    wire.deliver(1, 1, 1)
    wire.deliver(1, 1, 2)
    wire.close(1, 1)
    summary = wire.summary()
    assert codes(summary) == ["amqp091.unacked-at-end"]
    assert "requeues" in summary["findings"][0]["message"]
    assert channels(summary)[0]["unacked"] == 2


# -- prefetch ----------------------------------------------------------------------------------
def test_prefetch_saturation_is_counted_and_timed(wire: Wire) -> None:
    wire.method(1, C2S, 1, spec.Basic.Qos(prefetch_count=2))
    wire.consume(1, 1, "q", "c1")
    wire.deliver(1, 1, 1)
    wire.deliver(1, 1, 2, dt=0.001)  # saturated from here
    wire.method(1, C2S, 1, spec.Basic.Ack(1), dt=0.100)  # ... to here: 100 ms
    wire.deliver(1, 1, 3)  # saturated again
    wire.method(1, C2S, 1, spec.Basic.Ack(3, multiple=True), dt=0.050)
    summary = wire.summary()
    entry = channels(summary)[0]
    assert entry["max-unacked"] == 2
    prefetch = entry["prefetch"]
    assert (prefetch["count"], prefetch["global"], prefetch["saturations"]) == (2, False, 2)
    assert prefetch["saturated-ms"] == pytest.approx(150.0, abs=0.01)
    assert codes(summary) == ["amqp091.prefetch-saturated"]  # once per channel
    assert entry["consumers"][0]["prefetch"] == 2


def test_a_global_prefetch_limits_the_channel(wire: Wire) -> None:
    wire.method(1, C2S, 1, spec.Basic.Qos(prefetch_count=3, global_qos=True))
    wire.consume(1, 1, "q", "a")
    wire.consume(1, 1, "q", "b")
    wire.deliver(1, 1, 1, tag_of="a")
    wire.deliver(1, 1, 2, tag_of="b")
    assert codes(wire.summary()) == ["amqp091.unacked-at-end"]
    wire = Wire()
    wire.handshake()
    wire.open(1, 1)
    wire.method(1, C2S, 1, spec.Basic.Qos(prefetch_count=2, global_qos=True))
    wire.consume(1, 1, "q", "a")
    wire.consume(1, 1, "q", "b")
    wire.deliver(1, 1, 1, tag_of="a")
    wire.deliver(1, 1, 2, tag_of="b")
    summary = wire.summary()
    assert "amqp091.prefetch-saturated" in codes(summary)
    assert channels(summary)[0]["prefetch"]["saturations"] == 1


# -- publisher confirms and returns ------------------------------------------------------------
def test_confirms_are_numbered_from_select_and_settled_with_multiple(wire: Wire) -> None:
    wire.publish(1, 1)  # before confirm.select: not numbered
    wire.method(1, C2S, 1, spec.Confirm.Select())
    wire.method(1, S2C, 1, spec.Confirm.SelectOk())
    for _ in range(6):
        wire.publish(1, 1)
    wire.method(1, S2C, 1, spec.Basic.Ack(3, multiple=True))  # 1-3
    wire.method(1, S2C, 1, spec.Basic.Nack(4, multiple=False))  # 4
    wire.method(1, S2C, 1, spec.Basic.Ack(5))  # 5; 6 never confirmed
    summary = wire.summary()
    entry = channels(summary)[0]
    assert entry["publishes"] == 7
    confirms = entry["confirms"]
    assert (confirms["acked"], confirms["nacked"], confirms["pending"]) == (4, 1, 1)
    assert confirms["selected"] and confirms["latency-ms"]["count"] == 5
    assert codes(summary) == ["amqp091.publish-nacked", "amqp091.unconfirmed-at-end"]


def test_confirms_of_a_channel_adopted_mid_stream_are_counted_not_matched() -> None:
    """confirm.select came before the capture: the broker's numbers of the publishes seen are
    not known, so nothing is pending or unconfirmed for want of them (a guess either way)."""
    wire = Wire()  # no protocol header: the capture starts inside the connection
    for _ in range(3):
        wire.publish(1, 1)
    for tag in (501, 502):
        wire.method(1, S2C, 1, spec.Basic.Ack(tag))  # adopts confirm mode
    for _ in range(4):
        wire.publish(1, 1)
    wire.method(1, S2C, 1, spec.Basic.Ack(505, multiple=True))  # covers publishes not known
    wire.method(1, S2C, 1, spec.Basic.Nack(506))
    summary = wire.summary()
    entry = channels(summary)[0]
    assert entry["publishes"] == 7 and not entry["from-start"]
    confirms = entry["confirms"]
    assert confirms["selected"] and confirms["pending"] is None
    assert (confirms["acked"], confirms["nacked"], confirms["latency-ms"]) == (2, 1, None)
    assert "amqp091.unconfirmed-at-end" not in codes(summary)
    assert not [d for d in wire.diagnoses() if d.code == "publish.unconfirmed"]


def test_every_publish_left_unconfirmed_is_counted_not_only_those_listed() -> None:
    wire = Wire()
    wire.handshake()
    wire.open(1, 1)
    wire.method(1, C2S, 1, spec.Confirm.Select())
    wire.method(1, S2C, 1, spec.Confirm.SelectOk())
    published = MAX_LEFT + 8
    for _ in range(published):
        wire.publish(1, 1)
    wire.method(1, S2C, 1, spec.Basic.Ack(3, multiple=True))
    summary = wire.summary()  # the capture ends with the channel open
    assert channels(summary)[0]["confirms"]["pending"] == published - 3
    (finding,) = [f for f in summary["findings"] if f["code"] == "amqp091.unconfirmed-at-end"]
    assert finding["message"].startswith(f"{published - 3} publishes on channel 1 were not yet")
    (diagnosis,) = [d for d in wire.diagnoses() if d.code == "publish.unconfirmed"]
    assert diagnosis.title.startswith(f"{published - 3} publishes on channel 1 not yet confirmed")
    assert diagnosis.ongoing


def test_a_channel_closed_for_the_consumer_timeout_names_the_delivery_held(wire: Wire) -> None:
    """RabbitMQ closes a channel whose delivery outlived consumer_timeout with 406 and this
    reply-text (rabbit_channel.erl); the diagnosis gives the oldest delivery still unacked."""
    wire.consume(1, 1, "jobs", "c1")
    delivered = [wire.deliver(1, 1, tag)[0] for tag in (1, 2, 3)]
    wire.method(1, C2S, 1, spec.Basic.Ack(1))
    text = (
        "PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. Timeout value"
        " used: 1800000 ms. This timeout value can be configured, see consumers doc guide to"
        " learn more"
    )
    wire.method(1, S2C, 1, spec.Channel.Close(406, text, 0, 0), dt=1800.0)
    wire.method(1, C2S, 1, spec.Channel.CloseOk())
    (closed,) = [d for d in wire.diagnoses() if d.code == "close.channel"]
    assert closed.title == "Channel 1 closed by the server: 406 PRECONDITION_FAILED"
    assert "consumer timeout" in closed.explanation
    held = delivered[1]
    assert f"tag 2 in frame {held.number}, was 1800.0 s old" in closed.explanation
    assert closed.evidence[0] == held.number


def test_a_return_is_linked_to_its_mandatory_publish(wire: Wire) -> None:
    wire.method(1, C2S, 1, spec.Confirm.Select())
    wire.method(1, S2C, 1, spec.Confirm.SelectOk())
    wire.publish(1, 1, "routed", mandatory=True)
    wire.method(1, S2C, 1, spec.Basic.Ack(1))
    publish = wire.publish(1, 1, "nowhere", mandatory=True)[0]
    wire.message(1, S2C, 1, spec.Basic.Return(312, "NO_ROUTE", "", "nowhere"))
    wire.method(1, S2C, 1, spec.Basic.Ack(2))
    summary = wire.summary()
    entry = channels(summary)[0]
    assert entry["returns"] == 1 and entry["confirms"]["acked"] == 2
    assert entry["returned"][0]["publish-frame"] == publish.number
    assert entry["returned"][0]["reply-code"] == 312
    assert entry["deliveries"] == 0  # a returned message is not a delivery
    assert codes(summary) == ["amqp091.returned"]
    assert f"frame {publish.number}" in summary["findings"][0]["message"]


# -- transactions ------------------------------------------------------------------------------
def test_transactions_group_publishes_and_acks_and_rollback_drops_the_acks(wire: Wire) -> None:
    wire.consume(1, 1, "q", "c1")
    wire.deliver(1, 1, 1)
    wire.deliver(1, 1, 2)
    wire.method(1, C2S, 1, spec.Tx.Select())
    wire.method(1, S2C, 1, spec.Tx.SelectOk())
    wire.publish(1, 1)
    wire.method(1, C2S, 1, spec.Basic.Ack(1))
    wire.method(1, C2S, 1, spec.Tx.Commit())
    wire.method(1, S2C, 1, spec.Tx.CommitOk())
    wire.publish(1, 1)
    wire.publish(1, 1)
    wire.method(1, C2S, 1, spec.Basic.Ack(2))
    wire.method(1, C2S, 1, spec.Tx.Rollback())
    wire.method(1, S2C, 1, spec.Tx.RollbackOk())
    wire.method(1, C2S, 1, spec.Basic.Reject(2, requeue=False))
    wire.method(1, C2S, 1, spec.Tx.Commit())
    wire.method(1, S2C, 1, spec.Tx.CommitOk())
    summary = wire.summary()
    entry = channels(summary)[0]
    tx = entry["tx"]
    assert (tx["commits"], tx["rollbacks"]) == (2, 1)
    groups = [
        (t["outcome"], t["publishes"], t.get("acks"), t.get("rejects")) for t in tx["transactions"]
    ]
    assert groups == [("commit", 1, 1, 0), ("rollback", 2, None, None), ("commit", 0, 0, 1)]
    assert tx["transactions"][1]["settles-discarded"] == 1
    assert (entry["acks"], entry["rejects"], entry["unacked"]) == (1, 1, 0)
    assert codes(summary) == []


# -- channels and their epochs -----------------------------------------------------------------
def test_a_reused_channel_number_is_a_new_entry_with_its_own_close(wire: Wire) -> None:
    wire.open(1, 2)
    wire.method(1, C2S, 1, spec.Queue.Declare(queue="q"))
    wire.close(1, 1, 406, by=S2C, cause=(50, 10))
    wire.open(1, 1)
    wire.method(1, C2S, 1, spec.Queue.Declare(queue="amq.x"))
    wire.method(1, C2S, 1, spec.Queue.Declare(queue="discarded"))  # in flight: dropped
    wire.close(1, 1, 403, by=S2C, cause=(50, 10))
    wire.open(1, 1)
    wire.publish(1, 1)
    wire.close(1, 1)
    summary = wire.summary()
    entries = [
        (e["channel"], e["use"], (e["close"] or {}).get("reply-code")) for e in channels(summary)
    ]
    assert entries == [(1, 1, 406), (2, 1, None), (1, 2, 403), (1, 3, 200)]
    assert channels(summary)[0]["close"]["class-method"] == "queue.declare"
    assert channels(summary)[3]["publishes"] == 1 and channels(summary)[1]["state"] == "open"
    assert channels(summary)[1]["ended"] == "capture" and channels(summary)[0]["ended"] == "closed"
    assert codes(summary) == ["amqp091.channel-error", "amqp091.channel-error"]


def test_frames_on_a_channel_never_opened_are_unexpected(wire: Wire) -> None:
    wire.publish(1, 5)
    summary = wire.summary()
    assert codes(summary) == ["amqp091.unexpected-method"]
    assert channels(summary)[-1]["channel"] == 5 and channels(summary)[-1]["publishes"] == 1


def test_consumers_cancelled_by_either_side(wire: Wire) -> None:
    wire.consume(1, 1, "a", "ca")
    wire.consume(1, 1, "b", "cb")
    wire.method(1, C2S, 1, spec.Basic.Cancel("ca"))
    wire.method(1, S2C, 1, spec.Basic.CancelOk("ca"))
    wire.method(1, S2C, 1, spec.Basic.Cancel("cb"))
    summary = wire.summary()
    consumers = {c["tag"]: c["cancelled-by"] for c in channels(summary)[0]["consumers"]}
    assert consumers == {"ca": "client", "cb": "server"}
    assert codes(summary) == ["amqp091.consumer-cancelled"]


def test_each_finding_is_placed_and_diagnosed_once(wire: Wire) -> None:
    """The finding the broker's cancel raises is on its frame once and gives one diagnosis
    (the helper once tracked the frames a second time to diagnose them: two of each)."""
    wire.consume(1, 1, "b", "cb")
    (cancel,) = wire.method(1, S2C, 1, spec.Basic.Cancel("cb"))
    wire.method(1, C2S, 1, spec.Channel.Flow(active=False))
    summary = wire.summary()
    assert codes(summary) == ["amqp091.consumer-cancelled", "amqp091.flow-stopped"]
    placed = [(f.number, g.code) for f in wire.frames for g in f.findings]
    assert len(placed) == len(set(placed)) == 2
    diagnoses = wire.diagnoses()
    assert [d.code for d in diagnoses if d.code.startswith("consumer.")] == [
        "consumer.cancelled",
        "consumer.flow-stopped",
    ]
    assert [f.code for f in cancel.findings] == ["amqp091.consumer-cancelled"]
    assert wire.diagnoses() == diagnoses  # asked again: the same, nothing kept twice


# -- the connection ---------------------------------------------------------------------------
def test_handshake_tune_products_and_close() -> None:
    wire = Wire()
    wire.handshake(heartbeat=30)
    wire.method(1, C2S, 0, spec.Connection.Close(320, "CONNECTION_FORCED", 0, 0))
    wire.method(1, S2C, 0, spec.Connection.CloseOk())
    summary = wire.summary()
    conn = summary["connections"][0]
    assert (conn["user"], conn["vhost"], conn["mechanism"], conn["state"]) == (
        "guest",
        "/test",
        "PLAIN",
        "closed",
    )
    assert conn["server-product"] == {"product": "RabbitMQ", "version": "3.10.8"}
    assert (
        conn["tune"]["negotiated"]["heartbeat"] == 30
        and conn["tune"]["proposed"]["heartbeat"] == 60
    )
    assert conn["close"]["reply-code"] == 320 and conn["close"]["by"] == "client"
    assert codes(summary) == ["amqp091.connection-error"]
    assert "secret-password" not in json.dumps(summary)


def test_a_refused_login() -> None:
    wire = Wire()
    wire.handshake(refuse=True)
    summary = wire.summary()
    assert codes(summary) == ["amqp091.login-refused"]
    conn = summary["connections"][0]
    assert conn["close"]["reply-code"] == 403 and conn["state"] == rules.CLOSING
    assert conn["channels"] == []


def test_heartbeat_silence_against_the_negotiated_interval() -> None:
    wire = Wire()
    wire.handshake(heartbeat=1)
    heartbeat = pika.frame.Heartbeat().marshal()
    for _ in range(3):
        wire.write(1, C2S, heartbeat, dt=0.5)
        wire.write(1, S2C, heartbeat, dt=0.0)
    wire.write(1, S2C, heartbeat, dt=1.5)  # late, not missed
    wire.write(1, C2S, heartbeat, dt=1.0)  # the client: 2.5 s of silence: missed
    summary = wire.summary()
    beat = summary["connections"][0]["heartbeat"]
    assert beat["frames"] == {"c2s": 4, "s2c": 4}
    assert beat["late"] == {"c2s": 1, "s2c": 1} and beat["missed"] == {"c2s": 1, "s2c": 0}
    assert beat["max-silence-s"]["c2s"] == pytest.approx(2.5)
    assert codes(summary) == ["amqp091.heartbeat-missed"]


def test_blocked_periods() -> None:
    wire = Wire()
    wire.handshake()
    wire.method(1, S2C, 0, spec.Connection.Blocked("low on memory"))
    wire.method(1, S2C, 0, spec.Connection.Unblocked(), dt=2.0)
    wire.method(1, S2C, 0, spec.Connection.Blocked("low on disk"))
    summary = wire.summary()
    blocked = summary["connections"][0]["blocked"]
    assert blocked["times"] == 2
    assert blocked["periods"][0]["seconds"] == pytest.approx(2.0)
    assert blocked["periods"][1]["reason"] == "low on disk"  # still blocked at the end
    assert codes(summary) == ["amqp091.blocked", "amqp091.blocked"]


def test_mid_stream_adopts_channels_and_tags_and_says_so_once() -> None:
    wire = Wire()
    for tag in (4, 5):
        wire.deliver(1, 1, tag, tag_of="old")
    wire.method(1, C2S, 1, spec.Basic.Ack(3))  # delivered before the capture
    wire.method(1, C2S, 1, spec.Basic.Ack(5, multiple=True))
    wire.method(1, C2S, 1, spec.Basic.Ack(9))  # above anything delivered: really unknown
    summary = wire.summary()
    assert codes(summary) == ["amqp091.mid-stream", "amqp091.unknown-delivery-tag"]
    conn = summary["connections"][0]
    assert conn["from-start"] is False and conn["user"] is None
    entry = conn["channels"][0]
    assert entry["from-start"] is False and (entry["acks"], entry["unacked"]) == (3, 0)


# -- across connections: journeys and request/reply --------------------------------------------
def test_journeys_across_connections_with_fanout_and_message_ids() -> None:
    wire = Wire()
    for conn in (1, 2, 3):
        wire.handshake(conn)
        wire.open(conn, 1)
    wire.consume(2, 1, "qa", "ca")
    wire.consume(3, 1, "qb", "cb")
    for _ in range(3):  # fanout: each message to both queues
        wire.publish(1, 1, "", body=b"same", exchange="fan")
    for i in range(3):
        wire.message(
            2, S2C, 1, spec.Basic.Deliver("ca", i + 1, False, "fan", ""), b"same", dt=0.010
        )
    wire.message(3, S2C, 1, spec.Basic.Deliver("cb", 1, False, "fan", ""), b"same", dt=0.020)
    wire.publish(1, 1, "qa", body=b"x", message_id="id-1")
    wire.message(
        2, S2C, 1, spec.Basic.Deliver("ca", 4, False, "", "qa"), b"x", dt=0.005, message_id="id-1"
    )
    wire.message(2, S2C, 1, spec.Basic.Deliver("ca", 5, True, "", "qa"), b"x", message_id="id-1")
    wire.message(2, S2C, 1, spec.Basic.Deliver("ca", 6, False, "", "qa"), b"never-published")
    summary = wire.summary()
    queues = {j["queue"]: j for j in summary["journeys"]}
    assert (queues["qa"]["matched"], queues["qa"]["redelivered"], queues["qa"]["unmatched"]) == (
        4,
        1,
        1,
    )
    assert queues["qb"]["matched"] == 1 and queues["qb"]["latency-ms"]["count"] == 1
    assert queues["qa"]["latency-ms"]["min"] == pytest.approx(5.0, abs=0.01)
    assert summary["journey-stats"]["publishes"] == 4


def test_journeys_forget_the_oldest_publishes_beyond_the_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(journeys, "MAX_PUBLISHES", 10)
    wire = Wire()
    wire.handshake()
    wire.open(1, 1)
    wire.consume(1, 1, "q", "c1")
    for i in range(25):
        wire.publish(1, 1, body=b"m%d" % i)
    for i in range(25):
        wire.deliver(1, 1, i + 1, body=b"m%d" % i)
    summary = wire.summary()
    assert summary["journeys"][0]["matched"] == 10 and summary["journeys"][0]["unmatched"] == 15
    assert summary["journey-stats"]["forgotten"] == 15
    assert len(wire.tracker.correlator.order) == 10 and len(wire.tracker.correlator.keys) == 10


def test_request_reply_pairs_with_latency_including_direct_reply_to() -> None:
    wire = Wire()
    for conn in (1, 2):
        wire.handshake(conn)
        wire.open(conn, 1)
    # conn 1 asks, conn 2 serves; the broker renames amq.rabbitmq.reply-to on delivery
    request = wire.publish(
        1, 1, "rpc", body=b"2", correlation_id="c-1", reply_to="amq.rabbitmq.reply-to"
    )
    wire.message(
        2,
        S2C,
        1,
        spec.Basic.Deliver("srv", 1, False, "", "rpc"),
        b"2",
        correlation_id="c-1",
        reply_to="amq.rabbitmq.reply-to.g2d.XYZ",
    )
    reply = wire.publish(
        2, 1, "amq.rabbitmq.reply-to.g2d.XYZ", body=b"4", correlation_id="c-1", dt=0.004
    )
    wire.message(
        1,
        S2C,
        1,
        spec.Basic.Deliver("cli", 1, False, "", "amq.rabbitmq.reply-to.g2d.XYZ"),
        b"4",
        correlation_id="c-1",
        dt=0.002,
    )
    wire.publish(1, 1, "rpc", body=b"3", correlation_id="c-2", reply_to="replies")  # unanswered
    summary = wire.summary()
    assert len(summary["rpc"]) == 1
    pair = summary["rpc"][0]
    assert pair["correlation-id"] == "c-1"
    assert (
        pair["request"]["frame"] == request[-1].number
        and pair["reply"]["frame"] == reply[-1].number
    )
    assert (
        pair["request"]["conn"] == 1
        and pair["reply"]["conn"] == 2
        and pair["answered"]["conn"] == 1
    )
    assert pair["service-ms"] == pytest.approx(4.0, abs=0.01)
    assert pair["latency-ms"] == pytest.approx(7.0, abs=0.01)
    assert summary["rpc-stats"]["unanswered"] == 1


# -- the building blocks -------------------------------------------------------------------------
def test_outstanding_settles_like_rabbitmq() -> None:
    tags = Outstanding()
    for tag in range(1, 11):
        tags.give(tag, tag)
    assert tags.settle(3, multiple=True) == [1, 2, 3]
    assert tags.settle(3, multiple=True) is None  # not outstanding any more
    assert tags.settle(5, multiple=False) == [5]
    assert tags.settle(7, multiple=True) == [4, 6, 7]
    assert tags.settle(0, multiple=False) is None
    assert tags.settle(0, multiple=True) == [8, 9, 10]
    assert len(tags) == 0 and tags.highest == 10 and tags.first == 1


def test_latency_percentiles_are_exact_when_few_and_bounded_when_many() -> None:
    stats = Latency()
    for ms in range(1, 101):
        stats.add(ms / 1000.0)
    out = stats.to_json()
    assert (out["count"], out["min"], out["p50"], out["p90"], out["p99"], out["max"]) == (
        100,
        1.0,
        50.0,
        90.0,
        99.0,
        100.0,
    )
    big = Latency()
    for i in range(50_000):
        big.add((i % 1000) / 1000.0)
    out = big.to_json()
    assert len(big.samples) == RESERVOIR and out["sampled"] == RESERVOIR
    assert out["count"] == 50_000 and out["p50"] == pytest.approx(500.0, abs=40.0)
    assert Latency().to_json() is None


def test_synchronous_requests_unanswered_when_their_channel_ended(wire: Wire) -> None:
    """A queue.delete the broker neither answered nor refused for 30 s before the client
    closed the channel; an answer that arrives while the client closes still answers; a
    request sent into a channel the broker is closing, or refused by that close, is not one."""
    (delete,) = wire.method(1, C2S, 1, spec.Queue.Delete(queue="stuck"))
    wire.method(1, C2S, 1, spec.Channel.Close(200, "gave up", 0, 0), dt=30.0)
    wire.method(1, S2C, 1, spec.Channel.CloseOk())
    wire.open(1, 2)
    wire.method(1, C2S, 2, spec.Queue.Purge(queue="q"))
    wire.method(1, C2S, 2, spec.Channel.Close(200, "bye", 0, 0))
    wire.method(1, S2C, 2, spec.Queue.PurgeOk(message_count=0))  # in flight: still answers
    wire.method(1, S2C, 2, spec.Channel.CloseOk())
    wire.open(1, 3)
    wire.method(1, C2S, 3, spec.Queue.Declare(queue="gone", passive=True))
    wire.method(1, S2C, 3, spec.Channel.Close(404, "NOT_FOUND", 50, 10))  # refused: answered
    wire.method(1, C2S, 3, spec.Queue.Declare(queue="x"))  # into the closing channel
    wire.method(1, C2S, 3, spec.Channel.CloseOk())
    summary = wire.summary()
    unanswered = [f for f in summary["findings"] if f["code"] == "amqp091.unanswered"]
    assert [f["message"] for f in unanswered] == [
        f"the broker had not answered queue.delete (frame {delete.number}, 30.001 s before) on"
        " channel 1 when it closed"
    ]
