"""proton-j's `PN_TRACE_FRM` lines of each version, as `TransportImpl` printed them (issue 42;
apache/qpid-proton-j's history, `git log -L` of `TransportImpl.log`):

- before de99c061 (PROTON-957, 2015-07, proton-j 0.10): a transfer's payload after its body as
  `"` + `Binary.toString()` + `"`, cut past 80 characters with the text's length then said,
  `..."\\x00Sp(243)"`;
- from then on: ` (size) "..."` (`StringUtils.toQuotedString`), as the recorded-frame tests of
  tests/test_logs_protonj.py print it;
- from fd58931a / 0ca7831d (PROTON-1998, 2019-02, 0.32): the SASL frames (`SaslInit{...}`) and
  the headers (`[hash:0] -> AMQP`, `SASL`) too.
"""

from __future__ import annotations

from amqpscope.findings import Finding
from amqpscope.logs.reader import records_from_log

TRANSFER = (
    "Transfer{handle=0, deliveryId=3, deliveryTag=\\x00\\x00\\x00\\x03, messageFormat=0, "
    "settled=false, more=false, rcvSettleMode=null, state=null, resume=false, aborted=false, "
    "batchable=false}"
)


def read(lines: list[str]) -> tuple[list[object], list[Finding]]:
    found: list[Finding] = []
    text = [line + "\n" for line in lines]
    return list(records_from_log(iter(text), "j.log", fmt="proton-j", findings=found)), found


def test_the_payload_before_0_10() -> None:
    records, found = read(
        [
            f'[1468286342:0] -> {TRANSFER} "\\x00Sw\\xa1\\x05hello"',
            f'[1468286342:0] -> {TRANSFER} "\\x00Sp\\xc0\\x06\\x05B@@A@\\x00Ss\\xc0\\x0f(243)"',
        ]
    )
    assert [f for f in found if f.code in ("log.bad-line", "log.cut-line")] == []
    whole, cut = records
    assert whole.name == "transfer" and whole.fields["delivery-id"] == 3  # type: ignore[attr-defined]
    assert whole.message["body"]["value"] == "hello"  # type: ignore[attr-defined]
    assert any(  # cut at its limit: the payload is not shown
        f.code == "log.not-shown" and "payload" in f.message
        for f in cut.findings  # type: ignore[attr-defined]
    )


def test_the_size_before_the_payload_since_0_10_and_sasl_since_0_32() -> None:
    records, found = read(
        [
            "[1468286342:0] -> SASL",
            "[1468286342:0] <- SASL",
            "[1468286342:0] <- SaslMechanisms{saslServerMechanisms=[PLAIN, ANONYMOUS]}",
            "[1468286342:0] -> SaslInit{mechanism=ANONYMOUS, initialResponse=null, hostname='h1'}",
            "[1468286342:0] <- SaslOutcome{_code=OK, _additionalData=null}",
            f'[1468286342:0] -> {TRANSFER} (5) "hello"',
        ]
    )
    assert [f for f in found if f.code in ("log.bad-line", "log.cut-line")] == []
    names = [r.name for r in records]  # type: ignore[attr-defined]
    assert names == [
        "protocol-header",
        "protocol-header",
        "sasl-mechanisms",
        "sasl-init",
        "sasl-outcome",
        "transfer",
    ]
