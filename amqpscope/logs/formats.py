"""The log formats amqpscope reads: one grammar module each, named as `--format` names them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, NamedTuple

from amqpscope.logs import proton
from amqpscope.logs.lines import Logged


class Format(NamedTuple):
    name: str
    looks_like: Callable[[str], bool]  # cheap: might this line be one of this format's frames
    parse: Callable[[str], Logged | None]


FORMATS: Final[dict[str, Format]] = {
    f.name: f for f in (Format(proton.NAME, proton.looks_like, proton.parse),)
}
#: every name `--format` accepts, including formats whose grammar is still to come
NAMES: Final = tuple(FORMATS)
