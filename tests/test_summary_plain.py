"""The summary written without rich (`render/summary.summary_text`, `render/plain.py`) is what
rich prints, byte for byte: rich itself is the oracle. On every bundled and every damaged
capture, at widths from a pipe's to a narrow terminal's, and on documents with the text that
rich lays out otherwise (long, wide, combining, trailing spaces), `summary_text` gives rich's
output of `print_summary` on an uncoloured console, or None (rich then prints).
"""

from __future__ import annotations

import copy
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rich.console import Console

from amqpscope.cli import PIPED_WIDTH, main
from amqpscope.render import plain
from amqpscope.render.summary import print_summary, summary_text

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = sorted(str(p) for p in (ROOT / "captures").glob("*.pcap*"))
WIDTHS = (PIPED_WIDTH, 200, 130, 100, 80)


def document(path: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["summary", "--json", path])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def rich_text(doc: dict[str, Any], width: int, encoding: str = "utf-8") -> str:
    """What `amqpscope summary` prints through rich to a pipe of `width` columns."""
    out = io.TextIOWrapper(io.BytesIO(), encoding=encoding, errors="replace")
    console = Console(
        file=out,
        width=width,
        color_system=None,
        no_color=True,
        highlight=False,
        emoji=False,
        markup=False,
        force_terminal=False,
    )
    print_summary(doc, console)
    out.flush()
    return out.buffer.getvalue().decode(encoding)  # type: ignore[attr-defined]


def same(doc: dict[str, Any], width: int) -> bool:
    """Assert `summary_text` is rich's text or None; True when it wrote the text itself."""
    text = summary_text(doc, width, "utf-8")
    if text is None:
        return False
    assert text == rich_text(doc, width)
    return True


@pytest.mark.parametrize("path", CAPTURES, ids=[Path(p).name for p in CAPTURES])
def test_every_capture_as_rich_prints_it(path: str) -> None:
    doc = document(path)
    written = [same(doc, width) for width in WIDTHS]
    if Path(path).name in ("10-send-receive.pcap", "091-publish-consume.pcap"):
        assert written[0], "a plain capture piped is written without rich"


def test_most_captures_piped_need_no_rich() -> None:
    piped = [summary_text(document(path), PIPED_WIDTH, "utf-8") is not None for path in CAPTURES]
    assert sum(piped) >= len(CAPTURES) * 3 // 4


def test_every_damaged_capture_as_rich_prints_it(tmp_path: Path) -> None:
    from tests.test_damaged import damage  # tools/damage.py, loaded there

    for case in damage.build(tmp_path):
        doc = document(str(tmp_path / case.file))
        for width in (PIPED_WIDTH, 100):
            same(doc, width)


def _strings(node: Any) -> list[tuple[Any, Any]]:
    """(container, key) of every string in the document, to replace one at a time."""
    found = []
    items = node.items() if isinstance(node, dict) else enumerate(node)
    for key, value in items:
        if isinstance(value, str):
            found.append((node, key))
        elif isinstance(value, (dict, list)) and key != "series":
            found.extend(_strings(value))
    return found


#: text rich lays out otherwise than as it is: too long for a column, wide (two cells),
#: combining, zero-width, with spaces to wrap at or to strip
AWKWARD = [
    "x" * 60,
    "queue with spaces " * 4,
    "队列名称",
    "e\u0301",
    "a\u200bb",
    "trailing   ",
    "   leading",
    "→·█",
    "",
]


@pytest.mark.parametrize(
    "name", ["10-send-receive.pcap", "091-rpc.pcap", "091-channels.pcap", "10-drain.pcap"]
)
def test_awkward_text_anywhere_is_rich_text_or_left_to_rich(name: str) -> None:
    doc = document(str(ROOT / "captures" / name))
    for i, (node, key) in enumerate(_strings(doc)):
        for text in AWKWARD[i % 3 :: 3]:  # a third of them at each place: the test stays quick
            changed = copy.deepcopy(doc)
            target = changed
            for part in _path_to(doc, node):
                target = target[part]
            target[key] = text
            for width in (PIPED_WIDTH, 90):
                same(changed, width)


def _path_to(root: Any, node: Any) -> list[Any]:
    """The keys from `root` down to the container `node` (found by identity)."""
    if root is node:
        return []
    items = root.items() if isinstance(root, dict) else enumerate(root)
    for key, value in items:
        if isinstance(value, (dict, list)):
            rest = _path_to(value, node)
            if rest is not None:
                return [key, *rest]
    return None  # type: ignore[return-value]


def test_narrow_is_one_cell_a_character() -> None:
    from rich.cells import cell_len

    for text in [*AWKWARD, "plain text", "tab\there", "\x1b[31m", "c1  a → b · c"]:
        if plain.narrow(text):
            assert cell_len(text) == len(text) and text.isprintable()


def test_an_ascii_console_is_left_to_rich() -> None:
    doc = document(str(ROOT / "captures" / "10-send-receive.pcap"))
    assert summary_text(doc, PIPED_WIDTH, "ascii") is None
    assert summary_text(doc, PIPED_WIDTH, "utf-8") is not None


def test_a_piped_summary_imports_no_rich() -> None:
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from amqpscope.cli import main\n"
        "result = CliRunner().invoke(main, ['summary', sys.argv[1]])\n"
        "print(result.exit_code, 'rich.console' in sys.modules, file=sys.stderr)\n"
        "sys.stdout.write(result.stdout)\n"
    )
    capture = str(ROOT / "captures" / "10-send-receive.pcap")
    result = subprocess.run(
        [sys.executable, "-c", code, capture], capture_output=True, text=True, check=True
    )
    assert result.stderr.split() == ["0", "False"]
    assert result.stdout == rich_text(document(capture), PIPED_WIDTH)


TABLES = [
    # (columns, rows): trailing and leading spaces, a min width, text at its column's max width
    (
        [plain.Column("n", "right", 5, None), plain.Column("name", "left", 6, 8)],
        [["ab   ", "c  "], ["  d", "12345678"], ["", ""]],
    ),
    ([plain.Column("only", "left", 0, None)], [["x"], ["→·▁█"]]),
    (
        [plain.Column("a b", "right", 0, None), plain.Column("c", "left", 16, None)],
        [["1", "▁▂▃"], ["22", ""]],
    ),
]


@pytest.mark.parametrize("pad_edge", [False, True])
@pytest.mark.parametrize("columns, rows", TABLES)
def test_tables_as_rich_lays_them_out(
    columns: list[plain.Column], rows: list[list[str]], pad_edge: bool
) -> None:
    from rich.table import Table

    for title in ("t", "a long title for a small table"):
        for width in (100, 20, 12):
            table = Table(title=title, title_justify="left", show_edge=False, pad_edge=pad_edge)
            for c in columns:
                table.add_column(
                    c.header,
                    justify=c.justify,  # type: ignore[arg-type]
                    min_width=c.min_width or None,
                    max_width=c.max_width,
                    overflow="ellipsis",
                    no_wrap=True,
                )
            for row in rows:
                table.add_row(*row)
            out = io.StringIO()
            Console(file=out, width=width, color_system=None, markup=False).print(table)
            lines = plain.table(title, columns, rows, width, pad_edge)
            if lines is not None:
                assert "".join(f"{line}\n" for line in lines) == out.getvalue()
            elif width == 100 and len(title) == 1:
                pytest.fail("a table that fits is written")


def test_a_cell_wider_than_its_column_may_be_is_left_to_rich() -> None:
    columns = [plain.Column("name", "left", 6, 8)]
    assert plain.table("t", columns, [["12345678"]], 100, False) is not None
    assert plain.table("t", columns, [["123456789"]], 100, False) is None
