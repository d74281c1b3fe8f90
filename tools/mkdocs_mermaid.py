"""MkDocs hook (mkdocs.yml `hooks:`): the site draws its ```mermaid blocks with the Mermaid the
Makefile pins (`make node-deps`: npm into build/node, never committed), served from the site
itself, not from unpkg.com, which Material loads when no `mermaid` is on the page: a site read
offline, or behind a proxy, draws its diagrams too (tests/test_docs_diagram.py opens the built
page in Chromium with the network blocked). The file is added to the site at build time; a
build without it fails, saying how to get it."""

from __future__ import annotations

from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
MERMAID = ROOT / "build" / "node" / "node_modules" / "mermaid" / "dist" / "mermaid.min.js"
#: where the site serves it: mkdocs.yml's extra_javascript names this path
SITE_PATH = "assets/javascripts/mermaid.min.js"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    if not MERMAID.is_file():
        raise PluginError(f"{MERMAID} missing: `make node-deps` installs the pinned Mermaid")
    files.append(File.generated(config, SITE_PATH, abs_src_path=str(MERMAID)))
    return files
