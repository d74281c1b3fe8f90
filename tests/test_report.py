"""`amqpscope report`: the page's data and bytes, without a browser (tests/test_report_browser.py
opens the pages in Chromium).

Oracles: the recorded ground truth beside each capture (what the client saw), `read --json`
(the frame records the rows and trees come from), `summary --json` (the links and channels),
and the passwords the recordings logged in with (tests/test_secrets.py reads them from the
recording code).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from amqpscope.cli import main
from amqpscope.render.html.model import (
    CONTENT,
    FINDING,
    MATCH,
    ReportBuilder,
    clean,
    compact_tree,
)
from amqpscope.render.html.pack import unpack
from amqpscope.render.html.page import data_json
from tests.test_secrets import LOGINS, forms

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "captures"
DATA_BLOCK = re.compile(rb'<script type="application/json" id="report-data">(.*?)</script>', re.S)
FRAMES_BLOCK = re.compile(
    rb'<script type="application/octet-stream" id="report-frames">(.*?)</script>'
)


def make(tmp_path: Path, capture: str, *args: str) -> bytes:
    out = tmp_path / "report.html"
    result = CliRunner().invoke(
        main,
        ["report", str(CAPTURES / capture), "-o", str(out), "--force", *args],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.stderr
    return out.read_bytes()


def data_of(page: bytes) -> dict:
    """The page's data, its frames' block unpacked into it (rows, records, details)."""
    match = DATA_BLOCK.search(page)
    frames = FRAMES_BLOCK.search(page)
    assert match and frames, "no data block"
    return {**json.loads(match.group(1)), **unpack(frames.group(1).decode())}


def cell(data: dict, unit: dict, column: str) -> object:
    """A link's or channel's value in the tables, by its column's heading."""
    return unit["cells"][data["columns"][unit["kind"]].index(column)]


def read_json(capture: str, *args: str) -> list[dict]:
    result = CliRunner().invoke(
        main, ["read", "--json", *args, str(CAPTURES / capture)], catch_exceptions=False
    )
    assert result.exit_code == 0
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.mark.parametrize("capture", ["091-qos-prefetch.pcap", "10-drain.pcap"])
def test_same_bytes_twice(tmp_path: Path, capture: str) -> None:
    assert make(tmp_path, capture) == make(tmp_path, capture)


def test_same_bytes_from_separate_processes(tmp_path: Path) -> None:
    """Another interpreter, another hash seed: still the same page."""
    pages = []
    for seed in ("1", "2"):
        out = tmp_path / f"{seed}.html"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        capture = str(CAPTURES / "10-outcomes.pcap")
        subprocess.run(
            [sys.executable, "-m", "amqpscope.cli", "report", capture, "-o", str(out)],
            check=True,
            env=env,
            timeout=120,
        )
        pages.append(out.read_bytes())
    assert pages[0] == pages[1]


def test_dash_is_standard_output_as_for_export_and_read_w(tmp_path: Path) -> None:
    """`-o -`: the page on stdout, the same bytes as -o FILE's; no file named "-" is made."""
    capture = str(CAPTURES / "091-get.pcap")
    out = tmp_path / "page.html"
    run = [sys.executable, "-m", "amqpscope.cli", "report", capture, "-o"]
    subprocess.run([*run, str(out)], check=True, timeout=120, cwd=tmp_path)
    piped = subprocess.run([*run, "-"], capture_output=True, timeout=120, cwd=tmp_path)
    assert piped.returncode == 0 and piped.stdout == out.read_bytes()
    assert not (tmp_path / "-").exists()


def test_without_bokeh_one_line_and_exit_1(tmp_path: Path) -> None:
    """The `report` extra not installed: said before the capture is read, no page written."""
    out = tmp_path / "r.html"
    code = (
        "import sys; sys.modules['bokeh'] = None; from amqpscope.cli import main;"
        f" sys.argv = ['amqpscope', 'report', {str(CAPTURES / '10-drain.pcap')!r}, '-o', "
        f"{str(out)!r}]; main()"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr == "amqpscope: the report needs Bokeh: pip install 'amqpscope[report]'\n"
    assert not out.exists()


@pytest.mark.parametrize(
    "capture", ["091-publish-consume.pcap", "10-send-receive.pcap", "091-channel-errors.pcap"]
)
def test_every_frame_has_a_row_and_a_tree(tmp_path: Path, capture: str) -> None:
    """Rows are those of `read --json`'s records, one each, in order; a frame's detail is its
    `read --json -V` tree, and its findings."""
    data = data_of(make(tmp_path, capture))
    records = read_json(capture, "-V")
    assert [r[0] for r in data["rows"]] == [r["frame"] for r in records]
    assert data["facts"]["frames"] == len(records)
    for row, record in zip(data["rows"], records, strict=True):
        assert row[2] == record["conn"] and row[3] == record["dir"]
        assert row[4] == record["channel"]
        assert bool(row[7] & FINDING) == bool(record["findings"])
        tree = data["details"][str(record["frame"])]
        wanted = compact_tree(clean(record["tree"]))
        if record["findings"]:
            assert tree[-1][0] == "findings"
            assert [f[3][0][1] for f in tree[-1][3]] == [f["code"] for f in record["findings"]]
            tree = tree[:-1]
        if "message" in record and record["version"] != "1.0":  # 1.0's tree shows sections
            assert tree[-1][0] == "message"
            tree = tree[:-1]
        assert tree == wanted


def test_links_and_channels_match_the_summary_and_ground_truth(tmp_path: Path) -> None:
    data = data_of(make(tmp_path, "091-qos-prefetch.pcap"))
    truth = json.loads((CAPTURES / "091-qos-prefetch.json").read_text())["expect"]
    summary = json.loads(
        CliRunner()
        .invoke(main, ["summary", "--json", str(CAPTURES / "091-qos-prefetch.pcap")])
        .stdout
    )
    (expected,) = [c for c in summary["connections"][0]["channels"] if c["deliveries"]]
    channels = [u for u in data["units"] if u["kind"] == "channel" and cell(data, u, "deliveries")]
    assert len(channels) == 1
    (channel,) = channels
    assert cell(data, channel, "deliveries") == truth["deliveries"]
    assert cell(data, channel, "prefetch") == truth["prefetch_count"]
    assert cell(data, channel, "max unacked") == truth["max_unacked"]
    assert cell(data, channel, "consumer queues") == expected["consumers"][0]["queue"]
    assert cell(data, channel, "ack p50 ms") == expected["ack-latency-ms"]["p50"]
    # the ack-latency histogram holds every ack the client sent, its bars over min..max
    histogram = channel["histograms"]["ack latency"]
    assert sum(histogram["counts"]) == truth["acks"]
    assert sum(channel["series"]["ack-latency"]["counts"]) == truth["acks"]  # over time too
    assert histogram["low"] == pytest.approx(expected["ack-latency-ms"]["min"], abs=1e-3)
    assert channel["series"]["unacked"]["max"]  # a level to plot, time from the first frame
    assert 0 <= channel["series"]["unacked"]["start"] <= data["facts"]["duration"]


def test_links_and_session_windows_of_a_10_capture(tmp_path: Path) -> None:
    data = data_of(make(tmp_path, "10-send-receive.pcap"))
    truth = json.loads((CAPTURES / "10-send-receive.json").read_text())
    links = [u for u in data["units"] if u["kind"] == "link"]
    assert {cell(data, u, "role") for u in links} == {"sender", "receiver"}
    delivered = sum(cell(data, u, "deliveries") for u in links if cell(data, u, "role") == "sender")
    assert delivered == truth["expect"]["transfers_sent"]
    assert all(u["series"]["link-credit"] for u in links)
    # a window point per begin and per flow that changed the stated incoming-window
    flows = [
        r
        for r in read_json("10-send-receive.pcap")
        if r["name"] in ("begin", "flow") and "incoming-window" in r["fields"]
    ]
    points = sum(len(w["points"]) for w in data["windows"])
    assert 2 <= points <= len(flows)


def test_peers_with_product_and_version(tmp_path: Path) -> None:
    """From connection.start / start-ok (0-9-1) and the opens' properties (1.0), as recorded."""
    recorded = json.loads((CAPTURES / "10-send-receive.json").read_text())["recorded_with"]
    (ten,) = data_of(make(tmp_path, "10-send-receive.pcap"))["connections"]
    assert ten["server-peer"].startswith(f"RabbitMQ {recorded['rabbitmq_server']} ")
    assert f"({recorded['erlang']})" in ten["server-peer"]
    assert "container rabbit@" in ten["server-peer"]
    assert ten["client-peer"] == "container amqpscope-10-send-receive"
    (old,) = data_of(make(tmp_path, "091-rpc.pcap"))["connections"][:1]
    pika_version = json.loads((CAPTURES / "091-rpc.json").read_text())["recorded_with"]["pika"]
    assert old["client-peer"].startswith(f"Pika Python Client Library {pika_version}")
    assert old["server-peer"].startswith("RabbitMQ ")


def test_display_filter_marks_the_rows_it_matches(tmp_path: Path) -> None:
    expression = 'name == "basic.ack"'
    data = data_of(make(tmp_path, "091-qos-prefetch.pcap", "-Y", expression))
    wanted = {r["frame"] for r in read_json("091-qos-prefetch.pcap", "-Y", expression)}
    assert {r[0] for r in data["rows"] if r[7] & MATCH} == wanted
    assert data["facts"]["matched"] == len(wanted) and data["facts"]["filter"] == expression


def test_scope_options_keep_rows_of_their_connection_and_time(tmp_path: Path) -> None:
    everything = data_of(make(tmp_path, "091-channels.pcap"))
    scoped = data_of(make(tmp_path, "091-channels.pcap", "--channel", "2", "--from", "0.001"))
    wanted = {
        r["frame"] for r in read_json("091-channels.pcap", "--channel", "2", "--from", "0.001")
    }
    assert {r[0] for r in scoped["rows"]} == wanted
    assert scoped["facts"]["out-of-scope"] == everything["facts"]["frames"] - len(wanted)
    assert scoped["units"] == everything["units"]  # the tracker still saw every frame


def test_bodies_fold_into_the_frame_that_began_them(tmp_path: Path) -> None:
    data = data_of(make(tmp_path, "091-publish-consume.pcap"))
    content = [r for r in data["rows"] if r[7] & CONTENT]
    assert content and {r[5] for r in content} == {"content-header", "content-body"}


def test_the_diagnoses_are_diagnose_s(tmp_path: Path) -> None:
    data = data_of(make(tmp_path, "091-channel-errors.pcap"))
    diagnosed = json.loads(
        CliRunner()
        .invoke(main, ["diagnose", "--json", str(CAPTURES / "091-channel-errors.pcap")])
        .stdout
    )
    assert data["diagnoses"] == diagnosed["diagnoses"]
    rows = {r[0]: r for r in data["rows"]}
    for diagnosis in data["diagnoses"]:
        for frame in diagnosis["evidence"]:  # every evidence link lands on a row and a tree
            assert frame in rows
            assert str(frame) in data["details"]


@pytest.mark.parametrize("capture", sorted(LOGINS))
def test_no_password_unless_asked(tmp_path: Path, capture: str) -> None:
    password, user = LOGINS[capture]
    page = make(tmp_path, capture).decode()
    data = data_of(page.encode())
    unpacked = json.dumps(data, ensure_ascii=False)  # the frames' records and trees too
    for form in forms(password, user):
        assert form not in page and form not in unpacked, form
    values = json.dumps(data["details"])
    assert "<redacted>" in values.replace("\\u003c", "<").replace("\\u003e", ">")
    assert "<redacted>" in json.dumps(data["records"])
    shown = json.dumps(data_of(make(tmp_path, capture, "--show-secrets")), ensure_ascii=False)
    assert password in shown or password.encode().hex() in shown


def test_redact_bodies_keeps_no_payload(tmp_path: Path) -> None:
    truth = json.loads((CAPTURES / "091-hostile-names.json").read_text())["expect"]
    body_start = truth["body"].split("\x1b")[0].strip()  # "body"
    kept_page = make(tmp_path, "091-publish-consume.pcap")
    redacted_page = make(tmp_path, "091-publish-consume.pcap", "--redact-bodies")
    assert data_of(redacted_page)["facts"]["redact-bodies"] is True
    # the page and its frames' block unpacked (rows, records, trees)
    kept = kept_page + json.dumps(data_of(kept_page)).encode()
    redacted = redacted_page + json.dumps(data_of(redacted_page)).encode()
    texts = [r for r in read_json("091-publish-consume.pcap") if r.get("message")]
    bodies = [m["message"]["body"].get("text") for m in texts if "text" in m["message"]["body"]]
    assert bodies and body_start
    assert all(b.encode() in kept or json.dumps(b).encode() in kept for b in bodies[:3])
    assert not any(json.dumps(b)[1:-1].encode() in redacted for b in bodies)


@pytest.mark.parametrize("capture", ["091-hostile-names.pcap", "091-html-names.pcap"])
def test_hostile_strings_are_escaped_text(tmp_path: Path, capture: str) -> None:
    """Control and direction-override characters become visible escapes in all the page
    shows; nothing in the data block can end it or open markup, the frames' block is base64.
    The records alone keep them raw (the page's -Y must see what read -Y sees); they are
    never shown."""
    page = make(tmp_path, capture)
    block = DATA_BLOCK.search(page)
    frames = FRAMES_BLOCK.search(page)
    assert block and frames
    raw = block.group(1)
    assert b"<" not in raw and b">" not in raw and b"&" not in raw
    assert re.fullmatch(rb"[A-Za-z0-9+/=]*", frames.group(1))
    assert not re.search(rb"[\x00-\x08\x0b-\x1f\x7f]", page)
    data = data_of(page)
    records = data.pop("records")
    text = json.dumps(data, ensure_ascii=False)
    assert "\u202e" not in text and "\x1b" not in text  # the characters are never shown
    assert "\\\\u202e" in text  # their visible escapes are
    assert "\u202e" in json.dumps(records, ensure_ascii=False)


def test_data_block_escapes_markup() -> None:
    text = data_json({"q": "</script><script>alert(1)</script>&amp;\u2028"})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text)["q"].startswith("</script>")


def test_page_fetches_nothing_and_runs_only_its_own_scripts(tmp_path: Path) -> None:
    page = make(tmp_path, "10-drain.pcap").decode()
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert csp and "default-src 'none'" in csp.group(1) and "connect-src 'none'" in csp.group(1)
    assert "unsafe-inline" not in csp.group(1).split("script-src")[1].split(";")[0]
    markup = re.sub(r"<script[^>]*>.*?</script>", "", page, flags=re.S)  # BokehJS names URLs
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", markup)
    # the data (never run), BokehJS, the page's script: each listed by hash in the CSP
    assert re.findall(r"^<script[^>]*>", page, re.M) == [
        '<script type="application/json" id="report-data">',
        '<script type="application/octet-stream" id="report-frames">',
        "<script>",
        "<script>",
        "<script>",
    ]
    assert len(page.encode()) < 5_000_000


def test_row_limit_says_how_many_were_left_out() -> None:
    from amqpscope.capture.files import open_capture
    from amqpscope.dissect import Dissector
    from amqpscope.track.tracker import Tracker

    builder = ReportBuilder(max_rows=10, max_details=5)
    tracker = Tracker()
    with open_capture(str(CAPTURES / "091-qos-prefetch.pcap")) as capture:
        for frame in Dissector().run(capture):
            tracker.feed(frame)
            builder.add(frame)
    tracker.finish()
    data = builder.build(tracker, {"file": "x"})
    assert len(data["rows"]) == 10
    assert data["facts"]["rows-left-out"] == data["facts"]["frames"] - 10
    assert len(data["details"]) >= 5
    assert data["facts"]["details-left-out"] == data["facts"]["frames"] - len(data["details"])


def test_redacted_bodies_leave_no_section_in_a_tree(tmp_path: Path) -> None:
    """The -V tree of a 1.0 transfer decodes its message sections; with --redact-bodies the
    body's section keeps its size, not its value."""
    kept = data_of(make(tmp_path, "10-send-receive.pcap"))
    redacted = data_of(make(tmp_path, "10-send-receive.pcap", "--redact-bodies"))
    bodies = {
        r["message"]["body"]["value"]
        for r in read_json("10-send-receive.pcap")
        if r.get("message") and "value" in r["message"]["body"]
    }
    assert bodies
    assert all(b in json.dumps(kept["details"]) for b in bodies)
    assert not any(b in json.dumps(redacted["details"]) for b in bodies)
    assert "<redacted, " in json.dumps(redacted["details"])


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["report", "captures/none.pcap", "-o", "{out}"], 1, "no such file"),
        (["report", "captures/10-drain.pcap", "-o", "{out}", "-Y", "name =="], 2, "-Y: column"),
        (["report", "captures/10-drain.pcap", "-o", "/nonexistent/dir/r.html"], 1, "cannot write"),
        (["report", "captures/10-drain.pcap"], 2, "-o"),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, args: list[str], code: int, message: str) -> None:
    argv = [a.replace("{out}", str(tmp_path / "r.html")) for a in args]
    argv = [str(ROOT / a) if a.startswith("captures/") else a for a in argv]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == code
    assert message in result.stderr and "Traceback" not in result.stderr


def test_a_100k_frame_capture_stays_under_5_mb(tmp_path: Path) -> None:
    """610 copies of a recorded connection (made at run time): 100,650 records (163 frames, the
    client's FIN and RabbitMQ's reset each). Every one has its row and its whole record in the
    page (the list pages through them, the filter sees them all), and the page stays under
    5 MB."""
    from tests.bigcapture import multiply

    big = tmp_path / "big.pcap"
    multiply(CAPTURES / "091-qos-prefetch.pcap", big, 610)
    out = tmp_path / "big.html"
    result = CliRunner().invoke(main, ["report", str(big), "-o", str(out)])
    assert result.exit_code == 0, result.stderr
    page = out.read_bytes()
    assert len(page) < 5_000_000
    data = data_of(page)
    assert data["facts"]["frames"] == 610 * 165
    assert data["facts"]["rows-left-out"] == 0 and data["facts"]["records"] == "whole"
    assert [r[0] for r in data["rows"]] == list(range(1, 610 * 165 + 1))
    assert [r["frame"] for r in data["records"]] == list(range(1, 610 * 165 + 1))
    assert len(data["connections"]) == 610 and len(data["units"]) == 610
    assert sum(1 for u in data["units"] if u["plotted"]) == 24


def test_standard_input_and_a_key_log(tmp_path: Path) -> None:
    """`report -` reads a capture from a pipe; --keylog decrypts TLS as `read` does."""
    out = tmp_path / "tls.html"
    capture = (CAPTURES / "091-tls12.pcap").read_bytes()
    keys = str(CAPTURES / "091-tls12.keys")
    result = subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", "report", "-", "-o", str(out), "--keylog", keys],
        input=capture,
        capture_output=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    data = data_of(out.read_bytes())
    wanted = read_json("091-tls12.pcap", "--keylog", keys)
    assert data["facts"]["file"] == "standard input"
    assert [r[0] for r in data["rows"]] == [r["frame"] for r in wanted]
    names = {r[0]: r[5] for r in data["rows"]}
    assert all(names[r["frame"]] == r["name"] for r in wanted if r["kind"] != "transport")
    assert "connection.open" in {r[5] for r in data["rows"]}


def test_a_frame_trace_log(tmp_path: Path) -> None:
    """A Proton trace (recorded beside a pcap of the same run): its frames as `read --json`
    gives them, each detail its record (a log has no bytes for a -V tree)."""
    data = data_of(make(tmp_path, "log-proton-broker.log"))
    records = read_json("log-proton-broker.log")
    assert data["facts"]["log-format"] == "proton" and "packets" not in data["facts"]
    assert [r[0] for r in data["rows"]] == [r["frame"] for r in records]
    for record in records:
        tree = {node[0]: node for node in data["details"][str(record["frame"])]}
        assert tree["name"][1] == record["name"] and "source" in tree
    links = [u for u in data["units"] if u["kind"] == "link"]
    assert sorted(cell(data, u, "deliveries") for u in links) == [6, 6]


def test_the_inputs_own_findings_are_on_the_page(tmp_path: Path) -> None:
    """What `read` says on stderr of a damaged log (a line that does not parse, lines that are
    no frame) is on the page, line numbers and all: the diagnoses are `diagnose`'s, which
    carry none of it, so a report alone hid the damage."""
    lines = (CAPTURES / "log-proton-broker.log").read_text().splitlines(keepends=True)
    lines[15] = "[0x56080b9f7cb0]: AMQP:FRAME:0 -> @flow(19) [incoming-window=0xzz]\n"
    lines.insert(3, "an application's own line\n")
    log = tmp_path / "damaged.log"
    log.write_text("".join(lines))
    out = tmp_path / "report.html"
    result = CliRunner().invoke(main, ["report", str(log), "-o", str(out)])
    assert result.exit_code == 0, result.stderr
    data = data_of(out.read_bytes())
    said = {(f["code"], f["message"].split(": ")[0]) for f in data["input-findings"]}
    assert ("log.bad-line", f"{log}:17") in said
    assert ("log.skipped-lines", str(log)) in said
    assert all(f["code"].startswith("log.") for f in data["input-findings"])
    clean_page = data_of(make(tmp_path, "log-proton-broker.log"))
    assert clean_page["input-findings"] == []


def test_a_page_over_its_budget_leaves_out_messages_then_fields_then_rows() -> None:
    """page.packed_frames within a smaller and smaller budget: the records lose their messages,
    then their fields, then the last rows go; the facts say which, and what is left is the
    capture's start, whole."""
    from amqpscope.capture.files import open_capture
    from amqpscope.dissect import Dissector
    from amqpscope.render.html import report_data
    from amqpscope.render.html.page import packed_frames

    def data() -> dict:
        with open_capture(str(CAPTURES / "10-send-receive.pcap")) as capture:
            return report_data(Dissector().run(capture), {"file": "x"})

    whole = len(packed_frames(data(), 10**9))
    seen = []
    for budget in (whole, whole - 1, whole // 2, whole // 3, whole // 6):
        made = data()
        block = packed_frames(made, budget)
        assert len(block) <= budget
        frames = unpack(block)
        facts = made["facts"]
        seen.append(facts["records"])
        records = frames["records"]
        assert len(records) == len(frames["rows"]) == facts["frames"] - facts["rows-left-out"]
        assert [r["frame"] for r in records] == list(range(1, len(records) + 1))
        if facts["records"] != "whole":
            assert not any("message" in r for r in records)
        if facts["records"] == "frame keys only":
            assert not any("fields" in r for r in records)
    assert seen[0] == "whole" and seen[1] != "whole"
    assert seen[-1] == "frame keys only"
    assert made["facts"]["rows-left-out"] > 0
