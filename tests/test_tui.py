"""The TUI driven by Textual's pilot on bundled captures: what a person does (filter, pick a
node, open a frame, follow a delivery, jump to a diagnosis's evidence, write a cut), checked
against the recordings' ground truth (the clients' own counts), `read`'s own lines and tshark."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("textual", reason="the TUI needs the tui extra (make install installs it)")

from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import Input, OptionList, Static, Tree

from amqpscope.tui.app import AmqpScope
from amqpscope.tui.loader import load_file
from tests.oracle import tshark_frames, tshark_or_skip

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "captures"
#: what a terminal could act on (render.lines' list, written out: the test does not trust it)
UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def truth(name: str) -> dict[str, Any]:
    return json.loads((CAPTURES / f"{name}.json").read_text())["expect"]


def read_json(path: Path, *args: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        [sys.executable, "-m", "amqpscope.cli", "read", "--json", str(path), *args],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    return [json.loads(line) for line in out.splitlines()]


def make_app(capture: str) -> AmqpScope:
    path = str(CAPTURES / capture)
    return AmqpScope(partial(load_file, path=path), capture_path=path, title=capture)


async def loaded(pilot: Pilot[Any]) -> None:
    app = pilot.app
    assert isinstance(app, AmqpScope)
    for _ in range(200):
        await pilot.pause(0.05)
        if app.loading.done and app.tree_nodes and app.frames.rows == len(app.store):
            break
    await app.workers.wait_for_complete()
    await pilot.pause()
    assert app.loading.done and not app.loading.error


@asynccontextmanager
async def opened(capture: str, size: tuple[int, int] = (160, 48)) -> AsyncIterator[Pilot[Any]]:
    app = make_app(capture)
    async with app.run_test(size=size) as pilot:
        await loaded(pilot)
        yield pilot


def shown(app: AmqpScope) -> list[dict[str, Any]]:
    frames = app.frames
    return [app.store.record(frames.view.index(row)) for row in range(frames.rows)]


async def filter_with(pilot: Pilot[Any], text: str) -> None:
    app = pilot.app
    await pilot.press("slash")
    assert app.focused is app.query_one("#filter", Input)
    app.query_one("#filter", Input).value = text
    await pilot.press("enter")
    await app.workers.wait_for_complete()
    await pilot.pause()


def row_text(app: AmqpScope, row: int) -> str:
    strip = app.frames.render_line(row - app.frames.scroll_offset.y)
    return strip.text.rstrip()


def test_opens_a_capture_with_reads_lines() -> None:
    async def run() -> None:
        async with opened("10-outcomes.pcap", (220, 48)) as pilot:
            app = pilot.app
            records = read_json(CAPTURES / "10-outcomes.pcap")
            assert [r["frame"] for r in shown(app)] == [r["frame"] for r in records]
            lines = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "amqpscope.cli",
                    "read",
                    "--width",
                    "500",
                    str(CAPTURES / "10-outcomes.pcap"),
                ],
                capture_output=True,
                text=True,
                check=True,
                cwd=ROOT,
            ).stdout.splitlines()
            frame_lines = [line for line in lines if not line.startswith("c1 ")]
            for row in range(10):  # the rows on screen are read's lines, cut to the pane
                assert frame_lines[row].startswith(row_text(app, row).rstrip("…"))
            # the tree: one connection, one session, the two links the client attached
            tree = app.query_one("#scopes", Tree)
            (conn,) = tree.root.children
            (session,) = conn.children
            assert len(session.children) == 2

    asyncio.run(run())


def test_filter_counts_what_the_client_sent_and_received() -> None:
    async def run() -> None:
        async with opened("10-outcomes.pcap") as pilot:
            app = pilot.app
            expect = truth("10-outcomes")
            await filter_with(pilot, 'name == "transfer" and dir == "c2s"')
            assert len(shown(app)) == expect["transfers_sent"]
            await filter_with(pilot, 'name == "transfer" and dir == "s2c"')
            assert len(shown(app)) == expect["transfers_received"]
            assert app.focused is app.frames
            # a bad filter: read -Y's message, a pointer at its column, the list unchanged
            await filter_with(pilot, 'name == "transfer" and')
            error = str(app.query_one("#filter-error", Static).render())
            expression, pointer, message = error.split("\n")
            assert expression == 'name == "transfer" and'
            assert message.startswith("-Y: column 23:")  # read -Y's words
            assert pointer == " " * 22 + "^"  # under the column it names
            assert len(shown(app)) == expect["transfers_received"]
            await pilot.press("escape")  # leaves the input, then clears the filter
            app.frames.focus()
            await pilot.press("escape")
            await pilot.pause()
            assert app.frames.rows == len(app.store)

    asyncio.run(run())


def test_n_and_n_step_through_the_filters_matches() -> None:
    """n / N go to the next / previous frame the filter accepts, among every frame once Esc
    left the filter (or from a follow, which shows every frame to reach it); e / E step
    through the frames with findings. The matches are read -Y's."""

    async def run() -> None:
        async with opened("091-publish-consume.pcap") as pilot:
            app = pilot.app
            path = CAPTURES / "091-publish-consume.pcap"
            delivers = [r["frame"] for r in read_json(path, "-Y", 'name == "basic.deliver"')]
            assert len(delivers) >= 5

            def at() -> int:
                index = app.frames.selected()
                assert index is not None
                return int(app.store.record(index)["frame"])

            async def press(*keys: str) -> None:
                await pilot.press(*keys)
                await app.workers.wait_for_complete()
                await pilot.pause()

            await press("n")  # no filter yet: said, not moved
            assert at() == 1
            assert "no filter" in " ".join(str(n.message) for n in app._notifications)
            await filter_with(pilot, 'name == "basic.deliver"')
            await press("escape")
            assert app.frames.view.everything and at() == delivers[0]  # kept where it was
            await press("home", "n")
            assert at() == delivers[0]
            await press("n", "n")
            assert at() == delivers[2]
            await press("N")
            assert at() == delivers[1]
            await press("end", "N")
            assert at() == delivers[-1]
            await press("n")  # none after the last: the cursor stays
            assert at() == delivers[-1]
            # from a follow: the next deliver is not in it, so every frame shows again
            assert app.jump(delivers[1])
            await press("f")
            assert not app.frames.view.everything and at() == delivers[1]
            await press("n")
            assert app.frames.view.everything and at() == delivers[2]
        async with opened("091-channel-errors.pcap") as pilot:
            app = pilot.app
            flagged = [
                r["frame"]
                for r in read_json(CAPTURES / "091-channel-errors.pcap")
                if r.get("findings")
            ]
            assert len(flagged) >= 2
            await pilot.press("e")
            await pilot.pause()
            index = app.frames.selected()
            assert index is not None and app.store.record(index)["frame"] == flagged[0]
            await pilot.press("e", "E")
            await pilot.pause()
            index = app.frames.selected()
            assert index is not None and app.store.record(index)["frame"] == flagged[0]

    asyncio.run(run())


def test_selecting_a_link_scopes_the_list_to_it() -> None:
    async def run() -> None:
        async with opened("10-outcomes.pcap") as pilot:
            app = pilot.app
            tree = app.query_one("#scopes", Tree)
            link = tree.root.children[0].children[0].children[1]  # the receiving link
            assert "receiver" in str(link.label)
            tree.focus()
            tree.move_cursor(link)
            await pilot.press("enter")
            await app.workers.wait_for_complete()
            await pilot.pause()
            records = shown(app)
            assert records and all(r["fields"].get("handle") == 1 for r in records)
            transfers = [r for r in records if r["name"] == "transfer"]
            assert len(transfers) == truth("10-outcomes")["transfers_received"]
            assert app.query_one("#filter", Input).value  # the scope is a filter one can edit

    asyncio.run(run())


def test_a_frames_detail_and_bytes() -> None:
    async def run() -> None:
        async with opened("091-publish-consume.pcap") as pilot:
            app = pilot.app
            await filter_with(pilot, 'name == "basic.publish"')
            assert len(shown(app)) == truth("091-publish-consume")["publishes"]
            await pilot.click("#frames", offset=(5, 2))  # the mouse: the third row
            await pilot.pause()
            assert app.frames.cursor == 2
            detail = app.query_one("#detail", Tree)
            labels = []
            stack = [detail.root]
            while stack:
                node = stack.pop()
                labels.append(str(node.label))
                stack.extend(node.children)
            # the -V tree: the field, its value as read -V writes it, its type and bytes
            assert any(
                re.fullmatch(
                    r'routing-key: "amqpscope\.091-publish-consume\.q"  \[shortstr @\d+\+\d+\]',
                    label,
                )
                for label in labels
            )
            dump = str(app.query_one("#bytes", Static).render())
            assert dump.startswith("000000  01 00 01")  # a method frame on channel 1
            # a field with an offset (the -V tree's) is highlighted in the hex and the ASCII
            data = app.store.data[app.frames.selected()]
            app._dump(14, 4)
            text = app.bytes_pane.render()
            marked = [str(text)[span.start : span.end] for span in text.spans]
            assert marked[0::2] == [data[i : i + 1].hex() for i in range(14, 18)]
            assert marked[1::2] == [chr(b) if 0x20 <= b < 0x7F else "." for b in data[14:18]]

    asyncio.run(run())


def test_secrets_stay_hidden_in_the_tree_and_the_bytes() -> None:
    async def run(show: bool) -> tuple[str, list[str]]:
        app = make_app("091-publish-consume.pcap")
        app.show_secrets = show
        async with app.run_test(size=(160, 48)) as pilot:
            await loaded(pilot)
            app.jump(3)  # connection.start-ok: PLAIN with the password
            await pilot.pause()
            assert app.store.record(app.frames.selected())["name"] == "connection.start-ok"
            labels, stack = [], [app.detail.root]
            while stack:
                node = stack.pop()
                labels.append(str(node.label))
                stack.extend(node.children)
            return str(app.bytes_pane.render()), labels

    dump, labels = asyncio.run(run(False))
    ascii_column = "".join(line[58:74] for line in dump.splitlines())
    assert "PLAIN****" in ascii_column and "guest" not in ascii_column
    assert " 67 75 65 73 74" not in dump.replace("\n", " ")  # "guest" in hex, either half
    assert any(label.startswith("response: <redacted>") for label in labels)
    dump, labels = asyncio.run(run(True))  # --show-secrets
    assert "guest" in "".join(line[58:74] for line in dump.splitlines())


def labels_of(tree: Tree[Any]) -> list[str]:
    labels, stack = [], [tree.root]
    while stack:
        node = stack.pop()
        labels.append(str(node.label))
        stack.extend(node.children)
    return labels


def test_redact_bodies_drops_them_from_rows_tree_and_bytes() -> None:
    """`tui --redact-bodies` as `read --redact-bodies -V -x`: a body's size, never its bytes
    (the store keeps them for the tree's offsets; the panes blank them)."""

    async def run() -> None:
        path = str(CAPTURES / "091-publish-consume.pcap")
        loader = partial(load_file, path=path, redact_bodies=True)
        app = AmqpScope(loader, capture_path=path, redact_bodies=True)
        async with app.run_test(size=(160, 48)) as pilot:
            await loaded(pilot)
            await filter_with(pilot, 'name == "content-body"')
            await pilot.press("down")
            await pilot.pause()
            index = app.frames.selected()
            assert index is not None
            body = b"091-publish-consume message "
            assert body in app.store.data[index]
            row = row_text(app, 1)
            assert "body=<redacted, 29 bytes>" in row and "message" not in row
            labels = labels_of(app.detail)
            assert any(label.startswith('payload: "<redacted, 29 bytes>"') for label in labels)
            dump = str(app.bytes_pane.render())
            ascii_column = "".join(line[58:74] for line in dump.splitlines())
            assert "*" * 16 in ascii_column and "message" not in ascii_column
            assert body.hex(" ")[:14] not in dump.replace("\n", " ")
            assert "consume message" not in app.store.records[index].decode()

    asyncio.run(run())


def test_a_field_under_the_cursor_is_highlighted_in_the_bytes() -> None:
    async def run() -> None:
        async with opened("091-publish-consume.pcap") as pilot:
            app = pilot.app
            app.jump(12)  # basic.publish
            await pilot.pause()
            data = app.store.data[app.frames.selected()]
            stack = [app.detail.root]
            while stack:
                node = stack.pop()
                if str(node.label).startswith("routing-key:"):
                    break
                stack.extend(node.children)
            field = node.data
            app.detail.focus()
            app.detail.move_cursor(node)
            await pilot.pause()
            text = app.bytes_pane.render()
            marked = [str(text)[span.start : span.end] for span in text.spans]
            start, length = field["offset"], field["length"]
            assert marked[0::2] == [data[i : i + 1].hex() for i in range(start, start + length)]
            assert data[start + 1 : start + length] == b"amqpscope.091-publish-consume.q"

    asyncio.run(run())


def test_follow_a_0_9_1_delivery() -> None:
    async def run() -> None:
        async with opened("091-publish-consume.pcap") as pilot:
            app = pilot.app
            await filter_with(pilot, 'name == "basic.deliver" and fields.delivery-tag == 4')
            await pilot.press("f")
            await app.workers.wait_for_complete()
            await pilot.pause()
            names = [(r["name"], r["fields"].get("delivery-tag")) for r in shown(app)]
            assert names == [
                ("basic.deliver", 4),
                ("content-header", None),
                ("content-body", None),
                ("basic.ack", 4),
            ]
            # the ack's tag is the one delivered: the client acked each delivery once
            assert (
                truth("091-publish-consume")["acks"] == truth("091-publish-consume")["deliveries"]
            )

    asyncio.run(run())


def test_follow_a_1_0_delivery_from_its_disposition() -> None:
    async def run() -> None:
        async with opened("10-outcomes.pcap") as pilot:
            app = pilot.app
            await filter_with(pilot, 'name == "transfer" and dir == "s2c"')
            await pilot.press("down", "down")  # delivery-id 2: released, then redelivered
            await pilot.press("f")
            await app.workers.wait_for_complete()
            await pilot.pause()
            records = shown(app)
            transfers = [r for r in records if r["name"] == "transfer"]
            dispositions = [r for r in records if r["name"] == "disposition"]
            # and its redelivery, id 6: the same message (f links redeliveries)
            assert [t["fields"]["delivery-id"] for t in transfers] == [2, 6]
            assert len(dispositions) == 2 and all(
                d["fields"]["first"] <= key <= d["fields"].get("last", d["fields"]["first"])
                for d, key in zip(dispositions, (2, 6), strict=True)
            )
            assert all(d["dir"] == "c2s" for d in dispositions)

    asyncio.run(run())


def test_follow_links_a_redelivery_and_its_earlier_delivery() -> None:
    """f on a redelivery follows the earlier delivery of the same message too (and f on the
    earlier one its redelivery): the deliveries the clients logged as one message."""

    async def followed(app: AmqpScope, pilot: Pilot[Any], number: int) -> list[dict[str, Any]]:
        assert app.jump(number)
        await pilot.press("f")
        await app.workers.wait_for_complete()
        await pilot.pause()
        return shown(app)

    async def run() -> None:
        async with opened("091-ack-nack-reject.pcap") as pilot:
            app = pilot.app
            log = truth("091-ack-nack-reject")["delivery_log"]
            (again,) = [d for d in log if d["redelivered"]]
            (first,) = [d for d in log if d["body"] == again["body"] and not d["redelivered"]]
            tags = {first["delivery_tag"], again["delivery_tag"]}
            delivers = [r for r in shown(app) if r["name"] == "basic.deliver"]
            by_tag = {r["fields"]["delivery-tag"]: r["frame"] for r in delivers}
            pair = (by_tag[again["delivery_tag"]], by_tag[first["delivery_tag"]])
            for start, other in (pair, pair[::-1]):
                records = await followed(app, pilot, start)
                names = [(r["name"], r["fields"].get("delivery-tag")) for r in records]
                assert names == [
                    ("basic.deliver", first["delivery_tag"]),
                    ("content-header", None),
                    ("content-body", None),
                    ("basic.nack", first["delivery_tag"]),  # requeued: hence delivered again
                    ("basic.deliver", again["delivery_tag"]),
                    ("content-header", None),
                    ("content-body", None),
                    ("basic.ack", again["delivery_tag"]),
                ]
                assert {r["fields"].get("delivery-tag") for r in records} - {None} == tags
                assert app.frames.view.label.endswith(f"delivered at frame {other}")
        async with opened("10-outcomes.pcap") as pilot:
            app = pilot.app
            log = truth("10-outcomes")["deliveries"]
            (again,) = [d for d in log if d["redelivery"]]
            received = [r for r in shown(app) if r["name"] == "transfer" and r["dir"] == "s2c"]
            assert len(received) == len(log)
            firsts: dict[str, int] = {}  # each message-id's first delivery
            for r in received:
                firsts.setdefault(r["message"]["properties"]["message-id"], r["frame"])
            records = await followed(app, pilot, received[-1]["frame"])
            transfers = [r for r in records if r["name"] == "transfer"]
            assert [r["message"]["properties"]["message-id"] for r in transfers] == [
                again["id"],
                again["id"],
            ]
            assert transfers[0]["frame"] == firsts[again["id"]] < received[-1]["frame"]
            outcomes = [r["fields"]["state"]["type"] for r in records if r["name"] == "disposition"]
            assert outcomes == ["released", "accepted"]  # why it came back, then its end

    asyncio.run(run())


def test_diagnoses_jump_to_their_evidence() -> None:
    async def run() -> None:
        async with opened("091-channel-errors.pcap") as pilot:
            app = pilot.app
            await filter_with(pilot, 'name == "connection.open"')
            await pilot.press("d")
            await pilot.pause()
            shown_first = app.screen.query_one(OptionList).get_option_at_index(0).prompt
            text = shown_first.plain if isinstance(shown_first, Text) else str(shown_first)
            title, explanation = text.split("\n", 1)  # the title on a line of its own
            assert "\\x0a" not in text and title.startswith("error") and explanation
            await pilot.press("down", "enter")  # the second diagnosis
            await pilot.pause()
            index = app.frames.selected()
            assert index is not None
            record = app.store.record(index)
            found = json.loads(
                subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "amqpscope.cli",
                        "diagnose",
                        "--json",
                        str(CAPTURES / "091-channel-errors.pcap"),
                    ],
                    capture_output=True,
                    text=True,
                    check=True,
                    cwd=ROOT,
                ).stdout
            )["diagnoses"]
            assert len(found) >= 2
            assert record["frame"] == found[1]["evidence"][0]
            assert app.frames.view.everything  # the filter hid it: every frame shown again

    asyncio.run(run())


async def write_from(pilot: Pilot[Any], path: Path) -> None:
    """`w`, the file's name typed, Enter: the shown frames' cut written to `path`."""
    app = pilot.app
    await pilot.press("w")
    await pilot.pause()
    app.screen.query_one("#answer", Input).value = str(path)
    await pilot.press("enter")
    await app.workers.wait_for_complete()
    await pilot.pause()


def test_write_a_cut_that_amqpscope_and_tshark_read_back(tmp_path: Path) -> None:
    cut = tmp_path / "cut.pcap"

    async def run() -> list[dict[str, Any]]:
        async with opened("091-rpc.pcap") as pilot:
            app = pilot.app
            await filter_with(pilot, "conn == 2")
            await write_from(pilot, cut)
            return shown(app)

    kept = asyncio.run(run())
    original = read_json(CAPTURES / "091-rpc.pcap")
    assert {r["conn"] for r in original} == {1, 2}
    back = read_json(cut)
    # the AMQP frames come back as they were (the password masked, the user kept), and how
    # TCP ended: the cut keeps the connection's FIN packets, which carry no frame

    def amqp(records: list[dict[str, Any]]) -> list[tuple[str, Any]]:
        return [(r["name"], r["fields"]) for r in records if r["kind"] != "transport"]

    assert len(amqp(kept)) > 20
    assert amqp(back) == amqp(kept)
    ends = [(r["name"], r["fields"]) for r in kept if r["kind"] == "transport"]
    assert ends and [(r["name"], r["fields"]) for r in back if r["kind"] == "transport"] == ends
    tshark_or_skip()
    theirs = [name for _, name in tshark_frames(str(cut))]
    packets = {r["packet"] for r in kept}
    whole = [
        name for number, name in tshark_frames(str(CAPTURES / "091-rpc.pcap")) if number in packets
    ]
    methods = [r for r in kept if r["kind"] not in ("transport", "protocol-header")]
    assert theirs == whole and len(theirs) == len(methods)


def frames_of(path: Path) -> list[Any]:
    from amqpscope.capture.files import open_capture
    from amqpscope.dissect import Dissector

    with open_capture(str(path)) as capture:
        return list(Dissector(carriers=True).run(capture))


def read_w(tmp_path: Path, capture: str, expression: str, out: str, *more: str) -> bytes:
    """What `read CAPTURE -Y EXPRESSION -w OUT [MORE]` writes."""
    target = tmp_path / out
    command = [sys.executable, "-m", "amqpscope.cli", "read", str(CAPTURES / capture), *more]
    subprocess.run(
        [*command, "-Y", expression, "-w", str(target)],
        capture_output=True,
        check=True,
        cwd=ROOT,
    )
    return target.read_bytes()


def test_w_writes_what_read_w_writes_a_frame_of_two_packets_whole(tmp_path: Path) -> None:
    """Frame 51 of 091-large-body (a 4,088-byte body) came in two packets: the TUI's cut holds
    both, and the connection's handshake and opening, so amqpscope and tshark read the frame
    back whole; byte for byte what `read -Y 'frame == 51' -w` writes. A pcapng cut carries its
    TLS secrets as read -w's does."""
    cut = tmp_path / "tui.pcap"
    tls_cut = tmp_path / "tui.pcapng"

    async def run() -> None:
        async with opened("091-large-body.pcap") as pilot:
            await filter_with(pilot, "frame == 51")
            await write_from(pilot, cut)
            await write_from(pilot, tmp_path / "no" / "such.pcap")  # said in one line
            said = [str(n.message) for n in pilot.app._notifications]
            nowhere = tmp_path / "no" / "such.pcap"
            assert f"not written to {nowhere}: No such file or directory" in said
            assert not (tmp_path / "no").exists()
        async with opened("091-tls13-embedded.pcapng") as pilot:
            await filter_with(pilot, 'name == "basic.publish"')
            await write_from(pilot, tls_cut)

    asyncio.run(run())
    assert cut.read_bytes() == read_w(tmp_path, "091-large-body.pcap", "frame == 51", "r.pcap")
    (original,) = [f for f in frames_of(CAPTURES / "091-large-body.pcap") if f.number == 51]
    assert len({packet for packet, *_ in original.carriers}) == 2
    back = frames_of(cut)
    (again,) = [f for f in back if f.data == original.data]  # the whole frame, once
    assert again.name == "content-body" and len(again.data) == 4096
    expression = 'name == "basic.publish"'
    assert tls_cut.read_bytes() == read_w(
        tmp_path, "091-tls13-embedded.pcapng", expression, "r.pcapng"
    )
    publishes = read_json(CAPTURES / "091-tls13-embedded.pcapng", "-Y", expression)
    assert publishes and len(read_json(tls_cut, "-Y", expression)) == len(publishes)
    tshark_or_skip()  # tshark reassembles it too: 44 to 50 end in the first of the two
    # packets, 51 (begun there) to 58 in the second
    theirs = [number for number, name in tshark_frames(str(cut)) if name == "content-body"]
    assert len(theirs) == len([f for f in back if f.name == "content-body"]) == 15
    assert theirs.count(theirs[-1]) == 8


def test_hostile_names_cannot_drive_the_terminal() -> None:
    async def run() -> None:
        async with opened("091-hostile-names.pcap") as pilot:
            app = pilot.app
            expect = truth("091-hostile-names")
            texts = [row_text(app, row) for row in range(min(app.frames.rows, 40))]
            assert any("pwned" in text for text in texts)  # the names are shown ...
            assert not any(UNSAFE.search(text) for text in texts)  # ... escaped
            assert any("\\x1b]0;pwned" in text for text in texts)
            tree = app.query_one("#scopes", Tree)
            stack = [tree.root]
            while stack:
                node = stack.pop()
                assert not UNSAFE.search(str(node.label))
                stack.extend(node.children)
            for row in range(app.frames.rows):  # each frame's detail and bytes, drawn
                app.frames.go(row)
                await pilot.pause()
                detail = app.query_one("#detail", Tree)
                stack = [detail.root]
                while stack:
                    node = stack.pop()
                    assert not UNSAFE.search(str(node.label))
                    stack.extend(node.children)
                assert not UNSAFE.search(
                    str(app.query_one("#bytes", Static).render()).replace("\n", "")
                )
            svg = app.export_screenshot()
            assert "\x1b" not in svg and "\u202e" not in svg
            assert expect["queue"] not in svg

    asyncio.run(run())


#: the SVG's window buttons, drawn whatever the app draws
WINDOW_BUTTONS = {"#ff5f57", "#febc2e", "#28c840"}


def colours(svg: str) -> set[str]:
    """The fill colours of a screenshot that are not greys (nor the window's buttons)."""
    out = set()
    for fill in set(re.findall(r'fill="#([0-9a-f]{6})"', svg)) - {b[1:] for b in WINDOW_BUTTONS}:
        r, g, b = (int(fill[i : i + 2], 16) for i in (0, 2, 4))
        if max(r, g, b) - min(r, g, b) > 16:
            out.add(fill)
    return out


@pytest.mark.parametrize("no_color", [False, True])
def test_no_color_draws_in_greys(monkeypatch: pytest.MonkeyPatch, no_color: bool) -> None:
    if no_color:
        monkeypatch.setenv("NO_COLOR", "1")
    else:
        monkeypatch.delenv("NO_COLOR", raising=False)

    async def run() -> None:
        async with opened("10-outcomes.pcap", (80, 24)) as pilot:
            app = pilot.app
            assert app.no_color is no_color
            svg = app.export_screenshot()
            assert "protocol-header" in svg.replace("&#160;", " ")
            assert bool(colours(svg)) is not no_color

    asyncio.run(run())


def test_follow_a_1_0_delivery_of_many_transfers() -> None:
    """A 300,000-byte message at max-frame 4096: many transfers of one delivery (the broker
    repeats the id on each), and the same id 0 was also used by the delivery sent the other way
    and by each continuation: one group, not one a frame."""

    async def run() -> None:
        async with opened("10-large-message.pcap") as pilot:
            app = pilot.app
            expect = truth("10-large-message")
            await filter_with(pilot, 'name == "transfer" and dir == "s2c"')
            await pilot.press("f")
            await app.workers.wait_for_complete()
            await pilot.pause()
            records = shown(app)
            transfers = [r for r in records if r["name"] == "transfer"]
            (disposition,) = [r for r in records if r["name"] == "disposition"]
            assert len(records) == len(transfers) + 1
            assert {(r["dir"], r["fields"]["handle"]) for r in transfers} == {("s2c", 1)}
            assert transfers[0]["fields"]["delivery-id"] == 0
            assert {r["fields"].get("delivery-id", 0) for r in transfers} == {0}
            numbers = [r["frame"] for r in transfers]
            assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))
            assert not transfers[-1]["fields"].get("more")
            # the frames carry the whole body the receiving client hashed, and little else
            carried = sum(r["size"] for r in transfers)
            assert expect["body_size"] < carried < expect["body_size"] + 100 * len(transfers)
            assert disposition["dir"] == "c2s" and disposition["fields"]["first"] == 0
            assert disposition["frame"] > transfers[-1]["frame"]

    asyncio.run(run())


def test_a_frame_trace_log_opens_like_a_capture() -> None:
    """A Proton trace recorded beside a capture: its frames in the list (the client's transfers
    as the client counted them), the detail from the record (a log keeps no bytes), and no
    cut to write."""

    async def run() -> None:
        async with opened("log-proton-broker.log") as pilot:
            app = pilot.app
            expect = truth("log-proton-broker")
            assert len(app.store) == len(read_json(CAPTURES / "log-proton-broker.log"))
            await filter_with(pilot, 'name == "transfer" and dir == "c2s"')
            assert len(shown(app)) == expect["transfers_sent"]
            assert all(r["source"]["file"].endswith("log-proton-broker.log") for r in shown(app))
            app.capture_path = None  # as `amqpscope tui` opens a log
            app.frames.focus()
            await pilot.press("w")
            await pilot.pause()
            assert "nothing to cut from" in " ".join(str(n.message) for n in app._notifications)

    asyncio.run(run())


def test_a_logs_bad_lines_are_in_the_d_list(tmp_path: Path) -> None:
    """A log with a line that does not parse: `d` lists it, with its line number, after the
    diagnoses (as `read` says it on stderr); the diagnoses carry none of it, so the TUI
    showed a damaged log as a whole one."""
    lines = (CAPTURES / "log-proton-broker.log").read_text().splitlines(keepends=True)
    lines[15] = "[0x56080b9f7cb0]: AMQP:FRAME:0 -> @flow(19) [incoming-window=0xzz]\n"
    log = tmp_path / "damaged.log"
    log.write_text("".join(lines))

    async def run() -> None:
        app = AmqpScope(partial(load_file, path=str(log)), title="damaged.log")
        async with app.run_test(size=(160, 48)) as pilot:
            await loaded(pilot)
            assert app.loading.diagnoses is not None  # read whole: diagnose's list
            await pilot.press("d")
            await pilot.pause()
            options = app.screen.query_one(OptionList)
            texts = []
            for i in range(options.option_count):
                prompt = options.get_option_at_index(i).prompt
                texts.append(prompt.plain if isinstance(prompt, Text) else str(prompt))
            (bad,) = [t for t in texts if "log.bad-line" in t]
            assert f"{log}:16:" in bad and "no frame" in bad

    asyncio.run(run())


def test_the_pieces_of_a_rotated_capture_open_as_one(tmp_path: Path) -> None:
    """editcap's pieces of a recorded capture: the rows are the whole capture's frames, and `w`
    cuts from the pieces what `read -w` cuts from the whole."""
    import shutil

    editcap = shutil.which("editcap")
    if editcap is None:
        pytest.skip("editcap (Debian's wireshark-common, which make test installs)")
    source = CAPTURES / "091-rpc.pcap"
    subprocess.run(
        [editcap, "-F", "pcap", "-c", "20", str(source), str(tmp_path / "piece")], check=True
    )
    pieces = tuple(str(p) for p in sorted(tmp_path.glob("piece*"), reverse=True))
    assert len(pieces) > 2
    cut = tmp_path / "cut.pcap"

    async def run() -> list[dict[str, Any]]:
        app = AmqpScope(partial(load_file, path=pieces), capture_path=pieces, title="pieces")
        async with app.run_test(size=(160, 48)) as pilot:
            await loaded(pilot)
            assert shown(app) == read_json(source)
            await filter_with(pilot, "conn == 2")
            await write_from(pilot, cut)
            return shown(app)

    kept = asyncio.run(run())
    assert {r["conn"] for r in kept} == {2}
    whole = tmp_path / "whole.pcap"
    command = [sys.executable, "-m", "amqpscope.cli", "read", str(source)]
    subprocess.run(
        [*command, "-Y", "conn == 2", "-w", str(whole)],
        check=True,
        capture_output=True,
        cwd=ROOT,
    )
    assert cut.read_bytes() == whole.read_bytes()
