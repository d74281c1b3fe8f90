"""`metrics` and `live --metrics` bound their label sets with the same two options, declared once
(cli/common.metrics_options): the same names, types, default and help text on both commands,
and the default the sampler keeps (review finding: the two declarations had drifted apart in
their help)."""

from __future__ import annotations

import click

from amqpscope.cli import main
from amqpscope.metrics.sampler import MAX_NAMES

OPTIONS = ("--metrics-max-names", "--metrics-labels")


def declared(command: str) -> list[dict[str, object]]:
    """What each of OPTIONS is on `command`, as click will parse and document it."""
    ctx = click.Context(main)
    cmd = main.get_command(ctx, command)  # loads the command's module (common.Program)
    assert cmd is not None
    found = []
    for param in cmd.params:
        if isinstance(param, click.Option) and set(param.opts) & set(OPTIONS):
            info = param.to_info_dict()
            info["help_record"] = param.get_help_record(ctx)
            found.append(info)
    return found


def test_live_and_metrics_declare_the_same_options() -> None:
    live, metrics = declared("live"), declared("metrics")
    assert [info["opts"] for info in metrics] == [[name] for name in OPTIONS]
    assert live == metrics


def test_the_default_is_the_sampler_s() -> None:
    (max_names,) = [i for i in declared("metrics") if i["opts"] == ["--metrics-max-names"]]
    assert max_names["default"] == MAX_NAMES
