"""Management and claims-based-security requests, paired with their responses (sans-IO, bounded).

AMQP 1.0 services built on the management specification answer a request message (application
property `operation`, sent to a `$management` or `$cbs` node) with a response message whose
`correlation-id` is the request's `message-id` and whose `status-code` is an HTTP code. The
codec marks both (`message["request-reply"]`, `codec.amqp10.message.request_reply`); here
they are paired per connection, so that the rules can say which request failed, which was never
answered, and which token (a CBS `put-token`, with its `expiration`) was in force when a link
was dropped for `amqp:unauthorized-access`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Final

#: requests awaiting a response, and answered ones kept, per connection
MAX_PENDING: Final = 1000
MAX_ANSWERED: Final = 1000
#: audiences whose last accepted token is kept, per connection
MAX_AUDIENCES: Final = 1000
#: status codes that say a request succeeded (the management spec: HTTP's 2xx)
OK_STATUS: Final = range(200, 300)


@dataclass(slots=True)
class Request:
    """One request: where and what it asked, and its response once seen."""

    frame: int
    ts: float
    node: str
    operation: str
    message_id: Any
    audience: str | None = None  # put-token: the `name` the token is for
    expires: float | None = None  # put-token: `expiration`, seconds since the epoch
    answer: int = 0  # the response's frame (0: none seen)
    answer_ts: float = 0.0
    status: Any = None
    description: Any = None

    @property
    def ok(self) -> bool:
        return isinstance(self.status, int) and self.status in OK_STATUS


def epoch_seconds(value: Any) -> float | None:
    """An AMQP timestamp as the codec writes it (ISO 8601, UTC) in seconds; None if not one."""
    if not isinstance(value, str):
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:  # the expanded years of timestamps outside 0000-9999
        return None


class Requests:
    """Requests and responses of each connection, paired by message-id and correlation-id."""

    def __init__(self) -> None:
        self.pending: dict[int, dict[Any, Request]] = {}
        self.answered: dict[int, list[Request]] = {}
        # conn -> audience -> the accepted put-tokens for it, in order (the last few)
        self.tokens: dict[int, dict[str, list[Request]]] = {}

    def feed(self, conn: int, number: int, ts: float, pattern: dict[str, Any]) -> None:
        """A message the codec marked as part of a request/response exchange."""
        node = str(pattern.get("node"))
        if pattern.get("kind") == "request":
            key = pattern.get("message-id")
            pending = self.pending.setdefault(conn, {})
            if key is None or len(pending) >= MAX_PENDING:
                return
            request = Request(number, ts, node, str(pattern.get("operation")), key)
            if request.operation == "put-token":
                name = pattern.get("name")
                request.audience = name if isinstance(name, str) else None
                request.expires = epoch_seconds(pattern.get("expiration"))
            pending[key] = request
            return
        waiting = self.pending.get(conn)
        key = pattern.get("correlation-id")
        if waiting is None or key not in waiting:
            return  # a response to a request before the capture (or not kept)
        request = waiting.pop(key)
        request.answer, request.answer_ts = number, ts
        request.status = pattern.get("status-code")
        request.description = pattern.get("status-description")
        answered = self.answered.setdefault(conn, [])
        if len(answered) < MAX_ANSWERED:
            answered.append(request)
        if request.operation == "put-token" and request.ok and request.audience is not None:
            tokens = self.tokens.setdefault(conn, {})
            if request.audience in tokens or len(tokens) < MAX_AUDIENCES:
                kept = tokens.setdefault(request.audience, [])
                kept.append(request)
                del kept[:-4]

    def unanswered(self, conn: int) -> list[Request]:
        return list(self.pending.get(conn, {}).values())

    def failed(self, conn: int) -> list[Request]:
        return [r for r in self.answered.get(conn, ()) if not r.ok]

    def token_for(self, conn: int, address: str | None, ts: float) -> Request | None:
        """The last token accepted before `ts` for the audience `address` names (the audience
        is a URL ending in the entity's path; an address may be either)."""
        best: Request | None = None
        for audience, kept in self.tokens.get(conn, {}).items():
            if address is not None and not _same_entity(audience, address):
                continue
            for request in kept:
                if request.answer_ts <= ts and (best is None or request.answer > best.answer):
                    best = request
        return best

    def forget(self, conn: int) -> None:
        self.pending.pop(conn, None)
        self.answered.pop(conn, None)
        self.tokens.pop(conn, None)


def _same_entity(audience: str, address: str) -> bool:
    """Whether a token's audience (`sb://ns.servicebus.windows.net/orders`) covers the entity
    of a link address (`orders`, or the whole URL); an audience of the namespace alone
    (`sb://ns.servicebus.windows.net/`) covers every entity."""
    _scheme, _, rest = audience.partition("://")
    if rest and "/" not in rest.rstrip("/"):
        return True
    a = audience.rstrip("/")
    b = address.rstrip("/")
    if not b:
        return False
    return a == b or a.endswith("/" + b.lstrip("/")) or b.endswith("/" + a.rsplit("/", 1)[-1])
