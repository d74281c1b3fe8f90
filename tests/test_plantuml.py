"""`export --plantuml` and `follow --plantuml` give diagrams PlantUML itself reads and draws as
written: each block passes Debian's `plantuml -checkonly`, and in the SVG PlantUML draws of it,
every participant's name, arrow's label and note is one text drawn exactly as the block says
(nothing expanded by the preprocessor, marked up by Creole, broken by `\\n` or made a link),
the wire's hostile names included (captures/091-hostile-names, 091-html-names)."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from amqpscope.render import plantuml
from amqpscope.render.sequence import Participant, Sequence, Step
from tests.oracle import missing

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "captures"
PLANTUML = shutil.which("plantuml")

needs_plantuml = pytest.mark.skipif(PLANTUML is None, reason=missing("Debian's plantuml"))

#: what a block's lines say is drawn: a participant's name, an arrow's label, a note
WRITTEN = re.compile(
    r'^participant "(.*)" as \S+$|^\S+ --?> \S+ : (.*)$|^note over [^:]+ : (.*)$', re.M
)


def cli(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def blocks(text: str) -> list[str]:
    found = re.findall(r"^@startuml\n.*?^@enduml$", text, re.S | re.M)
    assert found, text[:500]
    return found


def written(block: str) -> list[str]:
    return ["".join(groups) for groups in WRITTEN.findall(block)]


def drawn(folder: Path, text: str) -> list[list[str]]:
    """Each block's texts as PlantUML draws them (its SVG's <text> elements), after checking
    the file's syntax."""
    source = folder / "diagrams.puml"
    source.write_text(text, encoding="utf-8")
    assert PLANTUML is not None
    check = subprocess.run(
        [PLANTUML, "-checkonly", "-failfast", "-charset", "UTF-8", str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    draw = subprocess.run(
        [PLANTUML, "-tsvg", "-charset", "UTF-8", str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert draw.returncode == 0, draw.stdout + draw.stderr
    svgs = sorted(folder.glob("diagrams*.svg"), key=lambda p: (len(p.name), p.name))
    out = []
    for svg in svgs:
        texts = re.findall(r"<text[^>]*>(.*?)</text>", svg.read_text(encoding="utf-8"), re.S)
        out.append([html.unescape(t).replace("\xa0", " ") for t in texts])
    return out


@needs_plantuml
def test_the_oracle_sees_what_plantuml_makes_of_raw_text(tmp_path: Path) -> None:
    """The check can fail: written raw, a builtin call is expanded, Creole marks up, `\\n`
    breaks the label, and a broken line is refused."""
    raw = "@startuml\na -> b : at %date() **bold** one\\ntwo\n@enduml\n"
    [texts] = drawn(tmp_path, raw)
    assert "at %date() **bold** one\\ntwo" not in texts
    assert "%date()" not in " ".join(texts)
    assert PLANTUML is not None
    broken = subprocess.run(
        [PLANTUML, "-syntax"],
        input="@startuml\na -> b : fine\nthis is no diagram line\n@enduml\n",
        text=True,
        capture_output=True,
        timeout=300,
    )
    assert "ERROR" in broken.stdout


@needs_plantuml
def test_hostile_text_is_drawn_as_written(tmp_path: Path) -> None:
    """Every markup, escape and preprocessor start PlantUML knows, in names, labels and notes:
    drawn as `plantuml.text` wrote it, and nothing of the renderer's environment."""
    hostile = [
        '%getenv("HOME") %date() $x !include /etc/passwd',
        '**bold** //italic// ""mono"" --struck-- __under__ ~~wave~~ ~escaped ==',
        "<b>tag</b> <color:red>red</color> <&star> <U+1F600> [[http://x link]] &#65; &amp;",
        "back\\nslash\\t and a tab\tand\x1b[31m escape",
        "* a list? # a number? = a heading? | a table | + more - less",
        "@enduml @startuml ' a comment /' a block '/ end",
    ]
    sequence = Sequence(
        "hostile",
        [Participant("a", hostile[0]), Participant("b", hostile[2])],
        [Step("a", "b", text) for text in hostile]
        + [Step("b", "a", text, reply=True) for text in hostile]
        + [Step("a", None, text) for text in hostile]
        + [Step("a", None, hostile[1], also="b")],
    )
    block = "\n".join(plantuml.diagram(sequence)) + "\n"
    [texts] = drawn(tmp_path, block)
    wanted = written(block)
    assert len(wanted) == 2 + 3 * len(hostile) + 1
    assert [w for w in wanted if w not in texts] == []
    home = str(Path.home())
    assert not any(home in t for t in texts)


@needs_plantuml
@pytest.mark.parametrize(
    "args",
    [
        ("export", "091-journeys.pcap"),
        ("export", "091-hostile-names.pcap"),
        ("export", "091-html-names.pcap"),
        ("export", "10-send-receive.pcap"),
        ("follow", "091-journeys.pcap"),
        ("follow", "10-journeys.pcap"),
    ],
    ids=lambda a: f"{a[0]}-{a[1]}",
)
def test_diagrams_parse_and_draw_every_text(tmp_path: Path, args: tuple[str, str]) -> None:
    command, name = args
    text = cli(command, str(CAPTURES / name), "--plantuml")
    found = blocks(text)
    svgs = drawn(tmp_path, text)
    assert len(svgs) == len(found)
    for number, (block, texts) in enumerate(zip(found, svgs, strict=True)):
        wanted = written(block)
        assert len(wanted) == len(block.splitlines()) - 2, number  # every line but the two
        assert [w for w in wanted if w not in texts] == [], number


def test_follow_draws_the_same_journey_as_mermaid() -> None:
    """One model, two grammars: the same participants and arrows, in the same order."""
    capture = str(CAPTURES / "091-journeys.pcap")
    uml = cli("follow", capture, "--message-id", "m0", "--plantuml")
    mermaid = cli("follow", capture, "--message-id", "m0", "--mermaid")
    arrows = re.findall(r"^(\S+) (--?>) (\S+) : ", uml, re.M)
    drawn_m = re.findall(r"^    (\S+?)(-->>|->>)(\S+?): ", mermaid, re.M)
    assert [(a, "-->" if d == "-->>" else "->", b) for a, d, b in drawn_m] == arrows
    assert len(arrows) == 6


def test_choose_one_output() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "amqpscope.cli",
            "export",
            str(CAPTURES / "091-journeys.pcap"),
            "--plantuml",
            "--mermaid",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "choose one" in done.stderr
