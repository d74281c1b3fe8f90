"""Lines like lines read before: a performative's text with its values taken out is the key to
the fields the first text like it made, and a text that finds its key gets them with its own
values put in, without being read.

A trace's lines of one link differ in a few numbers (delivery id and tag, first and last,
credit and windows), and reading a line (a grammar's tree, then `direct.performative`) is most
of a log's cost. One cache (`Cache`, its `Entry`s, and `Made`'s lazy tree) serves two keyings:

- `Shapes`, for any grammar (proton-j, amqpnetlite, pyamqp, go-amqp): it knows no syntax: a
  grammar hands it the text of a performative and a function that reads such text into its
  tree, and the key is the text with every run of digits taken out. The second time a shape
  is seen it is learned, and kept only when that is safe. A run with a leading zero (`0`,
  `00`, `05`) is no value but part of the shape, and stays in the key as it is: a 0 is where
  a grammar's reading may turn (go-amqp's payload size 0 shows it all, other sizes do not;
  rhea's 0 is a value left out), which reading the text again with nonzero numbers cannot
  see, so a text's zeros never take fields learned from a text with other numbers there:
  - the text is read again with every other run of digits replaced by another number (longer, so a
    value's width does not matter), and the two reads must give the same fields in the same
    order, the same `lossy` names, and differ only in top-level fields that one run of digits
    each explains: a uint as the digits' number, or a binary as the digits' ASCII bytes or as
    hex digits (`direct.plain_type` says which fields are plain, so no choice, no `multiple`);
  - a run that explains no field must change nothing (digits in a name or a string would
    change a field no run explains: then the shape is not kept).
- Proton's (`proton.py` learns its entries): it knows Proton's field syntax, and the key is
  the text with the values of named top-level fields taken out (`handle=0x0`, `delivery-tag=
  b"1"`), so that the numbers in names and strings stay part of it.

Put in, a uint past its type's range, or hex digits of odd length, is not taken from the cache
(the line is read, and reported, as before). `tests/test_logs_direct.py` holds the records equal
to the round trip's with and without the cache.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final, final

from amqpscope.codec.amqp10.frames import BODIES, TYPE_SASL
from amqpscope.logs import direct
from amqpscope.logs.lines import Made, Read
from amqpscope.logs.proton_values import unquote
from amqpscope.logs.values import Described, Fields, LogSyntaxError

_DIGITS: Final = re.compile(r"(\d+)", re.ASCII)
_SASL_CODES: Final = frozenset(BODIES[TYPE_SASL])
_SASL_NAMES: Final = frozenset(BODIES[TYPE_SASL].values())
#: how a value taken out of a text makes its field's value
_NUMBER: Final = 1  # digits: the number they write
_ASCII: Final = 2  # digits: a binary of their ASCII bytes (`deliveryTag="12"`)
_HEX: Final = 3  # digits: a binary written in hex digits (`delivery-tag:3132`)
PRINTED: Final = 4  # Proton's uint: `0x1f` or `31` (not a `b"..."`)
QUOTED: Final = 5  # Proton's binary: `b"..."`, escapes and all
_LARGEST: Final = {
    "ubyte": 0xFF,
    "ushort": 0xFFFF,
    "uint": 0xFFFFFFFF,
    "ulong": 0xFFFFFFFFFFFFFFFF,
}
#: what reading a text may raise (a shape whose other numbers do not read is not kept)
_READ_ERRORS: Final = (LogSyntaxError, ValueError, KeyError, IndexError, TypeError, OverflowError)

#: shapes tried first by their pattern: those met last (a trace alternates a few)
_RECENT: Final = 4
#: what a value in a shape is (`Entry.values`)
DIGITS: Final = 1  # `\d+` (ASCII): `Shapes`' runs of digits
PROTON: Final = 2  # `0x[0-9a-fA-F]+|\d+|b"[^"\\]*"`: Proton's uint or binary (`proton._VALUE`)


def _digits_end(text: str, pos: int, size: int) -> int:
    """Where the run of ASCII digits at `pos` ends (`pos`: none)."""
    while pos < size:
        code = ord(text[pos])
        if code < 48 or code > 57:
            break
        pos += 1
    return pos


def _proton_end(text: str, pos: int, size: int) -> int:
    """Where Proton's value at `pos` ends (`pos`: none), as `proton._VALUE` reads it before a
    `,` or `]` (what follows each value in a shape): `0x` and hex digits, decimal digits, or
    `b"..."` without a backslash."""
    if pos + 1 < size and text[pos] == "0" and text[pos + 1] == "x":
        end = pos + 2
        while end < size:
            code = ord(text[end])
            if not (48 <= code <= 57 or 97 <= code <= 102 or 65 <= code <= 70):
                break
            end += 1
        if end > pos + 2:
            return end
        return pos + 1  # `\d+` reads the `0`; the `x` after it is no `,` or `]`
    if pos + 1 < size and text[pos] == "b" and text[pos + 1] == '"':
        close = text.find('"', pos + 2)
        if close < 0 or text.find("\\", pos + 2, close) >= 0:
            return pos
        return close + 1
    return _digits_end(text, pos, size)


@final
class Entry:
    """What a text of one shape makes: the frame's name and fields, the fields holding a dict
    or list (copied for each record), and for each value taken out the field it makes (or "")
    and how (0: none), the largest number it may be; and the shape itself: its text between
    the values (`literals`, one more than the values) and what a value is (`DIGITS`: a run of
    ASCII digits, `PROTON`: a Proton uint or binary), which `match` reads by hand, and the same
    as a pattern, each value a group (what `match` finds; the tests hold the two equal). A text
    matches exactly when taking its values out gives this entry's key."""

    __slots__ = (
        "fields",
        "fixed",
        "hows",
        "largest",
        "literals",
        "lossy",
        "name",
        "nested",
        "pattern",
        "sasl",
        "slots",
        "values",
    )

    def __init__(
        self,
        name: str,
        sasl: bool,
        fields: dict[str, Any],
        slots: list[str],
        hows: list[int],
        largest: list[int],
        lossy: list[str],
        pattern: re.Pattern[str],
        literals: list[str],
        values: int = DIGITS,
        fixed: list[str] | None = None,
    ) -> None:
        self.name = name
        self.sasl = sasl
        self.fields = fields
        self.slots = slots
        self.hows = hows
        self.largest = largest
        self.lossy = lossy
        self.nested = [k for k, v in fields.items() if type(v) is dict or type(v) is list]
        self.pattern = pattern
        self.literals = literals
        self.values = values
        #: `DIGITS`: each run as the shape has it, when it is fixed (a leading zero), else ""
        self.fixed = fixed if fixed is not None else [""] * (len(literals) - 1)

    def match(self, text: str) -> list[str] | None:
        """The values of `text` if it is of this shape (what `pattern.fullmatch(text)` groups),
        else None. By hand: a regex compares a literal a character at a time, and the text of
        a performative is long."""
        literals = self.literals
        first = literals[0]
        pos = len(first)
        if text.find(first, 0, pos) != 0:
            return None
        size = len(text)
        digits = self.values == DIGITS
        fixed = self.fixed
        found: list[str] = []
        for i in range(1, len(literals)):
            start = pos
            pos = _digits_end(text, pos, size) if digits else _proton_end(text, pos, size)
            if pos == start:
                return None
            value = text[start:pos]
            if digits:
                kept = fixed[i - 1]
                if kept != value if kept else value[0] == "0":
                    return None  # a zero where the shape has another number, or other zeros
            found.append(value)
            literal = literals[i]
            end = pos + len(literal)
            if text.find(literal, pos, end) != pos:
                return None
            pos = end
        return found if pos == size else None

    def fill(self, values: Sequence[str], zeros: bool = True) -> dict[str, Any] | None:
        """The fields with `values` (the text's, in order) put in; None when one is not of its
        field's type (the line is read, and reported, as before), or is a 0 and not `zeros`
        (rhea reads a 0 as a value left out)."""
        fields = dict(self.fields)
        for name in self.nested:
            fields[name] = _copy(fields[name])
        hows = self.hows
        slots = self.slots
        for i in range(len(hows)):
            how = hows[i]
            if how == 0:
                continue
            text: str = values[i]
            if how == _NUMBER or how == PRINTED:  # noqa: SIM109 (two int compares, compiled)
                if how == PRINTED and text[0] == "b":
                    return None
                number = int(text, 16) if text.startswith("0x") else int(text)
                if number > self.largest[i] or (number == 0 and not zeros):
                    return None  # not of its type: read, and reported, by the round trip
                fields[slots[i]] = number
            elif how == _ASCII:
                fields[slots[i]] = text.encode().hex()
            elif how == _HEX:
                if len(text) % 2:
                    return None
                fields[slots[i]] = text
            else:
                if text[0] != "b":
                    return None
                fields[slots[i]] = unquote(text[2:-1]).hex()
        return fields


@final
class Cache:
    """Entries by key, and the entries met last, the latest first (tried by their pattern
    before a text is split into its key)."""

    __slots__ = ("entries", "recent")

    #: keys kept; past it the cache starts again (a log of ever new shapes gains nothing)
    SIZE: Final = 4096

    def __init__(self) -> None:
        #: key -> the entry; False: seen once (`Shapes`); None: not safe to keep
        self.entries: dict[str, Entry | bool | None] = {}
        self.recent: list[Entry] = []

    def recalled(self, text: str) -> tuple[Entry, Sequence[str]] | None:
        """The entry met last whose pattern `text` matches, and the values matched."""
        for entry in self.recent:
            values = entry.match(text)
            if values is not None:
                return entry, values
        return None

    def found(self, key: str) -> Entry | None:
        """The entry kept under `key` (now the latest met), if any."""
        found = self.entries.get(key)
        if not isinstance(found, Entry):
            return None
        recent = self.recent
        if len(recent) >= _RECENT:
            recent.pop()
        recent.insert(0, found)
        return found

    def keep(self, key: str, entry: Entry | bool | None) -> None:
        entries = self.entries
        if key not in entries and len(entries) >= self.SIZE:
            entries.clear()
            self.recent.clear()
        entries[key] = entry

    def clear(self) -> None:
        self.entries.clear()
        self.recent.clear()


@final
class Shapes:
    """One grammar's texts by shape, their runs of digits taken out (module-level in each
    grammar: a shape means the same to every reader)."""

    __slots__ = ("cache", "read", "zeros")

    def __init__(self, read: Read, zeros: bool = True) -> None:
        self.read = read
        self.cache = Cache()
        self.zeros = zeros  # False: a 0 put in is not taken from the cache (rhea)

    def made(self, text: str) -> tuple[Made, list[str]] | None:
        """The fields of `text` and the names it cannot show if a text like it was learned,
        else None (read it, then `learn`)."""
        cache = self.cache
        hit = cache.recalled(text)  # patterns hold no NUL
        if hit is None:
            if "\x00" in text:
                return None
            pieces = _DIGITS.split(text)
            entry = cache.found(_key(pieces))
            if entry is None:
                return None
            fields = entry.fill(pieces[1::2], self.zeros)
        else:
            entry = hit[0]
            fields = entry.fill(hit[1], self.zeros)
        if fields is None:
            return None
        lossy = entry.lossy
        return Made(entry.name, entry.sasl, fields, text, self.read), list(lossy) if lossy else []

    def learn(self, text: str, value: Any, lossy: list[str]) -> None:
        """`text` was read as `value` (and `lossy`): the second time its shape is seen, keep
        what it makes when that is safe."""
        if "\x00" in text:
            return
        pieces = _DIGITS.split(text)
        key = _key(pieces)
        entries = self.cache.entries
        if key not in entries:
            self.cache.keep(key, False)  # a shape seen once gains nothing from reading twice
            return
        if entries[key] is not False:
            return
        entries[key] = _entry(self.read, pieces, value, lossy)


def _key(pieces: list[str]) -> str:
    """The key of a text split by `_DIGITS`: its text with a NUL where each run was, and the
    runs with a leading zero (`Entry.fixed`) as they are."""
    key = "\x00".join(pieces[0::2])
    runs = pieces[1::2]
    for run in runs:
        if run[0] == "0":
            return key + "\x01" + " ".join(run if run[0] == "0" else "" for run in runs)
    return key


def _entry(read: Read, pieces: list[str], value: Any, lossy: list[str]) -> Entry | None:
    """The entry of a text (split by `_DIGITS`) read as `value`, or None when its numbers
    cannot safely be put back (see the module's docstring)."""
    if not isinstance(value, Described) or not isinstance(value.value, Fields):
        return None
    sasl = value.descriptor in _SASL_CODES or value.name in _SASL_NAMES
    made = direct.performative(value, sasl)
    if made is None:
        return None
    name, fields = made
    runs = pieces[1::2]
    fixed = [run if run[0] == "0" else "" for run in runs]
    others = [run if fixed[i] else _other(run, i) for i, run in enumerate(runs)]
    text = [pieces[0]]
    for i, other in enumerate(others):
        text.append(other)
        text.append(pieces[2 * i + 2])
    try:
        again, lossy_again = read("".join(text))
    except _READ_ERRORS:
        return None
    if lossy_again != lossy or not isinstance(again, Described):
        return None
    remade = direct.performative(again, sasl)
    if remade is None or remade[0] != name or list(remade[1]) != list(fields):
        return None
    slots = [""] * len(runs)
    hows = [0] * len(runs)
    largest = [0] * len(runs)
    for field, kept in fields.items():
        changed = remade[1][field]
        if changed == kept and type(changed) is type(kept):
            continue
        kind = direct.plain_type(name, field)
        found: list[tuple[int, int]] = []
        for i, run in enumerate(runs):
            other = others[i]
            if fixed[i]:
                continue  # not changed: cannot explain a change
            if kind in _LARGEST:
                if type(kept) is int and kept == int(run) and changed == int(other):
                    found.append((i, _NUMBER))
            elif kind == "binary":
                if kept == run.encode().hex() and changed == other.encode().hex():
                    found.append((i, _ASCII))
                elif kept == run and changed == other:
                    found.append((i, _HEX))
        if len(found) != 1 or slots[found[0][0]]:
            return None  # no run, or more than one, explains the change: not safe
        at, how = found[0]
        slots[at] = field
        hows[at] = how
        largest[at] = _LARGEST.get(kind, 0)
    texts = pieces[0::2]  # no digit in them: each group takes a whole run
    pattern = digits_pattern(texts, fixed)
    return Entry(
        name, sasl, fields, slots, hows, largest, list(lossy), pattern, texts, DIGITS, fixed
    )


def digits_pattern(texts: list[str], fixed: list[str] | None = None) -> re.Pattern[str]:
    """The pattern of a shape whose values are runs of digits and `texts` what is between;
    a run `fixed` (`Entry.fixed`) is only itself, any other has no leading zero."""
    runs = fixed if fixed is not None else [""] * (len(texts) - 1)
    parts = [re.escape(texts[0])]
    for run, text in zip(runs, texts[1:], strict=True):
        parts.append(f"({run})" if run else r"([1-9]\d*)")
        parts.append(re.escape(text))
    return re.compile("".join(parts), re.ASCII)


def _other(run: str, i: int) -> str:
    """Other digits for run `i`: another number than the run's and than every other run's
    (`i` in it), of the same parity of length (hex digits stay hex bytes), within a uint when
    the run is (short runs grow by two digits, so a value's width does not matter)."""
    width = len(run) + 2 if len(run) <= 7 else len(run)
    other = "9" + f"{i:0{width - 1}d}" if width <= 9 else "1" + f"{i:0{width - 1}d}"
    if len(other) % 2 != len(run) % 2:
        other = "9" + other
    return other if other != run else "2" + other[1:]


def _copy(value: Any) -> Any:
    """A fresh copy of a cached field's dict or list (no two records share one)."""
    if type(value) is dict:
        return {k: _copy(v) for k, v in value.items()}
    if type(value) is list:
        return [_copy(v) for v in value]
    return value
