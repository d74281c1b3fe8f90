"""Several FILEs as vantage points: the CLI's options of them (the opening and merging are
`sources.open_source`'s and `amqpscope.merge`'s).

`--inputs auto|rotated|vantage` says what several FILEs are (auto: told by their content,
`merge.kind`), `--offset B=+0.18` sets an input's clock offset. Both are kept in click's
context by `merge_options` (the commands' signatures do not change), and `cli.inputs.open_input`
hands them to `sources.open_source`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

import click

from amqpscope.merge.kind import AUTO, MODES
from amqpscope.sources import letter

if TYPE_CHECKING:
    pass

_MODE: Final = "amqpscope.inputs"
_OFFSETS: Final = "amqpscope.offsets"
#: `NAME=SECONDS`, the seconds signed or not
_OFFSET: Final = re.compile(r"^(?P<name>[^=]+)=(?P<seconds>[+-]?(\d+(\.\d*)?|\.\d+))$")


def _keep(key: str) -> Callable[[click.Context, Any, Any], Any]:
    def callback(ctx: click.Context, _param: Any, value: Any) -> Any:
        ctx.meta[key] = value
        return value

    return callback


def merge_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--inputs and --offset, kept in click's context (no parameter of the command)."""
    fn = click.option(
        "--offset",
        "offsets",
        multiple=True,
        metavar="INPUT=SECONDS",
        expose_value=False,
        callback=_keep(_OFFSETS),
        help="With several FILEs as vantage points: INPUT's clock is SECONDS ahead (INPUT: its"
        " letter, A for the first FILE, or its path); the estimate is not used.",
    )(fn)
    return click.option(
        "--inputs",
        type=click.Choice(MODES),
        default=AUTO,
        show_default=True,
        expose_value=False,
        callback=_keep(_MODE),
        help="Several FILEs are the pieces of one rotated capture (read one after the other) or"
        " vantage points of the same traffic (captures from several hosts, logs: merged into"
        " one timeline, each frame once, clocks aligned); auto tells by whether their times"
        " overlap.",
    )(fn)


def _meta(key: str, default: Any) -> Any:
    ctx = click.get_current_context(silent=True)
    return ctx.meta.get(key, default) if ctx is not None else default


def given_offsets(paths: Sequence[str]) -> dict[str, float]:
    """--offset's values by input letter; a usage error (exit 2) for a name no input has."""
    out: dict[str, float] = {}
    for text in _meta(_OFFSETS, ()):
        m = _OFFSET.match(text.strip())
        if m is None:
            raise click.BadParameter(f"{text!r}: not INPUT=SECONDS", param_hint="'--offset'")
        name = m.group("name").strip()
        found = [
            letter(n)
            for n, path in enumerate(paths)
            if name in (letter(n), path, os.path.basename(path))
        ]
        if len(found) != 1:
            names = ", ".join(f"{letter(n)} ({p})" for n, p in enumerate(paths))
            raise click.BadParameter(
                f"{name!r} names no single input (the inputs: {names})", param_hint="'--offset'"
            )
        out[found[0]] = float(m.group("seconds"))
    return out


def wanted_inputs() -> str:
    """--inputs as given (auto when the command has no such option)."""
    return str(_meta(_MODE, AUTO))


__all__ = ["given_offsets", "merge_options", "wanted_inputs"]
