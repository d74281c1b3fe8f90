"""A frame's bytes as `read -x` shows them: 16 bytes a line, offset, hex and ASCII; the one hex
dump (the TUI's bytes pane draws the same one in its own layout, `pane`).

The ASCII column shows printable ASCII only (a dot for anything else), so no byte of a capture
can reach the terminal as a control. The bytes of a secret (a password in a SASL response) are
blanked (`**`) unless secrets are shown; the detail tree says where they are.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

PER_LINE: Final = 16
HIDDEN: Final = "**"


def hexdump(
    data: bytes,
    hide: Iterable[tuple[int, int]] = (),
    base: int = 0,
    indent: str = "    ",
    pane: bool = False,
) -> list[str]:
    """The dump of `data`, offsets counted from `base`; the (offset, length) ranges of `hide`
    (offsets within `data`) are blanked. `pane`: the TUI's layout, `offset  hex  |ascii|` (six
    digits, one run of hex, the ASCII between bars), whose columns the pane highlights."""
    hidden: set[int] = set()
    for offset, length in hide:
        hidden.update(range(max(0, offset), min(len(data), offset + length)))
    digits = max(4, len(f"{base + len(data):x}"))
    out: list[str] = []
    for start in range(0, len(data), PER_LINE):
        chunk = data[start : start + PER_LINE]
        hexes: list[str] = []
        text: list[str] = []
        for i, byte in enumerate(chunk):
            if start + i in hidden:
                hexes.append(HIDDEN)
                text.append("*")
            else:
                hexes.append(f"{byte:02x}")
                text.append(chr(byte) if 0x20 <= byte < 0x7F else ".")
        if pane:
            line = f"{base + start:06x}  {' '.join(hexes):<47}  |{''.join(text):<16}|"
            out.append(indent + line)
            continue
        left = " ".join(hexes[:8])
        right = " ".join(hexes[8:])
        column = f"{left:<23}  {right:<23}"
        out.append(f"{indent}{base + start:0{digits}x}  {column}  {''.join(text)}")
    return out


def carriers_lines(carriers: Iterable[tuple[int, int, int]], indent: str = "    ") -> list[str]:
    """Which packets carried which bytes of a frame: `(packet, frame offset, length)` each."""
    return [
        f"{indent}bytes {offset:04x}-{offset + length - 1:04x} in packet {packet}"
        for packet, offset, length in carriers
        if length > 0
    ]
