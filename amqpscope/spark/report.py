"""`amqpscope spark --report`: cross-capture aggregates, as Spark SQL over the written tables.

The same statements are in docs/spark.md; each runs over temporary views named after the tables.
"""

from __future__ import annotations

from typing import Any

from amqpscope.render.lines import safe

LIMIT = 10

#: title -> Spark SQL over the views frames, connections, links, channels, deliveries, findings
QUERIES: dict[str, str] = {
    "Top error conditions": """
SELECT condition, count(*) AS times, count(DISTINCT capture) AS captures
FROM (
  SELECT capture, error AS condition FROM connections WHERE error IS NOT NULL
  UNION ALL
  SELECT capture, error_condition FROM links WHERE error_condition IS NOT NULL
  UNION ALL
  SELECT capture, concat(close_code, ' ', coalesce(close_text, '')) FROM channels
  WHERE close_code >= 300
  UNION ALL
  SELECT capture, code FROM findings WHERE severity = 'error'
)
GROUP BY condition ORDER BY times DESC, condition LIMIT 10""",
    "Slowest links and queues (settlement / ack / confirm latency, ms)": """
SELECT version, kind, coalesce(queue, link, routing_key) AS link_or_queue,
       count(*) AS settled,
       round(percentile_approx(latency_ms, 0.5), 3) AS p50_ms,
       round(percentile_approx(latency_ms, 0.99), 3) AS p99_ms,
       round(max(latency_ms), 3) AS max_ms
FROM deliveries WHERE latency_ms IS NOT NULL
GROUP BY version, kind, coalesce(queue, link, routing_key)
ORDER BY p99_ms DESC, settled DESC LIMIT 10""",
    "Credit starvation (1.0 links)": """
SELECT conn_key, name, role, starvation_episodes AS episodes, starvation_s AS seconds,
       credit_issued
FROM links WHERE starvation_s > 0 OR starvation_episodes > 0
ORDER BY starvation_s DESC, episodes DESC LIMIT 10""",
    "Unsettled and unacked leaks": """
SELECT 'link' AS what, conn_key, name AS `where`, unsettled AS `left`
FROM links WHERE unsettled > 0
UNION ALL
SELECT 'channel unacked', conn_key, concat('channel ', channel, ' use ', use), unacked
FROM channels WHERE unacked > 0
UNION ALL
SELECT 'channel unconfirmed', conn_key, concat('channel ', channel, ' use ', use),
       confirms_pending
FROM channels WHERE confirms_pending > 0
ORDER BY `left` DESC LIMIT 10""",
}


def run(spark: Any, out: str, write: Any) -> None:
    """Register the tables under `out` as views, run every query, `write` the results as text."""
    from amqpscope.spark.tables import TABLES, struct_type

    for table in TABLES:
        path = f"{out.rstrip('/')}/{table}"
        try:
            frame = spark.read.parquet(path)
        except Exception:  # an empty table leaves no files: an empty view of its schema
            frame = spark.createDataFrame([], struct_type(table))
        frame.createOrReplaceTempView(table)
    for title, sql in QUERIES.items():
        result = spark.sql(sql)
        columns = result.columns
        rows = [[_cell(v) for v in r] for r in result.collect()]
        write("")
        write(f"== {title}")
        if not rows:
            write("   (none)")
            continue
        widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]
        write("   " + "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)))
        for r in rows:
            write("   " + "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)))


def _cell(value: Any) -> str:
    """A value as the report shows it: what a terminal could act on (a hostile queue name's
    escape sequences) written visibly, as the timeline and summary write it."""
    text = safe("" if value is None else str(value))
    return text if len(text) <= 70 else text[:69] + "…"
