"""The command as a user meets it: exit codes, one-line errors, never a traceback."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
SAMPLE = CAPTURES / "091-publish-consume.pcap"


def amqpscope(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        input=stdin.decode() if stdin else None,
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], code: int) -> None:
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 or code == 2, result.stderr  # click's usage errors add a hint line
    assert result.stdout == ""


def test_missing_file_exits_1() -> None:
    result = amqpscope("read", "/nonexistent/capture.pcap")
    assert_one_line_error(result, 1)
    assert "capture.pcap" in result.stderr


def test_not_a_capture_exits_1(tmp_path: Path) -> None:
    bogus = tmp_path / "notes.pcap"
    bogus.write_text("these are not packets\n" * 10)
    assert_one_line_error(amqpscope("read", str(bogus)), 1)


def test_empty_file_exits_1(tmp_path: Path) -> None:
    empty = tmp_path / "empty.pcap"
    empty.write_bytes(b"")
    assert_one_line_error(amqpscope("read", str(empty)), 1)


@pytest.mark.parametrize("command", ["read", "summary", "diagnose", "export", "tui"])
def test_directory_is_unreadable_input_exits_1(tmp_path: Path, command: str) -> None:
    """As a missing file: input that cannot be read (1, one line), not bad usage (2)."""
    result = amqpscope(command, str(tmp_path))
    assert_one_line_error(result, 1)
    assert result.stderr == f"amqpscope: {tmp_path}: is a directory, not a capture or log file\n"


def test_an_output_that_cannot_be_written_is_one_line_not_an_internal_error(
    tmp_path: Path,
) -> None:
    """Its folder missing (export -o as report -o), or the disk full (/dev/full): exit 1 and
    what went wrong, not "internal error ... please report it"."""
    missing = tmp_path / "no-such-folder" / "out.json"
    result = amqpscope("export", str(SAMPLE), "-o", str(missing))
    assert_one_line_error(result, 1)
    assert result.stderr == f"amqpscope: cannot write {missing}: No such file or directory\n"
    if not os.path.exists("/dev/full"):
        return
    for args in (("export", "-o", "/dev/full"), ("read", "-w", "/dev/full")):
        result = amqpscope(*args, str(SAMPLE))
        assert_one_line_error(result, 1)
        assert result.stderr == "amqpscope: cannot write the output: No space left on device\n"
    for command in ("read", "summary", "diagnose"):
        with open("/dev/full", "w") as full:
            run = subprocess.run(
                [sys.executable, "-m", "amqpscope.cli", command, str(SAMPLE)],
                stdout=full,
                stderr=subprocess.PIPE,
                text=True,
                timeout=120,
            )
        assert run.returncode == 1
        assert run.stderr == "amqpscope: cannot write the output: No space left on device\n"


@pytest.mark.parametrize(
    "args", [("read",), ("bogus-command",), ("read", "--no-such-option", "x.pcap"), ()]
)
def test_bad_usage_exits_2(args: tuple[str, ...]) -> None:
    result = amqpscope(*args)
    assert result.returncode == 2, (args, result.returncode, result.stderr)
    assert "Traceback" not in result.stderr


def test_a_capture_given_as_the_command_says_how_to_read_it() -> None:
    """`amqpscope capture.pcap` (tshark -r's habit): still bad usage, with the command to run."""
    result = amqpscope(str(SAMPLE))
    assert result.returncode == 2
    assert f"No such command '{SAMPLE}'. To decode the file: amqpscope read {SAMPLE}" in (
        result.stderr
    )
    assert "To decode" not in amqpscope("bogus-command").stderr


def test_truncated_capture_gives_what_was_complete_and_a_finding(tmp_path: Path) -> None:
    data = SAMPLE.read_bytes()
    whole = amqpscope("read", str(SAMPLE), "--json").stdout.splitlines()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[: len(data) * 2 // 3 + 5])  # ends inside a record
    result = amqpscope("read", str(cut), "--json")
    assert result.returncode == 0, result.stderr
    got = result.stdout.splitlines()
    assert 0 < len(got) < len(whole)
    assert got == whole[: len(got)]  # every complete frame, unchanged
    assert "capture.truncated" in result.stderr
    assert "Traceback" not in result.stderr


def test_gzip_capture_reads_the_same(tmp_path: Path) -> None:
    packed = tmp_path / "sample.pcap.gz"
    packed.write_bytes(gzip.compress(SAMPLE.read_bytes()))
    plain = amqpscope("read", str(SAMPLE), "--json").stdout
    assert plain and amqpscope("read", str(packed), "--json").stdout == plain


def test_json_records_have_the_contract_keys() -> None:
    result = amqpscope("read", str(SAMPLE), "--json")
    assert result.returncode == 0
    records = [json.loads(line) for line in result.stdout.splitlines()]
    keys = {"frame", "packet", "ts", "conn", "src", "dst", "dir", "version", "channel", "kind"}
    keys |= {"name", "fields", "findings"}
    assert records and all(keys <= set(r) for r in records)
    assert [r["frame"] for r in records] == list(range(1, len(records) + 1))
    packets = [r["packet"] for r in records]
    assert packets == sorted(packets)
    assert all(r["dir"] in ("c2s", "s2c") for r in records)


def frame_lines(text: str) -> list[str]:
    """Timeline lines that show a frame (not the legend lines naming connections)."""
    return [line for line in text.splitlines() if line[:7].strip().isdigit()]


def test_text_output_is_one_line_per_frame_with_a_legend_per_connection() -> None:
    text = amqpscope("read", str(SAMPLE)).stdout
    frames = amqpscope("read", str(SAMPLE), "--json").stdout.splitlines()
    assert len(frame_lines(text)) == len(frames) > 0
    assert len(text.splitlines()) == len(frames) + 1  # one connection: one legend line
    assert "basic.publish" in text


def test_output_to_a_closed_pipe_is_quiet() -> None:
    proc = subprocess.Popen(
        f"{sys.executable} -m amqpscope.cli read {SAMPLE} | head -1",
        shell=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = proc.communicate(timeout=120)
    assert len(out.splitlines()) == 1
    assert "Traceback" not in err and "Broken pipe" not in err


@pytest.fixture(scope="module")
def big_capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A capture whose output is far larger than a pipe's buffer (made at run time)."""
    from tests.bigcapture import multiply

    path = tmp_path_factory.mktemp("big") / "big.pcap"
    multiply(CAPTURES / "091-qos-prefetch.pcap", path, 40)
    return path


@pytest.mark.parametrize("args", [("read",), ("read", "--json"), ("export", "--ndjson")])
def test_a_closed_pipe_is_not_a_failure(args: tuple[str, ...], big_capture: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "amqpscope.cli", *args, str(big_capture)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    proc.stdout.readline()
    proc.stdout.close()  # what `| head -1` does
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert b"Traceback" not in err


def test_display_filter_selects_frames() -> None:
    capture = str(CAPTURES / "091-channel-errors.pcap")
    result = amqpscope("read", capture, "--json", "-Y", 'name == "channel.close" and dir == "s2c"')
    records = [json.loads(line) for line in result.stdout.splitlines()]
    expected = json.loads((CAPTURES / "091-channel-errors.json").read_text())
    assert len(records) == len(expected["expect"]["channel_errors"])
    assert {r["name"] for r in records} == {"channel.close"}


def test_bad_display_filter_is_a_usage_error_pointing_at_the_column() -> None:
    result = amqpscope("read", str(SAMPLE), "-Y", 'name == "transfer" and')
    assert_one_line_error(result, 2)
    assert "column 23" in result.stderr


def test_count_conn_and_time_window() -> None:
    capture = str(CAPTURES / "091-rpc.pcap")
    every = [json.loads(line) for line in amqpscope("read", capture, "--json").stdout.splitlines()]
    assert len({r["conn"] for r in every}) == 2
    only2 = amqpscope("read", capture, "--json", "--conn", "2").stdout.splitlines()
    assert only2 and all(json.loads(line)["conn"] == 2 for line in only2)
    assert len(frame_lines(amqpscope("read", capture, "-c", "5").stdout)) == 5
    first = every[0]["ts"]
    late = [r for r in every if r["ts"] - first > 0.01]
    window = amqpscope("read", capture, "--json", "--from", "0.01").stdout.splitlines()
    assert len(window) == len(late)


@pytest.mark.parametrize("command", ["read", "diagnose", "report"])
def test_a_time_window_that_selects_nothing_is_a_usage_error(command: str, tmp_path: Path) -> None:
    """--from after --to (either order given) or not a number: 2 and why, not an empty
    output and 0 (or everything, for nan, which no comparison selects against)."""
    out = ["-o", str(tmp_path / "r.html")] if command == "report" else []
    for window in (["--from", "5", "--to", "1"], ["--to", "1", "--from", "5"]):
        result = amqpscope(command, str(SAMPLE), *out, *window)
        assert_one_line_error(result, 2)
        assert "--from 5 is after --to 1" in result.stderr
    result = amqpscope(command, str(SAMPLE), *out, "--from", "nan")
    assert_one_line_error(result, 2)
    assert "not a number of seconds" in result.stderr
    assert amqpscope(command, str(SAMPLE), *out, "--from", "1", "--to", "1").returncode == 0


def test_piped_output_is_neither_coloured_nor_cut() -> None:
    text = amqpscope("read", str(CAPTURES / "091-channel-errors.pcap")).stdout
    assert "\x1b[" not in text
    assert max(len(line) for line in text.splitlines()) > 100  # not cut to a terminal width
    forced = amqpscope("read", str(SAMPLE), "--color", "always", "--width", "80").stdout
    assert "\x1b[" in forced
    assert all(len(line) <= 80 for line in strip_ansi(forced).splitlines())


def strip_ansi(text: str) -> str:
    import re

    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def test_queue_scope_follows_a_queue_through_publish_deliver_and_ack() -> None:
    capture = str(CAPTURES / "091-ack-nack-reject.pcap")
    meta = json.loads((CAPTURES / "091-ack-nack-reject.json").read_text())["expect"]
    queue = "amqpscope.091-ack-nack-reject.q"
    records = [
        json.loads(line)
        for line in amqpscope("read", capture, "--json", "--queue", queue).stdout.splitlines()
    ]
    names = [r["name"] for r in records]
    assert names.count("basic.publish") == meta["publishes"]
    assert names.count("basic.deliver") == meta["deliveries"]
    assert names.count("basic.ack") == meta["acks"]
    assert names.count("basic.nack") == meta["nacks"] and names.count("basic.reject") == 1
    assert "connection.start" not in names
    assert amqpscope("read", capture, "--json", "--queue", "no-such-queue").stdout == ""


def test_link_scope_follows_a_1_0_link_and_its_dispositions() -> None:
    capture = str(CAPTURES / "10-peer-to-peer.pcap")
    meta = json.loads((CAPTURES / "10-peer-to-peer.json").read_text())["expect"]
    link = "amqpscope-10-peer-to-peer-amqpscope/peer-to-peer"
    records = [
        json.loads(line)
        for line in amqpscope("read", capture, "--json", "--link", link).stdout.splitlines()
    ]
    names = [r["name"] for r in records]
    assert names.count("transfer") == meta["transfers_sent"]
    settled = [r for r in records if r["name"] == "disposition"]
    outcomes = sum(
        r["fields"]["last"] - r["fields"]["first"] + 1 if "last" in r["fields"] else 1
        for r in settled
    )
    assert outcomes == meta["transfers_sent"]
    assert {"open", "begin", "close"}.isdisjoint(names)


# -- terminal manners: help, exit codes, paging, narrow and non-UTF consoles, completion ---------

COMMANDS = ("read", "summary", "diagnose", "export", "schema", "live", "spark", "report", "tui")
COMMANDS += ("follow",)  # issue 44
COMMANDS += ("metrics",)
SGR = re.compile(r"\x1b\[[0-9;]*m")


def test_every_command_has_help_with_examples() -> None:
    top = amqpscope("--help")
    assert top.returncode == 0
    assert "Examples:" in top.stdout and "Exit status: 0" in top.stdout
    for command in COMMANDS:
        assert command in top.stdout
        result = amqpscope(command, "--help")
        assert result.returncode == 0, (command, result.stderr)
        assert "Example" in result.stdout and f"amqpscope {command} " in result.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("read", "--color", "always", "captures/091-channel-errors.pcap"),
        ("summary", "--color", "always", "captures/10-peer-to-peer.pcap"),
    ],
)
def test_coloured_output_pages_in_less_r(args: tuple[str, ...]) -> None:
    """`| less -R` shows SGR colour escapes and passes anything else through raw: so there
    must be nothing but SGR (no cursor movement, no progress bar, no hyperlinks)."""
    result = amqpscope(*args[:-1], str(CAPTURES.parent / args[-1]))
    assert result.returncode == 0 and result.stderr == ""
    assert SGR.search(result.stdout)  # coloured, as asked
    assert "\x1b" not in SGR.sub("", result.stdout)
    assert "\r" not in result.stdout


def test_piped_summary_is_not_cut() -> None:
    result = amqpscope("summary", str(CAPTURES / "10-peer-to-peer.pcap"))
    findings = [line for line in result.stdout.splitlines() if "amqp10.rejected" in line]
    assert len(findings) == 3
    assert all(line.endswith(("rejects p1", "rejects p5", "rejects p9")) for line in findings)


def test_sparklines_give_way_on_a_narrow_terminal() -> None:
    path = str(CAPTURES / "10-peer-to-peer.pcap")
    wide = amqpscope("summary", path, "--width", "200").stdout
    narrow = amqpscope("summary", path, "--width", "80").stdout
    assert "delivery rate" in wide and "credit low" in wide and "unsettled peak" in wide
    assert "█" in wide
    assert "delivery rate" not in narrow and "█" not in narrow
    assert "   10 │   3 │   3 │   2 │   2 │" in narrow  # the numbers all kept
    assert all(len(line) <= 80 for line in narrow.splitlines())


def test_a_console_that_cannot_show_blocks_gets_ascii() -> None:
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    result = subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", "summary", str(CAPTURES / "091-qos-prefetch.pcap")],
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert b"Traceback" not in result.stderr
    text = result.stdout.decode("ascii")  # nothing but ASCII
    row = next(line for line in text.splitlines() if line.startswith(" 1 |"))
    assert "#" in row.split("|")[-3]  # the unacked sparkline reaches the top step


def test_piped_run_writes_nothing_to_stderr(big_capture: Path) -> None:
    """No progress bar when piped, however long the file."""
    selection = 'name == "no.such-method"'
    said = {"summary": "", "read": f"amqpscope: no frame matched -Y '{selection}'\n"}
    for args in (("summary",), ("read", "-Y", selection)):
        result = amqpscope(*args, str(big_capture))
        assert result.returncode == 0
        assert result.stderr == said[args[0]], result.stderr[:200]  # that line alone


# -- shell completion (click's environment protocol) ---------------------------------------------


def complete(shell: str, words: str, cword: int) -> list[str]:
    env = {
        **os.environ,
        "_AMQPSCOPE_COMPLETE": f"{shell}_complete",
        "COMP_WORDS": words,
        "COMP_CWORD": str(cword),
    }
    result = subprocess.run(
        [sys.executable, "-m", "amqpscope.cli"], capture_output=True, text=True, env=env, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_script_is_produced(shell: str) -> None:
    env = {**os.environ, "_AMQPSCOPE_COMPLETE": f"{shell}_source"}
    result = subprocess.run(
        [sys.executable, "-m", "amqpscope.cli"], capture_output=True, text=True, env=env, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "_AMQPSCOPE_COMPLETE" in result.stdout and "amqpscope" in result.stdout
    assert {"bash": "complete -o", "zsh": "compdef", "fish": "complete --no-files"}[shell] in (
        result.stdout
    )


def test_completion_of_commands_options_choices_and_files() -> None:
    assert complete("bash", "amqpscope ", 1) == [f"plain,{c}" for c in sorted(COMMANDS)]
    assert complete("bash", "amqpscope su", 1) == ["plain,summary"]
    options = complete("bash", "amqpscope read --co", 2)
    assert {"plain,--color", "plain,--count", "plain,--conn", "plain,--collapse"} <= set(options)
    assert complete("bash", "amqpscope read x.pcap --color ", 4) == [
        "plain,auto",
        "plain,always",
        "plain,never",
    ]
    assert complete("bash", "amqpscope schema ", 2) == [
        "plain,frame",
        "plain,summary",
        "plain,export",
        "plain,diagnose",
        "plain,export-ndjson",
        "plain,live",
        "plain,follow",
    ]
    for command in ("read", "summary", "export", "diagnose", "report", "follow"):
        assert complete("bash", f"amqpscope {command} capt", 2) == ["file,capt"]
    assert complete("bash", "amqpscope spark capt", 2) == ["file,capt"]
    assert "plain,lo" in complete("bash", "amqpscope live ", 2)  # this machine's interfaces
    zsh = complete("zsh", "amqpscope sum", 1)
    assert zsh[:2] == ["plain", "summary"]


NO_BASH = shutil.which("bash") is None or shutil.which("amqpscope") is None


@pytest.mark.skipif(NO_BASH, reason="needs bash and the amqpscope script (make test installs it)")
def test_completion_works_in_bash() -> None:
    script = (
        'eval "$(_AMQPSCOPE_COMPLETE=bash_source amqpscope)"\n'
        "COMP_WORDS=(amqpscope read x.pcap --color a); COMP_CWORD=4\n"
        "_amqpscope_completion amqpscope\n"
        'echo "${COMPREPLY[@]}"\n'
        "complete -p amqpscope\n"
    )
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "auto always"
    assert "_amqpscope_completion" in lines[1]


#: a child process running the CLI whose tracker raises KeyboardInterrupt at the Nth frame (argv[1])
INTERRUPT_AT = """
import sys
from amqpscope.track import tracker
feed, seen, at = tracker.Tracker.feed, [0], int(sys.argv[1])
def interrupting(self, frame):
    seen[0] += 1
    if seen[0] == at:
        raise KeyboardInterrupt
    feed(self, frame)
tracker.Tracker.feed = interrupting
from amqpscope import cli
sys.argv = ["amqpscope", *sys.argv[2:]]
cli.main()
"""


@pytest.mark.parametrize("select", [[], ["-Y", "name"]])
def test_an_interrupted_read_json_still_writes_every_line_made(select: list[str]) -> None:
    """Ctrl-C in the middle of `read --json > file`: the lines of the frames decoded so far
    are written whole (not lost in the write buffer), then one line and exit status 130."""
    whole = amqpscope("read", "--json", *select, str(SAMPLE)).stdout.splitlines()
    result = subprocess.run(
        [sys.executable, "-c", INTERRUPT_AT, "30", "read", "--json", *select, str(SAMPLE)],
        capture_output=True, text=True, timeout=120, cwd="/",
    )  # fmt: skip
    assert result.returncode == 130 and result.stderr == "amqpscope: interrupted\n"
    assert len(whole) > 40 and result.stdout.splitlines() == whole[:29]


INTERRUPT_LOADING = """
import os, runpy, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # as on a terminal, not under `&`
module, sys.argv = sys.argv[1], ["amqpscope", *sys.argv[2:]]
class Interrupting:  # Ctrl-C as `module` starts to load
    def find_spec(self, name, path=None, target=None):
        if name == module:
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, Interrupting())
runpy.run_module("amqpscope.cli", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize(
    "module",
    [
        "amqpscope.render.lines",  # while amqpscope.cli itself loads
        "amqpscope.cli.read",  # while click loads the command asked for
    ],
)
def test_ctrl_c_while_the_modules_load_is_one_line_and_130(module: str) -> None:
    """Not a KeyboardInterrupt's traceback from whichever import it hit, nor click's
    "Aborted!" and 1: half a second of loading (pure Python) is long enough to hit."""
    result = subprocess.run(
        [sys.executable, "-c", INTERRUPT_LOADING, module, "read", str(SAMPLE)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert (result.returncode, result.stderr) == (130, "amqpscope: interrupted\n")
    assert result.stdout == ""


@pytest.mark.parametrize("command", ["read", "summary"])
def test_tshark_dash_r_says_the_file_is_an_argument(command: str) -> None:
    """`amqpscope read -r file.pcap` (tshark's and tcpdump's habit): bad usage still (2), and a
    hint at what works, not click's bare "no such option"."""
    result = amqpscope(command, "-r", str(SAMPLE))
    assert result.returncode == 2, result.stderr
    assert "No such option '-r'" in result.stderr
    assert f"reads the file as an argument: amqpscope {command} file.pcap" in result.stderr
    assert result.stdout == ""


def test_keylog_without_keys_is_a_warning_and_the_read_goes_on(tmp_path: Path) -> None:
    """A --keylog file holding no key (empty, a comment, another format) decrypts nothing: one
    warning line on stderr, and the capture is read as without it. A real key log: no warning."""
    empty = tmp_path / "empty.keys"
    empty.write_text("# no keys here\nnot a key log line\n")
    capture = str(CAPTURES / "091-tls12.pcap")
    result = amqpscope("summary", "--keylog", str(empty), capture)
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if "holds no TLS keys" in line]
    assert warnings == [f"amqpscope: warning: --keylog {empty} holds no TLS keys "
                        "(NSS key log lines, as SSLKEYLOGFILE writes); TLS stays encrypted "
                        "without them"]  # fmt: skip
    assert result.stdout == amqpscope("summary", capture).stdout
    keys = str(CAPTURES / "091-tls12.keys")
    decrypted = amqpscope("summary", "--keylog", keys, capture)
    assert "holds no TLS keys" not in decrypted.stderr
    assert "AMQP 0-9-1" in decrypted.stdout


def test_python_minus_m_amqpscope_is_the_console_script() -> None:
    """`python -m amqpscope` where no script is on PATH: the same program, name and exits."""
    for args, code in ((["--version"], 0), (["read", "/no/such/file.pcap"], 1), (["nope"], 2)):
        done = subprocess.run(
            [sys.executable, "-m", "amqpscope", *args], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == code, (args, done.stderr)
        assert "Traceback" not in done.stderr
    done = subprocess.run(
        [sys.executable, "-m", "amqpscope", "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.stdout.startswith("Usage: amqpscope ")
