"""AMQP 1.0 fields, decoded by amqpscope and by Wireshark's dissector: the same, field by field.

Every field Wireshark shows for a performative, SASL frame, nested terminus, error, delivery
state or single-frame message is looked up in amqpscope's JSON and must be equal; and every
top-level field amqpscope has that differs from its spec default must be one Wireshark shows.

Where Wireshark is wrong, a test here shows it (and the README says so):
- it dissects each continuation frame of a multi-frame delivery as if a message started there,
  reporting "Unknown AMQP type" and "Odd number of map items" errors on good frames;
- it shows decimal32/64/128 values as "(not supported)", prints floats and doubles with six
  decimals (1e-10 reads 0.000000) and garbles timestamps before 1970; amqpscope shows them exactly.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import proton
import pytest

from amqpscope.capture.files import open_capture
from amqpscope.codec.amqp10 import composites
from amqpscope.dissect import Dissector
from tests.oracle import TSHARK, keylog_for, pdml, visible_to_wireshark
from tests.test_amqp10_types import bid_bits

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
FILES_10 = sorted(CAPTURES.glob("10-*.pcap"))
pytestmark = [
    pytest.mark.tshark,
    pytest.mark.skipif(TSHARK is None, reason="tshark is not installed (make test installs it)"),
]

#: Wireshark's field abbreviation (after its prefix) -> amqpscope's field name
ARGUMENTS = {
    "handle": "handle",
    "messageFormat": "message-format",
    "deliveryTag": "delivery-tag",
    "deliveryId": "delivery-id",
    "more": "more",
    "settled": "settled",
    "resume": "resume",
    "batchable": "batchable",
    "aborted": "aborted",
    "role": "role",
    "outgoingWindow": "outgoing-window",
    "nextOutgoingId": "next-outgoing-id",
    "incomingWindow": "incoming-window",
    "nextIncomingId": "next-incoming-id",
    "linkCredit": "link-credit",
    "available": "available",
    "drain": "drain",
    "echo": "echo",
    "deliveryCount": "delivery-count",
    "sndSettleMode": "snd-settle-mode",
    "rcvSettleMode": "rcv-settle-mode",
    "name": "name",
    "first": "first",
    "last": "last",
    "initDeliveryCount": "initial-delivery-count",
    "maxMessageSize": "max-message-size",
    "containerId": "container-id",
    "hostname": "hostname",
    "maxFrameSize": "max-frame-size",
    "channelMax": "channel-max",
    "idleTimeout": "idle-time-out",
    "handleMax": "handle-max",
    "remoteChannel": "remote-channel",
    "closed": "closed",
    "terminusDurable": "durable",
    "address.string": "address",
    "timeout": "timeout",
    "dynamic": "dynamic",
    "condition": "condition",
    "description": "description",
    "deliveryFailed": "delivery-failed",
    "undeliverableHere": "undeliverable-here",
    "durable": "durable",
    "firstAcquirer": "first-acquirer",
    "priority": "priority",
    "ttl": "ttl",
    "messageId.string": "message-id",
    "subject": "subject",
    "contentType": "content-type",
    "mechanism": "mechanism",
    "initResponse": "initial-response",
    "saslCode": "code",
}
#: fields whose Wireshark value is a name shown as "name (number)"
NAMED = {"snd-settle-mode", "rcv-settle-mode", "durable", "code"}
#: Wireshark containers -> the amqpscope key they stand for (None: the same object)
CONTAINERS = {
    "amqp.method.arguments": None,
    "amqp.performative.arguments.source": "source",
    "amqp.performative.arguments.target": "target",
    "amqp.tx.coordinator": "target",
    "amqp.performative.arguments.error": "error",
}
#: the first performatives amqpscope names as Wireshark does, for pairing frames
BOOLEAN_FIELDS = {
    "more",
    "settled",
    "resume",
    "batchable",
    "aborted",
    "drain",
    "echo",
    "closed",
    "dynamic",
    "delivery-failed",
    "undeliverable-here",
    "first-acquirer",
}


def tshark_pdus(path: Path, decode_as: tuple[int, ...] = ()) -> list[tuple[int, ET.Element]]:
    """(packet number, the amqp proto element) for every AMQP PDU Wireshark dissects."""
    root = pdml(str(path), decode_as)
    out = []
    for packet in root.iter("packet"):
        number = 0
        for proto in packet.iter("proto"):
            if proto.get("name") == "geninfo":
                number = int(proto.find("field[@name='num']").get("show"))  # type: ignore[union-attr]
            elif proto.get("name") == "amqp":
                out.append((number, proto))
    return out


def ours(path: Path) -> list:
    with open_capture(str(path)) as capture:
        return visible_to_wireshark(list(Dissector(keylog=keylog_for(path)).run(capture)))


#: where the recorder's peer-to-peer scenarios listen (plain AMQP or its in-band TLS), a port
#: Wireshark does not decode as AMQP unless told
PEER_PORT = 5673


def ports(path: Path) -> tuple[int, ...]:
    """Decode As for a capture whose ground truth says it was recorded on a port Wireshark
    does not know for AMQP (the peer port, Proton's C++ example broker's, garagemq's)."""
    truth = path.with_suffix(".json")
    port = json.loads(truth.read_text()).get("port") if truth.exists() else None
    return (port,) if isinstance(port, int) and port not in (5672, 5671) else ()


def label(showname: str) -> str:
    """`Role: sender` -> `sender`; `Send-Settle-Mode: mixed (2)` -> `mixed`."""
    value = showname.split(": ", 1)[1]
    return re.sub(r" \(\d+\)$", "", value)


def item(showname: str) -> tuple[str, str]:
    """A map or list item, `key (type): value` -> (key, value)."""
    head, _, value = showname.partition("): ")
    return head.rsplit(" (", 1)[0], value


def wire_value(field: ET.Element, name: str) -> Any:
    show = field.get("show", "")
    showname = field.get("showname", "")
    if name == "role":
        return label(showname)
    if name in NAMED and re.search(r" \(\d+\)$", showname):
        return label(showname)
    if name in BOOLEAN_FIELDS:
        return show == "1"
    if name in ("delivery-tag", "initial-response"):
        return show.replace(":", "")
    if re.fullmatch(r"-?\d+", show) and name not in (
        "name",
        "container-id",
        "hostname",
        "message-id",
    ):
        return int(show)
    return " ".join(show.split())


def observations(element: ET.Element, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple, Any]]:
    """(amqpscope JSON path, value) for what Wireshark shows under `element`."""
    for field in element.findall("field"):
        abbrev = field.get("name", "")
        if abbrev in CONTAINERS:
            key = CONTAINERS[abbrev]
            inner = path if key is None else (*path, key)
            if abbrev == "amqp.tx.coordinator":
                yield (*inner, "type"), "coordinator"
            yield from observations(field, inner)
        elif abbrev.startswith("amqp.delivery-state."):
            state = abbrev.rsplit(".", 1)[1]
            where = (*path, "default-outcome") if path[-1:] == ("source",) else (*path, "state")
            yield (*where, "type"), state
            yield from observations(field, where)
        elif abbrev in ("amqp.properties.outcomes", "amqp.sasl.mechanisms"):
            key = "outcomes" if "outcomes" in abbrev else "sasl-server-mechanisms"
            yield (*path, key), [item(f.get("showname", ""))[1] for f in field.findall("field")]
        elif abbrev == "amqp.properties.capabilities_sym":
            yield (*path, "capabilities"), [field.get("show")]
        elif abbrev == "amqp.messageAnnotations" and not path:
            continue  # a transfer's message section: `message_observations` compares it
        elif abbrev in ("amqp.performative.arguments.properties", "amqp.messageAnnotations"):
            key = "properties" if "arguments" in abbrev else "message-annotations"
            entries = dict(item(f.get("showname", "")) for f in field.findall("field"))
            yield (*path, key), entries
        else:
            suffix = re.sub(
                r"^amqp\.(performative\.arguments|properties|error|modified|sasl|"
                r"message)\.",
                "",
                abbrev,
            )
            name = ARGUMENTS.get(suffix)
            if name is not None:
                yield (*path, name), wire_value(field, name)


def message_observations(pdu: ET.Element) -> Iterator[tuple[tuple, Any]]:
    """What Wireshark shows of a transfer's message sections, as paths into `message`."""
    for field in pdu.findall("field"):
        abbrev = field.get("name", "")
        if abbrev == "amqp.header":
            yield from observations(field, ("header",))
        elif abbrev == "amqp.properties":
            yield from observations(field, ("properties",))
        elif abbrev in ("amqp.applicationProperties", "amqp.messageAnnotations"):
            entries = dict(item(f.get("showname", "")) for f in field.findall("field"))
            key = "message-annotations" if "Annotations" in abbrev else "application-properties"
            yield (key,), entries
        elif abbrev == "amqp.value":
            shown = field.get("showname", "")
            counted = re.search(r"\((map|list) of (\d+) elements?\)$", shown)
            if counted:  # a compound body: Wireshark names its kind and size
                yield ("body", "value"), (counted[1], int(counted[2]))
            else:
                yield ("body", "value"), item(shown)[1]


def lookup(tree: Any, path: tuple) -> Any:
    for key in path:
        if not isinstance(tree, dict) or key not in tree:
            return KeyError
        tree = tree[key]
    return tree


#: an AMQP timestamp as amqpscope writes it, and as Wireshark shows one (local time, ns)
ISO_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
WIRESHARK_TIME = re.compile(r"[A-Z][a-z]{2} [ \d]\d, \d{4} \d\d:\d\d:\d\d\.\d{9}")


def wireshark_time(iso: str) -> str:
    """An ISO timestamp in Wireshark's absolute-time text: "Nov 26, 2026 19:42:14.908000000"
    in the local time zone (tshark's, which the test shares)."""
    when = dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).astimezone()
    return when.strftime("%b ") + f"{when.day:2d}" + when.strftime(", %Y %H:%M:%S.%f") + "000"


def comparable(value: Any, theirs: Any) -> Any:
    """Our JSON value in the form Wireshark's text takes."""
    if isinstance(theirs, dict) and isinstance(value, dict):
        out = {k: " ".join(str(v).split()) for k, v in value.items()}
        for k, v in value.items():
            if (
                isinstance(v, str)
                and ISO_TIMESTAMP.fullmatch(v)
                and WIRESHARK_TIME.fullmatch(str(theirs.get(k)))
            ):
                out[k] = wireshark_time(v)
        return out
    if isinstance(value, str):
        return " ".join(value.split())
    return value


def pairs(path: Path) -> list[tuple[Any, ET.Element]]:
    """Our 1.0 frames and Wireshark's PDUs, paired in order (framing agrees: test_vs_tshark)."""
    # a 1.0 connection's frames, with the other protocol's header a server may answer with
    frames = [f for f in ours(path) if f.version == "1.0" or f.kind == "protocol-header"]
    pdus = tshark_pdus(path, ports(path))
    assert [f.packet for f in frames] == [n for n, _ in pdus]
    return list(zip(frames, (p for _, p in pdus), strict=True))


def defaults(name: str) -> dict[str, Any]:
    cspec = next((c for c in composites.SPECS.values() if c.name == name), None)
    if cspec is None:
        return {}
    return {f.name: f.default for f in cspec.fields}


@pytest.mark.parametrize("path", FILES_10, ids=lambda p: p.name)
def test_fields_equal_wiresharks(path: Path) -> None:
    compared = 0
    beyond_headers = 0  # frames past the protocol headers (none when the server hung up)
    for frame, pdu in pairs(path):
        if frame.kind == "protocol-header":
            continue
        beyond_headers += 1
        for where, theirs in observations(pdu):
            if where[-1:] == ("initial-response",) and isinstance(frame.fields.get(where[0]), dict):
                continue  # redacted PLAIN credentials (see test_amqp10_decoder)
            mine = lookup(frame.fields, where)
            assert comparable(mine, theirs) == theirs, (frame.packet, frame.name, where)
            compared += 1
        shown = {w[0] for w, _ in observations(pdu)}
        spec_defaults = defaults(frame.name)
        for key, value in frame.fields.items():
            if not isinstance(value, (dict, list)) and value != spec_defaults.get(key, KeyError):
                assert key in shown, (frame.packet, frame.name, key)
        if frame.name == "transfer" and frame.message and frame.message["transfers"] == 1:
            token = frame.message.get("request-reply", {}).get("operation") == "put-token"
            for where, theirs in message_observations(pdu):
                mine = lookup(frame.message, where)
                if token and where == ("body", "value"):
                    assert mine == "<redacted>"  # a CBS token is a credential (test_secrets)
                    continue
                if isinstance(theirs, tuple):  # (kind, size) of a map or list body
                    kind = dict if theirs[0] == "map" else list
                    assert isinstance(mine, kind) and len(mine) == theirs[1], (frame.packet, where)
                    compared += 1
                    continue
                assert comparable(mine, theirs) == theirs, (frame.packet, where)
                compared += 1
    # Wireshark does not follow the in-band TLS upgrade (it sees that capture's headers only)
    # nor AMQP inside WebSocket
    assert compared or not beyond_headers or "inband" in path.name or "websocket" in path.name


def test_wireshark_misreads_the_continuation_frames_of_a_large_delivery() -> None:
    """Wireshark 4.0 dissects every transfer's payload as if a message started there: the 73
    continuation frames of the 300 KB message get "Unknown AMQP type" and "Odd number of map
    items" errors. amqpscope joins them and finds one whole, well-formed message each way."""
    path = CAPTURES / "10-large-message.pcap"
    complaints = 0
    for frame, pdu in pairs(path):
        errors = [
            f
            for f in pdu.iter("field")
            if f.get("name") in ("amqp.unknown.amqp_type", "amqp.invalid.params_number")
        ]
        if errors:
            assert frame.name == "transfer" and not frame.findings
            assert frame.fields["more"] is True or frame.message["transfers"] > 1
            complaints += 1
    assert complaints > 100
    frames = [f for f, _ in pairs(path)]
    assert len([f for f in frames if f.message]) == 2


def test_wireshark_drops_decimals_float_digits_and_negative_timestamps(tmp_path: Path) -> None:
    """Values Wireshark 4.0 shows wrongly, in a message made here (Proton's encoding, sent over a
    TCP connection to 5672): decimals read "(not supported)", doubles are printed with six
    decimals (1e-10 reads 0.000000) and a timestamp before 1970 comes out as garbage
    ("00:00:00.-01000000"). amqpscope shows them exactly."""
    decimals = (
        ("d32", proton.decimal32(bid_bits(1, 150, 101 - 2, 32)), "-1.50"),
        ("d64", proton.decimal64(bid_bits(0, 1, 398 - 2, 64)), "0.01"),
        ("d128", proton.decimal128(bid_bits(0, 7, 6176, 128).to_bytes(16, "big")), "7"),
    )
    properties: dict[str, Any] = {key: value for key, value, _ in decimals}
    properties |= {"tiny": 1e-10, "before-1970": proton.timestamp(-1)}
    message = proton.Message(body="b", properties=properties)
    pcap = tmp_path / "values.pcap"
    write_pcap(pcap, [b"AMQP\x00\x01\x00\x00" + transfer_frame(message.encode())])
    (frame,) = [f for f in ours(pcap) if f.name == "transfer"]
    mine = frame.message["application-properties"]
    assert mine == {key: text for key, _, text in decimals} | {
        "tiny": 1e-10,
        "before-1970": "1969-12-31T23:59:59.999Z",
    }
    (pdu,) = [
        p for _, p in tshark_pdus(pcap) if p.find(".//field[@name='amqp.performative']") is not None
    ]
    theirs = dict(message_observations(pdu))[("application-properties",)]
    assert {k: theirs[k] for k, _, _ in decimals} == dict.fromkeys(
        (k for k, _, _ in decimals), "(not supported)"
    )
    assert theirs["tiny"] == "0.000000"
    assert theirs["before-1970"].endswith("00:00:00.-01000000")


def transfer_frame(payload: bytes) -> bytes:
    """A transfer frame (handle 0, delivery 0, tag "t") carrying `payload`, encoded by Proton."""
    data = proton.Data()
    data.put_described()
    data.enter()
    data.put_ulong(0x14)
    data.put_list()
    data.enter()
    data.put_uint(0)
    data.put_uint(0)
    data.put_binary(b"t")
    data.put_uint(0)
    data.exit()
    data.exit()
    performative = data.encode()
    size = 8 + len(performative) + len(payload)
    return size.to_bytes(4, "big") + b"\x02\x00\x00\x00" + performative + payload


def write_pcap(path: Path, payloads: list[bytes]) -> None:
    """A minimal Ethernet/IPv4/TCP capture: handshake, then `payloads` from client to 5672."""
    from scapy.all import IP, TCP, Ether, wrpcap  # type: ignore[attr-defined]

    client, server = ("10.0.0.1", 40000), ("10.0.0.2", 5672)
    seq, ack = 1000, 5000
    base = Ether() / IP(src=client[0], dst=server[0])
    back = Ether() / IP(src=server[0], dst=client[0])
    packets = [
        base / TCP(sport=client[1], dport=server[1], flags="S", seq=seq),
        back / TCP(sport=server[1], dport=client[1], flags="SA", seq=ack, ack=seq + 1),
        base / TCP(sport=client[1], dport=server[1], flags="A", seq=seq + 1, ack=ack + 1),
    ]
    seq += 1
    for payload in payloads:
        packets.append(
            base / TCP(sport=client[1], dport=server[1], flags="PA", seq=seq, ack=ack + 1) / payload
        )
        seq += len(payload)
    wrpcap(str(path), packets)
