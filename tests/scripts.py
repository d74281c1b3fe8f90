"""The project's scripts in tools/ (not a package), loaded as modules by the tests that use them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

TOOLS = Path(__file__).resolve().parent.parent / "tools"


def load_tool(name: str) -> Any:
    """tools/NAME.py as the module NAME (registered in sys.modules: dataclasses look their
    module up), loaded once."""
    path = TOOLS / f"{name}.py"
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "__file__", None) == str(path):
        return loaded
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
