"""What a frame's fields are to everything that computes with them: the trackers, the
correlators, the filters and the Spark rows take `typed_fields(frame)`, not `frame.fields`.

A decoder that met a value of a type its field does not allow (a map for a delivery-tag, a list
for a handle) says so with a finding and leaves the value on the frame, so the record shows what
was sent; used as a key, a number or a length it would raise far from the decoder. This is the
one place that hands on the fields without it: for an undamaged frame (every frame but those
findings) it is `frame.fields` itself, found with one look at the frame's findings.
"""

from __future__ import annotations

from typing import Any

from amqpscope.codec.amqp10.composites import TYPE_DAMAGE, well_typed
from amqpscope.codec.frames import Frame


def typed_fields(frame: Frame) -> dict[str, Any]:
    """`frame.fields` without the values of a type their field does not allow."""
    fields = frame.fields
    if not frame.findings or frame.version != "1.0":
        return fields
    for f in frame.findings:
        if f.code in TYPE_DAMAGE:
            return well_typed(frame.name, fields)
    return fields
