"""Which frames the list shows: all of them, those a display filter accepts, or a fixed set
(a followed delivery). A filtered view tests frames as they arrive (`catch_up`), so live capture
and a still-loading file extend it; one thread at a time tests (the view's lock)."""

from __future__ import annotations

import threading
from array import array
from collections.abc import Callable
from typing import Any

from amqpscope.tui.store import FrameStore


class View:
    """`predicate` None: every frame. `fixed`: exactly these store indexes, never extended."""

    def __init__(
        self,
        label: str = "",
        predicate: Callable[[dict[str, Any]], bool] | None = None,
        fixed: list[int] | None = None,
    ) -> None:
        self.label = label
        self.predicate = predicate
        self.rows: array[int] | None = None
        if fixed is not None:
            self.rows = array("q", fixed)
        elif predicate is not None:
            self.rows = array("q")
        self.fixed = fixed is not None
        self.tested = 0  # store indexes tested so far
        self.lock = threading.Lock()

    @property
    def everything(self) -> bool:
        return self.rows is None

    def count(self, store: FrameStore) -> int:
        return len(store) if self.rows is None else len(self.rows)

    def index(self, row: int) -> int:
        """The store index shown at `row`."""
        return row if self.rows is None else self.rows[row]

    def row_of(self, index: int) -> int | None:
        """The row showing store index `index`, or None when this view does not hold it."""
        if self.rows is None:
            return index
        from bisect import bisect_left

        row = bisect_left(self.rows, index)
        return row if row < len(self.rows) and self.rows[row] == index else None

    def catch_up(self, store: FrameStore, cancelled: Callable[[], bool] = lambda: False) -> bool:
        """Test the frames appended since the last call; False when cancelled part way."""
        if self.predicate is None or self.fixed or self.rows is None:
            return True
        predicate, rows = self.predicate, self.rows
        with self.lock:
            end = len(store)
            records = store.records
            import orjson

            loads = orjson.loads
            i = self.tested
            while i < end:
                if (i & 0x3FFF) == 0 and cancelled():
                    self.tested = i
                    return False
                if predicate(loads(records[i])):
                    rows.append(i)
                i += 1
            self.tested = end
        return True
