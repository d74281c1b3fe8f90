"""`amqpscope tui`: the Textual app on a capture file or a live interface."""

from __future__ import annotations

import contextlib
import os
import tempfile
from functools import partial
from typing import Any

import click

from amqpscope.cli.common import (
    complete_iface,
    fail,
    guarded,
    keylog_option,
    load_keylog,
    main,
    redact_bodies_option,
    steady_gc,
)
from amqpscope.cli.inputs import format_option, open_input, several_files, shown_name
from amqpscope.cli.merging import merge_options

NO_TEXTUAL = "tui needs Textual: pip install 'amqpscope[tui]'"


@main.command()
@click.argument(
    "files",
    nargs=-1,
    metavar="[FILE...]",
    type=click.Path(path_type=str, readable=False),  # unreadable input (1), told when opened
    callback=several_files,
)
@click.option(
    "--live",
    "iface",
    metavar="IFACE",
    shell_complete=complete_iface,
    help="Capture on IFACE instead of reading FILE (needs root or CAP_NET_RAW).",
)
@click.option(
    "-f",
    "bpf",
    metavar="BPF",
    default="tcp",
    show_default=True,
    help="With --live: the capture filter (tcpdump syntax).",
)
@click.option(
    "--backend",
    type=click.Choice(["tcpdump", "dumpcap", "scapy", "pyshark"]),
    help="With --live: how to capture (as `live` chooses by default).",
)
@click.option("--show-secrets", is_flag=True, help="Show credentials instead of redacting.")
@redact_bodies_option
@keylog_option
@format_option
@merge_options
@guarded
def tui(
    files: tuple[str, ...],
    iface: str | None,
    bpf: str,
    backend: str | None,
    show_secrets: bool,
    redact_bodies: bool,
    keylog: str | None,
    fmt: str | None = None,
) -> None:
    """Explore a capture FILE, a frame-trace log FILE (or --live IFACE) in a terminal UI:
    connections, frames, detail. Several FILEs are the pieces of one rotated capture.

    \b
    Examples:
      amqpscope tui capture.pcap
      sudo amqpscope tui --live lo -f 'tcp port 5672'
    Keys: / filter (-Y language), n/N next/previous match, f follow a delivery, d diagnoses,
    g go to, w write (as read -w), ? help.
    """
    file = shown_name(files) if files else None
    if (file is None) == (iface is None):
        fail("tui takes a capture FILE or --live IFACE (one of them)", 2)
    if "-" in files:
        fail("tui reads its keys from standard input: give the capture as a file", 2)
    try:
        from amqpscope.tui.app import AmqpScope, terminal_problem
        from amqpscope.tui.loader import load_file
    except ImportError:
        fail(NO_TEXTUAL, 1)
    if file is None:
        problem = terminal_problem()
        if problem is not None:
            fail(problem, 2)
        assert iface is not None
        _live(iface, bpf, backend, show_secrets, redact_bodies, keylog)
        return
    with contextlib.ExitStack() as stack:
        # opened once, here: unreadable is one line and exit 1 before the screen changes; the
        # loader reads it on and closes it (`pop_all`: the app owns it from then on)
        source = stack.enter_context(open_input(files, fmt))
        problem = terminal_problem()
        if problem is not None:
            fail(problem, 2)
        keys = load_keylog(keylog)
        loader: Any = partial(
            load_file,
            path=files if len(files) > 1 else files[0],
            show_secrets=show_secrets,
            keylog=keys,
            fmt=fmt,
            redact_bodies=redact_bodies,
            opened=(source, stack.pop_all()),
        )
    cut_from = None if source.capture is None else files  # a log has no packets to write
    app = AmqpScope(
        loader,
        capture_path=cut_from,
        title=file,
        show_secrets=show_secrets,
        keylog=keylog,
        redact_bodies=redact_bodies,
    )
    _run(app)


def _live(
    iface: str,
    bpf: str,
    backend: str | None,
    show_secrets: bool,
    redact_bodies: bool,
    keylog: str | None,
) -> None:
    """Capture on `iface` into a temporary pcap (what `w` cuts from) while the app reads it,
    decoded as a file is (--keylog re-read as a client appends to it)."""
    from amqpscope.capture.live import LiveCapture, LiveError
    from amqpscope.tui.app import AmqpScope
    from amqpscope.tui.loader import load_live

    handle, spool = tempfile.mkstemp(prefix="amqpscope-tui-", suffix=".pcap")
    os.close(handle)
    try:
        try:
            capture = LiveCapture(iface, bpf, backend, spool)
            capture.start()
        except LiveError as exc:
            fail(str(exc), exc.code)
        try:
            loader = partial(
                load_live,
                capture=capture,
                show_secrets=show_secrets,
                redact_bodies=redact_bodies,
                keylog=load_keylog(keylog),
            )
            app = AmqpScope(
                loader,
                capture_path=spool,
                title=f"live {iface} {bpf}",
                on_exit=capture.stop,
                show_secrets=show_secrets,
                keylog=keylog,
                redact_bodies=redact_bodies,
            )
            _run(app)
        finally:
            capture.close()
    finally:
        with contextlib.suppress(OSError):
            os.unlink(spool)


def _run(app: Any) -> None:
    steady_gc()  # as `read` does: decoding makes millions of short-lived dicts
    app.run()
    if app.failure:
        fail(f"internal error: {app.failure} (please report it)")
    if app.loading.error:  # the screen is gone: say why reading stopped
        click.echo(f"amqpscope: {app.loading.error}", err=True)
