"""Lines and tables as rich prints them uncoloured, when nothing needs cutting: without rich.

Importing rich's console costs a piped `summary` about 20 ms, as much as decoding a few thousand
frames, and rich styles nothing when it writes to a pipe. So the summary writes its text here
when every line and table fits the width as it is; whatever would need rich's layout (a line to
cut, a column to narrow or wrap, a wide or combining character, ASCII boxes) goes to rich.
`tests/test_summary_plain.py` holds the two to the same bytes on every capture.

A table here is rich's `Table(show_edge=False)` with its default box (HEAVY_HEAD) and padding
(one space each side of a cell, none at the table's edges unless `pad_edge`): the title left
alone on its line, padded to the table's width; the header; a rule; a line per row.
"""

from __future__ import annotations

from typing import NamedTuple

#: characters besides printable ASCII that the summary writes and that take one cell (rich's
#: `cell_len` of each is 1): arrows, the middle dot, the sparkline blocks
NARROW = frozenset("→·▁▂▃▄▅▆▇█")


class Column(NamedTuple):
    header: str
    justify: str  # "left" or "right"
    min_width: int
    max_width: int | None  # wider text would be cut (or wrapped): rich's to do


def narrow(text: str) -> bool:
    """Every character of `text` printable and one cell wide."""
    if text.isascii():
        return text.isprintable()
    return all(c in NARROW or (c.isascii() and c.isprintable()) for c in text)


def fits(text: str, width: int) -> bool:
    """`text` is a line rich would print as it is on `width` columns (no_wrap, crop)."""
    return len(text) <= width and narrow(text)


def table(
    title: str, columns: list[Column], rows: list[list[str]], width: int, pad_edge: bool
) -> list[str] | None:
    """The lines of the table, or None when rich would lay it out otherwise than at its natural
    width (it does not fit `width`, a cell is wider than its column may be, the title is wider
    than the table) or a character is not one cell wide."""
    if not columns:
        return None
    widths = []
    for i, column in enumerate(columns):
        texts = [column.header, *(row[i] for row in rows)]
        if not all(narrow(text) for text in texts):
            return None
        longest = max(len(text) for text in texts)
        if column.max_width is not None and longest > column.max_width:
            return None
        widths.append(max(longest, column.min_width))
    last = len(columns) - 1
    left = [0 if i == 0 and not pad_edge else 1 for i in range(len(columns))]
    right = [0 if i == last and not pad_edge else 1 for i in range(len(columns))]
    total = sum(widths) + sum(left) + sum(right) + last  # and a divider between columns
    if total > width or len(title) > total:
        return None

    def line(cells: list[str], divider: str) -> str:
        parts = []
        for i, (cell, column) in enumerate(zip(cells, columns, strict=True)):
            if column.justify == "right":  # rich strips a right-justified cell's trailing space
                text = cell.rstrip().rjust(widths[i])
            else:
                text = cell.ljust(widths[i])
            parts.append(" " * left[i] + text + " " * right[i])
        return divider.join(parts)

    rule = "╇".join("━" * (widths[i] + left[i] + right[i]) for i in range(len(columns)))
    head = line([column.header for column in columns], "┃")
    return [title.ljust(total), head, rule, *(line(row, "│") for row in rows)]
