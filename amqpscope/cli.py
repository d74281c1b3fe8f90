"""The `amqpscope` command: wires capture, dissection and rendering; the only place that prints.

Exit codes: 0 success (findings in the traffic are output, not failure), 1 unreadable input,
2 bad usage. No traceback reaches the user: unexpected errors become one line on stderr.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import sys
from collections.abc import Callable, Iterator
from functools import wraps
from typing import TYPE_CHECKING, Any, Final

import click

from amqpscope import __version__, build
from amqpscope import schema as schemas
from amqpscope.capture.files import CaptureError, CaptureReader, open_capture
from amqpscope.capture.pipe import STDIN
from amqpscope.capture.secrets import KeyLogFiles
from amqpscope.dissect import Dissector
from amqpscope.filter import FilterError, Selection
from amqpscope.findings import Finding
from amqpscope.render.lines import frame_ndjson, ndjson_all, safe
from amqpscope.track.tracker import Tracker

if TYPE_CHECKING:  # rich (the timeline, the summary's tables) is imported when output needs it
    from rich.console import Console

    from amqpscope.codec.frames import Frame
    from amqpscope.render.progress import ProgressBar

#: findings without a frame printed to stderr before "and N more"
MAX_STDERR_FINDINGS = 20
#: the summary's width when piped: wide enough that no table or line is cut
PIPED_WIDTH = 10_000


_VERSION = (
    "%(prog)s %(version)s ("
    + ("compiled with mypyc" if build() == "compiled" else "pure Python")
    + ")"
)


def _steady_gc() -> None:
    """Before reading a capture. Decoding makes millions of small dicts that die young and few
    cycles, so the cyclic collector's default (a collection every 700 allocations) costs a few
    percent for nothing: collect every 50,000, and leave what startup made (modules, protocol
    tables) out of every collection. Cycles are still collected, so memory stays bounded."""
    gc.freeze()
    gc.set_threshold(50_000, 10, 10)


def _fail(message: str, code: int = 1) -> None:
    with contextlib.suppress(OSError, ValueError):  # what was printed comes before why it ended
        sys.stdout.flush()
    click.echo(f"amqpscope: {message}", err=True)
    sys.exit(code)


def _guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """One line and exit 1 for unreadable input or an internal error; quiet on a closed pipe."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except CaptureError as exc:
            _fail(str(exc))
        except BrokenPipeError:
            # `amqpscope read big.pcap | head`: not an error. Point stdout at /dev/null so the
            # interpreter's final flush does not fail again on the closed pipe.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            sys.exit(0)
        except KeyboardInterrupt:
            _fail("interrupted", 130)
        except (click.exceptions.Exit, click.ClickException, SystemExit):
            raise
        except Exception as exc:  # the promise: never a traceback
            _fail(f"internal error: {type(exc).__name__}: {exc} (please report it)")

    return wrapper


def _report(findings: list[Finding]) -> None:
    for f in findings[:MAX_STDERR_FINDINGS]:
        where = (
            f"connection {f.conn}: " if f.conn is not None and "connection" not in f.message else ""
        )
        click.echo(f"amqpscope: {f.severity}: {f.code}: {where}{safe(f.message)}", err=True)
    if len(findings) > MAX_STDERR_FINDINGS:
        click.echo(f"amqpscope: ... and {len(findings) - MAX_STDERR_FINDINGS} more", err=True)


class _Lines:
    """NDJSON lines to stdout's bytes (they are UTF-8 already), gathered into writes of about
    256 KB: one system call per few hundred frames instead of one per 8 KB buffer. `chunk` 0
    writes each line as it comes (input from a pipe, which may be a capture still running)."""

    CHUNK = 1 << 18

    def __init__(self, chunk: int = CHUNK) -> None:
        self.chunk = chunk
        sys.stdout.flush()
        buffer = getattr(sys.stdout, "buffer", None)  # none: a test's captured text stream
        self._write: Callable[[bytes], Any] = (
            buffer.write if buffer is not None else lambda data: sys.stdout.write(data.decode())
        )
        self._parts: list[bytes] = []
        self._size = 0

    def write(self, line: bytes) -> None:
        self._parts.append(line)
        self._size += len(line)
        if self._size >= self.chunk:
            self.flush()

    def emit(self, data: bytes) -> None:
        """Write lines gathered elsewhere (`ndjson_all`), as `flush` writes its own."""
        self._write(data)
        sys.stdout.flush()

    def flush(self) -> None:
        if self._parts:
            data = b"".join(self._parts)
            self._parts, self._size = [], 0
            self._write(data)
        sys.stdout.flush()


def _replace_unencodable() -> None:
    """A console that cannot show → or ▁ gets ? rather than a crash."""
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None:
        reconfigure(errors="replace")


def _uncoloured(color: str) -> bool:
    """rich would write no style to stdout, and size nothing by the terminal: --color auto or
    never to what is no terminal, as rich decides it (FORCE_COLOR and TTY_COMPATIBLE can make
    anything a terminal to rich; then rich decides, and prints)."""
    return (
        color != "always"
        and os.name != "nt"
        and not {"FORCE_COLOR", "TTY_COMPATIBLE"} & os.environ.keys()
        and not sys.stdout.isatty()
    )


def _console(color: str, width: int | None) -> Console:
    """The terminal, as --color and --width (and NO_COLOR, which rich honours) ask; a closed
    pipe is not an error (rich exits 1 by default)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            raise BrokenPipeError

    _replace_unencodable()
    return _Console(
        force_terminal=True if color == "always" else None,
        no_color=color == "never",
        color_system=None if color == "never" else "auto",
        width=width,
        highlight=False,
        emoji=False,
        markup=False,
    )


def _keylog(path: str | None) -> Any:
    """The TLS secrets of --keylog FILE and SSLKEYLOGFILE, re-read whenever a connection's key
    is missing (a live client appends to its key log). A pcapng's own secrets (Decryption
    Secrets Blocks) are added by `Dissector.run`."""
    from amqpscope.codec.tls import KeyLog

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
    return keylog


def _keylog_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--keylog, for every command that decodes traffic."""
    return click.option(
        "--keylog",
        type=click.Path(exists=True, dir_okay=False, path_type=str),
        metavar="FILE",
        help="TLS key log (NSS format, as SSLKEYLOGFILE writes) to decrypt TLS connections.",
    )(fn)


def _complete_iface(_ctx: Any, _param: Any, incomplete: str) -> list[Any]:
    """Shell completion of IFACE: this machine's network interfaces."""
    import socket

    from click.shell_completion import CompletionItem

    try:
        names = [name for _, name in socket.if_nameindex()]
    except OSError:
        names = []
    return [CompletionItem(name) for name in names if name.startswith(incomplete)]


def _complete_files(_ctx: Any, _param: Any, incomplete: str) -> list[Any]:
    """Shell completion by the shell's own file names (for arguments that also take URIs)."""
    from click.shell_completion import CompletionItem

    return [CompletionItem(incomplete, type="file")]


def _complete_dirs(_ctx: Any, _param: Any, incomplete: str) -> list[Any]:
    from click.shell_completion import CompletionItem

    return [CompletionItem(incomplete, type="dir")]


@contextlib.contextmanager
def _progress(capture: CaptureReader, wanted: bool) -> Iterator[ProgressBar | None]:
    """A transient progress bar on stderr for a long file, only when both stdout and stderr are
    terminals (never piped, never for JSON); erased however the run ends."""
    bar = None
    if wanted and sys.stdout.isatty() and sys.stderr.isatty() and os.environ.get("TERM") != "dumb":
        from amqpscope.render.progress import ProgressBar

        name = os.path.basename(capture.path)
        bar = ProgressBar(sys.stderr, f"reading {name}", capture.position)
    try:
        yield bar
    finally:
        if bar is not None:
            bar.clear()


def _display_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--color and --width, for every command that prints for people."""
    fn = click.option(
        "--width",
        type=click.IntRange(min=40),
        help="Cut lines to this width (default: the terminal's; not cut when piped).",
    )(fn)
    return click.option(
        "--color",
        type=click.Choice(["auto", "always", "never"]),
        default="auto",
        show_default=True,
        help="Colour output (NO_COLOR is honoured; never when not a terminal, unless always).",
    )(fn)


_redact_bodies_option = click.option(
    "--redact-bodies",
    is_flag=True,
    help="Drop message bodies: only their size is kept and shown.",
)


def _frame_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """What `read` and `live` share: the output form, the selections, the timeline's options."""
    options = [
        click.option("--json", "as_json", is_flag=True, help="One JSON object per frame (NDJSON)."),
        click.option(
            "--show-secrets",
            is_flag=True,
            help="Show credentials (SASL responses, connection.start-ok) instead of redacting.",
        ),
        _redact_bodies_option,
        click.option("-Y", "--filter", "expression", metavar="EXPR", help="Display filter."),
        click.option(
            "-c", "--count", type=click.IntRange(min=1), help="Stop after COUNT frames shown."
        ),
        click.option(
            "--conn", "conns", type=int, multiple=True, help="Only connection N (repeatable)."
        ),
        click.option(
            "--channel", "channels", type=int, multiple=True, help="Only channel N (repeatable)."
        ),
        click.option("--errors", is_flag=True, help="Only frames with findings or errors."),
        click.option("--collapse", is_flag=True, help="Fold runs of like frames into one line."),
        click.option("--body", is_flag=True, help="Show message bodies in full (4000 characters)."),
        _keylog_option,
    ]
    for option in reversed(options):  # so --help lists them in this order
        fn = option(fn)
    return fn


#: commands that leave nothing to tear down when they return (no thread, child process or
#: temporary file; their files closed, their output written): run as the program, the process
#: ends as soon as one has, without the interpreter's teardown (`_Program`)
QUICK_EXIT: Final = frozenset({"read", "summary", "export", "schema"})


class _Program(click.Group):
    """The command group. Run as the program (the console script or `python -m`, which pass no
    arguments; tests pass theirs), a command of QUICK_EXIT ends the process with `os._exit` once
    stdout and stderr are flushed: the interpreter's teardown, which frees every module, table
    and object one by one, costs more than a small capture's decode (about 15 ms compiled)."""

    ran: str | None = None

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        self.ran = command.name if command is not None else None
        return name, command, rest

    def main(self, args: Any = None, *rest: Any, **options: Any) -> Any:
        try:
            return super().main(args, *rest, **options)
        except SystemExit as exc:
            code = exc.code
            if args is None and self.ran in QUICK_EXIT and (code is None or isinstance(code, int)):
                try:
                    sys.stdout.flush()
                    sys.stderr.flush()
                except (OSError, ValueError):
                    raise exc from None  # the interpreter's exit says it as before
                os._exit(code or 0)
            raise


@click.group(cls=_Program, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="amqpscope", message=_VERSION)
def main() -> None:
    """See what AMQP clients and brokers really said: decode, track and explain captures.

    \b
    Examples:
      amqpscope read capture.pcap                the timeline, one line per frame
      amqpscope summary capture.pcap             per connection: its links or channels
      amqpscope export capture.pcap -o out.json  everything, as JSON
      amqpscope live lo -f 'tcp port 5672'       decode traffic as it flows
      amqpscope read capture.pcap --color always | less -R

    \b
    Exit status: 0 when the input was read (findings in the traffic are output, not
    failure), 1 when it cannot be read, 2 for bad usage, 130 when interrupted.
    Shell completion (bash; or zsh_source, fish_source):
      eval "$(_AMQPSCOPE_COMPLETE=bash_source amqpscope)"
    """


@main.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=str))
@_frame_options
@click.option("--link", "links", multiple=True, metavar="NAME", help="Only this 1.0 link's frames.")
@click.option(
    "--queue", "queues", multiple=True, metavar="Q", help="Only frames concerning queue Q."
)
@click.option("--from", "start", type=float, metavar="SECONDS", help="From this relative time.")
@click.option("--to", "stop", type=float, metavar="SECONDS", help="Up to this relative time.")
@_display_options
@_guarded
def read(
    file: str,
    as_json: bool,
    show_secrets: bool,
    expression: str | None,
    count: int | None,
    conns: tuple[int, ...],
    channels: tuple[int, ...],
    errors: bool,
    links: tuple[str, ...],
    queues: tuple[str, ...],
    start: float | None,
    stop: float | None,
    collapse: bool,
    body: bool,
    keylog: str | None,
    color: str,
    width: int | None,
    redact_bodies: bool = False,
) -> None:
    """Decode every AMQP frame of a pcap or pcapng FILE (- for standard input), in capture order.

    \b
    Examples:
      amqpscope read capture.pcap
      amqpscope read capture.pcap --json | jq .name
      tcpdump -i lo -U -w - 'tcp port 5672' | amqpscope read -
      amqpscope read capture.pcap -Y 'name == "transfer" and fields.settled == false'
      amqpscope read capture.pcap --errors --conn 2

    \b
    Display filters (-Y) test the frame record that --json prints:
      paths     name, kind, channel, src, fields.delivery-tag, findings[0].code
      compare   == != < > <= >= contains matches (a regular expression)
      combine   and or not ( ), also && || !
      a path alone is true when present and not empty; comparisons with absent paths are false
    """
    try:
        selection = Selection(expression, conns, channels, errors, start, stop, links, queues)
    except FilterError as exc:
        _fail(f"-Y: {exc}", 2)
    # without a selecting option every frame is shown: the selection is not asked per frame
    choosy = bool(expression or conns or channels or errors or links or queues)
    choosy = choosy or start is not None or stop is not None
    dissector = Dissector(show_secrets=show_secrets, redact_bodies=redact_bodies)
    tracker = Tracker()
    lines = _Lines(0 if file == STDIN else _Lines.CHUNK)
    timeline = None
    if not as_json:
        from amqpscope.render.timeline import Timeline

        if width is None and _uncoloured(color):  # rich would colour and cut nothing: plain text
            _replace_unencodable()
            # from a pipe (a capture still running), each line as its frame arrives
            timeline = Timeline(
                lambda: _console(color, width),
                collapse,
                body,
                out=sys.stdout,
                flush=not lines.chunk,
            )
        else:
            timeline = Timeline(_console(color, width), collapse, body, fit=True if width else None)
    shown = 0
    ended: list[Finding] = []
    _steady_gc()
    with open_capture(file) as capture, _progress(capture, not as_json) as bar:
        dissector.context.keylog = _keylog(keylog)
        first_ts: float | None = None
        frames: Iterator[Frame] = dissector.run(bar.wrap(capture) if bar else capture)
        if timeline is None and not choosy and count is None and lines.chunk:
            # every frame, each written: the loop below, compiled (render.lines), which
            # leaves it none but its end
            ndjson_all(frames, tracker, lines.emit, lines.chunk)
        try:
            for frame in frames:
                tracker.feed(frame)  # state findings ride the frame that raised them
                if first_ts is None:
                    first_ts = frame.ts
                    if timeline is not None:
                        timeline.first_ts = first_ts  # times count from the first frame
                if choosy and not selection.accepts(frame, first_ts):
                    continue
                if timeline is None:
                    lines.write(frame_ndjson(frame))
                else:
                    if bar is not None:
                        bar.wrote()
                    timeline.frame(frame)
                shown += 1
                if count is not None and shown >= count:
                    break
            else:  # the whole capture was read: say what was left open at its end
                placed = len(tracker.findings)
                tracker.finish()
                ended = tracker.findings[placed:]
        except BaseException:  # interrupted: the lines made so far go out, whole
            with contextlib.suppress(Exception):
                lines.flush()
            raise
        if bar is not None:
            bar.clear()
        if timeline is not None:
            timeline.finish()
        lines.flush()
        _report(capture.findings + dissector.findings + ended)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=str))
@click.option("--json", "as_json", is_flag=True, help="The summary as one JSON document.")
@_keylog_option
@_display_options
@_guarded
def summary(file: str, as_json: bool, keylog: str | None, color: str, width: int | None) -> None:
    """Per connection: sessions and links, or channels and consumers, with what went wrong.

    \b
    Examples:
      amqpscope summary capture.pcap
      amqpscope summary capture.pcap --json | jq '.connections[].close'
      zcat capture.pcap.gz | amqpscope summary -
    """
    dissector = Dissector(messages=False)  # the summary needs no message decoded
    tracker = Tracker()
    _steady_gc()
    with open_capture(file) as capture, _progress(capture, not as_json) as bar:
        dissector.context.keylog = _keylog(keylog)
        for frame in dissector.run(bar.wrap(capture) if bar else capture):
            tracker.feed(frame)
        tracker.finish()
        result = tracker.summary()
        if bar is not None:
            bar.clear()
        if as_json:
            sys.stdout.write(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
        else:
            if width is None and not sys.stdout.isatty():
                width = PIPED_WIDTH  # piped: tables at their natural width, nothing cut
            from amqpscope.render.summary import print_summary, summary_text

            text = None
            if width is not None and _uncoloured(color):  # rich would style nothing
                _replace_unencodable()
                encoding = (getattr(sys.stdout, "encoding", None) or "utf-8").lower()
                text = summary_text(result, width, encoding)
            if text is not None:
                sys.stdout.write(text)
            else:
                print_summary(result, _console(color, width))
        sys.stdout.flush()
        _report(capture.findings + dissector.findings)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=str))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True, allow_dash=True, path_type=str),
    default="-",
    show_default=True,
    help="Where to write it (- for stdout).",
)
@click.option("--ndjson", is_flag=True, help="One record per line instead of one document.")
@click.option("--show-secrets", is_flag=True, help="Include credentials instead of redacting.")
@_redact_bodies_option
@_keylog_option
@_guarded
def export(
    file: str,
    output: str,
    ndjson: bool,
    show_secrets: bool,
    keylog: str | None,
    redact_bodies: bool = False,
) -> None:
    """Everything about FILE as JSON: capture, frames, connections, findings.

    \b
    The document follows `amqpscope schema export`; with --ndjson each line is a record
    with a "record" key (capture, frame, connection, finding, summary).

    \b
    Examples:
      amqpscope export capture.pcap -o capture.json
      amqpscope export capture.pcap --ndjson | jq 'select(.record == "connection")'
    """
    from amqpscope.render.export import ExportWriter, capture_metadata

    dissector = Dissector(show_secrets=show_secrets, redact_bodies=redact_bodies)
    tracker = Tracker()
    _steady_gc()
    with (
        open_capture(file) as capture,
        click.open_file(output, "w", encoding="utf-8") as out,
        _progress(capture, output != "-") as bar,
    ):
        dissector.context.keylog = _keylog(keylog)
        writer = ExportWriter(out, capture_metadata(capture, file), ndjson)
        for frame in dissector.run(bar.wrap(capture) if bar else capture):
            tracker.feed(frame)
            writer.frame(frame)
        tracker.finish()
        unplaced = [f.to_json() for f in capture.findings + dissector.findings]
        writer.close(tracker.summary(), unplaced)
        if bar is not None:
            bar.clear()
        _report(capture.findings + dissector.findings)


@main.command()
@click.argument("name", type=click.Choice(schemas.NAMES))
def schema(name: str) -> None:
    """Print the JSON Schema of NAME (what --json and export produce).

    \b
    Example:
      amqpscope schema frame > frame.schema.json
    """
    click.echo(schemas.text(name), nl=False)


@main.command()
@click.argument("iface", metavar="IFACE", shell_complete=_complete_iface)
@click.option(
    "-f",
    "bpf",
    metavar="BPF",
    default="tcp",
    show_default=True,
    help="Capture filter (tcpdump syntax), applied in the kernel.",
)
@click.option(
    "-w",
    "write",
    metavar="OUT.pcap",
    type=click.Path(dir_okay=False, path_type=str),
    help="Also write every captured packet to OUT.pcap (kept on Ctrl-C).",
)
@click.option(
    "--backend",
    type=click.Choice(["tcpdump", "dumpcap", "scapy", "pyshark"]),
    help="How to capture (default: tcpdump, else dumpcap, else scapy; pyshark is slow).",
)
@click.option(
    "--duration",
    type=click.FloatRange(min=0, min_open=True),
    metavar="S",
    help="Stop after S seconds.",
)
@click.option("--summary", "with_summary", is_flag=True, help="Print the summary at the end.")
@click.option(
    "--idle-timeout",
    type=click.FloatRange(min=1),
    default=600.0,
    show_default=True,
    metavar="S",
    help="Forget connections without a packet for S seconds.",
)
@_frame_options
@_display_options
@_guarded
def live(
    iface: str,
    bpf: str,
    write: str | None,
    backend: str | None,
    duration: float | None,
    with_summary: bool,
    idle_timeout: float,
    as_json: bool,
    show_secrets: bool,
    expression: str | None,
    count: int | None,
    conns: tuple[int, ...],
    channels: tuple[int, ...],
    errors: bool,
    collapse: bool,
    body: bool,
    keylog: str | None,
    color: str,
    width: int | None,
    redact_bodies: bool = False,
) -> None:
    """Capture on IFACE and decode AMQP frames as they flow, until Ctrl-C, --duration or -c.

    \b
    Examples:
      amqpscope live lo -f 'tcp port 5672'
      amqpscope live eth0 --json -w session.pcap --duration 60
      amqpscope live lo --errors --summary
    Needs root or CAP_NET_RAW. Kernel and amqpscope drops are reported on stderr at the end.
    """
    import signal
    import time

    from amqpscope.capture.live import LiveCapture, LiveError, LivePipeline

    try:
        selection = Selection(expression, conns, channels, errors, None, None)
    except FilterError as exc:
        _fail(f"-Y: {exc}", 2)
    try:
        capture = LiveCapture(iface, bpf, backend, write)
        capture.start()
    except LiveError as exc:
        _fail(str(exc), exc.code)
    stopped: list[int] = []

    def on_signal(signum: int, _frame: Any) -> None:
        if stopped:  # a second Ctrl-C: give up at once
            raise KeyboardInterrupt
        stopped.append(signum)
        capture.stop()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        click.echo(f"amqpscope: {capture.describe()}", err=True)
        pipeline = LivePipeline(
            show_secrets, idle_timeout, journeys=with_summary, redact_bodies=redact_bodies
        )
        pipeline.dissector.context.keylog = _keylog(keylog)  # re-read as the client appends
        out = sys.stdout
        lines = _Lines()
        timeline = None
        console = _console(color, width)
        if not as_json:
            from amqpscope.render.timeline import Timeline

            plain = width is None and _uncoloured(color)  # rich would colour and cut nothing
            timeline = Timeline(  # flushed per line: a line shows as its frame arrives
                console,
                collapse,
                body,
                fit=True if width else None,
                out=out if plain else None,
                flush=True,
            )
        shown = 0
        first_ts: float | None = None

        def show(frames: list[Any]) -> bool:
            """Print what the filters accept; True once -c is reached."""
            nonlocal shown, first_ts
            for frame in frames:
                if first_ts is None:
                    first_ts = frame.ts
                if not selection.accepts(frame, first_ts):
                    continue
                if timeline is None:
                    lines.write(frame_ndjson(frame))
                else:
                    timeline.frame(frame)
                shown += 1
                if count is not None and shown >= count:
                    return True
            if frames and timeline is None:
                lines.flush()
            return False

        deadline = time.monotonic() + duration if duration else None
        last_tick = time.monotonic()
        full = False
        for pkt in capture.packets():
            if pkt is not None:
                frames = pipeline.feed(pkt)
                if frames and show(frames):
                    full = True
                    break
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                capture.stop()
            if now - last_tick >= 1.0:
                last_tick = now
                if show(pipeline.tick(time.time())):
                    full = True
                    break
        capture.stop()
        frames = pipeline.finish()
        if not full:
            show(frames)
        if timeline is not None:
            timeline.finish()
        lines.flush()
        if with_summary:
            if as_json:
                out.write(json.dumps({"summary": pipeline.summary()}, ensure_ascii=False) + "\n")
            else:
                from amqpscope.render.summary import print_summary

                print_summary(pipeline.summary(), console)
            out.flush()
    finally:
        stats = capture.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    _report(pipeline.findings)
    if pipeline.findings_dropped:
        click.echo(f"amqpscope: ... and {pipeline.findings_dropped} findings not kept", err=True)
    click.echo(f"amqpscope: {stats.line()}", err=True)
    if capture.error:
        _fail(f"capture ended: {capture.error}")


@main.command()
@click.argument(
    "inputs", nargs=-1, required=True, metavar="INPUT...", shell_complete=_complete_files
)
@click.option(
    "--out",
    required=True,
    metavar="DIR",
    shell_complete=_complete_dirs,
    help="Where the Parquet tables go (any URI).",
)
@click.option("--master", metavar="URL", help="Spark master (default: local[*]; spark-submit's).")
@click.option("--partitions", type=click.IntRange(min=1), help="Decode tasks (default: by size).")
@click.option("--report", is_flag=True, help="Then print cross-capture aggregates.")
@click.option("--show-secrets", is_flag=True, help="Keep credentials (default: redacted).")
@_redact_bodies_option
@_guarded
def spark(
    inputs: tuple[str, ...],
    out: str,
    master: str | None,
    partitions: int | None,
    report: bool,
    show_secrets: bool = False,
    redact_bodies: bool = False,
) -> None:
    """Decode folders of captures on Spark into Parquet tables (frames, deliveries, links,
    channels, connections, findings); connections cut by file rotation are stitched.

    \b
    Examples:
      amqpscope spark captures/ --out tables/
      amqpscope spark 'ring/cap.pcap*' --out tables/ --master local[4] --report
      amqpscope spark hdfs:///captures/2024-05-01/ --out hdfs:///amqp/ --master yarn
    See docs/spark.md (needs the [spark] extra and Java).
    """
    from amqpscope.pipeline import spark as job  # pyspark only when this command runs

    why = job.missing()
    if why:
        _fail(why)
    try:
        job.run(
            list(inputs),
            out,
            master,
            partitions,
            report,
            progress=lambda text: click.echo(f"amqpscope: {text}", err=True),
            show_secrets=show_secrets,
            redact_bodies=redact_bodies,
        )
    except job.PipelineError as exc:
        _fail(str(exc))


if __name__ == "__main__":
    main(prog_name="amqpscope")  # `python -m amqpscope.cli`: the same name, help and completion
