"""Pairing management and CBS requests with their responses (`diagnose.requests`), sans-IO.

The recorded capture (10-cbs-tokens, test_diagnose_captures) has one token and no renewal; here
the patterns the codec marks on messages are fed as they would come, to pin down what counts as
the token in force: the last accepted one for the entity, before the moment asked about.
"""

from __future__ import annotations

from typing import Any

from amqpscope.diagnose.requests import Requests, epoch_seconds

AUDIENCE = "sb://ns.servicebus.windows.net/orders"


def put(requests: Requests, frame: int, ts: float, mid: str, expiration: str, status: int) -> None:
    request: dict[str, Any] = {"node": "$cbs", "kind": "request", "operation": "put-token"}
    request |= {"name": AUDIENCE, "expiration": expiration, "message-id": mid}
    requests.feed(1, frame, ts, request)
    response = {"node": "$cbs", "kind": "response", "status-code": status, "correlation-id": mid}
    requests.feed(1, frame + 1, ts + 0.01, response)


def in_force(requests: Requests, address: str, ts: float) -> int:
    """The frame of the put-token in force for `address` at `ts` (0: none)."""
    token = requests.token_for(1, address, ts)
    return 0 if token is None else token.frame


def test_the_token_in_force_is_the_last_accepted_one_before_the_moment() -> None:
    requests = Requests()
    put(requests, 10, 100.0, "a", "2026-01-01T00:00:00.000Z", 202)
    put(requests, 20, 200.0, "b", "2026-01-01T01:00:00.000Z", 401)  # refused: not in force
    put(requests, 30, 300.0, "c", "2026-01-01T02:00:00.000Z", 200)
    for address in ("orders", AUDIENCE, "amqps://ns.servicebus.windows.net/orders/"):
        assert in_force(requests, address, 250.0) == 10
        assert in_force(requests, address, 400.0) == 30
    assert in_force(requests, "invoices", 400.0) == 0
    assert in_force(requests, "orders", 50.0) == 0  # none accepted yet
    assert [r.message_id for r in requests.failed(1)] == ["b"]
    assert requests.unanswered(1) == []
    token = requests.token_for(1, "orders", 400.0)
    assert token is not None and token.expires == epoch_seconds("2026-01-01T02:00:00.000Z")


def test_a_namespace_token_covers_every_entity_and_unanswered_requests_stay_pending() -> None:
    requests = Requests()
    request = {"node": "$cbs", "kind": "request", "operation": "put-token", "message-id": "n"}
    requests.feed(1, 5, 1.0, request | {"name": "sb://ns.servicebus.windows.net/"})
    requests.feed(1, 6, 1.1, {"kind": "response", "status-code": 202, "correlation-id": "n"})
    assert requests.token_for(1, "any/entity", 2.0) is not None
    asked = {"node": "$management", "kind": "request", "operation": "peek", "message-id": 7}
    requests.feed(1, 9, 3.0, asked)
    requests.feed(1, 10, 3.1, {"kind": "response", "status-code": 200, "correlation-id": 8})
    assert [r.operation for r in requests.unanswered(1)] == ["peek"]
    requests.forget(1)
    assert requests.unanswered(1) == [] and requests.token_for(1, "x", 9.0) is None


def test_timestamps_as_the_codec_writes_them() -> None:
    assert epoch_seconds("1970-01-01T00:00:01.500Z") == 1.5
    assert epoch_seconds("+292278994-08-17T07:12:55.807Z") is None  # beyond what datetime holds
    assert epoch_seconds(1500) is None
