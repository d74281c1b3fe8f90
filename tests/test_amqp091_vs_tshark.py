"""0-9-1 method arguments, content headers and bodies, against Wireshark's dissector.

Every argument Wireshark shows (tshark PDML, `amqp.method.arguments.*`, field tables as nested
`amqp.field`s) must equal ours on every recorded 0-9-1 capture. Where Wireshark 4.0 is wrong, a
test below shows it, on the recorded captures or on a capture written here with scapy:
- a decimal's value is read as unsigned: -3.14 shows as 42949669.82;
- the 'L' field type (RabbitMQ reads it as 'l') is unknown to it, and the rest of the table lost;
- after an unknown field type it goes on one byte later and shows entries that are not there;
- exchange.bind/unbind's `source` is labelled "Destination";
- channel.open-ok's channel-id, an empty long string that is there, shows as "<MISSING>";
- basic.consume's `arguments` table is called "filter" (its 0-9 name).
"""

from __future__ import annotations

import json
import re
import struct
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pika.frame
import pika.spec
import pytest
from scapy.layers.inet import IP, TCP
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap

from amqpscope.capture.files import open_capture
from amqpscope.codec.amqp091 import spec
from amqpscope.dissect import Dissector
from tests.oracle import TSHARK, keylog_for, pdml

pytestmark = [
    pytest.mark.tshark,
    pytest.mark.skipif(TSHARK is None, reason="tshark is not installed (make test installs it)"),
]

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
FILES_091 = sorted(
    CAPTURES / json.loads(p.read_text())["file"]
    for p in CAPTURES.glob("*.json")
    if json.loads(p.read_text()).get("protocol") in ("0-9-1", "0-8/0-9")
)
BY_NAME = {m.name: m for m in spec.METHODS.values()}
#: fields Wireshark makes up (not on the wire)
SYNTHETIC = {"publish-number"}
#: Wireshark's names where they are not the spec's: basic.consume's table has its 0-9 name
WIRESHARK_NAMES = {"filter": "arguments"}
_ENTRY = re.compile(r"^(?P<key>.*?) \((?P<type>[^()]*)\)(?:: (?P<value>.*))?$", re.S)


# -- tshark's view -------------------------------------------------------------------------------


def table_of(element: ET.Element) -> dict[str, Any]:
    """A field table as Wireshark shows it: key -> (type, value text or nested table)."""
    out: dict[str, Any] = {}
    for child in element.findall("field"):
        showname = child.get("showname", "")
        match = _ENTRY.match(showname)
        if match is None or "unknown type" in showname:  # "L: unknown type 4c (L)"
            out[showname.split(":")[0]] = ("unknown", showname)
            continue
        if child.findall("field") or match["type"] in ("field table", "array"):
            out[match["key"]] = (match["type"], table_of(child))
        else:
            out[match["key"]] = (match["type"], match["value"] or "")
    return out


def decode_as(path: Path) -> tuple[int, ...]:
    """The port of a capture recorded off AMQP's own (garagemq's), for Wireshark's Decode As."""
    truth = path.with_suffix(".json")
    port = json.loads(truth.read_text()).get("port") if truth.exists() else None
    return (port,) if isinstance(port, int) and port not in (5671, 5672) else ()


def tshark_pdus(path: Path) -> list[dict[str, Any]]:
    """Every 0-9-1 method, content header and body tshark dissects, in order."""
    out = []
    for packet in pdml(path, decode_as(path)).iter("packet"):
        number = 0
        for proto in packet.findall("proto"):
            if proto.get("name") == "geninfo":
                number = int(proto.find("field[@name='num']").get("show"))  # type: ignore[union-attr]
            if proto.get("name") != "amqp":
                continue
            fields = {f.get("name"): f for f in proto.findall("field")}
            kind = fields.get("amqp.type")
            if kind is None or kind.get("show") not in ("1", "2", "3"):
                continue
            pdu: dict[str, Any] = {"packet": number, "type": int(kind.get("show", "0"))}
            if "amqp.method.arguments" in fields:
                pdu["arguments"] = {
                    arg.get("name", "").rsplit(".", 1)[1].replace("_", "-"): arg
                    for arg in fields["amqp.method.arguments"].findall("field")
                }
            if "amqp.header.class" in fields:
                pdu["header"] = {k: fields[k].get("show") for k in fields if "header." in k}
                props = fields.get("amqp.header.properties")
                pdu["properties"] = {
                    p.get("name", "").rsplit(".", 1)[1].replace("_", "-"): p
                    for p in (props.findall("field") if props is not None else [])
                }
            if "amqp.payload" in fields:
                pdu["size"] = int(fields["amqp.payload"].get("size", "0"))
            out.append(pdu)
    return out


# -- ours, as Wireshark would print it -------------------------------------------------------------


def wireshark_time(value: Any) -> str:
    """Our ISO 8601 timestamp as Wireshark prints it ("Nov 14, 2023 22:13:20.000000000 UTC")."""
    when = datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)
    return when.strftime("%b %d, %Y %H:%M:%S.000000000 UTC")


def as_shown(value: Any) -> str:
    """One of our decoded values as Wireshark's text for it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, dict) and set(value) == {"hex"}:
        return value["hex"]
    return str(value)


def same_table(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    assert list(ours) == list(theirs)
    for key, value in ours.items():
        kind, shown = theirs[key]
        if isinstance(value, dict) and set(value) != {"hex"}:
            same_table(value, shown)
        elif isinstance(value, list):
            same_table({f"[{i}]": v for i, v in enumerate(value)}, shown)
        elif kind in ("float", "double"):
            assert float(shown) == value
        elif kind == "timestamp":
            assert wireshark_time(value) == shown
        else:
            assert as_shown(value) == shown, key


def amqplain_table(raw: bytes) -> dict[str, str]:
    """An AMQPLAIN response (a field table's entries without its length: shortstr key, 'S',
    long string), read here from Wireshark's bytes: py-amqp and php-amqplib log in with it."""
    out: dict[str, str] = {}
    at = 0
    while at < len(raw):
        size = raw[at]
        key = raw[at + 1 : at + 1 + size].decode()
        at += 1 + size
        assert raw[at : at + 1] == b"S", raw[at:]
        (length,) = struct.unpack_from(">I", raw, at + 1)
        out[key] = raw[at + 5 : at + 5 + length].decode()
        at += 5 + length
    return out


def same_argument(domain: str, value: Any, field: ET.Element) -> None:
    show = field.get("show", "")
    if domain == "table":
        same_table(value, table_of(field))
    elif domain == "bit":
        assert show == ("1" if value else "0")
    elif domain == "longstr":  # Wireshark shows long strings as bytes
        if isinstance(value, dict) and "password" in value:  # PLAIN, as we show it
            value = "\0".join(value[k] for k in ("authzid", "username", "password"))
        elif isinstance(value, dict) and "hex" not in value:  # AMQPLAIN, a table as we show it
            assert amqplain_table(bytes.fromhex(show.replace(":", ""))) == value
            return
        raw = value.encode() if isinstance(value, str) else bytes.fromhex(value["hex"])
        assert show == ":".join(f"{b:02x}" for b in raw)
    elif domain == "timestamp":
        assert show == wireshark_time(value)
    elif domain == "shortstr" and isinstance(value, str) and field.get("value") is not None:
        # as bytes: Wireshark's `show` escapes control characters its own way (\x7, and a
        # right-to-left override as three U+FFFD): 091-hostile-names
        raw = value.encode()  # (some fields' value holds the length octet too)
        assert field.get("value") in (raw.hex(), (bytes([len(raw)]) + raw).hex())
    else:
        assert show == as_shown(value)


def ours(path: Path) -> list:
    with open_capture(str(path)) as capture:
        frames = Dissector(show_secrets=True, keylog=keylog_for(path)).run(capture)
        return [f for f in frames if f.kind in ("method", "content-header", "content-body")]


@pytest.mark.parametrize("path", FILES_091, ids=lambda p: p.name)
def test_arguments_headers_and_bodies_equal_wiresharks(path: Path) -> None:
    mine, theirs = ours(path), tshark_pdus(path)
    assert [f.packet for f in mine] == [p["packet"] for p in theirs]
    compared = 0
    for frame, pdu in zip(mine, theirs, strict=True):
        if frame.kind == "method":
            method = BY_NAME.get(frame.name)
            arguments = dict(method.arguments) if method else {}
            shown = {
                WIRESHARK_NAMES.get(n, n): f
                for n, f in pdu.get("arguments", {}).items()
                if n not in SYNTHETIC
            }
            assert list(shown) == list(arguments), frame.name
            for name, field in shown.items():
                same_argument(arguments[name], frame.fields[name], field)
                compared += 1
        elif frame.kind == "content-header":
            header = pdu["header"]
            assert (
                int(header["amqp.header.class"]),
                int(header["amqp.header.weight"]),
                int(header["amqp.header.body-size"]),
                header["amqp.header.property-flags"],
            ) == tuple(
                frame.fields[k] for k in ("class-id", "weight", "body-size", "property-flags")
            )
            domains = dict(spec.PROPERTIES[frame.fields["class-id"]])
            assert list(pdu["properties"]) == list(frame.fields["properties"])
            for name, field in pdu["properties"].items():
                same_argument(domains[name], frame.fields["properties"][name], field)
                compared += 1
        else:
            assert pdu["size"] == frame.fields["size"]
    assert compared > 0 or not mine


# -- where Wireshark is wrong ----------------------------------------------------------------------


def all_args(path: Path, method: str) -> list[tuple[Any, dict[str, ET.Element]]]:
    """(our frame, Wireshark's argument fields) for every `method` frame of a capture."""
    mine, theirs = ours(path), tshark_pdus(path)
    return [
        (f, p.get("arguments", {})) for f, p in zip(mine, theirs, strict=True) if f.name == method
    ]


def test_wireshark_labels_exchange_binds_source_destination() -> None:
    pairs = all_args(CAPTURES / "091-exchanges.pcap", "exchange.bind")
    pairs += all_args(CAPTURES / "091-exchanges.pcap", "exchange.unbind")
    assert len(pairs) == 2
    for frame, shown in pairs:
        assert frame.fields["source"] != frame.fields["destination"]
        assert shown["source"].get("show") == frame.fields["source"]
        assert shown["source"].get("showname", "").startswith("Destination: ")


def test_wireshark_calls_an_empty_channel_id_missing() -> None:
    pairs = all_args(CAPTURES / "091-publish-consume.pcap", "channel.open-ok")
    assert pairs
    for frame, shown in pairs:
        assert frame.data[11:15] == b"\0\0\0\0"  # a long string of length 0: present, empty
        assert frame.fields["channel-id"] == ""
        assert shown["channel-id"].get("showname") == "Channel-Id: <MISSING>"


def test_wireshark_calls_basic_consumes_arguments_filter() -> None:
    pairs = all_args(CAPTURES / "091-publish-consume.pcap", "basic.consume")
    assert pairs
    for frame, shown in pairs:
        assert "arguments" in frame.fields and "filter" in shown and "arguments" not in shown


def entry(key: str, tag: str, payload: bytes = b"") -> bytes:
    return bytes([len(key)]) + key.encode() + tag.encode() + payload


def write_capture(path: Path, frames: list[bytes]) -> None:
    """A client that sends the 0-9-1 header, then `frames`, one per packet, to port 5672."""
    seq, packets = 1000, []
    packets.append(Ether() / IP() / TCP(sport=40000, dport=5672, flags="S", seq=seq - 1))
    packets.append(Ether() / IP() / TCP(sport=5672, dport=40000, flags="SA", seq=9, ack=seq))
    for data in [b"AMQP\x00\x00\x09\x01", *frames]:
        packets.append(
            Ether() / IP() / TCP(sport=40000, dport=5672, flags="PA", seq=seq, ack=10) / data
        )
        seq += len(data)
    for packet in packets:
        packet[IP].src = packet[IP].dst = "127.0.0.1"
    wrpcap(str(path), packets)


def declare_with(*entries: bytes) -> bytes:
    table = b"".join(entries)
    args = struct.pack(">H", 0) + b"\x01q\x00" + struct.pack(">I", len(table)) + table
    payload = struct.pack(">I", pika.spec.Queue.Declare.INDEX) + args  # class and method ids
    return struct.pack(">BHI", 1, 1, len(payload)) + payload + b"\xce"


def synthetic(tmp_path: Path, frames: list[bytes]) -> tuple[Any, dict[str, Any]]:
    """Our decoded frame and Wireshark's table for the one queue.declare in a fresh capture."""
    path = tmp_path / "synthetic.pcap"
    write_capture(path, frames)
    (mine,), (theirs,) = ours(path), tshark_pdus(path)
    return mine, table_of(theirs["arguments"]["arguments"])


def test_wireshark_reads_a_negative_decimal_as_unsigned(tmp_path: Path) -> None:
    frame, shown = synthetic(
        tmp_path, [declare_with(entry("price", "D", struct.pack(">Bi", 2, -314)))]
    )
    assert frame.fields["arguments"] == {"price": "-3.14"}
    assert shown == {"price": ("decimal", "42949669.820000")}  # (2**32 - 314) / 100


def test_wireshark_does_not_know_the_L_type_rabbitmq_reads(tmp_path: Path) -> None:
    frame, shown = synthetic(
        tmp_path,
        [declare_with(entry("big", "L", struct.pack(">q", -2)), entry("after", "t", b"\x01"))],
    )
    assert frame.fields["arguments"] == {"big": -2, "after": True} and frame.findings == []
    assert shown["big"] == ("unknown", "big: unknown type 4c (L)")
    assert "after" not in shown  # the rest of the table is lost


def test_wireshark_invents_entries_after_an_unknown_type(tmp_path: Path) -> None:
    frame, shown = synthetic(
        tmp_path,
        [
            declare_with(
                entry("ok", "t", b"\x01"), entry("Z", "Z", b"\x00\x00"), entry("x", "t", b"\x01")
            )
        ],
    )
    assert frame.fields["arguments"] == {"ok": True}
    assert [f.code for f in frame.findings] == ["amqp091.bad-field-table"]
    assert len(shown) > 2  # entries that are not on the wire, from bytes read out of step


def test_every_field_type_wireshark_knows_agrees(tmp_path: Path) -> None:
    """The types both decode the same, one table with each: t b B s u I i l f d S A T F V x."""
    longstr = lambda raw: struct.pack(">I", len(raw)) + raw  # noqa: E731
    entries = [
        entry("t", "t", b"\x01"),
        entry("b", "b", struct.pack(">b", -5)),
        entry("B", "B", b"\xfa"),
        entry("s", "s", struct.pack(">h", -300)),
        entry("u", "u", struct.pack(">H", 65000)),
        entry("I", "I", struct.pack(">i", -70000)),
        entry("i", "i", struct.pack(">I", 4000000000)),
        entry("l", "l", struct.pack(">q", -(2**40))),
        entry("f", "f", struct.pack(">f", 1.5)),
        entry("d", "d", struct.pack(">d", 2.25)),
        entry("D", "D", struct.pack(">Bi", 2, 314)),
        entry("S", "S", longstr(b"hello")),
        entry("A", "A", longstr(b"I" + struct.pack(">i", 7) + b"t\x00")),
        entry("T", "T", struct.pack(">Q", 1700000000)),
        entry("F", "F", longstr(entry("x", "t", b"\x01"))),
        entry("V", "V"),
        entry("x", "x", longstr(b"\x01\x02\xff")),
    ]
    frame, shown = synthetic(tmp_path, [declare_with(*entries)])
    assert frame.findings == []
    shown["D"] = (shown["D"][0], str(float(shown["D"][1])))  # "3.140000": compare as numbers
    frame.fields["arguments"]["D"] = str(float(frame.fields["arguments"]["D"]))
    same_table(frame.fields["arguments"], shown)


def test_every_property_wireshark_shows_agrees(tmp_path: Path) -> None:
    props = pika.spec.BasicProperties(
        content_type="text/plain",
        content_encoding="utf-8",
        headers={"h": 1, "nested": {"deep": "yes"}},
        delivery_mode=2,
        priority=3,
        correlation_id="c",
        reply_to="r",
        expiration="60000",
        message_id="m",
        timestamp=1700000000,
        type="t",
        user_id="guest",
        app_id="a",
        cluster_id="cl",
    )
    frames = [
        pika.frame.Method(1, pika.spec.Basic.Publish(routing_key="q")).marshal(),
        pika.frame.Header(1, 5, props).marshal(),
        pika.frame.Body(1, b"hello").marshal(),
    ]
    path = tmp_path / "props.pcap"
    write_capture(path, frames)
    test_arguments_headers_and_bodies_equal_wiresharks(path)
    header = next(f for f in ours(path) if f.kind == "content-header")
    assert len(header.fields["properties"]) == 14
