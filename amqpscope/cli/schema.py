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
    """Print the JSON Schema of NAME (what --json and export produce).

    \b
    Example:
      amqpscope schema frame > frame.schema.json
    """
    click.echo(schemas.text(name), nl=False)
