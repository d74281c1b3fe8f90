"""amqpscope: a protocol analyzer for AMQP 1.0 and 0-9-1 captures."""

__version__ = "0.1.0"


def build() -> str:
    """Which build runs: "compiled" when the hot path was compiled with mypyc (`make compiled`),
    else "pure"."""
    from amqpscope.stream import tcp

    return "pure" if tcp.__file__.endswith(".py") else "compiled"
