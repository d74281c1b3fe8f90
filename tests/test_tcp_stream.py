"""TCP reassembly: amqpscope.stream.tcp, driven with hand-made Segment values."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amqpscope.capture.packet import ACK, FIN, PSH, RST, SYN, Segment
from amqpscope.stream.events import (
    StreamClose,
    StreamData,
    StreamFin,
    StreamGap,
    StreamOpen,
    StreamUnseen,
)
from amqpscope.stream.tcp import MAX_AHEAD, TIME_WAIT, TcpReassembler, events_from_segments

MASK = 0xFFFFFFFF
C = ("10.0.0.1", 40000)
S = ("10.0.0.2", 5672)


class Wire:
    """Numbers segments 1, 2, 3... with ts = number (unless given)."""

    def __init__(self) -> None:
        self.n = 0

    def seg(
        self,
        src: tuple[str, int],
        dst: tuple[str, int],
        seq: int,
        ack: int = 0,
        flags: int = ACK,
        payload: bytes = b"",
        ts: float | None = None,
    ) -> Segment:
        self.n += 1
        t = float(self.n) if ts is None else ts
        return Segment(self.n, t, src, dst, seq & MASK, ack & MASK, flags, payload)

    def handshake(self, cisn: int, sisn: int, c=C, s=S) -> list[Segment]:
        return [
            self.seg(c, s, cisn, 0, SYN),
            self.seg(s, c, sisn, cisn + 1, SYN | ACK),
            self.seg(c, s, cisn + 1, sisn + 1, ACK),
        ]


def run(segs, r: TcpReassembler | None = None, flush: bool = True):
    r = r or TcpReassembler()
    events = []
    for s in segs:
        events.extend(r.feed(s))
    if flush:
        events.extend(r.flush())
    return events, r.findings


def data(events, conn=1, direction="c2s") -> bytes:
    return b"".join(
        e.data
        for e in events
        if isinstance(e, StreamData) and e.conn == conn and e.direction == direction
    )


def gaps(events, conn=1, direction="c2s") -> list[int]:
    return [
        e.missing
        for e in events
        if isinstance(e, StreamGap) and e.conn == conn and e.direction == direction
    ]


def kinds(events) -> list[str]:
    return [type(e).__name__ for e in events]


def codes(findings) -> list[str]:
    return [f.code for f in findings]


def opens(events) -> list[StreamOpen]:
    return [e for e in events if isinstance(e, StreamOpen)]


def closes(events) -> list[StreamClose]:
    return [e for e in events if isinstance(e, StreamClose)]


# -- roles ------------------------------------------------------------------------------------


def test_handshake_roles_beat_port_guess():
    w = Wire()
    client, server = ("192.168.1.5", 5672), ("192.168.1.9", 45000)  # SYN wins over the port
    segs = w.handshake(100, 900, client, server)
    segs += [
        w.seg(client, server, 101, 901, ACK | PSH, b"AMQP\x00\x00\x09\x01"),
        w.seg(server, client, 901, 109, ACK | PSH, b"reply"),
    ]
    events, findings = run(segs)
    (o,) = opens(events)
    assert (o.conn, o.client, o.server, o.role_from, o.packet) == (1, client, server, "syn", 1)
    assert kinds(events)[0] == "StreamOpen"
    assert data(events, 1, "c2s") == b"AMQP\x00\x00\x09\x01"
    assert data(events, 1, "s2c") == b"reply"
    assert closes(events)[0].how == "eof"
    assert findings == []


def test_synack_only_receiver_is_client():
    w = Wire()
    segs = [
        w.seg(S, C, 5000, 101, SYN | ACK),
        w.seg(C, S, 101, 5001, ACK | PSH, b"hello"),
        w.seg(S, C, 5001, 106, ACK | PSH, b"hi"),
    ]
    events, _ = run(segs)
    (o,) = opens(events)
    assert (o.client, o.server, o.role_from) == (C, S, "syn")
    assert data(events, 1, "c2s") == b"hello"
    assert data(events, 1, "s2c") == b"hi"


def test_late_synack_stays_in_the_connection():
    w = Wire()
    segs = [
        w.seg(C, S, 100, 0, SYN),
        # the SYN-ACK (ISN 900) is missing from the capture here...
        w.seg(C, S, 101, 901, ACK | PSH, b"AMQP\x00\x00\x09\x01"),
        w.seg(S, C, 901, 109, ACK | PSH, b"start"),
        w.seg(S, C, 900, 101, SYN | ACK),  # ...and shows up late (a retransmission)
        w.seg(S, C, 906, 109, ACK | PSH, b"-more"),
    ]
    events, findings = run(segs)
    assert len(opens(events)) == 1
    assert data(events, 1, "s2c") == b"start-more"
    assert findings == []


def test_midstream_role_by_well_known_port():
    w = Wire()
    broker, app = ("10.1.1.1", 5671), ("10.1.1.2", 1234)  # 1234 is lower, but 5671 is AMQP
    events, _ = run([w.seg(broker, app, 7000, 3000, ACK | PSH, b"x" * 8)])
    (o,) = opens(events)
    assert (o.client, o.server, o.role_from) == (app, broker, "guess")
    assert data(events, 1, "s2c") == b"x" * 8


def test_midstream_role_by_lower_port():
    w = Wire()
    a, b = ("10.1.1.1", 45000), ("10.1.1.2", 6000)
    events, _ = run([w.seg(a, b, 7000, 3000, ACK | PSH, b"abc")])
    (o,) = opens(events)
    assert (o.client, o.server, o.role_from) == (a, b, "guess")
    assert data(events, 1, "c2s") == b"abc"


# -- ordering, retransmission, overlap --------------------------------------------------------


def test_in_order_fast_path():
    w = Wire()
    segs = w.handshake(1000, 2000)
    segs += [w.seg(C, S, 1001 + 10 * i, 2001, ACK, bytes([65 + i]) * 10) for i in range(5)]
    events, findings = run(segs)
    ds = [e for e in events if isinstance(e, StreamData)]
    assert [(d.packet, d.ts) for d in ds] == [(4 + i, float(4 + i)) for i in range(5)]
    assert data(events) == b"".join(bytes([65 + i]) * 10 for i in range(5))
    assert kinds(events) == ["StreamOpen"] + ["StreamData"] * 5 + ["StreamClose"]
    assert findings == []


def test_out_of_order_delivered_by_the_filling_packet():
    w = Wire()
    segs = w.handshake(1000, 2000)
    segs += [
        w.seg(C, S, 1011, 2001, ACK, b"B" * 10),  # 4: early
        w.seg(C, S, 1021, 2001, ACK, b"C" * 10),  # 5: early
        w.seg(C, S, 1001, 2001, ACK, b"A" * 10),  # 6: fills the hole
        w.seg(C, S, 1031, 2001, ACK, b"D" * 10),  # 7: in order again
    ]
    events, findings = run(segs)
    ds = [e for e in events if isinstance(e, StreamData)]
    assert [(d.data, d.packet) for d in ds] == [
        (b"A" * 10 + b"B" * 10 + b"C" * 10, 6),
        (b"D" * 10, 7),
    ]
    assert gaps(events) == [] and findings == []


def test_exact_retransmission_dropped():
    w = Wire()
    segs = w.handshake(1000, 2000)
    segs += [
        w.seg(C, S, 1001, 2001, ACK, b"hello"),
        w.seg(C, S, 1001, 2001, ACK, b"hello"),  # retransmitted before the ack
        w.seg(S, C, 2001, 1006, ACK),
        w.seg(C, S, 1001, 2001, ACK, b"hello"),  # spurious, after the ack
        w.seg(C, S, 1006, 2001, ACK, b"world"),
    ]
    events, findings = run(segs)
    assert data(events) == b"helloworld"
    assert len([e for e in events if isinstance(e, StreamData)]) == 2
    assert findings == []


def test_partial_overlap_trimmed():
    w = Wire()
    segs = w.handshake(1000, 2000)
    segs += [
        w.seg(C, S, 1001, 2001, ACK, b"0123456789"),
        w.seg(C, S, 1006, 2001, ACK, b"56789abcde"),  # half old, half new
        w.seg(C, S, 1021, 2001, ACK, b"klmno"),  # buffered
        w.seg(C, S, 1019, 2001, ACK, b"ijklm"),  # overlaps the buffered piece's start
        w.seg(C, S, 1016, 2001, ACK, b"fghijklmnopq"),  # fills the hole, overlaps both
    ]
    events, findings = run(segs)
    assert data(events) == b"0123456789abcdefghijklmnopq"
    assert findings == []


def test_overlap_mismatch_with_delivered_data_once_per_direction():
    w = Wire()
    segs = w.handshake(1000, 2000)
    segs += [
        w.seg(C, S, 1001, 2001, ACK, b"original"),
        w.seg(C, S, 1001, 2001, ACK, b"0riginal"),  # differs: the first copy is kept
        w.seg(C, S, 1003, 2001, ACK, b"XXXX"),  # differs again: not reported twice
        w.seg(C, S, 1009, 2001, ACK, b"!"),
    ]
    events, findings = run(segs)
    assert data(events) == b"original!"
    assert codes(findings) == ["tcp.overlap-mismatch"]
    assert findings[0].packet == 5


def test_overlap_mismatch_in_buffer():
    w = Wire()
    segs = w.handshake(1000, 2000)
    segs += [
        w.seg(C, S, 1006, 2001, ACK, b"56789"),  # buffered
        w.seg(C, S, 1004, 2001, ACK, b"34X67"),  # overlaps it with other bytes
        w.seg(C, S, 1001, 2001, ACK, b"012"),
        w.seg(S, C, 2001, 1001, ACK, b"ok"),
        w.seg(S, C, 2001, 1001, ACK, b"ok"),  # the other direction: still clean
    ]
    events, findings = run(segs)
    assert data(events) == b"0123456789"  # "34" from the second segment, "56789" first copy
    assert data(events, 1, "s2c") == b"ok"
    assert codes(findings) == ["tcp.overlap-mismatch"]
    assert findings[0].packet == 5


def test_acknowledged_data_is_forgotten():
    """History is only kept for unacknowledged data, so a late, different copy of acked data
    goes unnoticed (documented limit)."""
    w = Wire()
    segs = w.handshake(1000, 2000)
    segs += [
        w.seg(C, S, 1001, 2001, ACK, b"abcdef"),
        w.seg(S, C, 2001, 1007, ACK),
        w.seg(C, S, 1001, 2001, ACK, b"zzzzzz"),
    ]
    events, findings = run(segs)
    assert data(events) == b"abcdef"
    assert findings == []


def test_keepalives_are_neither_data_nor_mismatch_nor_gap():
    w = Wire()
    segs = w.handshake(1000, 2000)
    segs += [
        w.seg(C, S, 1001, 2001, ACK | PSH, b"frame"),
        w.seg(S, C, 2001, 1006, ACK),
        w.seg(C, S, 1005, 2001, ACK, b"\x00"),  # 1-byte keep-alive at seq-1, garbage byte
        w.seg(S, C, 2001, 1006, ACK),
        w.seg(C, S, 1005, 2001, ACK),  # zero-length keep-alive at seq-1
        w.seg(S, C, 2001, 1006, ACK),
        w.seg(C, S, 1006, 2001, ACK | PSH, b"more"),
    ]
    events, findings = run(segs)
    assert data(events) == b"framemore"
    assert gaps(events) == [] and findings == []


def test_midstream_keepalive_first():
    w = Wire()
    a, b = ("10.0.0.3", 50000), ("10.0.0.4", 5672)
    for first in (b"\x00", b""):  # Windows-style 1-byte, Linux-style zero-length
        segs = [
            w.seg(a, b, 4999, 9000, ACK, first),  # keep-alive at seq-1
            w.seg(b, a, 9000, 5000, ACK),
            w.seg(a, b, 5000, 9000, ACK | PSH, b"data"),
        ]
        events, findings = run(segs)
        assert data(events) == b"data"
        assert gaps(events) == [] and findings == []
    # and a keep-alive acked, then nothing: no gap at flush either
    events, findings = run([w.seg(a, b, 4999, 9000, ACK), w.seg(b, a, 9000, 5000, ACK)])
    assert gaps(events) == [] and findings == []


def test_midstream_reordered_start_within_slack():
    w = Wire()
    a, b = ("10.0.0.3", 50000), ("10.0.0.4", 5672)
    segs = [
        w.seg(a, b, 5000, 9000, ACK),  # a pure ACK anchors the direction provisionally
        w.seg(a, b, 4990, 9000, ACK, b"0123456789"),  # earlier: the anchor moves back
        w.seg(a, b, 5000, 9000, ACK, b"abc"),
    ]
    events, findings = run(segs)
    assert data(events) == b"0123456789abc"
    assert gaps(events) == [] and findings == []


def test_out_of_window_garbage_ignored():
    w = Wire()
    segs = w.handshake(1000, 2000)
    segs += [
        w.seg(C, S, 1001 + MAX_AHEAD + 12345, 2001, ACK, b"garbage"),
        w.seg(S, C, 2001, 1001 + MAX_AHEAD + 99999, ACK),  # a garbage ack as well
        w.seg(C, S, 1001, 2001, ACK, b"real"),
    ]
    r = TcpReassembler()
    events, findings = run(segs, r)
    assert data(events) == b"real"
    assert gaps(events) == [] and findings == []


# -- gaps -------------------------------------------------------------------------------------


def test_lost_segment_peer_ack_beyond_hole_declares_gap():
    w = Wire()
    segs = w.handshake(1000, 2000)
    segs += [
        w.seg(C, S, 1001, 2001, ACK, b"a" * 10),  # 4
        # 1011..1020 lost from the capture
        w.seg(C, S, 1021, 2001, ACK, b"c" * 10),  # 5: buffered behind the hole
        w.seg(S, C, 2001, 1031, ACK),  # 6: the server got it all: the hole is missing
        w.seg(C, S, 1031, 2001, ACK, b"d" * 10),  # 7: in order after the gap
    ]
    events, findings = run(segs)
    body = [e for e in events if isinstance(e, StreamData | StreamGap)]
    assert body == [  # declared at 6; the bytes after the gap are those packet 5 brought
        StreamData(1, "c2s", b"a" * 10, 4, 4.0),
        StreamGap(1, "c2s", 10, 6, 6.0),
        StreamData(1, "c2s", b"c" * 10, 5, 5.0),
        StreamData(1, "c2s", b"d" * 10, 7, 7.0),
    ]
    assert codes(findings) == ["tcp.gap"] and findings[0].packet == 6


def test_ack_ahead_of_data_in_capture_is_not_a_gap():
    w = Wire()
    segs = w.handshake(1000, 2000)
    segs += [
        w.seg(S, C, 2001, 1011, ACK),  # the capture shows the ack first
        w.seg(C, S, 1001, 2001, ACK, b"x" * 10),
    ]
    events, findings = run(segs)
    assert data(events) == b"x" * 10
    assert gaps(events) == [] and findings == []


def test_ack_below_buffered_data_declares_only_up_to_ack():
    w = Wire()
    segs = w.handshake(1000, 2000)
    segs += [
        w.seg(C, S, 1031, 2001, ACK, b"z" * 10),  # buffered; 1001..1030 not seen
        w.seg(S, C, 2001, 1011, ACK),  # server got 1001..1010: gap of 10, rest may yet come
        w.seg(C, S, 1011, 2001, ACK, b"y" * 20),
    ]
    events, _ = run(segs)
    assert gaps(events) == [10]
    assert data(events) == b"y" * 20 + b"z" * 10


def test_lost_segment_at_end_gap_at_flush():
    w = Wire()
    segs = w.handshake(1000, 2000)
    segs += [
        w.seg(C, S, 1001, 2001, ACK, b"a" * 10),
        # 1011..1030 lost
        w.seg(S, C, 2001, 1031, ACK),  # nothing after the hole is known yet: wait
    ]
    r = TcpReassembler()
    events, _ = run(segs, r, flush=False)
    assert gaps(events) == []
    tail = r.flush()
    assert kinds(tail) == ["StreamGap", "StreamClose"]
    assert tail[0] == StreamGap(1, "c2s", 20, 5, 5.0)
    assert tail[1] == StreamClose(1, "eof", 5, 5.0)
    assert codes(r.findings) == ["tcp.gap"]


def test_buffered_data_behind_hole_at_flush():
    w = Wire()
    segs = w.handshake(1000, 2000)
    segs += [w.seg(C, S, 1001, 2001, ACK, b"a" * 10), w.seg(C, S, 1021, 2001, ACK, b"c" * 5)]
    events, findings = run(segs)
    assert kinds(events)[-3:] == ["StreamGap", "StreamData", "StreamClose"]
    assert gaps(events) == [10]
    assert data(events) == b"a" * 10 + b"c" * 5
    assert codes(findings) == ["tcp.gap"]


def test_hole_before_fin_settled_by_ack_of_fin():
    w = Wire()
    segs = w.handshake(1000, 2000)
    segs += [
        w.seg(C, S, 1001, 2001, ACK, b"a" * 10),
        # 1011..1015 lost
        w.seg(C, S, 1016, 2001, FIN | ACK),  # FIN at 1016
        w.seg(S, C, 2001, 1017, FIN | ACK),  # acks data and FIN, and closes
        w.seg(C, S, 1017, 2002, ACK),
    ]
    events, _ = run(segs)
    assert gaps(events) == [5]
    assert [c.how for c in closes(events)] == ["fin"]
    assert closes(events)[0].packet == 6


def test_unseen_fin_is_not_a_gap():
    w = Wire()
    segs = w.handshake(1000, 2000)
    segs += [
        w.seg(C, S, 1001, 2001, ACK, b"bye"),
        # the client's FIN (seq 1004) is lost from the capture
        w.seg(S, C, 2001, 1005, FIN | ACK),
    ]
    events, _ = run(segs)
    assert gaps(events) == []
    assert [c.how for c in closes(events)] == ["fin"]


# -- wrap-around ------------------------------------------------------------------------------


def test_sequence_wraparound():
    w = Wire()
    isn = MASK - 15  # data starts at 2**32 - 15 and crosses zero
    chunks = [bytes([i]) * 8 for i in range(1, 7)]
    segs = w.handshake(isn, MASK - 3)
    pos = isn + 1
    for c in chunks:
        segs.append(w.seg(C, S, pos, MASK - 2, ACK, c))
        pos += len(c)
    segs[3], segs[4] = segs[4], segs[3]  # one reordering across the wrap, too
    segs.append(w.seg(S, C, MASK - 2, pos, ACK | PSH, b"0123456789"))  # server wraps as well
    segs.append(w.seg(S, C, MASK - 2 + 10, pos, ACK | PSH, b"abc"))
    events, findings = run(segs)
    assert data(events) == b"".join(chunks)
    assert data(events, 1, "s2c") == b"0123456789abc"
    assert findings == []


def test_gap_across_wraparound():
    w = Wire()
    isn = MASK - 4
    segs = w.handshake(isn, 7)
    segs += [
        w.seg(C, S, isn + 1, 8, ACK, b"abcd"),  # 2**32 - 4 .. 2**32 - 1
        # 0 .. 4 lost (5 bytes)
        w.seg(C, S, 5, 8, ACK, b"tail"),
        w.seg(S, C, 8, 9, ACK),
    ]
    events, _ = run(segs)
    assert gaps(events) == [5]
    assert data(events) == b"abcdtail"


# -- FIN, RST, connections --------------------------------------------------------------------


def test_fin_both_ways_closes_and_drops_state():
    w = Wire()
    segs = w.handshake(1000, 2000)
    segs += [
        w.seg(C, S, 1001, 2001, ACK | PSH, b"req"),
        w.seg(S, C, 2001, 1004, ACK | PSH, b"resp"),
        w.seg(C, S, 1004, 2005, FIN | ACK, b"!"),  # data with the FIN
        w.seg(C, S, 1006, 2005, ACK, b"after FIN"),  # ignored
        w.seg(S, C, 2005, 1006, FIN | ACK),
        w.seg(C, S, 1006, 2006, ACK),  # last ACK: a straggler, no new connection
    ]
    r = TcpReassembler()
    events, findings = run(segs, r, flush=False)
    assert data(events) == b"req!"
    assert data(events, 1, "s2c") == b"resp"
    # the client's FIN came first: it is who closed
    assert closes(events) == [StreamClose(1, "fin", 8, 8.0, by="c2s", fin_by="c2s")]
    assert len(opens(events)) == 1
    assert r._flows == {} and r._conns == {}
    assert r.flush() == []
    assert findings == []


def test_one_fin_then_nothing_closes_as_fin_at_flush():
    w = Wire()
    segs = w.handshake(1000, 2000)
    segs += [w.seg(C, S, 1001, 2001, FIN | ACK | PSH, b"last")]
    events, _ = run(segs)
    assert data(events) == b"last"
    assert closes(events) == [StreamClose(1, "fin", 4, 4.0, by="c2s", fin_by="c2s")]


def test_rst_closes_without_finding():
    w = Wire()
    segs = w.handshake(1000, 2000)
    segs += [
        w.seg(C, S, 1001, 2001, ACK | PSH, b"req"),
        w.seg(S, C, 2001, 1004, ACK | PSH, b"resp"),
        w.seg(C, S, 1004, 2005, ACK),
        w.seg(C, S, 1004, 2005, RST | ACK),
        w.seg(S, C, 2005, 0, RST),  # a second RST: straggler
    ]
    r = TcpReassembler()
    events, findings = run(segs, r, flush=False)
    assert closes(events) == [StreamClose(1, "rst", 7, 7.0, by="c2s")]  # the first RST's sender
    assert findings == []
    assert r.flush() == []


def test_rst_with_data_outstanding_is_a_finding():
    w = Wire()
    segs = w.handshake(1000, 2000)
    segs += [
        w.seg(C, S, 1001, 2001, ACK | PSH, b"req"),
        w.seg(S, C, 2001, 1004, ACK | PSH, b"unacknowledged"),
        w.seg(C, S, 1004, 2001, RST | ACK),
    ]
    events, findings = run(segs)
    assert closes(events)[0].how == "rst"
    assert codes(findings) == ["tcp.reset"]


def test_rst_that_acknowledges_the_last_data_strands_nothing():
    """aiormq sends connection.close and FIN at once, then resets on the broker's close-ok: the
    RST's own ack covers the close-ok (091-aiormq-happy). No finding."""
    w = Wire()
    segs = w.handshake(1000, 2000)
    segs += [
        w.seg(C, S, 1001, 2001, ACK | PSH, b"close"),
        w.seg(C, S, 1006, 2001, FIN | ACK),
        w.seg(S, C, 2001, 1007, ACK | PSH, b"ok"),
        w.seg(C, S, 1007, 2003, RST | ACK),
    ]
    events, findings = run(segs)
    assert closes(events)[0].how == "rst"
    assert findings == []


def test_rst_settles_holes():
    w = Wire()
    segs = w.handshake(1000, 2000)
    segs += [
        w.seg(C, S, 1001, 2001, ACK, b"a" * 4),
        w.seg(C, S, 1009, 2001, ACK, b"c" * 4),
        w.seg(S, C, 2001, 1001, RST | ACK),
    ]
    events, findings = run(segs)
    assert kinds(events)[-3:] == ["StreamGap", "StreamData", "StreamClose"]
    assert gaps(events) == [4]
    assert sorted(codes(findings)) == ["tcp.gap", "tcp.reset"]


def test_rst_for_unknown_pair_ignored():
    w = Wire()
    events, findings = run([w.seg(C, S, 5, 0, RST)])
    assert events == [] and findings == []


def test_connection_reuse_after_close_gets_new_id():
    w = Wire()
    segs = w.handshake(1000, 2000)
    segs += [
        w.seg(C, S, 1001, 2001, FIN | ACK),
        w.seg(S, C, 2001, 1002, FIN | ACK),
        w.seg(C, S, 1002, 2002, ACK),
    ]
    segs += w.handshake(50000, 60000)  # same ports, new connection
    segs += [w.seg(C, S, 50001, 60001, ACK | PSH, b"second")]
    events, _ = run(segs)
    assert [(o.conn, o.role_from) for o in opens(events)] == [(1, "syn"), (2, "syn")]
    assert data(events, 2) == b"second"
    assert [(c.conn, c.how) for c in closes(events)] == [(1, "fin"), (2, "eof")]
    assert kinds(events).index("StreamOpen", 1) > kinds(events).index("StreamClose")


def test_syn_with_new_isn_replaces_live_connection():
    w = Wire()
    segs = w.handshake(1000, 2000)
    segs += [w.seg(C, S, 1001, 2001, ACK, b"old")]
    segs += [w.seg(C, S, 1000, 0, SYN)]  # retransmitted SYN: same connection
    segs += w.handshake(7777, 8888)  # new ISN: the old connection is over
    segs += [w.seg(C, S, 7778, 8889, ACK, b"new")]
    events, _ = run(segs)
    assert [o.conn for o in opens(events)] == [1, 2]
    assert [(c.conn, c.how, c.packet) for c in closes(events)] == [(1, "eof", 6), (2, "eof", 9)]
    assert data(events, 1) == b"old" and data(events, 2) == b"new"


def test_midstream_connection_replaced_by_syn():
    w = Wire()
    segs = [w.seg(C, S, 123456, 654321, ACK | PSH, b"tail of an old connection")]
    segs += w.handshake(1000, 2000)
    events, _ = run(segs)
    assert [(o.conn, o.role_from) for o in opens(events)] == [(1, "guess"), (2, "syn")]


def test_stragglers_after_close_then_time_wait_expiry():
    w = Wire()
    segs = w.handshake(1000, 2000)
    segs += [
        w.seg(C, S, 1001, 2001, FIN | ACK),
        w.seg(S, C, 2001, 1002, FIN | ACK),
        w.seg(S, C, 2001, 1002, FIN | ACK, ts=10.0),  # retransmitted FIN: ignored
        w.seg(C, S, 5000, 9000, ACK | PSH, b"much later", ts=10.0 + TIME_WAIT + 1),
    ]
    events, _ = run(segs)
    assert [(o.conn, o.role_from) for o in opens(events)] == [(1, "syn"), (2, "guess")]
    assert data(events, 2) == b"much later"


def test_interleaved_connections():
    w = Wire()
    c2 = ("10.0.0.7", 40001)
    s2 = ("10.0.0.8", 5672)
    h1 = w.handshake(100, 200)
    h2 = w.handshake(300, 400, c2, s2)
    segs = [h1[0], h2[0], h1[1], h2[1], h1[2], h2[2]]
    segs += [
        w.seg(c2, s2, 301, 401, ACK, b"two-a"),
        w.seg(C, S, 106, 201, ACK, b"one-b"),  # out of order in conn 1
        w.seg(s2, c2, 401, 306, ACK, b"two-reply"),
        w.seg(C, S, 101, 201, ACK, b"one-a"),
        w.seg(c2, s2, 306, 410, ACK, b"two-b"),
    ]
    events, findings = run(segs)
    assert [(o.conn, o.client) for o in opens(events)] == [(1, C), (2, c2)]
    assert data(events, 1) == b"one-aone-b"
    assert data(events, 2) == b"two-atwo-b"
    assert data(events, 2, "s2c") == b"two-reply"
    assert {c.conn for c in closes(events)} == {1, 2}
    assert findings == []


def test_buffer_cap_skips_hole():
    w = Wire()
    segs = w.handshake(1000, 2000)
    segs += [w.seg(C, S, 1001, 2001, ACK, b"a" * 10)]
    # 1011..1020 lost; then 150 bytes pile up behind the hole (cap 100)
    segs += [w.seg(C, S, 1021 + 30 * i, 2001, ACK, bytes([66 + i]) * 30) for i in range(5)]
    r = TcpReassembler(max_buffer=100)
    events, findings = run(segs, r, flush=False)
    assert gaps(events) == [10]
    gap = next(e for e in events if isinstance(e, StreamGap))
    assert gap.packet == 8  # the 4th block (120 bytes > 100) pushed the buffer past the cap
    delivered = [e for e in events if isinstance(e, StreamData)]
    # after the hole, each block as the packet that brought it
    assert [(len(e.data), e.packet) for e in delivered] == [(10, 4)] + [
        (30, n) for n in range(5, 10)
    ]
    assert data(events) == b"a" * 10 + b"".join(bytes([66 + i]) * 30 for i in range(5))
    assert sorted(codes(findings)) == ["tcp.buffer-limit", "tcp.gap"]
    assert r._flows[(C, S)].buffered == 0  # everything after the hole was delivered


def test_buffer_cap_many_holes():
    w = Wire()
    segs = w.handshake(0, 0)
    # every other 10-byte block lost: holes at 1, 21, 41, ...
    segs += [w.seg(C, S, 11 + 20 * i, 1, ACK, b"x" * 10) for i in range(20)]
    r = TcpReassembler(max_buffer=55)
    events, _ = run(segs, r)
    assert sum(gaps(events)) + len(data(events)) == 20 * 20
    assert all(g == 10 for g in gaps(events))
    assert len(data(events)) == 200


def test_events_from_segments_collects_findings():
    w = Wire()
    segs = w.handshake(1000, 2000)
    segs += [w.seg(C, S, 1001, 2001, ACK, b"a"), w.seg(C, S, 1003, 2001, ACK, b"c")]
    found = []
    events = list(events_from_segments(iter(segs), findings=found))
    assert kinds(events) == [
        "StreamOpen",
        "StreamData",
        "StreamGap",
        "StreamData",
        "StreamClose",
    ]
    assert codes(found) == ["tcp.gap"]
    assert list(events_from_segments([])) == []


# -- properties -------------------------------------------------------------------------------


def _pieces(draw, size: int) -> list[tuple[int, int]]:
    cuts = draw(st.lists(st.integers(1, max(size - 1, 1)), max_size=40, unique=True))
    bounds = [0, *sorted(c for c in cuts if 0 < c < size), size]
    return [(a, b) for a, b in itertools.pairwise(bounds) if a < b]


isns = st.one_of(st.integers(0, MASK), st.integers(MASK - 3000, MASK))


@settings(max_examples=300, deadline=None)
@given(payload=st.binary(min_size=1, max_size=3000), isn=isns, sisn=isns, d=st.data())
def test_property_shuffled_duplicated_nothing_lost(payload, isn, sisn, d):
    size = len(payload)
    pieces = _pieces(d.draw, size)
    # re-segmented retransmissions: arbitrary overlapping ranges
    extra = d.draw(st.lists(st.tuples(st.integers(0, size - 1), st.integers(1, 600)), max_size=8))
    pieces += [(a, min(size, a + n)) for a, n in extra]
    pieces += d.draw(st.lists(st.sampled_from(pieces), max_size=10))  # exact duplicates
    order = d.draw(st.permutations(pieces))
    w = Wire()
    segs = w.handshake(isn, sisn)
    segs += [w.seg(C, S, isn + 1 + a, sisn + 1, ACK, payload[a:b]) for a, b in order]
    events, findings = run(segs)
    assert data(events) == payload
    assert gaps(events) == []
    assert findings == []


@settings(max_examples=300, deadline=None)
@given(
    payload=st.binary(min_size=1, max_size=3000),
    isn=isns,
    final_ack=st.booleans(),
    d=st.data(),
)
def test_property_dropped_segments_accounted(payload, isn, final_ack, d):
    size = len(payload)
    pieces = _pieces(d.draw, size)
    pieces += d.draw(st.lists(st.sampled_from(pieces), max_size=5))
    kept = [p for p in pieces if d.draw(st.booleans())]
    order = d.draw(st.permutations(kept))
    # the peer's acks (it got everything) at random points of the capture
    acks = d.draw(st.lists(st.tuples(st.integers(0, len(order)), st.integers(0, size))))
    w = Wire()
    segs = w.handshake(isn, 77)
    feed: list[tuple[int, object]] = [(i, ("data", a, b)) for i, (a, b) in enumerate(order)]
    feed += [(i, ("ack", n, None)) for i, n in acks]
    feed.sort(key=lambda x: x[0])  # stable: acks at index i go after the data at index i
    for _, (kind, a, b) in feed:
        if kind == "data":
            segs.append(w.seg(C, S, isn + 1 + a, 78, ACK, payload[a:b]))
        else:
            segs.append(w.seg(S, C, 78, isn + 1 + a, ACK))
    if final_ack:
        segs.append(w.seg(S, C, 78, isn + 1 + size, ACK))
    events, findings = run(segs)

    # Walk the direction: every byte delivered is the original byte at its offset.
    offset = 0
    for e in events:
        if isinstance(e, StreamData) and e.direction == "c2s":
            assert e.data == payload[offset : offset + len(e.data)]
            offset += len(e.data)
        elif isinstance(e, StreamGap):
            assert e.direction == "c2s" and e.missing > 0
            offset += e.missing
    seen_end = max([b for _, b in kept] + [n for _, n in acks] + [0])
    assert offset == (size if final_ack else seen_end)
    assert codes(findings).count("tcp.gap") == len(gaps(events))
    assert "tcp.overlap-mismatch" not in codes(findings)


def test_random_soak_against_model():
    """Many connections, random loss/reorder/duplication, checked against the byte model."""
    rnd = random.Random(1234)
    w = Wire()
    segs = []
    streams = {}
    for k in range(30):
        c = (f"10.9.0.{k}", 30000 + k)
        s = ("10.9.1.1", 5672)
        isn = rnd.randrange(1 << 32)
        payload = rnd.randbytes(rnd.randrange(1, 20000))
        streams[c] = payload
        conn = w.handshake(isn, 5, c, s)
        pieces = []
        pos = 0
        while pos < len(payload):
            n = rnd.randrange(1, 1500)
            pieces.append((pos, min(len(payload), pos + n)))
            pos += n
        rnd.shuffle(pieces)
        for a, b in pieces:
            conn.append(w.seg(c, s, isn + 1 + a, 6, ACK, payload[a:b]))
            if rnd.random() < 0.2:
                conn.append(w.seg(c, s, isn + 1 + a, 6, ACK, payload[a:b]))
        conn.append(w.seg(c, s, isn + 1 + len(payload), 6, FIN | ACK))
        conn.append(w.seg(s, c, 6, isn + 2 + len(payload), FIN | ACK))
        segs.append(conn)
    # interleave connections, keeping each one's order (handshake first)
    merged = []
    while any(segs):
        lst = rnd.choice([x for x in segs if x])
        merged.append(lst.pop(0))
    events, findings = run(merged)
    ids = {o.client: o.conn for o in opens(events)}
    for c, payload in streams.items():
        assert data(events, ids[c]) == payload
    assert [c.how for c in closes(events)] == ["fin"] * 30
    assert findings == []


@pytest.mark.parametrize("n", [20000])
def test_in_order_segments_are_handed_on_as_they_come(n):
    """20k in-order segments: each is handed on as it comes (one data event a segment, nothing
    held back), so the stream's bytes are whole at every step. Speed is bench/'s, not a test's."""
    w = Wire()
    segs = w.handshake(0, 0)
    segs += [w.seg(C, S, 1 + 100 * i, 1, ACK, bytes([i % 251]) * 100) for i in range(n)]
    r = TcpReassembler()
    events = [e for s in segs for e in r.feed(s)]
    assert [len(e.data) for e in events if isinstance(e, StreamData)] == [100] * n
    assert data(events) == b"".join(bytes([i % 251]) * 100 for i in range(n))


_ends = [("10.0.0.1", 40000), ("10.0.0.2", 5672), ("10.0.0.3", 40000)]
_segments = st.builds(
    lambda src, dst, base, off, ack, flags, payload: (src, dst, base + off, ack, flags, payload),
    st.sampled_from(_ends),
    st.sampled_from(_ends),
    st.sampled_from([0, 1000, MASK - 100, 1 << 31]),
    st.integers(-50, 200),
    st.sampled_from([0, 1001, 1100, MASK - 50, 1 << 31]),
    st.sampled_from([ACK, ACK | PSH, SYN, SYN | ACK, FIN | ACK, RST, RST | ACK, FIN, 0]),
    st.binary(max_size=40),
)


@settings(max_examples=400, deadline=None)
@given(raw=st.lists(_segments, max_size=60), cap=st.sampled_from([16, 1 << 20]))
def test_property_any_input_gives_well_formed_events(raw, cap):
    w = Wire()
    segs = [w.seg(*r) for r in raw if r[0] != r[1]]
    events, findings = run(segs, TcpReassembler(max_buffer=cap))
    state: dict[int, str] = {}
    fins: set[tuple[int, str]] = set()
    for e in events:
        if isinstance(e, StreamOpen):
            assert e.conn not in state and e.conn == len(state) + 1
            state[e.conn] = "open"
            continue
        assert state.get(e.conn) == "open"
        if isinstance(e, StreamClose):
            state[e.conn] = "closed"
        elif isinstance(e, StreamData):
            assert e.data
        elif isinstance(e, StreamUnseen):
            assert e.unseen > 1  # more than a FIN's or a keep-alive's byte
        elif isinstance(e, StreamFin):
            assert (e.conn, e.direction) not in fins  # each direction's FIN once
            fins.add((e.conn, e.direction))
            assert e.last == ((e.conn, "c2s" if e.direction == "s2c" else "s2c") in fins)
        else:
            assert e.missing > 0
    assert all(v == "closed" for v in state.values())
    assert codes(findings).count("tcp.gap") == sum(isinstance(e, StreamGap) for e in events)


@settings(max_examples=200, deadline=None)
@given(
    up=st.binary(min_size=1, max_size=2000),
    down=st.binary(min_size=1, max_size=2000),
    isn=isns,
    sisn=isns,
    d=st.data(),
)
def test_property_midstream_in_order_both_ways(up, down, isn, sisn, d):
    """No handshake: each direction starts at its first segment; in order, nothing is lost."""
    ups, downs = _pieces(d.draw, len(up)), _pieces(d.draw, len(down))
    turns = d.draw(st.permutations([0] * len(ups) + [1] * len(downs)))
    w = Wire()
    segs, acked = [], [0, 0]
    for t in turns:
        if t == 0:
            a, b = ups.pop(0)
            segs.append(w.seg(C, S, isn + a, sisn + acked[1], ACK | PSH, up[a:b]))
            acked[0] = b
        else:
            a, b = downs.pop(0)
            segs.append(w.seg(S, C, sisn + a, isn + acked[0], ACK | PSH, down[a:b]))
            acked[1] = b
    events, findings = run(segs)
    (o,) = opens(events)
    assert (o.client, o.server, o.role_from) == (C, S, "guess")
    assert data(events, 1, "c2s") == up
    assert data(events, 1, "s2c") == down
    assert findings == []


def test_a_fin_then_the_peers_reset_names_both():
    """A killed client: its kernel sends a FIN, the server answers with a RST. The close is a
    reset by the server, after the client's FIN."""
    w = Wire()
    segs = w.handshake(1000, 2000)
    segs += [
        w.seg(C, S, 1001, 2001, ACK | PSH, b"req"),
        w.seg(S, C, 2001, 1004, ACK | PSH, b"resp"),
        w.seg(C, S, 1004, 2005, FIN | ACK),
        w.seg(S, C, 2005, 1005, RST | ACK),
    ]
    events, _ = run(segs, TcpReassembler(), flush=False)
    assert closes(events) == [StreamClose(1, "rst", 7, 7.0, by="s2c", fin_by="c2s")]


def test_each_fin_is_an_event_at_its_own_time():
    """A broker hangs up on a silent client (its FIN), which wakes much later, sends, and its
    peer's kernel answers with a reset: the FIN is an event at its own packet and time, long
    before the close, and after the data it ends; the second FIN is the `last`."""
    w = Wire()
    segs = w.handshake(1000, 2000)
    segs += [
        w.seg(S, C, 2001, 1001, ACK | PSH, b"hb"),
        w.seg(S, C, 2003, 1001, FIN | ACK, ts=40.0),
        w.seg(C, S, 1001, 2004, ACK | PSH, b"late", ts=70.0),
        w.seg(S, C, 2004, 1001, RST, ts=71.0),
    ]
    events, _ = run(segs, TcpReassembler(), flush=False)
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["StreamOpen", "StreamData", "StreamFin", "StreamData", "StreamClose"]
    assert [e for e in events if isinstance(e, StreamFin)] == [StreamFin(1, "s2c", 5, 40.0)]
    assert closes(events) == [StreamClose(1, "rst", 7, 71.0, by="s2c", fin_by="s2c")]
    w = Wire()
    segs = w.handshake(1000, 2000)
    segs += [w.seg(C, S, 1001, 2001, FIN | ACK), w.seg(S, C, 2001, 1002, FIN | ACK)]
    events, _ = run(segs, TcpReassembler(), flush=False)
    assert [e for e in events if isinstance(e, StreamFin)] == [
        StreamFin(1, "c2s", 4, 4.0),
        StreamFin(1, "s2c", 5, 5.0, last=True),
    ]


def test_a_fin_behind_a_hole_comes_after_the_gap():
    """A FIN whose stream has a hole before it is reported once the hole is settled (after the
    gap), with the time of the packet that brought it."""
    w = Wire()
    segs = w.handshake(1000, 2000)
    segs += [
        w.seg(C, S, 1001, 2001, ACK, b"a" * 10),
        w.seg(C, S, 1016, 2001, FIN | ACK),  # 1011..1015 lost
        w.seg(S, C, 2001, 1017, FIN | ACK),
    ]
    events, _ = run(segs)
    kinds = [type(e).__name__ for e in events if not isinstance(e, (StreamOpen, StreamData))]
    assert kinds == ["StreamGap", "StreamFin", "StreamFin", "StreamClose"]
    assert [(e.direction, e.packet) for e in events if isinstance(e, StreamFin)] == [
        ("c2s", 5),
        ("s2c", 6),
    ]


def test_a_server_fin_left_half_open_is_named_at_flush():
    w = Wire()
    segs = w.handshake(1000, 2000)
    segs += [w.seg(S, C, 2001, 1001, FIN | ACK, b"bye")]
    events, _ = run(segs)
    assert closes(events) == [StreamClose(1, "fin", 4, 4.0, by="s2c", fin_by="s2c")]


def _dropped(reordered: bool) -> tuple[list, list]:
    """The server sends 10 bytes, then 20; the capture has the first, and the client's ack of
    both before (reordered) or without (dropped) the second."""
    w = Wire()
    segs = w.handshake(1000, 5000)
    segs.append(w.seg(S, C, 5001, 1001, ACK, b"a" * 10))
    second = w.seg(S, C, 5011, 1001, ACK, b"b" * 20)
    segs.append(w.seg(C, S, 1001, 5031, ACK))  # acks 30 bytes: 20 not seen
    if reordered:
        segs.append(second)  # captured after the ack that covers it
    segs.append(w.seg(C, S, 1001, 5031, ACK, b"x"))  # the client goes on; the capture ends
    return run(segs)


def test_bytes_acknowledged_but_not_seen_are_said_at_the_ack_not_declared_missing() -> None:
    """A kernel drop shows first in the peer's ack: one StreamUnseen there, with how many bytes,
    before anything else of that direction; the gap itself comes at the end (rule (c))."""
    events, _ = _dropped(reordered=False)
    unseen = [e for e in events if isinstance(e, StreamUnseen)]
    assert [(e.direction, e.unseen, e.packet) for e in unseen] == [("s2c", 20, 6)]  # the ack
    gaps = [e for e in events if isinstance(e, StreamGap)]
    assert [(e.direction, e.missing) for e in gaps] == [("s2c", 20)]
    assert events.index(unseen[0]) < events.index(gaps[0])


def test_bytes_captured_after_the_ack_that_covers_them_are_still_taken() -> None:
    """Captured out of order (two queues of a NIC): the warning was given, and the data is
    delivered whole when it comes; nothing is declared missing."""
    events, _ = _dropped(reordered=True)
    assert [e.unseen for e in events if isinstance(e, StreamUnseen)] == [20]
    assert data(events, 1, "s2c") == b"a" * 10 + b"b" * 20
    assert not [e for e in events if isinstance(e, StreamGap)]
