"""What a command reads, as its arguments and options say it: FILE..., --format.

Opening is `amqpscope.sources` (a capture or a frame-trace log, told apart by content, raising
typed errors); this module is the click side of it, and keeps the names commands import
(`open_input`, `Input`, `FORMAT_NAMES`) as those of `sources`; several FILEs that are vantage
points (`--inputs`, else told by their content) open as one merged input (`cli.merging`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import click

from amqpscope.cli.common import fail
from amqpscope.sources import FORMAT_NAMES, Input, SourceError, check_paths, open_source

__all__ = [
    "FORMAT_NAMES",
    "Input",
    "files_argument",
    "format_option",
    "open_input",
    "several_files",
    "shown_name",
]


def several_files(_ctx: Any, _param: Any, files: tuple[str, ...]) -> tuple[str, ...]:
    """FILE...'s check, for every command that takes several (and so for -w and the TUI's cut
    too): standard input is read alone, and no file is given twice."""
    try:
        check_paths(files)
    except SourceError as exc:
        fail(str(exc), exc.code)
    return files


def files_argument(fn: Callable[..., Any]) -> Callable[..., Any]:
    """FILE...: one capture or log, the files of one rotated capture (read as one), or vantage
    points of the same traffic (merged: --inputs, --offset, `cli.merging`)."""
    from amqpscope.cli.merging import merge_options

    fn = merge_options(fn)
    return click.argument(
        "files",
        nargs=-1,
        required=True,
        metavar="FILE...",
        # a directory or a file without read permission is unreadable input (1), told when
        # opened; not click's check (readable), which makes it bad usage (2) in four lines
        type=click.Path(path_type=str, readable=False),
        callback=several_files,
    )(fn)


def shown_name(files: Sequence[str]) -> str:
    """The input, named in one line: its path, or the first of several and how many more."""
    if len(files) == 1:
        return files[0]
    return f"{files[0]} (and {len(files) - 1} more)"


def format_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(FORMAT_NAMES),
        default=None,
        help="FILE is a frame-trace log of this format (default: told from its content).",
    )(fn)


def open_input(paths: str | Sequence[str], fmt: str | None = None) -> Any:
    """`sources.open_source` with the command's --inputs and --offset (`cli.merging`): several
    FILEs that are vantage points open as one merged input."""
    from amqpscope.cli.merging import given_offsets, wanted_inputs

    several = not isinstance(paths, str) and len(paths) > 1
    offsets = given_offsets(paths) if several else None
    return open_source(paths, fmt, wanted_inputs(), offsets)
