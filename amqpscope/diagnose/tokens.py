"""Diagnoses of management and claims-based-security requests (Azure Service Bus, Event Hubs).

The facts are those of the Service Bus AMQP guide (`../shared/seeds/002_...txt`, "Claims-based
authorization"): a client puts a token for an entity (its audience) on the `$cbs` node and must
"keep track of token expiration": "when a token expires, Service Bus promptly drops all links on
the connection to the respective entity". A `put-token` answered with a status that is not 2xx
is a refused token; a link detached with `amqp:unauthorized-access` after the token for its
entity expired is an expired token (`expired_token`, which `amqp10.errors` asks before it calls
the detach a plain `close.link`); any other request answered with an error, or never answered,
says which operation it was.
"""

from __future__ import annotations

import datetime as dt
from typing import Final

from amqpscope.diagnose.evidence import Evidence, Placed
from amqpscope.diagnose.model import Diagnosis, make
from amqpscope.diagnose.requests import Request
from amqpscope.track.amqp10.connection import ConnectionTracker
from amqpscope.track.amqp10.rules import CLOSED

#: the condition a service drops a link with when the token for its entity expired
UNAUTHORIZED: Final = "amqp:unauthorized-access"
#: how much later than a token's expiration its link may be dropped and still be put down to it
#: (the service drops them "promptly"; the client's clock, which wrote the expiration, and the
#: capture's may differ a little)
EXPIRY_SLACK: Final = 5.0
#: requests listed in one diagnosis
LISTED: Final = 5


def _when(seconds: float) -> str:
    stamp = dt.datetime.fromtimestamp(seconds, dt.UTC)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _status(request: Request) -> str:
    text = f"{request.status}"
    if request.description:
        text += f" {request.description}"
    return text


def expired_token(
    conn: int, ev: Evidence, placed: Placed, address: str | None, link: str | None
) -> Diagnosis | None:
    """`placed` (an error on a detach, end or close) as a token that expired, if it was one: the
    condition is unauthorized-access, and the last token accepted for the link's entity before
    it had expired by then."""
    error = placed.frame.fields.get("error")
    if not isinstance(error, dict) or error.get("condition") != UNAUTHORIZED:
        return None
    ts = placed.frame.ts
    token = ev.requests.token_for(conn, address, ts)
    if token is None or token.expires is None or token.expires > ts + EXPIRY_SLACK:
        return None
    before = ts - token.expires
    late = f"{before:.1f} s before" if before >= 0 else f"{-before:.1f} s after (clocks differ)"
    description = error.get("description")
    what = {"close": "closed the connection", "end": "ended the session"}.get(
        placed.frame.name, "detached " + (f"link {link!r}" if link else "the link")
    )
    return make(
        "auth.token-expired",
        f"The server {what}: the token for {token.audience!r} had expired",
        (f"{description}. " if description else "")
        + f"The last token put for {token.audience!r} (frame {token.frame}, accepted in frame"
        f" {token.answer}) expired at {_when(token.expires)}, {late} the server {what} with"
        f" {UNAUTHORIZED}, and no newer token for it was accepted. A service that authorizes"
        " with claims-based security (Azure Service Bus, Event Hubs) drops the links to an"
        " entity when its token expires: the client must put a fresh token on $cbs before the"
        " old one expires. Check the client's token refresh (SDKs renew ahead of expiry; a"
        " custom credential or a stopped refresh timer does not) and the client's clock.",
        conn=conn,
        channel=placed.frame.channel,
        link=link,
        queue=address,
        start=ts,
        evidence=[token.frame, token.answer, placed.frame.number],
    )


def requests(conn: ConnectionTracker, ev: Evidence) -> list[Diagnosis]:
    """Refused tokens, failed and unanswered requests."""
    out: list[Diagnosis] = []
    failed = ev.requests.failed(conn.conn)
    for request in failed:
        if request.operation != "put-token":
            continue
        out.append(
            make(
                "auth.token-refused",
                f"The token for {request.audience!r} was refused: {_status(request)}",
                f"The put-token request on $cbs (frame {request.frame}) was answered with"
                f" status {_status(request)} (frame {request.answer}). Until a token is"
                " accepted the client may not attach links to the entity, and a service such"
                " as Azure Service Bus drops a connection that has no valid token 20 s after"
                " it opened. Check the key or credential the token was signed with, its"
                " audience (the entity's URL) and its expiry.",
                conn=conn.conn,
                queue=request.audience,
                start=request.ts,
                duration=request.answer_ts - request.ts,
                evidence=[request.frame, request.answer],
            )
        )
    for request in failed:
        if request.operation == "put-token":
            continue
        out.append(
            make(
                "request.failed",
                f"{request.operation} on {request.node} failed: {_status(request)}",
                f"The {request.operation} request (frame {request.frame}) to the"
                f" {request.node} node was answered with status {_status(request)} (frame"
                f" {request.answer}).",
                conn=conn.conn,
                start=request.ts,
                duration=request.answer_ts - request.ts,
                evidence=[request.frame, request.answer],
            )
        )
    pending = ev.requests.unanswered(conn.conn)
    if pending:
        end = conn.ts
        listed = ", ".join(
            f"{r.operation} (frame {r.frame}"
            + (f", {end - r.ts:.1f} s before the end)" if ev.timed else ")")
            for r in pending[:LISTED]
        )
        out.append(
            make(
                "request.unanswered",
                f"{len(pending)} request{'s' if len(pending) > 1 else ''} to"
                f" {pending[0].node} never answered",
                f"No response (a message whose correlation-id is the request's message-id)"
                f" came for: {listed}{' ...' if len(pending) > LISTED else ''}. A client"
                " waiting for it times out (the SDKs' operation timeout). Check that the"
                " client's reply link was attached with credit and that its reply-to address"
                " is that link's.",
                conn=conn.conn,
                start=pending[0].ts,
                duration=end - pending[0].ts,
                evidence=[r.frame for r in pending[:LISTED]],
                ongoing=conn.conn not in ev.ends and CLOSED not in conn.state.values(),
            )
        )
    return out
