"""A direction that begins without its protocol header (the other side sent one, or neither
did on an AMQP port) is read by frame shape, as a capture that starts mid-connection is, and
says so (`amqp.missing-header`): nothing it holds vanishes. The captures are recorded ones with
a header taken out as if never sent (tests/crafted.py: later sequence numbers shifted, so TCP
sees no gap)."""

from __future__ import annotations

from pathlib import Path

import pytest

from amqpscope.capture.files import open_capture
from amqpscope.dissect import Dissector
from tests.crafted import CAPTURES, without


def frames(path: Path) -> list:
    with open_capture(str(path)) as capture:
        return [f for f in Dissector().run(capture) if f.kind != "transport"]


@pytest.mark.parametrize(
    ("name", "which"),
    [
        ("091-publish-consume.pcap", 0),  # the client's header; a 0-9-1 server sends none
        ("10-send-receive.pcap", 0),  # the client's SASL header
        ("10-send-receive.pcap", 1),  # the server's SASL header
        ("10-sasl-plain.pcap", 1),
    ],
)
def test_frames_after_a_missing_header_are_all_read(name: str, which: int, tmp_path: Path) -> None:
    source = frames(CAPTURES / name)
    header = [f for f in source if f.kind == "protocol-header"][which]
    cut = frames(without(CAPTURES / name, tmp_path / "cut.pcap", header.packet))
    # every frame but the header, with the same bytes, in each direction's order (hunting by
    # shape may hold a direction's first frames until enough of them check out)
    for direction in ("c2s", "s2c"):
        mine = [f.data for f in cut if f.direction == direction]
        assert mine == [f.data for f in source if f is not header and f.direction == direction]
    noted = [f for f in cut if any(x.code == "amqp.missing-header" for x in f.findings)]
    assert len(noted) == 1
    first = next(f for f in cut if f.direction == header.direction)
    assert noted[0] is first
    message = next(x.message for x in first.findings if x.code == "amqp.missing-header")
    who = "client" if header.direction == "c2s" else "server"
    assert f"the {who} ({header.direction}) began without its protocol header" in message


def test_a_0_9_1_server_answering_a_header_is_not_flagged() -> None:
    for frame in frames(CAPTURES / "091-publish-consume.pcap"):
        assert not any(x.code == "amqp.missing-header" for x in frame.findings)
