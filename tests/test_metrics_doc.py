"""The metric families' documentation and names: docs/metrics.md is what tools/metrics_doc.py
makes of the one table (so the list cannot drift), and each family said to share a meaning with
a RabbitMQ Prometheus plugin family is named as the plugin names it — read from the plugin that
Debian's rabbitmq-server ships (its compiled module's literals), not from a list typed here."""

from __future__ import annotations

import glob
import re
import shutil
import subprocess
import sys
from pathlib import Path

from amqpscope.metrics.families import FAMILIES, PREFIX

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = "/usr/lib/rabbitmq/lib/rabbitmq_server-*/plugins/rabbitmq_prometheus-*/ebin/"
COLLECTOR = "prometheus_rabbitmq_core_metrics_collector.beam"


def test_docs_are_the_table() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "metrics_doc.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    text = (ROOT / "docs" / "metrics.md").read_text()
    for family in FAMILIES:  # and every family is in it (not only the same text)
        suffix = "_total" if family.kind == "counter" else ""
        assert f"`{family.exported}{suffix}`" in text


def plugin_names(out: Path) -> set[str]:
    """The metric names in RabbitMQ's Prometheus collector module (its literal table)."""
    beams = glob.glob(PLUGIN + COLLECTOR)
    erl = shutil.which("erl")
    assert beams and erl, "RabbitMQ's rabbitmq_prometheus plugin and erl (make test installs them)"
    # the literal table: a count, then each literal as a size and its external term format
    script = (
        f'{{ok,{{_,[{{_,<<_:32,Z/binary>>}}]}}}}=beam_lib:chunks("{beams[0]}",["LitT"]),'
        "<<N:32,Rest/binary>>=zlib:uncompress(Z),"
        "Terms=(fun Loop(0,_,Acc)->Acc;"
        " Loop(K,<<S:32,T:S/binary,R/binary>>,Acc)->Loop(K-1,R,[binary_to_term(T)|Acc]) end)"
        "(N,Rest,[]),"
        f'ok=file:write_file("{out}",io_lib:format("~p~n",[Terms])), halt().'
    )
    done = subprocess.run(
        [erl, "-noshell", "-eval", script], capture_output=True, timeout=60, cwd=out.parent
    )
    assert done.returncode == 0, done.stderr
    return set(re.findall(r"[a-z][a-z0-9_]+", out.read_text()))


def test_rabbitmq_names_are_the_plugins(tmp_path: Path) -> None:
    names = plugin_names(tmp_path / "literals")
    shared = [f for f in FAMILIES if f.rabbitmq]
    assert len(shared) >= 10
    for family in shared:
        assert family.rabbitmq is not None
        plain = family.rabbitmq.removeprefix("rabbitmq_")
        assert plain in names, family.rabbitmq
        # the name is the plugin's, with amqpscope_ for rabbitmq_
        exported = family.exported + ("_total" if family.kind == "counter" else "")
        assert exported == PREFIX + plain, family.name
