"""The published JSON Schemas (`amqpscope schema NAME`), shipped inside the package."""

from __future__ import annotations

import json
from typing import Any

#: schema names, each a NAME.schema.json beside this file
NAMES = ("frame", "summary", "export", "diagnose", "export-ndjson", "live", "follow")


def text(name: str) -> str:
    from importlib import resources  # not at import: every command's startup imports NAMES

    return (resources.files(__package__) / f"{name}.schema.json").read_text(encoding="utf-8")


def load(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(text(name))
    return loaded


def bundled(name: str) -> dict[str, Any]:
    """NAME's schema with every schema it refers to by `$id` copied into its `$defs` (as
    `amqpscope-OTHER`) and each such reference pointed there: a document that validates
    offline, with no resolver (`check-jsonschema`, `ajv`), as `amqpscope schema` prints it."""
    root = load(name)
    ids = {load(other)["$id"]: other for other in NAMES}
    embedded: dict[str, Any] = {}

    def point(ref: str, base: str) -> str:
        url, _, fragment = ref.partition("#")
        if not url:
            return "#" + base + fragment
        other = ids.get(url)
        if other is None:
            return ref  # not ours: left as it is
        if other == name:
            return "#" + fragment
        key = f"amqpscope-{other}"
        if key not in embedded:
            embedded[key] = {}  # taken before the walk: schemas that refer to each other
            document = load(other)
            document.pop("$id", None)
            document.pop("$schema", None)
            walk(document, f"/$defs/{key}")
            embedded[key] = document
        return f"#/$defs/{key}{fragment}"

    def walk(node: Any, base: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "$ref" and isinstance(value, str):
                    node[key] = point(value, base)
                else:
                    walk(value, base)
        elif isinstance(node, list):
            for item in node:
                walk(item, base)

    walk(root, "")
    if embedded:
        root.setdefault("$defs", {}).update(embedded)
    return root


def bundled_text(name: str) -> str:
    return json.dumps(bundled(name), indent=2, ensure_ascii=False) + "\n"


def validator(name: str) -> Any:
    """A jsonschema validator for NAME that resolves references between the schemas (tests and
    users with jsonschema installed; amqpscope itself does not need it)."""
    import jsonschema
    from referencing import Registry, Resource

    registry = Registry().with_resources(
        (schema["$id"], Resource.from_contents(schema)) for schema in map(load, NAMES)
    )
    return jsonschema.Draft202012Validator(load(name), registry=registry)
