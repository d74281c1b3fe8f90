"""What every command shares: the group, its exit-code promise (`guarded`, `fail`), the output
sinks, and the options several commands take."""

from __future__ import annotations

import contextlib
import errno
import gc
import math
import os
import shlex
import sys
from collections.abc import Callable, Iterable, Iterator
from functools import wraps
from typing import TYPE_CHECKING, Any, Final

import click

from amqpscope import __version__, build_text, sources
from amqpscope.capture.files import CaptureError, CaptureReader
from amqpscope.findings import Finding
from amqpscope.render.lines import safe
from amqpscope.sources import SourceError

if TYPE_CHECKING:  # rich (the timeline, the summary's tables) is imported when output needs it
    from rich.console import Console

    from amqpscope.capture.rotated import CaptureSet
    from amqpscope.capture.textlog import LogFile
    from amqpscope.render.progress import ProgressBar

#: findings without a frame printed to stderr before "and N more"
MAX_STDERR_FINDINGS = 20
#: the summary's width when piped: wide enough that no table or line is cut
PIPED_WIDTH = 10_000


_VERSION = "%(prog)s %(version)s (" + build_text().replace("%", "%%") + ")"

#: what a write to an output fails with that is the disk's or the device's fault, not a bug:
#: the input's read errors never reach `guarded` (they are findings), so these are the output's
WRITE_ERRNOS: Final = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS})


def steady_gc() -> None:
    """Before reading a capture. Decoding makes millions of small dicts that die young and few
    cycles, so the cyclic collector's default (a collection every 700 allocations) costs a few
    percent for nothing: collect every 50,000, and leave what startup made (modules, protocol
    tables) out of every collection. Cycles are still collected, so memory stays bounded."""
    gc.freeze()
    gc.set_threshold(50_000, 10, 10)


def retiring() -> bool:
    """Whether `read`, `summary` and `diagnose` forget each connection once its TCP ended,
    keeping only what their output needs of it (`Tracker`, `Dissector`: a capture of 200,000
    short connections is held a few at a time). AMQPSCOPE_KEEP_ENDED=1 keeps every one to the
    end, as before: the outputs are the same, byte for byte (tests/test_retire.py)."""
    return not os.environ.get("AMQPSCOPE_KEEP_ENDED")


def fail(message: str, code: int = 1) -> None:
    with contextlib.suppress(OSError, ValueError):  # what was printed comes before why it ended
        sys.stdout.flush()
    click.echo(f"amqpscope: {message}", err=True)
    sys.exit(code)


def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """One line and exit 1 for unreadable input or an internal error; quiet on a closed pipe."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except SourceError as exc:  # what opening the input said: its own exit status
            fail(str(exc), exc.code)
        except CaptureError as exc:
            fail(str(exc))
        except BrokenPipeError:
            # `amqpscope read big.pcap | head`: not an error. Point stdout at /dev/null so the
            # interpreter's final flush does not fail again on the closed pipe.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            sys.exit(0)
        except KeyboardInterrupt:
            fail("interrupted", 130)
        except (click.exceptions.Exit, click.ClickException, SystemExit):
            raise
        except OSError as exc:
            if exc.errno not in WRITE_ERRNOS:
                fail(f"internal error: {type(exc).__name__}: {exc} (please report it)")
            fail(f"cannot write the output: {exc.strerror or exc}")
        except Exception as exc:  # the promise: never a traceback
            fail(f"internal error: {type(exc).__name__}: {exc} (please report it)")

    return wrapper


def open_output(path: str, force: bool = False) -> Any:
    """`path` open for text (- is stdout, not closed), or one line and exit 1 when it cannot be
    opened (its folder missing, no permission), as `report -o` says it; exit 2 when it was made
    since `check_output` and --force was not given."""
    from amqpscope.writing.outputs import STDOUT, open_new

    try:
        if path == STDOUT:
            return click.open_file(path, "w", encoding="utf-8")
        return open_new(path, force, binary=False)
    except FileExistsError:
        fail(f"-o {path}: that file exists; --force overwrites it", 2)
        raise  # not reached: fail() exits
    except OSError as exc:
        fail(f"cannot write {path}: {exc.strerror or exc}", 1)
        raise  # not reached: fail() exits


def check_output(option: str, out: str, inputs: Iterable[str | None], force: bool) -> None:
    """Before reading anything: one line and exit 2 when `out` may not be written, by the rule
    every writer keeps (`amqpscope.writing.outputs.refusal`: never an input, never an existing file
    unless --force)."""
    from amqpscope.writing.outputs import refusal

    why = refusal(out, inputs, force)
    if why is not None:
        fail(f"{option} {out}: {why}", 2)


force_option = click.option(
    "--force", is_flag=True, help="Overwrite the output file when it exists (never an input)."
)


def selection_words(
    expression: str | None = None,
    conns: tuple[int, ...] = (),
    channels: tuple[int, ...] = (),
    errors: bool = False,
    links: tuple[str, ...] = (),
    queues: tuple[str, ...] = (),
    start: float | None = None,
    stop: float | None = None,
    numbers: frozenset[int] | None = None,
    around: int | None = None,
) -> str:
    """The selecting options as given, for "no frame matched ..." (a selection that chose
    nothing is said, not left as an empty output that looks like a capture without AMQP)."""
    words = [f"-Y {shlex.quote(expression)}"] if expression else []
    words += [f"--conn {n}" for n in conns] + [f"--channel {n}" for n in channels]
    words += ["--errors"] if errors else []
    words += [f"--link {shlex.quote(n)}" for n in links]
    words += [f"--queue {shlex.quote(n)}" for n in queues]
    words += [] if start is None else [f"--from {start:g}"]
    words += [] if stop is None else [f"--to {stop:g}"]
    if numbers:
        words.append("--frames " + ",".join(str(n) for n in sorted(numbers)[:5]))
        words[-1] += ",..." if len(numbers) > 5 else ""
    words += [] if around is None else [f"--around {around}"]
    return " ".join(words)


def report_findings(findings: list[Finding]) -> None:
    for f in findings[:MAX_STDERR_FINDINGS]:
        where = (
            f"connection {f.conn}: " if f.conn is not None and "connection" not in f.message else ""
        )
        click.echo(f"amqpscope: {f.severity}: {f.code}: {where}{safe(f.message)}", err=True)
    if len(findings) > MAX_STDERR_FINDINGS:
        click.echo(f"amqpscope: ... and {len(findings) - MAX_STDERR_FINDINGS} more", err=True)


def no_amqp_lines(dissector: Any, name: str) -> list[str]:
    """When the capture held no AMQP connection: what it held instead, in words (else [])."""
    connections = dissector.connections.values()
    if None in dissector.retired_kinds or any(c.is_amqp for c in connections):
        return []
    from amqpscope.census import census
    from amqpscope.render.census import census_lines

    return census_lines(census(connections, dissector.retired_kinds), name)


class Lines:
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


def replace_unencodable() -> None:
    """A console that cannot show → or ▁ gets ? rather than a crash."""
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None:
        reconfigure(errors="replace")


def uncoloured(color: str) -> bool:
    """rich would write no style to stdout, and size nothing by the terminal: --color auto or
    never to what is no terminal, as rich decides it (FORCE_COLOR and TTY_COMPATIBLE can make
    anything a terminal to rich; then rich decides, and prints)."""
    return (
        color != "always"
        and os.name != "nt"
        and not {"FORCE_COLOR", "TTY_COMPATIBLE"} & os.environ.keys()
        and not sys.stdout.isatty()
    )


def make_console(color: str, width: int | None) -> Console:
    """The terminal, as --color and --width (and NO_COLOR, which rich honours) ask; a closed
    pipe is not an error (rich exits 1 by default)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            raise BrokenPipeError

    replace_unencodable()
    return _Console(
        force_terminal=True if color == "always" else None,
        no_color=color == "never",
        color_system=None if color == "never" else "auto",
        width=width,
        highlight=False,
        emoji=False,
        markup=False,
    )


def check_keylog(path: str | None) -> None:
    """--keylog FILE is input: one that cannot be read is one line and exit 1, as an input
    file's (click's own check made it a usage error, exit 2, in four lines)."""
    try:
        sources.check_keylog(path)
    except SourceError as exc:
        fail(str(exc), exc.code)


def load_keylog(path: str | None) -> Any:
    """The TLS secrets of --keylog FILE and SSLKEYLOGFILE (`sources.load_keylog`); one that
    cannot be read is one line and exit 1, one that holds no key a warning on stderr."""

    def warn(message: str) -> None:  # a file of no keys decrypts nothing: said once
        click.echo(f"amqpscope: warning: {message}", err=True)

    try:
        return sources.load_keylog(path, warn)
    except SourceError as exc:
        fail(str(exc), exc.code)


def time_window(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """--from and --to's check: a number, and --from not after --to (which would select
    nothing, silently); whichever of the two click processes second sees the other."""
    if value is None:
        return None
    if math.isnan(value):
        raise click.BadParameter("not a number of seconds")
    start = value if param.name == "start" else ctx.params.get("start")
    stop = value if param.name == "stop" else ctx.params.get("stop")
    if start is not None and stop is not None and start > stop:
        raise click.BadParameter(f"--from {start:g} is after --to {stop:g}: nothing between")
    return value


def window_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--from and --to, as `read`, `diagnose` and `report` take them (seconds from the first
    frame), checked together by `time_window`."""
    command = click.option(
        "--to", "stop", type=float, metavar="SECONDS", callback=time_window,
        help="Up to this relative time.",
    )(command)  # fmt: skip
    return click.option(
        "--from", "start", type=float, metavar="SECONDS", callback=time_window,
        help="From this relative time (seconds from the first frame).",
    )(command)  # fmt: skip


def keylog_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--keylog, for every command that decodes traffic."""
    return click.option(
        "--keylog",
        type=click.Path(path_type=str, readable=False),  # told by `check_keylog`
        metavar="FILE",
        help="TLS key log (NSS format, as SSLKEYLOGFILE writes) to decrypt TLS connections.",
    )(fn)


#: names kept per bounded label by default: `metrics.sampler.MAX_NAMES` (not imported here, where
#: every command's start would load the trackers and diagnoses; tests/test_metrics_options.py
#: checks they agree)
METRICS_MAX_NAMES: Final = 100


def metrics_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--metrics-max-names and --metrics-labels, as `metrics` and `live --metrics` take them:
    one declaration, one help text, the same bounds on both faces' label sets."""
    fn = click.option(
        "--metrics-labels",
        "metrics_labels",
        type=click.Choice(["conn"]),
        multiple=True,
        help="conn: a `conn` label (the connection's id, as --conn takes it) on every family read "
        "of connections: a series per connection.",
    )(fn)
    return click.option(
        "--metrics-max-names",
        "metrics_max_names",
        type=click.IntRange(min=0),
        default=METRICS_MAX_NAMES,
        show_default=True,
        metavar="N",
        help="Queues, addresses and management nodes with a label value of their own (the N "
        "busiest of a file `metrics` reads; live or from standard input, the first N seen); the "
        "rest are counted under `other`.",
    )(fn)


def complete_iface(_ctx: Any, _param: Any, incomplete: str) -> list[Any]:
    """Shell completion of IFACE: this machine's network interfaces."""
    import socket

    from click.shell_completion import CompletionItem

    try:
        names = [name for _, name in socket.if_nameindex()]
    except OSError:
        names = []
    return [CompletionItem(name) for name in names if name.startswith(incomplete)]


def complete_files(_ctx: Any, _param: Any, incomplete: str) -> list[Any]:
    """Shell completion by the shell's own file names (for arguments that also take URIs)."""
    from click.shell_completion import CompletionItem

    return [CompletionItem(incomplete, type="file")]


def complete_dirs(_ctx: Any, _param: Any, incomplete: str) -> list[Any]:
    from click.shell_completion import CompletionItem

    return [CompletionItem(incomplete, type="dir")]


@contextlib.contextmanager
def progress(
    capture: CaptureReader | CaptureSet | LogFile, wanted: bool
) -> Iterator[ProgressBar | None]:
    """A transient progress bar on stderr for a long file (a capture or a log), only when both
    stdout and stderr are terminals (never piped, never for JSON); erased however the run ends."""
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


def display_options(fn: Callable[..., Any]) -> Callable[..., Any]:
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


redact_bodies_option = click.option(
    "--redact-bodies",
    is_flag=True,
    help="Drop message bodies: only their size is kept and shown.",
)


def frame_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """What `read` and `live` share: the output form, the selections, the timeline's options."""
    options = [
        click.option("--json", "as_json", is_flag=True, help="One JSON object per frame (NDJSON)."),
        click.option(
            "--show-secrets",
            is_flag=True,
            help="Show credentials (SASL responses, connection.start-ok) instead of redacting "
            "(with -w: write them as captured; the cut's are masked otherwise).",
        ),
        redact_bodies_option,
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
        keylog_option,
    ]
    for option in reversed(options):  # so --help lists them in this order
        fn = option(fn)
    return fn


#: commands that leave nothing to tear down when they return (no thread, child process or
#: temporary file; their files closed, their output written): run as the program, the process
#: ends as soon as one has, without the interpreter's teardown (`Program`)
QUICK_EXIT: Final = frozenset({"read", "summary", "export", "schema", "diagnose"})


#: the commands that read capture files, given as arguments (not with tshark's -r)
FILE_COMMANDS: Final = frozenset(
    {"read", "summary", "export", "diagnose", "report", "tui", "follow", "metrics"}
)


#: every command, each defined (and registered with `main`) by the module of its name in this
#: package; `Program` imports a command's module only when that command is asked for
COMMANDS: Final = (
    *("diagnose", "export", "live", "read", "report"),
    *("schema", "spark", "summary", "tui"),
    "follow",
    "metrics",
)


class Program(click.Group):
    """The command group. Run as the program (the console script or `python -m`, which pass no
    arguments; tests pass theirs), a command of QUICK_EXIT ends the process with `os._exit` once
    stdout and stderr are flushed: the interpreter's teardown, which frees every module, table
    and object one by one, costs more than a small capture's decode (about 15 ms compiled).

    Commands load lazily (click's documented pattern): `amqpscope summary` does not import the
    diagnose layer, the TUI's or the report's modules, a tenth of a small summary's time."""

    ran: str | None = None

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            import importlib

            importlib.import_module(f"amqpscope.cli.{cmd_name}")  # registers it with `main`
        return self.commands.get(cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            name, command, rest = super().resolve_command(ctx, args)
        except click.UsageError as exc:
            # `amqpscope capture.pcap`, as tshark -r or tcpdump -r users try first
            if args and os.path.exists(args[0]):
                exc.message += f" To decode the file: amqpscope read {shlex.quote(args[0])}"
            raise
        self.ran = command.name if command is not None else None
        return name, command, rest

    def invoke(self, ctx: click.Context) -> Any:
        """Ctrl-C before a command's own `guarded` runs (while its module loads): the promised
        line and 130, not click's "Aborted!" and 1."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            fail("interrupted", 130)
        except click.NoSuchOption as exc:
            # `amqpscope read -r capture.pcap`, the tshark and tcpdump habit
            if exc.option_name == "-r" and self.ran in FILE_COMMANDS:
                exc.message += (
                    f" amqpscope reads the file as an argument: amqpscope {self.ran} file.pcap"
                )
            raise

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


@click.group(cls=Program, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="amqpscope", message=_VERSION)
def main() -> None:
    """See what AMQP clients and brokers really said: decode, track and explain captures.

    \b
    Examples:
      amqpscope read capture.pcap                the timeline, one line per frame
      amqpscope summary capture.pcap             per connection: its links or channels
      amqpscope export capture.pcap -o out.json  everything, as JSON
      amqpscope report capture.pcap -o out.html  one HTML page to look at and share
      amqpscope live lo -f 'tcp port 5672'       decode traffic as it flows
      amqpscope read capture.pcap --color always | less -R

    \b
    Exit status: 0 when the input was read (findings in the traffic are output, not
    failure), 1 when it cannot be read, 2 for bad usage, 130 when interrupted (live: Ctrl-C
    is how it ends, 0; a second Ctrl-C gives up at once, 130).
    Shell completion (bash; or zsh_source, fish_source):
      eval "$(_AMQPSCOPE_COMPLETE=bash_source amqpscope)"
    """
