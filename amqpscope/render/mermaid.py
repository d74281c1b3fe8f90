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
from typing import Final

from amqpscope.render.sequence import Grammar, Participant, Step

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


class Mermaid(Grammar):
    """A `sequenceDiagram` per diagram, each in its own ```mermaid block under its heading
    (Markdown)."""

    opening = ("sequenceDiagram",)

    def participant(self, who: Participant) -> str:
        return f"    participant {who.key} as {participant(who.name)}"

    def arrow(self, step: Step) -> str:
        return f"    {step.src}{'-->>' if step.reply else '->>'}{step.dst}: {text(step.text)}"

    def note(self, step: Step) -> str:
        over = f"{step.src},{step.also}" if step.also else step.src
        return f"    Note over {over}: {text(step.text)}"

    def block(self, heading: str, lines: list[str]) -> str:
        return f"{heading}\n\n```mermaid\n" + "\n".join(lines) + "\n```\n"


GRAMMAR: Final = Mermaid()
diagram = GRAMMAR.diagram
journeys_diagram = GRAMMAR.journeys
