"""amqpscope: a protocol analyzer for AMQP 1.0 and 0-9-1 captures."""

import os

__version__ = "0.1.0"


def build() -> str:
    """Which build runs: "compiled" when the hot path was compiled with mypyc (the default
    install wherever a C compiler was found), else "pure"."""
    from amqpscope.stream import tcp

    return "pure" if tcp.__file__.endswith(".py") else "compiled"


def build_text() -> str:
    """The build, as `--version` says it: "compiled with mypyc", or "pure Python" with why
    when the wheel's build hook (tools/mypyc_hook.py) recorded a reason in `_build.txt`."""
    if build() == "compiled":
        return "compiled with mypyc"
    try:
        with open(os.path.join(os.path.dirname(__file__), "_build.txt"), encoding="utf-8") as f:
            note = f.read().strip()
    except OSError:  # the editable install, or a source tree: no wheel, no note
        return "pure Python"
    return note if note.startswith("pure Python") else "pure Python"
