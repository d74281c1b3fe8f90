"""Mermaid and PlantUML draw one sequence model with one walk (`render/sequence.Grammar`): the
two modules hold only their syntax, so the two languages cannot drift into drawing different
diagrams of the same capture (review finding: the walk was written twice)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from amqpscope.cli import main
from amqpscope.render import mermaid, plantuml
from amqpscope.render.sequence import Grammar, Participant, Sequence, Step

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
EVERY_CAPTURE = sorted(p.name for p in CAPTURES.iterdir() if p.suffix in (".pcap", ".pcapng"))

#: (kind, who) of each line of a block: participants by key, arrows by ends and dash, notes by
#: whom they are over; the texts are each language's own escaping, compared elsewhere
_MERMAID_LINE = re.compile(
    r"^    participant (?P<key>\S+) as |^    (?P<src>\S+?)(?P<dash>-->>|->>)(?P<dst>\S+?): "
    r"|^    Note over (?P<over>[^:]+): "
)
_PLANTUML_LINE = re.compile(
    r'^participant ".*" as (?P<key>\S+)$|^(?P<src>\S+) (?P<dash>-->|->) (?P<dst>\S+) : '
    r"|^note over (?P<over>[^:]+) : "
)


def shape(text: str, line: re.Pattern[str]) -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = []
    for each in text.splitlines():
        m = line.match(each)
        if m is None:
            continue
        if m["key"]:
            found.append(("participant", m["key"]))
        elif m["src"]:
            found.append(("arrow", m["src"], m["dst"], str(m["dash"].startswith("--"))))
        else:
            found.append(("note", m["over"].replace(" ", "")))
    return found


def test_the_modules_hold_only_syntax() -> None:
    """Neither module walks a sequence or its diagrams: `Grammar` does, once."""
    for module in (mermaid, plantuml):
        grammar = type(module.GRAMMAR)
        assert issubclass(grammar, Grammar)
        assert {"diagram", "document", "journeys"}.isdisjoint(vars(grammar)), module.__name__
        source = inspect.getsource(module)
        assert ".steps" not in source and ".participants" not in source, module.__name__


def test_each_language_writes_one_sequence() -> None:
    """The syntax of each element, byte for byte (the outputs before the walk was shared)."""
    sequence = Sequence(
        "Connection c1",
        [Participant("client", "c1 client 10.0.0.1:1"), Participant("server", "server <x>")],
        [
            Step("client", "server", "1 protocol-header"),
            Step("server", "client", "2 open #1; <b>", reply=True),
            Step("client", None, "3 more frames not drawn", also="server"),
            Step("server", None, "ended: ~~acked~~"),
        ],
    )
    one = (
        "Connection c1\n\n```mermaid\nsequenceDiagram\n"
        "    participant client as c1 client 10.0.0.1:1\n"
        "    participant server as server _x_\n"
        "    client->>server: 1 protocol-header\n"
        "    server-->>client: 2 open \uff031\uff1b \uff1cb\uff1e\n"
        "    Note over client,server: 3 more frames not drawn\n"
        "    Note over server: ended: ~~acked~~\n"
        "```\n"
    )
    assert mermaid.GRAMMAR.document([sequence, sequence]) == one + "\n" + one
    assert plantuml.GRAMMAR.document([sequence]) == (
        "' Connection c1\n@startuml\n"
        'participant "c1 client 10.0.0.1:1" as client\n'
        'participant "server \uff1cx\uff1e" as server\n'
        "client -> server : 1 protocol-header\n"
        "server --> client : 2 open #1; \uff1cb\uff1e\n"
        "note over client, server : 3 more frames not drawn\n"
        "note over server : ended: \uff5e\uff5eacked\uff5e\uff5e\n"
        "@enduml\n"
    )


@pytest.mark.parametrize("command", ["export", "follow"])
def test_both_languages_draw_the_same_diagrams_of_every_capture(command: str) -> None:
    runner = CliRunner()
    for name in EVERY_CAPTURE:
        drawn = {}
        for flag in ("--mermaid", "--plantuml"):
            done = runner.invoke(main, [command, str(CAPTURES / name), flag])
            assert done.exit_code == 0, (name, flag, done.output)
            drawn[flag] = done.output
        m, p = shape(drawn["--mermaid"], _MERMAID_LINE), shape(drawn["--plantuml"], _PLANTUML_LINE)
        assert m == p, name
        assert drawn["--plantuml"].count("@startuml") == drawn["--mermaid"].count("```mermaid")
