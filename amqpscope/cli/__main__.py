"""`python -m amqpscope.cli`: the same name, help and completion as the console script."""

from amqpscope.cli import main

main(prog_name="amqpscope")
