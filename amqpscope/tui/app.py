"""The Textual app: tree (left), frame list (centre), detail and bytes (below), filter bar.

It wires, it does not decode: a `loader` function reads frames into a `FrameStore` in a worker
thread, the UI polls it, and every pane draws from the store's records with render's pieces.
The seams (`seams`) are the functions the -V tree, -x bytes, diagnoses and -w writer replace.
"""

from __future__ import annotations

import os
import sys
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from functools import partial
from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, ScrollableContainer, Vertical
from textual.widgets import Footer, Input, Static, Tree
from textual.widgets.tree import TreeNode
from textual.worker import get_current_worker

from amqpscope.diagnose.redelivery import Redeliveries
from amqpscope.filter import FilterError, compile_filter
from amqpscope.render.lines import safe
from amqpscope.tui import seams
from amqpscope.tui.follow import (
    Publish,
    deliveries_of,
    delivery_of,
    follow,
    follow_publish,
    owner_of,
    peer_channels,
    publish_of,
    same_message,
)
from amqpscope.tui.framelist import FrameList
from amqpscope.tui.loader import Loading
from amqpscope.tui.scopes import Node, build_tree, mark_findings, walk
from amqpscope.tui.screens import ConfirmScreen, DiagnosesScreen, HelpScreen, PromptScreen
from amqpscope.tui.view import View

#: nodes of one frame's detail tree drawn (a map of thousands of headers is cut)
MAX_DETAIL_NODES = 3000
POLL_SECONDS = 0.1
#: levels of a frame's detail tree shown open (the frame, its AMQP frame, its arguments)
DETAIL_OPEN_DEPTH = 3
#: how long quitting waits for the reader to stop (a live capture flushes its last packets)
READER_JOIN_SECONDS = 5.0
#: a tree of up to this many nodes opens whole; a bigger one shows its connections
OPEN_NODES = 200

CSS = """
#main { height: 1fr; }
#scopes { width: 30%; min-width: 24; border-right: solid $primary-darken-2; }
#right { width: 1fr; }
#frames { height: 1fr; overflow-x: hidden; }
#lower { height: 40%; border-top: solid $primary-darken-2; }
#detail { width: 1fr; }
#bytes-box { width: 1fr; border-left: solid $primary-darken-2; }
#bytes { width: auto; }
#filter-row { height: auto; display: none; }
#filter-row.open { display: block; }
#filter { border: none; height: 1; padding: 0 1; }
#filter-error { height: auto; color: $error; }
#status { height: 1; background: $boost; }
HelpScreen, PromptScreen, ConfirmScreen, DiagnosesScreen { align: center middle; }
#help { width: auto; max-width: 90%; height: auto; border: round $primary; padding: 0 1;
        background: $surface; }
#prompt { width: 70%; height: auto; border: round $primary; background: $surface; }
#diagnoses-box { width: 90%; height: 80%; border: round $primary; background: $surface; }
#diagnoses { height: 1fr; }
"""


class AmqpScope(App[int]):
    """`loader(loading)` fills `loading` (run in a thread); `capture_path` is the file `w` cuts
    from (None: no file to cut from)."""

    TITLE = "amqpscope"
    CSS = CSS
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "filter", "Filter"),
        Binding("escape", "clear", "All frames", show=False),
        Binding("n", "match(1)", "Next match", show=False),
        Binding("N", "match(-1)", "Prev match", show=False),
        Binding("e", "flagged(1)", "Next finding", show=False),
        Binding("E", "flagged(-1)", "Prev finding", show=False),
        Binding("g", "goto", "Go to"),
        Binding("d", "diagnoses", "Diagnoses"),
        Binding("f", "follow", "Follow"),
        Binding("w", "write", "Write"),
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
    ]

    def __init__(
        self,
        loader: Callable[[Loading], None],
        capture_path: str | tuple[str, ...] | None = None,
        title: str = "",
        on_exit: Callable[[], None] | None = None,
        show_secrets: bool = False,
        keylog: str | None = None,
        redact_bodies: bool = False,
    ) -> None:
        super().__init__()
        self.loading = Loading()
        self.store = self.loading.store
        self.loader = loader
        self.capture_path = capture_path
        self.sub_title = safe(title)
        self.on_exit_hook = on_exit
        self._seen = -1
        self._summary_version = 0
        self._reported_error = False
        self.tree_nodes: list[Node] = []
        self.failure = ""  # an unexpected error, said in one line by the CLI
        self._bytes: tuple[bytes, int] = (b"", 0)  # the selected frame's bytes kept, its size
        self._hidden: list[tuple[int, int]] = []  # its secrets' bytes, blanked in the dump
        self.show_secrets = show_secrets
        self.keylog = keylog  # --keylog's path: `w`'s pass decrypts with it as the loader did
        self.redact_bodies = redact_bodies  # the bodies' bytes blanked, their fields dropped
        #: redeliveries linked to their earlier deliveries, fed the store's records up to
        #: `_linked` when `f` first needs them (and the new ones on each `f` after)
        self.redeliveries = Redeliveries()
        self._linked = 0
        #: the last filter applied, which n / N search in whatever the list shows
        self.search: View | None = None

    def _handle_exception(self, error: Exception) -> None:
        """Textual restores the terminal and prints a traceback; the CLI's promise is one line
        (`failure`), so the traceback is dropped."""
        self.failure = f"{type(error).__name__}: {error}"
        super()._handle_exception(error)
        if "debug" not in self.features:
            self._exit_renderables.clear()

    # -- layout --------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        # the panes are kept, not queried: a query asks the screen on top (a pop-up)
        self.scopes: Tree[str] = Tree(Text("connections"), id="scopes")
        self.scopes.show_root = False
        self.frames = FrameList(self.store, id="frames")
        self.detail: Tree[Any] = Tree(Text("frame"), id="detail")
        self.bytes_pane = Static(Text(""), id="bytes", markup=False)
        self.filter_row = Vertical(id="filter-row")
        self.filter_input = Input(placeholder='-Y filter, e.g. name == "transfer"', id="filter")
        self.filter_error = Static(Text(""), id="filter-error", markup=False)
        self.status = Static(Text("reading…"), id="status", markup=False)
        with Horizontal(id="main"):
            yield self.scopes
            with Vertical(id="right"):
                yield self.frames
                with Horizontal(id="lower"):
                    yield self.detail
                    with ScrollableContainer(id="bytes-box"):
                        yield self.bytes_pane
        with self.filter_row:
            yield self.filter_input
            yield self.filter_error
        yield self.status
        yield Footer()

    def on_mount(self) -> None:
        self.loading.on_batch = self._catch_up
        # a thread of its own, not a Textual worker: the app's shutdown waits for its workers,
        # and a live capture's reader ends only when told to (on_unmount)
        self.reader = threading.Thread(target=self._load, name="amqpscope-reader", daemon=True)
        self.reader.start()
        self.set_interval(POLL_SECONDS, self.poll)
        self.frames.focus()

    def _load(self) -> None:
        try:
            self.loader(self.loading)
        except Exception as exc:  # said on the status line, not raised into nowhere
            self.loading.error = f"internal error: {type(exc).__name__}: {exc}"
            self.loading.done = True

    def _catch_up(self) -> None:
        """In the loader's thread, after each batch: the filtered view tests the new frames
        (and the filter n / N search in, when the list shows something else)."""
        shown, search = self.frames.view, self.search
        shown.catch_up(self.store)
        if search is not None and search is not shown:
            search.catch_up(self.store)

    def on_unmount(self) -> None:
        self.loading.stop()
        if self.on_exit_hook is not None:
            self.on_exit_hook()
        self.reader.join(READER_JOIN_SECONDS)

    # -- polling the loader --------------------------------------------------------------------
    def poll(self) -> None:
        loading, frames = self.loading, self.frames
        total = len(self.store)
        if total != self._seen:
            first = self._seen <= 0 < total
            self._seen = total
            frames.grew()
            if first:  # the detail of the row under the cursor (where the reader may have put it)
                frames.go(frames.cursor)
        if loading.summary_version != self._summary_version and loading.summary is not None:
            self._summary_version = loading.summary_version
            self._fill_tree(loading.summary)
        if loading.error and not self._reported_error:
            self._reported_error = True
            self.notify(safe(loading.error), severity="error", markup=False, timeout=30)
        self._status()

    def _status(self) -> None:
        loading, frames = self.loading, self.frames
        total = len(self.store)
        parts = [f"{total:,} frames"]
        if not frames.view.everything:
            parts.append(f"{frames.rows:,} shown: {frames.view.label}")
        if self.search is not None and self.search is not frames.view:
            parts.append(f"n/N: {self.search.label}")
        if not loading.done:
            read, size = loading.position
            parts.append(f"reading {100 * read // size}%" if size else "reading…")
        elif loading.error:
            parts.append(f"stopped: {loading.error}")
        findings = len(self.store.flagged)
        if findings:
            parts.append(f"{findings} with findings")
        row = frames.cursor + 1 if frames.rows else 0
        parts.append(f"row {row:,}")
        self.status.update(Text(safe(" · ".join(parts)), no_wrap=True))

    # -- the tree ------------------------------------------------------------------------------
    def _fill_tree(self, summary: dict[str, Any]) -> None:
        nodes = build_tree(summary)
        flagged = [self.store.record(i) for i in self.store.flagged[:20000]]
        unplaced: dict[int, int] = {}
        for found in self.loading.findings:
            if found.conn is not None and found.frame is None:
                unplaced[found.conn] = unplaced.get(found.conn, 0) + 1
        mark_findings(nodes, flagged, unplaced)
        shape = [(n.label, n.findings) for n in walk(nodes)]
        if shape == [(n.label, n.findings) for n in walk(self.tree_nodes)] and self.tree_nodes:
            return  # nothing the tree shows changed: keep what is open
        self.tree_nodes = nodes
        tree = self.scopes
        tree.clear()
        everything_open = len(shape) <= OPEN_NODES

        def add(parent: TreeNode[str], node: Node) -> None:
            label = Text()
            if node.findings:  # first: a label is often cut by the pane's width
                label.append(f"⚑{node.findings} ", style="bold red")
            label.append(node.label)
            if node.children:
                child = parent.add(
                    label, data=node.expression, expand=everything_open or node.kind == "connection"
                )
                for sub in node.children:
                    add(child, sub)
            else:
                parent.add_leaf(label, data=node.expression)

        for node in nodes:
            add(tree.root, node)
        tree.root.expand()

    def on_tree_node_selected(self, event: Tree.NodeSelected[str]) -> None:
        if event.control.id != "scopes" or not event.node.data:
            return
        self.filter_input.value = event.node.data
        self.apply_filter(event.node.data)

    # -- the filter ----------------------------------------------------------------------------
    def action_filter(self) -> None:
        self.filter_row.add_class("open")
        self.filter_input.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter" and self.apply_filter(event.value):
            self.frames.focus()

    def apply_filter(self, text: str) -> bool:
        """Show the frames `text` accepts; False (and the error shown) when it does not parse."""
        text = text.strip()
        if not text:
            self.search = None
            self._all()
            return True
        try:
            predicate = compile_filter(text)
        except FilterError as exc:
            pointer = " " * (exc.column - 1) + "^"
            self.say(f"{text}\n{pointer}\n-Y: {exc}")
            self.filter_row.add_class("open")
            return False
        self.say("")
        self.search = View(text, predicate)
        self._filter(self.search)
        return True

    def say(self, text: str) -> None:
        """The line under the filter bar: a filter's error, or what is followed; none if empty."""
        self.filter_error.update(Text("\n".join(safe(line) for line in text.split("\n"))))
        self.filter_error.display = bool(text)

    @work(thread=True, exclusive=True, group="filter")
    def _filter(self, view: View) -> None:
        worker = get_current_worker()
        if view.catch_up(self.store, lambda: worker.is_cancelled):
            self.call_from_thread(self._show, view)

    def _show(self, view: View) -> None:
        frames = self.frames
        frames.show(view, keep=frames.selected())
        self._status()

    def action_clear(self) -> None:
        """Every frame again; the filter stays what n / N search for (and / edits)."""
        self._all()

    def _all(self) -> None:
        self.say("")
        self.filter_row.remove_class("open")
        self._show(View())

    # -- moving about --------------------------------------------------------------------------
    def jump(self, number: int) -> bool:
        """Put the cursor on frame `number`, showing every frame if the view lacks it."""
        index = self.store.index_of(number)
        if index is None:
            self.notify(f"no frame {number}", severity="warning", markup=False)
            return False
        frames = self.frames
        row = frames.view.row_of(index)
        if row is None:  # the filter's text stays in the bar: what n / N search for
            self.say("")
            self.filter_row.remove_class("open")
            frames.show(View(), keep=index)
        else:
            frames.go(row)
        frames.focus()
        self._status()
        return True

    def action_match(self, step: int) -> None:
        """The next (step 1) or previous (-1) frame the filter accepts, from the cursor; every
        frame is shown when the list hides it (a follow, or Esc)."""
        if self.search is None:
            self.notify("no filter to match: / sets one", markup=False)
            return
        self._match(self.search, step)

    @work(thread=True, exclusive=True, group="search")
    def _match(self, search: View, step: int) -> None:
        # a filter cut short (a follow cancelled its worker) is tested to the end first
        if search.catch_up(self.store, lambda: get_current_worker().is_cancelled):
            self.call_from_thread(self._matched, search, step)

    def _matched(self, search: View, step: int) -> None:
        frames, rows = self.frames, search.rows
        assert rows is not None
        here = frames.selected()
        if step > 0:
            at = 0 if here is None else bisect_right(rows, here)
            index = rows[at] if at < len(rows) else None
        else:
            at = len(rows) if here is None else bisect_left(rows, here)
            index = rows[at - 1] if at > 0 else None
        if index is None:
            self.notify(f"no more frames matching {safe(search.label)} this way", markup=False)
            return
        row = frames.view.row_of(index)
        if row is None:
            self.jump(self.store.numbers[index])
        else:
            frames.go(row)
            frames.focus()
            self._status()

    def action_flagged(self, step: int) -> None:
        """The next (step 1) or previous (-1) frame with a finding that the list shows."""
        frames, flagged = self.frames, self.store.flagged
        here = frames.selected()
        if here is None or not flagged:
            self.notify("no frame with a finding", markup=False)
            return
        if step > 0:
            candidates = flagged[bisect_right(flagged, here) :]
        else:
            candidates = flagged[: bisect_left(flagged, here)][::-1]
        for index in candidates:
            row = frames.view.row_of(index)
            if row is not None:
                frames.go(row)
                return
        self.notify("no more frames with findings this way", markup=False)

    def action_goto(self) -> None:
        def answer(value: str | None) -> None:
            if value is None:
                return
            try:
                self.jump(int(value.strip()))
            except ValueError:
                self.notify(f"not a frame number: {safe(value)}", severity="error", markup=False)

        self.push_screen(PromptScreen("Go to frame number:"), answer)

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_diagnoses(self) -> None:
        loading = self.loading
        found = loading.diagnoses
        if found is None:  # still reading: the stalls seen so far, and the trackers' findings
            reading = True
            found = list(loading.stalls)
            notes = seams.diagnoses(self._summary_with_unplaced())
        else:  # and the input's own (a log's bad lines, a capture cut short): no diagnosis has them
            reading = False
            own = [f.to_json() for f in loading.findings if f.conn is None and f.frame is None]
            notes = seams.diagnoses({"findings": own})

        def answer(number: int | None) -> None:
            if number is not None:
                self.jump(number)

        self.push_screen(DiagnosesScreen(found, notes, reading), answer)

    def _summary_with_unplaced(self) -> dict[str, Any]:
        summary = dict(self.loading.summary or {})
        known = {
            (f.get("code"), f.get("frame"), f.get("packet")) for f in summary.get("findings", ())
        }
        extra = [
            f.to_json() for f in self.loading.findings if (f.code, f.frame, f.packet) not in known
        ]
        summary["findings"] = [*summary.get("findings", ()), *extra]
        return summary

    # -- follow --------------------------------------------------------------------------------
    def action_follow(self) -> None:
        index = self.frames.selected()
        if index is None:
            return
        store = self.store
        record = store.record(index)
        conn = record.get("conn", 0)
        earlier = ((i, store.record(i)) for i in range(index - 1, -1, -1) if store.conns[i] == conn)
        owner = owner_of(record, earlier)  # a content frame: the method it is the content of
        if owner is not None:
            index, record = owner, store.record(owner)
        peers = peer_channels(self.loading.summary or {})
        publish = publish_of(record, index)
        if publish is not None:
            self._follow_publish(publish, peers)
            return
        delivery = delivery_of(record, peers)
        if delivery is None:
            self.notify(
                "not a frame of a delivery or a publish (a transfer, disposition, publish,"
                " deliver, get-ok, their content, ack, nack or reject)",
                severity="warning",
                markup=False,
            )
            return
        self._follow(delivery, index, peers)

    @work(thread=True, exclusive=True, group="filter")
    def _follow_publish(self, publish: Publish, peers: Any) -> None:
        """The publish, its content, return and confirm; then each delivery of the message
        (and the same message's redeliveries), followed as `f` follows a delivery."""
        store, worker = self.store, get_current_worker()
        end = len(store)
        conns, raw = store.conns, store.records
        mine = ((i, store.record(i)) for i in range(end) if conns[i] == publish.conn)
        rows, message = follow_publish(publish, mine)
        label = publish.label()
        if message is None:
            label += " (its content is not in the capture whole: its deliveries are not known)"
        else:
            kinds = (b'"message"', b'"basic.deliver"', b'"basic.get-ok"')
            carrying = (  # the records `deliveries_of` reads; a cheap look at the bytes first
                (i, store.record(i)) for i in range(end) if any(kind in raw[i] for kind in kinds)
            )
            firsts = deliveries_of(message, publish.index, carrying)
            delivered = list(firsts)
            if firsts and self._link(end, lambda: worker.is_cancelled):
                for first in firsts:
                    number = store.numbers[first]
                    for other in same_message(number, self.redeliveries.links):
                        at = store.index_of(other)
                        if at is not None and at not in delivered:
                            delivered.append(at)
            for at in delivered:
                found = delivery_of(store.record(at), peers)
                if found is not None:
                    rows = sorted({*rows, *self._delivery(found, at, peers, end)})
            numbers = ", ".join(str(store.numbers[at]) for at in sorted(delivered))
            if delivered:
                label += f", delivered at frame{'s' if len(delivered) > 1 else ''} {numbers}"
            else:
                label += ", delivered nowhere in this capture"
        if not worker.is_cancelled:
            self.call_from_thread(self._followed, View(label, fixed=rows), label)

    @work(thread=True, exclusive=True, group="filter")
    def _follow(self, delivery: Any, index: int, peers: Any) -> None:
        store, worker = self.store, get_current_worker()
        end = len(store)
        rows = self._delivery(delivery, index, peers, end)
        label = delivery.label()
        if rows and self._link(end, lambda: worker.is_cancelled):
            first = store.numbers[rows[0]]  # the deliver, get-ok or first transfer
            others = [n for n in same_message(first, self.redeliveries.links) if n != first]
            for number in others:  # the same message's other deliveries, each followed
                at = store.index_of(number)
                found = None if at is None else delivery_of(store.record(at), peers)
                if at is not None and found is not None:
                    rows = sorted({*rows, *self._delivery(found, at, peers, end)})
            if others:
                where = ", ".join(str(n) for n in others)
                frames = "frame" if len(others) == 1 else "frames"
                label += f" + the same message delivered at {frames} {where}"
        if not worker.is_cancelled:
            self.call_from_thread(self._followed, View(label, fixed=rows), label)

    def _delivery(self, delivery: Any, index: int, peers: Any, end: int) -> list[int]:
        """The store indexes of the frames of `delivery`, which holds index `index`."""
        store, conns = self.store, self.store.conns
        records = ((i, store.record(i)) for i in range(end) if conns[i] == delivery.conn)
        return follow(delivery, index, records, peers)

    def _link(self, end: int, cancelled: Callable[[], bool]) -> bool:
        """Feed the redelivery links the records up to `end`; False when cancelled part way
        (what was fed stays fed)."""
        store, feed = self.store, self.redeliveries.feed
        while self._linked < end:
            if (self._linked & 0x3FFF) == 0 and cancelled():
                return False
            feed(store.record(self._linked))
            self._linked += 1
        return True

    def _followed(self, view: View, label: str) -> None:
        self.say(label)
        self.filter_row.add_class("open")
        self._show(view)

    # -- write ---------------------------------------------------------------------------------
    def action_write(self) -> None:
        """Ask for a file, refuse the capture being read, ask before replacing a file that
        exists; every message names the file."""
        if self.capture_path is None:
            self.notify("nothing to cut from: no capture file", severity="error", markup=False)
            return

        def confirmed(path: str, yes: bool | None) -> None:
            if yes:
                self._write(path, overwrite=True)
            else:
                self.notify(safe(f"not written: {path} exists and was kept"), markup=False)

        def answer(path: str | None) -> None:
            path = (path or "").strip()
            if not path:
                return
            refused = seams.refused_output(self.capture_path or (), path)
            if refused:
                self.notify(safe(refused), severity="error", markup=False)
            elif os.path.lexists(path):
                question = f"{path} exists. Replace it with the cut?"
                self.push_screen(ConfirmScreen(question), partial(confirmed, path))
            else:
                self._write(path)

        self.push_screen(
            PromptScreen("Write the shown frames' packets to (pcap):", "cut.pcap"), answer
        )

    @work(thread=True, exclusive=True, group="write")
    def _write(self, path: str, overwrite: bool = False) -> None:
        store, view = self.store, self.frames.view
        count = view.count(store)
        if not count:
            message = f"nothing written to {path}: no frames shown"
            self.call_from_thread(self.notify, safe(message), markup=False)
            return
        places = {store.place(view.index(row)) for row in range(count)}
        try:
            assert self.capture_path is not None
            packets, frames, lost = seams.write_cut(
                self.capture_path, places, path, self.show_secrets, self.keylog, overwrite
            )
        except Exception as exc:  # the writer's error, said in one line, with the file's name
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            message = f"not written to {path}: {reason}"
            self.call_from_thread(self.notify, safe(message), severity="error", markup=False)
            return
        message = f"wrote {packets} packets carrying {frames} frames to {path}"
        if lost:
            message += f"; {lost} packets of longer frames were no longer held"
        self.call_from_thread(self.notify, safe(message), markup=False)

    # -- the detail ----------------------------------------------------------------------------
    def on_frame_list_selected(self, event: FrameList.Selected) -> None:
        record = self.store.record(event.index)
        data = self.store.data[event.index]
        self._status()
        root, hidden = seams.detail_tree(record, data, self.show_secrets, self.redact_bodies)
        tree = self.detail
        tree.clear()
        tree.root.set_label(Text(seams.node_text(root)))
        budget = [MAX_DETAIL_NODES]

        def add(parent: TreeNode[Any], node: seams.DetailNode, depth: int) -> None:
            for child in node["children"]:
                if budget[0] <= 0:
                    parent.add_leaf(Text("… cut (too many fields to draw)"))
                    return
                budget[0] -= 1
                label = Text(seams.node_text(child))
                if child["children"]:
                    opened = depth < DETAIL_OPEN_DEPTH or child["name"] == "fields"
                    sub = parent.add(label, data=child, expand=opened)
                    add(sub, child, depth + 1)
                else:
                    parent.add_leaf(label, data=child)

        add(tree.root, root, 0)
        tree.root.expand()
        self._bytes = (data, int(record.get("size", len(data)) or 0))
        self._hidden = hidden
        self._dump()

    def _dump(self, start: int | None = None, length: int | None = None) -> None:
        """The bytes pane, the field at `start` (its `length` bytes) highlighted."""
        data, size = self._bytes
        text = Text("\n".join(seams.hex_lines(data, size, self._hidden)), no_wrap=True)
        if start is not None and length and data:
            for at in range(start, min(start + length, len(data), seams.MAX_DUMP)):
                line, column = divmod(at, 16)
                base = line * (seams.DUMP_WIDTH + 1)  # and its line break
                hex_at = base + seams.HEX_COLUMN + 3 * column
                text.stylize("reverse", hex_at, hex_at + 2)
                ascii_at = base + seams.ASCII_COLUMN + column
                text.stylize("reverse", ascii_at, ascii_at + 1)
        self.bytes_pane.update(text)

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[Any]) -> None:
        """A field of the detail tree under the cursor: its bytes highlighted, when the tree
        knows where they are (the -V tree's offsets; the --json fields have none)."""
        if event.control is not self.detail:
            return
        node = event.node.data
        if isinstance(node, dict) and node.get("offset") is not None:
            self._dump(int(node["offset"]), int(node.get("length") or 0))
        else:
            self._dump()


def terminal_problem() -> str | None:
    """Why a full-screen UI cannot run here, or None when it can."""
    term = os.environ.get("TERM", "")
    if not sys.stdout.isatty() or not sys.stdin.isatty():
        return "tui needs a terminal (standard input and output are not one); use `amqpscope read`"
    if term in ("", "dumb", "unknown"):
        return f"tui needs a terminal that can draw (TERM={term or 'unset'}); use `amqpscope read`"
    return None
