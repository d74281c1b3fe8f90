"""The Azure SDK's `_pyamqp` DEBUG log, written by the library's own code.

`_pyamqp` logs a received frame as `"<- %r" % OpenFrame(*frame)`, `frame` being what its
`_decode.decode_frame` makes of the bytes. Here the bytes are the captured frames of real runs
(and frames Proton encodes from generated performatives), decoded and printed by azure-servicebus
itself: the expected fields are the codec's decode of the same bytes. Sent frames are the
namedtuples pyamqp builds (`performatives.py`, `endpoints.py`), printed by their own repr.
"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings
from proton import Data, Described, symbol, ulong

from amqpscope.capture.files import open_capture
from amqpscope.cli.inputs import FORMAT_NAMES
from amqpscope.codec.amqp10 import spec as spec10
from amqpscope.codec.amqp10.decoder import Decoder
from amqpscope.codec.amqp10.frames import TYPE_SASL, make_frame
from amqpscope.codec.frames import Frame
from amqpscope.dissect import Dissector
from amqpscope.logs.amqp10_encode import frame_bytes
from amqpscope.logs.detect import detect
from amqpscope.logs.formats import NAMES
from amqpscope.logs.reader import LogReader, records_from_log
from tests.test_logs_proton_property import performatives

pyamqp = pytest.importorskip(
    "azure.servicebus._pyamqp",
    reason="the Azure SDK's pyamqp comes with the dev extra (make install installs it)",
)
from azure.servicebus._pyamqp import performatives as P  # noqa: E402
from azure.servicebus._pyamqp._decode import (  # noqa: E402
    _PERFORMATIVE_FIELD_DEFAULTS,
    decode_frame,
)
from azure.servicebus._pyamqp.endpoints import Source, Target  # noqa: E402

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
CLASSES = {
    0x10: P.OpenFrame,
    0x11: P.BeginFrame,
    0x12: P.AttachFrame,
    0x13: P.FlowFrame,
    0x14: P.TransferFrame,
    0x15: P.DispositionFrame,
    0x16: P.DetachFrame,
    0x17: P.EndFrame,
    0x18: P.CloseFrame,
}
PREFIX = "2026-01-31 12:00:00,250 azure.servicebus._pyamqp._connection DEBUG "


def test_format_names_agree() -> None:
    assert sorted(FORMAT_NAMES) == sorted(NAMES)


def received_line(body: bytes) -> str:
    """What pyamqp logs on receiving the frame whose body is `body`."""
    code, fields = decode_frame(memoryview(body))
    return f"{PREFIX}<- {CLASSES[code](*fields)!r}\n"


def filled_in(code: int) -> dict[str, Any]:
    """The fields pyamqp's decode_frame fills in where performative `code` leaves them out,
    by their spec names, as amqpscope reads them (pyamqp's own values, from its table)."""
    names = [field.name for field in spec10.COMPOSITES[code].fields]
    values = _PERFORMATIVE_FIELD_DEFAULTS.get(code, ())
    return {name: value for name, value in zip(names, values, strict=False) if value is not None}


def codec_fields(body: bytes, sasl: bool = False) -> tuple[str, dict[str, Any]]:
    frame = make_frame(frame_bytes(0, TYPE_SASL if sasl else 0, body))
    Decoder(show_secrets=True).decode(frame)
    return frame.name, frame.fields


def captured(name: str) -> list[Frame]:
    with open_capture(str(CAPTURES / f"{name}.pcap")) as capture:
        return [f for f in Dissector().run(capture) if f.kind == "performative"]


@pytest.mark.parametrize("name", ["log-proton-broker", "log-proton-p2p", "log-rhea-broker"])
def test_received_frames_as_pyamqp_logs_them(name: str) -> None:
    """Real frames, printed by pyamqp: every field it shows reads as the capture has it."""
    wire = captured(name)
    lines = [received_line(f.data[f.data[4] * 4 :]) for f in wire]
    assert detect(lines) == "pyamqp"
    reader = LogReader("pyamqp.log", "pyamqp", show_secrets=True)
    records = [r for n, line in enumerate(lines, 1) for r in reader.feed(line, n)]
    assert reader.findings == [] and len(records) == len(wire)
    for record, frame in zip(records, wire, strict=True):
        assert record.name == frame.name and record.channel is None
        not_shown = {f.message.split(" ")[1].rstrip(":") for f in record.findings}
        assert {k for k in record.fields if k.split(".")[0] not in not_shown} == {
            k for k in frame.fields if k.split(".")[0] not in not_shown
        }, record.source
        for key, value in frame.fields.items():
            if key.split(".")[0] in not_shown:
                continue
            assert record.fields[key] == value, (record.source, key)
        if record.name == "transfer":  # the payload is `<memory at 0x...>`: no message
            assert record.message is None


SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(performatives())
def test_generated_performatives_round_trip(value: Any) -> None:
    """Proton encodes, pyamqp decodes and prints, amqpscope reads: the codec's fields, except
    where pyamqp's decode itself says less (bytes without their type in untyped places)."""
    code = int(value.descriptor)
    if code not in CLASSES:  # pyamqp logs no SASL frame at all
        return
    data = Data()
    data.put_object(value)
    body = bytes(data.encode())
    try:
        line = received_line(body)
    except Exception:  # pyamqp cannot decode it (its own limits): nothing it would log
        return
    reader = LogReader("gen.log", "pyamqp", show_secrets=True)
    (record,) = reader.feed(line, 1)
    name, fields = codec_fields(body)
    assert record.name == name
    # both ways: every field the codec reads is read from the line, and the line has no other
    # but those pyamqp fills in with its own defaults where the frame left them out
    # (a field the reader says the line does not show, with a finding, aside)
    not_shown = {f.message.split(" ")[1].rstrip(":") for f in record.findings}
    assert not set(fields) - set(record.fields) - not_shown, line
    defaults = filled_in(code)
    for key in set(record.fields) - set(fields):
        assert key in defaults and _typed(record.fields[key]) == _typed(defaults[key]), (line, key)
    for key, expected in fields.items():
        if key not in not_shown and not _untyped_map(expected):
            assert _typed(record.fields[key]) == _typed(expected), (line, key)


def test_a_uuid_in_an_error_info_is_read() -> None:
    """Found by the property above: a rejected state whose error's info holds a uuid, which
    pyamqp prints as `{b'': UUID('...')}`. No Python literal, so the reader dropped the info
    as "not shown" (and the error read as bare); the log does show it. Read, it is the codec's
    value, each time the line is read (the second time its shape is learned)."""
    info = {symbol(""): uuid.UUID("e3e70682-c209-4cac-629f-6fbed82c07cd")}
    error = Described(ulong(29), [None, None, info])
    value = Described(ulong(21), [None, None, None, None, Described(ulong(37), [error])])
    data = Data()
    data.put_object(value)
    body = bytes(data.encode())
    line = received_line(body)
    assert "UUID('e3e70682-c209-4cac-629f-6fbed82c07cd')" in line
    _name, fields = codec_fields(body)
    assert fields["state"]["error"]["info"] == {"": "e3e70682-c209-4cac-629f-6fbed82c07cd"}
    for _ in range(3):
        reader = LogReader("uuid.log", "pyamqp", show_secrets=True)
        (record,) = reader.feed(line, 1)
        assert record.fields == fields
        assert not [f for f in record.findings if f.code == "log.not-shown"]


def test_uuids_inside_lists_and_maps_are_read() -> None:
    """A uuid anywhere in an untyped value reads as one; what is no literal still is not."""
    uuid_text = "00000000-0000-0000-0000-000000000001"
    line = (
        f"{PREFIX}<- DispositionFrame(role=True, first=0, last=None, settled=False, state="
        f"{{'rejected': [[b'amqp:internal-error', None, {{b'k': [1, b'x', UUID('{uuid_text}')],"
        f" b'u': UUID('{uuid_text}')}}]]}}, batchable=False)\n"
    )
    (record,) = list(records_from_log([line], "u.log", fmt="pyamqp"))
    info = record.fields["state"]["error"]["info"]
    assert info == {"k": [1, "x", uuid_text], "u": uuid_text}
    opaque = line.replace(f"UUID('{uuid_text}')]", "Decimal('1.5')]")
    (record,) = list(records_from_log([opaque], "o.log", fmt="pyamqp"))
    assert "info" not in record.fields["state"]["error"]
    assert [f.code for f in record.findings if f.code == "log.not-shown"] == ["log.not-shown"]


def _untyped_map(value: Any) -> bool:
    return isinstance(value, dict) and "type" not in value


def _bare_described(value: Any) -> bool:
    """A described type with no fields (e.g. a `declared` outcome in a source's
    default-outcome), which pyamqp decodes as its empty list, descriptor lost."""
    return isinstance(value, dict) and set(value) == {"type"}


def _typed(value: Any) -> Any:
    """`value` without its maps of untyped values, which pyamqp prints as bare bytes, and
    without described types it prints as their bare lists."""
    if isinstance(value, dict):
        return {
            k: _typed(v) for k, v in value.items() if not _untyped_map(v) and not _bare_described(v)
        }
    return value


def test_sent_frames_as_pyamqp_builds_them(caplog: pytest.LogCaptureFixture) -> None:
    """Frames pyamqp sends are namedtuples of Python values, logged by their repr."""
    attach = P.AttachFrame(
        name="sender-link",
        handle=1,
        role=False,
        send_settle_mode=0,
        rcv_settle_mode=1,
        source=Source(address="sender-link-src", durable=None, expiry_policy=None),
        target=Target(address="/amq/queue/q"),
        unsettled=None,
        incomplete_unsettled=None,
        initial_delivery_count=0,
        max_message_size=1048576,
        offered_capabilities=None,
        desired_capabilities=[b"com.microsoft:session-filter"],
        properties={b"com.microsoft:timeout": 60000},
    )
    logger = logging.getLogger("azure.servicebus._pyamqp.link")
    with caplog.at_level(logging.DEBUG, logger=logger.name):
        logger.debug("-> %r", attach)
    lines = [f"{PREFIX}{m}\n" for m in caplog.messages]
    (record,) = list(records_from_log(lines, "sent.log", fmt="pyamqp"))
    assert record.direction == "c2s" and record.name == "attach"
    fields = record.fields
    assert fields["snd-settle-mode"] == "unsettled" and fields["rcv-settle-mode"] == "second"
    assert fields["source"]["address"] == "sender-link-src"
    assert fields["target"] == {
        "type": "target",
        "address": "/amq/queue/q",
        "durable": "none",
        "expiry-policy": "session-end",
        "timeout": 0,
        "dynamic": False,
    }
    assert fields["desired-capabilities"] == ["com.microsoft:session-filter"]
    assert fields["properties"] == {"com.microsoft:timeout": 60000}


def test_header_and_heartbeat() -> None:
    lines = [
        f"{PREFIX}-> Header(b'AMQP\\x00\\x01\\x00\\x00')\n",
        f"{PREFIX}<- Header(b'AMQP\\x00\\x01\\x00\\x00')\n",
        f"{PREFIX}-> EmptyFrame()\n",
    ]
    records = list(records_from_log(lines, "h.log", fmt="pyamqp"))
    assert [(r.name, r.direction) for r in records] == [
        ("protocol-header", "c2s"),
        ("protocol-header", "s2c"),
        ("heartbeat", "c2s"),
    ]
    assert records[0].fields["protocol"] == "AMQP 1.0 (amqp)"
    assert records[0].ts == pytest.approx(1769860800.25)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 200), st.integers(0, 20), st.text(max_size=5))
def test_mangled_lines_never_raise(at: int, cut: int, junk: str) -> None:
    wire = captured("log-proton-broker")
    line = received_line(wire[3].data[wire[3].data[4] * 4 :])
    reader = LogReader("m.log", "pyamqp")
    frames = reader.feed(line[:at] + junk + line[at + cut :], 1)
    frames += reader.flush()  # a line whose text ends unfinished waits for the next: none comes
    reader.finish()
    # a line's own findings (`log.no-time` is the log's: a prefix the damage left time-like)
    of_lines = [f for f in reader.findings if f.code.startswith("log.") and f.code != "log.no-time"]
    # a frame cut short is a truncated record beside its finding (issue 42), not a line's one
    whole = [f for f in frames if not (f.source or {}).get("truncated")]
    assert len(whole) + len(of_lines) + reader.skipped + reader.ends == 1
    assert len(frames) == len(whole) or of_lines
