"""Qpid Proton's printed AMQP values, read back into a typed tree.

Proton prints a frame's performative as text (`@attach(18) [name="x", handle=0x0, ...]`), in two
generations, both read here:

- the new dump (qpid-proton `c/src/core/value_dump.c`, `pn_value_dump_*`): unsigned integers in
  hex (`0x7fff`, `uint0`/`ulong0` as `0x0`), signed ones in decimal, symbols `:name` or
  `:"quoted"` when they are not an identifier, strings `"..."`, binary `b"..."`, described
  lists `@name(code) [field=value, ...]` (null fields left out; every printed value named by
  its position), unknown descriptors `@code ` or `@:symbol `, arrays `@<symbol>[:a, :b]`, maps
  `{key=value, ...}`, `UUID(8-4-4-4-12)`, `D32(..)`/`D64(..)`/`D128(..)` in hex, timestamps as
  the millisecond count, floats as C's `%g`.
- the old inspect (qpid-proton `c/src/core/codec.c`, `pni_inspect_enter/exit`): the same shapes
  but integers in decimal and arrays as `@PN_SYMBOL[...]`.

Text inside quotes comes from `pn_quote_data` (`c/src/core/util.c`): printable ASCII as it is,
every other byte and the backslash as `\\xNN`; a double quote is *not* escaped, so a quote ends
a string only when what follows can follow a value (`,`, `]`, `}`, `=`, the end).

A printed value loses its exact type: `0x5` may have been a ubyte or a ulong. The tree keeps
what the text says (unsigned hex, signed decimal, symbol, string, binary); the encoder
(`amqp10_text.py`) picks widths from the spec's field types.
"""

from __future__ import annotations

import codecs
import re
from typing import Any, Final

# the tree's classes, which the grammars import from here too
from amqpscope.logs.values import (
    Array,
    Binary,
    Decimal,
    Described,
    Fields,
    Hex,
    LogLineEnded,
    LogSyntaxError,
    Map,
    Symbol,
    Uuid,
)

#: what may follow a closing quote (so a `"` inside a string is kept)
_AFTER_VALUE: Final = re.compile(r"\s*(?:[,\]})=]|$)")
_NUMBER: Final = re.compile(
    r"-?(?:0x[0-9a-fA-F]+|(?:\d+\.?\d*(?:[eE][+-]?\d+)?|inf|nan))", re.ASCII
)
_IDENT: Final = re.compile(r"[A-Za-z][A-Za-z0-9_\-]*", re.ASCII)
_NAME_EQ: Final = re.compile(r"([A-Za-z][A-Za-z0-9\-]*)=", re.ASCII)
_DESC_NAME: Final = re.compile(r"([A-Za-z][A-Za-z0-9\-]*)\((\d+)\)\s*", re.ASCII)
_BARE_SYMBOL: Final = re.compile(r"[A-Za-z][A-Za-z0-9\-]*", re.ASCII)
_HEX_ESCAPE: Final = re.compile(r"\\x([0-9a-fA-F]{2})")
_SPACES: Final = re.compile(r" *")
#: a field whose value is a plain number or boolean, followed by the end of the value
_SIMPLE_FIELD: Final = re.compile(
    r"([A-Za-z][A-Za-z0-9\-]*)=(0x[0-9a-fA-F]+|-?\d+|true|false|null)(?=\s*[,\]])", re.ASCII
)
_HEXDIGITS: Final = re.compile(r"[0-9a-fA-F\-]+")


def unquote(text: str) -> bytes:
    """`pn_quote_data`'s output back to bytes (`\\xNN` escapes, the rest ASCII)."""
    if "\\" not in text:
        return text.encode("latin-1", "replace")
    if text.count("\\") == text.count("\\x"):  # each backslash starts \x: C does the work
        try:
            return codecs.escape_decode(text.encode("latin-1"))[0]  # type: ignore[attr-defined,no-any-return]
        except (UnicodeEncodeError, ValueError):
            pass
    out = bytearray()
    pos = 0
    for m in _HEX_ESCAPE.finditer(text):
        out += text[pos : m.start()].encode("latin-1", "replace")
        out.append(int(m.group(1), 16))
        pos = m.end()
    out += text[pos:].encode("latin-1", "replace")
    return bytes(out)


class Reader:
    """One pass over a printed value; `read()` returns it and the position after it."""

    __slots__ = ("decimal_base", "depth", "text")

    MAX_DEPTH: Final = 64

    def __init__(self, text: str, decimal_base: int = 16) -> None:
        self.text = text
        self.depth = 0
        # D32(...)/D64(...): hex in the new dump, a decimal number in the old inspect
        self.decimal_base = decimal_base

    def skip(self, pos: int) -> int:
        text = self.text
        if pos < len(text) and text[pos] == " ":
            return _SPACES.match(text, pos).end()  # type: ignore[union-attr]
        return pos

    def read(self, pos: int) -> tuple[Any, int]:
        text = self.text
        pos = self.skip(pos)
        if pos >= len(text):
            raise LogLineEnded(pos, "value expected, line ended")
        c = text[pos]
        if c == '"':
            raw, pos = self.quoted(pos + 1)
            return raw.decode("utf-8", "replace"), pos
        if c == "b" and text.startswith('b"', pos):
            raw, pos = self.quoted(pos + 2)
            return Binary(raw), pos
        if c == ":":
            if text.startswith(':"', pos):
                raw, pos = self.quoted(pos + 2)
                return Symbol(raw.decode("utf-8", "replace")), pos
            m = _BARE_SYMBOL.match(text, pos + 1)
            if m is None:
                if _AFTER_VALUE.match(text, pos + 1):
                    return Symbol(""), pos + 1  # the old inspect prints an empty symbol so
                raise LogSyntaxError(pos, "symbol expected after ':'")
            return Symbol(m.group()), m.end()
        if c == "[":
            return self.sequence(pos + 1, "]")
        if c == "{":
            items, pos = self.sequence(pos + 1, "}")
            if len(items) % 2:
                raise LogSyntaxError(pos, "map with a key and no value")
            return Map(list(zip(items[::2], items[1::2], strict=True))), pos
        if c == "@":
            return self.described(pos + 1)
        if text.startswith("true", pos):
            return True, pos + 4
        if text.startswith("false", pos):
            return False, pos + 5
        if text.startswith("null", pos):
            return None, pos + 4
        if text.startswith("UUID(", pos):
            return self.uuid(pos + 5)
        if c == "D" and text.startswith(("D32(", "D64(", "D128("), pos):
            return self.decimal(pos)
        m = _NUMBER.match(text, pos)
        if m is not None:
            token = m.group()
            if "0x" in token:
                value = int(token, 16)
                return (Hex(value) if value >= 0 else value), m.end()
            if any(ch in token for ch in ".eEn"):
                return float(token), m.end()
            return int(token), m.end()
        raise LogSyntaxError(pos, f"unexpected {c!r}")

    def quoted(self, pos: int) -> tuple[bytes, int]:
        """The quoted text from `pos` (just past the opening quote) to its closing quote."""
        text = self.text
        start = pos
        while True:
            end = text.find('"', pos)
            if end < 0:
                raise LogLineEnded(start - 1, "quote not closed")
            if _AFTER_VALUE.match(text, end + 1):
                return unquote(text[start:end]), end + 1
            pos = end + 1

    def sequence(self, pos: int, close: str) -> tuple[Any, int]:
        """Elements up to `close`: a list, or a map's keys and values (`=` between them)."""
        text = self.text
        self.depth += 1
        if self.depth > self.MAX_DEPTH:
            raise LogSyntaxError(pos, "values nested too deep")
        items: list[Any] = []
        pos = self.skip(pos)
        if text.startswith(close, pos):
            self.depth -= 1
            return items, pos + 1
        while True:
            value, pos = self.read(pos)
            items.append(value)
            pos = self.skip(pos)
            if pos >= len(text):
                raise LogLineEnded(pos, f"{close!r} expected, line ended")
            c = text[pos]
            if c == close:
                self.depth -= 1
                return items, pos + 1
            if c not in ",=":
                raise LogSyntaxError(pos, f"',' or {close!r} expected")
            pos += 1

    def fields(self, pos: int) -> tuple[Fields, int]:
        """A described list's `[name=value, ...]` (a value without a name is a field past the
        ones Proton knows)."""
        text = self.text
        self.depth += 1
        if self.depth > self.MAX_DEPTH:
            raise LogSyntaxError(pos, "values nested too deep")
        items = Fields()
        pos = self.skip(pos)
        if text.startswith("]", pos):
            self.depth -= 1
            return items, pos + 1
        while True:
            pos = self.skip(pos)
            simple = _SIMPLE_FIELD.match(text, pos)
            if simple is not None:  # the common `name=0x5` / `name=true`: one match, no descent
                items.append((simple.group(1), _simple(simple.group(2))))
                pos = simple.end(2)
            else:
                m = _NAME_EQ.match(text, pos)
                name = None
                if m is not None:
                    name = m.group(1)
                    pos = m.end()
                value, pos = self.read(pos)
                items.append((name, value))
            pos = self.skip(pos)
            if pos >= len(text):
                raise LogLineEnded(pos, "']' expected, line ended")
            if text[pos] == "]":
                self.depth -= 1
                return items, pos + 1
            if text[pos] != ",":
                raise LogSyntaxError(pos, "',' or ']' expected")
            pos += 1

    def described(self, pos: int) -> tuple[Any, int]:
        """After `@`: an array (`<type>[` or `PN_TYPE[`) or a descriptor and its value."""
        text = self.text
        if text.startswith("<", pos):
            end = text.find(">", pos)
            if end < 0 or not text.startswith("[", end + 1):
                raise LogSyntaxError(pos, "array type expected")
            type_name = text[pos + 1 : end]
            items, pos = self.sequence(end + 2, "]")
            return Array(type_name, items), pos
        if text.startswith("PN_", pos):
            m = _IDENT.match(text, pos)
            if m is not None and text.startswith("[", m.end()):
                items, after = self.sequence(m.end() + 1, "]")
                return Array(m.group(), items), after
        m = _DESC_NAME.match(text, pos)
        descriptor: int | str
        name: str | None = None
        if m is not None:
            name, descriptor, pos = m.group(1), int(m.group(2)), m.end()
        else:
            code, pos = self.read(pos)
            if not isinstance(code, (int, str)) or isinstance(code, bool):
                raise LogSyntaxError(pos, "descriptor expected after '@'")
            descriptor = code
        pos = self.skip(pos)
        if text.startswith("[", pos):
            value, pos = self.fields(pos + 1)
        else:
            value, pos = self.read(pos)
        return Described(descriptor, name, value), pos

    def uuid(self, pos: int) -> tuple[Uuid, int]:
        m = _HEXDIGITS.match(self.text, pos)
        end = m.end() if m else pos
        digits = self.text[pos:end].replace("-", "")
        if len(digits) != 32 or not self.text.startswith(")", end):
            raise LogSyntaxError(pos, "UUID(...) expected")
        return Uuid(bytes.fromhex(digits)), end + 1

    def decimal(self, pos: int) -> tuple[Decimal, int]:
        open_paren = self.text.find("(", pos)
        width = int(self.text[pos + 1 : open_paren])
        m = _HEXDIGITS.match(self.text, open_paren + 1)
        end = m.end() if m else open_paren + 1
        if m is None or not self.text.startswith(")", end):
            raise LogSyntaxError(pos, "decimal expected")
        return Decimal(int(self.text[open_paren + 1 : end], self.decimal_base), width), end + 1


def _simple(token: str) -> Any:
    """A token `_SIMPLE_FIELD` matched, as `Reader.read` would read it."""
    first = token[0]
    if first == "t":
        return True
    if first == "f":
        return False
    if first == "n":
        return None
    if "x" in token:
        return Hex(int(token, 16))
    return int(token)


def read_value(text: str, pos: int = 0, old: bool = False) -> tuple[Any, int]:
    """The value printed at `text[pos:]` (`old`: by the old inspect) and the position after it."""
    return Reader(text, 10 if old else 16).read(pos)
