"""The terminal timeline of `amqpscope read`: a sequence diagram, one line per frame.

    c1  127.0.0.1:41022 → 127.0.0.1:5672  AMQP 0-9-1            (legend, when c1 first speaks)
        12   0.004512 c1 → ch1  basic.publish key=orders
        13   0.004730 c1 ← ch1  basic.deliver tag=5 key=orders redelivered

Connections get short labels with a legend line when they first appear, so lines stay short. The
arrow points the way the frame went (client on the left). Errors are red, outcomes coloured by
kind, findings follow the frame that raised them. How the TCP connection ended (a `transport`
record) closes a connection's lines: `c1 ←  TCP RST (server, after the client's FIN)`. Lines are
cut to the terminal's width, never wrapped; when stdout is not a terminal nothing is cut and
nothing is coloured. Several inputs merged (`amqpscope.merge`): under a frame more than one
saw, a line per input with its time there, and a log's line that showed the frame
(`render.evidence`); a frame of a single input has no `seen`, and nothing more is printed.

Each line is laid out once, as pieces of text with their styles, and goes to one of two sinks.
On a terminal, in colour or cut to a width, rich prints it (`Text`). Piped with nothing to
colour or cut (`out`), rich would write the pieces joined, as they are: the line is written so,
without rich, which builds, renders and flushes every line (a piped `read` of a long capture
took five times the CPU through rich). rich changes such a line only where it holds a tab
(expanded to its tab stop), a line break or BEL, BS, VT, FF or CR (dropped); `safe` escapes all
of them in captured text, and a line that holds one anyway goes to rich.
`tests/test_timeline_plain.py` holds the two sinks to the same bytes, rich the oracle.

On a terminal the same holds for colour: rich wraps each run of a line that its styles split
(at every start and end of a styled piece or an outcome word) in SGR codes, and cuts a line
wider than the terminal to one cell short of it plus "…". For lines of one-cell characters with
nothing rich would change, in the colours rich has for the standard named colours, the ANSI sink
(`_ansi`) writes those bytes itself, in blocks; any other line, or console, is rich's to print.
`tests/test_timeline_ansi.py` holds it to rich's bytes.

Most lines (no error or finding, not a TCP end or a protocol header) are not laid out as pieces
at all: `Timeline._layout` makes their few strings (whose captured text `highlights` and
`body_text` made safe), and each sink writes them as the one string it would have made of the
pieces; the same tests hold them to rich.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Final

from amqpscope.codec.frames import TRANSPORT, Frame, error_in
from amqpscope.render.lines import ARROWS, highlights, safe, transport_name
from amqpscope.track.tracker import Tracker

if TYPE_CHECKING:  # rich is imported when a line needs it: a piped timeline seldom does
    from rich.console import Console
    from rich.text import Text

    from amqpscope.render.evidence import LineBook

#: colours, by what a word means
STYLES = {
    "accepted": "green",
    "rejected": "red",
    "released": "yellow",
    "modified": "magenta",
    "received": "cyan",
    "declared": "green",
    "error": "bold red",
    "warning": "yellow",
    "info": "dim",
    "header": "cyan",
    "heartbeat": "dim",
    "name": "bold",
    "content": "",
    "legend": "bold cyan",
    "time": "dim",
    "transport": "cyan",
}
TIME_STYLE: Final = STYLES["time"]
#: how a legend names a connection whose first record is a layer under AMQP
LAYER_NAMES = {"tls": "TLS", "websocket": "WebSocket"}
#: shortest run of like frames that --collapse folds into one line
COLLAPSE_MIN = 3
CONTENT_KINDS = ("content-header", "content-body")
BODY_PREVIEW = 40  # characters of a message body shown without --body
BODY_FULL = 4000  # characters shown with --body (the JSON keeps all of it)
#: a piece of a line: its text and its style ("" for none)
Piece = tuple[str, str]
#: the style of a frame's detail: rich colours the outcome words in it (`OUTCOMES`), and all of
#: it red when the frame is an error
DETAIL, ERROR_DETAIL = "detail", "error detail"
OUTCOMES = ("accepted", "rejected", "released", "modified", "received", "declared")
#: what rich changes in a line printed uncut (`soft_wrap`): tabs, line breaks, the controls it
#: drops (rich.control.STRIP_CONTROL_CODES)
RICH_CHANGES: Final = re.compile("[\t\n\x07\x08\x0b\x0c\r]")
#: a line the ANSI sink may write: printable ASCII, and the one-cell characters lines hold
#: (arrows, the ellipsis, the times sign of --collapse, the return sign of bodies)
ONE_CELL: Final = re.compile("[ -~→←…×⏎·]*")  # noqa: RUF001
#: SGR codes of the colours STYLES names (rich writes bold 1, dim 2, then the colour)
SGR_COLOURS: Final = {"red": "31", "green": "32", "yellow": "33", "magenta": "35", "cyan": "36"}
#: a style as the ANSI sink combines them: (bold, dim, colour code or "")
AnsiStyle = tuple[bool, bool, str]
#: the console's colour systems whose codes for the standard named colours are SGR 30-37
ANSI_SYSTEMS: Final = ("standard", "256", "truecolor")
#: lines the sinks join into one write when they need not flush each (a piped `read` of a
#: file): one write per line through the text layer was a tenth of the compiled timeline; on a
#: terminal the ANSI sink asks its width once a block (rich's `Console.width`, about 50 µs)
PENDING_LINES: Final = 1024
#: a name the fast sinks write as it is: printable ASCII
ONE_CELL_ASCII: Final = re.compile("[ -~]*")
#: spaces that right-align a frame number of N digits in seven columns
_PADS: Final = tuple(" " * (7 - n) for n in range(7))
#: spaces that right-align a time of N characters in ten columns
_TIME_PADS: Final = tuple(" " * (10 - n) for n in range(10))
#: a time under a second, of N digits of microseconds, less those digits ("  0.000")
_ZEROS: Final = tuple("  0." + "0" * (6 - n) for n in range(7))


def body_text(frame: Frame, limit: int) -> str | None:
    """A message body as one line: its text, or its hex, cut to `limit` characters."""
    message = frame.message
    if not message:
        return None
    body = message.get("body")
    if not isinstance(body, dict):
        return None
    # the first of "text", "value", "hex" it holds (not a loop: compiled, a tuple's iterator)
    key = "text" if "text" in body else "value" if "value" in body else "hex"
    if key in body:
        value = body[key]
        prefix = "0x" if key == "hex" else ""
        # printable and short (most bodies): nothing below changes it
        if type(value) is str and len(value) <= limit and value.isprintable():
            return prefix + value if prefix else value
        text = value if isinstance(value, str) else repr(value)
        text = safe(text.replace("\n", "⏎").replace("\r", ""))  # nothing drives the terminal
        if len(text) > limit:
            text = text[: limit - 1] + "…"
        return f"{prefix}{text}"
    if body.get("redacted"):  # --redact-bodies
        return f"<redacted, {safe(str(body.get('size')))} bytes>"
    return None


#: characters of a request's or response's words shown however short the body's preview is
REQUEST_TEXT: Final = 100


def request_text(message: dict, limit: int) -> str:
    """A management or CBS request or response (`request-reply`) in a few words: the node and
    operation (and a put-token's audience), or the node and the status; "" for other messages."""
    pattern = message.get("request-reply")
    if not isinstance(pattern, dict):
        return ""
    if pattern.get("kind") == "request":
        text = f"{pattern.get('node')} {pattern.get('operation')}"
        name = pattern.get("name")
        if name is not None:
            text += f" {name}"
    else:
        text = f"{pattern.get('node')} status {pattern.get('status-code')}"
        description = pattern.get("status-description")
        if description is not None:
            text += f" {description}"
    text = safe(text.replace("\n", "⏎").replace("\r", ""))
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return "  " + text


def message_tail(frame: Frame, limit: int) -> str:
    """What a frame's line says of the message it completes: a request or response, then its
    body (`body_text`); "" when it completes none."""
    message = frame.message
    if not message:
        return ""
    preview = body_text(frame, limit)
    body = "" if preview is None else "  body=" + preview
    if "request-reply" not in message:
        return body
    return request_text(message, max(limit, REQUEST_TEXT)) + body


@dataclass
class _Run:
    """Like frames in a row (same connection, direction, channel and name), held for --collapse."""

    frames: list[Frame] = field(default_factory=list)
    content: int = 0  # content frames (0-9-1 headers and bodies) folded in with their methods

    def key(self) -> tuple | None:
        if not self.frames:
            return None
        f = self.frames[0]
        return (f.conn, f.direction, f.channel, f.name)


class Timeline:
    """Prints frames as they come (streaming: live capture uses it too).

    `console` is rich's console, or what makes it when first needed. With `out`, the caller
    says rich would write to `out` without colour or cutting anything (`fit` false): lines are
    written there as they are, and only a line rich would change goes to the console, which must
    write to `out` too. `flush` flushes `out` after each line, as rich does (live capture, a
    capture read from a pipe: a line shows when its frame arrives); otherwise `out` writes in
    its own blocks and `finish` flushes it."""

    def __init__(
        self,
        console: Console | Callable[[], Console],
        collapse: bool = False,
        body: bool = False,
        legend: bool = True,
        fit: bool | None = None,
        out: IO[str] | None = None,
        flush: bool = False,
        show_secrets: bool = False,
    ) -> None:
        self._console: Console | None = None
        self._make_console: Callable[[], Console] | None = None
        if callable(console):  # a Console is not
            self._make_console = console
        else:
            self._console = console
        # cut lines to the console's width: on a terminal, or when a width was asked for
        if fit is None:
            fit = False if out is not None else self.console.is_terminal
        self.fit = fit
        self.out = None if fit else out  # a line to cut is rich's to print
        self._write = self.out.write if self.out is not None else None
        self._flush_each = flush
        self._pending: list[str] = []  # lines not yet written, unless `flush`
        # the ANSI sink, decided when the console is first needed: None undecided, False rich
        self._ansi_ok: bool | None = None
        self._colours = True  # SGR codes written at all (not --color never)
        self._no_colour = False  # NO_COLOR: attributes without colours, as rich does
        self._styles: dict[str, AnsiStyle] = {}
        self._sgrs: dict[str, str] = {}  # a style's SGR code, as `_sgr` writes it
        self._width = 0  # the console's width, asked at the start of each block of lines
        self.collapse = collapse
        self.body = body
        self.legend = legend
        self.show_secrets = show_secrets  # a merged log's lines show their credentials
        self._book: LineBook | None = None  # a merged log's lines, read back when shown
        self.first_ts: float | None = None
        self.seen: set[int] = set()
        self.run = _Run()
        # what `_layout` keeps: the last time's text, each middle, whether a name is plain
        self._last_x = float("nan")
        self._last_when = ""
        self._middles: dict[int, str] = {}
        self._names: dict[str, bool] = {}
        self._kind_sgrs: dict[str, str] = {}  # a name's SGR code, by the frame's kind
        self._styled_names: dict[str, tuple[str, str]] = {}  # name: (kind, styled name)
        self._time_sgr = ""
        self._styled_of = ""  # the time `_styled_when` is of
        self._styled_when = ""
        self._body_sgr = ""

    @property
    def console(self) -> Console:
        if self._console is None:
            assert self._make_console is not None
            self._console = self._make_console()
        return self._console

    # -- the stream of frames ------------------------------------------------------------------
    def frame(self, frame: Frame) -> None:
        if self.first_ts is None:
            self.first_ts = frame.ts
        if self.collapse:
            key = (frame.conn, frame.direction, frame.channel, frame.name)
            run_key = self.run.key()
            if (
                frame.kind in CONTENT_KINDS
                and run_key is not None
                and run_key[:3] == key[:3]
                and not frame.findings
            ):
                self.run.content += 1  # a message's header and body travel with its method
                self.run.frames.append(frame)
                return
            if key != run_key:
                self._flush()
            error = error_in(frame.findings, frame.fields, frame.name)
            if error or frame.kind in ("protocol-header", TRANSPORT):
                self._flush()
                self._print(frame)
                return
            self.run.frames.append(frame)
            return
        self._print(frame)

    def finish(self) -> None:
        self._flush()
        self.write_pending()
        if self._book is not None:
            self._book.close()
        if self.out is not None:
            self.out.flush()

    def write_pending(self) -> None:
        """Hand the lines made so far to `out` or the console's file (before rich prints, at the
        end, before a progress bar draws, and when interrupted: every line made goes out)."""
        if self._pending:
            text = "".join(self._pending)
            self._pending.clear()
            if self._write is not None:
                self._write(text)
            else:
                self.console.file.write(text)
                self.console.file.flush()

    # -- the lines, as pieces ------------------------------------------------------------------
    def _flush(self) -> None:
        run, self.run = self.run, _Run()
        frames = run.frames
        units = len(frames) - run.content
        if units < COLLAPSE_MIN:
            for frame in frames:
                self._print(frame)
            return
        first, last = frames[0], frames[-1]
        line = self._prefix(first, f"{first.number}-{last.number}")
        line.append((f"{first.name} ×{units}", STYLES["name"]))  # noqa: RUF001
        if run.content:
            line.append((f" (+{run.content} content frames)", ""))
        span = f"  {first.ts - self._t0():.6f}..{last.ts - self._t0():.6f}s"
        detail = highlights(first)
        last = next(f for f in reversed(frames) if f.kind not in CONTENT_KINDS)
        if detail:
            line.append((f" first: {detail}", ""))
            tail = highlights(last)
            if tail and tail != detail:
                line.append((f"  last: {tail}", ""))
        line.append((span, STYLES["time"]))
        self._emit(line)

    def _print(self, frame: Frame) -> None:
        self._line(frame)
        if frame.seen is not None:  # several inputs merged: who saw it, the log's lines
            self._evidence(frame)

    def _line(self, frame: Frame) -> None:
        if self.legend and frame.conn not in self.seen:
            self.seen.add(frame.conn)
            self._emit([(legend_text(frame), STYLES["legend"])])
        if self._write is not None:
            if self._plain_line(frame):
                return
        elif self.fit and self._ansi_ready() and self._ansi_line(frame):
            return
        self._emit(frame_pieces(frame, self._t0(), self.body))

    def _evidence(self, frame: Frame) -> None:
        """The lines under a merged frame (`render.evidence`): each input that saw it and
        when, and the log line that showed it (whole up to `LOG_FULL` with --body)."""
        from amqpscope.render.evidence import LOG_FULL, LOG_PREVIEW, LineBook, seen_pieces

        if self._book is None:
            self._book = LineBook()
        limit = LOG_FULL if self.body else LOG_PREVIEW
        for pieces in seen_pieces(frame, self._t0(), self._book, self.show_secrets, limit):
            self._emit(pieces)

    def _t0(self) -> float:
        return self.first_ts or 0.0

    def _prefix(self, frame: Frame, number: str) -> list[Piece]:
        return prefix_pieces(frame, number, self._t0())

    # -- most lines, laid out as strings -------------------------------------------------------
    def _layout(self, frame: Frame) -> tuple[str, str, str, str, str, str, str]:
        """A frame's line as (number's padding, number, time, connection and channel, name,
        detail, body preview), the very text `frame_pieces` lays out (a space after the
        number), for a line the fast sinks can write without checking its captured text: no
        error or finding, not a TCP end, a protocol header or an untimed log line, a name of
        printable ASCII. Its detail and preview are safe already (`highlights`, `body_text`):
        no control character. Otherwise the name is "" and the line is `frame_pieces`' to lay
        out.

        Strings, not pieces: one `frame_pieces` line made about ten objects (tuples, a list, the
        joined line) and a per-character scan of it; most of its parts repeat, so the time of the
        last frame and each (connection, arrow, channel)'s text are kept."""
        kind = frame.kind
        name = frame.name
        if (
            kind == TRANSPORT
            or kind == "protocol-header"
            or (frame.source is not None and (not frame.ts or "truncated" in frame.source))
            or error_in(frame.findings, frame.fields, name)
        ):
            return "", "", "", "", "", "", ""
        channel = frame.channel
        if channel is not None and not 0 <= channel < 65536:  # not a key of `_middles`
            return "", "", "", "", "", "", ""
        plain = self._names.get(name)
        if plain is None:
            plain = ONE_CELL_ASCII.fullmatch(name) is not None and bool(name)
            self._names[name] = plain
        if not plain:
            return "", "", "", "", "", "", ""
        x = frame.ts - (self.first_ts or 0.0)
        if x != self._last_x:  # frames of one packet share its time
            self._last_x = x
            self._last_when = seconds(x)
        digits = str(frame.number)
        pad = _PADS[len(digits)] if len(digits) < 7 else ""
        direction = frame.direction
        arrow = 0 if direction == "c2s" else 1 if direction == "s2c" else 2
        key = frame.conn * 1048576 + (0 if channel is None else channel + 1) * 4 + arrow
        middle = self._middles.get(key)
        if middle is None:
            middle = middle_text(frame.conn, ARROWS.get(direction, "-"), channel)
            if len(self._middles) >= MIDDLES_KEPT:
                self._middles.clear()
            self._middles[key] = middle
        tail = (
            message_tail(frame, BODY_FULL if self.body else BODY_PREVIEW) if frame.message else ""
        )
        return pad, digits, self._last_when, middle, name, highlights(frame), tail

    def _plain_line(self, frame: Frame) -> bool:
        """The plain sink's line of a frame `_layout` lays out (False: any other frame)."""
        pad, digits, when, middle, name, detail, tail = self._layout(frame)
        if not name:
            return False
        if detail:
            line = f"{pad}{digits} {when}{middle}{name} {detail}{tail}\n"
        else:
            line = f"{pad}{digits} {when}{middle}{name}{tail}\n"
        if self._flush_each:
            assert self._write is not None and self.out is not None
            self._write(line)
            self.out.flush()
            return True
        pending = self._pending
        pending.append(line)
        if len(pending) >= PENDING_LINES:
            self.write_pending()
        return True

    def _ansi_line(self, frame: Frame) -> bool:
        """The ANSI sink's line of a frame `_layout` lays out, uncut and with no detail two
        styles would overlap in (False: any other line, for `_ansi`): what `_ansi` writes of
        its pieces, made as one string."""
        pad, digits, when, middle, name, detail, tail = self._layout(frame)
        if not name:
            return False
        number = f"{pad}{digits} "
        if not self._pending:  # as `_emit`: the terminal's size, once a block
            self._width = self.console.width
        size = len(number) + len(when) + len(middle) + len(name) + len(tail)
        if detail:
            size += 1 + len(detail)
        if size > self._width:
            return False  # cut: `_spans`
        # one-cell text only; safe text that is ASCII is printable ASCII
        if detail and not detail.isascii() and ONE_CELL.fullmatch(detail) is None:
            return False
        if tail and not tail.isascii() and ONE_CELL.fullmatch(tail) is None:
            return False
        if not self._colours:
            line = (
                f"{number}{when}{middle}{name} {detail}{tail}\n"
                if detail
                else f"{number}{when}{middle}{name}{tail}\n"
            )
        else:
            if detail:
                styled = self._outcomes(detail)
                if not styled:
                    return False
                detail = " " + styled
            if tail:
                tail = self._wrap(tail, self._body_sgr)
            if when is not self._styled_of:  # `_layout` keeps the last time's text
                self._styled_of = when
                self._styled_when = self._wrap(when, self._time_sgr)
            kind = frame.kind
            known = self._styled_names.get(name)
            if known is not None and known[0] == kind:
                styled = known[1]
            else:
                kind_sgr = self._kind_sgrs.get(kind)
                if kind_sgr is None:
                    kind_sgr = self._sgr(name_piece(frame, False)[1])
                    self._kind_sgrs[kind] = kind_sgr
                styled = self._wrap(name, kind_sgr)
                self._styled_names[name] = (kind, styled)
            line = f"{number}{self._styled_when}{middle}{styled}{detail}{tail}\n"
        self._pending.append(line)
        if self._flush_each or len(self._pending) >= PENDING_LINES:
            self.write_pending()
        return True

    @staticmethod
    def _wrap(text: str, code: str) -> str:
        return f"{code}{text}\x1b[0m" if code else text

    def _outcomes(self, detail: str) -> str:
        """A detail as rich styles it: each outcome word in it in its colour ("" when two
        overlap: `_spans` decides which colour wins where)."""
        for word in OUTCOMES:
            if word in detail:
                return self._coloured(detail)
        return detail

    def _coloured(self, detail: str) -> str:
        """`_outcomes` of a detail that holds an outcome word."""
        found: list[tuple[int, int, str]] = []
        for word in OUTCOMES:
            at = detail.find(word)
            while at >= 0:
                found.append((at, at + len(word), word))
                at = detail.find(word, at + len(word))
        found.sort()
        out: list[str] = []
        done = 0
        for start, end, word in found:
            if start < done:
                return ""
            out.append(detail[done:start])
            out.append(self._wrap(word, self._sgr(STYLES[word])))
            done = end
        out.append(detail[done:])
        return "".join(out)

    # -- the sinks -----------------------------------------------------------------------------
    def _emit(self, pieces: list[Piece]) -> None:
        if self._write is not None:
            line = "".join([text for text, _ in pieces])
            # rich would write it as it is (what it changes, str.isprintable refuses too)
            if line.isprintable() or RICH_CHANGES.search(line) is None:
                if self._flush_each:
                    self._write(line + "\n")
                    self.out.flush()  # type: ignore[union-attr]
                    return
                pending = self._pending
                pending.append(line)
                pending.append("\n")  # not `line + "\n"`: a copy of the line less
                if len(pending) >= 2 * PENDING_LINES:
                    self.write_pending()
                return
            self.write_pending()  # rich writes to `out` too: what came before goes first
        elif self.fit and self._ansi_ready():
            if not self._pending:  # rich asks the terminal's size for every line (25 µs):
                self._width = self.console.width  # here once a block, so a resize shows
            written = self._ansi(pieces, self._width)
            if written is not None:
                self._pending.append(written)
                if self._flush_each or len(self._pending) >= PENDING_LINES:
                    self.write_pending()
                return
            self.write_pending()
        line_text = rich_text(pieces)
        if self.fit:
            line_text.truncate(self.console.width, overflow="ellipsis")
            self.console.print(line_text, no_wrap=True, crop=True)
        else:
            self.console.print(line_text, soft_wrap=True)

    def _ansi_ready(self) -> bool:
        """Whether the ANSI sink may write for this console (decided once)."""
        if self._ansi_ok is None:
            console = self.console
            system = console.color_system
            self._ansi_ok = (system is None or system in ANSI_SYSTEMS) and not (
                console.legacy_windows or console.record
            )
            self._colours = system is not None
            self._no_colour = bool(console.no_color)
            self._time_sgr = self._sgr(TIME_STYLE)
            self._body_sgr = self._sgr("" if self.body else "dim")
        return self._ansi_ok

    def _style(self, name: str) -> AnsiStyle:
        """A STYLES value (or outcome's) as (bold, dim, colour code)."""
        style = self._styles.get(name)
        if style is None:
            words = name.split()
            colour = ""
            for word in words:
                colour = SGR_COLOURS.get(word, colour)
            style = ("bold" in words, "dim" in words, "" if self._no_colour else colour)
            self._styles[name] = style
        return style

    def _sgr(self, name: str) -> str:
        """A STYLES value's SGR code as rich opens a run in it ("" for none)."""
        code = self._sgrs.get(name)
        if code is None:
            bold, dim, colour = self._style(name)
            codes = [c for c, on in (("1", bold), ("2", dim), (colour, bool(colour))) if on]
            code = f"\x1b[{';'.join(codes)}m" if codes else ""
            self._sgrs[name] = code
        return code

    def _ansi(self, pieces: list[Piece], width: int) -> str | None:
        """The line as rich prints it on this terminal (styled, cut to `width` with "…"), or
        None when rich must (a character rich changes, or not one cell wide).

        Most lines are uncut pieces that do not overlap (no outcome word in a detail, no
        error's detail): each styled piece is then a run of its own, written in its style's
        code without computing spans (`_spans`)."""
        plain = "".join([text for text, _ in pieces])
        if ONE_CELL.fullmatch(plain) is None:
            return None
        if len(plain) > width:
            return self._spans(pieces, plain, width)
        if not self._colours:
            return plain + "\n"
        out: list[str] = []
        for text, style in pieces:
            if not text:
                continue
            if style == DETAIL:
                for word in OUTCOMES:
                    if word in text:
                        return self._spans(pieces, plain, width)
                out.append(text)
            elif style == ERROR_DETAIL:
                return self._spans(pieces, plain, width)
            elif style:
                code = self._sgr(style)
                out.append(code + text + "\x1b[0m" if code else text)
            else:
                out.append(text)
        out.append("\n")
        return "".join(out)

    def _spans(self, pieces: list[Piece], plain: str, width: int) -> str:
        """`_ansi` of any line: rich's spans, cut to `width`, each run in the styles over it."""
        # spans as rich_text makes them, in its order: later ones win a colour
        spans: list[tuple[int, int, AnsiStyle]] = []
        at = 0
        for text, style in pieces:
            size = len(text)
            if style in (DETAIL, ERROR_DETAIL):
                for word in OUTCOMES:
                    found = text.find(word)
                    while found >= 0:
                        spans.append(
                            (at + found, at + found + len(word), self._style(STYLES[word]))
                        )
                        found = text.find(word, found + len(word))
                if style == ERROR_DETAIL and size:
                    spans.append((at, at + size, self._style(STYLES["error"])))
            elif style and size:
                spans.append((at, at + size, self._style(style)))
            at += size
        if len(plain) > width:  # rich's truncate: one cell short, an ellipsis, spans trimmed
            plain = plain[: width - 1] + "…"
            spans = [(a, min(b, width), st) for a, b, st in spans if a < width]
        if not spans or not self._colours:
            return plain + "\n"
        cuts = {0, len(plain)}
        for start, end, _ in spans:
            cuts.add(start)
            cuts.add(end)
        edges = sorted(cuts)
        out: list[str] = []
        for i in range(len(edges) - 1):
            start, end = edges[i], edges[i + 1]
            bold = dim = False
            colour = ""
            for a, b, st in spans:  # in the order added: a later colour wins
                if a <= start and end <= b:
                    bold = bold or st[0]
                    dim = dim or st[1]
                    colour = st[2] or colour
            codes = [c for c, on in (("1", bold), ("2", dim), (colour, bool(colour))) if on]
            text = plain[start:end]
            out.append(f"\x1b[{';'.join(codes)}m{text}\x1b[0m" if codes else text)
        out.append("\n")
        return "".join(out)


def timeline_all(
    frames: Iterable[Frame],
    tracker: Tracker,
    timeline: Timeline,
    wrote: Callable[[], None] | None = None,
) -> None:
    """`read` with nothing to select or count: each frame goes to the tracker (whose findings
    ride it), then to the timeline (`wrote` first: the progress bar's). The per-frame loop
    lives here, not in the CLI, so that the compiled build runs it as C (as `lines.ndjson_all`
    does for `read --json`); interrupted, the lines made so far are written."""
    try:
        for frame in frames:
            tracker.feed(frame)
            if wrote is not None:
                wrote()
            timeline.frame(frame)
    finally:
        timeline.write_pending()


def rich_text(pieces: list[Piece]) -> Text:
    """A line's pieces as rich `Text`, styled: the words of a detail coloured by outcome."""
    from rich.text import Text

    line = Text()
    for text, style in pieces:
        if style in (DETAIL, ERROR_DETAIL):
            detail = Text(text)
            for word in OUTCOMES:
                detail.highlight_words([word], style=STYLES[word])
            if style == ERROR_DETAIL:
                detail.stylize(STYLES["error"])
            line.append_text(detail)
        else:
            line.append(text, style=style)
    return line


def legend_text(frame: Frame) -> str:
    """The legend line that names a connection when it first speaks: its ends and protocol."""
    client, server = (frame.dst, frame.src) if frame.direction == "s2c" else (frame.src, frame.dst)
    if frame.kind == "layer":  # wrapped: the AMQP version shows on its frames
        speaks = LAYER_NAMES.get(frame.name, frame.name)
    else:
        speaks = f"AMQP {frame.version}"
    return f"c{frame.conn}  {client} → {server}  {speaks}"


#: the piece of a line after its time (" c1 → ch1   "), by (connection, arrow, channel): the same
#: for most frames of a connection, made once; forgotten whole when it holds `MIDDLES_KEPT`
_MIDDLES: Final[dict[tuple[int, str, int | None], str]] = {}
MIDDLES_KEPT: Final = 4096


def seconds(x: float) -> str:
    """`"%10.6f" % x`, made from integers where that is sure to say the same (most times: float
    formatting was a third of a line's prefix). `x` in microseconds, rounded, is the number
    printed unless `x * 1e6` lies within a thousandth of a rounding tie: its float error, under
    1e12 (x under 1e6 seconds), is below 3e-4."""
    if x > 0.0 and x < 1e6:
        micro = x * 1e6 + 0.5
        n = int(micro)
        off = micro - n
        if 0.001 < off < 0.999:
            digits = str(n)  # one int written, cut at the point
            size = len(digits)
            if size <= 6:
                return _ZEROS[size] + digits
            if size >= 9:  # ten characters or more: no padding
                return digits[:-6] + "." + digits[-6:]
            return f"{_TIME_PADS[size + 1]}{digits[:-6]}.{digits[-6:]}"
    return "%10.6f" % x  # noqa: UP031 (compiled, % is a C call; format() is not)


def prefix_pieces(frame: Frame, number: str, t0: float) -> list[Piece]:
    """The start of a frame's line: its number, time from `t0`, connection, arrow, channel."""
    arrow = ARROWS.get(frame.direction, "-")
    if frame.kind == TRANSPORT and not frame.fields.get("by"):
        arrow = "-"  # an idle end: nobody sent anything
    source = frame.source
    if source is not None and not frame.ts:  # a log line without a time: its number
        when = ("L" + str(source.get("line", ""))).rjust(10)
    else:
        when = seconds(frame.ts - t0)
    key = (frame.conn, arrow, frame.channel)
    middle = _MIDDLES.get(key)
    if middle is None:
        middle = middle_text(frame.conn, arrow, frame.channel)
        if len(_MIDDLES) >= MIDDLES_KEPT:
            _MIDDLES.clear()
        _MIDDLES[key] = middle
    return [(number.rjust(7) + " ", ""), (when, TIME_STYLE), (middle, "")]


def middle_text(conn: int, arrow: str, channel: int | None) -> str:
    """The piece of a line after its time: " c1 → ch1   "."""
    named = "" if channel is None else "ch" + str(channel)
    # str methods and %: compiled, f-strings with a format spec go through format()
    return " c" + str(conn) + " " + arrow + " " + named.ljust(5) + " "


def name_piece(frame: Frame, error: bool) -> Piece:
    """The frame's name, styled by what kind of frame it is."""
    if frame.kind == TRANSPORT:  # the TCP end, as tcpdump would name it
        return transport_name(frame), STYLES["transport"]
    if error and not frame.findings:
        style = STYLES["error"]
    elif frame.kind in ("protocol-header", "layer"):
        style = STYLES["header"]
    elif frame.kind == "heartbeat":
        style = STYLES["heartbeat"]
    elif frame.kind in ("content-header", "content-body"):
        style = STYLES["content"]
    else:
        style = STYLES["name"]
    return frame.name, style


#: after the line of a frame whose log text was cut short (`source.truncated`)
TRUNCATED_TAG: Final = "  [truncated]"


def frame_pieces(frame: Frame, t0: float, body: bool = False) -> list[Piece]:
    """One frame's line of the timeline, as pieces: what `read` prints and the TUI's frame list
    draws (times count from `t0`, the first frame's)."""
    error = error_in(frame.findings, frame.fields, frame.name)
    line = prefix_pieces(frame, str(frame.number), t0)
    line.append(name_piece(frame, error))
    if frame.kind == "protocol-header":
        detail = str(frame.fields.get("protocol", ""))
    else:
        detail = highlights(frame)
    if detail:
        line.append((" ", ""))
        line.append((detail, ERROR_DETAIL if error else DETAIL))
    tail = message_tail(frame, BODY_FULL if body else BODY_PREVIEW)
    if tail:
        line.append((tail, "dim" if not body else ""))
    if frame.source is not None and frame.source.get("truncated"):
        # what a cut log line showed of the frame, as tshark marks a partial dissection
        line.append((TRUNCATED_TAG, STYLES["warning"]))
    for found in frame.findings:
        note = f"  [{found.code}: {safe(found.message)}]"
        line.append((note, STYLES.get(found.severity, "")))
    return line
