"""Frame-trace logs made from the recorded ones in captures/, for the formats with none recorded
(or none with many frames): what the tests vary (tests/test_logs_cached_shapes.py) and what
bench/logs.py times. Here, not in bench/, so that no test depends on the bench folder.

- `router`: a Proton log's frames behind a Qpid Dispatch router's prefix.
- `goamqp`: a sender's debug log as go-amqp's `frames.go` prints it.
- `printed`: captures/log-proton-broker.pcap's conversation as proton-j, amqpnetlite or pyamqp
  prints it (the printers tests/test_logs_<format>.py hold each grammar to).
- `pika_frames`: pika's frame lines of `messages` deliveries.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Final


def router(source: Path, path: Path) -> int:
    """The Proton log's frames as a Qpid Dispatch router logs them (`[C1]:0 -> ...`)."""
    out = []
    for i, line in enumerate(source.read_text().splitlines()):
        m = re.match(r"\[[^\]]+\]: (?:AMQP|SASL):FRAME:(\d*) *(->|<-) (.*)$", line)
        if m is None:
            out.append(line)
            continue
        channel, arrow, text = m.groups()
        minute, second, micro = i // 60_000_000 % 60, i // 1_000_000 % 60, i % 1_000_000
        stamp = f"2024-01-31 12:{minute:02d}:{second:02d}.{micro:06d}"
        body = f"[C1]:{channel} {arrow} {text}" if channel else f"[C1]:  {arrow} {text}"
        out.append(f"{stamp} +0000 PROTOCOL (trace) {body}")
    path.write_text("\n".join(out) + "\n")
    return len(out)


#: go-amqp's debug log of a sender (`conn.go`'s `TX (connWriter %p)` / `RX (connReader %p)`,
#: `internal/frames/frames.go`'s bodies): its handshake, the loop's transfer and disposition
#: (`{i}`, `{tag}`: the delivery's number and tag), and its end
_GO_FRAME: Final = "Frame{{Type: AMQP, Channel: 0, Body: "
_GO_TX: Final = "10:11:12.123456 TX (connWriter 0xc0001a2000): " + _GO_FRAME
_GO_RX: Final = "10:11:12.123456 RX (connReader 0xc0001a2000): " + _GO_FRAME
_GO_SOURCE: Final = (
    "source{{Address: , Durable: 0, ExpiryPolicy: , Timeout: 0, Dynamic: false, "
    "DynamicNodeProperties: map[], DistributionMode: , Filter: map[], DefaultOutcome: <nil> "
    "Outcomes: [], Capabilities: []}}"
)
_GO_TARGET: Final = (
    "source{{Address: q, Durable: 0, ExpiryPolicy: , Timeout: 0, Dynamic: false, "
    "DynamicNodeProperties: map[], Capabilities: []}}"
)
_GO_ATTACH: Final = (
    "Attach{{Name: l1, Handle: 0, Role: {role}, SenderSettleMode: <nil>, "
    f"ReceiverSettleMode: <nil>, Source: {_GO_SOURCE}, Target: {_GO_TARGET}, "
    "Unsettled: map[], IncompleteUnsettled: false, InitialDeliveryCount: 0, MaxMessageSize: 0, "
    "OfferedCapabilities: [], DesiredCapabilities: [], Properties: map[]}}"
)
_GO_HEAD: Final = (
    _GO_TX + "Open{{ContainerID : go-1, Hostname: localhost, MaxFrameSize: 65536, "
    "ChannelMax: 65535, IdleTimeout: 0s, OutgoingLocales: [], IncomingLocales: [], "
    "OfferedCapabilities: [], DesiredCapabilities: [], Properties: map[]}}}}",
    _GO_RX + "Open{{ContainerID : rabbit@vm, Hostname: , MaxFrameSize: 65536, "
    "ChannelMax: 2047, IdleTimeout: 1m0s, OutgoingLocales: [], IncomingLocales: [], "
    "OfferedCapabilities: [], DesiredCapabilities: [], Properties: map[]}}}}",
    _GO_TX + "Begin{{RemoteChannel: <nil>, NextOutgoingID: 0, IncomingWindow: 5000, "
    "OutgoingWindow: 4294967295, HandleMax: 4294967295, OfferedCapabilities: [], "
    "DesiredCapabilities: [], Properties: map[]}}}}",
    _GO_RX + "Begin{{RemoteChannel: 0, NextOutgoingID: 0, IncomingWindow: 65535, "
    "OutgoingWindow: 65535, HandleMax: 255, OfferedCapabilities: [], "
    "DesiredCapabilities: [], Properties: map[]}}}}",
    _GO_TX + _GO_ATTACH.replace("{role}", "Sender") + "}}",
    _GO_RX + _GO_ATTACH.replace("{role}", "Receiver") + "}}",
    _GO_RX + "Flow{{NextIncomingID: 0, IncomingWindow: 65535, NextOutgoingID: 0, "
    "OutgoingWindow: 65535, Handle: 0, DeliveryCount: 0, LinkCredit: 4294967295, "
    "Available: <nil>, Drain: false, Echo: false, Properties: map[]}}}}",
)
_GO_LOOP: Final = (
    _GO_TX + "Transfer{{Handle: 0, DeliveryID: {i}, DeliveryTag: {tag}, MessageFormat: 0, "
    "Settled: false, More: false, ReceiverSettleMode: <nil>, State: <nil>, Resume: false, "
    "Aborted: false, Batchable: false, Payload [size]: 49}}}}",
    _GO_RX + "Disposition{{Role: Receiver, First: {i}, Last: <nil>, Settled: true, "
    "State: StateAccepted{{}}, Batchable: false}}}}",
)
_GO_END: Final = (
    _GO_TX + "Detach{{Handle: 0, Closed: true, Error: *Error(nil)}}}}",
    _GO_RX + "Detach{{Handle: 0, Closed: true, Error: *Error(nil)}}}}",
    _GO_TX + "Close{{Error: *Error(nil)}}}}",
    _GO_RX + "Close{{Error: *Error(nil)}}}}",
)


def goamqp(path: Path, messages: int) -> int:
    """go-amqp's debug log of `messages` sent and accepted."""
    out = [line.format() for line in _GO_HEAD]
    for i in range(messages):
        tag = str(i).encode().hex().upper()
        out.extend(line.format(i=i, tag=tag) for line in _GO_LOOP)
    out.extend(line.format() for line in _GO_END)
    path.write_text("\n".join(out) + "\n")
    return len(out)


#: a format's transfer and disposition as its printer writes them -> the numbers put in
#: ((pattern, replacement of message i), ...) for the transfer, then for the disposition
_COUNTED: Final[dict[str, tuple[tuple[tuple[str, Callable[[int], str]], ...], ...]]] = {
    "proton-j": (
        (
            (r"deliveryId=\d+", lambda i: f"deliveryId={i}"),
            (r'deliveryTag="[^"]*"', lambda i: f'deliveryTag="{i}"'),
        ),
        ((r"first=\d+, last=\w+", lambda i: f"first={i}, last=null"),),
    ),
    "amqpnetlite": (
        (
            (r"delivery-id:\d+", lambda i: f"delivery-id:{i}"),
            (r"delivery-tag:[0-9A-F]+", lambda i: f"delivery-tag:{str(i).encode().hex().upper()}"),
        ),
        ((r"first:\d+,last:\d+", lambda i: f"first:{i}"),),
    ),
    "pyamqp": (
        (
            (r"delivery_id=\d+", lambda i: f"delivery_id={i}"),
            (r"delivery_tag=b'[^']*'", lambda i: f"delivery_tag=b'{i}'"),
        ),
        ((r"first=\d+, last=\w+", lambda i: f"first={i}, last=None"),),
    ),
}


def printed(fmt: str, path: Path, messages: int) -> int:
    """The recorded Proton conversation (captures/log-proton-broker.pcap) as `fmt` prints it,
    by the printers the tests hold that grammar to (tests/test_logs_<format>.py, written from
    the library's formatting code), its first link's transfer and disposition repeated
    `messages` times with delivery ids and tags counted up."""
    if fmt == "proton-j":
        from tests import test_logs_protonj as pj

        wire = pj.captured("log-proton-broker")
        lines = [pj.line(f, "->" if f.direction == "c2s" else "<-").rstrip("\n") for f in wire]
    elif fmt == "amqpnetlite":
        from tests import test_logs_amqpnetlite as nl

        lines = [nl.line(f).rstrip("\n") for f in nl.captured("log-proton-broker")]
    elif fmt == "pyamqp":
        from tests import test_logs_pyamqp as pa

        wire = pa.captured("log-proton-broker")
        lines = [pa.received_line(f.data[f.data[4] * 4 :]).rstrip("\n") for f in wire]
    else:
        raise ValueError(fmt)
    first = next(i for i, line in enumerate(lines) if "ransfer" in line)
    last = next(i for i, line in enumerate(lines) if "isposition" in line)
    transfer, disposition = lines[first], lines[last]
    out = lines[:first]
    for i in range(messages):
        for line, counted in zip((transfer, disposition), _COUNTED[fmt], strict=True):
            for pattern, number in counted:
                line = re.sub(pattern, number(i), line, count=1)
            out.append(line)
    out.extend(lines[last + 1 :])
    path.write_text("\n".join(out) + "\n")
    return len(out)


def pika_frames(path: Path, messages: int) -> int:
    """Nothing but frame lines for pika: `messages` deliveries (method, header, body) as pika
    reads them off the wire and its `repr` prints them (pika's DEBUG log prints few frames; this
    is the rate of the frame lines themselves)."""
    from pika import frame, spec

    prefix = "2026-11-26 06:51:38,549 DEBUG pika.channel Discarding frame "
    properties = spec.BasicProperties(content_type="text/plain", delivery_mode=2)
    out = []
    for i in range(messages):
        body = f"log message {i}".encode()
        deliver = spec.Basic.Deliver("ctag1.1161d78c", i + 1, False, "", "q")
        for sent in (
            frame.Method(1, deliver),
            frame.Header(1, len(body), properties),
            frame.Body(1, body),
        ):
            out.append(f"{prefix}{frame.decode_frame(sent.marshal())[1]!r}")
    path.write_text("\n".join(out) + "\n")
    return len(out)
