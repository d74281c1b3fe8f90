"""`amqpscope report` pages in a real browser: Debian's Chromium, headless, over the DevTools
protocol (tests/browser.py). Each page opens from disk with no console error and no request but
its own file (and the data: images BokehJS draws its toolbar with), draws its diagram and its
plots, shows a frame when its arrow is clicked or chosen with the keyboard, prints without its
controls, and keeps hostile strings as text.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from PIL import Image

from amqpscope.cli import main
from tests import browser
from tests.oracle import missing
from tests.test_report import data_of

pytestmark = pytest.mark.skipif(not browser.available(), reason=missing("Debian's chromium"))

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "captures"
#: 0-9-1 and 1.0 captures, with errors, a prefetch that saturates, credit drained
PAGES = [
    "091-qos-prefetch.pcap",
    "091-channel-errors.pcap",
    "10-send-receive.pcap",
    "10-drain.pcap",
    "10-bad-address.pcap",
    "091-killed-consumer.pcap",  # a stall: the consumer killed with its prefetch full
    "log-proton-broker.log",  # a frame-trace log, not a capture
]
HOSTILE = (
    'q<script>window.pwned=1</script><img src=x onerror="window.pwned=2">'
    "<b id=injected>bold</b>&amp;\u202etxt.exe\u2066"
)


def make(tmp_path: Path, capture: Path, *args: str) -> Path:
    out = tmp_path / f"{capture.stem}.html"
    result = CliRunner().invoke(
        main, ["report", str(capture), "-o", str(out), *args], catch_exceptions=False
    )
    assert result.exit_code == 0, result.stderr
    return out


@pytest.fixture(scope="module")
def chromium() -> browser.Chromium:
    with browser.Chromium() as running:
        yield running


def opened(chromium: browser.Chromium, page_file: Path) -> browser.Page:
    page = chromium.page()
    page.open(page_file)
    page.wait("document.body.dataset.ready === '1'", "the report to draw itself")
    page.wait("window.amqpscopeReport.plotsDone()", "the plots")
    return page


def foreign(page: browser.Page, page_file: Path) -> list[str]:
    """Requests for anything but the page itself and data: URLs (made in the page)."""
    own = page_file.resolve().as_uri()
    return [url for url in page.requests if url != own and not url.startswith("data:")]


def expected_figures(data: dict) -> int:
    """Per link or channel: one of its levels, one of its rates, one per latency histogram;
    one of the session windows."""
    count = 0
    for unit in data["units"]:
        series = unit["series"]
        if not any(series.values()):
            continue
        count += any(series.get(k) for k in ("link-credit", "unsettled", "unacked"))
        count += any(series.get(k) for k in ("deliveries", "publishes"))
        count += any(series.get(k) for k in ("settle-latency", "ack-latency", "confirm-latency"))
        count += sum(1 for h in unit["histograms"].values() if h)
    return count + bool(data["windows"])


def colours(png: bytes) -> int:
    image = Image.open(io.BytesIO(png)).convert("RGB")
    return len(image.getcolors(maxcolors=1 << 20) or [])


@pytest.mark.parametrize("capture", PAGES)
def test_page_draws_without_errors_or_requests(
    tmp_path: Path, chromium: browser.Chromium, capture: str
) -> None:
    page_file = make(tmp_path, CAPTURES / capture)
    data = data_of(page_file.read_bytes())
    page = opened(chromium, page_file)
    assert page.console_errors == []
    assert foreign(page, page_file) == []
    # the diagram: one arrow per frame of the first connection, bodies folded into their method
    first = data["rows"][0][2]
    own = [r for r in data["rows"] if r[2] == first]
    arrows = page.eval("document.querySelectorAll('#sequence g.arrow').length")
    assert 0 < arrows <= len(own)
    assert arrows == min(300, len(own) - sum(1 for r in own[1:] if r[7] & 8))
    # the plots: BokehJS drew its figures, each into a canvas of its own (in shadow roots)
    figures = int(page.eval("document.body.dataset.plots || '0'"))
    assert figures == expected_figures(data)
    if not figures:
        said = page.eval("document.getElementById('plot-area').textContent")
        # a log without timestamps (Proton's) has nothing over time to plot, and says so
        untimed = data["facts"]["timed"] is False
        assert ("has no timestamps" if untimed else "No link or channel") in said
        return
    canvases = page.eval(
        "(function count(root) { let n = root.querySelectorAll('canvas').length;"
        " for (const e of root.querySelectorAll('*')) if (e.shadowRoot) n += count(e.shadowRoot);"
        " return n; })(document.getElementById('plot-area'))"
    )
    assert canvases >= 1
    plot_box = page.eval(
        "(() => { const r = document.getElementById('plot-area').getBoundingClientRect();"
        " return [r.left, r.top + scrollY, r.width, Math.min(r.height, 600)]; })()"
    )
    plot_png = page.screenshot(
        full=True,
        clip={"x": plot_box[0], "y": plot_box[1], "width": plot_box[2], "height": plot_box[3]},
    )
    assert colours(plot_png) > 20  # axes, glyphs, text: not a blank box
    screenshot = page.screenshot()
    assert colours(screenshot) > 50
    assert page.console_errors == []


def test_clicking_an_arrow_shows_its_frame(tmp_path: Path, chromium: browser.Chromium) -> None:
    page_file = make(tmp_path, CAPTURES / "091-channel-errors.pcap")
    page = opened(chromium, page_file)
    wanted = page.eval("document.querySelectorAll('#sequence g.arrow')[4].dataset.frame")
    page.click(f'#sequence g.arrow[data-frame="{wanted}"] line.shaft')
    page.wait(f"document.getElementById('detail').dataset.frame === '{wanted}'", "the detail")
    title = page.eval("document.getElementById('detail-title').textContent")
    tree = page.eval("document.getElementById('detail-body').textContent")
    record = json.loads(
        CliRunner()
        .invoke(main, ["read", "--json", "-V", str(CAPTURES / "091-channel-errors.pcap")])
        .stdout.splitlines()[int(wanted) - 1]
    )
    assert title.startswith(f"Frame {wanted}: {record['name']}")
    amqp = record["tree"][-1]  # the -V tree's AMQP frame, its fields under it
    assert f"{amqp['name']}: {record['name']} (frame) @0+{amqp['length']}" in tree
    for field in amqp["children"]:
        value = field["value"]
        shown = f"{field['name']}: {value}" if isinstance(value, int | str) else field["name"]
        assert f"{shown} ({field['type']})" in tree
    assert page.console_errors == []


def test_evidence_and_keyboard_reach_frames(tmp_path: Path, chromium: browser.Chromium) -> None:
    page_file = make(tmp_path, CAPTURES / "091-channel-errors.pcap")
    page = opened(chromium, page_file)
    # a diagnosis's evidence button: its frame is chosen and focused in the diagram
    evidence = page.eval("document.querySelector('button.evidence').textContent")
    frame = evidence.split()[-1]
    page.click("button.evidence")
    page.wait(f"document.getElementById('detail').dataset.frame === '{frame}'", "evidence")
    assert page.eval("document.activeElement.dataset.frame") == frame
    # Tab reaches the diagram's arrows from its controls
    page.eval("document.getElementById('diagram-next').focus()")
    for _ in range(5):
        page.key("Tab", "Tab", 9)
        if page.eval("document.activeElement.classList.contains('arrow')"):
            break
    assert page.eval("document.activeElement.dataset.frame") is not None
    page.eval(f"document.querySelector('#sequence g[data-frame=\"{frame}\"]').focus()")
    # the keyboard: down to the next arrow, Enter shows it
    following = page.eval("document.activeElement.nextSibling.dataset.frame")
    page.key("ArrowDown", "ArrowDown", 40)
    page.key("Enter", "Enter", 13)
    page.wait(f"document.getElementById('detail').dataset.frame === '{following}'", "Enter")
    assert page.console_errors == []


def test_lanes_and_errors_survive_greyscale(tmp_path: Path, chromium: browser.Chromium) -> None:
    """Colour is never the only mark: each lane has its own dash pattern, an error arrow a
    heavier line and a mark in its label, a severity its word."""
    capture = CAPTURES / "091-channel-errors.pcap"
    page = opened(chromium, make(tmp_path, capture))
    # 0-9-1: a lane per channel, channel 0 the connection's
    result = CliRunner().invoke(main, ["read", "--json", str(capture)])
    records = [json.loads(line) for line in result.stdout.splitlines()]
    wanted = {r["frame"]: expected_lane(r, {}) for r in records}
    drawn = page.eval(
        "[...document.querySelectorAll('#sequence g.arrow')]"
        ".map(g => [+g.dataset.frame, g.dataset.lane])"
    )
    assert drawn and all(wanted[frame] == lane for frame, lane in drawn)
    assert len({lane for _, lane in drawn}) >= 3
    lanes = page.eval(
        "[...document.querySelectorAll('#diagram-legend line')]"
        ".map(l => l.getAttribute('stroke-dasharray'))"
    )
    assert len(lanes) >= 2 and len(set(lanes)) == len(lanes)
    errors = page.eval(
        "[...document.querySelectorAll('#sequence g.arrow.error')]"
        ".map(g => [g.querySelector('line').getAttribute('stroke-width'),"
        " g.querySelector('text.label').textContent])"
    )
    assert errors and all(w == "3" and label[0] in "\u2716\u26a0" for w, label in errors)
    badges = page.eval("[...document.querySelectorAll('.badge')].map(b => b.textContent)")
    assert badges and set(badges) <= {"ERROR", "WARNING", "INFO"}


def test_print_stylesheet(tmp_path: Path, chromium: browser.Chromium) -> None:
    page = opened(chromium, make(tmp_path, CAPTURES / "10-drain.pcap"))
    page.send("Emulation.setEmulatedMedia", media="print")
    hidden = page.eval(
        "['nav', '.controls'].map(s => getComputedStyle(document.querySelector(s)).display)"
    )
    assert hidden == ["none", "none"]
    overflow = page.eval("getComputedStyle(document.getElementById('diagram-svg')).overflow")
    assert overflow == "visible"
    pdf = page.send("Page.printToPDF", printBackground=False)["data"]
    assert len(pdf) > 10_000
    page.send("Emulation.setEmulatedMedia", media="")


def test_hostile_strings_are_inert(tmp_path: Path, chromium: browser.Chromium) -> None:
    """Recorded from RabbitMQ (captures/scenarios/html.py): a queue, a message body and an
    app-id holding a script element, an img with onerror, an element with an id and direction
    controls."""
    truth = json.loads((CAPTURES / "091-html-names.json").read_text())["expect"]
    queue, app_id = truth["queue"], truth["app_id"]
    page_file = make(tmp_path, CAPTURES / "091-html-names.pcap")
    page = opened(chromium, page_file)
    assert page.eval("typeof window.pwned") == "undefined"
    assert page.eval("document.getElementById('injected') === null")
    assert page.eval("document.querySelectorAll('img, main script, b').length") == 0
    listed = page.eval("document.querySelector('#frames tbody').textContent")
    assert "<script>window.pwned=1</script>" in listed  # shown as the text it is
    assert "\u202e" not in listed
    drawn = page.eval("document.getElementById('sequence').textContent")
    assert "q=amqpscope.091-html-names.<script>window.pwned=1</script><im…" in drawn
    rows = page.eval("window.amqpscopeReport.rows()")
    shown = {}
    for name in ("queue.declare", "content-header", "channel.close"):
        number = next(r[0] for r in rows if r[5] == name)
        page.eval(f"window.amqpscopeReport.goToFrame({number})")
        shown[name] = page.eval("document.getElementById('detail-body').textContent")
    escaped = queue.replace("\u202e", "\\u202e").replace("\u2066", "\\u2066")
    assert escaped in shown["queue.declare"]  # whole, its controls as visible escapes
    assert (
        app_id.replace("\u202e", "\\u202e").replace("\u2066", "\\u2066") in shown["content-header"]
    )
    missing = truth["missing_queue"].replace("\u202e", "\\u202e").replace("\u2066", "\\u2066")
    assert missing in shown["channel.close"]  # the broker's reply text quotes the name
    assert not any("\u202e" in text or "\u2066" in text for text in shown.values())
    assert page.console_errors == []
    assert foreign(page, page_file) == []


def test_the_inputs_own_findings_are_shown(tmp_path: Path, chromium: browser.Chromium) -> None:
    """A log with a line that does not parse: the page says so, as `read` does on stderr; a
    clean log's page has no such list."""
    lines = (CAPTURES / "log-proton-broker.log").read_text().splitlines(keepends=True)
    lines[15] = "[0x56080b9f7cb0]: AMQP:FRAME:0 -> @flow(19) [incoming-window=0xzz]\n"
    log = tmp_path / "damaged.log"
    log.write_text("".join(lines))
    page = opened(chromium, make(tmp_path, log))
    assert page.eval("document.getElementById('input-findings-box').hidden") is False
    shown = page.eval("document.getElementById('input-findings').textContent")
    assert "log.bad-line" in shown and "damaged.log:16:" in shown
    assert page.console_errors == []
    clean = opened(chromium, make(tmp_path, CAPTURES / "log-proton-broker.log"))
    assert clean.eval("document.getElementById('input-findings-box').hidden") is True


def test_diagnoses_plug_in_and_link_to_their_evidence(
    tmp_path: Path, chromium: browser.Chromium
) -> None:
    """The seam for `diagnose` (issue 21): Diagnosis dicts, here made from the tracker's own
    prefetch findings, are listed first with where and when, each evidence frame a button."""
    from amqpscope.capture.files import open_capture
    from amqpscope.dissect import Dissector
    from amqpscope.render.html import report_data
    from amqpscope.render.html.page import render_page

    def diagnose(tracker: object) -> list[dict]:
        found = [f for f in tracker.findings if f.code == "amqp091.prefetch-saturated"]  # type: ignore[attr-defined]
        return [
            {
                "code": "consumer.slow",
                "severity": "warning",
                "title": "the consumer acks slower than the prefetch fills",
                "explanation": "every delivery the prefetch allowed was waiting for an ack",
                "conn": found[0].conn,
                "channel": 1,
                "queue": "amqpscope.091-qos-prefetch.q",
                "start": 0.25,
                "duration": 0.5,
                "evidence": [f.frame for f in found],
            }
        ]

    dissector = Dissector()
    with open_capture(str(CAPTURES / "091-qos-prefetch.pcap")) as capture:
        data = report_data(dissector.run(capture), {"file": "x"}, diagnose=diagnose)
    page_file = tmp_path / "diagnosed.html"
    page_file.write_bytes(render_page(data))
    page = opened(chromium, page_file)
    item = page.eval("document.querySelector('#diagnoses li').textContent")
    assert "consumer.slow" in item and "channel 1" in item and "at 0.250 s for 0.500 s" in item
    evidence = data["diagnoses"][0]["evidence"]
    assert page.eval("document.querySelectorAll('#diagnoses button.evidence').length") == len(
        evidence
    )
    page.click("#diagnoses button.evidence")
    page.wait(
        f"document.getElementById('detail').dataset.frame === '{evidence[0]}'", "the evidence"
    )
    assert page.console_errors == []


def test_zoom_to_a_time_range(tmp_path: Path, chromium: browser.Chromium) -> None:
    """Typed in, or taken from the plots (as panned or zoomed there): the diagram then draws
    only the arrows of frames in the range."""
    page = opened(chromium, make(tmp_path, CAPTURES / "091-qos-prefetch.pcap"))
    every = page.eval("document.querySelectorAll('#sequence g.arrow').length")

    def times() -> list[float]:
        return [
            float(t.split()[1])
            for t in page.eval(
                "[...document.querySelectorAll('#sequence g.arrow text.when')]"
                ".map(t => t.textContent)"
            )
        ]

    page.eval("document.getElementById('diagram-from').value = '0.5'")
    page.eval("document.getElementById('diagram-to').value = '0.9'")
    page.click("#diagram-zoom")
    zoomed = times()
    assert 0 < len(zoomed) < every and all(0.5 <= t <= 0.9 for t in zoomed)
    page.eval(
        "(() => { const r = window.amqpscopeReport.plotRange(); r.start = 1.0; r.end = 1.1; })()"
    )
    page.click("#diagram-from-plots")
    from_plots = times()
    assert from_plots and all(1.0 <= t <= 1.1 for t in from_plots)
    page.click("#diagram-reset")
    assert page.eval("document.querySelectorAll('#sequence g.arrow').length") == every
    assert page.console_errors == []


def expected_lane(record: dict, links: dict) -> str:
    """A frame's lane as the issue asks, from its record: 1.0 connection frames their own,
    then a link's frames (by the name its attach gave the handle, either way) its own, the
    rest its session's; 0-9-1 its channel (channel 0 the connection's)."""
    channel, fields = record["channel"], record["fields"]
    if record["version"] != "1.0":
        return "connection" if channel in (None, 0) else f"channel {channel}"
    if channel is None or record["name"] in ("open", "close", "empty", "heartbeat"):
        return "connection"
    handle = fields.get("handle")
    if isinstance(handle, int) and not isinstance(handle, bool):
        key = (channel, record["dir"], handle)
        if record["name"] == "attach":
            links[key] = fields["name"]
        return f"session {channel}, link {links.get(key, f'handle {handle}')}"
    return f"session {channel}"


def test_links_have_lanes_of_their_own(tmp_path: Path, chromium: browser.Chromium) -> None:
    """Each arrow sits in its lane (a 1.0 link, session or the connection): a track of its own
    between the lifelines, the arrow's mark on it (0-9-1 channels: the greyscale test)."""
    capture = "10-credit-starved.pcap"
    result = CliRunner().invoke(main, ["read", "--json", str(CAPTURES / capture)])
    records = [json.loads(line) for line in result.stdout.splitlines()]
    page = opened(chromium, make(tmp_path, CAPTURES / capture))
    first = records[0]["conn"]
    links: dict = {}
    wanted = {r["frame"]: expected_lane(r, links) for r in records if r["conn"] == first}
    arrows = page.eval(
        "[...document.querySelectorAll('#sequence g.arrow')].map(g => [+g.dataset.frame,"
        " g.dataset.lane, +(g.querySelector('.lane-mark').getAttribute('cx')"
        " || +g.querySelector('.lane-mark').getAttribute('x') + 4)])"
    )
    tracks = dict(
        page.eval(
            "[...document.querySelectorAll('#sequence g.track')].map(t => [t.dataset.lane,"
            " +t.querySelector('line').getAttribute('x1')])"
        )
    )
    assert arrows and all(lane == wanted[frame] for frame, lane, _ in arrows)
    assert all(x == tracks[lane] for _, lane, x in arrows)  # on its own track
    assert len(set(tracks.values())) == len(tracks) == len(set(wanted.values()))
    assert {lane.split(",")[-1].split()[0] for lane in tracks} == {"link", "session", "connection"}
    assert sum(1 for lane in tracks if ", link " in lane) == 2
    legend = page.eval(
        "[...document.querySelectorAll('#diagram-legend .lane')].map(l => l.dataset.lane)"
    )
    assert legend == list(tracks)
    assert page.console_errors == []


def test_every_frame_of_a_long_capture_is_reachable(
    tmp_path: Path, chromium: browser.Chromium
) -> None:
    """A recorded connection made long (bench/synth.py): 3,000 messages, past the old cut of
    20,000 frames. Each has its row: the list's last page ends on the last frame, going to a
    frame past 20,000 shows it in the list, the diagram and the detail, and the filter box
    works over all of them (the same frames as read -Y)."""
    from tests.bigcapture import build_091

    big = tmp_path / "long.pcap"
    build_091(big, 3_000)
    page = opened(chromium, make(tmp_path, big))
    total = page.eval("window.amqpscopeReport.rows().length")
    facts = page.eval("JSON.parse(document.getElementById('report-data').textContent).facts")
    assert total == facts["frames"] > 20_000 and facts["rows-left-out"] == 0
    page.click("#frames-last")
    last = page.eval(
        "[...document.querySelectorAll('#frames tbody tr')].map(r => +r.dataset.frame)"
    )
    assert last[-1] == total and len(last) == (total % 200 or 200)
    page.eval("document.getElementById('frames-go').value = '20500'")
    page.eval("document.getElementById('frames-go').focus()")
    page.key("Enter", "Enter", 13)
    page.wait("document.getElementById('detail').dataset.frame === '20500'", "frame 20500")
    assert page.eval("document.querySelector('#frames tr.chosen').dataset.frame") == "20500"
    assert page.eval("document.querySelector('#sequence g.selected') !== null")
    expression = 'frame > 20000 and name == "basic.ack" or fields.delivery-tag == 3'
    result = CliRunner().invoke(main, ["read", "--json", "-Y", expression, str(big)])
    wanted = [json.loads(line)["frame"] for line in result.stdout.splitlines()]
    assert wanted and max(wanted) > 20_000
    page.eval(f"window.amqpscopeReport.applyFilter({json.dumps(expression)})")
    assert page.eval("window.amqpscopeReport.shownFrames()") == wanted
    assert page.console_errors == []
