"""Every input, opened in one place: a capture, the files of one rotated capture, a frame-trace
log, standard input (`-`), several vantage points of the same traffic merged into one timeline
(`amqpscope.merge`), and the TLS key log that goes with them.

The first bytes decide what a file is (a pcap or pcapng magic, gzip'd or not, is a capture;
anything else a text log), then the log's format is told from its first lines unless a format is
forced. Every face (the CLI's commands, the TUI, the report, the Spark job) opens its input
here and gets frame records and the findings no frame carries.

Nothing here prints or exits: what cannot be read raises a `SourceError`, one line for a human
in `str()`, its kind in its class and the exit status a command ends with in `code` (1 for
unreadable input, 2 for a usage the input contradicts). The CLI maps them to its one-line
messages; the TUI says them on its status line; the Spark job makes them findings rows.
(`SourceError` is a `CaptureError`, so code that catches the capture readers' errors catches
these too.)
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol

from amqpscope.capture.files import PCAPNG_MAGIC, CaptureError, CaptureReader
from amqpscope.capture.pipe import STDIN
from amqpscope.capture.secrets import KeyLogFiles
from amqpscope.capture.textlog import (
    LogFile,
    head_of,
    is_capture,
    is_text,
    looks_like_text,
    open_stream,
)
from amqpscope.findings import Finding
from amqpscope.merge.kind import AUTO, ROTATED, VANTAGE, Span, tell

if TYPE_CHECKING:
    from amqpscope.capture.rotated import CaptureSet
    from amqpscope.codec.frames import Frame
    from amqpscope.codec.tls import KeyLog
    from amqpscope.dissect import Dissector
    from amqpscope.logs.reader import LogReader
    from amqpscope.merge.stream import Streaming
    from amqpscope.merge.timeline import Merged

#: the names a log's format takes (`--format`): logs.formats.NAMES, spelled out so that opening
#: an input does not import the grammars (tests/test_logs_pyamqp.py checks they agree)
FORMAT_NAMES: Final = (
    "proton",
    "rhea",
    "pyamqp",
    "proton-j",
    "amqpnetlite",
    "pika",
    "go-amqp",
    "uamqp",
    "router",
)


# -- what can go wrong -------------------------------------------------------------------------
class SourceError(CaptureError):
    """An input that cannot be read as asked; `str()` is one line for a human, `code` the exit
    status a command ends with."""

    code: int = 1


class Unreadable(SourceError):
    """The file cannot be opened or read: missing, a directory, no permission, an I/O error."""


class NotACapture(SourceError):
    """Bytes the capture readers refuse: not a pcap or pcapng, a header cut short."""


class Empty(NotACapture):
    """A file (or standard input) with nothing in it, compressed or not."""


class NotALog(SourceError):
    """Text in no frame-trace log format amqpscope reads (or text among several captures)."""


class UsageConflict(SourceError):
    """What was asked cannot apply to this input: a log format forced on a capture, a log or
    standard input read with other files, a file given twice. Bad usage: exit 2."""

    code = 2


class KeyLogUnreadable(Unreadable):
    """The TLS key log (`--keylog FILE`) cannot be read."""


# -- the files a command is given ----------------------------------------------------------------
def check_paths(paths: Sequence[str]) -> None:
    """Several inputs' rule: standard input is read alone, and no file is given twice
    (UsageConflict)."""
    if len(paths) > 1:
        if STDIN in paths:
            raise UsageConflict("standard input (-) is read alone, not with other files")
        seen: set[str] = set()
        for path in paths:
            key = os.path.realpath(path)
            if key in seen:
                raise UsageConflict(f"{path}: given twice")
            seen.add(key)


class Progress(Protocol):
    """What a progress bar reads of an open input: its (first) file's path, and how far it is
    read (bytes done, bytes in all)."""

    @property
    def path(self) -> str: ...

    def position(self) -> tuple[int, int]: ...


class Input(Protocol):
    """An opened input, as every face reads it: one file (`Source`) or several vantage points
    merged (`MergedInput`). `capture`, `log` and `dissector` say what one file's bytes are
    (None for a merged input: no one file's packets are its timeline's)."""

    @property
    def path(self) -> str: ...

    @property
    def fmt(self) -> str: ...

    @property
    def capture(self) -> CaptureReader | CaptureSet | None: ...

    @property
    def log(self) -> LogFile | None: ...

    @property
    def dissector(self) -> Dissector | None: ...

    @property
    def source(self) -> str: ...

    @property
    def file(self) -> Progress: ...

    @property
    def findings(self) -> list[Finding]: ...

    def frames(
        self,
        show_secrets: bool = False,
        redact_bodies: bool = False,
        messages: bool = True,
        keylog: Any = None,
        wrap: Callable[[Any], Any] | None = None,
        carriers: bool = False,
        retire: bool = False,
    ) -> Iterator[Frame]: ...


class Source:
    """An open capture (`capture`) or log (`log`, its format `fmt`); `frames()` reads it once."""

    def __init__(
        self,
        path: str,
        capture: CaptureReader | CaptureSet | None = None,
        log: LogFile | None = None,
        fmt: str = "",
        lines: Iterable[str] = (),
    ) -> None:
        self.path = path
        self.capture = capture
        self.log = log
        self.fmt = fmt
        self.lines = lines  # the log's lines (those detection looked at first)
        self.dissector: Dissector | None = None
        self.reader: LogReader | None = None

    @property
    def source(self) -> str:
        """What findings call the input: "log" or "capture" (a `Tracker`'s `source`)."""
        return "log" if self.log is not None else "capture"

    def frames(
        self,
        show_secrets: bool = False,
        redact_bodies: bool = False,
        messages: bool = True,
        keylog: Any = None,
        wrap: Callable[[Any], Any] | None = None,
        carriers: bool = False,
        retire: bool = False,
    ) -> Iterator[Frame]:
        """The records, from the capture (`wrap` around its packets: a progress bar; `carriers`:
        which packets carried each frame, for -V, -x and -w; `retire`: connections forgotten
        once closed, `Dissector`) or log."""
        if self.capture is not None:
            from amqpscope.dissect import Dissector

            dissector = self.dissector = Dissector(
                show_secrets=show_secrets,
                redact_bodies=redact_bodies,
                messages=messages,
                carriers=carriers,
                retire=retire,
            )
            dissector.context.keylog = keylog
            if wrap is None:
                return dissector.run(self.capture)
            dissector.take_secrets(self.capture.secrets)  # which the wrapper hides from run
            return dissector.run(wrap(self.capture))
        return self._log_frames(show_secrets, messages, redact_bodies)

    def _log_frames(
        self, show_secrets: bool, messages: bool, redact_bodies: bool = False
    ) -> Iterator[Frame]:
        from amqpscope.logs.reader import LogReader

        reader = self.reader = LogReader(
            self.path,
            self.fmt,
            show_secrets=show_secrets,
            messages=messages,
            redact_bodies=redact_bodies,
        )
        feed = reader.feed
        for number, line in enumerate(self.lines, 1):
            yield from feed(line, number)
        yield from reader.flush()
        reader.finish()

    @property
    def file(self) -> CaptureReader | CaptureSet | LogFile:
        """The open file, for a progress bar (its path and position)."""
        found = self.capture if self.capture is not None else self.log
        assert found is not None
        return found

    @property
    def findings(self) -> list[Finding]:
        """What no frame carries: the file's and the reading's (complete once read)."""
        if self.capture is not None:
            return self.capture.findings + (self.dissector.findings if self.dissector else [])
        out = self.reader.findings if self.reader is not None else []
        out = out + (self.log.findings if self.log is not None else [])
        skipped = self.reader.skipped_finding() if self.reader is not None else None
        return out if skipped is None else [*out, skipped]


@contextlib.contextmanager
def open_source(
    paths: str | Sequence[str],
    fmt: str | None = None,
    inputs: str = AUTO,
    offsets: dict[str, float] | None = None,
) -> Iterator[Input]:
    """The capture or log at `paths` (`-`: standard input), open; a `SourceError` when it
    cannot be read, or is text in no format amqpscope reads (bytes that are no text are left to
    the capture reader, whose errors say what they are). Several paths are the files of one
    rotated capture (`capture.rotated`), all captures, or vantage points merged into one
    timeline (`inputs`: AUTO, ROTATED or VANTAGE; `offsets`: clocks set by input letter).
    `fmt`: the log's format, forced."""
    if not isinstance(paths, str) and len(paths) > 1:
        if inputs != ROTATED:
            sniffed = [_is_capture(path) for path in paths]  # each file's head, looked at once
            if input_mode(paths, inputs, sniffed) == VANTAGE:
                with open_merged(paths, fmt, offsets, sniffed) as merged:
                    yield merged
                return
        with _open_set(paths, fmt) as captures:
            yield Source(captures.path, capture=captures)
        return
    path = paths if isinstance(paths, str) else paths[0]
    stream = _opened(path)
    try:
        head, compressed = _head(stream, path)
        if fmt is not None and is_capture(head):  # its bytes, read as text, hold no frame
            kind = "pcapng" if head[:4] == PCAPNG_MAGIC else "pcap"
            raise UsageConflict(
                f"--format {fmt}: {path} is a {kind} capture, not a frame-trace log"
            )
        if fmt is None and _capture_bytes(head, compressed):
            try:
                capture = CaptureReader(path, stream)
            except SourceError:
                raise
            except CaptureError as exc:
                refused = Empty if not head else NotACapture
                raise refused(str(exc)) from exc
            with capture:
                yield Source(path, capture=capture)
            return
        with LogFile(path, stream, compressed) as log:
            lines: Iterator[str] = iter(log)
            if fmt is None:
                from amqpscope.logs.detect import sniff

                fmt, first, library = sniff(lines)
                if fmt is None:
                    raise NotALog(_not_a_log(path, compressed, library))
                lines = itertools.chain(first, lines)
            yield Source(path, log=log, fmt=fmt, lines=lines)
    finally:
        with contextlib.suppress(OSError, ValueError):
            stream.close()


def _opened(path: str) -> Any:
    """`open_stream`, its CaptureError an Unreadable."""
    try:
        return open_stream(path)
    except CaptureError as exc:
        raise Unreadable(str(exc)) from exc


def _head(stream: Any, path: str) -> tuple[bytes, str]:
    """`head_of`, its CaptureError (an I/O error, damaged xz or bzip2) an Unreadable."""
    try:
        return head_of(stream, path)
    except CaptureError as exc:
        raise Unreadable(str(exc)) from exc


def input_kind(path: str) -> tuple[str, str | None]:
    """What the file holds, told by content as `open_source` tells it: ("capture", None),
    ("log", its format), or ("text", None) for text in no log format amqpscope reads. A pcap
    or pcapng (gzip'd or not), or bytes that are no text, count as a capture (whose reader says
    what is wrong with them). Unreadable (or OSError) when it cannot be read."""
    stream = _opened(path)
    try:
        head, compressed = _head(stream, path)
        if _capture_bytes(head, compressed):
            return "capture", None
        from amqpscope.logs.detect import sniff

        with LogFile(path, stream, compressed) as log:
            fmt = sniff(iter(log)).fmt
        return ("log", fmt) if fmt is not None else ("text", None)
    finally:
        with contextlib.suppress(OSError, ValueError):
            stream.close()


def _capture_bytes(head: bytes, compressed: str) -> bool:
    """Whether a file's first bytes make it a capture: a pcap or pcapng magic, or bytes that
    are no text (left to the capture reader, whose errors say what they are)."""
    return is_capture(head) or not is_text(head, compressed)


def _not_a_log(path: str, compressed: str, library: tuple[str, str] | None) -> str:
    """The one-line error for text in no format amqpscope reads (`compressed`: how it was)."""
    inner = f" (after {_UNPACKED.get(compressed, compressed)})" if compressed else ""
    if library is not None:
        name, why = library
        return (
            f"{path}: a {name} log{inner}, but no frame in it that amqpscope reads ({why});"
            " capture the traffic instead (tcpdump, then amqpscope read)"
        )
    names = ", ".join(FORMAT_NAMES)
    return (
        f"{path}: not a pcap or pcapng file, nor a frame-trace log amqpscope "
        f"reads{inner} (log formats: {names}; --format forces one)"
    )


#: what decompressing each compression is called, for `_not_a_log`
_UNPACKED: Final = {"gzip": "gunzip", "xz": "unxz", "bz2": "bunzip2"}


@contextlib.contextmanager
def _open_set(paths: Sequence[str], fmt: str | None) -> Iterator[CaptureSet]:
    """Several files, all captures: a frame-trace log is read alone."""
    from amqpscope.capture.rotated import CaptureSet

    if fmt is not None:
        raise UsageConflict(
            f"--format {fmt}: a frame-trace log is read alone, not with other files"
        )
    try:
        captures = CaptureSet(paths)
    except CaptureError as exc:
        _no_text_among(paths)  # says so when the one that failed is a log
        raise _refusal(paths)(str(exc)) from exc
    with captures:
        yield captures


@contextlib.contextmanager
def open_captures(paths: Sequence[str]) -> Iterator[CaptureReader | CaptureSet]:
    """Captures only, for what is cut from their packets (`read -w`, the TUI's `w`): one file
    (or `-`), or the files of one rotated capture read as one; a `SourceError` when they cannot
    be read as captures (a log among them too, in the capture reader's words)."""
    from amqpscope.capture.rotated import open_captures as opened

    try:
        captures = opened(paths)
    except SourceError:
        raise
    except CaptureError as exc:
        raise _refusal(paths)(str(exc)) from exc
    with captures:
        yield captures


def _refusal(paths: Sequence[str]) -> type[SourceError]:
    """Which kind of error a rotated set's failure was: the first of `paths` that cannot be
    opened makes it Unreadable, an empty one Empty, else the capture reader refused bytes.
    Standard input is not read again (what the reader took is gone; a pipe may wait for more)."""
    for path in paths:
        if path == STDIN:
            continue
        try:
            stream = open_stream(path)
        except CaptureError:
            return Unreadable
        try:
            head, _ = head_of(stream, path)
        except CaptureError:
            return Unreadable
        finally:
            with contextlib.suppress(OSError, ValueError):
                stream.close()
        if not head:
            return Empty
    return NotACapture


def _no_text_among(paths: Sequence[str]) -> None:
    """NotALog naming the first of `paths` that is text (a frame-trace log, say)."""
    for path in paths:
        try:
            stream = open_stream(path)
        except CaptureError:
            continue
        try:
            head, _ = head_of(stream, path)
        finally:
            with contextlib.suppress(OSError, ValueError):
                stream.close()
        if not is_capture(head) and looks_like_text(head):
            raise NotALog(
                f"{path}: text, not a capture file; several files are read together only when"
                " all are pcap or pcapng captures (a frame-trace log is read alone)"
            )


# -- the TLS key log -------------------------------------------------------------------------
def check_keylog(path: str | None) -> None:
    """A key log file is input: KeyLogUnreadable when it cannot be read."""
    if path is None:
        return
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        why = "no such file" if isinstance(exc, FileNotFoundError) else exc.strerror or str(exc)
        raise KeyLogUnreadable(f"--keylog {path}: {why}") from None


#: what `load_keylog` says of a key log that holds no key (after "warning: ")
NO_KEYS: Final = (
    "--keylog {path} holds no TLS keys (NSS key log lines, as SSLKEYLOGFILE writes); TLS stays"
    " encrypted without them"
)


def load_keylog(path: str | None, warn: Callable[[str], None] | None = None) -> KeyLog:
    """The TLS secrets of key log `path` and SSLKEYLOGFILE, re-read whenever a connection's key
    is missing (a live client appends to its key log). A pcapng's own secrets (Decryption
    Secrets Blocks) are added by `Dissector.run`. KeyLogUnreadable when `path` cannot be read;
    a `path` of no keys decrypts nothing, which `warn` is told (the input is read all the same)."""
    from amqpscope.codec.tls import KeyLog

    check_keylog(path)
    env = os.environ.get("SSLKEYLOGFILE")
    files = KeyLogFiles([p for p in (path, env) if p])
    keylog = KeyLog()
    last = [0.0]

    def refresh() -> None:
        import time

        now = time.monotonic()
        if now - last[0] < 0.2:  # at most a look (one stat) per file every 0.2 s
            return
        last[0] = now
        for text in files.read_new():
            keylog.add_text(text)

    refresh()
    keylog.refresh = refresh
    if path and warn is not None and not KeyLog("".join(KeyLogFiles([path]).read_new())):
        warn(NO_KEYS.format(path=path))
    return keylog


# -- several vantage points ------------------------------------------------------------------
# Several FILEs are either the pieces of one rotated capture (read one after the other) or
# vantage points of the same traffic (captures from several hosts, clients' logs), merged into one
# timeline by `amqpscope.merge`: each frame once, every input's time of it, clocks aligned.


def input_mode(
    paths: Sequence[str], inputs: str = AUTO, captures: Sequence[bool] | None = None
) -> str:
    """ROTATED or VANTAGE for several `paths`: `inputs` when it says, else told by their
    content (`merge.kind`: a TCP segment in two of them, or times that overlap); `captures`:
    which are captures, when already sniffed (`_is_capture`)."""
    if inputs != AUTO:
        return inputs
    if captures is None:
        captures = [_is_capture(path) for path in paths]
    return tell(_spans(paths, captures))


def letter(n: int) -> str:
    """The n-th input's name: A, B, ... Z, then I27, I28..."""
    return chr(ord("A") + n) if n < 26 else f"I{n + 1}"


def _is_capture(path: str) -> bool:
    """Whether `path` holds a capture, as `input_kind` tells it (its first bytes); Unreadable
    when it cannot be read."""
    stream = _opened(path)
    try:
        head, compressed = _head(stream, path)
    finally:
        with contextlib.suppress(OSError, ValueError):
            stream.close()
    return _capture_bytes(head, compressed)


class _Scan:
    """One capture's packets as `_spans` reads them, once: its first TCP segments with a
    payload (up to `BEGINNING`, the packets before them kept as keys), then the rest."""

    def __init__(self, path: str, stack: contextlib.ExitStack) -> None:
        from amqpscope.capture.linklayer import SegmentDecoder
        from amqpscope.merge.kind import BEGINNING

        self.decoder = SegmentDecoder()
        reader = stack.enter_context(CaptureReader(path))
        self.packets = iter(reader)
        self.first: float | None = None
        self.last: float | None = None
        self.keys: list[tuple[object, ...] | None] = []  # the beginning's, each packet's
        self.beginning: set[tuple[object, ...]] = set()
        for packet in self.packets:
            key = self.key(packet)
            self.keys.append(key)
            if key is not None:
                self.beginning.add(key)
                if len(self.beginning) >= BEGINNING:
                    break

    def key(self, packet: Any) -> tuple[object, ...] | None:
        """The packet's TCP segment as two captures of it show it (None: no payload)."""
        from amqpscope.merge.kind import segment_key

        if self.first is None:
            self.first = packet.ts
        self.last = packet.ts
        segment = self.decoder.decode(packet)
        if segment is None or not segment.payload:
            return None
        return segment_key(segment.src, segment.dst, segment.seq, len(segment.payload))

    def shares(self, others: set[tuple[object, ...]]) -> bool:
        """Whether a packet of this capture begins another (`others`: their beginnings); read
        to its end when none does (its last time)."""
        if others and any(key in others for key in self.keys):
            return True
        for packet in self.packets:
            key = self.key(packet)
            if others and key is not None and key in others:
                return True
        return False


def _spans(paths: Sequence[str], captures: Sequence[bool]) -> list[Span]:
    """What `merge.kind` needs of the files: which are logs, each capture's first and last
    packet times, and whether it holds a TCP segment another begins with (its packets read
    once, not dissected: every beginning first, then each on from there, whole or until it
    holds a packet another begins with)."""
    with contextlib.ExitStack() as stack:
        scans = [
            _Scan(path, stack) if capture else None
            for path, capture in zip(paths, captures, strict=True)
        ]
        spans = []
        for n, scan in enumerate(scans):
            if scan is None:
                spans.append(Span(True, None, None))
                continue
            others: set[tuple[object, ...]] = set()
            for m, other in enumerate(scans):
                if m != n and other is not None:
                    others |= other.beginning
            if scan.shares(others):  # vantage points whatever their times: no need to read on
                return [*spans, Span(False, scan.first, scan.last, True)]
            spans.append(Span(False, scan.first, scan.last))
        return spans


class _Files:
    """The files read, for a progress bar: the first's name, all their positions."""

    def __init__(self, inputs: Sequence[Input]) -> None:
        self.inputs = inputs
        self.path = inputs[0].path

    def position(self) -> tuple[int, int]:
        done = total = 0
        for each in self.inputs:
            here, size = each.file.position()
            done += here
            total += size
        return done, total


class MergedInput:
    """Several inputs as one (an `Input` to the commands): `frames()` reads them and gives
    the merged timeline, streamed (`merge.stream`: only a window of frames held);
    `capture`, `log` and `dissector` are None (no one file's bytes or packets are the
    timeline's: -V, -x and -w read one capture)."""

    capture: CaptureReader | CaptureSet | None = None
    log: LogFile | None = None
    dissector: Dissector | None = None

    def __init__(
        self, paths: Sequence[str], inputs: Sequence[Input], given: dict[str, float]
    ) -> None:
        self.paths = paths
        self.inputs = inputs
        self.given = given
        self.path = paths[0]
        self.fmt = next((i.fmt for i in inputs if i.fmt), "")
        self.streaming: Streaming | None = None

    @property
    def merged(self) -> Merged | None:
        """The offsets and matches (complete once read)."""
        return self.streaming.merged if self.streaming is not None else None

    @property
    def source(self) -> str:
        return "capture" if any(i.capture is not None for i in self.inputs) else "log"

    @property
    def file(self) -> _Files:
        return _Files(self.inputs)

    def frames(
        self,
        show_secrets: bool = False,
        redact_bodies: bool = False,
        messages: bool = True,
        keylog: Any = None,
        wrap: Callable[[Any], Any] | None = None,
        carriers: bool = False,
        retire: bool = False,
    ) -> Iterator[Frame]:
        from amqpscope.merge.stream import Stream, Streaming
        from amqpscope.merge.timeline import CAPTURE, LOG

        streams = [
            Stream(
                letter(n),
                each.path,
                CAPTURE if each.capture is not None else LOG,
                each.frames(show_secrets, redact_bodies, messages, keylog=keylog, retire=retire),
            )
            for n, each in enumerate(self.inputs)
        ]
        self.streaming = Streaming(streams, self.given)
        return self.streaming.frames()

    @property
    def findings(self) -> list[Finding]:
        """Every input's, each saying which input it is about."""
        import dataclasses

        from amqpscope.findings import finding

        out: list[Finding] = []
        if self.streaming is not None:  # each input's clock, first; then what the merge met
            out.extend(
                finding("merge.clock-offset", line)
                for line in said(self.streaming.merged, self.inputs, self.streaming.unmatched())
            )
            out.extend(finding("merge.window", line) for line in self.streaming.notices)
        for n, each in enumerate(self.inputs):
            name = f"input {letter(n)} ({os.path.basename(each.path)})"
            out.extend(
                dataclasses.replace(f, message=f"{name}: {f.message}") for f in each.findings
            )
        return out


def said(
    merged: Merged, inputs: Sequence[Input], unmatched: dict[str, int] | None = None
) -> list[str]:
    """One line per input: its clock offset (estimate and bound), its connections matched
    and those matched with none of another input's (`unmatched`, by input)."""
    lines = []
    for n, each in enumerate(inputs):
        name = letter(n)
        offset = merged.offsets[name]
        matched = [m for m in merged.matches if m.input == name]
        text = f"input {name} ({os.path.basename(each.path)}): {offset.text()}"
        if name in merged.dated:
            text += f"; dated from input {letter(0)} (+{merged.dated[name] / 86400:.0f} days)"
        if matched:
            by = "ends" if matched[0].how == "ends" else "content"
            many = "s" if len(matched) > 1 else ""
            text += f"; {len(matched)} connection{many} matched by {by}"
        alone = (unmatched or {}).get(name, 0)
        if alone:
            many = "s" if alone > 1 else ""
            text += (
                f"; {alone} connection{many} matched with none of another input's"
                " (no other input shows its ends)"
            )
        lines.append(text)
    return lines


@contextlib.contextmanager
def open_merged(
    paths: Sequence[str],
    fmt: str | None,
    offsets: dict[str, float] | None = None,
    captures: Sequence[bool] | None = None,
) -> Iterator[MergedInput]:
    """The inputs at `paths`, open, as one (`fmt` for those that are not captures; `offsets`:
    clock offsets set by input letter, not estimated; `captures`: which are, when already
    sniffed)."""
    given = dict(offsets or {})
    if captures is None:
        captures = [_is_capture(path) for path in paths]
    if fmt is not None and all(captures):
        raise UsageConflict(f"--format {fmt}: these files are captures, not frame-trace logs")
    with contextlib.ExitStack() as stack:
        inputs = []
        for path, capture in zip(paths, captures, strict=True):
            wanted = None if fmt is None or capture else fmt
            try:
                inputs.append(stack.enter_context(open_source(path, wanted)))
            except CaptureError as exc:
                if capture:
                    raise
                # text that is no log: said as when several files had to be captures
                text = str(exc).replace("not a pcap or pcapng file,", "text, not a capture file,")
                raise NotALog(text) from None
        yield MergedInput(paths, inputs, given)
