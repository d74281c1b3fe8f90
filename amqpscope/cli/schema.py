"""`amqpscope schema`."""

from __future__ import annotations

import click

from amqpscope import schema as schemas
from amqpscope.cli.common import (
    main,
)


@main.command()
@click.argument("name", type=click.Choice(schemas.NAMES))
def schema(name: str) -> None:
    """Print the JSON Schema of NAME (what --json and export produce), self-contained: the
    schemas it refers to are bundled into its $defs, so it validates offline.

    \b
    Example:
      amqpscope schema frame > frame.schema.json
    """
    click.echo(schemas.bundled_text(name), nl=False)
