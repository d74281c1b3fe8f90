"""What startup no longer does: 0-9-1 argument decoders are generated when a method is first seen,
and `decimal` is imported when a decimal value is. Each must still give what doing it at once gave.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pika.spec

from amqpscope.codec.amqp091 import arguments, spec
from amqpscope.codec.amqp091.decoder import TABLES_091

ROOT = Path(__file__).resolve().parent.parent


def test_method_decoders_are_generated_on_first_use_and_decode_as_before() -> None:
    methods = arguments.compile_methods(spec.METHODS)
    assert methods.compiled == {}  # nothing generated yet
    ids = (60, 40)  # basic.publish
    assert ids in methods and (1, 1) not in methods and methods.get((1, 1)) is None
    first = methods.get(ids)
    assert first is not None and list(methods.compiled) == [ids]
    assert methods[ids] is first  # generated once
    # the generated decoder is the one generating it at once gives, and it decodes pika's bytes
    assert first.source == arguments.generate(spec.METHODS[ids].arguments)[1]
    frame = pika.spec.Basic.Publish(exchange="ex", routing_key="rk", mandatory=True).encode()
    raw = b"".join(frame)
    fields, problems = first.decode(raw, 0, len(raw))
    assert problems == []
    assert fields == {
        "ticket": 0,
        "exchange": "ex",
        "routing-key": "rk",
        "mandatory": True,
        "immediate": False,
    }


def test_every_method_decoder_generates_on_demand() -> None:
    methods = arguments.compile_methods(spec.METHODS)
    for ids, method in spec.METHODS.items():
        compiled = methods[ids]
        assert compiled.name == method.name
        assert compiled.source == arguments.generate(method.arguments)[1]
    assert len(methods.compiled) == len(spec.METHODS)


def test_the_shared_table_is_lazy_too() -> None:
    assert isinstance(TABLES_091.arguments, arguments.CompiledMethods)


def test_a_summary_run_imports_no_decimal_until_a_decimal_is_decoded() -> None:
    code = (
        "import sys\n"
        "from amqpscope.cli import main\n"
        "try:\n"
        "    main(['summary', '--json', sys.argv[1]])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('decimal' in sys.modules, file=sys.stderr)\n"
        "from amqpscope.codec.amqp091.fieldtable import decimal\n"
        "from amqpscope.codec.amqp10.jsonmap import decimal as decimal10\n"
        "print(decimal(2, 314), decimal10(0x3200000F, 32), file=sys.stderr)\n"
    )
    capture = str(ROOT / "captures" / "10-send-receive.pcap")
    result = subprocess.run(
        [sys.executable, "-c", code, capture], capture_output=True, text=True, check=True
    )
    assert '"connections"' in result.stdout
    assert result.stderr.split() == ["False", "3.14", "1.5"]
