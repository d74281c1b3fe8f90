"""What is checked before a live capture starts: the interface, the filter (compiled by
libpcap), the backend that can run here; and the one-line errors (`LiveError`) a failed start
becomes."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable

BACKENDS = ("tcpdump", "dumpcap", "scapy", "pyshark")
#: what is captured when no -f is given: AMQP is found on any TCP port
DEFAULT_FILTER = "tcp"

_SETCAP = "setcap cap_net_raw,cap_net_admin=eip"


class LiveError(Exception):
    """Capture cannot start or failed: one line for a human, and the exit code (2: bad usage)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def interfaces() -> list[str]:
    """The names of the machine's network interfaces."""
    with contextlib.suppress(OSError):
        return sorted(os.listdir("/sys/class/net"))
    try:
        from scapy.interfaces import get_if_list

        return sorted(get_if_list())
    except Exception:
        return []


def check_interface(iface: str, backend: str) -> None:
    known = interfaces()
    if iface == "any" and backend in ("tcpdump", "dumpcap", "pyshark"):
        return
    if iface not in known:
        listed = ", ".join(known) or "none found"
        if iface == "any":
            raise LiveError(
                f"the {backend} backend cannot capture on 'any' (interfaces: {listed})", 2
            )
        raise LiveError(f"no interface named {iface!r} (interfaces: {listed})", 2)


def _arphrd(iface: str) -> int | None:
    try:
        with open(f"/sys/class/net/{iface}/type") as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return None


def interface_linktype(iface: str) -> int:
    """The libpcap link type (DLT) packets of `iface` carry; Ethernet when it cannot be told."""
    if iface == "any":
        return 113  # Linux cooked capture
    hw = _arphrd(iface)
    if hw is None:
        return 1
    from scapy.data import ARPHRD_TO_DLT

    return ARPHRD_TO_DLT.get(hw, 1)


def check_filter(bpf: str, linktype: int = 1) -> None:
    """Compile `bpf` for `linktype` with libpcap (no privileges needed): LiveError(2) with the
    compiler's message when it is wrong. Without libpcap, `tcpdump -d` is asked; without either,
    the capture tool reports it when it starts."""
    try:
        import ctypes

        from scapy.arch.common import bpf_program
        from scapy.libs.winpcapy import pcap_close, pcap_compile, pcap_geterr, pcap_open_dead
    except Exception:
        tcpdump = shutil.which("tcpdump")
        if tcpdump is None:
            return
        try:
            done = subprocess.run(
                [tcpdump, "-d", bpf], capture_output=True, text=True, timeout=10, check=False
            )
        except (OSError, subprocess.SubprocessError):
            return
        if done.returncode != 0:
            lines = [ln for ln in done.stderr.splitlines() if not ln.startswith("Warning")]
            why = (lines[-1] if lines else "rejected").removeprefix("tcpdump: ")
            raise LiveError(f"bad capture filter {bpf!r}: {why}", 2) from None
        return
    handle = pcap_open_dead(101 if linktype == 12 else linktype, 262144)
    program = bpf_program()
    try:
        if pcap_compile(handle, ctypes.byref(program), bpf.encode(), 1, -1) == -1:
            why = bytes(pcap_geterr(handle)).split(b"\0")[0].decode(errors="replace")
            raise LiveError(f"bad capture filter {bpf!r}: {why}", 2)
        from scapy.libs.winpcapy import pcap_freecode

        pcap_freecode(ctypes.byref(program))
    finally:
        pcap_close(handle)


def _pyshark_available() -> bool:
    try:
        import pyshark  # noqa: F401
    except Exception:
        return False
    return shutil.which("tshark") is not None


def choose_backend(
    requested: str | None,
    which: Callable[[str], str | None] = shutil.which,
    pyshark_ok: Callable[[], bool] = _pyshark_available,
) -> str:
    """The backend to use: `requested` if it can run here, else tcpdump, dumpcap, scapy."""
    if requested is None:
        for tool in ("tcpdump", "dumpcap"):
            if which(tool):
                return tool
        return "scapy"
    if requested not in BACKENDS:
        raise LiveError(f"unknown backend {requested!r} (one of {', '.join(BACKENDS)})", 2)
    if requested in ("tcpdump", "dumpcap") and not which(requested):
        raise LiveError(f"--backend {requested}: {requested} is not installed (not on PATH)", 2)
    if requested == "pyshark" and not pyshark_ok():
        raise LiveError("--backend pyshark: needs the pyshark module and tshark on PATH", 2)
    return requested


def permission_hint(iface: str, program: str) -> str:
    return (
        f"no permission to capture on {iface}: run as root, or give {program} CAP_NET_RAW, "
        f"e.g. sudo {_SETCAP} {program}"
    )


def interpreter() -> str:
    return os.path.realpath(sys.executable)


def classify_stderr(tool: str, iface: str, text: str, program: str) -> LiveError:
    """A capture tool exited at start: why, as one line (permission, interface, filter)."""
    low = text.lower()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if "permission" in low or "operation not permitted" in low:
        return LiveError(permission_hint(iface, program))
    if "no such device" in low or "there is no device named" in low:
        known = ", ".join(interfaces()) or "none found"
        return LiveError(f"no interface named {iface!r} (interfaces: {known})", 2)
    m = re.search(r"\((can't parse filter expression[^)]*)\)", text) or re.search(
        r"(can't parse filter expression.*|syntax error.*)", text
    )
    if m or "invalid capture filter" in low:
        why = m.group(1) if m else (lines[0] if lines else "rejected")
        return LiveError(f"bad capture filter: {why.removeprefix(tool + ': ')}", 2)
    last = lines[-1] if lines else "no message"
    return LiveError(f"{tool} failed: {last}")
