"""How the TCP connection under an AMQP connection ended, in words: both trackers say it alike.

The dissector's `transport` record (fields `event`: fin, rst or idle; `by`: client, server or
None; `after-fin` on a reset that followed a FIN) is the input; the summary's `transport` key and
the `*.transport-closed` findings are the output.
"""

from __future__ import annotations

from typing import Any


def transport_summary(fields: dict[str, Any] | None) -> str | None:
    """How the TCP connection ended, for the summary: "fin by client", "rst by server", "idle"
    (None: it had not ended when the capture did)."""
    if fields is None:
        return None
    event, by = fields.get("event"), fields.get("by")
    return f"{event} by {by}" if by else str(event)


def transport_text(fields: dict[str, Any]) -> str:
    """A `transport` record in words: "the server reset the TCP connection (after the
    client's FIN)", "the client closed the TCP connection (FIN)", "the TCP connection went idle"."""
    event, by = fields.get("event"), fields.get("by")
    if event == "idle":
        return "the TCP connection went idle (no packet for too long)"
    who = f"the {by}" if by else "a peer"
    if event == "rst":
        after = fields.get("after-fin")
        tail = f" (after the {after}'s FIN)" if after else ""
        return f"{who} reset the TCP connection{tail}"
    return f"{who} closed the TCP connection (FIN)"
