"""Qpid Dispatch / Skupper router logs: Proton's trace text behind the router's prefix.

No router runs here, so the log is written from the router's and Proton's own formatting:
the frames are the captured ones (log-proton-broker.pcap, log-proton-p2p.pcap), each
performative printed by Proton's `pn_data_format` (the `pn_inspect` text a router's tracer
receives), its payload quoted as `pn_quote_data` does, behind `write_log`'s prefix (ctime or
ISO time, `PROTOCOL (trace)`, `[C<n>]:<channel>`) and its optional ` (file.c:line)` suffix.
Two connections interleave; for one the router accepted the connection (it is the server).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import cproton
from proton import Data

from amqpscope.capture.files import open_capture
from amqpscope.codec.frames import Frame
from amqpscope.dissect import Dissector
from amqpscope.logs.detect import detect
from amqpscope.logs.reader import records_from_log

CAPTURES = Path(__file__).resolve().parent.parent / "captures"


def quote(raw: bytes) -> str:
    return "".join(chr(b) if 32 <= b < 127 and b != 0x5C else f"\\x{b:02x}" for b in raw)


def inspect(body: bytes) -> tuple[str, bytes]:
    """The performative as Proton prints it (old form) and the payload after it."""
    data = Data()
    used = data.decode(body)
    err, text = cproton.pn_data_format(data._data, 1 << 20)
    assert err >= 0
    return bytes(text).decode(), body[used:]


def router_lines(frames: list[Frame], conn: str, router_is_server: bool, start: float) -> list:
    """(time, line) of each frame as a router logs it, the router on one end."""
    out: list[tuple[float, str]] = []
    for i, frame in enumerate(frames):
        when = start + i * 0.001
        sent = (frame.direction == "s2c") == router_is_server
        arrow = "->" if sent else "<-"
        if frame.kind == "protocol-header":
            layer = "SASL" if frame.fields["protocol-id"] == 3 else "AMQP"
            text = f"[{conn}]:  {arrow} {layer}"
        else:
            doff = frame.data[4] * 4
            performative, payload = inspect(frame.data[doff:])
            channel = frame.channel if frame.channel is not None else 0
            text = f"[{conn}]:{channel} {arrow} {performative}"
            if payload:
                text += f' ({len(payload)}) "{quote(payload)}"'
        stamp = dt.datetime.fromtimestamp(when, dt.UTC)
        prefix = (
            stamp.strftime("%a %b %d %H:%M:%S %Y")  # ctime, the older routers
            if i % 2
            else stamp.strftime("%Y-%m-%d %H:%M:%S.%f +0000")
        )
        suffix = " (container.c:412)" if i % 3 == 0 else ""
        out.append((when, f"{prefix} PROTOCOL (trace) {text}{suffix}\n"))
    return out


def captured(name: str) -> list[Frame]:
    with open_capture(str(CAPTURES / f"{name}.pcap")) as capture:
        return [f for f in Dissector().run(capture) if f.kind != "transport"]


def shape(frame: Frame) -> tuple[Any, ...]:
    return (frame.name, frame.channel, frame.direction, frame.fields, frame.message)


def test_router_log_of_two_connections() -> None:
    outbound = captured("log-proton-broker")  # the router connected out to the broker
    inbound = captured("log-proton-p2p")  # a client connected to the router
    lines = router_lines(outbound, "C1", False, 1_700_000_000.0)
    lines += router_lines(inbound, "C2", True, 1_700_000_000.0005)
    lines.sort()
    text = [
        "2023-11-14 22:13:19.999000 +0000 SERVER (info) Container Name: router.A\n",
        "2023-11-14 22:13:19.999500 +0000 SERVER (info) [C2] Accepted connection to "
        "0.0.0.0:5672 from 127.0.0.1:50334\n",
        *(line for _, line in lines),
    ]
    assert detect(text) == "proton"  # the router's text is Proton's
    frames = list(records_from_log(text, "qdrouterd.log", fmt="router"))
    # the log names its end of each connection: the router's C1 and C2
    by_conn: dict[str, list[Frame]] = {}
    for frame in frames:
        by_conn.setdefault(frame.src if frame.src != "peer" else frame.dst, []).append(frame)
    assert sorted(by_conn) == ["C1", "C2"]
    assert by_conn["C2"][0].conn == 1  # numbered from the accepted line, which came first
    for conn, wire in (("C1", outbound), ("C2", inbound)):
        for direction in ("c2s", "s2c"):
            mine = [shape(f) for f in by_conn[conn] if f.direction == direction]
            assert mine == [shape(f) for f in wire if f.direction == direction], (conn, direction)
    # every line's time, to the microsecond where the router wrote it so
    assert all(f.ts > 1_699_999_000 for f in frames)
    iso = [f for f in frames if f.source and "." in text[f.source["line"] - 1][:27]]
    assert iso and all(abs(f.ts - round(f.ts, 4)) < 1e-6 for f in iso)
