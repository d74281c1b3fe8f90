"""Recordings of AMQP 0-9-1 client libraries other than pika and librabbitmq, against RabbitMQ and
garagemq: py-amqp (Python; celery's and kombu's client) and php-amqplib (PHP).

An answer must hold on every client, and these behave unlike pika where it matters:

- both negotiate heartbeat 0 by default (RabbitMQ proposes 60; the client's tune-ok says 0, so
  neither side sends heartbeats);
- py-amqp with confirm_publish waits for each publish's basic.ack before the next; php-amqplib
  publishes the three and then waits for the confirms;
- php-amqplib logs in with AMQPLAIN by default: garagemq knows PLAIN alone and refuses the
  login (530), so its happy path against garagemq asks for PLAIN;
- garagemq makes consumer tags of its own form (not `amq.ctag-...`);
- py-amqp opens a channel the broker closed again at once, on the same number, and its
  connection.close says reply-code 0;
- a PHP worker killed with SIGKILL closes nothing: the kernel ends the TCP connection.

Each client runs in a child process (`_pyamqp_client.py` under the system python3, where
Debian's python3-amqp is; `_php_client.php` under php-cli with Debian's php-amqplib) and prints
what the library observed as one JSON line: that is the ground truth, never the capture.

Needs: Debian's python3-amqp, php-cli and php-amqplib; garagemq for the -gmq recordings.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import recorder as record  # captures/recorder/: the harness and shared helpers

HERE = Path(__file__).resolve().parent
PYAMQP = str(HERE / "_pyamqp_client.py")
PHP = str(HERE / "_php_client.php")
AIORMQ = str(HERE / "_aiormq_client.py")


def versions(*packages: str) -> dict[str, str]:
    """The Debian packages' versions the client ran with (dpkg's word)."""
    out: dict[str, str] = {}
    for package in packages:
        done = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True, text=True
        )
        out[package] = done.stdout.strip() if done.returncode == 0 else "not installed"
    return out


def client(command: list[str], packages: tuple[str, ...], timeout: float = 40) -> dict[str, Any]:
    """Run one client to its end (or its own SIGKILL); its last stdout line, parsed."""
    done = subprocess.run(
        command,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd="/tmp",
    )
    lines = done.stdout.strip().splitlines()
    if not lines:
        raise RuntimeError(
            f"{command[0]} exited with {done.returncode} and printed nothing"
            f" (apt-get install {' '.join(packages)}): {done.stderr.strip()[-300:]}"
        )
    counts: dict[str, Any] = json.loads(lines[-1])
    counts["client_library"] = versions(*packages)
    return counts


def pyamqp(ctx: record.Ctx, mode: str, port: int) -> dict[str, Any]:
    """py-amqp under the system python3."""
    command = ["/usr/bin/python3", PYAMQP, mode, str(port), ctx.q()]
    return client(command, ("python3-amqp",))


def php(ctx: record.Ctx, mode: str, port: int, login: str = "AMQPLAIN") -> dict[str, Any]:
    """php-amqplib under php-cli; `login` its login method (AMQPLAIN is its default)."""
    command = ["php", PHP, mode, str(port), ctx.q(), login]
    return client(command, ("php-amqplib", "php-cli"))


def aiormq(ctx: record.Ctx, mode: str, port: int) -> dict[str, Any]:
    """aiormq (asyncio) under the system python3."""
    command = ["/usr/bin/python3", AIORMQ, mode, str(port), ctx.q()]
    return client(command, ("python3-aiormq", "python3-pamqp"), timeout=60)


def garagemq(ctx: record.Ctx) -> None:
    """Start garagemq if needed, and delete the queue a failed run left (outside the capture)."""
    record.clear_garagemq(ctx.name, (ctx.q(),))


#: what every garagemq recording here is: no RabbitMQ, garagemq's port captured
GARAGEMQ: dict[str, Any] = record.own_broker(record.GARAGEMQ_PORT, garagemq)

HAPPY = (
    " declare a queue, publish 3 messages with publisher confirms, consume them with manual acks"
    " (tag 1 alone, tags 2-3 by one multiple ack), cancel, delete the queue, close the channel"
    " and the connection."
)


HEARTBEATS = (
    " heartbeat 2 s in its tune-ok; an idle connection for 7 s, the client calling drain_events"
    " and heartbeat_tick every 0.25 s as kombu does (py-amqp sends a heartbeat once 2 s passed"
    " with nothing sent), then channel.close and connection.close."
)

AIORMQ_HAPPY = (
    " heartbeat 60 s in its tune-ok whatever the broker proposed; a queue declared, 3 publishes"
    " each awaited until its confirm (aiormq's channels confirm by default), consumed with manual"
    " acks (tag 1 alone, tags 2-3 by one multiple ack) under a consumer tag the client made,"
    " cancel, delete the queue, close the channel and the connection."
)

PHP_HAPPY = HAPPY.replace("with publisher", "and wait for their")
RABBITMQ: dict[str, Any] = {}  # the recorder's defaults: RabbitMQ on 5672, the queue `q`


def _register(
    name: str,
    description: str,
    doc: str,
    run: Callable[..., dict[str, Any]],
    args: tuple[Any, ...],
    settings: dict[str, Any],
) -> record.RunFn:
    """Register NAME (calls in recording order): one run of the client `run(ctx, *args)`, whose
    counts are the ground truth; `doc` says why the scenario is here, `settings` its capture."""

    def scenario(ctx: record.Ctx) -> dict[str, Any]:
        return run(ctx, *args)

    scenario.__doc__ = doc
    scenario.__name__ = scenario.__qualname__ = "s_" + name[4:].replace("-", "_")
    return record.scenario(name, "0-9-1", description, **settings)(scenario)


s_pyamqp_happy = _register(
    "091-pyamqp-happy",
    "py-amqp against RabbitMQ:" + HAPPY,
    "celery's client: heartbeat 0, each publish waiting for its confirm.",
    pyamqp,
    ("happy", record.BROKER_PORT),
    RABBITMQ,
)
s_pyamqp_happy_gmq = _register(
    "091-pyamqp-happy-gmq",
    "py-amqp against garagemq:" + HAPPY,
    "As 091-pyamqp-happy, on garagemq (its own consumer tags).",
    pyamqp,
    ("happy", record.GARAGEMQ_PORT),
    GARAGEMQ,
)
s_pyamqp_missing_exchange = _register(
    "091-pyamqp-missing-exchange",
    "py-amqp against RabbitMQ, confirms on: a publish to an exchange that does not exist;"
    " RabbitMQ closes channel 1 with 404, py-amqp answers close-ok, opens channel 1 again and"
    " raises NotFound; the connection is closed.",
    "The client named an exchange nobody declared.",
    pyamqp,
    ("missing-exchange", record.BROKER_PORT),
    {"queues": ()},
)
s_php_happy = _register(
    "091-php-happy",
    "php-amqplib against RabbitMQ (AMQPLAIN login, its default):" + PHP_HAPPY,
    "PHP's client: heartbeat 0, AMQPLAIN, the confirms waited for after the publishes.",
    php,
    ("happy", record.BROKER_PORT),
    RABBITMQ,
)
s_php_happy_gmq = _register(
    "091-php-happy-gmq",
    "php-amqplib against garagemq (PLAIN login: garagemq refuses AMQPLAIN):" + PHP_HAPPY,
    "As 091-php-happy, on garagemq.",
    php,
    ("happy", record.GARAGEMQ_PORT, "PLAIN"),
    GARAGEMQ,
)
s_php_amqplain_gmq = _register(
    "091-php-amqplain-gmq",
    "php-amqplib against garagemq with its default login method, AMQPLAIN, which garagemq does"
    " not offer: garagemq refuses the login with connection.close 530; php-amqplib answers"
    " close-ok and gives up.",
    "A login refused for its mechanism, not its password.",
    php,
    ("happy", record.GARAGEMQ_PORT),
    GARAGEMQ,
)
s_php_killed = _register(
    "091-php-killed",
    "php-amqplib against RabbitMQ: basic.qos prefetch 2, publish 5 messages, consume; the 2 the"
    " prefetch lets through are never acked, and the PHP process SIGKILLs itself 1 s later"
    " (no channel.close, no connection.close: the kernel ends the TCP connection).",
    "A crashed PHP worker holding its prefetch.",
    php,
    ("killed", record.BROKER_PORT),
    RABBITMQ,
)
s_pyamqp_heartbeats = _register(
    "091-pyamqp-heartbeats",
    "py-amqp against RabbitMQ:" + HEARTBEATS,
    "py-amqp's heartbeats: about one per interval, where RabbitMQ sends two.",
    pyamqp,
    ("heartbeats", record.BROKER_PORT),
    RABBITMQ,
)
s_pyamqp_heartbeats_gmq = _register(
    "091-pyamqp-heartbeats-gmq",
    "py-amqp against garagemq:" + HEARTBEATS,
    "As 091-pyamqp-heartbeats, on garagemq (one heartbeat per interval each way).",
    pyamqp,
    ("heartbeats", record.GARAGEMQ_PORT),
    GARAGEMQ,
)
s_pyamqp_heartbeat_silent = _register(
    "091-pyamqp-heartbeat-silent",
    "py-amqp against RabbitMQ: heartbeat 2 s negotiated, then 8 s with no drain_events and no"
    " heartbeat_tick (a worker busy in a long task): py-amqp sends nothing, RabbitMQ drops the"
    " connection for missed heartbeats; the client's close then fails.",
    "The classic celery/kombu trouble: heartbeats only sent when the application ticks.",
    pyamqp,
    ("heartbeat-silent", record.BROKER_PORT),
    {"timeout": 90.0},
)
s_pyamqp_missing_exchange_gmq = _register(
    "091-pyamqp-missing-exchange-gmq",
    "py-amqp against garagemq, confirms on: a publish to an exchange that does not exist;"
    " garagemq closes channel 1 with 404 and then the connection with 501 for the publish's"
    " content header, in flight (garagemq's error); py-amqp answers the channel's close and"
    " starts opening it again before the connection's close reaches it.",
    "As 091-pyamqp-missing-exchange, on garagemq, which mishandles the frames in flight.",
    pyamqp,
    ("missing-exchange", record.GARAGEMQ_PORT),
    GARAGEMQ,
)
s_aiormq_happy = _register(
    "091-aiormq-happy",
    "aiormq against RabbitMQ:" + AIORMQ_HAPPY,
    "The asyncio client under aio-pika: confirms on by default, its own consumer tags.",
    aiormq,
    ("happy", record.BROKER_PORT),
    RABBITMQ,
)
s_aiormq_happy_gmq = _register(
    "091-aiormq-happy-gmq",
    "aiormq against garagemq:" + AIORMQ_HAPPY,
    "As 091-aiormq-happy, on garagemq (which proposed heartbeat 10).",
    aiormq,
    ("happy", record.GARAGEMQ_PORT),
    GARAGEMQ,
)
s_aiormq_no_close = _register(
    "091-aiormq-no-close",
    "aiormq against RabbitMQ: a queue declared, one publish confirmed, and the program exits"
    " (os._exit) closing nothing: no channel.close, no connection.close; the kernel ends the"
    " TCP connection.",
    "A client that exits without closing.",
    aiormq,
    ("no-close", record.BROKER_PORT),
    RABBITMQ,
)
s_aiormq_idle_gmq = _register(
    "091-aiormq-idle-gmq",
    "aiormq against garagemq: garagemq's connection.tune proposes heartbeat 10 s, aiormq (asked"
    " for 90 s) says 90 s in its tune-ok; the connection idles. garagemq ends it after 30 s of"
    " the client's silence (three of its own 10 s), before aiormq's first heartbeat (45 s);"
    " aiormq then sends connection.close into the closed connection (500 'reader unexpected"
    " closed' when its reader saw the end first, else 200: not the same from run to run).",
    "A client heartbeat above the broker's proposal, and a broker holding to its own.",
    aiormq,
    ("idle", record.GARAGEMQ_PORT),
    {"timeout": 90.0, **GARAGEMQ},
)
