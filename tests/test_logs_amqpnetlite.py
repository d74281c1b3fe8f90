"""amqpnetlite's frame trace, written from its `GetDebugString` / `GetTraceObject` code.

The frames are the captured ones of real runs; `dotnet()` prints each as amqpnetlite's
`DescribedList.ToString()` does (fields that are set, wire values: `True`/`False`, numbers,
raw strings and symbols, upper-case hex binary, `[a,b]` lists, maps as their .NET type name);
amqpscope must read back every field the text shows, and name the maps it cannot.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from amqpscope.capture.files import open_capture
from amqpscope.codec.amqp10 import spec
from amqpscope.codec.frames import Frame
from amqpscope.dissect import Dissector
from amqpscope.logs.detect import detect
from amqpscope.logs.reader import LogReader

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
BY_NAME = {c.name: c for c in spec.COMPOSITES.values()}
ALIASES = {"hostname": "host-name"}


def wire_value(value: Any, field: spec.Field) -> Any:
    """A decoded choice name back to the value on the wire (what amqpnetlite keeps)."""
    restricted = spec.RESTRICTED.get(field.type)
    if restricted is not None and restricted.choices and isinstance(value, str):
        choice = dict(restricted.choices).get(value)
        if choice is not None:
            return {"true": True, "false": False}.get(choice, choice)
    return value


#: the field names amqpnetlite prints (the `GetDebugString` calls of its `src/Framing/*.cs`,
#: Azure/amqpnetlite as fetched, 2026-06): Open's `host-name`, Flow's short names (there since
#: its first commit, b9e5323 of 2014), Error's `fields`
PRINTED_NAMES = {
    "hostname": "host-name",
    "next-incoming-id": "next-in-id",
    "incoming-window": "in-window",
    "next-outgoing-id": "next-out-id",
    "outgoing-window": "out-window",
    "info": "fields",
}
#: settle modes by their enum names, as 2.2.0 on prints them (4384b12, 2019: Attach's and
#: Transfer's `SenderSettleMode`/`ReceiverSettleMode` fields, `GetTraceObject` -> ToString())
ENUM_NAMES = {
    "sender-settle-mode": {0: "Unsettled", 1: "Settled", 2: "Mixed"},
    "receiver-settle-mode": {0: "First", 1: "Second"},
}


def dotnet(
    value: Any, field: spec.Field | None, names: dict[str, str] = ALIASES, enums: bool = False
) -> str:
    if isinstance(value, dict) and value.get("type") in BY_NAME:
        composite = BY_NAME[value["type"]]
        parts = [
            f"{names.get(f.name, f.name)}:{dotnet(value[f.name], f, names, enums)}"
            for f in composite.fields
            if value.get(f.name) is not None
        ]
        return f"{composite.name}({','.join(parts)})"
    if isinstance(value, dict):
        return "Amqp.Types.Map"
    if field is not None:
        value = wire_value(value, field)
        if enums and field.type in ENUM_NAMES:
            return ENUM_NAMES[field.type][int(value)]
        base = field.type
        while base in spec.RESTRICTED:
            base = spec.RESTRICTED[base].source
        if base == "binary" and isinstance(value, str):
            return value.upper()
    if value is True or value is False:
        return "True" if value else "False"
    if isinstance(value, list):
        return "[" + ",".join(str(v) for v in value) + "]"
    return str(value)


def line(frame: Frame) -> str:
    verb = "SEND" if frame.direction == "c2s" else "RECV"
    if frame.kind == "protocol-header":
        body = f"AMQP {frame.fields['protocol-id']} 1.0.0"
        return f"[12:00:01.123] {verb} {body}\n"
    body = dotnet(frame.fields | {"type": frame.name}, None)
    channel = "" if frame.kind == "sasl" else f"(ch={frame.channel}) "
    return f"[12:00:01.123] {verb} {channel}{body}\n"


def captured(name: str) -> list[Frame]:
    with open_capture(str(CAPTURES / f"{name}.pcap")) as capture:
        return [
            f
            for f in Dissector().run(capture)
            if f.kind in ("performative", "sasl", "protocol-header")
            and f.name not in ("sasl-init", "sasl-response")
        ]


def maps_removed(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: maps_removed(v)
            for k, v in value.items()
            if not (isinstance(v, dict) and "type" not in v)
        }
    return value


@pytest.mark.parametrize(
    "name", ["log-proton-broker", "log-rhea-broker", "10-peer-to-peer", "10-bad-address"]
)
def test_captured_frames_as_amqpnetlite_prints_them(name: str) -> None:
    wire = captured(name)
    lines = [line(f) for f in wire]
    assert detect(lines) == "amqpnetlite"
    reader = LogReader("net.log", "amqpnetlite", show_secrets=True)
    records = [r for n, text in enumerate(lines, 1) for r in reader.feed(text, n)]
    assert reader.findings == [], reader.findings[:3]
    assert len(records) == len(wire)
    for record, frame in zip(records, wire, strict=True):
        assert (record.name, record.channel, record.direction) == (
            frame.name,
            frame.channel,
            frame.direction,
        )
        assert maps_removed(record.fields) == maps_removed(frame.fields), record.source
        maps = {k for k, v in frame.fields.items() if isinstance(v, dict) and "type" not in v}
        shown = {f.message.split(" ")[1].rstrip(":") for f in record.findings}
        assert maps <= shown


@pytest.mark.parametrize("enums", [True, False], ids=["2.2-on", "before-2.2"])
@pytest.mark.parametrize(
    "name", ["log-proton-broker", "log-rhea-broker", "10-peer-to-peer", "10-bad-address"]
)
def test_amqpnetlites_own_names_and_enum_names_are_read(name: str, enums: bool) -> None:
    """The names amqpnetlite prints (`flow(next-in-id:..,in-window:..,next-out-id:..,...)`,
    issue 42: "no field 'next-in-id' in flow" before) and its settle modes by enum name
    (`snd-settle-mode:Mixed`, `rcv-settle-mode:First`: "'Mixed' is no ubyte" before) or by
    number (before 2.2.0) read as the captured frames."""
    wire = captured(name)
    lines = []
    for frame in wire:
        if frame.kind == "protocol-header":
            lines.append(line(frame))
            continue
        verb = "SEND" if frame.direction == "c2s" else "RECV"
        body = dotnet(frame.fields | {"type": frame.name}, None, PRINTED_NAMES, enums)
        channel = "" if frame.kind == "sasl" else f"(ch={frame.channel}) "
        lines.append(f"[12:00:01.123] {verb} {channel}{body}\n")
    assert any("next-in-id:" in text or "in-window:" in text for text in lines)
    assert not enums or any("snd-settle-mode:Mixed" in text for text in lines)
    reader = LogReader("net.log", "amqpnetlite", show_secrets=True)
    records = [r for n, text in enumerate(lines, 1) for r in reader.feed(text, n)]
    assert reader.findings == [], reader.findings[:3]
    assert len(records) == len(wire)
    for record, frame in zip(records, wire, strict=True):
        assert maps_removed(record.fields) == maps_removed(frame.fields), record.source
