"""May a command write this path? One rule for every writer (`read -w`, `live -w`, `export -o`,
`report -o`, the TUI's `w`), so none destroys what it reads or a file it did not make.

No printing and no exit here: `refusal` says why not, in words a one-line error can carry, and
the caller (a click command, the TUI) decides how to say it. `open_new` opens the way the rule
was checked, so a file that appears between the check and the write is not overwritten either.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from typing import IO, Any, Final

#: the name every writer takes for standard output (never a file)
STDOUT: Final = "-"


def same_file(out: str, source: str) -> bool:
    """Whether `out` is `source`, through symbolic and hard links (the same inode): writing it
    would overwrite the input. Standard input/output ("-") is no file."""
    if out == STDOUT or source == STDOUT:
        return False
    try:
        return os.path.samefile(out, source)
    except OSError:  # either missing, or unreadable: not the same file that can be told
        return False


def existing_file(out: str) -> bool:
    """Whether `out` names a regular file already there (through links): one that writing
    would truncate. A device (/dev/null), a FIFO or standard output is written, not replaced."""
    if out == STDOUT:
        return False
    try:
        return stat.S_ISREG(os.stat(out).st_mode)
    except OSError:
        return False


def refusal(out: str, inputs: Iterable[str | None], force: bool = False) -> str | None:
    """Why `out` may not be written (None: it may): it is one of `inputs` (never, even with
    `force`: the input would be gone before it was read), or it is a file already there
    (unless `force`). The words follow "OPTION OUT: ", which the caller puts before them."""
    for source in inputs:
        if source is not None and same_file(out, source):
            shown = "" if source == out else f" ({source})"
            return f"that is the input being read{shown}; write elsewhere"
    if not force and existing_file(out):
        return "that file exists; --force overwrites it"
    return None


def open_new(out: str, force: bool, binary: bool = True) -> IO[Any]:
    """Open `out` for writing after `refusal` allowed it: without `force`, exclusively ("x"),
    so a file made since the check is not truncated (FileExistsError); a device or FIFO is
    opened as it is. OSError as `open` raises it."""
    mode = "w" if force or (os.path.exists(out) and not existing_file(out)) else "x"
    if binary:
        return open(out, mode + "b")
    return open(out, mode, encoding="utf-8")
