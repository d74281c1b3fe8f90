"""The typed tree a grammar reads a logged value into: what the text says of each value.

A printed value loses its exact type: `0x5` may have been a ubyte or a ulong. The tree keeps
what the text says (unsigned hex, signed decimal, symbol, string, binary, described, map,
array); `amqp10_encode.py` picks widths from the spec's field types, `direct.py` reads the tree
straight into the decoder's shapes. Every grammar builds these (`proton_values.py` first).

Kept apart from the grammars so that those can be compiled with mypyc: these subclass `int`,
`str`, `bytes` and `list`, which mypyc's native classes cannot; here they stay Python classes.
"""

from __future__ import annotations

from typing import Any


class LogSyntaxError(ValueError):
    """The text is not a value Proton prints; `pos` is where reading stopped."""

    def __init__(self, pos: int, why: str) -> None:
        super().__init__(f"{why} at column {pos + 1}")
        self.pos = pos


class LogLineEnded(LogSyntaxError):
    """The value is not finished where the line ends: the line may go on in the next one (a
    logger that wraps long lines)."""


class Hex(int):
    """An integer Proton printed in hex: an unsigned type (ubyte ... ulong)."""

    __slots__ = ()


class Symbol(str):
    __slots__ = ()


class Binary(bytes):
    __slots__ = ()


class Uuid(bytes):
    __slots__ = ()


class Decimal:
    """A decimal32/64/128's bits as Proton printed them in hex; `width` in bits."""

    __slots__ = ("bits", "width")

    def __init__(self, bits: int, width: int) -> None:
        self.bits = bits
        self.width = width


class Map:
    """A map's (key, value) pairs in printed order (keys may be unhashable lists)."""

    __slots__ = ("items",)

    def __init__(self, items: list[tuple[Any, Any]]) -> None:
        self.items = items


class Array:
    """An array: its element type as printed (`symbol`, `PN_SYMBOL`, `uint`) and elements."""

    __slots__ = ("items", "type")

    def __init__(self, type_name: str, items: list[Any]) -> None:
        self.type = type_name
        self.items = items


class Described:
    """A described value: the descriptor (an int code or a `Symbol`), the name Proton gave it,
    and the value; a described list's elements are (field name or None, value) pairs."""

    __slots__ = ("descriptor", "name", "value")

    def __init__(self, descriptor: int | str, name: str | None, value: Any) -> None:
        self.descriptor = descriptor
        self.name = name
        self.value = value


class Fields(list):  # type: ignore[type-arg]
    """The elements of a described list: (field name or None, value) pairs."""

    __slots__ = ()
