"""Mermaid `sequenceDiagram`s to paste into a GitHub issue or a Markdown doc (GitHub renders a
```mermaid block): a followed message's journey (`follow --mermaid`) or each connection's
frames (`export --mermaid`).

Every text comes from the wire (names, routing keys, bodies), so it is made safe for Mermaid's
sequence grammar, where `#` starts a comment, `;` ends a statement and `<br>` breaks a line. Its
entity codes (`#35;`) would be the documented escape, but Mermaid 11 draws them as they are
(ﬂ°°35¶ß) in a message's text (seen in Chromium, tests/test_mermaid.py), so look-alike
fullwidth characters stand in (U+FF03, U+FF1B, U+FF1C, U+FF1E). Participant names keep only
plain characters.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from amqpscope.codec.frames import Frame
from amqpscope.journeys.follow import Hop, Journey
from amqpscope.render.follow import heading
from amqpscope.render.lines import highlights, transport_name

#: frames drawn per connection (a longer diagram is past what a reader scrolls, and past the
#: 50,000 characters Mermaid draws by default); the rest are counted in a note
MAX_ARROWS: Final = 200
#: characters of a message's text
MAX_TEXT: Final = 120
_STAND_INS: Final = {"#": "\uff03", ";": "\uff1b", "<": "\uff1c", ">": "\uff1e"}
_SPECIAL: Final = re.compile(r"[#;<>]")
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
_PLAIN: Final = re.compile(r"[^\w .:/@()-]")
#: who sends each event of a journey: the client (to the broker) or the broker
_FROM_CLIENT: Final = frozenset(("published", "acked", "nacked", "rejected"))


def text(value: str) -> str:
    """A message's text as the sequence grammar reads it back unchanged."""
    value = _CONTROL.sub(" ", value)
    if len(value) > MAX_TEXT:
        value = value[: MAX_TEXT - 1] + "…"
    return _SPECIAL.sub(lambda m: _STAND_INS[m.group()], value).strip() or " "


def participant(name: str) -> str:
    """A participant's shown name: plain characters only (its grammar has no escapes)."""
    return _PLAIN.sub("_", _CONTROL.sub(" ", name))[:60].strip() or "_"


def fenced(diagram: list[str]) -> str:
    return "```mermaid\n" + "\n".join(diagram) + "\n```\n"


def _arrow(hop: Hop) -> str:
    d = hop.details
    words = [f"frame {hop.frame}", hop.event]
    if hop.event == "published":
        words.append(f"to {d.get('exchange') or '(default)'} key {d.get('routing-key')}")
    elif hop.event in ("delivered", "redelivered"):
        words.append(f"from {d.get('queue') or '(unknown queue)'} tag {d.get('delivery-tag')}")
    elif hop.event in ("nacked", "rejected"):
        words.append("requeue" if d.get("requeue") else "no requeue")
    elif hop.event == "transfer":
        words.append(f"link {d.get('address') or '(no address)'} id {d.get('delivery-id')}")
    elif hop.event == "disposition":
        words.append(f"{d.get('state') or 'no outcome'}{' settled' if d.get('settled') else ''}")
    return " ".join(str(w) for w in words)


def journey_diagram(journey: Journey, first_ts: float | None, names: dict[int, str]) -> list[str]:
    """One message's hops: each connection a participant, the broker in the middle."""
    lines = ["sequenceDiagram"]
    conns = list(dict.fromkeys(hop.conn for hop in journey.hops))
    first = conns[:1]
    for conn in first:
        lines.append(f"    participant c{conn} as {participant(_who(conn, names))}")
    lines.append("    participant broker as broker")
    for conn in conns[1:]:
        lines.append(f"    participant c{conn} as {participant(_who(conn, names))}")
    lines.append(f"    Note over broker: {text(heading(journey))}")
    for hop in journey.hops:
        at = f" at {hop.ts - first_ts:.6f} s" if first_ts is not None and hop.ts else ""
        label = text(_arrow(hop) + at)
        if hop.event == "unacked-at-close":
            lines.append(f"    Note over c{hop.conn}: {label}")
        elif hop.details.get("dir", "c2s" if hop.event in _FROM_CLIENT else "s2c") == "c2s":
            lines.append(f"    c{hop.conn}->>broker: {label}")
        else:
            lines.append(f"    broker-->>c{hop.conn}: {label}")
    lines.append(f"    Note over broker: {text('ended: ' + journey.end)}")
    return lines


def _who(conn: int, names: dict[int, str]) -> str:
    return f"c{conn} {names[conn]}" if conn in names else f"c{conn}"


def journeys_diagram(
    journeys: Iterable[Journey], first_ts: float | None, names: dict[int, str]
) -> str:
    """Markdown: each journey's diagram in its own ```mermaid block, under its heading."""
    blocks = [f"{heading(j)}\n\n" + fenced(journey_diagram(j, first_ts, names)) for j in journeys]
    return "\n".join(blocks)


class ConnectionDiagrams:
    """Each connection's frames, client on the left, broker (or peer) on the right; feed
    frames in order, `markdown()` at the end. At most MAX_ARROWS frames per connection."""

    def __init__(self) -> None:
        self.arrows: dict[int, list[str]] = {}
        self.left_out: dict[int, int] = {}
        self.ends: dict[int, tuple[str, str]] = {}
        self.first_ts: float | None = None

    def feed(self, frame: Frame) -> None:
        if self.first_ts is None and frame.ts:
            self.first_ts = frame.ts
        if not frame.conn:
            return
        arrows = self.arrows.setdefault(frame.conn, [])
        if frame.conn not in self.ends and frame.src and frame.dst:
            client, server = (
                (frame.src, frame.dst) if frame.direction == "c2s" else (frame.dst, frame.src)
            )
            self.ends[frame.conn] = (client, server)
        if len(arrows) >= MAX_ARROWS:
            self.left_out[frame.conn] = self.left_out.get(frame.conn, 0) + 1
            return
        name = transport_name(frame) if frame.kind == "transport" else frame.name
        words = " ".join(w for w in (str(frame.number), name, highlights(frame)) if w)
        if frame.channel:
            words += f" (ch {frame.channel})"
        arrow = "client->>server" if frame.direction == "c2s" else "server-->>client"
        arrows.append(f"    {arrow}: {text(words)}")

    def markdown(self) -> str:
        blocks = []
        for conn, arrows in self.arrows.items():
            client, server = self.ends.get(conn, ("client", "server"))
            lines = [
                "sequenceDiagram",
                f"    participant client as {participant(f'c{conn} client {client}')}",
                f"    participant server as {participant(f'server {server}')}",
                *arrows,
            ]
            more = self.left_out.get(conn, 0)
            if more:
                lines.append(f"    Note over client,server: {more} more frames not drawn")
            blocks.append(f"Connection c{conn}\n\n" + fenced(lines))
        return "\n".join(blocks)
