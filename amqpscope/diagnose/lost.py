"""Bytes the capture lost, and what a diagnosis can no longer claim because of them.

A diagnosis that something never happened ("never acked", "never settled", "never confirmed")
rests on every frame of the direction that would have said it. When the capture lost bytes of
that direction after the deliveries in question (a `tcp.gap`, on the first frame after the hole:
tcpdump's ring overran, a snap length, a capture started late), the frames in them are unknown,
and the claim becomes "not seen". `caveat` says so in the diagnosis and names the gap's frame;
`lost_bytes` is the connection's own diagnosis: how much was lost, where, and what that means
for everything else said about it (Wireshark's "previous segment not captured", as an answer).
"""

from __future__ import annotations

from typing import Final

from amqpscope.diagnose.evidence import Evidence, Placed, Seen
from amqpscope.diagnose.model import Diagnosis, make
from amqpscope.findings import GAP_SNAPPED, gap_lost

#: gap frames named in a diagnosis
LISTED: Final = 8
#: who sends in each direction, in words
SENDER: Final = {"c2s": "the client", "s2c": "the server"}


def gaps(
    ev: Evidence, conn: int, direction: str | None = None
) -> list[tuple[Seen, int, str | None]]:
    """The frames that came right after bytes the capture lost (of either direction: the
    connection's next frame), with how many bytes (0 when the finding does not say) and which
    direction lost them, in frame order; of one direction when given."""
    out = []
    for placed in ev.found(conn, "tcp.gap"):
        missing, lost = gap_lost(placed.finding, placed.frame.direction)
        if direction is None or lost == direction:
            out.append((placed.frame, missing, lost))
    return out


def caveat(
    ev: Evidence, conn: int, direction: str, since: float, until: float | None = None
) -> tuple[str, list[int]]:
    """(a sentence, the gap frames) when `direction` lost bytes at or after time `since` (and
    by `until`, when given): a claim that it sent nothing meanwhile is then "not seen", not
    "never"."""
    later = [
        (seen, n)
        for seen, n, _lost in gaps(ev, conn, direction)
        if seen.ts >= since and (until is None or seen.ts <= until)
    ]
    if not later:
        return "", []
    total = sum(n for _seen, n in later)
    frames = [seen.number for seen, _n in later[:LISTED]]
    where = ", ".join(map(str, frames)) + (" ..." if len(later) > LISTED else "")
    amount = f"{total} bytes" if total else "bytes"
    return (
        f" But the capture lost {amount} that {SENDER.get(direction, direction)} sent after the"
        f" first of these (just before frame{'s' if len(frames) > 1 else ''} {where}): what"
        " they held is not known, and may have answered some of them.",
        frames,
    )


def lost_bytes(conn: int, ev: Evidence) -> list[Diagnosis]:
    """One diagnosis for a connection whose capture has holes: how many bytes each side lost,
    the frames after the holes, and what it means for the rest of what is said about it."""
    found = gaps(ev, conn)
    if not found:
        return []
    sides = []
    for direction in ("c2s", "s2c"):
        mine = [(seen, n) for seen, n, lost in found if lost == direction]
        if mine:
            total = sum(n for _seen, n in mine)
            holes = f"{len(mine)} hole{'s' if len(mine) > 1 else ''}"
            sides.append(f"{total} bytes {SENDER[direction]} sent ({holes})")
    first, last = found[0][0], found[-1][0]
    after = list(dict.fromkeys(seen.number for seen, _n, _lost in found))  # a frame may carry two
    frames = after[:LISTED]
    # where a peer's TCP ack showed bytes not captured, before the gap was declared
    acked = list(dict.fromkeys(p.frame.number for p in ev.found(conn, "tcp.ack-unseen")))
    snapped = sum(GAP_SNAPPED in placed.finding.message for placed in ev.found(conn, "tcp.gap"))
    why = (
        f"The capture's snap length cut {snapped} of this connection's packets short: each kept"
        " only its first bytes, and the rest of its payload is missing"
        if snapped
        else "Bytes of this connection are missing from the capture"
    )
    advice = (
        "Capture whole packets: no snap length (tcpdump -s 0, dumpcap without -s)"
        if snapped == len(found)
        else "Capture with a larger buffer (tcpdump -B), no snap length (-s 0), from the start"
        " of the connection, and on a less loaded host"
    )
    return [
        make(
            "capture.bytes-lost",
            f"The capture lost {' and '.join(sides)} on this connection",
            f"{why} (the frames after the holes:"
            f" {', '.join(map(str, frames))}{' ...' if len(after) > LISTED else ''}). amqpscope"
            " found the next frame boundary and went on, but the frames in the lost bytes are"
            " not known: acks, settlements, credit, confirms or a close among them are not"
            " seen, so counts of this connection may be short and a diagnosis that something"
            f" never happened may be wrong. {advice}."
            + (
                f" The peer's TCP acks showed the loss first (frame{'s' if len(acked) > 1 else ''}"
                f" {', '.join(map(str, acked[:LISTED]))}), before anything after it was seen."
                if acked
                else ""
            ),
            conn=conn,
            start=first.ts,
            duration=last.ts - first.ts,
            evidence=frames + acked[:LISTED],
        )
    ]


def lost_line(ev: Evidence, conn: int, number: int) -> tuple[str, list[int]]:
    """(a sentence, its frame) when a frame-trace log had a line that did not parse in `conn`
    just before frame `number` (`log.lost-line`): the frame missing there can make this one
    look out of place, so a rule it seems to break may be the log's damage, not a peer's bug.

    Just before: from the first frame after the damage up to the first frame after it in the
    other direction (the reader marks each direction's first frame; both sides have spoken
    since, from what they knew). With no frame of the other direction after it, to the end.
    A rule broken later is the peers' again, at its full severity."""
    windows: dict[str, list[Placed]] = {}  # the damaged line ("line 11") -> its marks
    for placed in ev.found(conn, "log.lost-line"):
        windows.setdefault(placed.finding.message.split(",", 1)[0], []).append(placed)
    for line, marks in reversed(windows.items()):
        first, last = marks[0].frame.number, marks[-1].frame.number
        if first > number:
            continue
        if len(marks) > 1 and number > last:
            break  # the latest window before this frame closed before it
        return (
            f" But {line} of the log, just before frame {first}, looked like a frame"
            " and did not parse: a frame missing from the log can make this one look out of"
            " place, so check that line before blaming a peer.",
            [first],
        )
    return "", []
