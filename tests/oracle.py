"""Wireshark as an oracle: the AMQP frames tshark's dissector finds, named from its own tables.

tshark's PDML output carries each field's `showname` ("Method: Start-Ok (11)", "Performative:
open (0x10)"), so frame names come from Wireshark's value tables, not from amqpscope's.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from amqpscope.codec.tls import KeyLog

TSHARK = shutil.which("tshark")

#: what the reason of every skip for a missing oracle that `make test` installs says (tshark,
#: editcap, tmux, chromium, an extra's package): under AMQPSCOPE_REQUIRE_ORACLES=1, which
#: `make test` sets, tests/conftest.py makes such a skip a failure, so that a run missing one
#: cannot pass
INSTALLED = "make test installs it"


def missing(what: str) -> str:
    """The reason for skipping a test whose oracle `what`, which `make test` installs, is not
    found."""
    return f"{what} is not installed ({INSTALLED})"


def tshark_or_skip() -> str:
    """tshark's path; where it is not found, the test is reported skipped from here, after what
    it checked without it (its cross-check with Wireshark is the part that did not run)."""
    if TSHARK is None:
        pytest.skip(missing("tshark") + ": the cross-check with Wireshark did not run")
    return TSHARK


_LABEL = re.compile(r":\s*(.*?)\s*\(")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")


def _label(showname: str) -> str:
    match = _LABEL.search(showname)
    return match.group(1) if match else showname


def _pdu_name(fields: dict[str, str]) -> str:
    if "amqp.init.protocol" in fields:
        return "protocol-header"
    if "amqp.performative" in fields:
        return _label(fields["amqp.performative"]).lower()
    if "amqp.sasl.method" in fields:
        return _label(fields["amqp.sasl.method"]).replace(".", "-").lower()
    if "amqp.method.class" in fields and "amqp.method.method" in fields:
        klass = _label(fields["amqp.method.class"]).lower()
        return f"{klass}.{_label(fields['amqp.method.method']).lower()}"
    frame_type = _label(fields.get("amqp.type", "")).lower()
    if frame_type in ("content header", "content body", "heartbeat"):
        return frame_type.replace(" ", "-")
    if "amqp.length" in fields and "amqp.doff" in fields:
        return "heartbeat"  # an empty 1.0 frame
    return "unknown:" + ",".join(sorted(fields))


def keys_for(path: str | Path) -> Path | None:
    """A TLS capture's key log: NAME.keys beside NAME.pcap (captures/record.py writes it)."""
    keys = Path(path).with_name(Path(path).name.split(".")[0] + ".keys")
    return keys if keys.exists() else None


def keylog_for(path: str | Path) -> KeyLog | None:
    """The key log amqpscope decrypts a capture with (None: no NAME.keys beside it)."""
    keys = keys_for(path)
    return KeyLog(keys.read_text()) if keys else None


def visible_to_wireshark(frames: list) -> list:
    """amqpscope's frames that Wireshark can show: not the layer records (TLS is its own
    protocol there) nor the transport records (a FIN or RST is TCP's, not AMQP's); AMQP inside
    TLS it decrypts, but nothing after AMQP 1.0's in-band TLS upgrade (the `AMQP 2 1 0 0` headers
    are the last it sees of such a connection) and no AMQP inside WebSocket, which it does not
    follow."""
    hidden: set[int] = set()
    out = []
    for frame in frames:
        if frame.kind == "transport":
            continue
        if frame.kind == "layer":
            inband = any(f.conn == frame.conn and f.kind == "protocol-header" for f in out)
            if inband or frame.name != "tls":
                hidden.add(frame.conn)
            continue
        if frame.conn not in hidden:
            out.append(frame)
    return out


#: a folder where one test run keeps what tshark printed (tests/conftest.py makes it for the
#: session; every xdist worker inherits it), so that a capture is dissected once for all the
#: tests that compare with the same dissection (test_vs_tshark, test_tree_vs_tshark,
#: test_amqp091_vs_tshark, test_amqp10_vs_tshark, ...); unset: tshark runs every time
SHARED = "AMQPSCOPE_TSHARK_SHARED"


def shared_run(cmd: list[str], inputs: list[Path]) -> bytes:
    """tshark's output of `cmd`, run once per session for the same command on the same bytes
    of `inputs` (the capture, its key log): kept under SHARED, keyed by both."""
    folder = os.environ.get(SHARED)
    if not folder:
        return subprocess.run(cmd, capture_output=True, check=True, timeout=300).stdout
    key = hashlib.sha256("\0".join(cmd).encode())
    for one in inputs:
        key.update(b"\0" + one.read_bytes())
    kept = Path(folder) / f"{key.hexdigest()}.out"
    if kept.is_file():
        return kept.read_bytes()
    out = subprocess.run(cmd, capture_output=True, check=True, timeout=300).stdout
    partial = kept.with_name(f"{kept.name}.{os.getpid()}")
    partial.write_bytes(out)
    os.replace(partial, kept)  # whole or absent for a worker reading it meanwhile
    return out


def pdml(path: str, decode_as: tuple[int, ...] = ()) -> ET.Element:
    """tshark's PDML for the AMQP packets of `path` (Decode As on `decode_as` ports), parsed.
    TLS on 5671 is decrypted with the capture's key log (or the secrets in its pcapng) and read
    as AMQP."""
    assert TSHARK, "tshark is not installed"
    cmd = [TSHARK, "-r", str(path), "-T", "pdml", "-Y", "amqp", "-d", "tls.port==5671,amqp"]
    keys = keys_for(path)
    if keys is not None:
        cmd += ["-o", f"tls.keylog_file:{keys}"]
    for port in decode_as:
        if port != 5671:  # AMQP there is inside TLS: decoded through it, not over raw TCP
            cmd += ["-d", f"tcp.port=={port},amqp"]
    out = shared_run(cmd, [Path(path), *([keys] if keys else [])])
    # tshark copies payload bytes into some attributes verbatim (invalid UTF-8, control
    # characters), which XML forbids; the oracles read names and numbers, so those bytes can go
    return ET.fromstring(_CONTROL.sub(" ", out.decode("utf-8", errors="replace")))


def tshark_frames(path: str, decode_as: tuple[int, ...] = ()) -> list[tuple[int, str]]:
    """(packet number, frame name) for every AMQP PDU tshark dissects, in order."""
    out: list[tuple[int, str]] = []
    for packet in pdml(path, decode_as).iter("packet"):
        number = 0
        for proto in packet.iter("proto"):
            if proto.get("name") == "geninfo":
                number = int(proto.find("field[@name='num']").get("show"))  # type: ignore[union-attr]
            if proto.get("name") != "amqp":
                continue
            fields: dict[str, str] = {}
            for field in proto.iter("field"):
                fields.setdefault(field.get("name", ""), field.get("showname", ""))
            out.append((number, _pdu_name(fields)))
    return out
