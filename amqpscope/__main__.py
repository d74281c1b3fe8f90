"""`python -m amqpscope`: the console script, for where no script is on PATH (a venv not
activated, `pip install --user` without ~/.local/bin)."""

from amqpscope.cli import main

main(prog_name="amqpscope")
