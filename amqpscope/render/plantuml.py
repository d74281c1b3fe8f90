"""PlantUML sequence diagrams: a followed message's journey (`follow --plantuml`) or each
connection's frames (`export --plantuml`), written from the sequence model of
`render/sequence.py` (the same diagrams `--mermaid` draws). One `@startuml ... @enduml` block
per diagram, under a `'` comment that says what it shows; `plantuml FILE` draws each.

Every text comes from the wire, and PlantUML reads a label as more than text: its preprocessor
expands `%builtin()` calls anywhere on a line (`%getenv("HOME")` would put the renderer's
environment in the picture), `\\n` breaks a line, Creole marks up `**bold**`, `//italic//`,
`""mono""`, `--struck--`, `__underlined__`, `~~waved~~` and `~` escapes, HTML-like tags
(`<b>`, `<color:red>`, `<&icon>`), `[[links]]` and `&#entities;` are drawn as what they
stand for. So the characters that start any of them are written as look-alike fullwidth
characters (U+FF05 for `%`, U+FF3C for `\\`, ...), and of a doubled markup character the
second; tests/test_plantuml.py has PlantUML draw every label and finds it drawn as written.
"""

from __future__ import annotations

import re
from typing import Final

from amqpscope.render.sequence import Grammar, Participant, Step

#: characters of a label
MAX_TEXT: Final = 120
#: characters that start a preprocessor call, an escape, a tag, a link or an entity
_ALWAYS: Final = {
    "%": "\uff05",
    "$": "\uff04",
    "\\": "\uff3c",
    "<": "\uff1c",
    ">": "\uff1e",
    "[": "\uff3b",
    "]": "\uff3d",
    "~": "\uff5e",
    "&": "\uff06",
    '"': "\uff02",
}
#: Creole's markup characters: doubled, they mark up (the second is replaced); first in a
#: note's text, some start a list or a heading (replaced there too)
_DOUBLED: Final = {"*": "\uff0a", "/": "\uff0f", "-": "\uff0d", "_": "\uff3f", "=": "\uff1d"}
_LEADING: Final = {**_DOUBLED, "#": "\uff03", "|": "\uff5c", "+": "\uff0b"}
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")


def text(value: str) -> str:
    """A label (or a participant's name) as PlantUML draws it back unchanged."""
    value = _CONTROL.sub(" ", value).strip()
    if len(value) > MAX_TEXT:
        value = value[: MAX_TEXT - 1] + "…"
    out: list[str] = []
    before = ""
    for char in value:
        if char in _ALWAYS:
            out.append(_ALWAYS[char])
        elif char in _DOUBLED and char == before:
            out.append(_DOUBLED[char])
        elif not out and char in _LEADING:
            out.append(_LEADING[char])
        else:
            out.append(char)
        before = char
    return "".join(out) or "_"


class PlantUML(Grammar):
    """One `@startuml ... @enduml` block per diagram, under a `'` comment."""

    opening = ("@startuml",)
    closing = ("@enduml",)

    def participant(self, who: Participant) -> str:
        return f'participant "{text(who.name[:60])}" as {who.key}'

    def arrow(self, step: Step) -> str:
        return f"{step.src} {'-->' if step.reply else '->'} {step.dst} : {text(step.text)}"

    def note(self, step: Step) -> str:
        over = f"{step.src}, {step.also}" if step.also else step.src
        return f"note over {over} : {text(step.text)}"

    def block(self, heading: str, lines: list[str]) -> str:
        return f"' {text(heading)}\n" + "\n".join(lines) + "\n"


GRAMMAR: Final = PlantUML()
diagram = GRAMMAR.diagram
journeys_diagram = GRAMMAR.journeys
