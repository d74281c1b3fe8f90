"""Several capture files read as one: the pieces of a rotated capture.

Recorded captures cut into pieces by Wireshark's own `editcap -c` (the oracle for where the
pieces begin and end), named the way `tcpdump -C` names its files (`cap.pcap`, `cap.pcap1`,
... `cap.pcap10`, which a shell's glob sorts wrongly) and given in a shuffled order: read
together they must give exactly what the whole capture gives (`read --json`, `summary --json`,
`diagnose --json`, and the packets `-w` cuts), while each piece read alone does not (its
connections are cut at the piece's edges).
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from amqpscope import schema
from amqpscope.cli import main

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "captures"
EDITCAP = shutil.which("editcap")

pytestmark = pytest.mark.skipif(
    EDITCAP is None, reason="editcap (Debian's wireshark-common, which make test installs)"
)


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=check,
    )


def read_json(path: Path) -> str:
    """`read --json` of `path`, in this process."""
    result = CliRunner().invoke(main, ["read", "--json", str(path)])
    assert result.exit_code == 0, (result.stderr, result.exception)
    return result.stdout


def pieces(source: Path, where: Path, per: int, fmt: str = "pcap") -> list[Path]:
    """`source` cut by editcap into files of `per` packets, renamed as tcpdump -C names them."""
    where.mkdir()
    assert EDITCAP is not None
    subprocess.run(
        [EDITCAP, "-F", fmt, "-c", str(per), str(source), str(where / "piece")],
        check=True,
        capture_output=True,
    )
    made = sorted(where.iterdir())  # editcap numbers them in order: piece_00000_..., ...
    named = []
    for n, path in enumerate(made):
        name = where / ("cap.pcap" + (str(n) if n else ""))
        path.rename(name)
        named.append(name)
    return named


@pytest.mark.parametrize(
    "capture", ["091-publish-consume.pcap", "10-credit-starved.pcap"], ids=lambda n: n
)
def test_the_pieces_read_together_are_the_whole(capture: str, tmp_path: Path) -> None:
    source = CAPTURES / capture
    files = pieces(source, tmp_path / "cut", 4)
    assert len(files) > 10  # names where the shell's order is wrong: cap.pcap10 before cap.pcap2
    shuffled = [str(p) for p in files]
    random.Random(7).shuffle(shuffled)
    for command in (["read", "--json"], ["summary", "--json"], ["diagnose", "--json"]):
        whole = run(*command, str(source))
        together = run(*command, *shuffled)
        assert together.stdout == whole.stdout, command
        assert together.stderr == whole.stderr, command
    # read alone, the pieces are not the whole: their connections are cut at the edges (each
    # piece read in this process: a subprocess apiece proved nothing more)
    alone = "".join(read_json(p) for p in files)
    assert alone != run("read", "--json", str(source)).stdout


def test_the_cut_of_the_pieces_is_the_cut_of_the_whole(tmp_path: Path) -> None:
    source = CAPTURES / "091-publish-consume.pcap"
    files = [str(p) for p in pieces(source, tmp_path / "cut", 7)]
    select = ["--conn", "1", "-Y", 'name == "basic.ack"']
    run("read", str(source), *select, "-w", str(tmp_path / "whole.pcap"))
    run("read", *files, *select, "-w", str(tmp_path / "pieces.pcap"))
    assert (tmp_path / "pieces.pcap").read_bytes() == (tmp_path / "whole.pcap").read_bytes()


def test_pieces_of_mixed_formats_and_gzip(tmp_path: Path) -> None:
    """pcap, pcapng and gzip'd pieces in one set: the frames are the whole's, and the cut is
    pcapng (one pcap header cannot hold every piece's interfaces)."""
    source = CAPTURES / "091-publish-consume.pcap"
    ng = pieces(source, tmp_path / "ng", 30, "pcapng")
    plain = pieces(source, tmp_path / "plain", 30)
    assert len(ng) == len(plain) == 4
    gz = tmp_path / "plain" / "cap.pcap3.gz"
    subprocess.run(["gzip", "-k", str(plain[3])], check=True)
    mixed = [str(ng[0]), str(plain[1]), str(ng[2]), str(gz)]
    assert run("read", "--json", *mixed).stdout == run("read", "--json", str(source)).stdout
    cut = tmp_path / "cut.out"
    run("read", *mixed, "-Y", 'name == "basic.deliver"', "-w", str(cut))
    assert cut.read_bytes()[:4] == b"\x0a\x0d\x0d\x0a"  # a pcapng section header
    reference = tmp_path / "reference.pcap"
    run("read", str(source), "-Y", 'name == "basic.deliver"', "-w", str(reference))
    assert run("read", "--json", str(cut)).stdout == run("read", "--json", str(reference)).stdout

    out = tmp_path / "export.json"
    run("export", *mixed, "-o", str(out))
    document = json.loads(out.read_text())
    errors = list(schema.validator("export").iter_errors(document))
    assert not errors, errors[0].message
    listed = [
        (Path(f["file"]).name, f["format"], f["compressed"]) for f in document["capture"]["files"]
    ]
    assert listed == [
        ("cap.pcap", "pcapng", False),
        ("cap.pcap1", "pcap", False),
        ("cap.pcap2", "pcapng", False),
        ("cap.pcap3.gz", "pcap", True),
    ]


def test_files_that_overlap_in_time_are_joined_with_a_warning(tmp_path: Path) -> None:
    """Not pieces of one capture: the whole and one of its own pieces."""
    source = CAPTURES / "091-publish-consume.pcap"
    files = pieces(source, tmp_path / "cut", 30)
    # forced: by themselves they are told apart as vantage points and merged (test_merge.py)
    result = run("read", "--json", "--inputs", "rotated", str(source), str(files[1]))
    assert result.returncode == 0
    (line,) = [x for x in result.stderr.splitlines() if "capture.files-overlap" in x]
    assert "cap.pcap1 begins (packet 92) before 091-publish-consume.pcap ends" in line
    # the whole comes first (its first packet is the earlier), its frames unchanged
    whole = run("read", "--json", str(source)).stdout.splitlines()
    assert result.stdout.splitlines()[: len(whole) - 1] == whole[:-1]


@pytest.mark.parametrize(
    ("extra", "code", "says"),
    [
        (["-"], 2, "standard input (-) is read alone"),
        (["README.md"], 1, "README.md: text, not a capture file"),
        (["captures/091-get.pcap"], 2, "captures/091-get.pcap: given twice"),
        (["no-such.pcap"], 1, "no-such.pcap: no such file"),
        (["captures/091-rpc.pcap", "--format", "proton"], 2, "a frame-trace log is read alone"),
    ],
    ids=["stdin", "a-log", "twice", "missing", "format"],
)
def test_what_cannot_be_read_together_is_one_line(extra: list[str], code: int, says: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", "summary", "captures/091-get.pcap", *extra],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == code, result.stderr
    (line,) = result.stderr.splitlines()
    assert says in line and line.startswith("amqpscope: ")
