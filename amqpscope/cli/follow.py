"""`amqpscope follow`: a message's journey across the connections of a capture or log."""

from __future__ import annotations

import json
import sys

import click

from amqpscope.cli.common import (
    guarded,
    keylog_option,
    load_keylog,
    main,
    report_findings,
    steady_gc,
)
from amqpscope.cli.inputs import files_argument, format_option, open_input


@main.command()
@files_argument
@click.option("--message-id", metavar="X", help="The message whose message-id is X.")
@click.option("--correlation-id", metavar="X", help="The messages whose correlation-id is X.")
@click.option(
    "--frame",
    "frame",
    type=click.IntRange(min=1),
    metavar="N",
    help="The message frame N carried or answered for (its publish, delivery, ack...).",
)
@click.option("--body-match", metavar="TEXT", help="The messages whose text body holds TEXT.")
@click.option("--json", "as_json", is_flag=True, help='{"journeys": [...]} as one document.')
@click.option(
    "--mermaid", is_flag=True, help="A Mermaid sequenceDiagram of the journeys (GitHub renders it)."
)
@click.option("--plantuml", is_flag=True, help="A PlantUML sequence diagram of the journeys.")
@keylog_option
@format_option
@guarded
def follow(
    files: tuple[str, ...],
    message_id: str | None,
    correlation_id: str | None,
    frame: int | None,
    body_match: str | None,
    as_json: bool,
    mermaid: bool,
    keylog: str | None,
    fmt: str | None = None,
    plantuml: bool = False,
) -> None:
    """Where a message went: published on one connection (exchange, routing key), confirmed,
    delivered on another (queue, consumer), acked, nacked, redelivered, acked; with the frame
    and time of each hop and where it stopped. The criteria given must all match; with none,
    every message of the input. AMQP 1.0: the client's transfer, the peer's onward ones, and
    their dispositions.

    \b
    Deliveries are matched to their publish by message-id, else by exchange, routing key and
    body; a redelivery to the delivery before it by message-id, correlation-id, then body.

    \b
    Examples:
      amqpscope follow capture.pcap --message-id m0
      amqpscope follow capture.pcap --frame 42 --json | jq '.journeys[].hops[].event'
      amqpscope follow capture.pcap --body-match 'order 5' --mermaid
    """
    from amqpscope.journeys import Follower

    if sum((as_json, mermaid, plantuml)) > 1:
        raise click.UsageError("--json, --mermaid and --plantuml: choose one")
    follower = Follower()
    steady_gc()
    with open_input(files, fmt) as source:
        for each in source.frames(keylog=load_keylog(keylog)):
            follower.feed(each)
        found = follower.select(message_id, correlation_id, frame, body_match)
        if as_json:
            document = {"journeys": [j.to_json(follower.first_ts, follower.names) for j in found]}
            sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
        elif mermaid:
            from amqpscope.render.mermaid import journeys_diagram

            sys.stdout.write(journeys_diagram(found, follower.first_ts, follower.names))
        elif plantuml:
            from amqpscope.render import plantuml as diagrams

            sys.stdout.write(diagrams.journeys_diagram(found, follower.first_ts, follower.names))
        elif not found:
            asked = (message_id, correlation_id, frame, body_match) != (None,) * 4
            sys.stdout.write("no message matches\n" if asked else "no message in the input\n")
        else:
            from amqpscope.render.follow import journey_lines

            blocks = ["\n".join(journey_lines(j, follower.first_ts, follower.names)) for j in found]
            sys.stdout.write("\n\n".join(blocks) + "\n")
        sys.stdout.flush()
        report_findings(source.findings)
