"""What a command reads: a capture or a frame-trace log, told apart by content, in one place.

`read`, `summary` and `export` take either. The first bytes decide (a pcap or pcapng magic,
gzip'd or not, is a capture; anything else a text log), then the log's format is detected from
its first lines unless `--format` forces one. Either way the command gets frame records and the
findings no frame carries.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

import click

from amqpscope.capture.files import PCAPNG_MAGIC, CaptureError, CaptureReader
from amqpscope.capture.pipe import STDIN
from amqpscope.capture.textlog import (
    LogFile,
    head_of,
    is_capture,
    is_text,
    looks_like_text,
    open_stream,
)
from amqpscope.cli.common import fail
from amqpscope.findings import Finding

if TYPE_CHECKING:
    from amqpscope.capture.rotated import CaptureSet
    from amqpscope.codec.frames import Frame
    from amqpscope.dissect import Dissector
    from amqpscope.logs.reader import LogReader

#: the names --format takes: logs.formats.NAMES, spelled out so that the CLI starts without
#: importing the grammars (tests/test_logs_pyamqp.py checks they agree)
FORMAT_NAMES = (
    "proton",
    "rhea",
    "pyamqp",
    "proton-j",
    "amqpnetlite",
    "pika",
    "go-amqp",
    "router",
)


def several_files(_ctx: Any, _param: Any, files: tuple[str, ...]) -> tuple[str, ...]:
    """FILE...'s check, for every command that takes several (and so for -w and the TUI's cut
    too): standard input is read alone, and no file is given twice."""
    if len(files) > 1:
        if STDIN in files:
            fail("standard input (-) is read alone, not with other files", 2)
        seen: set[str] = set()
        for path in files:
            key = os.path.realpath(path)
            if key in seen:
                fail(f"{path}: given twice", 2)
            seen.add(key)
    return files


def files_argument(fn: Callable[..., Any]) -> Callable[..., Any]:
    """FILE...: one capture or log, the files of one rotated capture (read as one), or vantage
    points of the same traffic (merged: --inputs, --offset, `cli.merging`)."""
    from amqpscope.cli.merging import merge_options

    fn = merge_options(fn)
    return click.argument(
        "files",
        nargs=-1,
        required=True,
        metavar="FILE...",
        # a directory or a file without read permission is unreadable input (1), told when
        # opened; not click's check (readable), which makes it bad usage (2) in four lines
        type=click.Path(path_type=str, readable=False),
        callback=several_files,
    )(fn)


def shown_name(files: Sequence[str]) -> str:
    """The input, named in one line: its path, or the first of several and how many more."""
    if len(files) == 1:
        return files[0]
    return f"{files[0]} (and {len(files) - 1} more)"


def format_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(FORMAT_NAMES),
        default=None,
        help="FILE is a frame-trace log of this format (default: told from its content).",
    )(fn)


class Input:
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
def open_input(paths: str | Sequence[str], fmt: str | None = None) -> Iterator[Input]:
    """The capture or log at `paths` (`-`: standard input), open. CaptureError when it cannot
    be read, or is text in no format amqpscope reads; bytes that are no text are left to the
    capture reader, whose errors say what they are. Several paths are the files of one
    rotated capture (`capture.rotated`), all captures, or vantage points merged into one
    timeline (`cli.merging`: --inputs, else told by their times)."""
    if not isinstance(paths, str) and len(paths) > 1:
        from amqpscope.cli.merging import VANTAGE, open_merged, wanted_mode

        if wanted_mode(paths) == VANTAGE:
            with open_merged(paths, fmt) as merged:
                yield merged  # type: ignore[misc]  # an Input to the commands
            return
        with _open_set(paths, fmt) as captures:
            yield Input(captures.path, capture=captures)
        return
    path = paths if isinstance(paths, str) else paths[0]
    stream = open_stream(path)
    try:
        head, compressed = head_of(stream, path)
        if fmt is not None and is_capture(head):  # its bytes, read as text, hold no frame
            kind = "pcapng" if head[:4] == PCAPNG_MAGIC else "pcap"
            fail(f"--format {fmt}: {path} is a {kind} capture, not a frame-trace log", 2)
        if fmt is None and (is_capture(head) or not is_text(head, compressed)):
            with CaptureReader(path, stream) as capture:
                yield Input(path, capture=capture)
            return
        with LogFile(path, stream, compressed) as log:
            lines: Iterator[str] = iter(log)
            if fmt is None:
                from amqpscope.logs.detect import sniff

                fmt, first, library = sniff(lines)
                if fmt is None:
                    raise CaptureError(_not_a_log(path, compressed, library))
                lines = itertools.chain(first, lines)
            yield Input(path, log=log, fmt=fmt, lines=lines)
    finally:
        with contextlib.suppress(OSError, ValueError):
            stream.close()


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
        fail(f"--format {fmt}: a frame-trace log is read alone, not with other files", 2)
    try:
        captures = CaptureSet(paths)
    except CaptureError:
        _no_text_among(paths)  # says so when the one that failed is a log
        raise
    with captures:
        yield captures


def _no_text_among(paths: Sequence[str]) -> None:
    """CaptureError naming the first of `paths` that is text (a frame-trace log, say)."""
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
            raise CaptureError(
                f"{path}: text, not a capture file; several files are read together only when"
                " all are pcap or pcapng captures (a frame-trace log is read alone)"
            )
