"""Recordings of the AMQP 0-9-1 clients of Node.js and Go, against RabbitMQ and garagemq: node's
amqplib (npm, the client the project's charter names) and Go's official client, amqp091-go, with
its predecessor streadway/amqp (Debian's golang-github-* packages).

An answer must hold on every client, and these behave unlike pika where it matters:

- amqplib takes the heartbeat the broker proposes (60 from RabbitMQ, 10 from garagemq), and so
  does amqp091-go dialled with a Config that sets no Heartbeat (its Dial says 10 s);
- amqplib's `ackAll` is basic.ack with delivery-tag 0 and multiple set: every outstanding
  delivery, whatever its tag;
- amqplib's ConfirmChannel sends the publishes and then waits for the confirms; amqp091-go's
  NotifyPublish is read after all four publishes;
- amqp091-go makes its consumer tags itself (`ctag-<program>-<n>`), where RabbitMQ and garagemq
  would make theirs;
- amqp091-go advertises consumer_cancel_notify: RabbitMQ cancels its consumer with basic.cancel
  when the queue is deleted. garagemq (Debian's, 0.1) sends no basic.cancel, and a queue deleted
  while a consumer holds it leaves garagemq's vhost locked: every later queue.declare, from any
  connection, waits forever until garagemq is restarted. Never run MODE cancel against it;
- garagemq accepts a queue re-declared with other arguments (no 406; amqplib then waits for a
  close that never comes): amqplib's re-declare is recorded against RabbitMQ only.

The -gmq recordings here were made on a private garagemq (AMQPSCOPE_GARAGEMQ_PORT=5684,
AMQPSCOPE_GARAGEMQ_HOME of its own): the shared one on 5674 was locked by a trial of MODE cancel.

Each client runs in a child process and prints what the library observed as one JSON line: that
is the ground truth, never the capture. `amqplib_client.js` runs under node with amqplib
installed from npm into a temporary folder (`npm_modules`); `go_client.go` is built before the
capture into a temporary folder by Debian's go with GO111MODULE=off GOPATH=/usr/share/gocode
(where the -dev packages put their sources: no module download).

Needs: node and npm (amqplib from npm); golang-go, golang-github-rabbitmq-amqp091-go-dev and
golang-github-streadway-amqp-dev (apt-get install); garagemq for the -gmq recordings.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import recorder as record  # captures/recorder/: the harness and shared helpers

from scenarios.clients091 import GARAGEMQ, versions

HERE = Path(__file__).resolve().parent
AMQPLIB = "amqplib@2.3.1"
NODE_DIR = "amqpscope-amqplib"
GO_SOURCE = HERE / "go_client.go"
#: import path -> the Debian package that puts it under /usr/share/gocode
GO_LIBRARIES = {
    "github.com/rabbitmq/amqp091-go": "golang-github-rabbitmq-amqp091-go-dev",
    "github.com/streadway/amqp": "golang-github-streadway-amqp-dev",
}


def child(command: list[str], cwd: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run one client to its end; its last stdout line, parsed."""
    done = subprocess.run(
        command,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=40,
        check=False,
        cwd=cwd,
        env=env,
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(
            f"{command[0]} exited with {done.returncode}: {done.stderr.strip()[-400:]}"
        )
    counts: dict[str, Any] = json.loads(lines[-1])
    return counts


def amqplib(ctx: record.Ctx, mode: str, port: int) -> dict[str, Any]:
    """amqplib (npm, pinned) under node."""
    modules = record.npm_modules(AMQPLIB, NODE_DIR)
    env = dict(os.environ, NODE_PATH=str(modules))
    command = ["node", str(HERE / "amqplib_client.js"), mode, str(port), ctx.q()]
    counts = child(command, "/tmp", env)
    version = json.loads((modules / "amqplib" / "package.json").read_text())["version"]
    node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False)
    counts["client_library"] = {"amqplib": version, "node": node.stdout.strip()}
    return counts


def go_binary(ctx: record.Ctx, library: str) -> None:
    """Build go_client.go against `library` (an import path of GO_LIBRARIES) before the capture
    starts, into a temporary folder kept in ctx.state; RuntimeError saying what is missing."""
    if shutil.which("go") is None:
        raise RuntimeError("go is not on PATH (apt-get install golang-go)")
    folder = Path(tempfile.mkdtemp(prefix="amqpscope-go-"))
    source = GO_SOURCE.read_text().replace('"github.com/rabbitmq/amqp091-go"', f'"{library}"')
    (folder / "main.go").write_text(source)
    env = dict(
        os.environ,
        GO111MODULE="off",
        GOPATH="/usr/share/gocode",
        GOCACHE=str(folder / "cache"),
        GOFLAGS="",
    )
    done = subprocess.run(
        ["go", "build", "-o", "go_client", "main.go"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"go build failed (apt-get install {GO_LIBRARIES[library]}): {done.stderr[-400:]}"
        )
    ctx.state["go"] = str(folder)
    ctx.state["go_library"] = library


def go(ctx: record.Ctx, mode: str, port: int) -> dict[str, Any]:
    """The Go client built by go_binary, run from its folder (its consumer tags name the
    program: ctag-./go_client-N)."""
    folder = ctx.state["go"]
    try:
        counts = child(["./go_client", mode, str(port), ctx.q()], folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    package = GO_LIBRARIES[ctx.state["go_library"]]
    counts["client_library"] = versions(package, "golang-go")
    return counts


def amqp091_go(ctx: record.Ctx) -> None:
    """prepare: the program built against amqp091-go."""
    go_binary(ctx, "github.com/rabbitmq/amqp091-go")


def amqp091_go_gmq(ctx: record.Ctx) -> None:
    """prepare: garagemq up and the queue of a failed run gone, the program built."""
    GARAGEMQ["prepare"](ctx)
    amqp091_go(ctx)


def streadway(ctx: record.Ctx) -> None:
    """prepare: the program built against streadway/amqp."""
    go_binary(ctx, "github.com/streadway/amqp")


#: garagemq's recording spec with the Go program built in its prepare
GO_GARAGEMQ = dict(GARAGEMQ, prepare=amqp091_go_gmq)

AMQPLIB_HAPPY = (
    " the broker's heartbeat taken; a ConfirmChannel (confirm.select), prefetch 4, a queue"
    " declared, 4 publishes and waitForConfirms; consumed with manual acks: tag 1 alone, tag 3"
    " with allUpTo (2-3), then ackAll (basic.ack delivery-tag 0 multiple: tag 4); cancel, delete"
    " the queue, close the channel and the connection."
)


@record.scenario(
    "091-amqplib-happy", "0-9-1", f"amqplib ({AMQPLIB}) against RabbitMQ:" + AMQPLIB_HAPPY
)
def s_amqplib_happy(ctx: record.Ctx) -> dict[str, Any]:
    """node's client: confirms waited for after the publishes, ackAll as delivery-tag 0."""
    return amqplib(ctx, "happy", record.BROKER_PORT)


@record.scenario(
    "091-amqplib-happy-gmq",
    "0-9-1",
    f"amqplib ({AMQPLIB}) against garagemq:" + AMQPLIB_HAPPY,
    **GARAGEMQ,
)
def s_amqplib_happy_gmq(ctx: record.Ctx) -> dict[str, Any]:
    """As 091-amqplib-happy, on garagemq (its own consumer tags, heartbeat 10)."""
    return amqplib(ctx, "happy", record.GARAGEMQ_PORT)


@record.scenario(
    "091-amqplib-redeclare",
    "0-9-1",
    f"amqplib ({AMQPLIB}) against RabbitMQ: a queue declared with x-max-length 10, then declared"
    " again with x-max-length 20; RabbitMQ closes channel 1 with 406 PRECONDITION_FAILED"
    " (inequivalent arg), amqplib answers close-ok and rejects the declare; a new channel 1"
    " deletes the queue; the connection is closed.",
)
def s_amqplib_redeclare(ctx: record.Ctx) -> dict[str, Any]:
    """Two parts of an application disagreeing on a queue's arguments."""
    return amqplib(ctx, "redeclare", record.BROKER_PORT)


GO_HAPPY = (
    " the broker's heartbeat kept; Confirm mode (confirm.select) with NotifyPublish, Qos"
    " prefetch 4, a queue declared, 4 publishes and their 4 confirmations read; Consume with a"
    " consumer tag the client made and manual acks: tag 1 alone, tag 4 with multiple (2-4);"
    " Cancel, delete the queue, close the channel and the connection."
)


@record.scenario(
    "091-go-happy", "0-9-1", "amqp091-go against RabbitMQ:" + GO_HAPPY, prepare=amqp091_go
)
def s_go_happy(ctx: record.Ctx) -> dict[str, Any]:
    """Go's official client."""
    return go(ctx, "happy", record.BROKER_PORT)


@record.scenario(
    "091-go-happy-gmq", "0-9-1", "amqp091-go against garagemq:" + GO_HAPPY, **GO_GARAGEMQ
)
def s_go_happy_gmq(ctx: record.Ctx) -> dict[str, Any]:
    """As 091-go-happy, on garagemq (heartbeat 10, frame-max 65536)."""
    return go(ctx, "happy", record.GARAGEMQ_PORT)


@record.scenario(
    "091-streadway-happy",
    "0-9-1",
    "streadway/amqp (amqp091-go's predecessor, the same program) against RabbitMQ:" + GO_HAPPY,
    prepare=streadway,
)
def s_streadway_happy(ctx: record.Ctx) -> dict[str, Any]:
    """The Go client most older programs still run."""
    return go(ctx, "happy", record.BROKER_PORT)


GO_RETURN = (
    " Confirm mode with NotifyPublish and NotifyReturn; one publish, mandatory, to the default"
    " exchange with a routing key no queue has: the broker sends basic.return 312 and then"
    " basic.ack for it (returned, yet confirmed); close the channel and the connection."
)


@record.scenario(
    "091-go-return",
    "0-9-1",
    "amqp091-go against RabbitMQ:" + GO_RETURN,
    queues=(),
    prepare=amqp091_go,
)
def s_go_return(ctx: record.Ctx) -> dict[str, Any]:
    """A mandatory publish nobody could take."""
    return go(ctx, "return", record.BROKER_PORT)


@record.scenario(
    "091-go-return-gmq", "0-9-1", "amqp091-go against garagemq:" + GO_RETURN, **GO_GARAGEMQ
)
def s_go_return_gmq(ctx: record.Ctx) -> dict[str, Any]:
    """As 091-go-return, on garagemq (its reply-text 'No route')."""
    return go(ctx, "return", record.GARAGEMQ_PORT)


@record.scenario(
    "091-go-cancel",
    "0-9-1",
    "amqp091-go against RabbitMQ: a queue declared, one message published, consumed under the"
    " client's consumer tag and acked; a second channel deletes the queue: RabbitMQ cancels the"
    " consumer (basic.cancel, the consumer_cancel_notify capability amqp091-go advertises), the"
    " client sees it on NotifyCancel and its delivery channel closing; the channels and the"
    " connection are closed.",
    prepare=amqp091_go,
)
def s_go_cancel(ctx: record.Ctx) -> dict[str, Any]:
    """A consumer whose queue was deleted under it, by its own program."""
    return go(ctx, "cancel", record.BROKER_PORT)


@record.scenario(
    "091-amqplib-nack",
    "0-9-1",
    f"amqplib ({AMQPLIB}) against RabbitMQ: 3 messages consumed with manual acks; tag 1 nacked"
    " with requeue false, then nackAll(false) (basic.nack delivery-tag 0 multiple, requeue false:"
    " tags 2-3); RabbitMQ drops all three (the queue has no dead-letter exchange) and the queue"
    " is empty when deleted; the connection is closed.",
)
def s_amqplib_nack(ctx: record.Ctx) -> dict[str, Any]:
    """A consumer that refuses what it got, amqplib's way."""
    return amqplib(ctx, "nack", record.BROKER_PORT)
