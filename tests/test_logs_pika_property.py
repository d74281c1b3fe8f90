"""pika's frame reprs read back, with pika itself as the oracle.

Hypothesis builds frames with pika's own classes (`pika.frame.Method/Header/Body` around
`pika.spec` methods and `BasicProperties`); `marshal()` gives the bytes on the wire, pika's
own `frame.decode_frame` reads them as pika receives them (every frame pika logs is one
it received), and `repr()` of that is the text pika's DEBUG log prints. The log grammar reads
the repr; the capture path (`codec.amqp091`) decodes the same bytes; every field the log
record has must equal the wire record's, and a wire field it lacks must be one the repr did
not show (None).
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import hypothesis.strategies as st
import pika.frame as pf
import pika.spec as ps
from hypothesis import given, settings

from amqpscope.codec.amqp091.decoder import Decoder
from amqpscope.codec.amqp091.frames import make_frame
from amqpscope.logs.detect import detect
from amqpscope.logs.reader import records_from_log

PREFIXES = (
    "2026-11-26 06:40:01,123 DEBUG pika.callback Arguments do not match for {'x': 1}, [",
    "DEBUG:pika.channel:Discarding frame ",
    "2026-11-26T06:40:01.5Z pika.connection _on_connection_close_ok: frame=",
    " * ",
)

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
short = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=20).filter(
    lambda s: len(s.encode()) <= 255
)
u8 = st.integers(0, 255)
u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFFFFFF)
u64 = st.integers(0, 2**63 - 1)
leaf = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    text,
    st.binary(max_size=8),
    st.decimals(min_value=-1000, max_value=1000, places=2, allow_nan=False),
    st.datetimes(min_value=dt.datetime(1971, 1, 1), max_value=dt.datetime(2100, 1, 1)).map(
        lambda d: d.replace(microsecond=0)
    ),
)
table = st.recursive(
    st.dictionaries(short, leaf, max_size=4),
    lambda inner: st.dictionaries(
        short, st.one_of(leaf, inner, st.lists(leaf, max_size=3)), max_size=3
    ),
    max_leaves=8,
)

methods = st.one_of(
    st.builds(ps.Basic.Deliver, short, u64, st.booleans(), short, short),
    st.builds(ps.Basic.GetOk, u64, st.booleans(), short, short, u32),
    st.builds(ps.Basic.GetEmpty, short),
    st.builds(ps.Basic.Ack, u64, st.booleans()),
    st.builds(ps.Basic.Nack, u64, st.booleans(), st.booleans()),
    st.builds(ps.Basic.Return, u16, short, short, short),
    st.builds(ps.Basic.ConsumeOk, short),
    st.builds(ps.Basic.CancelOk, short),
    st.builds(ps.Basic.Qos, u32, u16, st.booleans()),
    st.builds(ps.Queue.DeclareOk, short, u32, u32),
    st.builds(ps.Queue.PurgeOk, u32),
    st.builds(ps.Channel.Close, u16, short, u16, u16),
    st.builds(ps.Channel.OpenOk),
    st.builds(ps.Connection.Close, u16, short, u16, u16),
    st.builds(ps.Connection.CloseOk),
    st.builds(ps.Connection.Tune, u16, u32, u16),
    st.builds(ps.Connection.Start, u8, u8, table, st.binary(max_size=20), st.binary(max_size=8)),
    st.builds(ps.Confirm.SelectOk),
    st.builds(
        ps.Exchange.Declare,
        u16,
        short,
        short,
        st.booleans(),
        st.booleans(),
        st.booleans(),
        st.booleans(),
        st.booleans(),
        table,
    ),
)
properties = st.builds(
    ps.BasicProperties,
    content_type=st.none() | short,
    headers=st.none() | table,
    delivery_mode=st.none() | st.sampled_from([1, 2]),
    priority=st.none() | u8,
    correlation_id=st.none() | short,
    message_id=st.none() | short,
    timestamp=st.none() | u64,
    app_id=st.none() | short,
)
channel = st.integers(0, 0xFFFF)
frames = st.one_of(
    st.builds(pf.Method, channel, methods),
    st.builds(pf.Header, channel, u64, properties),
    st.builds(pf.Body, channel, st.binary(max_size=40)),
)


def received(frame: Any) -> Any:
    """The frame as pika reads it off the wire (what its log prints)."""
    _, decoded = pf.decode_frame(frame.marshal())
    return decoded


def wire(frame: Any) -> Any:
    record = make_frame(frame.marshal(), "0-9-1")
    Decoder("0-9-1").decode(record)
    return record


@settings(max_examples=300, deadline=None)
@given(st.lists(frames, min_size=1, max_size=6), st.sampled_from(PREFIXES))
def test_pika_reprs_read_as_pika_marshals(sent: list[Any], prefix: str) -> None:
    lines = [f"{prefix}{received(frame)!r}]\n" for frame in sent]
    records = list(records_from_log(lines, "pika.log", fmt="pika"))
    assert len(records) == len(sent)
    for record, frame in zip(records, sent, strict=True):
        expected = wire(frame)
        assert (record.kind, record.name, record.channel) == (
            expected.kind,
            expected.name,
            expected.channel,
        )
        assert record.direction == "s2c"
        for key, value in record.fields.items():
            assert value == expected.fields[key], key
        left_out = set(expected.fields) - set(record.fields)
        if record.kind == "method":
            shown = {k for k, v in vars(received(frame).method).items() if v is not None}
            for key in left_out:
                assert key.replace("-", "_") not in shown and key != "global", key
        elif record.kind == "content-header":
            assert left_out == {"weight"}
        else:
            assert left_out == set()


def test_detected_by_content() -> None:
    line = repr(pf.Method(1, ps.Basic.Deliver("ctag", 1, False, "", "q")))
    assert detect([f"DEBUG:pika.callback:Arguments do not match for {{}}, [{line}]"]) == "pika"


@given(st.text(max_size=200), st.integers(0, 400))
def test_mangled_lines_never_raise(junk: str, cut: int) -> None:
    line = repr(pf.Header(1, 5, ps.BasicProperties(headers={"a": decimal.Decimal("1.5")})))
    mangled = (line[:cut] + junk + line[cut:])[: cut + 50]
    found: list[Any] = []
    list(records_from_log([mangled + "\n", mangled], "x.log", fmt="pika", findings=found))
