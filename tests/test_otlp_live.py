"""`amqpscope live lo --otlp` while captures/scenarios/otel.py's scenarios run against the local
RabbitMQ: oteltest's gRPC sink (an OTLP receiver nobody on this project wrote) receives the
spans of the clients' messages in the traces the clients set, and the error spans of RabbitMQ's
406 and of the Proton client's detach with error."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.test_metrics import _free_port
from tests.test_otlp import LOG, Received, _sink_module

ROOT = Path(__file__).resolve().parent.parent
RECORDER = ROOT / "captures" / "record.py"
SCENARIOS = ("091-otel", "10-otel")


@pytest.mark.broker
def test_live_sends_the_spans_of_what_the_clients_did(tmp_path: Path) -> None:
    sink_module = _sink_module()
    from oteltest.sink.handler import AccumulatingHandler

    handler = AccumulatingHandler()
    port = _free_port()
    sink = sink_module.GrpcSink(handler, LOG, port=port)
    sink.start()
    live_err = tmp_path / "live.err"
    live = subprocess.Popen(
        [
            *(sys.executable, "-m", "amqpscope.cli", "live", "lo", "-f", "tcp port 5672"),
            *("--quiet", "--otlp", f"127.0.0.1:{port}"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=live_err.open("wb"),
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 60
        while "capturing on" not in live_err.read_text(errors="replace"):
            assert live.poll() is None, live_err.read_text(errors="replace")
            assert time.monotonic() < deadline, "amqpscope live did not start in 60 s"
            time.sleep(0.05)
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
        time.sleep(2)  # the last frames reach the decoder
    finally:
        if live.poll() is None:
            live.send_signal(signal.SIGINT)
            try:
                live.wait(60)
            except subprocess.TimeoutExpired:
                live.kill()
                live.wait(10)
        sink.stop()
    err = live_err.read_text(errors="replace")
    assert live.returncode == 0, err
    assert "Traceback" not in err and " spans sent to " in err
    spans = Received(handler).spans()
    truth = {
        name: json.loads((tmp_path / "rec" / f"{name}.json").read_text())["expect"]
        for name in SCENARIOS
    }
    # other clients of the shared broker may be captured too: only the traces these clients
    # set, and errors that name what they did, are looked at
    for name, operation in (("091-otel", "publish"), ("10-otel", "transfer")):
        for message_id, context in truth[name]["traces"].items():
            mine = [s for s in spans if s["trace"] == context["trace_id"]]
            assert {s["attributes"]["messaging.message.id"] for s in mine} == {message_id}
            sent = [s for s in mine if s["attributes"]["messaging.operation.type"] == "send"]
            assert [s["parent"] for s in sent] == [context["span_id"]]
            assert sent[0]["attributes"]["messaging.operation.name"] == operation
    acks = truth["091-otel"]["settlements"]
    for done in acks:
        trace = truth["091-otel"]["traces"][done["message_id"]]["trace_id"]
        tags = [
            s["attributes"].get("rabbitmq.message.delivery_tag")
            for s in spans
            if s["trace"] == trace and s["attributes"]["messaging.operation.name"] == "deliver"
        ]
        assert done["delivery_tag"] in tags
    (close,) = truth["091-otel"]["channel_errors"]
    assert [
        s
        for s in spans
        if s["name"] == "channel.close"
        and s["attributes"].get("messaging.destination.name") == "amqpscope.091-otel.q"
        and s["attributes"]["error.type"] == str(close["code"])
        and s["error"]
    ]
    # the families as OTLP metrics (the broker is shared: at least what these clients did)
    metrics = Received(handler).metrics()
    published = [
        point.as_double
        for metric in metrics["amqpscope_channel_messages_published"]
        for point in metric.sum.data_points
    ]
    assert max(published) >= truth["091-otel"]["publishes"]
    condition = truth["10-otel"]["sender_detach_condition"]["condition"]
    detach = f"detach {truth['10-otel']['address']}"
    detaches = [s for s in spans if s["name"] == detach and s["error"]]
    assert condition in {s["attributes"]["error.type"] for s in detaches}


@pytest.mark.broker
def test_live_with_an_endpoint_that_does_not_answer_ends_all_the_same(tmp_path: Path) -> None:
    """The spans wait for a sender thread of their own: a dead endpoint costs the capture
    nothing, and at the end amqpscope waits at most twice an export's timeout, then says what
    was not sent, one line each, and exits as the capture did."""
    import pika

    port = _free_port()  # nothing listens there
    live = subprocess.Popen(
        [
            *(sys.executable, "-m", "amqpscope.cli", "live", "lo", "-f", "tcp port 5672"),
            *("--quiet", "--otlp", f"127.0.0.1:{port}", "--duration", "6"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    time.sleep(3)
    connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1"))
    channel = connection.channel()
    queue = channel.queue_declare("", exclusive=True).method.queue
    channel.basic_publish("", queue, b"to nowhere")
    connection.close()
    started = time.monotonic()
    _, err = live.communicate(timeout=120)
    assert live.returncode == 0, err
    assert time.monotonic() - started < 60
    assert "Traceback" not in err
    assert f"amqpscope: --otlp: 127.0.0.1:{port}: the OTLP endpoint did not take" in err
    assert f"amqpscope: 0 spans sent to 127.0.0.1:{port}\n" in err
