"""The docs site draws a Mermaid diagram (issue 44): docs/follow.md's ```mermaid block is built
by mkdocs (pymdownx.superfences' custom fence, mkdocs.yml) into a `<pre class="mermaid">`
that Material has Mermaid draw, holding what `amqpscope follow --mermaid` prints on the
recording today; Mermaid (the pinned npm package, in Chromium) draws that block's every arrow;
and the built page itself draws it with no network, with the Mermaid the site serves
(tools/mkdocs_mermaid.py), not one from unpkg.com."""

from __future__ import annotations

import html
import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import browser
from tests.oracle import missing
from tests.test_mermaid import drawn_labels, parse, written_labels
from tests.test_mermaid import page as page  # the fixture: Mermaid loaded in Chromium

ROOT = Path(__file__).resolve().parent.parent
CAPTURE = ROOT / "captures" / "091-journeys.pcap"

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None,
    reason=missing("the docs extra (mkdocs, mkdocs-material)"),
)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    site = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stderr
    yield site


def diagrams(page_html: str) -> list[str]:
    blocks = re.findall(r'<pre class="mermaid"><code>(.*?)</code></pre>', page_html, re.S)
    return [html.unescape(block).strip("\n") for block in blocks]


def test_the_follow_page_carries_today_s_diagram(built: Path) -> None:
    command = ["follow", str(CAPTURE), "--message-id", "m0", "--mermaid"]
    done = subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", *command],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    printed = done.stdout.split("```mermaid\n", 1)[1].split("\n```", 1)[0]
    assert diagrams((built / "follow.html").read_text(encoding="utf-8")) == [printed]


@pytest.mark.skipif(not browser.available(), reason=missing("Debian's chromium"))
def test_mermaid_draws_the_page_s_diagram(built: Path, page: browser.Page) -> None:
    [diagram] = diagrams((built / "follow.html").read_text(encoding="utf-8"))
    assert parse(page, diagram) == "ok"
    labels = written_labels(diagram)
    assert len(labels) == 6
    assert drawn_labels(page, diagram) == labels


def shadow_labels(page: browser.Page) -> list[str]:
    """The arrows' labels in the diagram Material drew: its SVG is in a closed shadow root
    (`div.mermaid`), out of the page's scripts' reach; DevTools' DOM, pierced, shows it."""
    root = page.send("DOM.getDocument", depth=-1, pierce=True)["root"]

    def nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
        yield node
        for child in (*node.get("children", ()), *node.get("shadowRoots", ())):
            yield from nodes(child)

    def classes(node: dict[str, Any]) -> list[str]:
        attributes = node.get("attributes", [])
        return str(
            dict(zip(attributes[::2], attributes[1::2], strict=True)).get("class", "")
        ).split()

    def text(node: dict[str, Any]) -> str:
        return "".join(n.get("nodeValue", "") for n in nodes(node) if n.get("nodeType") == 3)

    [host] = [n for n in nodes(root) if n.get("localName") == "div" and "mermaid" in classes(n)]
    [svg] = [n for n in nodes(host) if n.get("localName") == "svg"]
    return [text(n) for n in nodes(svg) if "messageText" in classes(n)]


@pytest.mark.skipif(not browser.available(), reason=missing("Debian's chromium"))
def test_the_built_page_draws_its_diagram_with_no_network(built: Path) -> None:
    """The page opened from disk in Chromium where every request but file:// fails
    (browser.OFFLINE): Material draws the block with the site's own Mermaid, the pinned one,
    every arrow's label as written; Mermaid came from no other place. Before, Material
    fetched it from unpkg.com, and offline the block stayed text."""
    from tools import mkdocs_mermaid  # imports mkdocs: the module's skipif first

    served = built / mkdocs_mermaid.SITE_PATH
    assert served.read_bytes() == mkdocs_mermaid.MERMAID.read_bytes()
    [diagram] = diagrams((built / "follow.html").read_text(encoding="utf-8"))
    with browser.Chromium(browser.OFFLINE) as chromium:
        page = chromium.page()
        page.open(built / "follow.html")
        page.wait("document.querySelector('div.mermaid') !== null", "the diagram drawn", 120)
        labels = shadow_labels(page)
        requests = list(page.requests)
        # the network is gone indeed: the CDN Material would use does not answer
        unreachable = "fetch('https://unpkg.com/mermaid@11/dist/mermaid.min.js', {mode: 'no-cors'})"
        assert page.eval(f"{unreachable}.then(() => 'reached', e => 'failed')") == "failed"
    assert labels == written_labels(diagram)
    assert len(labels) == 6
    assert served.as_uri() in requests
    assert [u for u in requests if "mermaid" in u and not u.startswith("file:")] == []
