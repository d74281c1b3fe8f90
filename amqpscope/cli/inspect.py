"""`read -V` and `read -x`: a frame's detail tree and bytes under its line, or in its record.

Wires the slow views for the frames shown: the tree from `codec.tree` (with the connection's
layers from the dissector, and which 1.0 transfers continue a delivery, followed over every
frame read), drawn by `render.tree`. On a terminal long values are cut to its width; piped,
nothing is cut.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from amqpscope.codec.amqp10.tree import DeliveryStarts
from amqpscope.codec.tree import Node, frame_tree, redact_bodies
from amqpscope.render.tree import detail_lines, tree_json

if TYPE_CHECKING:
    from amqpscope.codec.frames import Frame
    from amqpscope.dissect import Dissector
    from amqpscope.render.timeline import Timeline


class Inspect:
    """The detail of the frames `read` shows: `show` prints it under the frame's line (through
    the timeline's sink), `ndjson` makes the frame's JSON line with its `tree`."""

    def __init__(
        self,
        dissector: Dissector,
        tree: bool,
        dump: bool,
        show_secrets: bool,
        timeline: Timeline | None,
        redact_bodies: bool = False,
    ) -> None:
        self.dissector = dissector
        self.tree = tree
        self.dump = dump
        self.show_secrets = show_secrets
        self.timeline = timeline
        self.redact_bodies = redact_bodies
        self.starts = DeliveryStarts()

    def nodes(self, frame: Frame, continues: bool) -> tuple[list[Node], list[tuple[int, int]]]:
        """The frame's tree, and the spans of the bodies it dropped (--redact-bodies)."""
        conn = self.dissector.connections.get(frame.conn)
        layers: tuple[tuple[str, dict[str, Any]], ...] = ()
        if conn is not None:
            layers = tuple((s.layer.name, s.layer.info()) for s in conn.codec.layers)
        nodes = frame_tree(frame, layers, continues)
        return nodes, redact_bodies(nodes) if self.redact_bodies else []

    def show(self, frame: Frame, continues: bool) -> None:
        timeline = self.timeline
        assert timeline is not None
        width = timeline.console.width if timeline.fit else None
        nodes, bodies = self.nodes(frame, continues)
        texts = detail_lines(
            nodes,
            frame.data,
            self.tree,
            self.dump,
            width,
            self.show_secrets,
            frame.carriers,
            bodies,
        )
        timeline.write_pending()  # the frame's own line, held in the timeline's buffer
        if timeline.out is not None:
            timeline.out.write("".join(t + "\n" for t in texts))
            return
        from rich.text import Text

        for text in texts:
            timeline.console.print(Text(text), no_wrap=True, crop=True, highlight=False)

    def ndjson(self, frame: Frame, continues: bool) -> bytes:
        record = frame.to_json()
        record["tree"] = tree_json(self.nodes(frame, continues)[0], self.show_secrets)
        text = json.dumps(record, separators=(",", ":"), ensure_ascii=False, default=str)
        return (text + "\n").encode()
