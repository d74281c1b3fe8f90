"""The log formats amqpscope reads: one grammar module each, named as `--format` names them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, NamedTuple

from amqpscope.logs import amqpnetlite, goamqp, pika, proton, protonj, pyamqp, rhea, uamqp
from amqpscope.logs.lines import Logged


class Format(NamedTuple):
    name: str
    looks_like: Callable[[str], bool]  # cheap: might this line be one of this format's frames
    parse: Callable[[str], Logged | None]
    #: makes a per-reader object whose `complete(logged)` puts back what the protocol pins
    #: down and the format leaves out (rhea's dropped zeros); None when nothing is left out
    completions: Callable[[], Any] | None = None
    #: why a line `parse` found no frame in is one of its frame lines all the same, its prefix
    #: damaged (a `log.bad-line`, not a skipped line); None when the format cannot tell
    damaged: Callable[[str], str | None] | None = None
    #: the names of the fields a frame line's text shows, where the grammar adds some it does
    #: not show (rhea's zeros); None: the grammar's value holds only those the text shows
    shown: Callable[[str], set[str] | None] | None = None


FORMATS: Final[dict[str, Format]] = {
    f.name: f
    for f in (
        Format(proton.NAME, proton.looks_like, proton.parse, damaged=proton.damaged),
        Format(rhea.NAME, rhea.looks_like, rhea.parse, rhea.Completions, rhea.damaged, rhea.shown),
        Format(pyamqp.NAME, pyamqp.looks_like, pyamqp.parse),
        Format(protonj.NAME, protonj.looks_like, protonj.parse),
        Format(amqpnetlite.NAME, amqpnetlite.looks_like, amqpnetlite.parse),
        Format(pika.NAME, pika.looks_like, pika.parse),
        Format(goamqp.NAME, goamqp.looks_like, goamqp.parse),
        Format(uamqp.NAME, uamqp.looks_like, uamqp.parse),
        # a router's log is Proton's text behind its own prefix: the same grammar
        Format("router", proton.looks_like, proton.parse, damaged=proton.damaged),
    )
}
#: every name `--format` accepts, including formats whose grammar is still to come
NAMES: Final = tuple(FORMATS)
