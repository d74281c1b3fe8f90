"""Mermaid `sequenceDiagram`s to paste into a GitHub issue or a Markdown doc (GitHub renders a
```mermaid block): a followed message's journey (`follow --mermaid`) or each connection's
frames (`export --mermaid`), written from the sequence model of `render/sequence.py`.

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
from amqpscope.journeys.follow import Journey
from amqpscope.render.follow import heading
from amqpscope.render.sequence import ConnectionSequences, Sequence, journey_sequence

#: characters of a message's text
MAX_TEXT: Final = 120
_STAND_INS: Final = {"#": "\uff03", ";": "\uff1b", "<": "\uff1c", ">": "\uff1e"}
_SPECIAL: Final = re.compile(r"[#;<>]")
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")
_PLAIN: Final = re.compile(r"[^\w .:/@()-]")


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


def diagram(sequence: Sequence) -> list[str]:
    """The sequence in Mermaid's `sequenceDiagram` grammar."""
    lines = ["sequenceDiagram"]
    for who in sequence.participants:
        lines.append(f"    participant {who.key} as {participant(who.name)}")
    for step in sequence.steps:
        if step.dst is None:
            over = f"{step.src},{step.also}" if step.also else step.src
            lines.append(f"    Note over {over}: {text(step.text)}")
        else:
            arrow = "-->>" if step.reply else "->>"
            lines.append(f"    {step.src}{arrow}{step.dst}: {text(step.text)}")
    return lines


def journey_diagram(journey: Journey, first_ts: float | None, names: dict[int, str]) -> list[str]:
    """One message's hops: each connection a participant, the broker in the middle."""
    return diagram(journey_sequence(journey, first_ts, names))


def journeys_diagram(
    journeys: Iterable[Journey], first_ts: float | None, names: dict[int, str]
) -> str:
    """Markdown: each journey's diagram in its own ```mermaid block, under its heading."""
    blocks = [f"{heading(j)}\n\n" + fenced(journey_diagram(j, first_ts, names)) for j in journeys]
    return "\n".join(blocks)


class ConnectionDiagrams:
    """Each connection's frames as a Mermaid block; feed frames in order, `markdown()` at the
    end (`ConnectionSequences` decides what is drawn)."""

    def __init__(self) -> None:
        self.sequences = ConnectionSequences()

    def feed(self, frame: Frame) -> None:
        self.sequences.feed(frame)

    def markdown(self) -> str:
        blocks = [
            f"{sequence.heading}\n\n" + fenced(diagram(sequence))
            for sequence in self.sequences.sequences()
        ]
        return "\n".join(blocks)
