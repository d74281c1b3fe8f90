"""The published JSON Schemas (`amqpscope schema NAME`), shipped inside the package."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

#: schema names, each a NAME.schema.json beside this file
NAMES = ("frame",)


def text(name: str) -> str:
    return (resources.files(__package__) / f"{name}.schema.json").read_text(encoding="utf-8")


def load(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(text(name))
    return loaded
