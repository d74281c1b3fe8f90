"""AMQP 1.0 scenarios: SASL PLAIN, ANONYMOUS and a failed login."""

from __future__ import annotations

from typing import Any

from recorder.amqp10 import ProtonClient
from recorder.harness import GUEST, Ctx, scenario


class SaslOnly(ProtonClient):
    """Open a connection with specific SASL settings and close it again."""

    def __init__(self, ctx: Ctx, **connect_kw: Any) -> None:
        super().__init__(ctx)
        self.connect_kw = connect_kw

    def begin(self) -> None:
        self.connect(**self.connect_kw)

    def opened(self, event: Any) -> None:
        self.shutdown()


@scenario(
    "10-sasl-plain",
    "1.0",
    "SASL PLAIN as guest/guest (Proton allowed_mechs=PLAIN), AMQP open, then close.",
    queues=(),
)
def s10_sasl_plain(ctx: Ctx) -> dict[str, Any]:
    """SASL init carries PLAIN credentials; outcome ok, then the AMQP header follows."""
    return SaslOnly(ctx, allowed_mechs="PLAIN", user=GUEST[0], password=GUEST[1]).run()


@scenario(
    "10-sasl-anonymous",
    "1.0",
    "SASL ANONYMOUS (Proton allowed_mechs=ANONYMOUS; the plugin maps it to its default_user, "
    "guest), AMQP open, then close.",
    queues=(),
)
def s10_sasl_anonymous(ctx: Ctx) -> dict[str, Any]:
    """ANONYMOUS SASL exchange without credentials."""
    return SaslOnly(ctx, allowed_mechs="ANONYMOUS").run()


@scenario(
    "10-sasl-failed",
    "1.0",
    "SASL PLAIN with guest and a wrong password: the broker answers sasl-outcome code auth and the "
    "connection never opens.",
    queues=(),
)
def s10_sasl_failed(ctx: Ctx) -> dict[str, Any]:
    """Failed SASL: no AMQP header after the outcome."""
    n = SaslOnly(ctx, allowed_mechs="PLAIN", user=GUEST[0], password="wrong-password").run()
    n.setdefault("connections_opened", 0)
    return n
