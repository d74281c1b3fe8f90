"""The published JSON Schemas (`amqpscope schema NAME`), shipped inside the package."""

from __future__ import annotations

import json
from typing import Any

#: schema names, each a NAME.schema.json beside this file
NAMES = ("frame", "summary", "export", "diagnose")


def text(name: str) -> str:
    from importlib import resources  # not at import: every command's startup imports NAMES

    return (resources.files(__package__) / f"{name}.schema.json").read_text(encoding="utf-8")


def load(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(text(name))
    return loaded


def validator(name: str) -> Any:
    """A jsonschema validator for NAME that resolves references between the schemas (tests and
    users with jsonschema installed; amqpscope itself does not need it)."""
    import jsonschema
    from referencing import Registry, Resource

    registry = Registry().with_resources(
        (schema["$id"], Resource.from_contents(schema)) for schema in map(load, NAMES)
    )
    return jsonschema.Draft202012Validator(load(name), registry=registry)
