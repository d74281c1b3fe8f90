"""Several capture files read as one: the pieces of a rotated capture.

`tcpdump -G/-C` and dumpcap's ring buffer cut one capture into files, and a connection runs on
from one file into the next. Read one by one, every connection cut at a file's edge would look
mid-stream. `CaptureSet` reads them as one capture, the way `mergecap -a` would join them: in
the order of their first packets' times (not their names: `tcpdump -C` names `cap`, `cap1`,
`cap10`, `cap2`), one file open at a time, packets numbered on from file to file. Files whose
times overlap (captures of the same traffic on two hosts, not pieces of one) are still read one
after the other, with a `capture.files-overlap` finding that says so: merging them packet by
packet is `mergecap`'s job.

It offers what the commands use of a `CaptureReader`: iteration, `findings`, `secrets`,
`interfaces`, `format`, `position()`. A file's own findings say which file they are about.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Generator, Iterator, Sequence
from typing import Final

from ..findings import Finding, finding
from .files import CaptureError, CaptureReader, Interface
from .packet import RawPacket
from .pipe import STDIN

#: a file with no packet sorts after those with one (its findings still count)
_NO_PACKET: Final = float("inf")


@dataclasses.dataclass(frozen=True)
class Piece:
    """One file of the set: its path, its first packet's time, format and interfaces (those
    described before its first packet)."""

    path: str
    first_ts: float
    format: str
    compressed: bool
    interfaces: tuple[Interface, ...]


def survey(path: str) -> Piece:
    """Open `path` far enough to know its first packet's time; CaptureError when unreadable."""
    with CaptureReader(path) as reader:
        first = next(iter(reader), None)
        return Piece(
            path,
            first.ts if first is not None else _NO_PACKET,
            reader.format,
            reader.compressed,
            tuple(reader.interfaces),
        )


class CaptureSet:
    """The files of `paths` read as one capture, in the order of their first packets."""

    def __init__(self, paths: Sequence[str]) -> None:
        if STDIN in paths:  # it cannot be opened twice (to sort the files, then to read)
            raise CaptureError("standard input (-) can only be read alone, not with other files")
        # sorted() is stable: files whose first packets share a time keep the order given
        self.pieces = sorted((survey(p) for p in paths), key=lambda piece: piece.first_ts)
        self.path = self.pieces[0].path
        linktypes = {i.linktype for piece in self.pieces for i in piece.interfaces}
        # one pcap header holds one link type: else the cut (-w) is pcapng
        pcap = all(piece.format == "pcap" for piece in self.pieces) and len(linktypes) <= 1
        self.format = "pcap" if pcap else "pcapng"
        self.compressed = any(piece.compressed for piece in self.pieces)
        self.findings: list[Finding] = []
        self.secrets: list[bytes] = []  # every file's, in reading order (the dissector's list)
        self.packets = 0
        self._done_interfaces: list[Interface] = []
        self._started = False
        self._done_bytes = 0
        self._total_bytes = sum(_size(piece.path) for piece in self.pieces)
        self._current: CaptureReader | None = None
        self._it = self._read()

    # -- what a CaptureReader offers --------------------------------------------------------

    @property
    def interfaces(self) -> list[Interface]:
        """Every file's interfaces so far, numbered on from file to file (before reading: those
        each file described before its first packet)."""
        if not self._started:
            return _renumbered([i for piece in self.pieces for i in piece.interfaces])
        current = self._current
        done = self._done_interfaces
        return done + (_renumbered(current.interfaces, len(done)) if current is not None else [])

    @property
    def linktypes(self) -> list[int]:
        return [i.linktype for i in self.interfaces]

    @property
    def nanosecond(self) -> bool:
        return any(i.ts_resolution > 1_000_000 for i in self.interfaces)

    @property
    def snaplen(self) -> int:
        return max((i.snaplen for i in self.interfaces), default=0)

    def position(self) -> tuple[int, int]:
        """(bytes read of all files so far, their total size), for a progress bar."""
        current = self._current
        here = current.position()[0] if current is not None else 0
        return self._done_bytes + here, self._total_bytes

    def __iter__(self) -> Iterator[RawPacket]:
        return self._it

    # -- reading ---------------------------------------------------------------------------

    def _read(self) -> Generator[RawPacket, None, None]:
        last_ts: float | None = None
        last_path = ""
        self._started = True
        for piece in self.pieces:
            reader = CaptureReader(piece.path, before=self.packets)
            self._current = reader
            # key logs (pcapng DSBs) go to the one list the dissector reads as it grows: those
            # before the first packet were read on opening
            self.secrets.extend(reader.secrets)
            reader.secrets = self.secrets
            shift = len(self._done_interfaces)
            first = True
            try:
                for packet in reader:
                    if first:
                        first = False
                        if last_ts is not None and packet.ts < last_ts:
                            self._overlap(piece.path, last_path, packet)
                    if shift:
                        packet.interface += shift
                    yield packet
                    last_ts = packet.ts
            finally:
                self.packets = reader.packets
                self._done_bytes += _size(piece.path)
                self._done_interfaces = self._done_interfaces + _renumbered(
                    reader.interfaces, shift
                )
                self._current = None
                name = os.path.basename(piece.path)
                for found in reader.findings:
                    message = f"{name}: {found.message}"
                    self.findings.append(dataclasses.replace(found, message=message))
                reader.close()
            if last_ts is not None:
                last_path = piece.path

    def _overlap(self, path: str, before: str, packet: RawPacket) -> None:
        self.findings.append(
            finding(
                "capture.files-overlap",
                f"{os.path.basename(path)} begins (packet {packet.number}) before"
                f" {os.path.basename(before)} ends: the files overlap in time, so they are not"
                " pieces of one rotated capture; they were read one after the other, not merged"
                " packet by packet (mergecap does that)",
                packet.number,
            )
        )

    def close(self) -> None:
        self._it.close()

    def __enter__(self) -> CaptureSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _size(path: str) -> int:
    with contextlib.suppress(OSError):
        return os.stat(path).st_size
    return 0


def open_captures(paths: Sequence[str]) -> CaptureReader | CaptureSet:
    """One capture file (or `-`), or the files of one rotated capture read as one."""
    if len(paths) == 1:
        return CaptureReader(paths[0])
    return CaptureSet(paths)


def _renumbered(interfaces: Sequence[Interface], start: int = 0) -> list[Interface]:
    """`interfaces` indexed on from `start`: as the set numbers them."""
    return [dataclasses.replace(i, index=start + n) for n, i in enumerate(interfaces)]
