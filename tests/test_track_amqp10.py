"""The AMQP 1.0 tracker against sequences worked by hand from the specification.

Credit (spec 2.6.7): the sender's view of link-credit is
    delivery-count(rcv) + link-credit(rcv) - delivery-count(snd);
session windows (spec 2.5.6): the sender's remote-incoming-window is
    next-incoming-id(rcv) + incoming-window(rcv) - next-outgoing-id(snd).
Each test writes the frames out, works the numbers in comments, and checks them. Frames are
built directly (the tracker needs only names, directions, channels and decoded fields).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from amqpscope.capture.files import open_capture
from amqpscope.codec.frames import Frame
from amqpscope.dissect import Dissector
from amqpscope.findings import finding
from amqpscope.track.amqp10 import ConnectionTracker
from amqpscope.track.amqp10.link import Credit
from amqpscope.track.amqp10.rules import RESERVOIR, SERIAL, serial_add, serial_diff
from amqpscope.track.amqp10.session import Half
from amqpscope.track.stats import Latency
from amqpscope.track.tracker import Tracker

CAPTURES = Path(__file__).resolve().parent.parent / "captures"


class Wire:
    """A conversation written frame by frame; `send` returns the findings the frame raised."""

    def __init__(self) -> None:
        self.tracker = ConnectionTracker(1, "10.0.0.1:40000", "10.0.0.2:5672", "1.0")
        self.number = 0
        self.ts = 100.0
        self.findings: list[Any] = []

    def send(
        self,
        direction: str,
        perf: str,
        channel: int | None = 0,
        /,
        *,
        dt: float = 0.001,
        size: int = 64,
        kind: str = "performative",
        message: dict | None = None,
        extra: list | None = None,
        **fields: Any,
    ) -> list[str]:
        self.number += 1
        self.ts += dt
        frame = Frame(
            "1.0",
            kind,
            perf,
            channel,
            b"\0" * size,
            direction=direction,
            number=self.number,
            packet=self.number,
            ts=self.ts,
            conn=1,
            fields={k.replace("_", "-"): v for k, v in fields.items()},
            message=message,
            findings=list(extra or []),
        )
        got = self.tracker.feed(frame)
        self.findings.extend(got)
        return [f.code for f in got]

    def header(self) -> None:
        self.send("c2s", "protocol-header", None, kind="protocol-header", protocol="AMQP 1.0")
        self.send("s2c", "protocol-header", None, kind="protocol-header", protocol="AMQP 1.0")

    def open(self, client: dict | None = None, server: dict | None = None) -> None:
        self.header()
        self.send("c2s", "open", container_id="c", **(client or {}))
        self.send("s2c", "open", container_id="s", **(server or {}))

    def begin(self, client_window: int = 1000, server_window: int = 1000, channel: int = 0):
        self.send(
            "c2s",
            "begin",
            channel,
            next_outgoing_id=0,
            incoming_window=client_window,
            outgoing_window=1000,
        )
        self.send(
            "s2c",
            "begin",
            channel,
            remote_channel=channel,
            next_outgoing_id=0,
            incoming_window=server_window,
            outgoing_window=1000,
        )

    def attach_sender(self, handle: int = 0, initial: int = 0, **extra: Any) -> None:
        """The client sends on `handle`; the server receives on the same handle."""
        self.send(
            "c2s",
            "attach",
            name=f"l{handle}",
            handle=handle,
            role="sender",
            initial_delivery_count=initial,
            target={"type": "target", "address": "q"},
            **extra,
        )
        self.send(
            "s2c",
            "attach",
            name=f"l{handle}",
            handle=handle,
            role="receiver",
            target={"type": "target", "address": "q"},
        )

    def transfer(self, delivery_id: int | None, handle: int = 0, direction: str = "c2s", **f: Any):
        tag = f.pop("tag", f"{delivery_id:04x}" if delivery_id is not None else None)
        fields = {"handle": handle, "delivery_tag": tag, **f}
        if delivery_id is not None:
            fields["delivery_id"] = delivery_id
        return self.send(direction, "transfer", **fields)

    def receiver_flow(self, delivery_count: int | None, credit: int, handle: int = 0, **f: Any):
        fields = {"incoming_window": 1000, "next_outgoing_id": 0, "outgoing_window": 1000, **f}
        if delivery_count is not None:
            fields["delivery_count"] = delivery_count
        return self.send("s2c", "flow", handle=handle, link_credit=credit, **fields)

    def sender_flow(self, delivery_count: int, credit: int, handle: int = 0, **f: Any):
        """A flow from the client's sending end; it restates its own next-outgoing-id."""
        nxt = self.tracker.sessions[0].half["client"].next_outgoing
        return self.send(
            "c2s",
            "flow",
            handle=handle,
            delivery_count=delivery_count,
            link_credit=credit,
            incoming_window=1000,
            next_outgoing_id=nxt,
            outgoing_window=1000,
            **f,
        )

    def summary(self) -> dict[str, Any]:
        out = self.tracker.summary()
        json.dumps(out, allow_nan=False)
        return out

    def link(self, session: int = 0, index: int = 0) -> dict[str, Any]:
        return self.summary()["sessions"][session]["links"][index]


def ready(initial: int = 0) -> Wire:
    wire = Wire()
    wire.open()
    wire.begin()
    wire.attach_sender(initial=initial)
    return wire


# --- serial numbers ----------------------------------------------------------------------------


def test_serial_arithmetic_wraps() -> None:
    assert serial_add(SERIAL - 1, 1) == 0
    assert serial_diff(2, SERIAL - 3) == 5
    assert serial_diff(SERIAL - 3, 2) == -5
    assert serial_diff(7, 7) == 0


# --- credit ------------------------------------------------------------------------------------


def test_credit_reduced_while_transfers_are_in_flight() -> None:
    """Receiver grants 10 (delivery-count 0). The sender sends 3: its delivery-count is 3,
    credit 7. The receiver, having seen only 1 of them, cuts credit: flow delivery-count 1,
    link-credit 5. Sender's view: 1 + 5 - 3 = 3 (not 5: two were in flight). 3 more
    transfers use it up; a 4th is sent without credit."""
    wire = ready()
    assert wire.receiver_flow(0, 10) == []
    c = wire.tracker.sessions[0].links[0].credit
    assert (c.count, c.credit, c.issued) == (0, 10, 10)
    for i in range(3):
        assert wire.transfer(i) == []
    assert (c.count, c.credit) == (3, 7)
    wire.receiver_flow(1, 5)
    assert c.credit == 3
    assert c.issued == 10  # the limit went down (6 < 10): nothing new was issued
    for i in range(3, 6):
        assert wire.transfer(i) == []
    assert c.credit == 0
    assert wire.transfer(6) == ["amqp10.transfer-without-credit"]
    assert wire.transfer(7) == []  # the same run: reported once
    assert c.without_credit == 2 and c.credit == -2
    # credit renewed: the receiver has seen all 8 and grants 5 more; the run is over
    wire.receiver_flow(8, 5)
    assert c.credit == 5 and c.issued == 13  # the limit moved from 10 to 13
    assert wire.transfer(8) == []
    link = wire.link()
    assert link["credit"]["link-credit"] == 4 and link["credit"]["delivery-count"] == 9


def test_receiver_flow_before_the_senders_attach_uses_initial_delivery_count() -> None:
    """A receiving client attaches and flows (no delivery-count: it has not seen the sender's
    attach) before the server's sender attach says initial-delivery-count 100. The sender's
    view: 100 + 10 - 100 = 10."""
    wire = Wire()
    wire.open()
    wire.begin()
    wire.send(
        "c2s",
        "attach",
        name="r",
        handle=0,
        role="receiver",
        source={"type": "source", "address": "q"},
    )
    wire.send(
        "c2s",
        "flow",
        handle=0,
        link_credit=10,
        incoming_window=1000,
        next_outgoing_id=0,
        outgoing_window=1000,
    )
    c = wire.tracker.sessions[0].links[0].credit
    assert c.credit is None and c.pending == 10
    wire.send(
        "s2c",
        "attach",
        name="r",
        handle=0,
        role="sender",
        initial_delivery_count=100,
        source={"type": "source", "address": "q"},
    )
    assert (c.count, c.credit, c.issued) == (100, 10, 10)
    for i in range(10):
        assert wire.transfer(i, direction="s2c") == []
    assert c.count == 110 and c.credit == 0
    link = wire.link()
    assert link["role"] == "receiver" and link["source"] == "q" and link["deliveries"] == 10


def test_delivery_count_wraps_around() -> None:
    """initial-delivery-count 2^32 - 2, credit 5: after 3 transfers the count is 1, credit 2."""
    wire = ready(initial=SERIAL - 2)
    wire.receiver_flow(SERIAL - 2, 5)
    for i in range(3):
        wire.transfer(i)
    c = wire.tracker.sessions[0].links[0].credit
    assert (c.count, c.credit, c.issued) == (1, 2, 5)


def test_drain_completed_by_the_senders_flow() -> None:
    """Receiver: delivery-count 0, credit 10, drain. The sender has 3 messages: it sends them
    (count 3), then advances its delivery-count to 10 to use up the other 7 and says so in a
    flow (delivery-count 10, link-credit 0, drain). Drained 7; the drain is complete."""
    wire = ready()
    wire.receiver_flow(0, 10, drain=True)
    c = wire.tracker.sessions[0].links[0].credit
    assert c.draining and c.drains == 1
    for i in range(3):
        wire.transfer(i)
    assert wire.sender_flow(10, 0, drain=True, available=0) == []
    assert (c.drained, c.drains_completed, c.draining, c.credit) == (7, 1, False, 0)
    assert wire.transfer(3) == ["amqp10.transfer-without-credit"]


def test_drain_completed_by_transfers() -> None:
    """Credit 2 with drain, and the sender has 2 messages: they use the credit up; nothing is
    left to drain, so the drain is complete with 0 drained."""
    wire = ready()
    wire.receiver_flow(0, 2, drain=True)
    wire.transfer(0)
    wire.transfer(1)
    c = wire.tracker.sessions[0].links[0].credit
    assert (c.drained, c.drains_completed, c.draining) == (0, 1, False)


def test_drain_cancelled_by_the_receiver() -> None:
    wire = ready()
    wire.receiver_flow(0, 5, drain=True)
    wire.receiver_flow(0, 5, drain=False)
    c = wire.tracker.sessions[0].links[0].credit
    assert (c.drains, c.drains_completed, c.draining) == (1, 0, False)


def test_echo_is_answered_by_the_other_end() -> None:
    wire = ready()
    wire.receiver_flow(0, 5, echo=True)
    c = wire.tracker.sessions[0].links[0].credit
    assert (c.echo_asked, c.echo_answered) == (1, 0)
    wire.sender_flow(0, 5, available=3)
    assert (c.echo_asked, c.echo_answered) == (1, 1)
    assert c.available == 3
    wire.sender_flow(0, 5, echo=True)
    wire.receiver_flow(0, 5)
    assert (c.echo_asked, c.echo_answered) == (2, 2)


def test_credit_starvation_measured_from_available() -> None:
    """Credit 2; the sender sends 2 and says 4 more are available with credit 0 (t0). The
    receiver grants more 2.5 s later: one starvation episode of 2.5 s, a finding."""
    wire = ready()
    wire.receiver_flow(0, 2)
    wire.transfer(0)
    wire.transfer(1)
    wire.sender_flow(2, 0, available=4)
    assert wire.receiver_flow(2, 10, dt=2.5) == ["amqp10.credit-starvation"]
    starvation = wire.link()["credit"]["starvation"]
    assert starvation["episodes"] == 1 and starvation["seconds"] == pytest.approx(2.5)
    # a short wait is counted but not reported
    for i in range(2, 12):
        wire.transfer(i)
    wire.sender_flow(12, 0, available=1)
    assert wire.receiver_flow(12, 1, dt=0.01) == []
    assert wire.link()["credit"]["starvation"]["episodes"] == 2


def test_credit_starvation_still_open_at_the_end() -> None:
    wire = ready()
    wire.receiver_flow(0, 1)
    wire.transfer(0)  # credit 0
    wire.sender_flow(1, 0, available=5)
    wire.send("s2c", "heartbeat", kind="heartbeat", dt=3.0)
    codes = [f.code for f in wire.tracker.finish()]
    assert "amqp10.credit-starvation" in codes


def test_credit_class_alone() -> None:
    c = Credit()
    c.receiver_flow(None, 4, drain=False, echo=False, ts=0.0)
    assert c.credit is None and c.issued == 0
    c.sender_attached(7)
    assert (c.count, c.limit, c.credit, c.issued) == (7, 11, 4, 4)
    assert c.transfer(0.0) == 4
    assert c.credit == 3


# --- session windows ---------------------------------------------------------------------------


def test_session_window_arithmetic_and_exceeding_it() -> None:
    """Server begin: incoming-window 3 (its next-incoming-id is implied: our initial
    next-outgoing-id 0). Client sends 3 transfers (next-outgoing-id 3): window 3 - 3 = 0, a
    4th is beyond the window. The server's flow, written when it had seen 2 of the 4:
    next-incoming-id 2, incoming-window 3: 2 + 3 - 4 = 1."""
    wire = Wire()
    wire.open()
    wire.begin(server_window=3)
    wire.attach_sender()
    wire.receiver_flow(0, 100, incoming_window=3)
    half = wire.tracker.sessions[0].half["client"]
    assert half.window() == 3
    for i in range(3):
        assert wire.transfer(i) == []
    assert half.window() == 0
    assert wire.transfer(3) == ["amqp10.window-exceeded"]
    assert half.window() == -1
    wire.send(
        "s2c",
        "flow",
        next_incoming_id=2,
        incoming_window=3,
        next_outgoing_id=0,
        outgoing_window=1000,
        dt=1.5,
    )
    assert half.window() == 1
    assert wire.transfer(4) == []
    windows = wire.summary()["sessions"][0]["windows"]["c2s"]
    assert windows["next-outgoing-id"] == 5 and windows["remote-incoming-window"] == 0
    assert windows["incoming-window"] == 3 and windows["transfers"] == 5
    assert windows["exhausted"]["episodes"] == 1


def test_window_exhausted_for_long_is_a_finding() -> None:
    wire = Wire()
    wire.open()
    wire.begin(server_window=1)
    wire.attach_sender()
    wire.receiver_flow(0, 100, incoming_window=1)
    wire.transfer(0)  # window now 0
    got = wire.send(
        "s2c",
        "flow",
        next_incoming_id=1,
        incoming_window=1,
        next_outgoing_id=0,
        outgoing_window=1000,
        dt=2.0,
    )
    assert got == ["amqp10.window-exhausted"]


def test_half_alone_with_wrapping_transfer_ids() -> None:
    half = Half()
    half.initial_outgoing = half.next_outgoing = SERIAL - 1
    half.peer_stated(None, 2, 0.0)
    assert half.window() == 2
    half.transferred(0.0)
    assert half.next_outgoing == 0 and half.window() == 1
    half.peer_stated(0, 10, 0.0)
    assert half.window() == 10


# --- deliveries and settlement -----------------------------------------------------------------


def test_disposition_ranges_outcomes_and_latency() -> None:
    wire = ready()
    wire.receiver_flow(0, 100)
    for i in range(6):
        wire.transfer(i)
    assert (
        wire.send(
            "s2c",
            "disposition",
            role="receiver",
            first=0,
            last=2,
            settled=True,
            state={"type": "accepted"},
            dt=0.010,
        )
        == []
    )
    wire.send(
        "s2c",
        "disposition",
        role="receiver",
        first=3,
        settled=True,
        state={
            "type": "rejected",
            "error": {"type": "error", "condition": "amqp:decode-error", "description": "bad"},
        },
    )
    wire.send(
        "s2c",
        "disposition",
        role="receiver",
        first=4,
        settled=True,
        state={"type": "modified", "delivery-failed": True},
    )
    link = wire.link()
    assert link["outcomes"] == {"accepted": 3, "rejected": 1, "released": 0, "modified": 1}
    assert link["settled"] == 5 and link["unsettled"] == 1
    assert link["rejections"] == [
        {"condition": "amqp:decode-error", "description": "bad", "count": 1}
    ]
    assert link["latency"]["count"] == 5 and link["latency"]["max"] >= 10.0
    assert [f.code for f in wire.findings] == ["amqp10.rejected"]
    # delivery 5 is left unsettled when the link detaches
    wire.send("c2s", "detach", handle=0, closed=True)
    assert wire.send("s2c", "detach", handle=0, closed=True) == ["amqp10.unsettled-at-end"]
    assert wire.link()["unsettled"] == 1 and wire.link()["state"] == "detached"


def test_unknown_delivery_and_already_settled_ones() -> None:
    wire = ready()
    wire.receiver_flow(0, 100)
    wire.transfer(0)
    wire.send(
        "s2c", "disposition", role="receiver", first=0, settled=True, state={"type": "accepted"}
    )
    # settling it again is redundant, not unknown (it was transferred)
    assert wire.send("s2c", "disposition", role="receiver", first=0, settled=True) == []
    # delivery-ids 1..3 were never transferred
    got = wire.send("s2c", "disposition", role="receiver", first=1, last=3, settled=True)
    assert got == ["amqp10.unknown-delivery"]
    assert "1..3" in wire.findings[-1].message
    # role sender: the server names its own delivery-ids, none sent
    assert wire.send("s2c", "disposition", role="sender", first=0, settled=True) == [
        "amqp10.unknown-delivery"
    ]


def test_huge_disposition_range_walks_the_map() -> None:
    wire = ready()
    wire.receiver_flow(0, 100)
    for i in range(3):
        wire.transfer(i)
    got = wire.send(
        "s2c",
        "disposition",
        role="receiver",
        first=0,
        last=2**31 - 2,
        settled=True,
        state={"type": "accepted"},
    )
    assert got == ["amqp10.unknown-delivery"]
    assert wire.link()["settled"] == 3


def test_delivery_id_and_tag_reused_while_unsettled() -> None:
    wire = ready()
    wire.receiver_flow(0, 100)
    wire.transfer(0, tag="aa")
    assert wire.transfer(0, tag="bb") == ["amqp10.delivery-id-reused"]
    assert wire.transfer(2, tag="bb") == ["amqp10.delivery-tag-reused"]
    wire.send("s2c", "disposition", role="receiver", first=0, last=2, settled=True)
    assert wire.transfer(3, tag="aa") == []  # settled tags may be used again


def test_second_mode_settlement() -> None:
    """rcv-settle-mode second: the receiver reports its outcome unsettled, the sender settles,
    the receiver settles last. The outcome counts once; settlement happens once."""
    wire = ready()
    wire.receiver_flow(0, 10)
    wire.transfer(0)
    wire.send(
        "s2c", "disposition", role="receiver", first=0, settled=False, state={"type": "accepted"}
    )
    assert wire.link()["settled"] == 0
    wire.send(
        "c2s", "disposition", role="sender", first=0, settled=True, state={"type": "accepted"}
    )
    assert wire.send("s2c", "disposition", role="receiver", first=0, settled=True) == []
    link = wire.link()
    assert link["outcomes"]["accepted"] == 1 and link["settled"] == 1 and link["unsettled"] == 0


def test_presettled_multi_frame_and_aborted() -> None:
    wire = ready()
    wire.receiver_flow(0, 10)
    wire.transfer(0, settled=True)
    wire.transfer(1, more=True)
    wire.transfer(None, more=True)  # continuations: no credit, but session transfer-ids
    wire.transfer(None)
    wire.transfer(2, more=True)
    wire.transfer(None, aborted=True)
    link = wire.link()
    assert link["deliveries"] == 3 and link["presettled"] == 1 and link["aborted"] == 1
    assert link["unsettled"] == 1 and link["credit"]["delivery-count"] == 3
    assert wire.summary()["sessions"][0]["windows"]["c2s"]["transfers"] == 6


def test_settle_mode_violated() -> None:
    wire = Wire()
    wire.open()
    wire.begin()
    wire.attach_sender(snd_settle_mode="settled")
    wire.receiver_flow(0, 10)
    assert wire.transfer(0, settled=True) == []
    assert wire.transfer(1) == ["amqp10.settle-mode-violated"]


def test_unsettled_backlog_and_bounded_maps() -> None:
    wire = Wire()
    wire.open()
    wire.begin(server_window=1 << 20)
    wire.attach_sender()
    wire.receiver_flow(0, 20_000, incoming_window=1 << 20)
    codes = []
    for i in range(10_000):
        codes += wire.transfer(i)
    assert codes == ["amqp10.unsettled-backlog"]
    wire.send(
        "s2c",
        "disposition",
        role="receiver",
        first=0,
        last=9_999,
        settled=True,
        state={"type": "accepted"},
    )
    session = wire.tracker.sessions[0]
    assert session.half["client"].deliveries == {} and session.links[0].unsettled == {}


def test_latency_reservoir_is_bounded_and_deterministic() -> None:
    a, b = Latency(RESERVOIR), Latency(RESERVOIR)
    for i in range(50_000):
        a.add(i / 1000.0)
        b.add(i / 1000.0)
    assert len(a.samples) == RESERVOIR and a.count == 50_000
    assert a.to_json() == b.to_json()
    assert a.to_json()["max"] == 49_999.0
    assert 20_000 < a.to_json()["p50"] < 30_000


# --- links, sessions, connection ---------------------------------------------------------------


def test_unbegun_channel_unattached_handle_and_after_close() -> None:
    wire = Wire()
    wire.open()
    assert wire.send("c2s", "attach", 3, name="x", handle=0, role="sender") == [
        "amqp10.unbegun-channel"
    ]
    wire.begin()
    assert wire.transfer(0, handle=7) == ["amqp10.unattached-handle"]
    wire.send("c2s", "close")
    assert wire.send(
        "c2s", "begin", 1, next_outgoing_id=0, incoming_window=1, outgoing_window=1
    ) == ["amqp10.frame-after-close"]
    assert wire.send("c2s", "end", 1) == []  # reported once per side


def test_frame_too_large_and_channel_over_max() -> None:
    wire = Wire()
    wire.open(
        client={"max-frame-size": 1024, "channel-max": 1},
        server={"max-frame-size": 4096, "channel-max": 10},
    )
    assert wire.send(
        "s2c", "begin", 2, next_outgoing_id=0, incoming_window=5, outgoing_window=5, size=2000
    ) == ["amqp10.frame-too-large", "amqp10.channel-over-max"]
    assert (
        wire.send(
            "c2s", "begin", 0, next_outgoing_id=0, incoming_window=5, outgoing_window=5, size=2000
        )
        == []
    )


def test_heartbeat_late_against_the_peers_idle_time_out() -> None:
    wire = Wire()
    wire.open(server={"idle-time-out": 1000})
    wire.send("c2s", "heartbeat", None, kind="heartbeat", dt=0.6)
    assert wire.send("c2s", "heartbeat", None, kind="heartbeat", dt=1.4) == [
        "amqp10.heartbeat-late"
    ]
    assert wire.send("s2c", "heartbeat", None, kind="heartbeat", dt=5.0) == []  # client: none
    hb = wire.summary()["heartbeats"]
    assert hb["client"]["sent"] == 2 and hb["client"]["late"] == 1
    assert wire.summary()["open"]["holds"]["idle-time-out"] == {"c2s": 1000, "s2c": None}


def test_errors_on_detach_end_and_close() -> None:
    wire = ready()
    error = {"type": "error", "condition": "amqp:resource-limit-exceeded", "description": "full"}
    assert wire.send("s2c", "detach", handle=0, closed=True, error=error) == ["amqp10.error"]
    assert wire.link()["error"]["condition"] == "amqp:resource-limit-exceeded"
    assert wire.send("s2c", "end", error=error) == ["amqp10.error"]
    assert wire.send("s2c", "close", error=error) == ["amqp10.error"]
    out = wire.summary()
    assert out["close"] == {
        "by": "server",
        "condition": "amqp:resource-limit-exceeded",
        "description": "full",
    }
    assert out["state"] == "closing"


def test_reattach_with_the_same_name_is_a_new_link() -> None:
    wire = ready()
    wire.send("c2s", "detach", handle=0, closed=False)
    wire.send("s2c", "detach", handle=0, closed=False)
    wire.attach_sender()
    links = wire.summary()["sessions"][0]["links"]
    assert [link["state"] for link in links] == ["detached", "attached"]
    assert links[0]["name"] == links[1]["name"] == "l0"


def test_transaction_declare_transfer_and_discharge() -> None:
    wire = Wire()
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
    wire.send(
        "s2c",
        "disposition",
        role="receiver",
        first=0,
        settled=True,
        state={"type": "declared", "txn-id": "0001"},
    )
    wire.attach_sender(handle=1)
    wire.receiver_flow(0, 10, handle=1)
    txn = {"type": "transactional-state", "txn-id": "0001"}
    wire.transfer(1, handle=1, state=txn)
    wire.transfer(2, handle=1, state=txn)
    wire.send(
        "s2c",
        "disposition",
        role="receiver",
        first=1,
        last=2,
        settled=True,
        state={**txn, "outcome": {"type": "accepted"}},
    )
    discharge = {
        "body": {
            "type": "amqp-value",
            "value": {"type": "discharge", "txn-id": "0001", "fail": False},
        }
    }
    wire.transfer(3, handle=9, message=discharge)
    wire.send(
        "s2c", "disposition", role="receiver", first=3, settled=True, state={"type": "accepted"}
    )
    out = wire.summary()["transactions"]
    assert out["coordinator-links"] == 1 and out["declares"] == 1 and out["declared"] == 1
    assert out["discharges"] == 1 and out["committed"] == 1
    (item,) = out["items"]
    assert item["txn-id"] == "0001" and item["state"] == "committed"
    assert item["transfers"] == 2 and item["outcomes"]["accepted"] == 2
    links = wire.summary()["sessions"][0]["links"]
    assert links[0]["target"] == "coordinator"
    assert links[1]["outcomes"]["accepted"] == 2
    assert links[1]["states"] == {"transactional-state": 2}


def test_transaction_declare_rejected() -> None:
    wire = Wire()
    wire.open()
    wire.begin()
    wire.send(
        "c2s",
        "attach",
        name="txn",
        handle=0,
        role="sender",
        initial_delivery_count=0,
        target={"type": "coordinator"},
    )
    wire.send(
        "s2c", "attach", name="txn", handle=0, role="receiver", target={"type": "coordinator"}
    )
    wire.receiver_flow(0, 10)
    wire.transfer(0, message={"body": {"type": "amqp-value", "value": {"type": "declare"}}})
    error = {"type": "error", "condition": "amqp:not-implemented"}
    got = wire.send(
        "s2c",
        "disposition",
        role="receiver",
        first=0,
        settled=True,
        state={"type": "rejected", "error": error},
    )
    assert got == ["amqp10.rejected", "amqp10.transaction-failed"]
    assert wire.summary()["transactions"]["failed"] == 1


# --- mid-stream and lost bytes -----------------------------------------------------------------


def capture_frames(name: str) -> list[Frame]:
    with open_capture(str(CAPTURES / name)) as capture:
        return list(Dissector().run(capture))


def test_mid_stream_tracks_what_it_can_and_says_once_what_it_could_not_know() -> None:
    """10-outcomes from the broker's first transfer on: no open, begin or attach of the client's
    sender; the receiving link's attaches were before the cut too."""
    frames = [f for f in capture_frames("10-outcomes.pcap") if f.number >= 26]
    tracker = Tracker()
    for frame in frames:
        tracker.feed(frame)
    tracker.finish()
    out = tracker.summary()
    codes = [f["code"] for f in out["findings"]]
    assert codes.count("amqp10.mid-stream") == 1
    assert not {"amqp10.unbegun-channel", "amqp10.unattached-handle"} & set(codes)
    assert "amqp10.error" in codes  # the session error is still seen
    (conn,) = out["connections"]
    assert conn["mid-stream"] is True and conn["open"] is None
    assert any("open" in note for note in conn["unknown"])
    links = conn["sessions"][0]["links"]
    receiver = next(link for link in links if link["role"] == "receiver")
    assert receiver["inferred"] and receiver["name"] is None
    assert receiver["deliveries"] == 7
    assert receiver["outcomes"] == {"accepted": 4, "rejected": 1, "released": 1, "modified": 1}
    # the sender's own flow (delivery-count 6, credit 7) made credit known from frame 37 on
    assert receiver["credit"]["delivery-count"] == 7


def test_lost_bytes_make_state_unknown_not_violations() -> None:
    wire = ready()
    wire.receiver_flow(0, 2)
    wire.transfer(0)
    wire.transfer(1)
    gap = finding("tcp.gap", "100 bytes missing")
    # the frames that would have granted credit were lost: no finding for this transfer
    assert wire.transfer(5, extra=[gap]) == []
    assert wire.send("s2c", "disposition", role="receiver", first=3, settled=True) == []
    codes = [f.code for f in wire.tracker.finish()]
    assert codes == ["amqp10.unsettled-at-end", "amqp10.mid-stream"]  # 0, 1 and 5 unsettled
    assert wire.link()["unsettled"] == 3


# --- speed -------------------------------------------------------------------------------------


def test_a_long_conversation_settles_every_delivery() -> None:
    """A long conversation: transfers, flows and dispositions, every delivery counted and settled
    (its speed is measured in bench/, side by side with tshark, not timed here)."""
    wire = ready()
    frames = []
    for i in range(20_000):
        frames.append(
            Frame(
                "1.0",
                "performative",
                "transfer",
                0,
                b"",
                direction="c2s",
                ts=200.0 + i,
                fields={"handle": 0, "delivery-id": i, "delivery-tag": str(i)},
            )
        )
        if i % 10 == 9:
            frames.append(
                Frame(
                    "1.0",
                    "performative",
                    "flow",
                    0,
                    b"",
                    direction="s2c",
                    ts=200.0 + i,
                    fields={
                        "handle": 0,
                        "delivery-count": i + 1,
                        "link-credit": 100,
                        "next-incoming-id": i + 1,
                        "incoming-window": 1000,
                        "next-outgoing-id": 0,
                        "outgoing-window": 1000,
                    },
                )
            )
            frames.append(
                Frame(
                    "1.0",
                    "performative",
                    "disposition",
                    0,
                    b"",
                    direction="s2c",
                    ts=200.0 + i,
                    fields={
                        "role": "receiver",
                        "first": i - 9,
                        "last": i,
                        "settled": True,
                        "state": {"type": "accepted"},
                    },
                )
            )
    wire.receiver_flow(0, 100)
    feed = wire.tracker.feed
    for frame in frames:
        assert not feed(frame)
    link = wire.link()
    assert link["deliveries"] == 20_000 and link["settled"] == 20_000 and link["unsettled"] == 0


# --- damage: ill-typed fields ------------------------------------------------------------------


def test_ill_typed_fields_are_not_computed_with() -> None:
    """A decoder that met damage (amqp10.bad-field) keeps the wire's value on the frame, but the
    tracker leaves a value of the wrong type alone: a boolean delivery-id is no delivery-id (in
    Python False == 0, so it would settle delivery 0's entry or collide with it), a number is no
    link name. Found by running the compiled build over mutated captures (test_compiled.py)."""
    bad = [finding("amqp10.bad-field", "transfer.delivery-id encoded as boolean")]
    wire = ready()
    wire.receiver_flow(0, 100)
    assert wire.transfer(0, tag="aa") == []
    # as if absent: the session's next delivery-id (1), not a second delivery 0
    assert wire.transfer(False, tag="bb", extra=bad) == []  # type: ignore[arg-type]
    wire.send("s2c", "disposition", role="receiver", first=0, last=1, settled=True)
    link = wire.link()
    assert link["unsettled"] == 0 and link["deliveries"] == 2
    named = [finding("amqp10.bad-field", "attach.name encoded as uint")]
    wire.send("c2s", "attach", name=7, handle=1, role="sender", extra=named)
    assert wire.summary()["sessions"][0]["links"][1]["name"] is None


def test_scalar_field_types_come_from_the_spec() -> None:
    from amqpscope.codec.amqp10 import spec
    from amqpscope.codec.amqp10.composites import SCALARS, well_typed

    names = {c.name: {f.name for f in c.fields} for c in spec.COMPOSITES.values()}
    assert all(set(fields) <= names[c] for c, fields in SCALARS.items())
    assert SCALARS["transfer"]["delivery-id"] is int and SCALARS["attach"]["name"] is str
    assert "role" not in SCALARS["attach"]  # a choice: decoded to "sender" or "receiver"
    assert SCALARS["transfer"]["settled"] is bool
    fields = {"handle": 1, "delivery-id": True, "settled": 1, "delivery-tag": "ab"}
    assert well_typed("transfer", fields) == {"handle": 1, "delivery-tag": "ab"}


def test_a_protocol_header_after_a_failed_sasl_outcome_is_its_senders_breach() -> None:
    """After sasl-outcome auth nothing follows (1.0 part 5, 5.3.3.5): a header from either side
    is a finding that names its sender (ActiveMQ 5.17 sends its AMQP header so); after ok, the
    headers are the expected next step."""
    for code, expected in (("ok", []), ("auth", ["amqp10.header-after-failed-sasl"])):
        wire = Wire()
        sasl = {"kind": "protocol-header", "protocol": "AMQP 1.0 (sasl)"}
        wire.send("c2s", "protocol-header", None, **sasl)
        wire.send("s2c", "protocol-header", None, **sasl)
        wire.send("s2c", "sasl-mechanisms", None, kind="sasl", sasl_server_mechanisms=["PLAIN"])
        wire.send("c2s", "sasl-init", None, kind="sasl", mechanism="PLAIN")
        wire.send("s2c", "sasl-outcome", None, kind="sasl", code=code)
        amqp = {"kind": "protocol-header", "protocol": "AMQP 1.0 (amqp)"}
        assert wire.send("s2c", "protocol-header", None, **amqp) == expected
        assert wire.send("c2s", "protocol-header", None, **amqp) == expected
        if expected:
            said = [f.message for f in wire.findings if f.code == expected[0]]
            assert said[0].startswith("the server sent a protocol header (AMQP 1.0 (amqp))")
            assert said[1].startswith("the client sent")
