"""Values of a type their field's definition does not allow (issue 28), each in a capture built
here from a recorded conversation with one field's value swapped for another type's: a map for a
delivery-tag, a map for a detach's handle, a list for a flow's handle, arrays of lists for
capabilities, a list for a PLAIN response. Each once ended the command in "internal error" (or a
decoder's `amqp.decode-error`); now it is an `amqp10.bad-field-type` finding naming the field,
the type found and the type expected, the frame shows the wire's value, and the connection is
tracked with the rest of its fields: `read` prints every frame, `summary` finishes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from amqpscope.cli import main
from amqpscope.codec.amqp10 import spec
from amqpscope.codec.amqp10.composites import FIELD_TYPES, well_typed
from tests.scripts import load_tool

ROOT = Path(__file__).resolve().parent.parent


fuzz = load_tool("fuzz")
SOURCE = ROOT / "captures" / "10-send-receive.pcap"

MAP = b"\xc1\x08\x02\xa3\x03key\x52\x01"  # {key: 1}
LIST = b"\xc0\x03\x01\x52\x05"  # [5]
ARRAY_OF_LISTS = b"\xe0\x06\x02\xc0\x01\x00\x01\x00"  # two empty list8s


def index_of(composite: str, field: str) -> int:
    (c,) = [c for c in spec.COMPOSITES.values() if c.name == composite]
    return [f.name for f in c.fields].index(field)


def performative(data: bytes) -> str | None:
    if data[:4] == b"AMQP" or len(data) <= 8:
        return None
    code = data[data[4] * 4 + 2]  # a smallulong descriptor, as every recorded peer sends
    found = spec.COMPOSITES.get(code)
    return found.name if found else None


def build(tmp_path: Path, name: str, field: str, value: bytes, which: int = 0) -> Path:
    """`SOURCE`'s connection, written again, with `field` of its `which`-th `name` frame set to
    the encoded `value`."""
    (conv,) = fuzz.seed_of(SOURCE).conversations
    frames = list(conv.frames)
    spots = [i for i, (_, data) in enumerate(frames) if performative(data) == name]
    at = spots[which]
    c2s, data = frames[at]
    frames[at] = (c2s, fuzz.set_field10(data, index_of(name, field), value))
    path = tmp_path / f"{name}-{field}.pcap"
    path.write_bytes(fuzz.write_pcap(frames))
    return path


def run(*args: str) -> Any:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert "internal error" not in result.stderr, result.stderr
    assert result.exit_code == 0, result.stderr
    return result


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in run("read", "--json", str(path)).stdout.splitlines()]


def frames_of_source() -> int:
    (conv,) = fuzz.seed_of(SOURCE).conversations
    return len(conv.frames)


def test_a_map_for_a_delivery_tag(tmp_path: Path) -> None:
    path = build(tmp_path, "transfer", "delivery-tag", MAP)
    out = records(path)
    assert len(out) == frames_of_source()  # every frame, before and after the bad one
    (bad,) = [r for r in out if any(f["code"] == "amqp10.bad-field-type" for f in r["findings"])]
    assert bad["name"] == "transfer" and bad["fields"]["delivery-tag"] == {"key": 1}
    (found,) = [f for f in bad["findings"] if f["code"] == "amqp10.bad-field-type"]
    assert found["message"].startswith(
        "transfer.delivery-tag is map (map8, 0xc1), not delivery-tag (binary)"
    )
    summary = json.loads(run("summary", "--json", str(path)).stdout)
    (conn,) = summary["connections"]
    links = [link for s in conn["sessions"] for link in s["links"]]
    assert sum(link["deliveries"] for link in links) >= 1  # the delivery is still counted
    run("summary", str(path))
    run("read", str(path))
    run("export", "--ndjson", str(path))


def test_a_map_for_a_detach_handle(tmp_path: Path) -> None:
    path = build(tmp_path, "detach", "handle", MAP)
    out = records(path)
    assert len(out) == frames_of_source()
    codes = [f["code"] for r in out for f in r["findings"]]
    assert "amqp.decode-error" not in codes and "amqp10.bad-field-type" in codes
    run("summary", str(path))


@pytest.mark.parametrize(
    ("name", "field", "value"),
    [
        ("flow", "handle", LIST),
        ("transfer", "handle", MAP),
        ("transfer", "delivery-id", LIST),
        ("attach", "name", MAP),
        ("attach", "source", MAP),
        ("open", "offered-capabilities", ARRAY_OF_LISTS),
        ("open", "container-id", LIST),
        ("begin", "remote-channel", MAP),
        ("disposition", "first", MAP),
        ("disposition", "state", b"\x00\x53\x28\x45"),  # a source where an outcome belongs
    ],
)
def test_ill_typed_fields_are_findings_and_the_rest_is_tracked(
    tmp_path: Path, name: str, field: str, value: bytes
) -> None:
    path = build(tmp_path, name, field, value)
    out = records(path)
    assert len(out) == frames_of_source()
    messages = [
        f["message"] for r in out for f in r["findings"] if f["code"] == "amqp10.bad-field-type"
    ]
    assert any(m.startswith(f"{name}.{field} is ") for m in messages), messages
    run("summary", str(path))
    run("read", str(path))


def test_a_plain_response_of_another_type_is_still_redacted(tmp_path: Path) -> None:
    """A list where sasl-init's binary belongs may hold the credentials all the same."""
    secret = b"\xc0\x0c\x01\xa0\x09\x00user\x00pw!"
    path = build(tmp_path, "sasl-init", "initial-response", secret)
    path = build_plain(path)
    out = records(path)
    (init,) = [r for r in out if r["name"] == "sasl-init"]
    assert init["fields"]["initial-response"] == "<redacted>"
    shown = [
        json.loads(line)
        for line in run("read", "--json", "--show-secrets", str(path)).stdout.splitlines()
    ]
    (init,) = [r for r in shown if r["name"] == "sasl-init"]
    assert init["fields"]["initial-response"] == ["0075736572007077 21".replace(" ", "")]


def build_plain(path: Path) -> Path:
    """The same capture with sasl-init's mechanism PLAIN (the recording is ANONYMOUS)."""
    seed = fuzz.seed_of(path)
    (conv,) = seed.conversations
    frames = list(conv.frames)
    (at,) = [i for i, (_, d) in enumerate(frames) if performative(d) == "sasl-init"]
    c2s, data = frames[at]
    frames[at] = (c2s, fuzz.set_field10(data, 0, b"\xa3\x05PLAIN"))
    path.write_bytes(fuzz.write_pcap(frames))
    return path


def test_field_types_come_from_the_spec() -> None:
    """Every field of every composite has an expectation, but `*` fields of archetypes the
    tables do not define; `well_typed` keeps exactly the values that meet theirs."""
    for c in spec.COMPOSITES.values():
        for f in c.fields:
            if f.type != "*" or f.requires not in (None, "global-tx-id"):
                assert f.name in FIELD_TYPES[c.name], (c.name, f.name)
    transfer = FIELD_TYPES["transfer"]
    assert transfer["delivery-tag"].types == (str,) and transfer["settled"].types == (bool,)
    assert FIELD_TYPES["attach"]["role"].types == (str,)  # a choice: shown by name
    assert FIELD_TYPES["open"]["offered-capabilities"].multiple
    fields = {
        "handle": 1,
        "delivery-tag": {"key": 1},
        "delivery-id": True,
        "settled": 1,
        "state": {"type": "source"},
    }
    assert well_typed("transfer", fields) == {"handle": 1}
    ok = {"handle": 1, "delivery-tag": "ab", "state": {"type": "accepted"}, "more": False}
    assert well_typed("transfer", ok) == ok
    caps = {"container-id": "c", "offered-capabilities": [[], []], "desired-capabilities": ["x"]}
    assert well_typed("open", caps) == {"container-id": "c", "desired-capabilities": ["x"]}
    nested = {"name": "l", "handle": 0, "source": {"type": "source", "address": {"k": 1}}}
    assert well_typed("attach", nested)["source"] == {"type": "source"}


# --- 0-9-1: peer properties and logins -------------------------------------------------------
SOURCE_091 = ROOT / "captures" / "091-publish-consume.pcap"


def method_name(data: bytes) -> str | None:
    if data[:4] == b"AMQP" or data[0] != 1:
        return None
    found = fuzz.spec091.METHODS.get((int.from_bytes(data[7:9]), int.from_bytes(data[9:11])))
    return found.name if found else None


def build_091(tmp_path: Path, name: str, change: Any) -> Path:
    (conv,) = fuzz.seed_of(SOURCE_091).conversations
    frames = list(conv.frames)
    (at,) = [i for i, (_, d) in enumerate(frames) if method_name(d) == name]
    frames[at] = (frames[at][0], change(frames[at][1]))
    path = tmp_path / f"{name}.pcap"
    path.write_bytes(fuzz.write_pcap(frames))
    return path


def test_peer_properties_of_other_types(tmp_path: Path) -> None:
    table = b"F\x00\x00\x00\x07\x01kS\x00\x00\x00\x00"
    path = build_091(
        tmp_path,
        "connection.start",
        lambda d: fuzz.table_with(
            d, "server-properties", {b"product": table, b"capabilities": b"I\x00\x00\x00\x01"}
        ),
    )
    out = records(path)
    (start,) = [r for r in out if r["name"] == "connection.start"]
    assert start["fields"]["server-properties"]["product"] == {"k": ""}  # shown as sent
    messages = [f["message"] for f in start["findings"] if f["code"] == "amqp091.bad-field-type"]
    assert messages == [
        "connection.start.server-properties.product is table, not longstr",
        "connection.start.server-properties.capabilities is integer, not table",
    ]
    (conn,) = json.loads(run("summary", "--json", str(path)).stdout)["connections"]
    assert "product" not in conn["server-product"] and conn["server-product"]["platform"]
    assert "{'k'" not in run("summary", str(path)).stdout


def test_a_login_that_is_not_text(tmp_path: Path) -> None:
    response = b"\x00\xff\xfeuser\x00guest"
    path = build_091(
        tmp_path,
        "connection.start-ok",
        lambda d: fuzz.set_argument091(d, "response", len(response).to_bytes(4) + response),
    )
    out = records(path)
    (start_ok,) = [r for r in out if r["name"] == "connection.start-ok"]
    assert start_ok["fields"]["response"]["password"] == "<redacted>"
    (found,) = [f for f in start_ok["findings"] if f["code"] == "amqp091.bad-field-type"]
    assert "user is byte array or non-UTF-8 longstr, not longstr" in found["message"]
    (conn,) = json.loads(run("summary", "--json", str(path)).stdout)["connections"]
    assert conn["user"] is None


# --- the filters and the Spark delivery rows take the typed fields too -----------------------
@pytest.mark.parametrize(
    ("name", "field", "value"),
    [("transfer", "handle", MAP), ("disposition", "first", MAP), ("disposition", "last", LIST)],
)
def test_the_link_filter_and_the_delivery_rows(
    tmp_path: Path, name: str, field: str, value: bytes
) -> None:
    from amqpscope.capture.files import open_capture
    from amqpscope.dissect import Dissector
    from amqpscope.spark.deliveries import DeliveryLog

    path = build(tmp_path, name, field, value)
    (attach,) = [r for r in records(path) if r["name"] == "attach" and r["dir"] == "c2s"][:1]
    link = attach["fields"]["name"]
    shown = run("read", "--json", "--link", link, str(path)).stdout.splitlines()
    assert shown and len(shown) < frames_of_source()
    log = DeliveryLog()
    with open_capture(path) as capture:
        for frame in Dissector().run(capture):
            log.feed(frame)
    rows = log.take() + log.finish()
    assert rows and all(type(r.get("delivery_id")) is int for r in rows)


def test_the_queue_filter_over_names_that_are_not_text(tmp_path: Path) -> None:
    """A consumer tag or queue name that is no UTF-8 is shown as {"hex": ...}, which is no key."""
    path = build_091(
        tmp_path,
        "basic.consume",
        lambda d: fuzz.set_argument091(d, "consumer-tag", b"\x02\xff\xfe"),
    )
    path2 = tmp_path / "both.pcap"
    (conv,) = fuzz.seed_of(path).conversations
    frames = [
        (c2s, fuzz.set_argument091(d, "consumer-tag", b"\x02\xff\xfe"))
        if method_name(d) in ("basic.consume-ok", "basic.deliver")
        else (c2s, d)
        for c2s, d in conv.frames
    ]
    path2.write_bytes(fuzz.write_pcap(frames))
    (consume,) = [r for r in records(path2) if r["name"] == "basic.consume"]
    queue = consume["fields"]["queue"]
    shown = run("read", "--json", "--queue", queue, str(path2)).stdout.splitlines()
    names = {json.loads(line)["name"] for line in shown}
    assert {"basic.consume", "basic.consume-ok", "basic.deliver"} <= names
    from amqpscope.capture.files import open_capture
    from amqpscope.dissect import Dissector
    from amqpscope.spark.deliveries import DeliveryLog

    log = DeliveryLog()
    with open_capture(path2) as capture:
        for frame in Dissector().run(capture):
            log.feed(frame)
    delivered = [r for r in log.take() + log.finish() if r["kind"] == "deliver"]
    assert delivered and all(r["queue"] == queue for r in delivered)


def test_content_headers_whose_flags_promise_more_than_is_there(tmp_path: Path) -> None:
    """Every property flag set, the properties cut after the first: a finding on each header,
    and the messages are still counted, the frames after them still read."""
    (conv,) = fuzz.seed_of(SOURCE_091).conversations
    frames = []
    for c2s, data in conv.frames:
        if data[:4] != b"AMQP" and data[0] == 2:  # a content header: flags, then content-type
            head = bytearray(data[7:-1])
            head[12:14] = b"\xff\xfc"
            end = 14 + 1 + head[14] if len(head) > 14 else 14
            data = fuzz.frame091(2, int.from_bytes(data[1:3]), bytes(head[:end]))
        frames.append((c2s, data))
    path = tmp_path / "flags.pcap"
    path.write_bytes(fuzz.write_pcap(frames))
    out = records(path)
    assert len(out) == len(conv.frames)
    headers = [r for r in out if r["kind"] == "content-header"]
    assert headers and all(r["findings"] for r in headers)
    assert all(r["fields"]["properties"].get("content-type") for r in headers)
    (conn,) = json.loads(run("summary", "--json", str(path)).stdout)["connections"]
    (channel,) = [c for c in conn["channels"] if c.get("publishes")]
    assert channel["publishes"] == 10 and channel["deliveries"] == 10


def test_a_frame_with_other_fields_keeps_everything_else() -> None:
    """The tracker's well-typed copy of a frame: every attribute but `fields` the same, those
    `Frame.__init__` does not take included (a new one made `dataclasses.replace` raise)."""
    import dataclasses

    from amqpscope.codec.frames import Frame

    frame = Frame("1.0", "performative", "transfer", 0, b"\\x00" * 8, fields={"handle": {}})
    for n, field in enumerate(dataclasses.fields(Frame)):
        if field.name not in ("fields", "data"):
            setattr(frame, field.name, getattr(frame, field.name) or n + 1)
    copy = frame.with_fields({})
    assert copy.fields == {} and frame.fields == {"handle": {}}
    for field in dataclasses.fields(Frame):
        if field.name != "fields":
            assert getattr(copy, field.name) == getattr(frame, field.name), field.name
