"""`export --mermaid` and `follow --mermaid` give diagrams Mermaid itself reads: each block is
parsed and drawn by Mermaid (the npm package, pinned in the Makefile's node-deps) in Debian's
Chromium (tests/browser.py); every arrow is drawn with its label as written, the wire's hostile
names included (captures/091-hostile-names)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import browser
from tests.oracle import missing

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "captures"
MERMAID = ROOT / "build" / "node" / "node_modules" / "mermaid" / "dist" / "mermaid.min.js"

pytestmark = pytest.mark.skipif(not browser.available(), reason=missing("Debian's chromium"))


def cli(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def blocks(markdown: str) -> list[str]:
    found = re.findall(r"^```mermaid\n(.*?)\n```$", markdown, re.S | re.M)
    assert found, markdown[:500]
    return found


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[browser.Page]:
    assert MERMAID.is_file(), f"{MERMAID} missing: `make node-deps` installs it"
    folder = tmp_path_factory.mktemp("mermaid")
    index = folder / "index.html"
    index.write_text(
        f'<!doctype html><html><body><script src="{MERMAID.as_uri()}"></script>'
        "<script>mermaid.initialize({startOnLoad: false});</script></body></html>"
    )
    with browser.Chromium() as chromium:
        opened = chromium.page()
        opened.open(index)
        assert opened.eval("typeof mermaid.parse") == "function"
        yield opened


def parse(page: browser.Page, diagram: str) -> str:
    """'ok', or Mermaid's error."""
    return str(
        page.eval(f"mermaid.parse({json.dumps(diagram)}).then(() => 'ok', e => String(e))", 60)
    )


def drawn_labels(page: browser.Page, diagram: str) -> list[str]:
    """The arrows' labels as the page shows them, drawn as a Markdown page (GitHub) has
    Mermaid draw a block: `mermaid.run` on a `<pre class="mermaid">`."""
    script = f"""(async () => {{
        const pre = document.createElement('pre');
        pre.className = 'mermaid';
        pre.textContent = {json.dumps(diagram)};
        document.body.replaceChildren(pre);
        await mermaid.run({{nodes: [pre]}});
        return [...pre.querySelectorAll('.messageText')].map(t => t.textContent);
    }})()"""
    labels: list[str] = page.eval(script, 60)
    return labels


def written_labels(diagram: str) -> list[str]:
    """Each arrow's label as written (Mermaid must draw it whole: nothing taken for a comment,
    a statement's end or a line break)."""
    labels: list[str] = re.findall(r"^    \S+?(?:->>|-->>)\S+?: (.*)$", diagram, re.M)
    return labels


def test_the_parser_rejects_what_it_should(page: browser.Page) -> None:
    """The checks can fail: an unescaped `;` splits a message into a statement Mermaid refuses,
    an unescaped `#` starts a comment that eats the rest of the label."""
    assert parse(page, "sequenceDiagram\n    a->>b: fine") == "ok"
    assert parse(page, "sequenceDiagram\n    a->>b: one; two words") != "ok"
    cut = "sequenceDiagram\n    a->>b: frame # 42"
    assert drawn_labels(page, cut) != written_labels(cut)


@pytest.mark.parametrize(
    "args",
    [
        ("export", "091-journeys.pcap", "--mermaid"),
        ("export", "091-hostile-names.pcap", "--mermaid"),
        ("export", "10-send-receive.pcap", "--mermaid"),
        ("follow", "091-journeys.pcap", "--mermaid"),
        ("follow", "10-redelivered.pcap", "--mermaid"),
    ],
    ids=lambda a: f"{a[0]}-{a[1]}",
)
def test_diagrams_parse_and_draw_every_arrow(page: browser.Page, args: tuple[str, ...]) -> None:
    command, name, *rest = args
    markdown = cli(command, str(CAPTURES / name), *rest)
    for number, diagram in enumerate(blocks(markdown)):
        assert parse(page, diagram) == "ok", diagram[:300]
        assert drawn_labels(page, diagram) == written_labels(diagram), number
