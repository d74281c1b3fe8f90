"""The front door: a short README, a docs site that builds with warnings as errors, a layout map
that names every package, and reference pages that are what the code says (issue 41)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.oracle import missing

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
ARCHITECTURE = ROOT / "docs" / "developer" / "architecture.md"
#: a link in Markdown whose target is a path in this repository (not a URL, not an anchor)
LINK = re.compile(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)")


def test_readme_is_short_and_opens_with_the_two_commands() -> None:
    """At most 200 lines; what the tool is comes first, then `make demo` and `make test`."""
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move detail into docs/"
    commands = [line.split()[:2] for line in lines if line.startswith("make ")]
    assert commands[:2] == [["make", "demo"], ["make", "test"]]


@pytest.mark.parametrize("doc", ["README.md", "CONTRIBUTING.md"])
def test_the_front_door_s_links_lead_somewhere(doc: str) -> None:
    """mkdocs checks the links inside docs/; these files sit outside it."""
    text = (ROOT / doc).read_text(encoding="utf-8")
    targets = LINK.findall(text)
    assert targets
    broken = [t for t in targets if not (ROOT / t).exists()]
    assert broken == []


def test_every_docs_page_is_in_the_nav() -> None:
    """A page left out of mkdocs.yml's nav builds but no one finds it (mkdocs only says INFO)."""
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:\n", 1)[1]
    pages = sorted(p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md"))
    assert [page for page in pages if f": {page}\n" not in nav] == []


def layout_entries() -> set[str]:
    """The paths the architecture page's layout map names (its lines that start with a path)."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    block = text[text.index("## Layout") :].split("```", 2)[1]
    return {line.split()[0] for line in block.splitlines() if line.startswith("amqpscope/")}


def test_the_layout_map_names_every_package_and_module() -> None:
    """Every package (at any depth) and every top-level module under amqpscope/ has a line in
    the map, and the map names nothing that does not exist."""
    package = ROOT / "amqpscope"
    present = {f"amqpscope/{p.parent.relative_to(package)}/" for p in package.rglob("__init__.py")}
    present.discard("amqpscope/./")
    present |= {f"amqpscope/{p.name}" for p in package.glob("*.py")}
    named = layout_entries()
    assert sorted(present - named) == [], "add these to the layout map in " + str(ARCHITECTURE)
    assert sorted(named - present) == []


def test_the_reference_pages_are_what_the_code_says() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_reference.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    cli = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    for command in ("read", "diagnose", "tui", "summary", "export", "live", "spark", "report"):
        assert f"\n## amqpscope {command} " in cli
    from amqpscope.diagnose.causes import CODES as DIAGNOSES
    from amqpscope.findings import CODES as FINDINGS

    findings = (ROOT / "docs" / "reference" / "findings.md").read_text(encoding="utf-8")
    diagnoses = (ROOT / "docs" / "reference" / "diagnoses.md").read_text(encoding="utf-8")
    assert all(f"| `{code}` |" in findings for code in FINDINGS)
    assert all(f"| `{code}` |" in diagnoses for code in DIAGNOSES)
    schemas = (ROOT / "docs" / "reference" / "schemas.md").read_text(encoding="utf-8")
    for path in (ROOT / "amqpscope" / "schema").glob("*.schema.json"):
        assert f"`amqpscope/schema/{path.name}`" in schemas


@pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None,
    reason=missing("the docs extra (mkdocs, mkdocs-material)"),
)
def test_the_docs_site_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    """What `make docs` runs: a broken link, a missing anchor or a page left out of the build
    fails it."""
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr
    site = tmp_path / "site"
    built = {p.relative_to(site).as_posix() for p in site.rglob("*.html")}
    for page in (ROOT / "docs").rglob("*.md"):
        html = page.relative_to(ROOT / "docs").with_suffix(".html").as_posix()
        assert html in built
    # the site reads with no network (a laptop on a plane, an air-gapped incident room): no
    # page asks a font server or a CDN for what it draws with
    for page in site.rglob("*.html"):
        text = page.read_text()
        for host in ("fonts.googleapis.com", "fonts.gstatic.com", "unpkg.com", "cdn.jsdelivr"):
            assert host not in text, (page.relative_to(site).as_posix(), host)
