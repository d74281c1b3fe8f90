"""The `amqpscope` command: wires capture, dissection and rendering; the only place that prints.

Exit codes: 0 success (findings in the traffic are output, not failure), 1 unreadable input,
2 bad usage. No traceback reaches the user: unexpected errors become one line on stderr.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any

import click
from rich.console import Console

from amqpscope import __version__
from amqpscope import schema as schemas
from amqpscope.capture.files import CaptureError, open_capture
from amqpscope.dissect import Dissector
from amqpscope.filter import FilterError, Selection
from amqpscope.findings import Finding
from amqpscope.render.export import ExportWriter, capture_metadata
from amqpscope.render.lines import frame_json
from amqpscope.render.summary import print_summary
from amqpscope.render.timeline import Timeline
from amqpscope.track.tracker import Tracker

#: findings without a frame printed to stderr before "and N more"
MAX_STDERR_FINDINGS = 20


def _fail(message: str, code: int = 1) -> None:
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
            sys.stderr.close()  # `amqpscope read big.pcap | head`: not an error
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
        click.echo(f"amqpscope: {f.severity}: {f.code}: {where}{f.message}", err=True)
    if len(findings) > MAX_STDERR_FINDINGS:
        click.echo(f"amqpscope: ... and {len(findings) - MAX_STDERR_FINDINGS} more", err=True)


def _console(color: str, width: int | None) -> Console:
    """The terminal, as --color and --width (and NO_COLOR, which rich honours) ask."""
    return Console(
        force_terminal=True if color == "always" else None,
        no_color=color == "never",
        color_system=None if color == "never" else "auto",
        width=width,
        highlight=False,
        emoji=False,
        markup=False,
    )


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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="amqpscope")
def main() -> None:
    """See what AMQP clients and brokers really said: decode, track and explain captures."""


@main.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=str))
@click.option("--json", "as_json", is_flag=True, help="One JSON object per frame (NDJSON).")
@click.option(
    "--show-secrets",
    is_flag=True,
    help="Show credentials (SASL responses, connection.start-ok) instead of redacting them.",
)
@click.option("-Y", "--filter", "expression", metavar="EXPR", help="Display filter (see below).")
@click.option("-c", "--count", type=click.IntRange(min=1), help="Stop after COUNT frames shown.")
@click.option("--conn", "conns", type=int, multiple=True, help="Only connection N (repeatable).")
@click.option("--channel", "channels", type=int, multiple=True, help="Only channel N (repeatable).")
@click.option("--errors", is_flag=True, help="Only frames with findings or errors.")
@click.option("--from", "start", type=float, metavar="SECONDS", help="From this relative time.")
@click.option("--to", "stop", type=float, metavar="SECONDS", help="Up to this relative time.")
@click.option("--collapse", is_flag=True, help="Fold runs of like frames into one line.")
@click.option("--body", is_flag=True, help="Show message bodies in full (up to 4000 characters).")
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
    start: float | None,
    stop: float | None,
    collapse: bool,
    body: bool,
    color: str,
    width: int | None,
) -> None:
    """Decode every AMQP frame of a pcap or pcapng FILE, in capture order.

    \b
    Examples:
      amqpscope read capture.pcap
      amqpscope read capture.pcap --json | jq .name
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
        selection = Selection(expression, conns, channels, errors, start, stop)
    except FilterError as exc:
        _fail(f"-Y: {exc}", 2)
    dissector = Dissector(show_secrets=show_secrets)
    tracker = Tracker()
    out = sys.stdout
    timeline = None
    if not as_json:
        console = _console(color, width)
        timeline = Timeline(console, collapse, body, fit=True if width else None)
    shown = 0
    with open_capture(file) as capture:
        first_ts: float | None = None
        for frame in dissector.run(capture):
            tracker.feed(frame)  # state findings ride the frame that raised them
            if first_ts is None:
                first_ts = frame.ts
                if timeline is not None:
                    timeline.first_ts = first_ts  # times count from the capture's first frame
            if not selection.accepts(frame, first_ts):
                continue
            if timeline is None:
                out.write(frame_json(frame) + "\n")
            else:
                timeline.frame(frame)
            shown += 1
            if count is not None and shown >= count:
                break
        if timeline is not None:
            timeline.finish()
        out.flush()
        _report(capture.findings + dissector.findings)


@main.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=str))
@click.option("--json", "as_json", is_flag=True, help="The summary as one JSON document.")
@_display_options
@_guarded
def summary(file: str, as_json: bool, color: str, width: int | None) -> None:
    """Per connection: sessions and links, or channels and consumers, with what went wrong.

    \b
    Examples:
      amqpscope summary capture.pcap
      amqpscope summary capture.pcap --json | jq '.connections[].close'
    """
    dissector = Dissector()
    tracker = Tracker()
    with open_capture(file) as capture:
        for frame in dissector.run(capture):
            tracker.feed(frame)
        tracker.finish()
        result = tracker.summary()
        if as_json:
            sys.stdout.write(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
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
@_guarded
def export(file: str, output: str, ndjson: bool, show_secrets: bool) -> None:
    """Everything about FILE as JSON: capture, frames, connections, findings.

    \b
    The document follows `amqpscope schema export`; with --ndjson each line is a record
    with a "record" key (capture, frame, connection, finding, summary).

    \b
    Examples:
      amqpscope export capture.pcap -o capture.json
      amqpscope export capture.pcap --ndjson | jq 'select(.record == "connection")'
    """
    dissector = Dissector(show_secrets=show_secrets)
    tracker = Tracker()
    with open_capture(file) as capture, click.open_file(output, "w", encoding="utf-8") as out:
        writer = ExportWriter(out, capture_metadata(capture, file), ndjson)
        for frame in dissector.run(capture):
            tracker.feed(frame)
            writer.frame(frame)
        tracker.finish()
        unplaced = [f.to_json() for f in capture.findings + dissector.findings]
        writer.close(tracker.summary(), unplaced)
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


if __name__ == "__main__":
    main()
