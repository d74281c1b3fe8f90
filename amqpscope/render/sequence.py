"""Sequence diagrams as data, whatever draws them: a followed message's journey (`follow
--mermaid`, `--plantuml`) or each connection's frames (`export --mermaid`, `--plantuml`).

Who the participants are, which arrow goes where, what each says, is decided once here, and
`Grammar` walks it once; `render/mermaid.py` and `render/plantuml.py` only say how their
language writes a participant, an arrow, a note and a block, each making the wire's text
(names, routing keys, bodies) safe for it. Texts here are raw.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from amqpscope.codec.frames import Frame
from amqpscope.journeys.follow import Hop, Journey
from amqpscope.render.follow import heading
from amqpscope.render.lines import highlights, transport_name

#: frames drawn per connection (a longer diagram is past what a reader scrolls, and past the
#: 50,000 characters Mermaid draws by default); the rest are counted in a note
MAX_ARROWS: Final = 200
#: who sends each event of a journey: the client (to the broker) or the broker
_FROM_CLIENT: Final = frozenset(("published", "acked", "nacked", "rejected"))


@dataclass(slots=True)
class Participant:
    key: str  # an identifier the diagram refers to it by (plain: c3, broker, client)
    name: str  # what it shows (raw)


@dataclass(slots=True)
class Step:
    """An arrow from `src` to `dst` (`reply`: drawn dashed, the broker's or server's), or, with
    `dst` None, a note over `src` (and `also`, when it spans two participants)."""

    src: str
    dst: str | None
    text: str
    reply: bool = False
    also: str | None = None


@dataclass(slots=True)
class Sequence:
    heading: str  # what the diagram shows, said above it in Markdown
    participants: list[Participant] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)


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


def _who(conn: int, names: dict[int, str]) -> str:
    return f"c{conn} {names[conn]}" if conn in names else f"c{conn}"


def journey_sequence(journey: Journey, first_ts: float | None, names: dict[int, str]) -> Sequence:
    """One message's hops: each connection a participant, the broker in the middle (after the
    first connection)."""
    sequence = Sequence(heading(journey))
    conns = list(dict.fromkeys(hop.conn for hop in journey.hops))
    people = [Participant(f"c{conn}", _who(conn, names)) for conn in conns]
    sequence.participants = [*people[:1], Participant("broker", "broker"), *people[1:]]
    steps = sequence.steps
    steps.append(Step("broker", None, heading(journey)))
    for hop in journey.hops:
        at = f" at {hop.ts - first_ts:.6f} s" if first_ts is not None and hop.ts else ""
        label = _arrow(hop) + at
        conn = f"c{hop.conn}"
        if hop.event == "unacked-at-close":
            steps.append(Step(conn, None, label))
        elif hop.details.get("dir", "c2s" if hop.event in _FROM_CLIENT else "s2c") == "c2s":
            steps.append(Step(conn, "broker", label))
        else:
            steps.append(Step("broker", conn, label, reply=True))
    steps.append(Step("broker", None, "ended: " + journey.end))
    return sequence


class ConnectionSequences:
    """Each connection's frames, client on the left, broker (or peer) on the right; feed
    frames in order, `sequences()` at the end. At most MAX_ARROWS frames per connection."""

    def __init__(self) -> None:
        self.arrows: dict[int, list[Step]] = {}
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
        if frame.direction == "c2s":
            arrows.append(Step("client", "server", words))
        else:
            arrows.append(Step("server", "client", words, reply=True))

    def sequences(self) -> list[Sequence]:
        out = []
        for conn, arrows in self.arrows.items():
            client, server = self.ends.get(conn, ("client", "server"))
            sequence = Sequence(f"Connection c{conn}")
            sequence.participants = [
                Participant("client", f"c{conn} client {client}"),
                Participant("server", f"server {server}"),
            ]
            sequence.steps = list(arrows)
            more = self.left_out.get(conn, 0)
            if more:
                sequence.steps.append(
                    Step("client", None, f"{more} more frames not drawn", also="server")
                )
            out.append(sequence)
        return out


class Grammar:
    """One diagram language: subclasses write a participant, an arrow, a note and a block; the
    walk over participants and steps, and over diagrams, is this class's, so the languages
    cannot draw different diagrams."""

    #: lines before the participants, and after the last step
    opening: tuple[str, ...] = ()
    closing: tuple[str, ...] = ()

    def participant(self, who: Participant) -> str:
        raise NotImplementedError

    def arrow(self, step: Step) -> str:
        raise NotImplementedError

    def note(self, step: Step) -> str:
        raise NotImplementedError

    def block(self, heading: str, lines: list[str]) -> str:
        """One diagram as the document holds it, under its heading."""
        raise NotImplementedError

    def diagram(self, sequence: Sequence) -> list[str]:
        """The sequence's lines in this language."""
        lines = list(self.opening)
        lines.extend(self.participant(who) for who in sequence.participants)
        lines.extend(self.note(s) if s.dst is None else self.arrow(s) for s in sequence.steps)
        lines.extend(self.closing)
        return lines

    def document(self, sequences: Iterable[Sequence]) -> str:
        """Each sequence's block, a blank line between them."""
        return "\n".join(self.block(s.heading, self.diagram(s)) for s in sequences)

    def journeys(
        self, journeys: Iterable[Journey], first_ts: float | None, names: dict[int, str]
    ) -> str:
        """Each followed message's diagram (`follow --mermaid`, `--plantuml`)."""
        return self.document(journey_sequence(j, first_ts, names) for j in journeys)


class ConnectionDiagrams:
    """Each connection's frames in `grammar` (`export --mermaid`, `--plantuml`); feed frames in
    order, `text()` at the end."""

    def __init__(self, grammar: Grammar) -> None:
        self.grammar = grammar
        self.sequences = ConnectionSequences()

    def feed(self, frame: Frame) -> None:
        self.sequences.feed(frame)

    def text(self) -> str:
        return self.grammar.document(self.sequences.sequences())
