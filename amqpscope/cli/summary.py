"""`amqpscope summary`."""

from __future__ import annotations

import json
import sys
from collections import Counter
from typing import TYPE_CHECKING, Any

import click

from amqpscope.cli.common import (
    PIPED_WIDTH,
    display_options,
    guarded,
    keylog_option,
    load_keylog,
    main,
    make_console,
    no_amqp_lines,
    progress,
    replace_unencodable,
    report_findings,
    retiring,
    steady_gc,
    uncoloured,
)
from amqpscope.cli.inputs import files_argument, format_option, open_input, shown_name
from amqpscope.track.tracker import ConnTracker, Tracker

if TYPE_CHECKING:
    from amqpscope.cli.spool import Spool
    from amqpscope.render.digest import Digest


@main.command()
@files_argument
@click.option("--json", "as_json", is_flag=True, help="The summary as one JSON document.")
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="Every connection in full, however many (past 100: their totals, the busiest and the "
    "most troubled).",
)
@click.option(
    "--journeys",
    is_flag=True,
    help="Also how many messages made each path (published, confirmed, delivered, acked...) per "
    "queue or address, and each hop's time: every message decoded and followed, which takes "
    "several times as long.",
)
@keylog_option
@format_option
@display_options
@guarded
def summary(
    files: tuple[str, ...],
    as_json: bool,
    keylog: str | None,
    color: str,
    width: int | None,
    fmt: str | None = None,
    show_all: bool = False,
    journeys: bool = False,
) -> None:
    """Per connection: sessions and links, or channels and consumers, with what went wrong.

    \b
    Examples:
      amqpscope summary capture.pcap
      amqpscope summary capture.pcap --json | jq '.connections[].close'
      zcat capture.pcap.gz | amqpscope summary -
      amqpscope summary client.log        (a frame-trace log)
      amqpscope summary cap.pcap*         (tcpdump -C's files, read as one capture)
      amqpscope summary capture.pcap --journeys   (and each message path's count)
    """
    from amqpscope.cli.spool import Spool
    from amqpscope.render.digest import Digest

    retire = retiring()
    # every connection's summary goes by the digest (`summary` of many: totals, the busiest, the
    # most troubled); --json and --all list every one, spooled as their connections end
    digest = Digest()
    spool = Spool() if as_json or show_all else None

    def retired(order: int, conn: ConnTracker, layers: dict | None, found: int) -> None:
        summary = Tracker._with_layers(conn.summary(), layers)
        digest.add(order, summary, found)
        if spool is not None:
            spool.add(order, summary)

    tracker = Tracker(retire=retire, on_retire=retired)
    steady_gc()
    with open_input(files, fmt) as source, progress(source.file, not as_json) as bar:
        tracker.source = source.source  # before its first frame: findings say "the log ended"
        wrap = bar.wrap if bar is not None and source.capture is not None else None
        # the summary needs no message decoded; its journey paths do (1.0's message-ids)
        frames = source.frames(
            messages=journeys, keylog=load_keylog(keylog), wrap=wrap, retire=retire
        )
        follower = None
        if journeys:
            from amqpscope.journeys import Follower

            follower = Follower(bodies=False)
            frames = follower.through(frames)
        untimed = tracker.feed_all(frames)  # the loop compiled (track.tracker)
        # a log's lines may have no time (Proton's PN_TRACE_FRM), then ts is 0.0; a capture's
        # packets always have one
        untimed = untimed and source.capture is None
        tracker.finish()
        result = tracker.summary()
        if follower is not None:
            from amqpscope.journeys import Paths

            result["journey-paths"] = Paths().add_all(follower.journeys).to_json()
        # (order, summary) of the connections open at the end (all, when nothing was retired)
        orders = [tracker.order.get(c, i) for i, c in enumerate(tracker.connections)]
        live = list(zip(orders, result["connections"], strict=True))
        found = Counter(f.conn for f in tracker.findings)
        for (order, summary), conn in zip(live, tracker.connections, strict=True):
            digest.add(order, summary, found[conn])
        others = []
        if source.dissector is not None and not result.get("undecoded"):
            others = no_amqp_lines(source.dissector, shown_name(files))
        if bar is not None:
            bar.clear()
        if as_json:
            # the input's own findings (a damaged capture, a log's bad lines), which no
            # connection carries: in the document too, not on stderr alone
            result["input-findings"] = [f.to_json() for f in source.findings]
        try:
            _write(result, live, digest, spool, as_json, show_all, others, color, width, untimed)
        finally:
            if spool is not None:
                spool.close()
        sys.stdout.flush()
        report_findings(source.findings)


def _write(
    result: dict[str, Any],
    live: list[tuple[int, dict[str, Any]]],
    digest: Digest,
    spool: Spool | None,
    as_json: bool,
    show_all: bool,
    others: list[str],
    color: str,
    width: int | None,
    untimed: bool = False,
) -> None:
    """The summary document as JSON or tables: every connection (the spooled and `live`), or
    the digest of them; `untimed`: without times (the frames had none)."""
    if as_json:
        if spool is None or not spool.count:
            sys.stdout.write(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
        else:
            from amqpscope.cli.spool import write_json

            write_json(sys.stdout, result, {"connections": spool.summaries(live)})
        return
    if width is None and not sys.stdout.isatty():
        width = PIPED_WIDTH  # piped: tables at their natural width, nothing cut
    from amqpscope.render.summary import print_summary, summary_text

    many = None
    if not digest.listed:
        if not show_all:
            many = digest
        else:
            _write_every(result, live, spool, color, width, untimed)
            return
    elif spool is not None and spool.count:
        result["connections"] = list(spool.summaries(live))
    else:
        result["connections"] = digest.all_kept()
    text = None
    if width is not None and uncoloured(color):  # rich would style nothing
        replace_unencodable()
        encoding = (getattr(sys.stdout, "encoding", None) or "utf-8").lower()
        text = summary_text(result, width, encoding, many, untimed)
    if others:  # instead of a bare "no findings": what the capture held
        sys.stdout.write("".join(line + "\n" for line in others))
    elif text is not None:
        sys.stdout.write(text)
    else:
        print_summary(result, make_console(color, width), many, untimed)


def _write_every(
    result: dict[str, Any],
    live: list[tuple[int, dict[str, Any]]],
    spool: Spool | None,
    color: str,
    width: int | None,
    untimed: bool,
) -> None:
    """--all of many connections: each written as it is read back, then the rest."""
    from amqpscope.render.summary import (
        connection_text,
        print_connection,
        print_summary,
        summary_text,
    )

    assert spool is not None
    plain = width is not None and uncoloured(color)
    encoding = "ascii"
    if plain:
        replace_unencodable()
        encoding = (getattr(sys.stdout, "encoding", None) or "utf-8").lower()
    console = None
    for conn in spool.summaries(live):
        text = connection_text(conn, width or 0, encoding, untimed) if plain else None
        if text is not None:
            sys.stdout.write(text)
            continue
        if console is None:
            sys.stdout.flush()
            console = make_console(color, width)
        print_connection(conn, console, untimed)
    result["connections"] = []
    text = summary_text(result, width, encoding, untimed=untimed) if plain and width else None
    if text is not None:
        sys.stdout.write(text)
    else:
        sys.stdout.flush()
        print_summary(result, console or make_console(color, width), untimed=untimed)
