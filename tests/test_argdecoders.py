"""The written-out 0-9-1 argument decoders (argdecoders.py, which the compiled build compiles) are
the generated ones: the file is what the generator writes today, and every decoder in it decodes
what the generated decoder of its argument list decodes, damage included."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pika.spec

from amqpscope.codec.amqp091 import argdecoders, arguments, spec, spec08

MODULE = Path(arguments.__file__).with_name("argdecoders.py")


def test_the_written_out_decoders_are_current() -> None:
    assert MODULE.read_text() == arguments.module_source(), (
        "regenerate: python3 -c 'from amqpscope.codec.amqp091 import arguments;"
        " arguments.write_module()'"
    )


def test_every_argument_list_of_both_tables_has_its_decoder() -> None:
    lists = {m.arguments for table in (spec.METHODS, spec08.METHODS) for m in table.values()}
    assert set(argdecoders.DECODERS) == lists


def _outcome(decode: Any, buf: bytes, limit: int) -> tuple:
    problems: list = []
    try:
        return ("ok", decode(buf, 0, limit, problems), problems)
    except arguments.Truncated as exc:
        return ("truncated", exc.args, problems)


def test_each_decodes_as_the_generated_one_on_good_cut_and_random_bytes() -> None:
    rng = random.Random(91)
    pika_frames = [
        pika.spec.Basic.Publish(exchange="ex", routing_key="rk", mandatory=True),
        pika.spec.Basic.Deliver("ctag", 7, True, "ex", "rk"),
        pika.spec.Basic.Ack(12, True),
        pika.spec.Connection.StartOk({"product": "p", "n": 3}, "PLAIN", "\0u\0p", "en_US"),
        pika.spec.Queue.Declare(queue="q", arguments={"x-max-length": 10}),
    ]
    samples = [b"".join(m.encode()) for m in pika_frames]
    samples += [bytes(rng.randrange(256) for _ in range(n)) for n in range(0, 64, 3)]
    samples += [bytes([0, 0, 0, 5, 1, 97, 83, 0, 0, 0, 9, 1, 2, 3]) * 3]
    compared = 0
    for args, written in argdecoders.DECODERS.items():
        generated, _ = arguments.generate(args)
        for sample in samples:
            for cut in range(len(sample) + 1):
                buf = sample[:cut] + b"\xce"  # the frame-end after the arguments
                assert _outcome(written, buf, cut) == _outcome(generated, buf, cut), (args, buf)
                compared += 1
    assert compared > 10_000
