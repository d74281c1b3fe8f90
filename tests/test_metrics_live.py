"""`amqpscope live lo --metrics` scraped by a real Prometheus while recorded scenarios run
against the local RabbitMQ: PromQL over what Prometheus scraped returns what the scenarios'
clients observed (their ground truth JSON, written by the recorder as they ran): pika's
confirms (acked and nacked), a consumer's acks, nacks and rejects, a Proton receiver's
outcomes and the seconds it left its link without credit (within 10% of its own clock)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.test_metrics import _free_port

ROOT = Path(__file__).resolve().parent.parent
RECORDER = ROOT / "captures" / "record.py"
SCENARIOS = ("091-nacked-publish", "091-ack-nack-reject", "10-credit-starved")


def _wait(url: str, what: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        assert process.poll() is None, f"{what} ended: {log.read_text(errors='replace')}"
        assert time.monotonic() < deadline, f"{what} not ready in 60 s"
        time.sleep(0.2)


@pytest.mark.broker
def test_prometheus_scrapes_what_the_clients_saw(tmp_path: Path) -> None:
    server = shutil.which("prometheus")
    promtool = shutil.which("promtool")
    assert server and promtool, "Debian's prometheus (make test installs it)"
    port, prom_port = _free_port(), _free_port()
    live_err = tmp_path / "live.err"
    live = subprocess.Popen(
        [
            *(sys.executable, "-m", "amqpscope.cli", "live", "lo", "-f", "tcp port 5672"),
            *("--quiet", "--metrics", f"127.0.0.1:{port}"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=live_err.open("wb"),
        cwd=ROOT,
    )
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: amqpscope\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{port}']\n"
    )
    prom_log = tmp_path / "prometheus.log"
    prometheus = subprocess.Popen(
        [
            server,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=prom_log.open("wb"),
    )
    base = f"http://127.0.0.1:{prom_port}"
    try:
        _wait(f"http://127.0.0.1:{port}/metrics", "amqpscope live", live, live_err)
        while "capturing on" not in live_err.read_text(errors="replace"):
            time.sleep(0.05)
        _wait(base + "/-/ready", "prometheus", prometheus, prom_log)
        recorded = subprocess.run(
            [
                *(sys.executable, str(RECORDER), "--no-check", "--out", str(tmp_path / "rec")),
                *("--only", *SCENARIOS),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert recorded.returncode == 0, recorded.stderr[-3000:]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            exposition = answer.read()
        time.sleep(4)  # the connections' ends reach the tracker (a tick), then two scrapes

        def query(promql: str) -> float:
            args = urllib.parse.urlencode({"query": promql})
            with urllib.request.urlopen(f"{base}/api/v1/query?{args}", timeout=10) as answer:
                body = json.load(answer)
            assert body["status"] == "success", body
            return sum(float(r["value"][1]) for r in body["data"]["result"])

        truth = {
            name: json.loads((tmp_path / "rec" / f"{name}.json").read_text())["expect"]
            for name in SCENARIOS
        }
        assert query("up{job='amqpscope'}") == 1
        nacked, acks, starved = (truth[name] for name in SCENARIOS)
        assert query("sum(amqpscope_channel_messages_published_total)") == (
            nacked["publishes"] + acks["publishes"]
        )
        assert query("sum(amqpscope_channel_messages_confirmed_total)") == nacked["confirms_acked"]
        assert (
            query("sum(amqpscope_channel_messages_publish_nacked_total)")
            == (nacked["confirms_nacked"])
        )
        assert query("sum(amqpscope_publish_confirm_seconds_count)") == len(nacked["confirms"])
        assert query("sum(amqpscope_channel_messages_delivered_ack_total)") == acks["deliveries"]
        assert query("sum(amqpscope_channel_messages_acked_total)") == acks["acked_messages"]
        assert query("sum(amqpscope_channel_messages_nacked_total)") == acks["nacks"]
        assert query("sum(amqpscope_channel_messages_rejected_total)") == acks["rejects"]
        assert query("sum(amqpscope_consumer_ack_seconds_count)") == acks["deliveries"]
        # each message consumed was timed through the broker once (the redelivery is not);
        # the nacked-publish scenario consumed none of its messages
        assert query("sum(amqpscope_queue_time_seconds_count)") == (
            acks["deliveries"] - acks["redeliveries"]
        )
        receiver = 'role="receiver"'
        assert (
            query(f"sum(amqpscope_link_deliveries_total{{{receiver}}})")
            == (starved["transfers_received"])
        )
        for outcome, count in starved["receiver_outcomes"].items():
            promql = f'sum(amqpscope_link_settled_total{{{receiver},outcome="{outcome}"}})'
            assert query(promql) == count
        seconds = query(f"sum(amqpscope_link_starved_seconds_total{{{receiver}}})")
        assert seconds == pytest.approx(starved["starvation"]["seconds"], rel=0.1)
        # and Prometheus's linter has nothing to say of what live serves
        done = subprocess.run(
            [promtool, "check", "metrics"], input=exposition, capture_output=True, timeout=60
        )
        assert done.returncode == 0 and not done.stdout and not done.stderr, done
    finally:
        for process in (live, prometheus):
            if process.poll() is None:
                process.send_signal(signal.SIGINT if process is live else signal.SIGTERM)
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(10)
    assert live.returncode == 0, live_err.read_text(errors="replace")
    assert "Traceback" not in live_err.read_text(errors="replace")
