"""amqpscope: a protocol analyzer for AMQP 1.0 and 0-9-1 captures."""

__version__ = "0.1.0"
