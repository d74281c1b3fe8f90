"""The centre pane: the timeline of `read`, one row per frame, drawn only where it shows.

A Line API widget: the scroll view is as tall as the view has rows, and `render_line` makes a
row's line when the terminal shows it (`render.timeline.frame_pieces`, the same pieces and
colours `read` prints), so a million frames scroll as fast as fifty. Rows once drawn are cached.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from amqpscope.render.timeline import frame_pieces, rich_text
from amqpscope.tui.store import FrameStore
from amqpscope.tui.view import View

CACHE_ROWS = 4096
CURSOR = Style(reverse=True)


class FrameList(ScrollView):
    """The frames of a `View` of a `FrameStore`, with a cursor."""

    can_focus = True

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "move(-1)", "Up", show=False),
        Binding("down,j", "move(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown,space", "page(1)", "Page down", show=False),
        Binding("home", "ends(0)", "First", show=False),
        Binding("end,G", "ends(1)", "Last", show=False),
    ]

    class Selected(Message):
        """The cursor moved to the frame at store index `index`."""

        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    def __init__(self, store: FrameStore, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.store = store
        self.view = View()
        self.cursor = 0
        self._lines: OrderedDict[int, list[Segment]] = OrderedDict()

    # -- what it shows -------------------------------------------------------------------------
    @property
    def rows(self) -> int:
        return self.view.count(self.store)

    def show(self, view: View, keep: int | None = None) -> None:
        """Show `view`, the cursor on store index `keep` if the view holds it, else its first."""
        self.view = view
        row = None if keep is None else view.row_of(keep)
        self.grew()
        self.go(row or 0)

    def grew(self) -> None:
        """Frames were appended (or the view changed): size the scroll area to the rows."""
        self.virtual_size = Size(self.size.width, self.rows)
        self.refresh()

    def selected(self) -> int | None:
        """The store index under the cursor."""
        return self.view.index(self.cursor) if self.cursor < self.rows else None

    def go(self, row: int, announce: bool = True) -> None:
        """Put the cursor on `row` (clamped) and scroll it into sight."""
        rows = self.rows
        self.cursor = max(0, min(row, rows - 1)) if rows else 0
        height = max(self.scrollable_content_region.height, 1)
        top = self.scroll_offset.y
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False)
        elif self.cursor >= top + height:
            self.scroll_to(y=self.cursor - height + 1, animate=False)
        self.refresh()
        if announce and rows:
            self.post_message(self.Selected(self.view.index(self.cursor)))

    # -- keys and mouse ------------------------------------------------------------------------
    def action_move(self, step: int) -> None:
        self.go(self.cursor + step)

    def action_page(self, pages: int) -> None:
        self.go(self.cursor + pages * max(self.scrollable_content_region.height - 1, 1))

    def action_ends(self, end: int) -> None:
        self.go(self.rows - 1 if end else 0)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is not None:
            self.go(self.scroll_offset.y + offset.y)

    def on_resize(self, _event: events.Resize) -> None:
        self.virtual_size = Size(self.size.width, self.rows)

    # -- drawing -------------------------------------------------------------------------------
    def _segments(self, index: int) -> list[Segment]:
        cached = self._lines.get(index)
        if cached is not None:
            self._lines.move_to_end(index)
            return cached
        frame = self.store.frame(index)
        text = rich_text(frame_pieces(frame, self.store.first_ts or 0.0))
        text.no_wrap = True
        segments = [s for s in text.render(self.app.console) if s.text != "\n"]
        self._lines[index] = segments
        if len(self._lines) > CACHE_ROWS:
            self._lines.popitem(last=False)
        return segments

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        row = scroll_y + y
        width = self.scrollable_content_region.width
        if row >= self.rows:
            return Strip.blank(width, self.rich_style)
        strip = Strip(self._segments(self.view.index(row)))
        strip = strip.crop_extend(scroll_x, scroll_x + width, self.rich_style)
        if row == self.cursor:
            strip = strip.apply_style(CURSOR)
        return strip
