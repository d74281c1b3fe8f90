"""`amqpscope metrics`: a capture's families as OpenMetrics, held to the captures' ground truth
(what the recording clients observed), and read back by Prometheus itself: `promtool tsdb
create-blocks-from openmetrics` loads the output and a Prometheus server started on those
blocks answers PromQL at the times the clients noted. (prometheus_client's OpenMetrics parser
is not the reader here: it drops a histogram's buckets after the first at a second timestamp of
the same series, taking them for duplicates of a truncated timestamp.)"""

from __future__ import annotations

import ast
import json
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
USED = (
    "091-confirms-return",
    "091-ack-nack-reject",
    "091-nacked-publish",
    "10-outcomes",
    "10-credit-starved",
)


def truth(name: str) -> dict[str, Any]:
    return json.loads((CAPTURES / f"{name}.json").read_text())["expect"]


def metrics_text(name: str, *options: str) -> str:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "amqpscope.cli",
            "metrics",
            *options,
            str(CAPTURES / f"{name}.pcap"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


SAMPLE = re.compile(r"^([a-z_]+)(?:\{(.*)\})? (\S+) (\S+)$")
SAMPLE_UNTIMED = re.compile(r"^([a-z_]+)(?:\{(.*)\})? (\S+)$")
LABEL = re.compile(r'([a-z_]+)="((?:[^"\\]|\\.)*)"')


def last_values(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Each series' last value; checks that every sample has a time, that each series' times
    never go back, and that the text ends with `# EOF`."""
    assert text.endswith("# EOF\n")
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    times: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        match = SAMPLE.match(line)
        assert match, line
        name, labels, value, ts = match.groups()
        key = (name, tuple(sorted(LABEL.findall(labels or ""))))
        assert float(ts) >= times.get(key, 0.0), line
        times[key] = float(ts)
        out[key] = float(value)
    return out


def total(values: dict, name: str, **labels: str) -> float:
    """The sum of `name`'s series whose labels include `labels`."""
    return sum(
        v
        for (n, ls), v in values.items()
        if n == name and all(dict(ls).get(k) == want for k, want in labels.items())
    )


def test_091_counts_are_the_clients() -> None:
    confirms = last_values(metrics_text("091-confirms-return"))
    expect = truth("091-confirms-return")
    assert total(confirms, "amqpscope_channel_messages_published_total") == expect["publishes"]
    assert total(confirms, "amqpscope_channel_messages_confirmed_total") == expect["confirms_acked"]
    assert (
        total(confirms, "amqpscope_channel_messages_unroutable_returned_total") == expect["returns"]
    )
    assert total(confirms, "amqpscope_publish_confirm_seconds_count") == expect["confirms_acked"]
    assert total(confirms, "amqpscope_connections_opened_total") == expect["connections"]
    assert total(confirms, "amqpscope_connections_closed_total") == expect["connection_closes"]

    acks = last_values(metrics_text("091-ack-nack-reject"))
    expect = truth("091-ack-nack-reject")
    assert total(acks, "amqpscope_channel_messages_published_total") == expect["publishes"]
    assert total(acks, "amqpscope_channel_messages_delivered_ack_total") == expect["deliveries"]
    assert total(acks, "amqpscope_channel_messages_redelivered_total") == expect["redeliveries"]
    assert total(acks, "amqpscope_channel_messages_acked_total") == expect["acked_messages"]
    assert total(acks, "amqpscope_channel_messages_nacked_total") == expect["nacks"]
    assert total(acks, "amqpscope_channel_messages_rejected_total") == expect["rejects"]
    # every delivery was settled once (5 acked, 1 nacked, 1 rejected): one consumer time each
    settled = expect["acked_messages"] + expect["nacks"] + expect["rejects"]
    assert total(acks, "amqpscope_consumer_ack_seconds_count") == settled == expect["deliveries"]
    # by the consumer's queue: the one queue the scenario consumed
    queues = {
        dict(ls)["queue"] for n, ls in acks if n == "amqpscope_queue_messages_delivered_total"
    }
    assert len(queues) == 1
    assert total(acks, "amqpscope_queue_messages_delivered_total") == expect["deliveries"]
    # after the consumer was cancelled and the connection closed, nothing is left open
    assert total(acks, "amqpscope_channel_consumers") == 0
    assert total(acks, "amqpscope_channel_messages_unacked") == 0

    nacked = last_values(metrics_text("091-nacked-publish"))
    expect = truth("091-nacked-publish")
    assert total(nacked, "amqpscope_channel_messages_confirmed_total") == expect["confirms_acked"]
    assert (
        total(nacked, "amqpscope_channel_messages_publish_nacked_total")
        == expect["confirms_nacked"]
    )
    assert total(nacked, "amqpscope_publish_confirm_seconds_count") == len(expect["confirms"])


def test_10_counts_are_the_clients() -> None:
    outcomes = last_values(metrics_text("10-outcomes"))
    expect = truth("10-outcomes")
    deliveries = "amqpscope_link_deliveries_total"
    assert total(outcomes, deliveries, role="sender") == expect["transfers_sent"]
    assert total(outcomes, deliveries, role="receiver") == expect["transfers_received"]
    for role, key in (("sender", "sender_outcomes"), ("receiver", "receiver_outcomes")):
        settled = {
            dict(ls)["outcome"]: v
            for (n, ls), v in outcomes.items()
            if n == "amqpscope_link_settled_total" and dict(ls)["role"] == role and v
        }
        assert settled == expect[key], role
    ends = {
        dict(ls)["condition"]
        for (n, ls), v in outcomes.items()
        if n == "amqpscope_session_ends_total" and v and dict(ls)["condition"] != "none"
    }
    assert ends == {error["condition"] for error in expect["session_errors"]}

    starved = last_values(metrics_text("10-credit-starved"))
    expect = truth("10-credit-starved")
    assert total(starved, deliveries, role="receiver") == expect["transfers_received"]
    seconds = total(starved, "amqpscope_link_starved_seconds_total", role="receiver")
    assert seconds == pytest.approx(expect["starvation"]["seconds"], rel=0.1)


def test_diagnoses_count_what_the_clients_did() -> None:
    """A consumer that held its prefetch unacked, and a receiver that granted no credit: one
    diagnosis each, lasting what the client's own clock says (within 10%), counted when the
    connection ended."""
    for name, code, key in (
        ("091-stalled-consumer", "consumer.stalled", "stall"),
        ("10-credit-starved", "credit.starved", "starvation"),
    ):
        values = last_values(metrics_text(name))
        expect = truth(name)
        assert total(values, "amqpscope_diagnoses_total", code=code) == 1, name
        seconds = total(values, "amqpscope_diagnosis_seconds_total", code=code)
        assert seconds == pytest.approx(expect[key]["seconds"], rel=0.1), name


@pytest.mark.parametrize("name", USED)
def test_bytes_and_frames_are_tsharks(name: str) -> None:
    """Bytes by direction are the TCP payload tshark counts each way (every byte of these
    captures is AMQP); frames are the AMQP PDUs tshark dissects (0-9-1: tshark shows no
    protocol header, amqpscope counts it as the client's first frame)."""
    from tests.oracle import tshark_frames

    tshark = shutil.which("tshark")
    assert tshark, "tshark (make test installs it)"
    meta = json.loads((CAPTURES / f"{name}.json").read_text())
    path = str(CAPTURES / f"{name}.pcap")
    done = subprocess.run(
        [tshark, "-r", path, "-T", "fields", "-e", "tcp.dstport", "-e", "tcp.len"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    payload = {"c2s": 0, "s2c": 0}
    for line in done.stdout.splitlines():
        port, size = line.split("\t")
        payload["c2s" if int(port) == meta["port"] else "s2c"] += int(size or 0)
    values = last_values(metrics_text(name))
    for direction, size in payload.items():
        assert total(values, "amqpscope_connection_bytes_total", direction=direction) == size
    frames = total(values, "amqpscope_connection_frames_total")
    headers = 1 if meta["protocol"] == "0-9-1" else 0
    assert frames == len(tshark_frames(path)) + headers


def test_conn_labels_only_on_request() -> None:
    """091-redelivered: consumer A (one connection) got three messages and left them unacked,
    consumer B (another) got them again, redelivered, and acked them. Without
    --metrics-labels conn no series names a connection; with it, each connection's series
    hold its own consumer's counts (from the clients' delivery log), summing to the totals."""
    expect = truth("091-redelivered")
    plain = last_values(metrics_text("091-redelivered"))
    assert not any("conn" in dict(labels) for _, labels in plain)
    by_conn = last_values(metrics_text("091-redelivered", "--metrics-labels", "conn"))
    conns = {dict(ls)["conn"] for n, ls in by_conn if n == "amqpscope_connections_opened_total"}
    assert len(conns) == expect["connections"]
    log = expect["deliveries_log"]
    consumers = sorted({d["consumer"] for d in log})
    for family, counted in (
        ("amqpscope_channel_messages_delivered_ack_total", lambda d: True),
        ("amqpscope_channel_messages_redelivered_total", lambda d: d["redelivered"]),
    ):
        want = sorted(sum(1 for d in log if d["consumer"] == c and counted(d)) for c in consumers)
        got = sorted(total(by_conn, family, conn=conn) for conn in conns)
        assert got == want, family
        assert sum(got) == total(plain, family)
    acks = sorted(total(by_conn, "amqpscope_channel_messages_acked_total", conn=c) for c in conns)
    # A left what it got unacked when it closed its channel; B acked every one
    first = sum(d["consumer"] == consumers[0] for d in log)
    assert acks == sorted([first - expect["unacked_when_closed"], expect["acks"]])


def log_metrics(name: str) -> tuple[str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", "metrics", str(CAPTURES / f"{name}.log")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout, done.stderr


def test_trace_logs_give_the_same_families() -> None:
    """A rhea trace (timed) and a Proton trace (PN_TRACE_FRM: no times) give the link counts
    their clients saw; the untimed one once, without timestamps, with no durations (they would
    all read 0), and says so on stderr."""
    text, _ = log_metrics("log-rhea-starved")
    expect = truth("log-rhea-starved")
    values = last_values(text)
    deliveries = "amqpscope_link_deliveries_total"
    assert total(values, deliveries, role="sender") == expect["transfers_sent"]
    assert total(values, deliveries, role="receiver") == expect["transfers_received"]
    text, said = log_metrics("log-proton-starved")
    expect = truth("log-proton-starved")
    assert "no times" in said
    samples = [line for line in text.splitlines() if not line.startswith("#")]
    assert samples and all(SAMPLE_UNTIMED.match(line) for line in samples)
    assert "seconds" not in text
    values = {
        (m[1], tuple(sorted(LABEL.findall(m[2] or "")))): float(m[3])
        for m in map(SAMPLE_UNTIMED.match, samples)
        if m
    }
    assert total(values, deliveries, role="sender") == expect["transfers_sent"]
    assert total(values, deliveries, role="receiver") == expect["transfers_received"]
    accepted = total(values, "amqpscope_link_settled_total", role="receiver", outcome="accepted")
    assert accepted == expect["accepted"]


def test_management_and_cbs_requests_are_the_listeners() -> None:
    """10-cbs-tokens: the listener answered two put-tokens on $cbs (401, then 202) and a
    renew-lock (410), and never answered the peek-message; the requests' counts by operation and
    status, the one left unanswered, and the timed request/response pairs are those."""
    expect = truth("10-cbs-tokens")
    values = last_values(metrics_text("10-cbs-tokens"))
    answered = {
        (dict(ls)["operation"], int(dict(ls)["status"])): v
        for (n, ls), v in values.items()
        if n == "amqpscope_requests_total"
    }
    want: dict[tuple[str, int], float] = {}
    for answer in expect["listener_answers"]:
        key = (answer["operation"], answer["status_code"])
        want[key] = want.get(key, 0) + 1
    assert answered == want
    left = {
        dict(ls)["operation"]
        for (n, ls), v in values.items()
        if n == "amqpscope_requests_unanswered_total" and v
    }
    assert left == set(expect["listener_unanswered"])
    timed = total(values, "amqpscope_request_seconds_count")
    assert timed == len(expect["client_responses"])


def test_rpc_and_time_in_the_broker_are_the_clients() -> None:
    """091-rpc: three requests each answered (correlation-id matched by the client) make three
    timed request/reply pairs; every publish of the capture (requests and replies) was
    delivered once, so each queue's time-in-broker histogram counts its own; 091-ack-nack-reject:
    six publishes, the redelivery not timed again."""
    expect = truth("091-rpc")
    values = last_values(metrics_text("091-rpc"))
    assert total(values, "amqpscope_rpc_seconds_count") == expect["correlations_matched"]
    per_queue = [v for (n, _), v in values.items() if n == "amqpscope_queue_time_seconds_count"]
    assert sorted(per_queue) == [expect["requests_served"], expect["replies_received"]]
    assert sum(per_queue) == expect["publishes"]
    expect = truth("091-ack-nack-reject")
    values = last_values(metrics_text("091-ack-nack-reject"))
    assert total(values, "amqpscope_queue_time_seconds_count") == expect["publishes"]
    assert expect["deliveries"] - expect["redeliveries"] == expect["publishes"]


def test_channel_closes_by_code_are_the_brokers() -> None:
    """091-channel-errors: the broker closed channel 1 three times (406, 403, 406, as pika
    reported them) and the client closed two channels itself."""
    expect = truth("091-channel-errors")
    values = last_values(metrics_text("091-channel-errors"))
    family = "amqpscope_channels_closed_total"
    by_server = {
        int(dict(ls)["code"]): v
        for (n, ls), v in values.items()
        if n == family and v
        if dict(ls)["by"] == "server"
    }
    want: dict[int, float] = {}
    for error in expect["channel_errors"]:
        want[error["code"]] = want.get(error["code"], 0) + 1
    assert by_server == want
    assert total(values, family, by="client") == expect["channel_closes"]


def test_blocked_seconds_are_the_publishers() -> None:
    """091-blocked-publisher: connection.blocked to connection.unblocked lasted what the
    publisher's clock says (within 10%)."""
    expect = truth("091-blocked-publisher")
    values = last_values(metrics_text("091-blocked-publisher"))
    seconds = total(values, "amqpscope_connection_blocked_seconds_total")
    assert seconds == pytest.approx(expect["blocked"]["seconds"], rel=0.1)


def test_gets_are_the_clients() -> None:
    """091-get, read from standard input: two basic.get-ok and one basic.get-empty."""
    done = subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", "metrics", "-"],
        input=(CAPTURES / "091-get.pcap").read_bytes(),
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    values = last_values(done.stdout.decode())
    expect = truth("091-get")
    assert total(values, "amqpscope_channel_messages_got_total") == expect["get_ok"]
    assert total(values, "amqpscope_channel_get_empty_total") == expect["get_empty"]
    modes = [get["no_ack"] for get in expect["get_ok_details"]]
    assert total(values, "amqpscope_channel_get_ack_total") == modes.count(False)
    assert total(values, "amqpscope_channel_get_total") == modes.count(True)


# -- Prometheus on the blocks promtool makes of the output ------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A Prometheus server on the blocks of the five captures' `metrics --interval 0.001`;
    yields `query(promql, at)` -> the sum of the vector's values (None: empty)."""
    promtool, server = shutil.which("promtool"), shutil.which("prometheus")
    assert promtool and server, "promtool and prometheus come with Debian's prometheus (make test)"
    root = tmp_path_factory.mktemp("prometheus")
    data = root / "data"
    for name in USED:
        text = root / f"{name}.om"
        text.write_text(metrics_text(name, "--interval", "0.001"))
        subprocess.run(
            [promtool, "tsdb", "create-blocks-from", "openmetrics", str(text), str(data)],
            check=True,
            capture_output=True,
            timeout=120,
        )
    config = root / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1h\n")
    port = _free_port()
    process = subprocess.Popen(
        [
            server,
            f"--config.file={config}",
            f"--storage.tsdb.path={data}",
            # the captures' times are days old: kept whatever the date
            "--storage.tsdb.retention.time=100y",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(root / "prometheus.log").open("w"),
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(base + "/-/ready", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert process.poll() is None, (root / "prometheus.log").read_text()
            assert time.monotonic() < deadline, "prometheus not ready in 60 s"
            time.sleep(0.2)

        def query(promql: str, at: float) -> float | None:
            """The sum of the vector's values at `at` (None: empty)."""
            args = urllib.parse.urlencode({"query": promql, "time": f"{at:.6f}"})
            with urllib.request.urlopen(f"{base}/api/v1/query?{args}", timeout=10) as answer:
                body = json.load(answer)
            assert body["status"] == "success", body
            result = body["data"]["result"]
            return sum(float(r["value"][1]) for r in result) if result else None

        query.base = base  # type: ignore[attr-defined]
        yield query
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_blocks_answer_the_confirms_at_the_clients_times(prometheus: Any) -> None:
    """After each confirm the publisher got (at the time it got it), Prometheus holds as many
    confirms and nacks as the publisher had then. Prometheus keeps milliseconds, and its value
    at a millisecond is the state after every frame within it: a confirm the publisher got by
    then is counted, one it had not yet asked for by the end of it cannot be."""
    confirms = truth("091-nacked-publish")["confirms"]
    assert prometheus("sum(amqpscope_channel_messages_confirmed_total)", confirms[0]["sent"]) in (
        None,
        0,
    )
    exact = 0
    for confirm in confirms:
        at = int(confirm["answered"] * 1000) / 1000  # the millisecond it fell in
        for outcome, family in (
            ("acked", "amqpscope_channel_messages_confirmed_total"),
            ("nacked", "amqpscope_channel_messages_publish_nacked_total"),
        ):
            got = [
                c
                for c in confirms
                if c["outcome"] == outcome and c["answered"] <= confirm["answered"]
            ]
            asked = [c for c in confirms if c["outcome"] == outcome and c["sent"] < at + 0.001]
            value = prometheus(f"sum({family})", at) or 0
            assert len(got) <= value <= len(asked), (outcome, confirm)
            exact += len(got) == len(asked)
        answered = sum(c["answered"] <= confirm["answered"] for c in confirms)
        count = prometheus("sum(amqpscope_publish_confirm_seconds_count)", at)
        assert answered <= count <= sum(c["sent"] < at + 0.001 for c in confirms)
    assert exact >= len(confirms)  # most points allow one value only


def test_blocks_answer_the_starvation_at_the_clients_times(prometheus: Any) -> None:
    """While the receiver granted nothing: its first grant's deliveries, and starved seconds
    growing; after the scenario: every delivery and the starved time of the client's clock."""
    expect = truth("10-credit-starved")
    started, ended = expect["starvation"]["started"], expect["starvation"]["ended"]
    receiver = 'role="receiver"'
    during = started + (ended - started) / 2
    assert (
        prometheus(f"sum(amqpscope_link_deliveries_total{{{receiver}}})", during)
        == (expect["credit_granted"][0])
    )
    after = ended + 1.0
    assert (
        prometheus(f"sum(amqpscope_link_deliveries_total{{{receiver}}})", after)
        == (expect["transfers_received"])
    )
    seconds = prometheus(f"sum(amqpscope_link_starved_seconds_total{{{receiver}}})", after)
    assert seconds == pytest.approx(expect["starvation"]["seconds"], rel=0.1)
    # the receiver's outcomes, by PromQL's label matching
    accepted = prometheus(
        f'sum(amqpscope_link_settled_total{{{receiver},outcome="accepted"}})', after
    )
    assert accepted == expect["receiver_outcomes"]["accepted"]


# -- the exposition `live --metrics` serves ---------------------------------------------------


def sampled(name: str) -> Any:
    """A sampler fed a capture to its end."""
    from amqpscope.cli.inputs import open_input
    from amqpscope.metrics.sampler import Sampler

    sampler = Sampler()
    with open_input([str(CAPTURES / f"{name}.pcap")]) as source:
        for frame in source.frames(messages=True, retire=True):
            sampler.feed(frame)
        sampler.finish()
    return sampler


def test_the_server_answers_what_prometheus_client_renders() -> None:
    """`live --metrics`'s server renders ahead of the scrape with prometheus_client's own
    encoders: the text format to a plain scraper, OpenMetrics (ending `# EOF`) to Prometheus's
    Accept header, gzipped when accepted, byte for byte what prometheus_client writes for the
    sample; a second scrape of an unchanged sample gets the same bytes; other paths are 404."""
    import gzip
    import urllib.error

    from prometheus_client import generate_latest
    from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

    from amqpscope.metrics.serve import registry, serve

    sampler = sampled("091-ack-nack-reject")
    port = _free_port()
    server = serve(sampler, f"127.0.0.1:{port}")
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        prometheus = (
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
            "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
        )
        asked = (
            ({}, generate_latest(registry(sampler)), None),
            ({"Accept": prometheus}, generate_openmetrics(registry(sampler)), None),
            ({"Accept": prometheus, "Accept-Encoding": "gzip"}, None, "gzip"),
        )
        for headers, want, encoding in asked:
            for _ in range(2):
                request = urllib.request.Request(url, headers=headers)
                with urllib.request.urlopen(request, timeout=10) as answer:
                    body = answer.read()
                    assert answer.headers.get("Content-Encoding") == encoding
                if encoding:
                    body = gzip.decompress(body)
                    want = generate_openmetrics(registry(sampler))
                assert body == want
        assert b"amqpscope_channel_messages_acked_total" in body and body.endswith(b"# EOF\n")
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/other", timeout=10)
        assert error.value.code == 404
    finally:
        server.shutdown()


def exposition(name: str) -> tuple[bytes, bytes]:
    """The text and OpenMetrics exposition prometheus_client makes of a capture's last sample
    (what a scrape of `live --metrics` gets once the capture's traffic has gone by)."""
    from prometheus_client import generate_latest
    from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

    from amqpscope.cli.inputs import open_input
    from amqpscope.metrics.sampler import Sampler
    from amqpscope.metrics.serve import registry

    sampler = Sampler()
    with open_input([str(CAPTURES / f"{name}.pcap")]) as source:
        for frame in source.frames(messages=True, retire=True):
            sampler.feed(frame)
        sampler.finish()
    served = registry(sampler)
    return generate_latest(served), generate_openmetrics(served)


@pytest.mark.parametrize("name", USED)
def test_promtool_finds_the_exposition_clean(name: str) -> None:
    """`promtool check metrics` (Prometheus's own linter) has nothing to say of the text
    exposition, and prometheus_client's parsers read both formats back with the counts."""
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as read_om
    from prometheus_client.parser import text_string_to_metric_families as read_text

    promtool = shutil.which("promtool")
    assert promtool, "promtool comes with Debian's prometheus (make test)"
    text, openmetrics = exposition(name)
    done = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, timeout=60
    )
    assert done.returncode == 0 and not done.stdout and not done.stderr, done
    for reader, body in ((read_text, text), (read_om, openmetrics)):
        values = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in reader(body.decode())
            for s in family.samples
        }
        # the same counts `amqpscope metrics` writes last for the capture
        for (sample, labels), value in last_values(metrics_text(name)).items():
            if sample.endswith("_total") or sample.endswith("_count"):
                assert values.get((sample, labels)) == value, (sample, labels)


# -- cardinality ------------------------------------------------------------------------------


def series(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], list[float]]:
    """Each series' values in time order."""
    out: dict[tuple[str, tuple[tuple[str, str], ...]], list[float]] = {}
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match:
            name, labels, value, _ = match.groups()
            out.setdefault((name, tuple(sorted(LABEL.findall(labels or "")))), []).append(
                float(value)
            )
    return out


def test_queue_labels_are_bounded() -> None:
    """091-channels consumed eight queues: with room for three names, three keep theirs and the
    rest are counted under `other`; no delivery is lost, and no counter ever goes down (a name
    never leaves `other`)."""
    expect = truth("091-channels")
    family = "amqpscope_queue_messages_delivered_total"
    every = last_values(metrics_text("091-channels"))
    named = {dict(ls)["queue"] for n, ls in every if n == family}
    assert len(named) == expect["queue_declares"] and "other" not in named
    text = metrics_text("091-channels", "--interval", "0.001", "--metrics-max-names", "3")
    bounded = last_values(text)
    kept = {dict(ls)["queue"] for n, ls in bounded if n == family}
    assert len(kept) == 4 and "other" in kept and kept - {"other"} <= named
    assert total(bounded, family) == expect["deliveries"]
    per_queue = expect["deliveries"] // expect["consumers"]  # each queue's own messages
    assert total(bounded, family, queue="other") == expect["deliveries"] - 3 * per_queue
    for (name, labels), values in series(text).items():
        if name.endswith(("_total", "_count", "_bucket")):
            assert values == sorted(values), (name, labels)


# -- the Grafana dashboard --------------------------------------------------------------------

DASHBOARD = CAPTURES.parent / "docs" / "grafana" / "amqpscope.json"


def dashboard_expressions() -> list[str]:
    board = json.loads(DASHBOARD.read_text())
    return [target["expr"] for panel in board["panels"] for target in panel["targets"]]


def test_the_dashboard_reads_what_amqpscope_exports(prometheus: Any) -> None:
    """Every expression of the shipped Grafana dashboard names only families amqpscope exports,
    is PromQL Prometheus evaluates (over the blocks of the five captures), and together they
    read most families."""
    from amqpscope.metrics.families import FAMILIES, exported_names

    exported = exported_names()
    expressions = dashboard_expressions()
    assert expressions
    read: set[str] = set()
    for expr in expressions:
        names = set(re.findall(r"\bamqpscope_[a-z0-9_]+", expr))
        assert names and names <= exported, (expr, names - exported)
        read |= names
        # Grafana's own variable, as Grafana gives it for a 15 s scrape interval
        promql = expr.replace("$__rate_interval", "1m")
        args = urllib.parse.urlencode({"query": promql, "time": "1795686361.2"})
        url = prometheus.base + f"/api/v1/query?{args}"
        with urllib.request.urlopen(url, timeout=10) as answer:
            assert json.load(answer)["status"] == "success", expr
    families = {f.exported for f in FAMILIES}
    shown = {f for f in families if any(n.startswith(f) for n in read)}
    assert len(shown) >= len(families) * 2 // 3, families - shown


def test_the_busiest_queues_keep_their_names() -> None:
    """091-busy-queues: the client consumed 'quiet' (1 message) first, then 'busy' (6), then
    'middle' (3). With room for one name, a capture file keeps the busiest (by the client's
    delivery counts), not the first seen, and counts the rest under `other`; read from standard
    input (which cannot be read twice), the first seen."""
    expect = truth("091-busy-queues")
    by_queue = expect["deliveries_by_queue"]
    busiest = max(by_queue, key=by_queue.get)
    first = expect["queues_in_order"][0]
    assert busiest != first
    family = "amqpscope_queue_messages_delivered_total"
    values = last_values(metrics_text("091-busy-queues", "--metrics-max-names", "1"))
    kept = {dict(ls)["queue"]: v for (n, ls), v in values.items() if n == family}
    assert kept == {busiest: by_queue[busiest], "other": expect["deliveries"] - by_queue[busiest]}
    done = subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", "metrics", "--metrics-max-names", "1", "-"],
        input=(CAPTURES / "091-busy-queues.pcap").read_bytes(),
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    values = last_values(done.stdout.decode())
    kept = {dict(ls)["queue"]: v for (n, ls), v in values.items() if n == family}
    assert kept == {first: by_queue[first], "other": expect["deliveries"] - by_queue[first]}


# -- layering and laziness --------------------------------------------------------------------


def test_only_live_metrics_imports_prometheus_client() -> None:
    """`read` and `amqpscope metrics` run without prometheus_client imported (the OpenMetrics
    text is amqpscope's own); the metrics face imports no other face nor the CLI."""
    code = (
        "import sys, io, contextlib\n"
        "from amqpscope.cli import main\n"
        "for args in (['read', sys.argv[1]], ['metrics', sys.argv[1]]):\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        try:\n"
        "            main(args)\n"
        "        except SystemExit as exit:\n"
        "            assert not exit.code, exit.code\n"
        "    assert 'prometheus_client' not in sys.modules, args\n"
        "import amqpscope.metrics.serve\n"
        "assert 'prometheus_client' not in sys.modules\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(CAPTURES / "091-nacked-publish.pcap")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    faces = ("amqpscope.render", "amqpscope.tui", "amqpscope.spark", "amqpscope.cli")
    for path in (CAPTURES.parent / "amqpscope" / "metrics").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith(faces), (path.name, node.module)
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith(faces) for a in node.names), path.name


@pytest.mark.parametrize(
    "name", ["091-rpc", "091-redelivered", "091-killed-autoack-consumer", "10-peer-to-peer"]
)
def test_counters_never_go_down_as_connections_end(name: str) -> None:
    """Captures of two connections, one ending before the other: when the first is retired
    (its TCP ended) its counts move into the sampler's own totals, and no counter, histogram
    count or bucket dips at the millisecond it happens; the last values are the connections'
    (the opened count is the ground truth's)."""
    text = metrics_text(name, "--interval", "0.001")
    for (family, labels), values in series(text).items():
        if family.endswith(("_total", "_count", "_bucket")):
            assert values == sorted(values), (family, labels)
    expect = truth(name)
    opened = expect.get("connections_opened", expect.get("connections"))
    assert total(last_values(text), "amqpscope_connections_opened_total") == opened


@pytest.mark.parametrize(
    "name", ["091-heartbeats", "091-missed-heartbeats", "091-gmq-heartbeat-fin"]
)
def test_heartbeat_misses_are_the_clients_silences(name: str) -> None:
    """A client silent past two heartbeat intervals is one miss, counted even when it never
    sends again (091-missed-heartbeats: paused until the broker hung up) and once when it wakes
    after the broker's FIN (091-gmq-heartbeat-fin); heartbeats flowing are none. Each series
    only ever goes up."""
    expect = truth(name)
    silence = expect.get("silence", {}).get("seconds", 0.0)
    want = 1.0 if silence > 2 * expect["negotiated_heartbeat"] else 0.0
    text = metrics_text(name)
    values = last_values(text)
    family = "amqpscope_connection_heartbeat_misses_total"
    assert total(values, family, direction="c2s") == want
    assert total(values, family, direction="s2c") == 0
    seen: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(family):
            series, value, _at = line.rsplit(" ", 2)
            assert float(value) >= seen.get(series, 0.0), line
            seen[series] = float(value)
