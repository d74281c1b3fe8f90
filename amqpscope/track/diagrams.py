"""The trackers' state diagrams, drawn from the tables of their `rules.py` (as h11 draws its own).

`page()` is docs/developer/state-machines.md, every diagram a Mermaid `stateDiagram-v2` (GitHub
and the docs site show its text; a Mermaid viewer draws it). `tools/state_diagrams.py` writes the
page, and tests/test_state_diagrams.py fails when the committed page is not what the tables draw:
a diagram cannot drift from the rules, because nothing in it is written by hand.

An edge is one (state, next state) pair of a table, labelled with every event that moves it;
a 0-9-1 event is "c2s name" or "s2c name" (the side that sends it), a 1.0 event a frame name
(the side's own frames move its own state). Adoption (mid-stream, lost bytes) is drawn where it
is one edge per state, marked "(adopted)" or "bytes lost"; the tables that apply in any state
(a 0-9-1 close, a handshake step after lost bytes) are listed under the diagram.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from amqpscope.track.amqp091 import rules as r091
from amqpscope.track.amqp10 import rules as r10

#: what a Mermaid state id starts with (a state named `end` would end the diagram)
ID_PREFIX: Final = "s_"


def _id(state: str) -> str:
    """A Mermaid state id for a state's name (letters, digits and underscores)."""
    return ID_PREFIX + "".join(c if c.isalnum() else "_" for c in state)


def _event(key: str | tuple[str, str]) -> str:
    return key if isinstance(key, str) else f"{key[0]} {key[1]}"


def _edges(
    table: Mapping[str, Mapping[str, str]] | Mapping[str, Mapping[tuple[str, str], str]],
) -> dict[tuple[str, str], list[str]]:
    """(state, next state) -> the events that move it, in the table's order."""
    edges: dict[tuple[str, str], list[str]] = {}
    for state, row in table.items():
        for key, after in row.items():
            edges.setdefault((state, after), []).append(_event(key))
    return edges


def mermaid(
    states: Iterable[str],
    edges: dict[tuple[str, str], list[str]],
    starts: list[tuple[str, str]],
) -> str:
    """A `stateDiagram-v2`: every state (so one no event reaches is still drawn), the starts
    ([*] --> state : why) and the edges."""
    lines = ["stateDiagram-v2"]
    for state in states:
        lines.append(f'    state "{state}" as {_id(state)}')
    for state, why in starts:
        lines.append(f"    [*] --> {_id(state)}" + (f" : {why}" if why else ""))
    for (before, after), events in edges.items():
        lines.append(f"    {_id(before)} --> {_id(after)} : {', '.join(events)}")
    return "\n".join(lines)


def _block(title: str, text: str, diagram: str, notes: list[str]) -> str:
    body = [f"## {title}", "", text, "", "```mermaid", diagram, "```"]
    if notes:
        body.append("")
        body.extend(f"- {note}" for note in notes)
    return "\n".join(body)


def _keys(table: Mapping[tuple[str, str], object]) -> str:
    return ", ".join(f"`{_event(key)}`" for key in table)


def amqp091_connection() -> str:
    edges = _edges(r091.CONNECTION_TRANSITIONS)
    for key, after in r091.CONNECTION_ADOPTED_CLOSE.items():
        edges.setdefault((r091.CONNECTION_MID_STREAM, after), []).append(_event(key) + " (adopted)")
    starts = [
        (r091.connection_first(True), "protocol header first"),
        (r091.connection_first(False), "adopted: another frame first"),
    ]
    anywhere = sorted({after for after in r091.CONNECTION_ANY_STATE.values()})
    stays = ", ".join(
        f"`{_event(key)}` in {', '.join(sorted(states))}"
        for key, states in r091.CONNECTION_STAYS.items()
    )
    notes = [
        f"From any state but {r091.CLOSED} (and {r091.CLOSING}, where crossed closes leave it"
        f" as it is): {_keys(r091.CONNECTION_ANY_STATE)} lead to {', '.join(anywhere)}.",
        "After the input lost bytes of the connection, any handshake step moves it from"
        " whatever state it had (the step before it may be in the lost bytes):"
        f" {_keys(r091.CONNECTION_ADOPTED)}.",
        f"Events that leave the state as it is, and the states that allow them: {stays}.",
        "Any other event is `amqp091.unexpected-method` (unless the input did not show the"
        " connection's start or lost bytes of it), and the state does not move.",
    ]
    return _block(
        "0-9-1: the connection",
        "`amqpscope/track/amqp091/rules.py`: `CONNECTION_TRANSITIONS`, in the order"
        " `rules.connection_step` tries the tables.",
        mermaid(r091.CONNECTION_TRANSITIONS, edges, starts),
        notes,
    )


def amqp091_channel() -> str:
    edges = _edges(r091.CHANNEL_TRANSITIONS)
    for state in sorted(r091.CHANNEL_ACTIVE):
        for name, after in r091.CHANNEL_ADOPTED_CLOSE.items():
            edges.setdefault((state, after), []).append(f"{name} (adopted)")
    starts = [
        (r091.channel_first(True), "channel.open first"),
        (r091.channel_first(False), "adopted: another method first"),
    ]
    discards = ", ".join(
        f"{state} discards what {side} sends" for state, side in r091.CHANNEL_DISCARDS.items()
    )
    notes = [
        f"Methods and content are applied in {', '.join(sorted(r091.CHANNEL_ACTIVE))}; {discards}"
        " (frames in flight, counted as discarded).",
        "Modes entered once and never left: "
        + ", ".join(f"`{_event(key)}` → {mode}" for key, mode in r091.MODES.items())
        + ".",
    ]
    return _block(
        "0-9-1: a channel",
        "`CHANNEL_TRANSITIONS` (a number is free again once closed; opening it again starts a"
        " new epoch).",
        mermaid(r091.CHANNEL_TRANSITIONS, edges, starts),
        notes,
    )


def amqp10_connection() -> str:
    edges = _edges(r10.CONNECTION_TRANSITIONS)
    starts = [
        (r10.START, "protocol header first"),
        (r10.CONNECTION_MID_STREAM, "adopted: another frame first"),
    ]
    for state, after in r10.CONNECTION_LOST.items():
        edges.setdefault((state, after), []).append("bytes lost")
    violations = ", ".join(f"{state}: `{code}`" for state, code in r10.CONNECTION_VIOLATION.items())
    return _block(
        "1.0: the connection, per side",
        "`amqpscope/track/amqp10/rules.py`: `CONNECTION_TRANSITIONS`; each side's own frames move"
        " its own state.",
        mermaid(r10.CONNECTION_TRANSITIONS, edges, starts),
        [f"A frame its side's row does not allow is a finding ({violations})."],
    )


def _amqp10_level(
    title: str,
    name: str,
    what: str,
    table: dict[str, dict[str, str]],
    start: str,
    violation: dict[str, str],
) -> str:
    codes = ", ".join(f"{state}: `{code}`" for state, code in violation.items())
    return _block(
        title,
        f"`{name}`: the state is whether the side has {what}.",
        mermaid(table, _edges(table), [(start, "")]),
        [f"A frame its row does not allow is a finding ({codes})."],
    )


#: the lines that bound the drawn part of the page (what is outside them is written by hand)
BEGIN: Final = (
    "<!-- drawn by tools/state_diagrams.py from amqpscope/track/*/rules.py: do not edit"
    " between these lines; tests/test_state_diagrams.py fails when they are not what the"
    " tables draw -->"
)
END: Final = "<!-- end of the drawn diagrams -->"
#: the page's text around the drawn part, when the page does not exist yet
HEAD: Final = (
    "# State machines\n\n"
    "Each tracker's states move only by the tables and step functions of its `rules.py`"
    " (h11's `_state.py` is the model: rules and tables at the top, a machine that knows"
    " nothing of sockets). These diagrams are drawn from those tables by"
    " `amqpscope/track/diagrams.py`; edit the tables, then run"
    " `python3 tools/state_diagrams.py`.\n\n"
)


def drawn() -> str:
    """Every diagram, as the tables draw them (the page's part between BEGIN and END)."""
    parts = [
        amqp091_connection(),
        amqp091_channel(),
        amqp10_connection(),
        _amqp10_level(
            "1.0: session, per side and channel",
            "SESSION_TRANSITIONS",
            "begun a session on the channel (sent its begin, and no end since)",
            r10.SESSION_TRANSITIONS,
            r10.UNMAPPED,
            r10.SESSION_VIOLATION,
        ),
        _amqp10_level(
            "1.0: link, per side and handle",
            "LINK_TRANSITIONS",
            "attached a link to the handle (sent its attach, and no detach since)",
            r10.LINK_TRANSITIONS,
            r10.DETACHED,
            r10.LINK_VIOLATION,
        ),
    ]
    return "\n\n".join(parts)


def committed(text: str) -> str | None:
    """The drawn part of a page's text (None: it has no BEGIN ... END)."""
    if BEGIN not in text or END not in text:
        return None
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n")


def page(text: str | None = None) -> str:
    """The page `text` (docs/developer/state-machines.md) with its drawn part as the tables draw
    it now; a new page when `text` is None or has no drawn part."""
    block = f"{BEGIN}\n\n{drawn()}\n\n{END}"
    if text is None or committed(text) is None:
        return HEAD + block + "\n"
    before, rest = text.split(BEGIN, 1)
    return before + block + rest.split(END, 1)[1]
