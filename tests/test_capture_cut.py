"""`capture.cut.write_packets` (the TUI's `w` until it uses read -w's writer): chosen packets
copied as the file holds them, read back by scapy (an oracle no one here wrote); nothing
written, and one clear error, when the cut cannot be made."""

from __future__ import annotations

from pathlib import Path

import pytest
from scapy.utils import RawPcapReader

from amqpscope.capture.cut import CutError, write_packets

CAPTURES = Path(__file__).resolve().parent.parent / "captures"


def test_the_chosen_packets_are_copied_byte_for_byte(tmp_path: Path) -> None:
    source = CAPTURES / "091-publish-consume.pcap"
    out = tmp_path / "cut.pcap"
    chosen = [1, 4, 5, 30, 91]
    assert write_packets(source, chosen, str(out)) == len(chosen)
    original = list(RawPcapReader(str(source)))
    theirs = list(RawPcapReader(str(out)))
    assert [data for data, _ in theirs] == [original[n - 1][0] for n in chosen]
    assert [(m.sec, m.usec, m.wirelen) for _, m in theirs] == [
        (original[n - 1][1].sec, original[n - 1][1].usec, original[n - 1][1].wirelen)
        for n in chosen
    ]


def test_a_cut_that_cannot_be_made_writes_nothing(tmp_path: Path) -> None:
    source = CAPTURES / "091-publish-consume.pcap"
    out = tmp_path / "cut.pcap"
    with pytest.raises(CutError, match="no packets"):
        write_packets(source, [], str(out))
    with pytest.raises(CutError, match="1 of the packets are not in"):
        write_packets(source, [1, 10_000], str(out))
    assert not out.exists() and not list(tmp_path.iterdir())
