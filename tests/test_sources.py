"""`amqpscope.sources`: every input opened in one place, what cannot be read said by the kind
of error (a class, an exit status), never printed or exited on: so the TUI (whose terminal
Textual owns) and the Spark job can say it their own way. The words are the CLI's, unchanged
(tests/test_exits.py checks them as the command prints them)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from amqpscope import sources
from amqpscope.capture.files import CaptureError

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
PCAP = CAPTURES / "10-drain.pcap"
LOG = CAPTURES / "log-proton-broker.log"
KEYS = CAPTURES / "10-tls.keys"


def opened(paths: str | list[str], fmt: str | None = None) -> sources.Source:
    with sources.open_source(paths, fmt) as source:
        assert source.path
        return source


@pytest.mark.parametrize(
    ("make", "kind", "code", "words"),
    [
        (lambda d: str(d / "missing.pcap"), sources.Unreadable, 1, ": no such file"),
        (lambda d: str(d), sources.Unreadable, 1, ": is a directory, not a capture or log file"),
        (lambda d: _write(d / "empty.pcap", b""), sources.Empty, 1, ": the file is empty"),
        (
            lambda d: _write(d / "x.pcap", b"\x00\x01" * 20),
            sources.NotACapture,
            1,
            ": not a pcap or pcapng file",
        ),
        (
            lambda d: _write(d / "notes.txt", b"hello\nworld\n"),
            sources.NotALog,
            1,
            ": not a pcap or pcapng file, nor a frame-trace log amqpscope reads",
        ),
    ],
)
def test_what_cannot_be_read_is_a_typed_error(
    tmp_path: Path, make: object, kind: type, code: int, words: str
) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    with pytest.raises(kind) as raised:
        opened(path)
    assert raised.value.code == code
    assert str(raised.value).startswith(path) and words in str(raised.value)
    assert isinstance(raised.value, CaptureError)  # older handlers catch it still


def test_a_format_forced_on_a_capture_is_bad_usage() -> None:
    with pytest.raises(sources.UsageConflict) as raised:
        opened(str(PCAP), "proton")
    assert raised.value.code == 2
    assert str(raised.value) == (
        f"--format proton: {PCAP} is a pcap capture, not a frame-trace log"
    )


def test_a_log_among_several_files_is_named(tmp_path: Path) -> None:
    copy = tmp_path / "b.pcap"
    shutil.copy(PCAP, copy)
    text = tmp_path / "notes.txt"  # text in no log format (a log beside a capture is merged)
    text.write_text("what the broker's admin saw\n" * 20)
    with pytest.raises(sources.NotALog, match="text, not a capture file"):
        opened([str(PCAP), str(text)])
    with pytest.raises(sources.UsageConflict):
        opened([str(PCAP), str(copy)], "proton")
    with pytest.raises(sources.UsageConflict, match="given twice"):
        sources.check_paths([str(PCAP), str(PCAP)])
    with pytest.raises(sources.UsageConflict, match="standard input"):
        sources.check_paths([str(PCAP), "-"])


def test_a_capture_and_a_log_open_as_what_they_are() -> None:
    with sources.open_source(str(PCAP)) as source:
        assert source.source == "capture" and source.capture is not None
        assert any(frame.name == "attach" for frame in source.frames())
    with sources.open_source(str(LOG)) as source:
        assert source.source == "log" and source.fmt == "proton"
    assert sources.input_kind(str(PCAP)) == ("capture", None)
    assert sources.input_kind(str(LOG)) == ("log", "proton")


def test_the_key_log_is_loaded_without_printing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The TUI loads key logs while Textual owns the terminal: a key log of no keys is told to
    `warn` (the CLI prints it), and nothing reaches stdout or stderr."""
    told: list[str] = []
    keylog = sources.load_keylog(str(KEYS), told.append)
    assert keylog and told == []
    empty = _write(tmp_path / "none.keys", b"# no keys here\n")
    sources.load_keylog(empty, told.append)
    assert told == [sources.NO_KEYS.format(path=empty)]
    with pytest.raises(sources.KeyLogUnreadable) as raised:
        sources.load_keylog(str(tmp_path / "missing.keys"))
    assert str(raised.value) == f"--keylog {tmp_path / 'missing.keys'}: no such file"
    assert raised.value.code == 1
    assert capsys.readouterr() == ("", "")


def _write(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


def test_the_tui_reads_the_input_its_command_opened() -> None:
    """`amqpscope tui FILE` opens its input once (to say at once when it cannot be read) and
    hands it to the loader, which reads it in its thread and closes it: the same frames as a
    loader that opens the file itself, and the file closed after."""
    import contextlib

    from amqpscope.tui.loader import Loading, load_file

    alone = Loading()
    load_file(alone, str(PCAP))
    with contextlib.ExitStack() as stack:
        source = stack.enter_context(sources.open_source(str(PCAP)))
        handed = Loading()
        load_file(handed, str(PCAP), opened=(source, stack.pop_all()))
    assert handed.done and not handed.error and alone.done and not alone.error
    assert len(handed.store) == len(alone.store) > 0
    assert handed.diagnoses == alone.diagnoses
    assert source.capture is not None and source.capture.position() == (0, 0)  # closed
