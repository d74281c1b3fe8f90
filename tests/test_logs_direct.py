"""The direct path (`logs/direct.py`: printed values straight into the decoder's shapes) gives
the records the round trip gives (encode to AMQP bytes, decode with `codec.amqp10`), which is
the reference: on every recorded and fixture log, on Proton-printed lines the property tests
generate, and on generated value trees of every kind a grammar builds, well formed or not
(wrong types, unknown descriptors, duplicate keys, missing mandatory fields, damaged payloads),
where the direct path must step aside and leave the findings to the round trip."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from amqpscope.codec.amqp10 import spec
from amqpscope.logs import direct
from amqpscope.logs.detect import detect
from amqpscope.logs.lines import FRAME, RECEIVED, SENT, Logged
from amqpscope.logs.reader import LogReader
from amqpscope.logs.values import (
    Array,
    Binary,
    Decimal,
    Described,
    Fields,
    Hex,
    Map,
    Symbol,
    Uuid,
)
from tests import test_logs_proton_property as proton_property

ROOT = Path(__file__).resolve().parent.parent
LOGS = sorted((ROOT / "captures").glob("log-*.log"))


def records(lines: list[str], fmt: str, fast: bool, messages: bool = True) -> list[Any]:
    reader = LogReader("x.log", fmt, show_secrets=False, messages=messages, direct_fields=fast)
    out = []
    for number, line in enumerate(lines, 1):
        out.extend(json.dumps(f.to_json(), sort_keys=True) for f in reader.feed(line, number))
    out.extend(json.dumps(f.to_json(), sort_keys=True) for f in reader.flush())
    reader.finish()
    return [*out, [f.to_json() for f in reader.findings], reader.skipped]


def same(lines: list[str], fmt: str) -> int:
    """Both paths agree on `lines` (read and summary modes); the number of records."""
    for messages in (True, False):
        slow = records(lines, fmt, False, messages)
        assert records(lines, fmt, True, messages) == slow
    return len(slow) - 2


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_recorded_logs(path: Path) -> None:
    lines = path.read_text().splitlines(keepends=True)
    fmt = detect(lines)
    assert fmt is not None
    # pika prints few frames: 3 in log-pika-closed (its close, the close-oks)
    assert same(lines, fmt) >= (3 if fmt == "pika" else 30)


WIRE = ["log-proton-broker", "log-rhea-broker", "10-transaction", "10-bad-address", "10-outcomes"]


@pytest.mark.parametrize("name", WIRE)
def test_captured_frames_printed_by_other_formats(name: str) -> None:
    """Captured frames printed as proton-j, amqpnetlite, pyamqp and a router print them (the
    other grammars' tests' printers, written from those libraries' code)."""
    from tests import test_logs_amqpnetlite, test_logs_protonj, test_logs_pyamqp, test_logs_router

    frames = test_logs_protonj.captured(name)
    java = [test_logs_protonj.line(f, "->" if f.direction == "c2s" else "<-") for f in frames]
    assert same(java, "proton-j") > len(frames) // 2
    assert same([test_logs_amqpnetlite.line(f) for f in frames], "amqpnetlite") > len(frames) // 2
    performatives = [f for f in frames if f.kind == "performative"]
    pyamqp = [test_logs_pyamqp.received_line(f.data[f.data[4] * 4 :]) for f in performatives]
    assert same(pyamqp, "pyamqp") > len(performatives) // 2
    wire = test_logs_router.captured(name)
    router = [line for _, line in test_logs_router.router_lines(wire, "C1", False, 1.7e9)]
    assert same(router, "router") > len(wire) // 2


# -- Proton-printed lines, as the property tests make them -------------------------------------
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(proton_property.performatives(), st.integers(0, 3))
def test_property_lines(value: Any, channel: int) -> None:
    layer = "SASL" if int(value.descriptor) in proton_property.SASL_CODES else "AMQP"
    new = f"[0x7f00d8001ab0]: {layer}:FRAME:{channel} <- {proton_property.dump_new(value)}\n"
    old = f"[0x55d2c8a1e0a0]:0 -> {proton_property.proton_inspect(value)}\n"
    assert same([new, old], "proton") == 2


# -- value trees of every kind, well formed or not ---------------------------------------------
NAMES = sorted({c.name for c in spec.COMPOSITES.values()})
FIELD_NAMES = sorted({f.name for c in spec.COMPOSITES.values() for f in c.fields})
TEXT = st.text(st.characters(codec="utf-8"), max_size=6)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**65), 2**65),
    st.integers(0, 2**66).map(Hex),
    st.integers(0, 2**33).map(Hex),
    st.floats(allow_nan=False, width=64),
    TEXT,
    TEXT.map(Symbol),
    st.text(max_size=3).map(Symbol),  # surrogates too: UTF-8 cannot carry them
    st.binary(max_size=6).map(Binary),
    st.binary(min_size=15, max_size=17).map(Uuid),
    st.builds(Decimal, st.integers(0, 2**32 - 1), st.just(32)),
)
#: values the direct path reads (in maps and lists)
CLEAN = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63), 2**63 - 1),
        st.integers(0, 2**64 - 1).map(Hex),
        st.floats(width=64),
        TEXT,
        TEXT.map(Symbol),
        st.binary(max_size=6).map(Binary),
        st.binary(min_size=16, max_size=16).map(Uuid),
        st.builds(Array, st.sampled_from(["symbol", "uint", "boolean"]), st.just([])),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.lists(st.tuples(inner, inner), max_size=3).map(Map)
    ),
    max_leaves=5,
)
ARRAY_TYPES = [
    "symbol",
    "string",
    "binary",
    "uint",
    "ubyte",
    "long",
    "boolean",
    "bool",
    "PN_SYMBOL",
    "PN_UINT",
    "timestamp",
    "double",
    "uuid",
    "PN_DESCRIBED",
    "what",
]


def _descriptors() -> st.SearchStrategy[Any]:
    codes = [*sorted(spec.COMPOSITES), 113, 114, 116, 117, 118, 119, 120, 0x77AA, 2**65]
    symbols = [c.symbol for c in spec.COMPOSITES.values()] + ["amqp:data:binary", "x:y"]
    return st.one_of(
        st.sampled_from(codes).map(Hex),
        st.sampled_from(codes),
        st.sampled_from(symbols).map(Symbol),
    )


def trees(depth: int = 2) -> st.SearchStrategy[Any]:
    if depth == 0:
        return SCALARS
    inner = trees(depth - 1)
    return st.one_of(
        SCALARS,
        SCALARS,
        st.lists(inner, max_size=3),
        st.lists(st.tuples(inner, inner), max_size=3).map(Map),
        st.builds(Array, st.sampled_from(ARRAY_TYPES), st.lists(SCALARS, max_size=3)),
        described(depth - 1),
    )


def described(depth: int) -> st.SearchStrategy[Described]:
    fields = st.lists(
        st.tuples(st.one_of(st.none(), st.sampled_from(FIELD_NAMES)), trees(depth)), max_size=12
    ).map(Fields)
    value = st.one_of(fields, fields, fields, trees(0))
    name = st.one_of(st.none(), st.sampled_from(NAMES))
    return st.builds(Described, _descriptors(), name, value)


RANGES = {
    "ubyte": (0, 0xFF),
    "ushort": (0, 0xFFFF),
    "uint": (0, 2**32 - 1),
    "ulong": (0, 2**64 - 1),
    "byte": (-128, 127),
    "short": (-(2**15), 2**15 - 1),
    "int": (-(2**31), 2**31 - 1),
    "long": (-(2**63), 2**63 - 1),
    "timestamp": (-(2**63), 2**63 - 1),
}


def primitive(type_name: str) -> str:
    while type_name in spec.RESTRICTED:
        type_name = spec.RESTRICTED[type_name].source
    return type_name


def fitting(field: spec.Field, depth: int) -> st.SearchStrategy[Any]:
    """A value of the field's type as a grammar reads it (mostly), now and then anything."""
    base = primitive(field.type)
    restricted = spec.RESTRICTED.get(field.type)
    good: list[st.SearchStrategy[Any]] = []
    if restricted is not None and restricted.choices:
        values = [v for _, v in restricted.choices]
        if base == "boolean":
            good.append(st.sampled_from([v == "true" for v in values]))
        elif base in RANGES:
            good.append(st.sampled_from([int(v) for v in values]).map(Hex))
        else:
            good.append(st.sampled_from(values).map(Symbol))
    if base in RANGES:
        lo, hi = RANGES[base]
        good.append(st.integers(max(lo, 0), hi).map(Hex) if lo == 0 else st.integers(lo, hi))
        good.append(st.integers(0, 5).map(Hex))
    elif base == "boolean":
        good.append(st.booleans())
    elif base == "symbol":
        good.append(TEXT.map(Symbol))
        if field.multiple:
            good.append(st.builds(Array, st.just("symbol"), st.lists(TEXT.map(Symbol), max_size=3)))
    elif base == "string":
        good.append(TEXT)
    elif base == "binary":
        good.append(st.binary(max_size=6).map(Binary))
    elif base in ("map", "fields", "annotations", "filter-set"):
        good.append(st.lists(st.tuples(TEXT.map(Symbol), CLEAN), max_size=3).map(Map))
    elif base == "uuid":
        good.append(st.binary(min_size=16, max_size=16).map(Uuid))
    wanted = field.requires if field.type == "*" else base
    codes = [c for c, comp in spec.COMPOSITES.items() if wanted in (comp.name, *comp.provides)]
    if codes and depth < 3:
        good.append(st.sampled_from(codes).flatmap(lambda code: fitting_composite(code, depth + 1)))
    return st.one_of(*good) if good else trees(1)


def fitting_composite(code: int, depth: int = 0) -> st.SearchStrategy[Described]:
    composite = spec.COMPOSITES[code]

    @st.composite
    def build(draw: Any) -> Described:
        items = Fields()
        for field in composite.fields:
            if draw(st.integers(0, 2)) == 0:
                continue
            # now and then unnamed, misnamed or of any kind: the round trip's findings
            name = draw(st.sampled_from([field.name] * 30 + [None, "no-such-field"]))
            odd = draw(st.integers(0, 40)) == 0
            items.append((name, draw(trees(1) if odd else fitting(field, depth))))
        if draw(st.integers(0, 30)) == 0:
            items.append((None, draw(trees(1))))
        descriptor = draw(st.sampled_from([Hex(code)] * 8 + [code, Symbol(composite.symbol), 0x77]))
        name = draw(st.sampled_from([composite.name] * 8 + [None]))
        return Described(descriptor, name, items)

    return build()


FRAME_CODES = sorted(
    code
    for code, c in spec.COMPOSITES.items()
    if "frame" in c.provides or c.name.startswith("sasl")
)


def bodies() -> st.SearchStrategy[Described]:
    return st.one_of(
        st.sampled_from(FRAME_CODES).flatmap(fitting_composite),
        st.sampled_from(FRAME_CODES).flatmap(fitting_composite),
        described(2),
    )


#: a well-formed message and a damaged one (the decoder's findings name offsets in the frame)
PAYLOADS = [
    None,
    b"\x00\x53\x73\xc0\x05\x01\xa1\x02ab\x00\x53\x77\xa1\x03abc",
    b"\x00\x53\x73\xc0\x05\x01\xa1\x02ab\x00\x53\x77\xa1\x09ab",
    b"\x00\x53\x75\xa0\x02hi\x00\x53\x75\xa0\x02yo",
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(bodies(), st.sampled_from(PAYLOADS), st.booleans()), max_size=4))
def test_trees(frames: list[tuple[Described, bytes | None, bool]]) -> None:
    out = []
    for fast in (False, True):
        reader = LogReader("x.log", direct_fields=fast)
        got = []
        for number, (value, payload, sent) in enumerate(frames, 1):
            logged = Logged(
                "c1", SENT if sent else RECEIVED, FRAME, channel=0, value=value, payload=payload
            )
            got += [f.to_json() for f in reader._emit(logged, "line\n", number)]
        reader.finish()
        out.append((got, [f.to_json() for f in reader.findings]))
    assert out[0] == out[1]


def test_the_direct_path_reads_the_usual_frames() -> None:
    """Not everything goes the round trip: the recorded logs' frames are made directly."""
    lines = (ROOT / "captures" / "log-proton-broker.log").read_text().splitlines(keepends=True)
    reader = LogReader("x.log")
    made = 0
    for line in lines:
        logged = reader.parse(line)
        if logged is not None and logged.kind == FRAME:
            value = logged.value if logged.made is None else logged.made.tree()
            sasl = value.name.startswith("sasl")
            made += direct.performative(value, sasl) is not None
    assert made >= 30


EDGES = [
    '[0x1]: AMQP:FRAME:0 -> @open(16) [container-id="a", properties={:k=0x1, :k=0x2}]',
    '[0x1]: AMQP:FRAME:0 -> @open(16) [container-id="a", offered-capabilities=:one]',
    '[0x1]: AMQP:FRAME:0 -> @open(16) [container-id="a", offered-capabilities=@<symbol>[:a, :b]]',
    '[0x1]: AMQP:FRAME:0 -> @open(16) [hostname="no container id"]',
    "[0x1]: AMQP:FRAME:0 -> @open(16) [container-id=:sym, channel-max=0x10000]",
    '[0x1]: AMQP:FRAME:0 -> @attach(18) [name="l", handle=0x0, role=true, snd-settle-mode=0x7]',
    '[0x1]: AMQP:FRAME:0 -> @attach(18) [name="l", handle=0x0, role=false, source=@source(40) '
    '[address="q", filter={:sel=@:"apache.org:selector-filter:string" "a = 1", :x=@0x77 0x1}], '
    "target=@accepted(36) []]",
    '[0x1]: AMQP:FRAME:0 -> @attach(18) [name="l", handle=0x0, role=false, source=@0x77 [0x1]]',
    '[0x1]: AMQP:FRAME:1 -> @transfer(20) [handle=0x0, delivery-id=0x1, delivery-tag=b"t", '
    "message-format=0x0, more=true] (4) \\x00Ss\\xc0",
    "[0x1]: AMQP:FRAME:1 -> @transfer(20) [handle=0x0, delivery-id=0x1, more=false, "
    "state=@source(40) []] (3) \\x03\\x01\\x00",
    "[0x1]: AMQP:FRAME:1 -> @disposition(21) [role=true, first=0x1, last=0x1ffffffff, "
    "settled=true, state=@rejected(37) [error=@error(29) [condition=:amqp:x, info={0x1=2}]]]",
    "[0x1]: AMQP:FRAME:0 -> @detach(22) [handle=0x0, closed=true] (2) \\x00\\x00",
    "[0x1]: AMQP:FRAME:0 -> @flow(19) [incoming-window=0x7fffffff, next-outgoing-id=0x0, "
    'outgoing-window=-1, properties={:a=[1, :b, b"\\x00", 1.5, '
    "UUID(00112233-4455-6677-8899-aabbccddeeff)]}]",
    '[0x1]: SASL:FRAME:0 -> @sasl-init(65) [mechanism=:PLAIN, initial-response=b"\\x00u\\x00p"]',
    "[0x1]: SASL:FRAME:0 <- @sasl-outcome(68) [code=0x9]",
    '[0x1]: AMQP:FRAME:0 <- @close(24) [error=@error(29) [condition=:"amqp:internal-error", '
    'description="\\xff"]]',
]


@pytest.mark.parametrize("line", EDGES)
def test_edges(line: str) -> None:
    """Lines at the direct path's edges (findings the round trip must give, shapes it makes)."""
    same([line + "\n"], "proton")


@pytest.mark.parametrize(
    "line",
    [
        '[0x1]: AMQP:FRAME:99999 -> @open(16) [container-id="a"]',
        '[0x1]: AMQP:FRAME:0 -> @open(16) [container-id="a", properties={:a=@<ubyte>[0x1ff]}]',
        '[0x1]: AMQP:FRAME:0 -> @open(16) [container-id="a", properties={:a=@<uint>[inf]}]',
    ],
)
def test_what_cannot_be_packed_is_a_bad_line(line: str) -> None:
    """The round trip packs what the log printed; values no frame can hold were a crash
    (struct.error, OverflowError), now a finding on the line."""
    reader = LogReader("x.log")
    assert reader.feed(line + "\n", 1) == []
    assert [f.code for f in reader.findings] == ["log.bad-line"]


# -- the Proton grammar's cache of lines like lines read before ----------------------------------
T = "[0x1]: AMQP:FRAME:0 -> "
ALIKE = [
    # the same shape, other values: the second and later lines come from the cache
    [
        T + f'@transfer(20) [handle=0x{h:x}, delivery-id=0x{i:x}, delivery-tag=b"{i}", '
        f"message-format=0x0] (3) \\x00Sw"
        for h, i in ((0, 0), (1, 7), (0, 0xFFFFFFFF))
    ],
    # a value too large for a uint, a negative one: not from the cache, reported as before
    [
        T + "@flow(19) [next-incoming-id=0x0, incoming-window=0x10, next-outgoing-id=0x0, "
        f"outgoing-window=0x10, handle=0x0, link-credit={credit}]"
        for credit in ("0x1", "0x100000000", "-1", "10", "0x2")
    ],
    # what looks like a field inside a string is no field
    [
        T + f'@attach(18) [name="x {name}=0x{n}, y", handle=0x1 , role=false]'
        for name in ("handle", "delivery-count")
        for n in (1, 2, 3)
    ],
    [
        T + '@attach(18) [name="x handle=, y", handle=0x3, role=false]',
        T + '@attach(18) [name="x handle=0x4, y", handle=, role=false]',
    ],
    [
        T + '@detach(22) [handle=0x0, error=@error(29) [condition=:x, description="first=0x1]"]]',
        T + '@detach(22) [handle=0x1, error=@error(29) [condition=:x, description="first=0x2]"]]',
    ],
    # a delivery tag that holds the payload's start, a quote, or a number; a tag as a number
    [
        T + '@transfer(20) [handle=0x0, delivery-id=0x1, delivery-tag=b"a"] (2) ab',
        T + '@transfer(20) [handle=0x0, delivery-id=0x2, delivery-tag=b"] (1) x"] (2) ab',
        T + '@transfer(20) [handle=0x0, delivery-id=0x3, delivery-tag=b"5"] (2) ab',
        T + "@transfer(20) [handle=0x0, delivery-id=0x4, delivery-tag=0x5] (2) ab",
        T + '@transfer(20) [handle=b"0", delivery-id=0x4, delivery-tag=b"5"] (2) ab',
    ],
    # role is a choice, settled a boolean: never blanked; state's fields nested
    [
        T + "@disposition(21) [role=true, first=0x0, last=0x3, settled=true, "
        "state=@received(35) [section-number=0x1, section-offset=0x2]]",
        T + "@disposition(21) [role=false, first=0x4, last=0x9, settled=true, "
        "state=@received(35) [section-number=0x3, section-offset=0x4]]",
    ],
    # one text in the old form and the new (decimal numbers in the new are signed): shapes
    # tried by their pattern first must not cross forms
    [
        form + f"@flow(19) [next-incoming-id={n}, incoming-window=10, next-outgoing-id=0, "
        f"outgoing-window=1, handle={n}, delivery-count=0, link-credit=7]"
        for n in (1, 2, 3)
        for form in ("[0x2]:0 -> ", T)
    ],
    # the old form's decimal numbers
    [
        "[0x2]:0 -> @flow(19) [next-incoming-id=5, incoming-window=2147483647, "
        "next-outgoing-id=0, outgoing-window=1, link-credit=007]",
        "[0x2]:0 -> @flow(19) [next-incoming-id=6, incoming-window=4294967296, "
        "next-outgoing-id=0, outgoing-window=1, link-credit=8]",
    ],
]


@pytest.mark.parametrize("lines", ALIKE, ids=range(len(ALIKE)))
def test_lines_like_lines_read_before(lines: list[str]) -> None:
    """Each line read twice, in order: the records and findings are the round trip's."""
    text = [line + "\n" for line in lines]
    same(text + text, "proton")


@pytest.mark.parametrize("group", [0, 1, 5])
def test_the_cache_is_used(group: int) -> None:
    from amqpscope.logs import proton

    lines = [line + "\n" for line in ALIKE[group]]
    assert proton.parse(lines[0]) is not None
    later = [proton.parse(line) for line in lines[1:]]
    assert any(logged is not None and logged.made is not None for logged in later)


# -- the other grammars' cache of lines like lines read before (`logs/shapes.py`) ---------------
@pytest.mark.parametrize("name", ["log-proton-broker", "10-transaction", "10-outcomes"])
def test_other_formats_read_three_times(name: str) -> None:
    """Captured frames printed as proton-j, amqpnetlite and pyamqp print them, read three
    times over: the second sighting of a shape learns it, the third comes from the cache;
    the records are the round trip's every time."""
    from tests import test_logs_amqpnetlite, test_logs_protonj, test_logs_pyamqp

    frames = test_logs_protonj.captured(name)
    java = [test_logs_protonj.line(f, "->" if f.direction == "c2s" else "<-") for f in frames]
    same(java * 3, "proton-j")
    same([test_logs_amqpnetlite.line(f) for f in frames] * 3, "amqpnetlite")
    performatives = [f for f in frames if f.kind == "performative"]
    pyamqp = [test_logs_pyamqp.received_line(f.data[f.data[4] * 4 :]) for f in performatives]
    same(pyamqp * 3, "pyamqp")


NET = "[12:00:01.123] SEND (ch=0) "
GO = "10:11:12.123456 TX (connWriter 0xc0001a2000): Frame{Type: AMQP, Channel: 0, Body: "
PY = "2026-01-31 12:00:00,250 azure.servicebus._pyamqp._connection DEBUG <- "
J = "2026-01-31 12:00:00,250 TRACE [o.a.q.p.e.i.TransportImpl] [1830712962:0] -> "
SHAPES = [
    # numbers put in: past a uint (read, and reported, as before), hex tags of odd length
    (
        "amqpnetlite",
        [
            NET + f"transfer(handle:{h},delivery-id:{i},delivery-tag:{t},message-format:0,"
            "more:False)"
            for h, i, t in (
                (0, 1, "31"),
                (0, 2, "32"),
                (1, 3, "3334"),
                (0, 4294967296, "35"),
                (0, 5, "363"),
                (0, 6, "3A"),
                (7, 7, "00"),
            )
        ],
    ),
    # a number inside a name or a string is no field of its own: never from the cache
    (
        "amqpnetlite",
        [
            NET + f"attach(name:link-{n},handle:{n},role:False,snd-settle-mode:{m},"
            "rcv-settle-mode:0)"
            for n, m in ((1, 2), (2, 2), (3, 1), (4, 2))
        ],
    ),
    (
        "proton-j",
        [
            J + f'Transfer{{handle={h}, deliveryId={i}, deliveryTag="{t}", messageFormat=0, '
            "settled=null, more=false, rcvSettleMode=null, state=null, resume=false, "
            f'aborted=false, batchable=false}} (3) "\\x00Sw"'
            for h, i, t in (
                (0, 0, "0"),
                (0, 1, "1"),
                (2, 99, "123"),
                (0, 3, "\\x01"),
                (0, 2, "} (2"),
            )
        ],
    ),
    (
        "proton-j",
        [
            J + f"Flow{{nextIncomingId={n}, incomingWindow={w}, nextOutgoingId=0, "
            "outgoingWindow=2147483647, handle=0, deliveryCount=0, linkCredit=10, "
            "available=null, drain=false, echo=false, properties=null}"
            for n, w in ((0, 2147483647), (1, 2147483647), (2, 4294967295), (3, 4294967296))
        ],
    ),
    (
        "go-amqp",
        [
            GO + f"Transfer{{Handle: 0, DeliveryID: {i}, DeliveryTag: {t}, MessageFormat: 0, "
            "Settled: false, More: false, ReceiverSettleMode: <nil>, State: <nil>, Resume: false, "
            f"Aborted: false, Batchable: false, Payload [size]: {i + 40}}}}}"
            for i, t in ((0, "30"), (1, "31"), (12, "3132"), (4294967296, "33"), (5, "353"))
        ],
    ),
    (
        "pyamqp",
        [
            PY + f"TransferFrame(handle=0, delivery_id={i}, delivery_tag=b'{t}', "
            "message_format=0, settled=None, more=False, rcv_settle_mode=None, state=None, "
            f"resume=False, aborted=False, batchable=False, payload={p})"
            for i, t, p in (
                (0, "1", "<memory at 0x7f9f72b80280>"),
                (1, "2", "<memory at 0x7f9f72b801c0>"),
                (2, "3", "<memory at 0x7f9f72b80340>"),
                (3, "\\x04", "<memory at 0x7f9f72b80340>"),
                (4, "5", "b'12'"),
                (5, "6", "b'34'"),
            )
        ],
    ),
]

RHEA = "2026-11-26T05:58:49.344Z rhea:frames [connection-1]:0 "
SHAPES += [
    # rhea: a tag's bytes are put back by the grammar; a 0 reads as left out (never cached);
    # a transfer without its id, or with `more`, goes by `Completions`
    (
        "rhea",
        [
            RHEA + f'-> transfer#14 {{{ident}"delivery_tag":{{"type":"Buffer","data":[{tag}]}}'
            f"{more}}} {payload}"
            for ident, tag, more, payload in (
                ('"delivery_id":1,', "49", "", "<Buffer 00 53 77 a1 01 61>"),
                ('"delivery_id":2,', "49,48", "", "<Buffer 00 53 77 a1 01 61>"),
                ('"delivery_id":3,', "", "", ""),
                ('"delivery_id":0,', "51", "", "<Buffer 00 53 77 a1 01 61>"),
                ('"delivery_id":4,', "256", "", ""),
                ('"delivery_id":5,', "07", "", ""),
                ('"delivery_id":6,', "1,2,3", ',"more":true', "<Buffer 00 53 77 ... 9 more bytes>"),
                ("", "1,2,3", "", "<Buffer 00 53 77 a1 01 61>"),
                ('"handle":1,"delivery_id":7,', "255", "", ""),
                ('"delivery_id":8,', "55", ',"settled":true', "<Buffer 00 53 77 a1 01 61>"),
            )
        ]
        + [
            RHEA + f'<- disposition#15 {{"role":true,{first}"settled":true,"state":[]}} '
            for first in ('"first":3,', "", '"first":0,', '"first":4,"last":9,', '"first":5,')
        ],
    ),
]


@pytest.mark.parametrize(("fmt", "lines"), SHAPES, ids=range(len(SHAPES)))
def test_shapes_like_shapes_read_before(fmt: str, lines: list[str]) -> None:
    """Each line read three times, in order: the records and findings are the round trip's."""
    text = [line + "\n" for line in lines]
    same(text * 3, fmt)


@pytest.mark.parametrize("fmt", ["proton-j", "amqpnetlite", "go-amqp", "pyamqp", "rhea"])
def test_the_shapes_cache_is_used(fmt: str) -> None:
    from amqpscope.logs.formats import FORMATS

    lines = next(lines for f, lines in SHAPES if f == fmt)
    parse = FORMATS[fmt].parse
    for line in lines[:2]:
        parse(line + "\n")
    logged = parse(lines[0] + "\n")
    assert logged is not None and logged.made is not None


# -- a cached shape read by hand (`Entry.match`) finds what its pattern does ------------------
_LITERAL = st.lists(
    st.sampled_from(["{", '"first":', ",", "]", " ", "x", "=", "0x", "b", '"', "\\", "\u0663"]),
    max_size=4,
).map("".join)
#: values as shapes have them, and what may stand in their place
_VALUES = st.sampled_from(
    [
        *("0", "12", "0x1f", "0xAb", "0x", "0xg", 'b"8"', 'b""', 'b"a,b]"', 'b"\\x01"', 'b"'),
        *("x", "", "\u0663", "07", "1 ", ",", "]"),
    ]
)


def _texts(literals: list[str], values: list[str]) -> str:
    out = [literals[0]]
    for literal, value in zip(literals[1:], values, strict=False):
        out += [value, literal]
    return "".join(out)


@settings(max_examples=600, deadline=None)
@given(
    st.lists(_LITERAL, min_size=1),
    st.lists(_VALUES, max_size=6),
    st.integers(0, 3),
    st.text(max_size=2),
)
def test_a_digits_shape_is_matched_as_its_pattern_matches(
    texts: list[str], values: list[str], cut: int, junk: str
) -> None:
    """`Shapes`' entries (texts without ASCII digits between runs of digits)."""
    from amqpscope.logs.shapes import DIGITS, Entry, digits_pattern

    # as `_DIGITS.split` leaves them: no ASCII digit, and something between two runs
    texts = ["".join(c for c in t if not "0" <= c <= "9") for t in texts]
    texts[1:-1] = [t or "," for t in texts[1:-1]]
    pattern = digits_pattern(texts)
    entry = Entry("x", False, {}, [], [], [], [], pattern, texts, DIGITS)
    for text in (_texts(texts, values), _texts(texts, values)[cut:] + junk):
        m = pattern.fullmatch(text)
        assert entry.match(text) == (None if m is None else list(m.groups()))


@settings(max_examples=600, deadline=None)
@given(
    _LITERAL,
    st.lists(st.tuples(st.sampled_from(["handle", "first", "delivery-tag"]), _LITERAL), max_size=4),
    st.sampled_from([",", "]", ", ", "]]"]),
    st.lists(_VALUES, max_size=6),
    st.integers(0, 3),
    st.text(max_size=2),
)
def test_a_proton_shape_is_matched_as_its_pattern_matches(
    first: str,
    slots: list[tuple[str, str]],
    after: str,
    values: list[str],
    cut: int,
    junk: str,
) -> None:
    """Proton's entries: `name=value` slots, each value followed by `,` or `]` (`_SLOT`)."""
    from amqpscope.logs.proton import shape
    from amqpscope.logs.shapes import PROTON, Entry

    texts = [first] + [after + between for _, between in slots]
    pattern, literals = shape(texts, [name for name, _ in slots])
    entry = Entry("x", False, {}, [], [], [], [], pattern, literals, PROTON)
    for text in (_texts(literals, values), _texts(literals, values)[cut:] + junk):
        m = pattern.fullmatch(text)
        assert entry.match(text) == (None if m is None else list(m.groups()))
