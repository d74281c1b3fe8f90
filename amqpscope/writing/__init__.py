"""Writing what was read: the cut (`cut`: which packets a selection keeps), the write pass
(`packets`: read once, write the cut as pcap or pcapng), credentials masked in it (`masking`),
and the rule every writer keeps (`outputs`: never over an input, never over a file unasked).

A face below the flow's layers (capture → stream → codec → track), used by the CLI's
`read -w` and the TUI's `w`; it prints nothing and never exits: it raises, the face says it.
"""
