"""Recordings for the HTML report: strings that would be markup or script in a page, from a
real broker (`amqpscope report` must show them as text and run none of them)."""

from __future__ import annotations

from typing import Any

import pika
import recorder as record  # captures/recorder/: the harness and shared helpers

#: markup a page could take for its own: a script element, an image whose error handler runs
#: script, an element with an id, an entity; then a right-to-left override and a left-to-right
#: isolate that would reorder what is shown around them
HTML_HOSTILE = (
    '<script>window.pwned=1</script><img src=x onerror="window.pwned=2">'
    "<b id=injected>bold</b>&amp;\u202etxt.exe\u2066"
)


@record.scenario(
    "091-html-names",
    "0-9-1",
    "Strings that would be markup in a web page: a queue whose name holds a script element, an "
    "img with an onerror handler, an element with an id, an entity and bidirectional controls "
    "is declared; a text/html message whose body and app-id hold them too is published and "
    "fetched with basic.get; a passive declare of a missing queue so named gets channel.close "
    "404, whose reply text repeats the name; the queue is deleted on a second channel.",
    queues=(HTML_HOSTILE, "missing" + HTML_HOSTILE),
)
def s_html_names(ctx: record.Ctx) -> dict[str, Any]:
    n = record.Counts()
    conn, ch, q = record.channel_with_queue(ctx, n, HTML_HOSTILE)
    n["queue"] = q
    body = f"<html><body>{HTML_HOSTILE}</body></html>".encode()
    ch.basic_publish(
        "", q, body, pika.BasicProperties(content_type="text/html", app_id=HTML_HOSTILE)
    )
    n.inc("publishes")
    method, props, got = ch.basic_get(q, auto_ack=True)
    n.inc("gets")
    if method is None or got != body:
        raise RuntimeError("basic.get did not return the message")
    n.inc("get_ok")
    n["body"] = got.decode()
    n["app_id"] = props.app_id
    record.missing_then_delete(ctx, conn, ch, n, q, HTML_HOSTILE)
    return n
