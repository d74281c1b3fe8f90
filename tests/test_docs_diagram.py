"""The docs site draws a Mermaid diagram (issue 44): docs/follow.md's ```mermaid block is built
by mkdocs (pymdownx.superfences' custom fence, mkdocs.yml) into a `<pre class="mermaid">`
that Material has Mermaid draw, holding what `amqpscope follow --mermaid` prints on the
recording today; and Mermaid (the pinned npm package, in Chromium) draws that block's every
arrow."""

from __future__ import annotations

import html
import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

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
