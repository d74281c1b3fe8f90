"""The spool between a capture tool and the decoder: files the tool writes, read behind it.

tcpdump (or dumpcap) writes pcap into a temporary directory, starting a new file every
`size / FILES` bytes (`tcpdump -C`, `dumpcap -b filesize`). Nothing the decoder does can hold the
tool back: it never waits on a pipe, so the kernel's ring is drained at the tool's speed, and the
decoder reads the files behind it, following each as it grows and moving on when the tool has
started the next (the tool closes a file before it opens the next, so a later file existing means
the earlier one is complete).

A keeper thread bounds the spool: files read (and, with -w, copied) are deleted; when the files
not yet read pass `max_bytes`, the oldest of them are discarded (the decoder skips them) and each
time that happens is a `capture.spool-overrun` finding with the packets and bytes lost, so the
decoder is never silently behind. -w is the keeper's: it appends every file to OUT.pcap as it
grows (also files the decoder skipped), so OUT.pcap holds everything the tool captured.

How far behind the decoder is (`lag()`): the bytes written and not yet read, about as many
packets at the average size so far, and seconds (the newest file's last write against the time
stamp of the packet the decoder is at).
"""

from __future__ import annotations

import contextlib
import os
import re
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from amqpscope.capture.files import PCAP_MAGICS, PCAPNG_MAGIC
from amqpscope.capture.packet import RawPacket
from amqpscope.findings import Finding, finding

#: default bound of the spool, MB (--spool-size)
SPOOL_MB = 256
#: the spool is this many files: the tool starts a new one every size / FILES
FILES = 8
#: how often the keeper looks (copies for -w, deletes, bounds), seconds
KEEP_EVERY = 0.1
#: the reader's pause at the end of the newest file, seconds (the timeline's latency when idle)
FOLLOW_SLEEP = 0.01
#: bytes read from a spool file at a time
CHUNK = 1 << 20

_TCPDUMP_NAME = re.compile(r"spool\.pcap(\d*)$")
_DUMPCAP_NAME = re.compile(r"spool_(\d+)_\d+\.pcap$")
BASE = "spool.pcap"


def spool_files(directory: str) -> list[tuple[int, str]]:
    """The spool's files in the order the tool wrote them: (sequence number, path)."""
    out = []
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    for name in names:
        m = _TCPDUMP_NAME.match(name) or _DUMPCAP_NAME.match(name)
        if m:
            out.append((int(m.group(1) or 0), os.path.join(directory, name)))
    out.sort()
    return out


#: a record claiming more than this is damage, not a packet
MAX_RECORD = 16 * 1024 * 1024


class PcapStreamError(Exception):
    pass


class PcapStream:
    """Incremental pcap parser (sans-IO): bytes as they come in, whole packets out.

    `feed(data)` returns the packets completed by `data` (number 0: the caller numbers them).
    Microsecond and nanosecond pcap, either byte order; the timestamp is computed exactly as the
    file reader does, so a packet read live and read back from the file has the same `ts`.
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self.linktype: int | None = None
        self.snaplen = 0
        self.units = 1_000_000
        self._rec: struct.Struct | None = None

    def feed(self, data: bytes) -> list[RawPacket]:
        buf = self._buf
        buf += data
        off = 0
        if self._rec is None:
            if len(buf) < 24:
                return []
            magic = bytes(buf[:4])
            if magic not in PCAP_MAGICS:
                if magic == PCAPNG_MAGIC:
                    raise PcapStreamError("a pcapng stream, not pcap")
                raise PcapStreamError(f"not a pcap stream (starts {magic.hex()})")
            endian, self.units = PCAP_MAGICS[magic]
            self.snaplen, linktype = struct.unpack_from(endian + "II", buf, 16)
            self.linktype = linktype & 0x03FFFFFF
            self._rec = struct.Struct(endian + "IIII")
            off = 24
        rec = self._rec
        linktype = self.linktype
        assert linktype is not None  # read with the header
        units = self.units
        out: list[RawPacket] = []
        end = len(buf)
        while end - off >= 16:
            sec, frac, caplen, wirelen = rec.unpack_from(buf, off)
            if caplen > MAX_RECORD:
                raise PcapStreamError(f"a record of {caplen} bytes: the stream is damaged")
            if end - off - 16 < caplen:
                break
            start = off + 16
            off = start + caplen
            out.append(
                RawPacket(0, (sec * units + frac) / units, linktype, bytes(buf[start:off]), wirelen)
            )
        if off:
            del buf[:off]
        return out

    @property
    def pending(self) -> int:
        """Bytes of an incomplete record (a stream that ends here was cut)."""
        return len(self._buf)


def make_directory(parent: str | None) -> str:
    """A new spool directory (named with our pid), after removing spools whose process is gone
    (killed before it could clean up: its tool died with it)."""
    import shutil
    import tempfile

    where = parent or tempfile.gettempdir()
    with contextlib.suppress(OSError):
        for name in os.listdir(where):
            m = re.match(r"amqpscope-spool-(\d+)-", name)
            if m and not _alive(int(m.group(1))):
                shutil.rmtree(os.path.join(where, name), ignore_errors=True)
    return tempfile.mkdtemp(prefix=f"amqpscope-spool-{os.getpid()}-", dir=where)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's
    return True


def count_records(path: str) -> tuple[int, int]:
    """Packets and bytes of a complete pcap file (its header not counted)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return 0, 0
    if len(data) < 24:
        return 0, 0
    endian = PCAP_MAGICS.get(bytes(data[:4]), (">", 0))[0]
    length = struct.Struct(endian + "I")
    off, n, end = 24, 0, len(data)
    while end - off >= 16:
        (caplen,) = length.unpack_from(data, off + 8)
        off += 16 + caplen
        n += 1
    return n, end - 24


@dataclass
class Lag:
    """How far the decoder is behind the capture tool."""

    bytes: int = 0
    packets: int = 0  # about: the bytes at the average packet size so far
    seconds: float = 0.0

    def text(self) -> str:
        return f"{self.seconds:.1f} s ({self.bytes / 1e6:.1f} MB, ~{self.packets} packets)"

    def to_json(self) -> dict[str, float | int]:
        return {"bytes": self.bytes, "packets": self.packets, "seconds": round(self.seconds, 3)}


class Spool:
    """The reader (`packets()`, in the decoding thread) and the keeper (its own thread).

    `running()` tells whether the tool still writes: once it returned False, `packets()` ends
    after the last byte of the last file. `parse` makes a fresh incremental pcap parser.
    """

    def __init__(
        self,
        directory: str,
        max_bytes: int,
        running: Callable[[], bool],
        parse: Callable[[], PcapStream] = PcapStream,
        write: str | None = None,
    ) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.running = running
        self._new_parser = parse
        self.write_path = write
        self._out: int | None = None
        #: -w NAME.pcapng: the tool's pcap converted as it is copied (`capture.writer`)
        self._convert: Any = None
        if write is not None:
            from amqpscope.capture.writer import PcapToPcapng, format_for

            if format_for(write, "pcap") == "pcapng":
                self._convert = PcapToPcapng()
        if write is not None:
            self._out = os.open(write, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._lock = threading.Lock()  # the reader's file, against the keeper's discards
        self._keeping = threading.Lock()  # one keeper pass at a time
        # the reader
        self._seq = -1  # the file being read
        self._fd: int | None = None
        self._offset = 0
        self._parser: PcapStream | None = None
        self._complete = False  # the tool has moved on to a later file
        self.number = 0  # packets numbered so far (read, and skipped when discarded)
        self.read_packets = 0
        self.read_bytes = 0
        self.last_ts = 0.0
        self.error: str | None = None
        # the keeper
        self._discarded: dict[int, int] = {}  # file -> packets in it the decoder did not read
        self.discarded_packets = 0
        self.discarded_bytes = 0
        self.findings: list[Finding] = []
        self._copy_seq = -1
        self._copy_offset = 0
        self.written = 0
        self.max_lag = Lag()
        self._lag = Lag()
        self._stop = threading.Event()
        self._keeper = threading.Thread(target=self._keep, name="amqpscope-spool", daemon=True)
        self._keeper.start()

    # -- the reader ------------------------------------------------------------------------------

    def packets(self, poll: float) -> Iterator[RawPacket | None]:
        """Packets as the tool writes them; None on catching up with the tool and then every
        `poll` seconds without a packet; ends once the tool has exited and everything it wrote
        was read."""
        quiet_since = time.monotonic()
        busy = False  # packets came since the last None
        while True:
            alive = self.running()
            got = self._read()
            if got:
                yield from got
                busy = True
                continue
            if self._advance():
                continue
            if not alive:
                return
            if busy:  # caught up with the tool: a None at once, for the caller to flush
                busy = False
                quiet_since = time.monotonic()
                yield None
                continue
            time.sleep(FOLLOW_SLEEP)
            now = time.monotonic()
            if now - quiet_since >= poll:
                quiet_since = now
                yield None

    def _read(self) -> list[RawPacket]:
        fd = self._fd
        if fd is None:
            return []
        try:
            chunk = os.pread(fd, CHUNK, self._offset)
        except OSError as exc:
            self.error = f"reading the spool: {exc}"
            return []
        if not chunk:
            return []
        self._offset += len(chunk)
        assert self._parser is not None
        try:
            packets = self._parser.feed(chunk)
        except PcapStreamError as exc:  # damage in a file the tool wrote
            self.error = f"the spool's file {self._seq}: {exc}"
            self._close_file()
            return []
        number = self.number
        for pkt in packets:
            number += 1
            pkt.number = number
        self.number = number
        if packets:
            self.read_packets += len(packets)
            self.last_ts = packets[-1].ts
        self.read_bytes += len(chunk)
        return packets

    def _advance(self) -> bool:
        """At the end of the file being read: move to the next once the tool has started it (it
        closed this one first: once seen, one more read to its end, then the switch)."""
        with self._lock:
            later = [(s, p) for s, p in spool_files(self.directory) if s > self._seq]
            if not later:
                return False
            if self._fd is not None and not self._complete:
                self._complete = True
                return True
            if self._parser is not None and self._parser.pending:
                self.error = f"the spool's file {self._seq} ends inside a packet"
            seq, path = later[0]
            self.number += sum(n for s, n in self._discarded.items() if self._seq < s < seq)
            self._close_file()
            try:
                self._fd = os.open(path, os.O_RDONLY)
            except OSError as exc:
                self.error = f"opening the spool's file {path}: {exc}"
                return False
            self._seq = seq
            self._offset = 0
            self._complete = False
            self._parser = self._new_parser()
            return True

    def _close_file(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    # -- the keeper ------------------------------------------------------------------------------

    def _keep(self) -> None:
        while not self._stop.wait(KEEP_EVERY):
            try:
                self.keep()
            except OSError as exc:
                self.error = f"the spool: {exc}"

    def keep(self) -> None:
        """One pass: copy for -w, delete what is read and copied, bound the spool, measure lag."""
        with self._keeping:
            self._keep_once()

    def _keep_once(self) -> None:
        files = spool_files(self.directory)
        if self._out is not None:
            self._copy(files)
        with self._lock:
            reading = self._seq
            done_below = reading if self._out is None else min(reading, self._copy_seq)
            sizes: dict[int, int] = {}
            for seq, path in files:
                if seq < done_below:
                    with contextlib.suppress(OSError):
                        os.unlink(path)
                    continue
                with contextlib.suppress(OSError):
                    sizes[seq] = os.stat(path).st_size
            unread = self._unread(sizes)
            if unread > self.max_bytes:
                self._measure(files, dict(sizes))  # the most it was behind, before the discard
                self._discard(files, sizes, reading, unread)
        self._measure(files, sizes)

    def _discard(
        self, files: list[tuple[int, str]], sizes: dict[int, int], reading: int, unread: int
    ) -> None:
        """Delete the oldest files not read yet (never the one read, nor the one written)."""
        newest = max(sizes) if sizes else reading
        lost_packets = lost_bytes = 0
        for seq, path in files:
            if unread <= self.max_bytes * 3 // 4:
                break
            if seq <= reading or seq >= newest or seq not in sizes:
                continue
            if self._out is not None and seq >= self._copy_seq:
                continue  # -w has not got it yet
            packets, size = count_records(path)
            with contextlib.suppress(OSError):
                os.unlink(path)
            self._discarded[seq] = packets
            lost_packets += packets
            lost_bytes += size
            unread -= sizes.pop(seq)
        if lost_packets or lost_bytes:
            self.discarded_packets += lost_packets
            self.discarded_bytes += lost_bytes
            self.findings.append(
                finding(
                    "capture.spool-overrun",
                    f"the decoder fell more than {self.max_bytes / 1e6:.0f} MB behind the "
                    f"capture: {lost_packets} packets ({lost_bytes / 1e6:.1f} MB) it had not "
                    f"read were discarded from the spool (-w keeps them)"
                    if self._out is not None
                    else f"the decoder fell more than {self.max_bytes / 1e6:.0f} MB behind the "
                    f"capture: {lost_packets} packets ({lost_bytes / 1e6:.1f} MB) it had not "
                    f"read were discarded from the spool (--spool-size makes it larger)",
                )
            )

    def _measure(self, files: list[tuple[int, str]], sizes: dict[int, int]) -> None:
        unread = self._unread(sizes)
        seconds = 0.0
        if unread and files and self.last_ts:
            with contextlib.suppress(OSError):
                seconds = max(os.stat(files[-1][1]).st_mtime - self.last_ts, 0.0)
        average = self.read_bytes / self.read_packets if self.read_packets else 0
        lag = Lag(unread, round(unread / average) if average else 0, seconds)
        self._lag = lag
        top = self.max_lag
        if lag.bytes > top.bytes or lag.seconds > top.seconds:
            self.max_lag = Lag(
                max(lag.bytes, top.bytes),
                max(lag.packets, top.packets),
                max(lag.seconds, top.seconds),
            )

    def _unread(self, sizes: dict[int, int]) -> int:
        """Bytes of packets written and not read yet (file headers not counted)."""
        reading, offset = self._seq, self._offset
        unread = 0
        for seq, size in sizes.items():
            if seq > reading:
                unread += max(size - 24, 0)
            elif seq == reading:
                unread += max(size - max(offset, 24), 0)
        return unread

    def lag(self) -> Lag:
        return self._lag

    def _copy(self, files: list[tuple[int, str]]) -> None:
        """Append to -w what the tool has written since the last pass (each file's records; the
        header once)."""
        out = self._out
        assert out is not None
        for seq, path in files:
            if seq < self._copy_seq:
                continue
            if seq > self._copy_seq:
                if self._copy_seq >= 0:
                    self._copy_file(out, self._copy_path)
                self._copy_seq, self._copy_path = seq, path
                self._copy_offset = 0 if self.written == 0 else 24
            self._copy_file(out, path)

    _copy_path = ""

    def _copy_file(self, out: int, path: str) -> None:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return
        try:
            size = os.fstat(fd).st_size
            while self._copy_offset < size and self._convert is not None:
                data = os.pread(fd, min(size - self._copy_offset, 1 << 20), self._copy_offset)
                if not data:
                    break
                self._copy_offset += len(data)
                converted = self._convert.feed(data)
                while converted:
                    sent = os.write(out, converted)
                    converted = converted[sent:]
                    self.written += sent
            while self._copy_offset < size:
                sent = os.sendfile(out, fd, self._copy_offset, size - self._copy_offset)
                if sent <= 0:
                    break
                self._copy_offset += sent
                self.written += sent
        finally:
            os.close(fd)

    def finish(self) -> None:
        """Stop the keeper; -w gets the last bytes (idempotent). The directory is the caller's to
        remove."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._keeper.join(10)
        with self._keeping:
            self._finish_copy()
        with self._lock:
            self._close_file()

    def _finish_copy(self) -> None:
        if self._out is not None:
            with contextlib.suppress(OSError):
                self._copy(spool_files(self.directory))
                if self._copy_seq >= 0:
                    self._copy_file(self._out, self._copy_path)
            with contextlib.suppress(OSError):
                os.close(self._out)
            self._out = None
