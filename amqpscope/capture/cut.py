"""Write chosen packets of a capture file to a new pcap: a cut of the capture (the TUI's `w`).

The packets are copied as the file holds them (link layer, capture length, original length),
by their 1-based numbers, in file order. Microsecond pcap, the format every reader takes; a
capture whose chosen packets mix link types cannot be one pcap and is refused.
"""

from __future__ import annotations

import os
from collections.abc import Collection

from amqpscope.capture.files import open_capture
from amqpscope.capture.live import pcap_header, pcap_record


class CutError(Exception):
    """The cut cannot be written (mixed link types, nothing chosen, packets not found)."""


def write_packets(source: str | os.PathLike[str], numbers: Collection[int], out: str) -> int:
    """Copy the packets numbered `numbers` from `source` to the pcap `out`; returns how many."""
    wanted = set(numbers)
    if not wanted:
        raise CutError("no packets to write")
    written = 0
    linktype: int | None = None
    tmp = f"{out}.part"
    try:
        with open_capture(source) as capture, open(tmp, "wb") as f:
            last = max(wanted)
            for packet in capture:
                if packet.number > last:
                    break
                if packet.number not in wanted:
                    continue
                if linktype is None:
                    linktype = packet.linktype
                    f.write(pcap_header(linktype, max(capture.snaplen, 65535)))
                elif packet.linktype != linktype:
                    raise CutError(
                        f"packet {packet.number} has link type {packet.linktype}, "
                        f"the first {linktype}: one pcap holds one"
                    )
                f.write(pcap_record(round(packet.ts * 1_000_000), packet.data, packet.wirelen))
                written += 1
        if written != len(wanted):
            raise CutError(f"{len(wanted) - written} of the packets are not in {source}")
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return written
