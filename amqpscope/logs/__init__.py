"""Frame-trace logs as a source of frame records, beside capture → stream → codec.

A client's or router's frame trace (Proton's `PN_TRACE_FRM`, ...) read line by line into the
same frame records a capture gives (`codec.frames.Frame`), with `source` (file, line) in place
of packet and bytes, so trackers, filters and exports never ask where a frame came from.
`detect.py` picks the format by content; one grammar module per format; `reader.py` keeps what
spans lines. Sans-IO: lines in, records out (`reader.records_from_log`).
"""
