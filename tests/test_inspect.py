"""`read -V` (the detail tree) and `read -x` (the bytes): what they print, on a terminal and
piped, in JSON against the frame schema, with hostile strings and secrets; snapshots at 80 and
200 columns (AMQPSCOPE_UPDATE_SNAPSHOTS=1 rewrites them after a deliberate change)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from amqpscope.capture.files import open_capture
from amqpscope.cli import main
from amqpscope.codec.amqp091.tree import amqp_tree as tree091
from amqpscope.codec.amqp10.tree import DeliveryStarts
from amqpscope.codec.amqp10.tree import amqp_tree as tree10
from amqpscope.codec.tree import frame_tree
from amqpscope.dissect import Dissector
from amqpscope.render.hexdump import hexdump
from tests.snapshot import matches as snapshot_matches
from tests.test_terminal_safety import TRUTH, escaped, raw_controls

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
SCHEMA = json.loads(
    (Path(__file__).resolve().parent.parent / "amqpscope/schema/frame.schema.json").read_text()
)
DUMP_LINE = re.compile(
    r"^    ([0-9a-f]{4,})  ((?:[0-9a-f*]{2} ?){1,8}(?: (?:[0-9a-f*]{2} ?){0,8})?)"
)


def run(*args: str) -> str:
    result = CliRunner().invoke(main, ["read", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def frames(name: str, **options: bool) -> list:
    with open_capture(str(CAPTURES / name)) as capture:
        return list(Dissector(**options).run(capture))


def dumped(text: str) -> list[bytes]:
    """The bytes of each -x dump in `text` (one per frame, split where the offset restarts)."""
    out: list[bytearray] = []
    for line in text.splitlines():
        match = DUMP_LINE.match(line)
        if match is None:
            continue
        if int(match.group(1), 16) == 0:
            out.append(bytearray())
        out[-1] += bytes.fromhex(match.group(2).replace("**", "00"))
    return [bytes(b) for b in out]


@pytest.mark.parametrize("width", [80, 200])
@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("10-send-receive.pcap", ["-c", "14"]),
        ("091-publish-consume.pcap", ["-Y", 'name matches "start-ok|content-header|deliver"']),
        ("091-hostile-names.pcap", ["-Y", 'name == "queue.declare"']),
    ],
)
def test_snapshot(name: str, args: list[str], width: int) -> None:
    text = run(str(CAPTURES / name), "-V", "-x", "--width", str(width), "--color", "never", *args)
    assert all(len(line) <= width for line in text.splitlines())
    assert not raw_controls(text)
    snapshot = SNAPSHOTS / f"inspect-{name.split('.')[0]}-{width}.txt"
    snapshot_matches(text, snapshot)


def test_piped_values_are_never_cut_and_hostile_names_stay_escaped() -> None:
    text = run(str(CAPTURES / "091-hostile-names.pcap"), "-V", "-x")
    assert not raw_controls(text)
    assert f'queue: "{escaped(TRUTH["queue"])}"' in text  # whole, escaped
    tree = [line for line in text.splitlines() if re.search(r"  \[[^\]]* @\d+\+\d+\]$", line)]
    assert len(tree) > 50 and not [line for line in tree if "…" in line]


def test_hexdump_is_the_frames_bytes_and_hides_a_password() -> None:
    path = str(CAPTURES / "091-publish-consume.pcap")
    ours = [f for f in frames("091-publish-consume.pcap") if f.kind != "transport"]
    dumps = dumped(run(path, "-x"))
    assert len(dumps) == len(ours)
    start_ok = next(i for i, f in enumerate(ours) if f.name == "connection.start-ok")
    for index, (frame, dump) in enumerate(zip(ours, dumps, strict=True)):
        if index != start_ok:
            assert dump == frame.data
    # the PLAIN response (\0guest\0guest, with its length) is blanked, the rest is there
    secret = ours[start_ok].data.index(b"\x00guest\x00guest") - 4
    hidden = dumps[start_ok]
    assert hidden[secret : secret + 16] == bytes(16)
    assert hidden[:secret] == ours[start_ok].data[:secret]
    assert b"guest" not in hidden
    shown = dumped(run(path, "-x", "--show-secrets"))
    assert shown[start_ok] == ours[start_ok].data


def test_json_tree_matches_the_schema_and_redacts_secrets() -> None:
    path = str(CAPTURES / "10-sasl-plain.pcap")
    records = [json.loads(line) for line in run(path, "--json", "-V").splitlines()]
    assert records and all("tree" in r for r in records)
    for record in records:
        jsonschema.validate(record, SCHEMA)
    init = next(r for r in records if r["name"] == "sasl-init")
    values = json.dumps(init["tree"])
    assert "<redacted>" in values and "guest" not in values.replace("mechanism", "")
    shown = [json.loads(line) for line in run(path, "--json", "-V", "--show-secrets").splitlines()]
    assert "<redacted>" not in json.dumps(next(r for r in shown if r["name"] == "sasl-init"))
    # without -V the records are as before: no tree
    assert all("tree" not in json.loads(line) for line in run(path, "--json").splitlines())


def test_tree_leaves_equal_the_frame_records_fields() -> None:
    """The tree walks the bytes on its own; its argument and performative values are the fast
    decoder's, field by field, on every capture of both versions. Both ways: every field the
    tree shows a value of is in the record, and the record has no other field but the defaults
    the spec gives a field left out and what it reads out of others (DERIVED)."""
    compared = 0
    for path in sorted(CAPTURES.glob("*.pcap")):
        starts = DeliveryStarts()
        for frame in frames(path.name, show_secrets=True):
            root = frame_tree(frame, continues=starts.continues(frame))[-1]
            if frame.kind == "method" and frame.name in _methods():
                args = next(c for c in root.children if c.name == "arguments")
                shown = {node.name for node in args.children}
                assert shown <= set(frame.fields), (path.name, frame.number)
                assert set(frame.fields) - shown <= DERIVED, (path.name, frame.number)
                for node in args.children:
                    if node.type not in ("table",) and node.name in frame.fields:
                        if node.name in ("response", "reply-code"):
                            continue  # the record adds the user; reply-code carries its name
                        assert frame.fields[node.name] == node.value, (path.name, node.name)
                        compared += 1
            elif frame.kind in ("performative", "sasl") and frame.version == "1.0":
                performative = next(c for c in root.children if c.name == "performative")
                nodes = [n for n in performative.children[1:] if n.name not in ("size", "count")]
                shown = {n.name for n in nodes if n.value is not None or n.children}
                assert shown <= set(frame.fields), (path.name, frame.number)
                defaults = spec_defaults(frame.name)
                for name in set(frame.fields) - {n.name for n in nodes}:
                    assert frame.fields[name] == defaults.get(name, ...), (path.name, name)
                for node in performative.children[1:]:
                    mine = frame.fields.get(node.name)
                    if node.secret:
                        continue  # the record reads PLAIN's user and password out of it
                    if node.value is not None and not node.children and mine is not None:
                        if isinstance(mine, list) and not isinstance(node.value, list):
                            continue  # a single value the record makes a list of
                        assert mine == node.value, (path.name, frame.number, node.name)
                        compared += 1
    assert compared > 2000


#: 0-9-1 fields a record reads out of others: the user out of a PLAIN response, a reply code's
#: name, the method a class-id and method-id name
DERIVED = {"user", "reply-name", "method"}


def spec_defaults(name: str) -> dict[str, object]:
    """The defaults the 1.0 spec gives the fields of composite `name`, as values."""
    from amqpscope.codec.amqp10 import spec

    (composite,) = [c for c in spec.COMPOSITES.values() if c.name == name]
    out: dict[str, object] = {}
    for field in composite.fields:
        if field.default is not None:
            text = field.default
            if text in ("true", "false"):
                out[field.name] = text == "true"
            else:
                out[field.name] = int(text) if text.isdigit() else text
    return out


def _methods() -> set[str]:
    from amqpscope.codec.amqp091 import spec

    return {m.name for m in spec.METHODS.values()}


@pytest.mark.parametrize("name", ["10-outcomes.pcap", "091-rpc.pcap", "091-channels.pcap"])
def test_damaged_frames_never_raise_and_stay_inside_the_frame(name: str) -> None:
    """Truncated and bit-flipped frames: the walk stops with a node, never an exception, and
    no node claims bytes outside the frame."""
    rng = random.Random(23)
    walked = 0
    for frame in frames(name):
        if not frame.data or frame.kind == "protocol-header":
            continue
        tree = tree10 if frame.version == "1.0" else tree091
        for _ in range(20):
            data = bytearray(frame.data)
            if rng.random() < 0.5:
                del data[rng.randrange(1, len(data)) :]
            for _ in range(rng.randrange(1, 4)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            root = tree(bytes(data), frame.kind, frame.version)
            for node in root.walk():
                assert node.offset >= 0 and node.offset + node.length <= len(data), node
            walked += 1
    assert walked > 500


def test_hexdump_layout() -> None:
    lines = hexdump(bytes(range(0x3E, 0x3E + 20)), hide=[(2, 3)])
    assert lines == [
        "    0000  3e 3f ** ** ** 43 44 45  46 47 48 49 4a 4b 4c 4d  >?***CDEFGHIJKLM",
        "    0010  4e 4f 50 51                                       NOPQ",
    ]


def test_a_frame_made_again_with_replace_keeps_every_attribute() -> None:
    """The 1.0 tracker remakes a damaged frame with `dataclasses.replace` (its well-typed
    fields): every attribute the frame record has must be one `Frame()` takes, or that raised
    TypeError inside `read -x` / `-w` (which keep `carriers`)."""
    import dataclasses

    from amqpscope.codec.frames import Frame

    frame = Frame(
        "1.0",
        "performative",
        "transfer",
        0,
        b"\x00",
        fields={"delivery-tag": {"key": 1}},
        source={"file": "x.log", "line": 3},
        carriers=[(4, 0, 1, 0)],
    )
    again = dataclasses.replace(frame, fields={})
    for field in dataclasses.fields(Frame):
        if field.name != "fields":
            assert getattr(again, field.name) == getattr(frame, field.name), field.name


@pytest.mark.parametrize(
    "name", ["10-send-receive.pcap", "10-large-message.pcap", "091-publish-consume.pcap"]
)
def test_redact_bodies_keeps_every_body_out_of_the_tree_and_the_bytes(name: str) -> None:
    """--redact-bodies with -V and -x: what the body held shows in neither (the tree says
    `<redacted, N bytes>` where it was, the dump blanks its bytes), in text or JSON."""
    path = str(CAPTURES / name)
    bodies = set()
    for frame in Dissector().run(open_capture(path)):
        message = frame.message or {}
        body = message.get("body") or {}  # 0-9-1: {"text"}; 1.0: {"type", "size", "value"}
        value = body.get("text", body.get("value"))
        if isinstance(value, str) and len(value) >= 6:
            bodies.add(value[:24])
    assert bodies, "the capture carries message bodies to look for"
    shown = run(path, "-V", "-x", "--redact-bodies")
    tree = run(path, "--json", "-V", "--redact-bodies")
    assert "<redacted, " in shown and "<redacted, " in tree and "**" in shown
    for text in bodies:
        assert text not in shown and text not in tree, text
    plain = run(path, "-V", "-x")  # the same look without the option shows them
    assert any(text in plain for text in bodies)


@pytest.mark.parametrize("option", ["-V", "-x"])
def test_piped_each_frame_line_comes_before_its_detail(option: str) -> None:
    """Piped, the timeline holds its lines in a buffer and the compiled every-frame loop skips
    the detail: each frame's line must still come first, then its tree or bytes, for every
    frame."""
    out = run(str(CAPTURES / "10-send-receive.pcap"), option).splitlines()
    lines = [i for i, text in enumerate(out) if re.match(r"^ +\d+ +\d+\.\d{6} c\d", text)]
    records = read_records("10-send-receive.pcap")
    assert len(lines) == len(records)
    details = [i for i, text in enumerate(out) if text.startswith("    ") and i not in lines]
    for at, after, record in zip(lines, [*lines[1:], len(out)], records, strict=True):
        if record.get("size"):  # the TCP end's record has no bytes to dump
            assert any(at < i < after for i in details), out[at]


def read_records(name: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in run(str(CAPTURES / name), "--json").splitlines()]
